//! Copy LUN 0 of a target to its LUN 1 three ways over one iSCSI session and time each: the
//! host copy (READ(16) then WRITE(16), 1 MiB at a time), one EXTENDED COPY (LID1), and
//! POPULATE TOKEN with WRITE USING TOKEN. Every copy is read back and compared.
//!
//! `stint serve --listen 127.0.0.1:3260 --lun ram:2GiB --lun ram:2GiB`, then
//! `cargo run --release -p iscsi --example copy_offload -- 127.0.0.1:3260 iqn.2026-11.dev.stint:target0 1024`
//! (the last argument is the size to copy in MiB, a multiple of 32).

use iscsi::initiator::{Initiator, LoginOptions};
use scsi::command::{Command, Inquiry, ReadWrite};
use scsi::encode::Cdb;
use scsi::form;
use scsi::table::CommandInfo;
use scsi::third_party_copy::{in_action, ExtendedCopy, ReceiveCopyResults};
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const BLOCK: u64 = 512;
const CHUNK: u64 = 1 << 20;
/// Blocks per EXTENDED COPY segment and per token range: 32 MiB.
const SEGMENT_BLOCKS: u64 = 65536;

fn rw(lba: u64, blocks: u32) -> ReadWrite {
    ReadWrite {
        lba,
        transfer_length: blocks,
        ..ReadWrite::default()
    }
}

fn read16(lba: u64, blocks: u32) -> Result<Cdb> {
    Ok(Command::Read(rw(lba, blocks)).emit(form::READ_16)?)
}

fn write16(lba: u64, blocks: u32) -> Result<Cdb> {
    Ok(Command::Write(rw(lba, blocks)).emit(form::WRITE_16)?)
}

/// An 83h command in `form` with a list identifier (the token commands') and a parameter
/// list of `len` bytes.
fn out_cdb(form: &CommandInfo, list: u32, len: usize) -> Result<Cdb> {
    let x = ExtendedCopy {
        service_action: form.service_action.unwrap_or_default() as u8,
        list_identifier: list,
        parameter_list_length: u32::try_from(len)?,
    };
    Ok(Command::ExtendedCopy(x).emit(form)?)
}

async fn command(s: &mut Initiator, lun: u64, cdb: &[u8], out: &[u8], len: u32) -> Result<Vec<u8>> {
    let r = s.scsi_command(lun, cdb, out, len).await?;
    if r.status != 0 {
        let sense = r.parsed_sense().map(|s| s.to_string()).unwrap_or_default();
        return Err(format!("{cdb:02x?}: status {:02x}, {sense}", r.status).into());
    }
    Ok(r.data_in)
}

/// The NAA designator (first descriptor of VPD 83h).
async fn naa(s: &mut Initiator, lun: u64) -> Result<Vec<u8>> {
    let inquiry = Command::Inquiry(Inquiry {
        evpd: true,
        page_code: 0x83,
        allocation_length: 255,
    })
    .emit(form::INQUIRY)?;
    let page = command(s, lun, &inquiry, &[], 255).await?;
    Ok(page[8..24].to_vec())
}

