//! What the fuzz targets share: the devices and portals they attack, and the checks of what
//! stint sends back (every PDU framed whole, every sense buffer well formed).

use std::sync::Arc;

use device::{DhCompletion, Finished, LuConfig, Sink, Target, Unit};
use iscsi::bhs::Bhs;
use iscsi::pdu::{self, FrameLimits};
use iscsi::{Portal, TargetNode};
use profile::{DeviceParts, DeviceSpec, QueueSpec};
use store::{InlinePlane, RamStore};

/// Name of the target node the iSCSI targets log in to.
pub const TARGET_NAME: &str = "iqn.2026-01.dev.stint:fuzz";
/// Name of a second node that demands CHAP (RFC 7143 §12.1.3).
pub const CHAP_TARGET_NAME: &str = "iqn.2026-01.dev.stint:chap";
/// Its secret: 12 bytes, the shortest stint takes.
pub const CHAP_SECRET: &[u8] = b"fuzz-secret!";
/// Blocks of each logical unit: small, so fuzzed LBAs land inside as often as outside.
pub const BLOCKS: u64 = 2048;

/// A target with the two kinds of logical unit, each over a RAM store on an inline data
/// plane: LUN 0 plain, LUN 1 with a device queue (instant drive, CDL pages), so its medium
/// commands wait for [`Unit::advance`].
pub fn target() -> Target {
    let plain = Unit::build(LuConfig::new(TARGET_NAME, 0, BLOCKS * 512), ram(), None)
        .expect("plain logical unit");
    Target::new(vec![(0, Arc::new(plain)), (1, Arc::new(queued_unit()))])
}

fn ram() -> Arc<InlinePlane> {
    let store = RamStore::new(BLOCKS * 512).expect("RAM store");
    Arc::new(InlinePlane::new(Arc::new(store)))
}

/// The unit of LUN 1: what `stint serve` builds for a LUN with `[queue]` and `[cdl]`.
fn queued_unit() -> Unit {
    let spec = DeviceSpec {
        model: "instant".into(),
        profile: None,
        write_cache: None,
        capacity: Some("1MiB".into()),
        faults: None,
    };
    let drive = spec
        .prepare(std::path::Path::new("."))
        .expect("instant drive");
    let queue = QueueSpec {
        depth: 4,
        ..QueueSpec::default()
    };
    let parts = DeviceParts {
        drive: &drive,
        queue: &queue,
        cdl: qos::CdlPages::default(),
        dh: DhCompletion::default(),
        seed: 1,
    };
    let mut config = LuConfig::new(TARGET_NAME, 1, BLOCKS * 512);
    config.medium_rotation_rate = drive.medium_rotation_rate();
    let queue = parts.device_queue().expect("device queue");
    Unit::build(config, ram(), Some(queue)).expect("queued logical unit")
}

/// Collects what the calls deliver (tasks of any nexus) and ignores wake-ups: the fuzz
/// targets advance the units themselves.
#[derive(Default)]
pub struct Collect(pub Vec<Finished>);

impl Sink for Collect {
    fn deliver(&mut self, f: Finished) {
        self.0.push(f);
    }

    fn wake(&mut self, _lun: u64) {}
}

/// A portal with the fuzz target node (anyone may log in and reset it) and a CHAP node.
pub fn portal() -> Arc<Portal> {
    let open = TargetNode {
        retired: false,
        gateways: Vec::new(),
        name: TARGET_NAME.into(),
        alias: Some("fuzz".into()),
        target: Arc::new(target()),
        allowed_initiators: Vec::new(),
        initiator_classes: Vec::new(),
        chap: None,
        privileged_initiators: vec!["*".into()],
    };
    let chap = TargetNode {
        retired: false,
        gateways: Vec::new(),
        name: CHAP_TARGET_NAME.into(),
        alias: None,
        target: Arc::new(Target::default()),
        allowed_initiators: Vec::new(),
        initiator_classes: Vec::new(),
        chap: Some(iscsi::chap::Chap {
            initiator: iscsi::chap::Credentials {
                user: "fuzz".into(),
                secret: CHAP_SECRET.to_vec(),
            },
            target: Some(iscsi::chap::Credentials {
                user: "stint".into(),
                secret: b"target-secret".to_vec(),
            }),
        }),
        privileged_initiators: Vec::new(),
    };
    Arc::new(Portal::new(vec![open, chap]))
}

/// Frames `bytes` as the initiator would: a whole number of PDUs, nothing left over. Panics
/// (a fuzz finding) on a partial PDU or one the initiator's framing refuses.
pub fn frame_all(bytes: &[u8], limits: &FrameLimits) -> Vec<(Bhs, Vec<u8>)> {
    let mut pdus = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let f = match pdu::frame(&bytes[pos..], limits) {
            Ok(Some(f)) => f,
            Ok(None) => panic!("a partial PDU at byte {pos} of {}", bytes.len()),
            Err(e) => panic!("an unframeable PDU at byte {pos}: {e}"),
        };
        assert!(f.data_digest_ok, "a bad data digest at byte {pos}");
        let data = bytes[pos + f.data.start..pos + f.data.end].to_vec();
        pdus.push((f.bhs, data));
        pos += f.len;
    }
    pdus
}

/// Checks sense data as SPC-6 §4.4 defines it: fixed (70h/71h, ADDITIONAL SENSE LENGTH
/// covering the rest) or descriptor format (72h/73h, descriptors exactly filling the
/// additional length), and a sense key or an additional sense code that says something.
pub fn check_sense(sense: &[u8]) {
    let code = sense.first().copied().unwrap_or(0) & 0x7F;
    let additional = usize::from(*sense.get(7).expect("sense data shorter than 8 bytes"));
    assert_eq!(
        sense.len(),
        8 + additional,
        "ADDITIONAL SENSE LENGTH {additional} for {} bytes of sense",
        sense.len()
    );
    let parsed = scsi::Sense::parse(sense).expect("sense data of an unknown format");
    assert!(
        parsed.key != scsi::SenseKey::NoSense || parsed.asc != scsi::Asc(0, 0),
        "sense without a key or an additional sense code: {sense:02x?}"
    );
    match code {
        0x70 | 0x71 => assert!(additional >= 10, "fixed sense without ASC/ASCQ"),
        0x72 | 0x73 => {
            let mut at = 8;
            while at < sense.len() {
                let len = usize::from(*sense.get(at + 1).expect("a descriptor cut short"));
                at += 2 + len;
            }
            assert_eq!(at, sense.len(), "descriptors overrun the additional length");
        }
        other => panic!("sense response code {other:02x}h"),
    }
}

/// Plain framing: no digests, the largest data segment RFC 7143 §13.12 allows.
pub const PLAIN: FrameLimits = FrameLimits {
    header_digest: false,
    data_digest: false,
    max_data_segment_length: (1 << 24) - 1,
};

/// Whether every string of a TOML text names, as a path, something inside the working
/// directory: no absolute path and no `..`. Experiment and configuration files name profile
/// and secret files, which their parsers read; a fuzzer must not have them read a device
/// such as /dev/zero forever. Text that is no TOML passes (the parser refuses it).
pub fn stays_in_tree(text: &str) -> bool {
    fn inside(v: &toml::Value) -> bool {
        match v {
            toml::Value::String(s) => !s.starts_with('/') && !s.contains(".."),
            toml::Value::Array(a) => a.iter().all(inside),
            toml::Value::Table(t) => t.values().all(inside),
            _ => true,
        }
    }
    text.parse::<toml::Table>()
        .map_or(true, |t| t.values().all(inside))
}
