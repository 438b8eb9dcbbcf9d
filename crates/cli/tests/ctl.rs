//! `stint ctl` against a real `stint serve` through its admin socket: the listing, the
//! counters after I/O sent with the crate's initiator, the socket's mode, a second server
//! refused, malformed requests answered precisely on a connection that stays usable, and the
//! socket removed at SIGTERM.

mod common;
use common::cdb::{read, rw, test_unit_ready, write};
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use scsi::form;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output};

const TARGET: &str = "iqn.2026-11.dev.stint:target0";

fn ctl(socket: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stint"))
        .arg("ctl")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .expect("run stint ctl")
}

/// stdout of a `stint ctl` that must succeed.
fn ctl_ok(socket: &Path, args: &[&str]) -> String {
    let out = ctl(socket, args);
    assert!(
        out.status.success(),
        "stint ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn stats(socket: &Path, lun: &str) -> serde_json::Value {
    serde_json::from_str(&ctl_ok(socket, &["--json", "stats", TARGET, lun])).unwrap()
}

/// The value of the sample `name` whose labels include `labels`.
fn sample(stats: &serde_json::Value, name: &str, labels: &[(&str, &str)]) -> f64 {
    let samples = stats["samples"].as_array().expect("samples");
    samples
        .iter()
        .find(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][k] == *v))
        .unwrap_or_else(|| panic!("no {name} {labels:?} in {stats}"))["value"]
        .as_f64()
        .unwrap()
}

/// Sends raw `line` and reads one response line.
fn exchange(conn: &mut BufReader<UnixStream>, line: &str) -> serde_json::Value {
    conn.get_mut().write_all(line.as_bytes()).unwrap();
    let mut answer = String::new();
    conn.read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{answer:?}: {e}"))
}

/// Some reads and writes on LUN 0 of the server's target.
async fn io(url: &str) -> (u64, u64) {
    let url: IscsiUrl = url.parse().unwrap();
    let opts = LoginOptions::new("iqn.2026-11.dev.stint:ctl-test", Some(&url.target));
    let mut s = Initiator::connect_portal(&url.portal, &opts).await.unwrap();
    // The power-on unit attention.
    s.scsi_command(0, &test_unit_ready(), &[], 0).await.unwrap();
    for i in 0..4 {
        let r = s
            .scsi_command(0, &read(form::READ_10, rw(i * 8, 8)), &[], 4096)
            .await
            .unwrap();
        assert_eq!(r.status, 0);
    }
    for i in 0..3 {
        let w = write(form::WRITE_10, rw(i * 4, 4));
        let r = s.scsi_command(0, &w, &[0x5A; 2048], 0).await.unwrap();
        assert_eq!(r.status, 0);
    }
    (4 * 4096, 3 * 2048)
}

