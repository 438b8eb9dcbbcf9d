//! Every data-plane operation through `store::run`, on a RAM store and a file store: what it
//! does, its edges (the end of the store, zero lengths, short buffers) and a failing store.

mod common;

use common::{pattern, scratch, stores, Failing, MIB};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use store::{run, Done, Failure, InlinePlane, Op, RamStore, RangeLock, Source, Store};

fn exec(store: &dyn Store, op: Op, data_out: &[u8]) -> (Done, Vec<u8>) {
    let mut data_in = Vec::new();
    let done = run(store, &RangeLock::default(), &op, &mut data_in, data_out);
    (done, data_in)
}

fn ok(store: &dyn Store, op: Op, data_out: &[u8]) -> Vec<u8> {
    match exec(store, op, data_out) {
        (Done::Ok, data_in) => data_in,
        (other, _) => panic!("{other:?}"),
    }
}

fn read(store: &dyn Store, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0xEE; len];
    store.read_at(offset, &mut buf).unwrap();
    buf
}

fn write(offset: u64, len: u32) -> Op {
    Op::Write {
        offset,
        len,
        durable: false,
        atomic: false,
    }
}

fn invalid_write(done: &Done) -> bool {
    matches!(done, Done::Failed(Failure::Write { error, .. })
        if error.kind() == std::io::ErrorKind::InvalidInput)
}

fn invalid_read(done: &Done) -> bool {
    matches!(done, Done::Failed(Failure::Read { error, .. })
        if error.kind() == std::io::ErrorKind::InvalidInput)
}

#[test]
fn reads_and_writes_append_and_store_on_both_stores() {
    let dir = scratch();
    for (name, s) in stores(&dir, 4 * MIB) {
        let data = pattern(1, 8192);
        for (durable, atomic) in [(false, false), (true, false), (false, true), (true, true)] {
            let op = Op::Write {
                offset: 4096,
                len: 8192,
                durable,
                atomic,
            };
            ok(&*s, op, &data);
            assert_eq!(read(&*s, 4096, 8192), data, "{name}");
        }
        // Only the first `len` bytes of a longer Data-Out are written.
        ok(&*s, write(0, 512), &pattern(2, 1024));
        assert_eq!(read(&*s, 512, 512), vec![0; 512], "{name}");
        let mut data_in = vec![7, 7];
        let done = run(
            &*s,
            &RangeLock::default(),
            &Op::Read {
                offset: 4096,
                len: 8192,
            },
            &mut data_in,
            &[],
        );
        assert!(matches!(done, Done::Ok), "{name}");
        assert_eq!(&data_in[..2], [7, 7], "{name}: appended");
        assert_eq!(&data_in[2..], data, "{name}");
    }
}

#[test]
fn ranges_at_and_past_the_end_never_panic() {
    let dir = scratch();
    for (name, s) in stores(&dir, MIB) {
        let last = MIB - 512;
        ok(&*s, write(last, 512), &[9; 512]);
        assert_eq!(
            ok(
                &*s,
                Op::Read {
                    offset: last,
                    len: 512
                },
                &[]
            ),
            [9; 512]
        );
        assert!(
            invalid_write(&exec(&*s, write(last, 1024), &[0; 1024]).0),
            "{name}"
        );
        assert!(invalid_write(&exec(&*s, write(u64::MAX, 512), &[0; 512]).0));
        let (done, data_in) = exec(
            &*s,
            Op::Read {
                offset: last + 1,
                len: 512,
            },
            &[],
        );
        assert!(invalid_read(&done), "{name}");
        assert!(
            data_in.is_empty(),
            "{name}: a failed read leaves data-in as it was"
        );
        let past = [
            Op::OrWrite {
                offset: last,
                len: 1024,
                durable: false,
            },
            Op::CompareAndWrite {
                offset: u64::MAX - 1,
                len: 512,
                durable: false,
            },
            Op::WriteSame {
                offset: last,
                len: 1024,
                block: 512,
                zeros: true,
                durable: false,
            },
            Op::Unmap {
                ranges: vec![(0, 512), (MIB, 1)],
                durable: false,
            },
            Op::Fill {
                offset: MIB,
                len: 512,
                pattern: Arc::from(vec![1; 512]),
                durable: false,
            },
            Op::Copy {
                source: Source::This,
                destination: Source::This,
                from: 0,
                to: last,
                len: 1024,
                durable: false,
            },
        ];
        for op in past {
            assert!(invalid_write(&exec(&*s, op, &[0; 2048]).0), "{name}");
        }
        for op in [
            Op::Compare {
                offset: last,
                len: 1024,
                block: 0,
            },
            Op::Extents {
                offset: u64::MAX,
                len: 2,
                max: 4,
            },
            Op::Copy {
                source: Source::This,
                destination: Source::This,
                from: last,
                to: 0,
                len: 1024,
                durable: false,
            },
        ] {
            assert!(invalid_read(&exec(&*s, op, &[0; 1024]).0), "{name}");
        }
        assert_eq!(
            read(&*s, 0, 512),
            [0; 512],
            "{name}: the refused unmap freed nothing"
        );
    }
}

