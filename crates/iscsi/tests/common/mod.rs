//! Shared by the loopback tests: a tiny RAM disk behind the `ScsiTarget` trait (TEST UNIT
//! READY, READ and WRITE, 512-byte blocks) and a server started on 127.0.0.1:0; the CDBs and
//! sense of its tests.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use device::{
    Arrival, Completion, Nexus, Ns, Sink, Submitted, TaskId, TaskManagement, TmfResponse, Transfer,
};
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
    /// Writes waiting for their Data-Out: where their bytes go.
    writes: Mutex<HashMap<u64, (usize, usize)>>,
    next_task: AtomicU64,
}

impl RamDisk {
    pub fn new(blocks: usize) -> Arc<RamDisk> {
        Arc::new(RamDisk {
            data: Mutex::new(vec![0; blocks * BLOCK]),
            events: Mutex::new(Vec::new()),
            writes: Mutex::new(HashMap::new()),
            next_task: AtomicU64::new(1),
        })
    }

    /// Writes the whole blocks of `data_out` the initiator actually sent, within the range.
    fn write(&self, (start, end): (usize, usize), data_out: &[u8]) {
        let whole = data_out.len() / BLOCK * BLOCK;
        let n = whole.min(end - start);
        self.data.lock().unwrap()[start..start + n].copy_from_slice(&data_out[..n]);
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
    fn command(
        &self,
        _now: Ns,
        a: &Arrival,
        data_in: &mut Vec<u8>,
        _sink: &mut dyn Sink,
    ) -> (Option<Transfer>, Submitted) {
        let check = |sense| Submitted::Done(Completion::check_condition(sense));
        if Self::test_unit_ready(a.cdb) {
            return (Some(Transfer::None), Submitted::Done(Completion::GOOD));
        }
        let Some((write, lba, blocks)) = Self::decode(a.cdb) else {
            return (None, check(invalid_opcode()));
        };
        let Ok(len) = u32::try_from(blocks as usize * BLOCK) else {
            return (None, check(invalid_opcode()));
        };
        let transfer = if write {
            Transfer::Out(len)
        } else {
            Transfer::In(len)
        };
        let start = lba as usize * BLOCK;
        let end = start + len as usize;
        if end > self.data.lock().unwrap().len() {
            let sense = Sense::new(SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE);
            return (Some(transfer), check(sense));
        }
        if !write {
            data_in.extend_from_slice(&self.data.lock().unwrap()[start..end]);
            return (Some(transfer), Submitted::Done(Completion::GOOD));
        }
        let want = len.min(a.data_out_buffer_size);
        if a.data_out.len() >= want as usize {
            self.write((start, end), a.data_out);
            return (Some(transfer), Submitted::Done(Completion::GOOD));
        }
        let id = self.next_task.fetch_add(1, Ordering::Relaxed);
        self.writes.lock().unwrap().insert(id, (start, end));
        (
            Some(transfer),
            Submitted::WantData(TaskId::from_u64(id), want),
        )
    }

    fn data_out(
        &self,
        _now: Ns,
        _lun: u64,
        task: TaskId,
        data: &[u8],
        _data_in: &mut Vec<u8>,
        _sink: &mut dyn Sink,
    ) -> Submitted {
        match self.writes.lock().unwrap().remove(&task.to_u64()) {
            Some(range) => {
                self.write(range, data);
                Submitted::Done(Completion::GOOD)
            }
            None => Submitted::Aborted,
        }
    }

    fn data_out_failed(
        &self,
        _now: Ns,
        _lun: u64,
        task: TaskId,
        _c: Completion,
        _sink: &mut dyn Sink,
    ) {
        self.writes.lock().unwrap().remove(&task.to_u64());
    }

    fn task_management(
        &self,
        _now: Ns,
        _nexus: &Nexus,
        lun: u64,
        tmf: TaskManagement,
        _sink: &mut dyn Sink,
    ) -> TmfResponse {
        self.events
            .lock()
            .unwrap()
            .push(format!("{tmf:?} lun {lun}"));
        match tmf {
            // Every command ends at once here: no task is ever left to abort.
            TaskManagement::AbortTask(_) => TmfResponse::NoSuchTask,
            _ => TmfResponse::FunctionComplete,
        }
    }

    fn nexus_lost(&self, _now: Ns, nexus: &Nexus, _sink: &mut dyn Sink) {
        self.events
            .lock()
            .unwrap()
            .push(format!("lost {}", nexus.initiator_port));
    }
}

pub struct Server {
    pub addr: SocketAddr,
    pub disk: Arc<RamDisk>,
    /// The store of a server in front of the real device (`start_device`).
    store: Option<Arc<store::RamStore>>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// A server in front of the RAM disk fake: the transport alone.
    pub async fn start(blocks: usize) -> Server {
        let disk = RamDisk::new(blocks);
        Self::serve(disk.clone(), disk, None).await
    }

    /// A server in front of the real `device::Target` with one RAM logical unit: the SAM
    /// rules (task attributes, overlapped tags, task management) are the device's.
    pub async fn start_device(blocks: usize) -> Server {
        let store = Arc::new(store::RamStore::new((blocks * BLOCK) as u64).unwrap());
        let plane = Arc::new(store::InlinePlane::new(store.clone()));
        let config = device::LuConfig::new(TARGET, 0, (blocks * BLOCK) as u64);
        let unit = Arc::new(device::Unit::build(config, plane, None).unwrap());
        let target = Arc::new(device::Target::new(vec![(0, unit)]));
        Self::serve(target, RamDisk::new(0), Some(store)).await
    }

    async fn serve(
        target: Arc<dyn ScsiTarget>,
        disk: Arc<RamDisk>,
        store: Option<Arc<store::RamStore>>,
    ) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let node = TargetNode {
            retired: false,
            gateways: Vec::new(),
            name: TARGET.into(),
            alias: Some("loop disk".into()),
            target,
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
            store,
            stop: Some(tx),
            task,
        }
    }

    /// The first `len` bytes of the disk.
    pub fn bytes(&self, len: usize) -> Vec<u8> {
        match &self.store {
            Some(store) => {
                let mut buf = vec![0; len];
                store::Store::read_at(&**store, 0, &mut buf).unwrap();
                buf
            }
            None => self.disk.data.lock().unwrap()[..len].to_vec(),
        }
    }

    /// [`Self::login_with`], past the device's power-on unit attention.
    pub async fn login_ready(&self, keys: &[(&str, &str)]) -> Initiator {
        let mut ini = self.login_with(keys).await;
        let _power_on = ini.scsi_command(0, &[0; 6], &[], 0).await.unwrap();
        ini
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
