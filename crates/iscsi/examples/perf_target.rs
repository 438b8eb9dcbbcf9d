//! The iSCSI layer alone, for measuring it with `iscsi-perf`: a RAM disk that knows only
//! TEST UNIT READY, READ CAPACITY(16) and READ/WRITE(10)/(16), behind the real server.
//!
//! `cargo run --release -p iscsi --example perf_target -- 3260 1024` (port, MiB), then
//! `iscsi-perf -m 32 -b 8 iscsi://127.0.0.1:3260/iqn.2026-01.org.stint:perf/0`.

use std::sync::{Arc, RwLock};

use device::{Completion, Nexus, Request, TaskManagement, TmfResponse, Transfer};
use iscsi::{ScsiTarget, TargetNode};
use scsi::{Asc, Sense, SenseKey};

const BLOCK: u64 = 512;

struct RamDisk {
    blocks: u64,
    data: RwLock<Vec<u8>>,
}

/// (is_write, lba, blocks) of READ/WRITE(10)/(16) (SBC-4 §5.13, §5.15, §5.40, §5.42).
fn rw(cdb: &[u8]) -> Option<(bool, u64, u64)> {
    let be = |b: &[u8]| b.iter().fold(0u64, |a, x| (a << 8) | u64::from(*x));
    match *cdb.first()? {
        0x28 | 0x2A => Some((cdb[0] == 0x2A, be(cdb.get(2..6)?), be(cdb.get(7..9)?))),
        0x88 | 0x8A => Some((cdb[0] == 0x8A, be(cdb.get(2..10)?), be(cdb.get(10..14)?))),
        _ => None,
    }
}

fn invalid_opcode() -> Sense {
    Sense::new(
        SenseKey::IllegalRequest,
        Asc::INVALID_COMMAND_OPERATION_CODE,
    )
}

impl ScsiTarget for RamDisk {
    fn transfer(&self, _lun: u64, cdb: &[u8]) -> Result<Transfer, Sense> {
        match cdb.first() {
            Some(0x00) => Ok(Transfer::None),
            Some(0x9E) => Ok(Transfer::In(32)),
            _ => {
                let (write, _, blocks) = rw(cdb).ok_or_else(invalid_opcode)?;
                let len = u32::try_from(blocks * BLOCK).map_err(|_| invalid_opcode())?;
                Ok(if write {
                    Transfer::Out(len)
                } else {
                    Transfer::In(len)
                })
            }
        }
    }

    fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        match req.cdb.first() {
            Some(0x00) => return Completion::GOOD,
            Some(0x9E) => {
                // READ CAPACITY(16) parameter data (SBC-4 table 119).
                let mut d = [0u8; 32];
                d[..8].copy_from_slice(&(self.blocks - 1).to_be_bytes());
                d[8..12].copy_from_slice(&(BLOCK as u32).to_be_bytes());
                data_in.extend_from_slice(&d);
                return Completion::GOOD;
            }
            _ => {}
        }
        let Some((write, lba, blocks)) = rw(req.cdb) else {
            return Completion::check_condition(invalid_opcode());
        };
        if lba + blocks > self.blocks {
            return Completion::check_condition(Sense::new(
                SenseKey::IllegalRequest,
                Asc::LBA_OUT_OF_RANGE,
            ));
        }
        let (start, len) = ((lba * BLOCK) as usize, (blocks * BLOCK) as usize);
        if write {
            let n = req.data_out.len().min(len) / BLOCK as usize * BLOCK as usize;
            if let Ok(mut d) = self.data.write() {
                d[start..start + n].copy_from_slice(&req.data_out[..n]);
            }
        } else if let Ok(d) = self.data.read() {
            data_in.extend_from_slice(&d[start..start + len]);
        }
        Completion::GOOD
    }

    fn task_management(&self, _: &Nexus, _: u64, _: TaskManagement) -> TmfResponse {
        TmfResponse::FunctionComplete
    }

    fn nexus_lost(&self, _: &Nexus) {}
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let port = args.next().unwrap_or_else(|| "3260".into());
    let mib: u64 = args.next().and_then(|m| m.parse().ok()).unwrap_or(1024);
    let blocks = mib * (1 << 20) / BLOCK;
    let disk = Arc::new(RamDisk {
        blocks,
        data: RwLock::new(vec![0; (blocks * BLOCK) as usize]),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
        let name = "iqn.2026-01.org.stint:perf".to_string();
        println!("iscsi://{}/{name}/0", listener.local_addr()?);
        let node = TargetNode {
            name,
            alias: None,
            target: disk,
            allowed_initiators: Vec::new(),
        };
        iscsi::server::serve(listener, vec![node], async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
    })
}