/// FNV-1a of the first `bytes` of a LUN, read 1 MiB at a time.
async fn digest(s: &mut Initiator, lun: u64, bytes: u64) -> Result<u64> {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for at in (0..bytes).step_by(CHUNK as usize) {
        let data = command(
            s,
            lun,
            &read16(at / BLOCK, (CHUNK / BLOCK) as u32)?,
            &[],
            CHUNK as u32,
        )
        .await?;
        for b in data {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
    Ok(h)
}

async fn clear(s: &mut Initiator, bytes: u64) -> Result<()> {
    let zeros = vec![0u8; CHUNK as usize];
    for at in (0..bytes).step_by(CHUNK as usize) {
        command(
            s,
            1,
            &write16(at / BLOCK, (CHUNK / BLOCK) as u32)?,
            &zeros,
            0,
        )
        .await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, portal, target, mib] = &args[..] else {
        return Err("usage: copy_offload PORTAL TARGET_NAME MIB".into());
    };
    let bytes: u64 = mib.parse::<u64>()? << 20;
    if bytes == 0 || !bytes.is_multiple_of(SEGMENT_BLOCKS * BLOCK) {
        return Err("MIB must be a positive multiple of 32".into());
    }
    let opts = LoginOptions::new("iqn.2026-11.dev.stint:copy-offload", Some(target));
    let mut s = Initiator::connect(portal.parse()?, &opts).await?;
    for lun in [0, 1] {
        // The power-on unit attention.
        let tur = Command::TestUnitReady.emit(form::TEST_UNIT_READY)?;
        let _ = s.scsi_command(lun, &tur, &[], 0).await?;
    }
    let mut fill = vec![0u8; CHUNK as usize];
    for at in (0..bytes).step_by(CHUNK as usize) {
        fill.iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (at as usize + i * 7) as u8);
        command(
            &mut s,
            0,
            &write16(at / BLOCK, (CHUNK / BLOCK) as u32)?,
            &fill,
            0,
        )
        .await?;
    }
    let want = digest(&mut s, 0, bytes).await?;
    let (a, b) = (naa(&mut s, 0).await?, naa(&mut s, 1).await?);
    let report = |how: &str, secs: f64| {
        println!(
            "{how:>30}: {:.3} s, {:.0} MiB/s",
            secs,
            (bytes >> 20) as f64 / secs
        );
    };

    clear(&mut s, bytes).await?;
    let t = Instant::now();
    for at in (0..bytes).step_by(CHUNK as usize) {
        let blocks = (CHUNK / BLOCK) as u32;
        let data = command(&mut s, 0, &read16(at / BLOCK, blocks)?, &[], CHUNK as u32).await?;
        command(&mut s, 1, &write16(at / BLOCK, blocks)?, &data, 0).await?;
    }
    report("host READ + WRITE", t.elapsed().as_secs_f64());
    assert_eq!(digest(&mut s, 1, bytes).await?, want);

    clear(&mut s, bytes).await?;
    let segments = bytes / (SEGMENT_BLOCKS * BLOCK);
    let t = Instant::now();
    // Segments of up to 65,535 blocks; several EXTENDED COPY commands of at most 64 each.
    let per_segment = 32768u64;
    let mut lba = 0;
    while lba < bytes / BLOCK {
        let mut p = vec![0u8; 16];
        p[1] = 0x18; // LIST ID USAGE 11b: nothing held
        p[3] = 64;
        let mut cscds = Vec::new();
        for id in [&a, &b] {
            let mut d = [0u8; 32];
            d[0] = 0xE4;
            d[4] = 1;
            d[5] = 3;
            d[7] = 16;
            d[8..24].copy_from_slice(id);
            d[30] = 0x02; // DISK BLOCK LENGTH 512
            cscds.extend_from_slice(&d);
        }
        p.extend_from_slice(&cscds);
        let mut n = 0u32;
        while lba < bytes / BLOCK && n < 64 {
            let mut d = [0u8; 28];
            d[0] = 0x02;
            d[3] = 0x18;
            d[7] = 1;
            d[10..12].copy_from_slice(&(per_segment as u16).to_be_bytes());
            d[12..20].copy_from_slice(&lba.to_be_bytes());
            d[20..28].copy_from_slice(&lba.to_be_bytes());
            p.extend_from_slice(&d);
            lba += per_segment;
            n += 1;
        }
        p[8..12].copy_from_slice(&(n * 28).to_be_bytes());
        let xcopy = out_cdb(form::EXTENDED_COPY_LID1, 0, p.len())?;
        command(&mut s, 0, &xcopy, &p, 0).await?;
    }
    report("EXTENDED COPY", t.elapsed().as_secs_f64());
    assert_eq!(digest(&mut s, 1, bytes).await?, want);

    clear(&mut s, bytes).await?;
    let ranges: Vec<u8> = (0..segments)
        .flat_map(|i| {
            let mut r = [0u8; 16];
            r[0..8].copy_from_slice(&(i * SEGMENT_BLOCKS).to_be_bytes());
            r[8..12].copy_from_slice(&(SEGMENT_BLOCKS as u32).to_be_bytes());
            r
        })
        .collect();
    let t = Instant::now();
    let mut pt = vec![0u8; 16];
    pt[14..16].copy_from_slice(&(ranges.len() as u16).to_be_bytes());
    pt.extend_from_slice(&ranges);
    let len = (pt.len() - 2) as u16;
    pt[0..2].copy_from_slice(&len.to_be_bytes());
    let populate = out_cdb(form::POPULATE_TOKEN, 1, pt.len())?;
    command(&mut s, 0, &populate, &pt, 0).await?;
    let rrti = Command::ReceiveCopyResults(ReceiveCopyResults {
        service_action: in_action::RECEIVE_ROD_TOKEN_INFORMATION,
        list_identifier: 1,
        allocation_length: 1024,
    })
    .emit(form::RECEIVE_ROD_TOKEN_INFORMATION)?;
    let info = command(&mut s, 0, &rrti, &[], 1024).await?;
    let mut wut = vec![0u8; 536];
    wut[2] = 0x02; // DEL_TKN
    wut[16..528].copy_from_slice(&info[38..550]);
    wut[534..536].copy_from_slice(&(ranges.len() as u16).to_be_bytes());
    wut.extend_from_slice(&ranges);
    let len = (wut.len() - 2) as u16;
    wut[0..2].copy_from_slice(&len.to_be_bytes());
    let write_using_token = out_cdb(form::WRITE_USING_TOKEN, 2, wut.len())?;
    command(&mut s, 1, &write_using_token, &wut, 0).await?;
    report("POPULATE + WRITE USING TOKEN", t.elapsed().as_secs_f64());
    assert_eq!(digest(&mut s, 1, bytes).await?, want);
    s.logout().await?;
    Ok(())
}