#[test]
fn zero_lengths_do_nothing_and_succeed() {
    let s = RamStore::new(MIB).unwrap();
    let end = MIB;
    let ops = [
        Op::Read {
            offset: end,
            len: 0,
        },
        write(end, 0),
        Op::OrWrite {
            offset: end,
            len: 0,
            durable: true,
        },
        Op::CompareAndWrite {
            offset: 0,
            len: 0,
            durable: false,
        },
        Op::Compare {
            offset: end,
            len: 0,
            block: 512,
        },
        Op::WriteSame {
            offset: end,
            len: 0,
            block: 0,
            zeros: false,
            durable: false,
        },
        Op::Unmap {
            ranges: vec![],
            durable: true,
        },
        Op::Unmap {
            ranges: vec![(end, 0)],
            durable: false,
        },
        Op::Fill {
            offset: end,
            len: 0,
            pattern: Arc::from(vec![]),
            durable: false,
        },
        Op::Copy {
            source: Source::This,
            destination: Source::This,
            from: end,
            to: 0,
            len: 0,
            durable: true,
        },
    ];
    for op in ops {
        assert!(ok(&s, op, &[]).is_empty());
    }
    match exec(
        &s,
        Op::Extents {
            offset: end,
            len: 0,
            max: 8,
        },
        &[],
    )
    .0
    {
        Done::Extents(runs) => assert!(runs.is_empty()),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.allocated(), 0);
}

#[test]
fn short_data_out_is_refused_before_the_medium_changes() {
    let s = RamStore::new(MIB).unwrap();
    assert!(invalid_write(&exec(&s, write(0, 1024), &[1; 1000]).0));
    let caw = Op::CompareAndWrite {
        offset: 0,
        len: 512,
        durable: false,
    };
    assert!(invalid_write(&exec(&s, caw, &[0; 1023]).0));
    let same = Op::WriteSame {
        offset: 0,
        len: 4096,
        block: 512,
        zeros: false,
        durable: false,
    };
    assert!(invalid_write(&exec(&s, same, &[1; 511]).0));
    let same = Op::WriteSame {
        offset: 0,
        len: 4096,
        block: 0,
        zeros: true,
        durable: false,
    };
    assert!(invalid_write(&exec(&s, same, &[]).0), "blocks of no bytes");
    let verify = Op::Compare {
        offset: 0,
        len: 1024,
        block: 0,
    };
    assert!(invalid_read(&exec(&s, verify, &[0; 512]).0));
    assert_eq!(s.allocated(), 0);
}

