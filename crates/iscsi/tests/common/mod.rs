//! Shared by the loopback tests: a tiny RAM disk behind the `ScsiTarget` trait (TEST UNIT
//! READY, READ/WRITE(10)/(16), 512-byte blocks) and a server started on 127.0.0.1:0.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use device::{Completion, Nexus, Ns, Request, TaskManagement, TmfResponse, Transfer};
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::{ScsiTarget, TargetNode};
use scsi::{Asc, Sense, SenseKey};
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

    /// (is_write, lba, blocks) for the commands this disk knows.
    fn decode(cdb: &[u8]) -> Option<(bool, u64, u64)> {
        let be = |b: &[u8]| b.iter().fold(0u64, |a, x| (a << 8) | u64::from(*x));
        match *cdb.first()? {
            0x28 | 0x2A => Some((cdb[0] == 0x2A, be(cdb.get(2..6)?), be(cdb.get(7..9)?))),
            0x88 | 0x8A => Some((cdb[0] == 0x8A, be(cdb.get(2..10)?), be(cdb.get(10..14)?))),
            _ => None,
        }
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
        if cdb.first() == Some(&0x00) {
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
        if req.cdb.first() == Some(&0x00) {
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

pub fn read10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = 0x28;
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&blocks.to_be_bytes());
    c
}

pub fn write10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = read10(lba, blocks);
    c[0] = 0x2A;
    c
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
