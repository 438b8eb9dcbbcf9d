//! How many READ/WRITE commands per second the device path sustains with no transport, from
//! `threads` threads (each its own I_T nexus) on one logical unit: the cost the target adds on
//! top of iSCSI, and how the unit's lock holds up when many sessions share it. Run with
//! `cargo run --release -p device --example command_rate [threads]`.

use device::{Arrival, Finished, LuConfig, Nexus, Sink, Submitted, Target, TaskAttribute, Unit};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{InlinePlane, RamStore};

/// Nothing is delivered to others here: every command ends on its own thread.
struct Nowhere;

impl Sink for Nowhere {
    fn deliver(&mut self, f: Finished) {
        panic!("unexpected delivery {f:?}");
    }
    fn wake(&mut self, _lun: u64) {}
}

/// Runs one command to its end on the caller's thread.
fn execute(target: &Target, a: &Arrival, data_in: &mut Vec<u8>) {
    match target.command(0, a, data_in, &mut Nowhere).1 {
        Submitted::Done(_) => {}
        other => panic!("{other:?}"),
    }
}

fn cdb(opcode: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = opcode;
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&blocks.to_be_bytes());
    c
}

/// Run `opcode` with `blocks` per command from `threads` threads for about a second.
fn measure(target: &Arc<Target>, threads: u64, opcode: u8, blocks: u16) -> (f64, f64) {
    let start = Instant::now();
    let counts: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let target = Arc::clone(target);
                s.spawn(move || {
                    let nexus = Nexus {
                        id: t,
                        initiator_port: format!("bench{t}"),
                        class: None,
                        privileged: true,
                    };
                    let data_out = vec![0xA5u8; usize::from(blocks) * 512];
                    let mut data_in = Vec::with_capacity(data_out.len());
                    // Consume the power-on unit attention.
                    let tur = [0u8; 6];
                    let req = Arrival {
                        nexus: &nexus,
                        lun: 0,
                        tag: 0,
                        cdb: &tur,
                        attribute: TaskAttribute::Simple,
                        data_out_buffer_size: 0,
                        data_out: &[],
                    };
                    execute(&target, &req, &mut data_in);
                    let mut n = 0u64;
                    let mut lba = (t as u32) * 65536;
                    while start.elapsed() < Duration::from_secs(1) {
                        for _ in 0..256 {
                            let c = cdb(opcode, lba % (1 << 20), blocks);
                            let out = if opcode == 0x2A {
                                &data_out[..]
                            } else {
                                &[][..]
                            };
                            let req = Arrival {
                                nexus: &nexus,
                                lun: 0,
                                tag: 0,
                                cdb: &c,
                                attribute: TaskAttribute::Simple,
                                data_out_buffer_size: out.len() as u32,
                                data_out: out,
                            };
                            data_in.clear();
                            execute(&target, &req, &mut data_in);
                            lba = lba.wrapping_add(u32::from(blocks));
                            n += 1;
                        }
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let total: u64 = counts.iter().sum();
    let iops = total as f64 / secs;
    (iops, iops * f64::from(blocks) * 512.0 / (1 << 20) as f64)
}

fn main() {
    let threads = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let size = 1u64 << 30;
    let store = Arc::new(RamStore::new(size).expect("a 1 GiB RAM store"));
    let lu = Unit::build(
        LuConfig::new("iqn.bench:t", 0, size),
        Arc::new(InlinePlane::new(store)),
        None,
    )
    .expect("valid configuration");
    let target = Arc::new(Target::new(vec![(0, Arc::new(lu))]));
    for (name, opcode) in [("WRITE(10)", 0x2A), ("READ(10)", 0x28)] {
        for blocks in [8u16, 256] {
            let (iops, mib) = measure(&target, threads, opcode, blocks);
            println!(
                "{name:10} {:4} KiB x{threads}: {iops:>12.0} commands/s {mib:>8.0} MiB/s",
                blocks / 2
            );
        }
    }
}