#[test]
fn or_write_and_compare_and_write() {
    let dir = scratch();
    for (name, s) in stores(&dir, MIB) {
        ok(&*s, write(512, 1024), &[0x0F; 1024]);
        ok(
            &*s,
            Op::OrWrite {
                offset: 512,
                len: 1024,
                durable: true,
            },
            &[0x30; 1024],
        );
        assert_eq!(read(&*s, 512, 1024), [0x3F; 1024], "{name}");
        // COMPARE AND WRITE: verify instance, then write instance.
        let caw = Op::CompareAndWrite {
            offset: 512,
            len: 1024,
            durable: false,
        };
        let mut out = vec![0x3F; 1024];
        out.extend(pattern(3, 1024));
        ok(&*s, caw.clone(), &out);
        assert_eq!(read(&*s, 512, 1024), pattern(3, 1024), "{name}");
        // Now the verify instance is stale at byte 0: nothing is written.
        let mut stale = pattern(3, 1024);
        stale[700] ^= 0xFF;
        stale.extend([0xAA; 1024]);
        match exec(&*s, caw, &stale).0 {
            Done::Miscompare(700) => {}
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(read(&*s, 512, 1024), pattern(3, 1024), "{name}");
    }
}

#[test]
fn compare_finds_the_first_differing_byte() {
    let s = RamStore::new(4 * MIB).unwrap();
    let data = pattern(4, 3 * MIB as usize);
    ok(&s, write(0, data.len() as u32), &data);
    let all = Op::Compare {
        offset: 0,
        len: data.len() as u32,
        block: 0,
    };
    ok(&s, all.clone(), &data);
    let mut other = data.clone();
    other[2 * MIB as usize + 5] ^= 1;
    assert!(matches!(exec(&s, all, &other).0, Done::Miscompare(n) if n == 2 * MIB + 5));
    // BYTCHK 11b: one block against every block of the range.
    ok(
        &s,
        Op::WriteSame {
            offset: MIB,
            len: MIB,
            block: 512,
            zeros: false,
            durable: false,
        },
        &data[..512],
    );
    ok(
        &s,
        Op::Compare {
            offset: MIB,
            len: MIB as u32,
            block: 512,
        },
        &data[..512],
    );
    s.write_at(MIB + 7 * 512 + 100, &[data[100] ^ 2]).unwrap();
    let one = Op::Compare {
        offset: MIB,
        len: MIB as u32,
        block: 512,
    };
    assert!(matches!(
        exec(&s, one, &data[..512]).0,
        Done::Miscompare(100)
    ));
}

#[test]
fn write_same_repeats_one_block_over_many_writes() {
    let dir = scratch();
    for (name, s) in stores(&dir, 4 * MIB) {
        let block = pattern(5, 4096);
        // 300 KiB: more than one 128 KiB write, not a multiple of it.
        let len = 300 << 10;
        let same = Op::WriteSame {
            offset: 8192,
            len,
            block: 4096,
            zeros: false,
            durable: true,
        };
        ok(&*s, same, &block);
        let back = read(&*s, 8192, len as usize);
        assert!(back.chunks(4096).all(|b| b == block), "{name}");
        assert_eq!(
            read(&*s, 8192 + len, 4096),
            [0; 4096],
            "{name}: nothing past it"
        );
        let zeros = Op::WriteSame {
            offset: 8192,
            len: 4096,
            block: 512,
            zeros: true,
            durable: false,
        };
        ok(&*s, zeros, &[]);
        assert_eq!(read(&*s, 8192, 4096), [0; 4096], "{name}");
    }
}

#[test]
fn unmap_and_zero_fill_deallocate_and_extents_tell() {
    let s = RamStore::new(8 * MIB).unwrap();
    ok(
        &s,
        Op::Fill {
            offset: 0,
            len: 4 * MIB,
            pattern: Arc::from(pattern(6, 4096)),
            durable: true,
        },
        &[],
    );
    assert_eq!(s.allocated(), 4 * MIB);
    assert!(read(&s, 3 * MIB, 8192)
        .chunks(4096)
        .all(|b| b == pattern(6, 4096)));
    let usage = |s: &RamStore| match exec(s, Op::Usage, &[]).0 {
        Done::Usage(u) => u,
        other => panic!("{other:?}"),
    };
    assert_eq!(usage(&s), Some(4 * MIB));
    // Chunk 1 freed whole; a piece of chunk 3 zeroed.
    ok(
        &s,
        Op::Unmap {
            ranges: vec![(MIB, MIB), (3 * MIB, 4096), (0, 0)],
            durable: true,
        },
        &[],
    );
    assert_eq!(read(&s, MIB, 4096), [0; 4096]);
    assert_eq!(read(&s, 3 * MIB, 4096), [0; 4096]);
    assert_eq!(usage(&s), Some(3 * MIB));
    // A zero pattern deallocates rather than writing zeros.
    ok(
        &s,
        Op::Fill {
            offset: 2 * MIB,
            len: MIB,
            pattern: Arc::from(vec![0; 512]),
            durable: false,
        },
        &[],
    );
    assert_eq!(usage(&s), Some(2 * MIB));
    let extents = |max| match exec(
        &s,
        Op::Extents {
            offset: 512,
            len: 8 * MIB - 512,
            max,
        },
        &[],
    )
    .0
    {
        Done::Extents(runs) => runs,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        extents(8),
        [
            (true, MIB - 512),
            (false, 2 * MIB),
            (true, MIB),
            (false, 4 * MIB)
        ]
    );
    assert_eq!(extents(2), [(true, MIB - 512), (false, 2 * MIB)]);
    // A store that cannot tell reports everything allocated.
    let failing = Failing::new(MIB);
    assert!(matches!(
        exec(&failing, Op::Extents { offset: 0, len: MIB, max: 3 }, &[]).0,
        Done::Extents(runs) if runs == [(true, MIB)]
    ));
}

#[test]
fn fill_writes_its_pattern_on_a_file() {
    let dir = scratch();
    let s = store::FileStore::open(&dir.path().join("fill.img"), Some(4 * MIB)).unwrap();
    let pattern = pattern(7, 1024);
    let fill = Op::Fill {
        offset: MIB,
        len: 3 * MIB,
        pattern: Arc::from(pattern.clone()),
        durable: true,
    };
    ok(&s, fill, &[]);
    assert!(read(&s, MIB, 3 * MIB as usize)
        .chunks(1024)
        .all(|b| b == pattern));
    ok(
        &s,
        Op::Fill {
            offset: MIB,
            len: 3 * MIB,
            pattern: Arc::from(vec![]),
            durable: true,
        },
        &[],
    );
    assert_eq!(read(&s, 2 * MIB, 4096), [0; 4096]);
    match exec(
        &s,
        Op::Extents {
            offset: 0,
            len: 4 * MIB,
            max: 4,
        },
        &[],
    )
    .0
    {
        Done::Extents(runs) => assert_eq!(runs, [(false, 4 * MIB)]),
        other => panic!("{other:?}"),
    }
    ok(&s, Op::Flush, &[]);
}

#[test]
fn copies_within_a_store_in_both_directions_and_from_another() {
    let dir = scratch();
    for (name, s) in stores(&dir, 8 * MIB) {
        let data = pattern(8, 3 * MIB as usize);
        ok(&*s, write(0, data.len() as u32), &data);
        // Overlapping, destination after the source: copied from the end.
        let up = Op::Copy {
            source: Source::This,
            destination: Source::This,
            from: 0,
            to: MIB / 2,
            len: 3 * MIB,
            durable: true,
        };
        ok(&*s, up, &[]);
        assert_eq!(read(&*s, MIB / 2, data.len()), data, "{name}");
        // Overlapping, destination before the source: copied from the start.
        let down = Op::Copy {
            source: Source::This,
            destination: Source::This,
            from: MIB / 2,
            to: 512,
            len: 3 * MIB,
            durable: false,
        };
        ok(&*s, down, &[]);
        assert_eq!(read(&*s, 512, data.len()), data, "{name}");
        // From another logical unit's plane.
        let other = RamStore::new(2 * MIB).unwrap();
        other.write_at(4096, &pattern(9, MIB as usize)).unwrap();
        let plane = Arc::new(InlinePlane::new(Arc::new(other)));
        let from_other = Op::Copy {
            source: Source::Other(plane),
            destination: Source::This,
            from: 4096,
            to: 5 * MIB,
            len: MIB,
            durable: false,
        };
        ok(&*s, from_other.clone(), &[]);
        assert_eq!(
            read(&*s, 5 * MIB, MIB as usize),
            pattern(9, MIB as usize),
            "{name}"
        );
        let Op::Copy { source, .. } = from_other else {
            unreachable!()
        };
        let past = Op::Copy {
            source,
            destination: Source::This,
            from: 2 * MIB - 512,
            to: 0,
            len: 1024,
            durable: false,
        };
        assert!(
            invalid_read(&exec(&*s, past, &[]).0),
            "{name}: past the source's end"
        );
    }
}

#[test]
fn a_failing_store_fails_the_step_that_failed() {
    let s = Failing::new(4 * MIB);
    ok(&s, write(0, 4096), &[1; 4096]);
    s.fail_reads.store(true, Ordering::SeqCst);
    let reads = [
        Op::Read {
            offset: 512,
            len: 512,
        },
        Op::OrWrite {
            offset: 512,
            len: 512,
            durable: false,
        },
        Op::CompareAndWrite {
            offset: 512,
            len: 512,
            durable: false,
        },
        Op::Compare {
            offset: 512,
            len: 512,
            block: 0,
        },
        Op::Copy {
            source: Source::This,
            destination: Source::This,
            from: 512,
            to: MIB,
            len: 512,
            durable: false,
        },
    ];
    for op in reads {
        match exec(&s, op, &[1; 1024]).0 {
            Done::Failed(Failure::Read {
                at: Some(512),
                error,
            }) => {
                assert_eq!(error.to_string(), "injected EIO")
            }
            other => panic!("{other:?}"),
        }
    }
    s.fail_reads.store(false, Ordering::SeqCst);
    s.fail_writes.store(true, Ordering::SeqCst);
    let writes = [
        write(512, 512),
        Op::OrWrite {
            offset: 512,
            len: 512,
            durable: false,
        },
        Op::CompareAndWrite {
            offset: 512,
            len: 512,
            durable: false,
        },
        Op::WriteSame {
            offset: 512,
            len: 512,
            block: 512,
            zeros: true,
            durable: false,
        },
        Op::Unmap {
            ranges: vec![(512, 512)],
            durable: false,
        },
        Op::Fill {
            offset: 512,
            len: 512,
            pattern: Arc::from(vec![2; 512]),
            durable: false,
        },
        Op::Copy {
            source: Source::This,
            destination: Source::This,
            from: MIB,
            to: 512,
            len: 512,
            durable: false,
        },
    ];
    for op in writes {
        match exec(&s, op, &[1; 1024]).0 {
            Done::Failed(Failure::Write { at: Some(512), .. }) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        exec(&s, Op::Flush, &[]).0,
        Done::Failed(Failure::Write { at: None, .. })
    ));
    s.fail_writes.store(false, Ordering::SeqCst);
    assert_eq!(read(&s, 0, 4096), [1; 4096], "nothing changed");
}

/// Operations with arbitrary offsets, lengths, blocks and buffers on a small store: every one
/// answers, none panics.
#[test]
fn arbitrary_operations_never_panic() {
    let s = RamStore::new(64 << 10).unwrap();
    let x = std::cell::Cell::new(0x9E37_79B9_7F4A_7C15u64);
    let next = || {
        let mut v = x.get();
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
        x.set(v);
        v
    };
    let edges = [
        0,
        1,
        511,
        512,
        64 << 10,
        (64 << 10) - 1,
        (64 << 10) + 1,
        u64::MAX,
        u64::MAX / 2,
    ];
    for _ in 0..3000 {
        let pick = || match next() % 3 {
            0 => edges[(next() % edges.len() as u64) as usize],
            1 => next() % (80 << 10),
            _ => next(),
        };
        let (offset, len, block) = (pick(), pick(), pick());
        let data_out = vec![0x5A; (next() % (140 << 10)) as usize];
        let small = (len % (130 << 10)) as u32;
        let op = match next() % 12 {
            0 => Op::Read { offset, len: small },
            1 => Op::Write {
                offset,
                len: small,
                durable: next() % 2 == 0,
                atomic: next() % 2 == 0,
            },
            2 => Op::OrWrite {
                offset,
                len: small,
                durable: false,
            },
            3 => Op::CompareAndWrite {
                offset,
                len: small,
                durable: false,
            },
            4 => Op::Compare {
                offset,
                len: small,
                block: (block % 5000) as u32,
            },
            5 => Op::WriteSame {
                offset,
                len: len % (200 << 10),
                block: (block % 5000) as u32,
                zeros: next() % 2 == 0,
                durable: false,
            },
            6 => Op::Unmap {
                ranges: vec![(offset, len), (pick(), pick())],
                durable: false,
            },
            7 => Op::Fill {
                offset,
                len: len % (200 << 10),
                pattern: Arc::from(vec![1; (block % 3000) as usize]),
                durable: false,
            },
            8 => Op::Extents {
                offset,
                len,
                max: (block % 10) as u32,
            },
            9 => Op::Copy {
                source: Source::This,
                destination: Source::This,
                from: pick(),
                to: offset,
                len,
                durable: false,
            },
            10 => Op::Flush,
            _ => Op::Usage,
        };
        let _ = exec(&s, op, &data_out);
    }
}