#[test]
fn ctl_lists_counts_and_guards_the_socket() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("admin.sock");
    let socket_arg = socket.to_str().unwrap();
    let server = Server::start(
        &[
            "--admin-socket",
            socket_arg,
            "--lun",
            "ram:16MiB",
            "--lun",
            "hdd",
        ],
        2,
    );
    // The URLs are printed after the socket listens.
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");

    // ls: both LUNs, their sizes as served.
    let tree = ctl_ok(&socket, &["ls"]);
    assert!(tree.starts_with(&format!("o- {TARGET} ")), "{tree}");
    assert!(
        tree.contains("o- lun0 ") && tree.contains("[ram, 16 MiB, 512-byte blocks"),
        "{tree}"
    );
    assert!(tree.contains("o- lun1 ") && tree.contains("CDL"), "{tree}");
    let listing: serde_json::Value =
        serde_json::from_str(&ctl_ok(&socket, &["ls", "--json"])).unwrap();
    let luns = &listing["targets"][0]["luns"];
    assert_eq!(listing["targets"][0]["name"], TARGET);
    assert_eq!(luns[0]["size"], 16 << 20);
    assert_eq!(luns[0]["block_size"], 512);
    assert_eq!(luns[0]["store"], "ram");
    assert_eq!(luns[1]["cdl"], true);
    assert!(
        luns[1]["queue"].as_str().unwrap().starts_with("hdd"),
        "{luns}"
    );

    // stats: the metrics endpoint's counters, moved by the I/O.
    let before = stats(&socket, "0");
    let good = [("kind", "read"), ("status", "good")];
    assert_eq!(sample(&before, "stint_commands_total", &good), 0.0);
    let (read_bytes, written_bytes) = common::runtime().block_on(io(&server.urls[0]));
    let after = stats(&socket, "0");
    assert_eq!(sample(&after, "stint_commands_total", &good), 4.0);
    assert_eq!(
        sample(&after, "stint_read_bytes_total", &[]),
        read_bytes as f64
    );
    assert_eq!(
        sample(&after, "stint_written_bytes_total", &[]),
        written_bytes as f64
    );
    let table = ctl_ok(&socket, &["stats", TARGET, "0"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("stint_read_bytes_total ")
                && l.ends_with(&format!(" {read_bytes}"))),
        "{table}"
    );
    // The hdd LUN has a device queue: its gauges are there.
    sample(&stats(&socket, "1"), "stint_device_queue_commands", &[]);

    // Unknown names are errors naming what exists; exit code 1.
    let out = ctl(&socket, &["stats", TARGET, "9"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("stint ctl: ") && err.contains("has no LUN 9; its LUNs are 0, 1"),
        "{err}"
    );
    let out = ctl(&socket, &["stats", "iqn.2026-11.dev.stint:nope", "0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("the targets are {TARGET}")), "{err}");

    // A second server on the same socket is refused, and the first still answers.
    let second = Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(["serve", "--listen", "127.0.0.1:0", "--lun", "ram:1MiB"])
        .args(["--admin-socket", socket_arg])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains(&format!("another stint serve listens on {socket_arg}")),
        "{err}"
    );
    ctl_ok(&socket, &["ls"]);

    // Malformed requests: a precise error each, and the connection answers the next line.
    let mut conn = BufReader::new(UnixStream::connect(&socket).unwrap());
    for (line, expected) in [
        ("this is not json\n", "not a JSON object"),
        (
            "{\"version\":2,\"verb\":\"ls\"}\n",
            "unsupported protocol version 2; this server speaks version 1",
        ),
        (
            "{\"version\":1,\"verb\":\"format\"}\n",
            "unknown verb \"format\"",
        ),
        (
            "{\"version\":1,\"verb\":\"stats\",\"target\":\"t\"}\n",
            "missing field `lun`",
        ),
    ] {
        let answer = exchange(&mut conn, line);
        assert_eq!(answer["ok"], false, "{line}: {answer}");
        assert_eq!(answer["version"], 1);
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(expected), "{line}: {error}");
    }
    let long = format!(
        "{{\"version\":1,\"verb\":\"ls\",\"x\":\"{}\"}}\n",
        "a".repeat(70_000)
    );
    let answer = exchange(&mut conn, &long);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("longer than 65536 bytes"),
        "{answer}"
    );
    let answer = exchange(&mut conn, "{\"version\":1,\"verb\":\"ls\"}\n");
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["result"]["targets"][0]["name"], TARGET);
    drop(conn);

    // SIGTERM: the socket goes with the server.
    assert!(server.stop(), "stint serve did not stop cleanly");
    assert!(!socket.exists(), "the socket outlived the server");
    let out = ctl(&socket, &["ls"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot connect to {socket_arg}")),
        "{err}"
    );
}

