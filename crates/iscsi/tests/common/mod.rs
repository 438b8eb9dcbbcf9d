//! Shared by the loopback tests: a tiny RAM disk behind the `ScsiTarget` trait (TEST UNIT
//! READY, READ and WRITE, 512-byte blocks) and a server started on 127.0.0.1:0; the CDBs and
//! sense of its tests.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use device::{Completion, Nexus, Ns, Request, TaskManagement, TmfResponse, Transfer};
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::{ScsiTarget, TargetNode};
use scsi::command::{Command, ReadWrite};
use scsi::encode::Cdb;
use scsi::{form, Asc, Sense, SenseKey};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const BLOCK: usize = 512;
pub const TARGET: &str = "iqn.2026-01.org.stint:loop";
pub const INITIATOR: &str = "iqn.2026-01.org.stint:tester";

/// A RAM disk that also records the task management calls and nexus losses it sees.
pub struct RamDisk {
    pub data: Mutex<Vec<u8>>,
    pub events: Mutex<Vec<String>>,
}

impl RamDisk {
    pub fn new(blocks: usize) -> Arc<RamDisk> {
        Arc::new(RamDisk {
            data: Mutex::new(vec![0; blocks * BLOCK]),
            events: Mutex::new(Vec::new()),
        })
    }

    /// (is_write, lba, blocks) of a READ or WRITE; `None` for another command.
    fn decode(cdb: &[u8]) -> Option<(bool, u64, u64)> {
        match scsi::decode(cdb).ok()?.1 {
            Command::Read(r) => Some((false, r.lba, r.transfer_length.into())),
            Command::Write(w) => Some((true, w.lba, w.transfer_length.into())),
            _ => None,
        }
    }

    fn test_unit_ready(cdb: &[u8]) -> bool {
        matches!(scsi::decode(cdb), Ok((_, Command::TestUnitReady)))
    }
}

fn invalid_opcode() -> Sense {
    Sense::new(
        SenseKey::IllegalRequest,
        Asc::INVALID_COMMAND_OPERATION_CODE,
    )
}

impl ScsiTarget for RamDisk {
    fn transfer(&self, _nexus: &Nexus, _lun: u64, cdb: &[u8]) -> Result<Transfer, Sense> {
        if Self::test_unit_ready(cdb) {
            return Ok(Transfer::None);
        }
        let (write, _, blocks) = Self::decode(cdb).ok_or_else(invalid_opcode)?;
        let len = u32::try_from(blocks as usize * BLOCK).map_err(|_| invalid_opcode())?;
        Ok(if write {
            Transfer::Out(len)
        } else {
            Transfer::In(len)
        })
    }

    fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        if Self::test_unit_ready(req.cdb) {
            return Completion::GOOD;
        }
        let Some((write, lba, blocks)) = Self::decode(req.cdb) else {
            return Completion::check_condition(invalid_opcode());
        };
        let mut data = self.data.lock().unwrap();
        let start = lba as usize * BLOCK;
        let end = start + blocks as usize * BLOCK;
        if end > data.len() {
            return Completion::check_condition(Sense::new(
                SenseKey::IllegalRequest,
                Asc::LBA_OUT_OF_RANGE,
            ));
        }
        if write {
            // Only whole blocks the initiator actually sent are written.
            let whole = req.data_out.len() / BLOCK * BLOCK;
            let n = whole.min(end - start);
            data[start..start + n].copy_from_slice(&req.data_out[..n]);
        } else {
            data_in.extend_from_slice(&data[start..end]);
        }
        Completion::GOOD
    }

    fn task_management(
        &self,
        _now: Ns,
        _nexus: &Nexus,
        lun: u64,
        tmf: TaskManagement,
    ) -> TmfResponse {
        self.events
            .lock()
            .unwrap()
            .push(format!("{tmf:?} lun {lun}"));
        TmfResponse::FunctionComplete
    }

    fn nexus_lost(&self, _now: Ns, nexus: &Nexus) {
        self.events
            .lock()
            .unwrap()
            .push(format!("lost {}", nexus.initiator_port));
    }
}

pub struct Server {
    pub addr: SocketAddr,
    pub disk: Arc<RamDisk>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    pub async fn start(blocks: usize) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let disk = RamDisk::new(blocks);
        let node = TargetNode {
            name: TARGET.into(),
            alias: Some("loop disk".into()),
            target: disk.clone(),
            allowed_initiators: Vec::new(),
            initiator_classes: Vec::new(),
            chap: None,
            privileged_initiators: vec!["*".into()],
        };
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(iscsi::server::serve(listener, vec![node], async {
            let _ = rx.await;
        }));
        Server {
            addr,
            disk,
            stop: Some(tx),
            task,
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.await.unwrap().unwrap();
    }

    pub async fn login_with(&self, keys: &[(&str, &str)]) -> Initiator {
        let mut opts = LoginOptions::new(INITIATOR, Some(TARGET));
        opts.extra_keys = keys
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Initiator::connect(self.addr, &opts).await.unwrap()
    }
}

fn rw(lba: u32, blocks: u16) -> ReadWrite {
    ReadWrite {
        lba: lba.into(),
        transfer_length: blocks.into(),
        ..ReadWrite::default()
    }
}

pub fn read10(lba: u32, blocks: u16) -> Cdb {
    Command::Read(rw(lba, blocks)).emit(form::READ_10).unwrap()
}

pub fn write10(lba: u32, blocks: u16) -> Cdb {
    Command::Write(rw(lba, blocks))
        .emit(form::WRITE_10)
        .unwrap()
}

pub fn test_unit_ready() -> Cdb {
    Command::TestUnitReady.emit(form::TEST_UNIT_READY).unwrap()
}

/// The sense in a SCSI Response's data segment: SenseLength, then the sense data (RFC 7143
/// §11.4.7).
pub fn response_sense(data: &[u8]) -> Sense {
    Sense::parse(data.get(2..).unwrap_or_default()).expect("sense data")
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
