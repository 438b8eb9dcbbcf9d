//! READ LONG and WRITE LONG (10)/(16) (SBC-4) through the target: the long block is the
//! logical block (no ECC), WR_UNCOR makes READ fail until the block is written again.

mod common;

use common::{edited_target, ready, run};
use device::{Completion, LuConfig, Nexus, Target};
use scsi::{Asc, SenseKey};

const BLOCKS: u64 = 8192;

fn target(edit: impl FnOnce(&mut LuConfig)) -> Target {
    edited_target(BLOCKS, edit)
}

fn long10(opcode: u8, flags: u8, lba: u32, length: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = opcode;
    c[1] = flags;
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&length.to_be_bytes());
    c
}

fn long16(opcode: u8, flags: u8, lba: u64, length: u16) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = opcode;
    c[1] = flags | 0x11;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[12..14].copy_from_slice(&length.to_be_bytes());
    c
}

const READ_LONG_10: u8 = 0x3E;
const WRITE_LONG_10: u8 = 0x3F;
const READ_LONG_16: u8 = 0x9E;
const WRITE_LONG_16: u8 = 0x9F;
const WR_UNCOR: u8 = 0x40;

fn read10(t: &Target, n: &Nexus, lba: u32, blocks: u16) -> Completion {
    run(t, n, &common::read10(lba, blocks), &[]).0
}

#[test]
fn long_blocks_are_logical_blocks() {
    for bs in [512u32, 4096] {
        let t = target(|c| c.block_size = bs);
        let n = ready(&t, 1);
        let len = bs as u16;
        let block: Vec<u8> = (0..bs).map(|i| i as u8).collect();
        let (c, _) = run(&t, &n, &long10(WRITE_LONG_10, 0, 5, len), &block);
        assert_eq!(c, Completion::GOOD);
        let (c, data) = run(&t, &n, &long10(READ_LONG_10, 0, 5, len), &[]);
        assert_eq!((c, data), (Completion::GOOD, block.clone()));
        let (c, data) = run(&t, &n, &long16(READ_LONG_16, 0, 5, len), &[]);
        assert_eq!((c, data), (Completion::GOOD, block.clone()));
        let (c, _) = run(&t, &n, &long16(WRITE_LONG_16, 0, 6, len), &block);
        assert_eq!(c, Completion::GOOD);
        let (c, data) = run(&t, &n, &long16(READ_LONG_16, 0x01, 6, len), &[]);
        assert_eq!(
            (c, data),
            (Completion::GOOD, block),
            "CORRCT changes nothing"
        );
        // A length other than the block's: ILI, INFORMATION = requested - block length,
        // nothing transferred.
        for (cdb, field) in [
            (long10(READ_LONG_10, 0, 5, len + 8).to_vec(), 7),
            (long16(READ_LONG_16, 0, 5, len - 8).to_vec(), 12),
            (long10(WRITE_LONG_10, 0, 5, len - 8).to_vec(), 7),
        ] {
            let data = vec![0u8; usize::from(len) + 8];
            let (c, back) = run(
                &t,
                &n,
                &cdb,
                &data[..usize::from(u16::from_be_bytes([cdb[field], cdb[field + 1]]))],
            );
            let s = c.sense.expect("sense");
            assert_eq!(
                (s.key, s.asc),
                (SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB)
            );
            assert!(s.ili);
            let requested = i64::from(u16::from_be_bytes([cdb[field], cdb[field + 1]]));
            assert_eq!(s.information, Some((requested - i64::from(bs)) as u64));
            assert_eq!(s.field.unwrap().byte, field as u16);
            assert!(back.is_empty());
        }
        let (c, _) = run(&t, &n, &long10(READ_LONG_10, 0, BLOCKS as u32, len), &[]);
        assert_eq!(c.sense.unwrap().asc, Asc::LBA_OUT_OF_RANGE);
        // PBLOCK and COR_DIS are not supported.
        let (c, _) = run(&t, &n, &long10(READ_LONG_10, 0x04, 5, len), &[]);
        assert_eq!(c.sense.unwrap().field.unwrap().bit, Some(2));
        let (c, _) = run(&t, &n, &long10(WRITE_LONG_10, 0x80, 5, len), &[]);
        assert_eq!(c.sense.unwrap().field.unwrap().bit, Some(7));
    }
}

#[test]
fn wr_uncor_makes_reads_fail_until_the_block_is_written() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    let (c, _) = run(&t, &n, &long10(WRITE_LONG_10, WR_UNCOR, 20, 0), &[]);
    assert_eq!(c, Completion::GOOD);
    let (c, _) = run(&t, &n, &long16(WRITE_LONG_16, WR_UNCOR, 22, 0), &[]);
    assert_eq!(c, Completion::GOOD);
    for (lba, blocks, bad) in [(20, 1, 20), (10, 20, 20), (21, 4, 22)] {
        let s = read10(&t, &n, lba, blocks).sense.expect("MEDIUM ERROR");
        assert_eq!(
            (s.key, s.asc),
            (SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR)
        );
        assert_eq!(s.information, Some(bad));
    }
    assert_eq!(
        read10(&t, &n, 21, 1),
        Completion::GOOD,
        "only the marked blocks"
    );
    // VERIFY (BYTCHK 0) checks the medium too.
    let verify = [0x2F, 0, 0, 0, 0, 20, 0, 0, 1, 0];
    let s = run(&t, &n, &verify, &[]).0.sense.expect("MEDIUM ERROR");
    assert_eq!(s.key, SenseKey::MediumError);
    // READ LONG still reads what is there.
    let (c, data) = run(&t, &n, &long10(READ_LONG_10, 0, 20, 512), &[]);
    assert_eq!((c, data.len()), (Completion::GOOD, 512));
    // A WRITE of the block makes it readable again; the other mark stays.
    let mut write = [0u8; 10];
    write[0] = 0x2A;
    write[2..6].copy_from_slice(&20u32.to_be_bytes());
    write[8] = 1;
    assert_eq!(run(&t, &n, &write, &[1; 512]).0, Completion::GOOD);
    assert_eq!(read10(&t, &n, 20, 1), Completion::GOOD);
    assert_eq!(read10(&t, &n, 22, 1).sense.unwrap().information, Some(22));
    // So does WRITE SAME with UNMAP.
    let mut ws = [0u8; 16];
    ws[0] = 0x93;
    ws[1] = 0x08;
    ws[2..10].copy_from_slice(&22u64.to_be_bytes());
    ws[13] = 1;
    assert_eq!(run(&t, &n, &ws, &[0; 512]).0, Completion::GOOD);
    assert_eq!(read10(&t, &n, 0, 64), Completion::GOOD);
    // Write-protected: nothing is marked.
    let ro = target(|c| c.read_only = true);
    let n = ready(&ro, 1);
    let s = run(&ro, &n, &long10(WRITE_LONG_10, WR_UNCOR, 1, 0), &[])
        .0
        .sense
        .unwrap();
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::DataProtect, Asc::WRITE_PROTECTED)
    );
}

#[test]
fn a_sanitize_clears_the_uncorrectable_marks() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    let (c, _) = run(&t, &n, &long10(WRITE_LONG_10, WR_UNCOR, 20, 0), &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(
        read10(&t, &n, 20, 1).sense.map(|s| s.key),
        Some(SenseKey::MediumError)
    );
    // SANITIZE BLOCK ERASE, IMMED = 0: every block is rewritten.
    let (c, _) = run(&t, &n, &[0x48, 0x02, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(read10(&t, &n, 20, 1), Completion::GOOD);
}