#[test]
fn a_stale_socket_is_replaced_and_the_file_places_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("stale.sock");
    // A socket nothing listens on, as a killed server leaves it.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let server = Server::start(
        &[
            "--admin-socket",
            socket.to_str().unwrap(),
            "--lun",
            "ram:1MiB",
        ],
        1,
    );
    assert!(ctl_ok(&socket, &["ls"]).contains("lun0"));
    assert!(server.stop());

    // admin_socket in stint.toml is relative to the file's directory.
    let config = dir.path().join("stint.toml");
    std::fs::write(
        &config,
        "admin_socket = \"run.sock\"\n[[target]]\nname = \"iqn.2026-11.dev.stint:rel\"\n\
         [[target.lun]]\nstore = \"ram\"\nsize = \"1MiB\"\n",
    )
    .unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap()], 1);
    let socket = dir.path().join("run.sock");
    assert!(ctl_ok(&socket, &["ls"]).contains("iqn.2026-11.dev.stint:rel"));
    assert!(server.stop());
    assert!(!socket.exists());
}

#[test]
fn ctl_finds_the_default_socket() {
    use std::os::unix::fs::PermissionsExt;
    let runtime = tempfile::tempdir().unwrap();
    let xdg = runtime.path().to_str().unwrap();
    let env = [("XDG_RUNTIME_DIR", xdg), ("RUNTIME_DIRECTORY", "")];
    let ctl_env = |args: &[&str], extra: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_stint"));
        command
            .env("XDG_RUNTIME_DIR", xdg)
            .env_remove("RUNTIME_DIRECTORY")
            .env_remove("STINT_ADMIN_SOCKET");
        for (k, v) in extra {
            command.env(k, v);
        }
        command.arg("ctl").args(args).output().unwrap()
    };
    let first = Server::start_with_env(&["--lun", "ram:1MiB"], 1, &env);
    let port = first.portal().rsplit(':').next().unwrap().to_owned();
    let dir = runtime.path().join("stint");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{} mode {mode:o}", dir.display());
    let socket = dir.join(format!("{port}.sock"));
    assert!(socket.exists(), "no {}", socket.display());
    // A stale socket beside it is ignored.
    drop(std::os::unix::net::UnixListener::bind(dir.join("1.sock")).unwrap());
    let out = ctl_env(&["ls"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Two live servers: the error names both; STINT_ADMIN_SOCKET picks one.
    let second = Server::start_with_env(&["--lun", "ram:2MiB"], 1, &env);
    let out = ctl_env(&["ls"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2 stint serve admin sockets") && err.contains(socket.to_str().unwrap()),
        "{err}"
    );
    let socket = socket.to_str().unwrap();
    let out = ctl_env(&["ls"], &[("STINT_ADMIN_SOCKET", socket)]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 MiB"));
    assert!(first.stop() && second.stop());
    let out = ctl_env(&["ls"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no admin socket of a running stint serve in"),
        "{err}"
    );
}

/// Beside the socket's mode 0600, the server checks each client's uid (SO_PEERCRED): with the
/// mode opened up, another user is still refused. Needs root (to run the client as nobody)
/// and setpriv; skipped otherwise.
#[test]
fn another_user_is_refused_even_through_an_open_socket() {
    use std::os::unix::fs::PermissionsExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    if !root || Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: needs root and setpriv");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let open = std::fs::Permissions::from_mode(0o755);
    std::fs::set_permissions(dir.path(), open).unwrap();
    let socket = dir.path().join("admin.sock");
    let server = Server::start(
        &[
            "--admin-socket",
            socket.to_str().unwrap(),
            "--lun",
            "ram:1MiB",
        ],
        1,
    );
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
        ])
        .arg(env!("CARGO_BIN_EXE_stint"))
        .args(["ctl", "--socket", socket.to_str().unwrap(), "ls"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("uid 65534 may not use this admin socket (the server runs as uid 0"),
        "{err}"
    );
    assert!(server.stop());
}

/// `name{k="v",...} value` lines of a scrape, by series: labels sorted, as `stats` keys them.
fn scrape_series(text: &str) -> std::collections::BTreeMap<String, f64> {
    let mut series = std::collections::BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (name_labels, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match name_labels.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').unwrap()),
            None => (name_labels, ""),
        };
        // No label value of these LUNs holds a quote or a comma.
        let mut labels: Vec<&str> = labels.split(',').filter(|l| !l.is_empty()).collect();
        labels.sort();
        let value = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap(),
        };
        series.insert(format!("{name}{{{}}}", labels.join(",")), value);
    }
    series
}

/// `stats`' samples keyed as [`scrape_series`] keys them.
fn stats_series(stats: &serde_json::Value) -> std::collections::BTreeMap<String, f64> {
    let samples = stats["samples"].as_array().unwrap();
    samples
        .iter()
        .map(|s| {
            let labels: Vec<String> = s["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let value = s["value"].as_f64().unwrap();
            (
                format!("{}{{{}}}", s["name"].as_str().unwrap(), labels.join(",")),
                value,
            )
        })
        .collect()
}

/// `stats` and the metrics endpoint are one source: after I/O on the CDL disk (whose latency
/// histograms `--metrics` keeps), the LUN's series are the same, value for value.
#[test]
fn stats_are_the_metrics_endpoints_series() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("admin.sock");
    let server = Server::start(
        &[
            "--admin-socket",
            socket.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
            "--lun",
            "ram:16MiB",
            "--lun",
            "hdd",
        ],
        2,
    );
    let url = server.urls[1].clone();
    let out = Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(["bench", "--url", &url, "--rw", "randread", "--bs", "4k"])
        .args(["--iodepth", "4", "--runtime", "1s"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metrics = server.metrics.clone().unwrap();
    let addr = metrics
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");
    let mut http = std::net::TcpStream::connect(addr).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    http.read_to_string(&mut response).unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1;
    let lun1 = "lun=\"1\"";
    let scraped: std::collections::BTreeMap<String, f64> = scrape_series(body)
        .into_iter()
        .filter(|(series, _)| series.contains(lun1))
        .collect();
    let stats = stats_series(&stats(&socket, "1"));
    assert!(
        stats
            .keys()
            .any(|s| s.starts_with("stint_class_latency_seconds_bucket{")),
        "{stats:?}"
    );
    assert_eq!(stats, scraped);
    assert!(server.stop());
}

/// REPORT LUNS of LUN 0 as the session sees it.
async fn report_luns(s: &mut Initiator) -> Vec<u64> {
    let cdb = [0xA0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    let r = s.scsi_command(0, &cdb, &[], 4096).await.unwrap();
    assert_eq!(r.status, 0, "{:?}", r.parsed_sense());
    r.data_in[8..]
        .chunks(8)
        .map(|e| u64::from(u16::from_be_bytes([e[0] & 0x3F, e[1]])))
        .collect()
}

#[test]
fn ctl_lists_sessions_changes_luns_reloads_and_logs_a_session_out() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("admin.sock");
    let config = dir.path().join("stint.toml");
    let lun0 = "[[target.lun]]\nstore = \"ram\"\nsize = \"16MiB\"\n";
    let file = format!("[[target]]\nname = \"{TARGET}\"\n{lun0}");
    std::fs::write(&config, &file).unwrap();
    let server = Server::start(
        &[
            "--config",
            config.to_str().unwrap(),
            "--admin-socket",
            socket.to_str().unwrap(),
        ],
        1,
    );
    let initiator = "iqn.2026-11.dev.stint:ctl-host";
    common::runtime().block_on(async {
        let opts = LoginOptions::new(initiator, Some(TARGET));
        let mut s = Initiator::connect_portal(&server.portal(), &opts)
            .await
            .unwrap();
        let _power_on = s.scsi_command(0, &test_unit_ready(), &[], 0).await;

        // sessions: who, from where, with which keys, and the bytes both ways.
        let out = ctl_ok(&socket, &["--json", "sessions"]);
        let list: serde_json::Value = serde_json::from_str(&out).unwrap();
        let one = &list[0];
        assert_eq!(one["initiator"], initiator, "{out}");
        assert_eq!(one["target"], TARGET);
        assert_eq!(one["tsih"], s.tsih());
        assert_eq!(one["authentication"], "none");
        assert_eq!(one["keys"]["HeaderDigest"], "None");
        assert!(one["bytes_received"].as_u64().unwrap() >= 48 * 2, "{out}");
        assert!(one["bytes_sent"].as_u64().unwrap() >= 48 * 2, "{out}");
        let table = ctl_ok(&socket, &["sessions"]);
        assert!(table.contains(initiator), "{table}");

        // lun add / remove, seen by the session.
        let added = ctl_ok(&socket, &["lun", "add", TARGET, "ram:8MiB"]);
        assert!(added.contains("LUN 1 added"), "{added}");
        assert_eq!(report_luns(&mut s).await, [0, 1]);
        assert!(ctl_ok(&socket, &["ls"]).contains("lun1"));
        let out = ctl(&socket, &["lun", "add", TARGET, "ram:8MiB", "--lun", "1"]);
        assert_eq!(out.status.code(), Some(1));
        let removed = ctl_ok(&socket, &["lun", "remove", TARGET, "1"]);
        assert!(removed.contains("LUN 1 removed"), "{removed}");
        assert_eq!(report_luns(&mut s).await, [0]);
        let out = ctl(&socket, &["lun", "remove", TARGET, "0"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("the last of target"), "{err}");

        // lun resize: grown at once, announced; a shrink needs --shrink.
        let grown = ctl_ok(&socket, &["lun", "resize", TARGET, "0", "32MiB"]);
        assert!(grown.contains("is now 33554432 bytes"), "{grown}");
        // After the inventory changes' REPORTED LUNS DATA HAS CHANGED.
        let mut attentions = Vec::new();
        loop {
            let r = s.scsi_command(0, &test_unit_ready(), &[], 0).await.unwrap();
            let Some(a) = common::cdb::sense(&r) else {
                break;
            };
            attentions.push(a.1);
        }
        assert!(
            attentions.contains(&scsi::Asc::CAPACITY_DATA_HAS_CHANGED),
            "{attentions:?}"
        );
        let out = ctl(&socket, &["lun", "resize", TARGET, "0", "16MiB"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--shrink"), "{err}");
        let listing = ctl_ok(&socket, &["--json", "ls"]);
        let listing: serde_json::Value = serde_json::from_str(&listing).unwrap();
        assert_eq!(listing["targets"][0]["luns"][0]["size"], 32 << 20);
        // The file still says 16 MiB: what follows is written with the new size.
        let file = file.replace("16MiB", "32MiB");

        // reload: the file's change is applied and named; a bad file is refused whole.
        let lun2 = "[[target.lun]]\nid = 2\nstore = \"ram\"\nsize = \"4MiB\"\n";
        std::fs::write(&config, format!("{file}{lun2}")).unwrap();
        let reloaded = ctl_ok(&socket, &["reload"]);
        assert!(reloaded.contains("LUN 2 added"), "{reloaded}");
        assert_eq!(report_luns(&mut s).await, [0, 2]);
        std::fs::write(&config, format!("{file}{lun2}listen = 5\n")).unwrap();
        let out = ctl(&socket, &["reload"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("stint.toml"), "{err}");
        assert_eq!(report_luns(&mut s).await, [0, 2]);

        // logout: the initiator is asked (AsyncEvent 1); an unknown session is named.
        let id = one["id"].as_u64().unwrap().to_string();
        let out = ctl(&socket, &["logout", "999"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no session 999"), "{err}");
        ctl_ok(&socket, &["logout", &id]);
        let pdu = s
            .recv_timeout(std::time::Duration::from_secs(10))
            .await
            .unwrap()
            .expect("an Async Message");
        assert_eq!(pdu.bhs.opcode(), Some(iscsi::bhs::Opcode::AsyncMessage));
        assert_eq!(pdu.bhs.0[36], 1, "AsyncEvent: target requests Logout");
    });
    assert!(server.stop());
}
