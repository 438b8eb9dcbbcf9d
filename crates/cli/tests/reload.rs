//! Live reconfiguration (issue 22, item 2): SIGHUP re-reads stint.toml and applies the
//! difference while a session runs; a configuration that does not apply is refused whole and
//! the running one stays.

mod common;
use common::cdb::{read_capacity16, sense, test_unit_ready};
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use scsi::{Asc, SenseKey};
use std::path::Path;
use std::time::{Duration, Instant};

const FIRST: &str = "iqn.2026-11.dev.stint:reload-a";
const SECOND: &str = "iqn.2026-11.dev.stint:reload-b";
const HOST: &str = "iqn.2026-11.dev.stint:reload-host";

const REPORT_LUNS: [u8; 12] = [0xA0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];

fn target(name: &str, luns: &[&str]) -> String {
    let mut text = format!("[[target]]\nname = \"{name}\"\n");
    for lun in luns {
        text += &format!("[[target.lun]]\n{lun}\n");
    }
    text
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn hangup(server: &Server) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The LUNs REPORT LUNS lists.
async fn report_luns(s: &mut Initiator) -> Vec<u64> {
    let r = s.scsi_command(0, &REPORT_LUNS, &[], 4096).await.unwrap();
    assert_eq!(sense(&r), None, "REPORT LUNS");
    r.data_in[8..]
        .chunks(8)
        .map(|e| u64::from(u16::from_be_bytes([e[0] & 0x3F, e[1]])))
        .collect()
}

/// REPORT LUNS until it lists `want` (a reload runs beside the session), at most 10 s.
async fn wait_for_luns(s: &mut Initiator, want: &[u64]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let luns = report_luns(s).await;
        if luns == want {
            return;
        }
        assert!(Instant::now() < deadline, "LUNs {luns:?}, never {want:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn sighup_applies_the_difference_and_refuses_what_cannot_change() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("stint.toml");
    let lun0 = "store = \"ram\"\nsize = \"16MiB\"";
    let lun1 = "store = \"ram\"\nsize = \"8MiB\"";
    write(&config, &target(FIRST, &[lun0]));
    let server = Server::start(&["--config", config.to_str().unwrap()], 1);
    let portal = server.portal();
    let rt = common::runtime();
    rt.block_on(async {
        let opts = LoginOptions::new(HOST, Some(FIRST));
        let mut s = Initiator::connect_portal(&portal, &opts).await.unwrap();
        let _power_on = s.scsi_command(0, &test_unit_ready(), &[], 0).await;
        assert_eq!(report_luns(&mut s).await, [0]);

        // A LUN and a target appear; the session sees REPORTED LUNS DATA HAS CHANGED.
        let both = target(FIRST, &[lun0, lun1]) + &target(SECOND, &[lun0]);
        write(&config, &both);
        hangup(&server);
        wait_for_luns(&mut s, &[0, 1]).await;
        // REPORT LUNS does not report unit attentions (SAM-5 §5.14); other commands do.
        let r = s.scsi_command(0, &test_unit_ready(), &[], 0).await.unwrap();
        assert_eq!(
            sense(&r),
            Some((SenseKey::UnitAttention, Asc::REPORTED_LUNS_DATA_HAS_CHANGED))
        );
        let _power_on = s.scsi_command(1, &test_unit_ready(), &[], 0).await;
        let r = s
            .scsi_command(1, &read_capacity16(), &[], 32)
            .await
            .unwrap();
        assert_eq!(sense(&r), None);
        let blocks = u64::from_be_bytes(r.data_in[..8].try_into().unwrap()) + 1;
        assert_eq!(blocks * 512, 8 << 20);
        let mut discovery = Initiator::connect_portal(&portal, &LoginOptions::new(HOST, None))
            .await
            .unwrap();
        let names: Vec<String> = discovery
            .send_targets()
            .await
            .unwrap()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert!(names.contains(&SECOND.to_owned()), "{names:?}");
        let mut second = Initiator::connect_portal(&portal, &LoginOptions::new(HOST, Some(SECOND)))
            .await
            .unwrap();
        let _power_on = second.scsi_command(0, &test_unit_ready(), &[], 0).await;

        // Refused whole: a file that does not parse, and a change a serving LUN cannot take
        // (beside an addition, which must not happen either).
        for bad in [
            both.clone() + "bogus = 1\n",
            target(
                FIRST,
                &[
                    lun0,
                    "store = \"ram\"\nsize = \"8MiB\"\nproduct = \"other\"",
                ],
            ) + &target(SECOND, &[lun0, lun1]),
        ] {
            write(&config, &bad);
            hangup(&server);
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert_eq!(report_luns(&mut s).await, [0, 1]);
            assert_eq!(report_luns(&mut second).await, [0]);
            // Nothing changed, so nothing is announced.
            let r = s.scsi_command(0, &test_unit_ready(), &[], 0).await.unwrap();
            assert_eq!(sense(&r), None);
        }

        // A larger size grows the LUN (CAPACITY DATA HAS CHANGED); a smaller one is refused.
        let grown = "store = \"ram\"\nsize = \"16MiB\"";
        write(
            &config,
            &(target(FIRST, &[lun0, grown]) + &target(SECOND, &[lun0])),
        );
        hangup(&server);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = s.scsi_command(1, &test_unit_ready(), &[], 0).await.unwrap();
            if sense(&r).is_some() {
                assert_eq!(
                    sense(&r),
                    Some((SenseKey::UnitAttention, Asc::CAPACITY_DATA_HAS_CHANGED))
                );
                break;
            }
            assert!(Instant::now() < deadline, "no unit attention after growing");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let r = s
            .scsi_command(1, &read_capacity16(), &[], 32)
            .await
            .unwrap();
        let blocks = u64::from_be_bytes(r.data_in[..8].try_into().unwrap()) + 1;
        assert_eq!(blocks * 512, 16 << 20);
        write(&config, &both);
        hangup(&server);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let r = s
            .scsi_command(1, &read_capacity16(), &[], 32)
            .await
            .unwrap();
        let blocks = u64::from_be_bytes(r.data_in[..8].try_into().unwrap()) + 1;
        assert_eq!(blocks * 512, 16 << 20, "a reload shrank the LUN");

        // LUN 1 and the second target go: LOGICAL UNIT NOT SUPPORTED at once, and the
        // second target's session is asked to log out (AsyncEvent 1, RFC 7143 §11.9.1).
        write(&config, &target(FIRST, &[lun0]));
        hangup(&server);
        wait_for_luns(&mut s, &[0]).await;
        let r = s.scsi_command(1, &test_unit_ready(), &[], 0).await.unwrap();
        assert_eq!(
            sense(&r),
            Some((SenseKey::IllegalRequest, Asc::LOGICAL_UNIT_NOT_SUPPORTED))
        );
        let asked = second.recv_timeout(Duration::from_secs(10)).await.unwrap();
        let pdu = asked.expect("an Async Message asking for logout");
        assert_eq!(pdu.bhs.opcode(), Some(iscsi::bhs::Opcode::AsyncMessage));
        assert_eq!(pdu.bhs.0[36], 1, "AsyncEvent: target requests Logout");
        let refused =
            Initiator::connect_portal(&portal, &LoginOptions::new(HOST, Some(SECOND))).await;
        assert!(refused.is_err(), "a removed target takes no logins");
    });
    assert!(server.stop());
}

/// The duration guideline of T2A descriptor 1 in its unit (10 ms for these descriptors), as
/// MODE SENSE reports the current value (docs/cdl.md lays out the page).
async fn guideline_of_descriptor_1(s: &mut Initiator) -> u16 {
    let cdb = common::cdb::mode_sense10(
        scsi::command::PageControl::Current,
        scsi::mode::CONTROL,
        0x07,
        512,
    );
    let r = s.scsi_command(0, &cdb, &[], 512).await.unwrap();
    assert_eq!(sense(&r), None, "MODE SENSE T2A");
    let d1 = &r.data_in[16..48];
    u16::from_be_bytes([d1[10], d1[11]])
}

#[test]
fn a_reload_changes_cdl_descriptors_for_later_commands() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("stint.toml");
    let lun = |ms: u32| {
        format!(
            "store = \"ram\"\nsize = \"16MiB\"\n[target.lun.queue]\ndepth = 4\n[target.lun.cdl]\n\
             read = [{{ dld = 1, guideline_ms = {ms}, guideline_policy = \"abort\" }}]"
        )
    };
    write(&config, &target(FIRST, &[&lun(30)]));
    let server = Server::start(&["--config", config.to_str().unwrap()], 1);
    let portal = server.portal();
    common::runtime().block_on(async {
        let mut s = Initiator::connect_portal(&portal, &LoginOptions::new(HOST, Some(FIRST)))
            .await
            .unwrap();
        let _power_on = s.scsi_command(0, &test_unit_ready(), &[], 0).await;
        assert_eq!(guideline_of_descriptor_1(&mut s).await, 3);
        write(&config, &target(FIRST, &[&lun(50)]));
        hangup(&server);
        let deadline = Instant::now() + Duration::from_secs(10);
        let attention = loop {
            let r = s.scsi_command(0, &test_unit_ready(), &[], 0).await.unwrap();
            if let Some(a) = sense(&r) {
                break a;
            }
            assert!(
                Instant::now() < deadline,
                "no unit attention after the reload"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(
            attention,
            (SenseKey::UnitAttention, Asc::MODE_PARAMETERS_CHANGED)
        );
        assert_eq!(guideline_of_descriptor_1(&mut s).await, 5);
    });
    assert!(server.stop());
}

/// The transcript as a test: a LUN added by reload while `stint bench --verify` runs on
/// another; the bench's commands that meet the REPORTED LUNS DATA HAS CHANGED unit attention
/// are sent again, as a host does, so it ends with no error and no mismatch.
#[test]
fn a_lun_added_while_a_verifying_bench_runs_costs_it_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("stint.toml");
    let lun0 = "store = \"ram\"\nsize = \"64MiB\"";
    write(&config, &target(FIRST, &[lun0]));
    let server = Server::start(&["--config", config.to_str().unwrap()], 1);
    let url = server.urls[0].clone();
    let bench = std::thread::spawn(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_stint"))
            .args(["bench", "--url", &url, "--rw", "randrw", "--iodepth", "8"])
            .args(["--runtime", "4s", "--verify", "--json"])
            .output()
            .expect("run stint bench")
    });
    std::thread::sleep(Duration::from_secs(1));
    write(
        &config,
        &target(FIRST, &[lun0, "store = \"ram\"\nsize = \"8MiB\""]),
    );
    hangup(&server);
    let out = bench.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let point = &report["points"][0];
    assert!(point.get("errors").is_none(), "{point}");
    assert!(point["total"]["ios"].as_u64().unwrap() > 0, "{point}");
    assert_eq!(
        report["verify"]["mismatches"],
        serde_json::json!([]),
        "{report}"
    );
    assert!(
        report["verify"]["blocks_checked"].as_u64().unwrap() > 0,
        "{report}"
    );
    // The unit attention came, and was answered by sending the command again.
    assert!(
        stderr.contains("REPORTED LUNS DATA HAS CHANGED"),
        "{stderr}"
    );
    assert!(server.stop());
}
