//! `stint serve --metrics`: the Prometheus endpoint scraped before and after I/O sent with the
//! crate's initiator, parsed, and its counters checked against exactly what was sent and what
//! came back, on a RAM LUN, the CDL hard disk (`--lun hdd`) and the fast-fail disk of
//! examples/fast-fail.toml; and the endpoint's answers to other requests and its bounds.

mod common;
use common::cdb::{read, rw, sense, test_unit_ready, write, Cdb};
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use scsi::command::ReadWrite;
use scsi::{form, Asc, SenseKey, Status};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const FAST_FAIL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/fast-fail.toml");
const CHECK_CONDITION: u8 = Status::CheckCondition as u8;
/// The Grafana dashboard shipped for these metrics.
const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/grafana/stint.json"
);

/// One sample of the exposition text.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed scrape (Prometheus text format 0.0.4).
#[derive(Debug)]
struct Scrape(Vec<Sample>);

/// `k="v",...` up to the closing brace, with the format's escapes (\\, \", \n).
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").expect("label=\"value\"");
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next().expect("closing quote") {
                (_, '\\') => match chars.next().expect("escape").1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.to_owned(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    labels
}

fn parse(text: &str) -> Scrape {
    let mut typed = BTreeSet::new();
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(typed.insert(name.to_owned()), "{name} typed twice");
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("series value");
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, parse_labels(labels.strip_suffix('}').expect("}"))),
            None => (series, BTreeMap::new()),
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains(*f)))
            .unwrap_or(name);
        assert!(typed.contains(family), "{name} has no # TYPE before it");
        assert!(name.starts_with("stint_"), "{name}");
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value: value.parse().unwrap_or_else(|e| panic!("{line}: {e}")),
        });
    }
    Scrape(samples)
}

impl Scrape {
    /// The sample `name` whose labels include `labels`; 0 when there is none (a series
    /// appears once it counts something).
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found: Vec<&Sample> = self
            .0
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v))
            })
            .collect();
        assert!(
            found.len() <= 1,
            "{name} {labels:?} is ambiguous: {found:?}"
        );
        found.first().map_or(0.0, |s| s.value)
    }

    /// A histogram's buckets (upper bound, cumulative count), in order.
    fn buckets(&self, name: &str, labels: &[(&str, &str)]) -> Vec<(f64, f64)> {
        let bucket = format!("{name}_bucket");
        self.0
            .iter()
            .filter(|s| s.name == bucket)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v))
            })
            .map(|s| {
                let le = &s.labels["le"];
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                (bound, s.value)
            })
            .collect()
    }
}

/// Sends `request` to the endpoint of `url` (http://ADDR/metrics); returns the status line,
/// the header lines and the body, or `None` when the connection closed without an answer.
async fn http(url: &str, request: &[u8]) -> Option<(String, String, String)> {
    let addr = url.trim_start_matches("http://").split('/').next().unwrap();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // The server may close first (a refused connection): a failed write is no answer.
    let _ = stream.write_all(request).await;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("an answer within 10 s")
        .ok()?;
    let text = String::from_utf8(response).unwrap();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    Some((status.to_owned(), headers.to_owned(), body.to_owned()))
}

async fn scrape(server: &Server) -> Scrape {
    let url = server.metrics.as_deref().expect("--metrics URL printed");
    let (status, headers, body) = http(url, b"GET /metrics HTTP/1.1\r\nHost: stint\r\n\r\n")
        .await
        .expect("an answer");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{headers}"
    );
    parse(&body)
}

fn read16(lba: u64, blocks: u32, dld: u8) -> Cdb {
    read(
        form::READ_16,
        ReadWrite {
            dld,
            ..rw(lba, blocks)
        },
    )
}

fn write16(lba: u64, blocks: u32, dld: u8) -> Cdb {
    write(
        form::WRITE_16,
        ReadWrite {
            dld,
            ..rw(lba, blocks)
        },
    )
}

/// A deterministic spread of LBAs over the whole 22 TB disk.
fn spread(i: u64) -> u64 {
    const BLOCKS: u64 = 22_000_969_973_760 / 512;
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) % (BLOCKS - 256)
}

/// Logs in to the target of `url` and clears the power-on unit attention on `luns`.
async fn login(url: &str, luns: &[u64]) -> Initiator {
    let url: IscsiUrl = url.parse().unwrap();
    let opts = LoginOptions::new("iqn.2026-11.dev.stint:metrics-test", Some(&url.target));
    let mut s = Initiator::connect_portal(&url.portal, &opts).await.unwrap();
    for &lun in luns {
        let r = s
            .scsi_command(lun, &test_unit_ready(), &[], 0)
            .await
            .unwrap();
        assert_eq!(r.status, CHECK_CONDITION);
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_by_exactly_the_commands_sent() {
    let server = Server::start(
        &[
            "--metrics",
            "127.0.0.1:0",
            "--lun",
            "ram:64MiB",
            "--lun",
            "hdd",
        ],
        2,
    );
    let mut s = login(&server.urls[0], &[0, 1]).await;
    let before = scrape(&server).await;

    // RAM LUN 0: 10 reads of 8 blocks, 6 writes of 4, one read past the end.
    for i in 0..10 {
        let r = s
            .scsi_command(0, &read(form::READ_10, rw(i * 8, 8)), &[], 4096)
            .await
            .unwrap();
        assert_eq!(r.status, 0);
    }
    for i in 0..6 {
        let r = s
            .scsi_command(0, &write(form::WRITE_10, rw(i * 4, 4)), &[0x5A; 2048], 0)
            .await
            .unwrap();
        assert_eq!(r.status, 0);
    }
    let past = read(form::READ_10, rw((64 << 20) / 512 - 1, 2));
    let r = s.scsi_command(0, &past, &[], 1024).await.unwrap();
    assert_eq!(r.status, CHECK_CONDITION);

    // The CDL disk, LUN 1, all at once: 40 unlimited reads, 16 with DLD 1 (T2A: 50 ms
    // guideline), 8 writes with DLD 2 (T2B: 100 ms), 8 KiB each.
    let mut sent = 0;
    for i in 0..64u64 {
        let (cdb, data) = match i {
            0..40 => (read16(spread(i), 16, 0), Vec::new()),
            40..56 => (read16(spread(i), 16, 1), Vec::new()),
            _ => (write16(spread(i), 16, 2), vec![0xA5; 8192]),
        };
        let expect_in = if data.is_empty() { 8192 } else { 0 };
        s.submit(1, &cdb, data, expect_in).await.unwrap();
        sent += 1;
    }
    // While the drive works through them (about 8 ms each) the gauges see them, once the
    // portal has read them: scrape until they show, each scrape consistent.
    let hdd = [("lun", "1")];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let during = scrape(&server).await;
        let tasks = during.get("stint_task_set_tasks", &hdd);
        let queued = during.get("stint_device_queue_commands", &hdd);
        let waiting: f64 = ["urgent", "high", "medium", "low"]
            .iter()
            .map(|c| {
                during.get(
                    "stint_submission_queue_commands",
                    &[("lun", "1"), ("class", c)],
                )
            })
            .sum();
        assert!(tasks <= 64.0, "{tasks} tasks");
        assert!(queued <= 32.0, "the device queue is 32 deep: {queued}");
        assert_eq!(tasks, queued + waiting, "no ORDERED task holds any back");
        if tasks > 0.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task set never held a task"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for _ in 0..sent {
        let (_, r) = s.complete().await.unwrap();
        assert_eq!(r.status, 0);
    }
    s.logout().await.unwrap();
    let after = scrape(&server).await;
    let delta =
        |name: &str, labels: &[(&str, &str)]| after.get(name, labels) - before.get(name, labels);

    let ram = |kind, status| [("lun", "0"), ("kind", kind), ("status", status)];
    assert_eq!(delta("stint_commands_total", &ram("read", "good")), 10.0);
    assert_eq!(
        delta("stint_commands_total", &ram("read", "check_condition")),
        1.0
    );
    assert_eq!(delta("stint_commands_total", &ram("write", "good")), 6.0);
    assert_eq!(delta("stint_commands_total", &ram("other", "good")), 0.0);
    assert_eq!(
        delta("stint_read_bytes_total", &[("lun", "0")]),
        10.0 * 4096.0
    );
    assert_eq!(
        delta("stint_written_bytes_total", &[("lun", "0")]),
        6.0 * 2048.0
    );
    let lba_out_of_range = [
        ("lun", "0"),
        ("kind", "read"),
        ("sense_key", "illegal_request"),
        ("asc", "21h/00h"),
    ];
    assert_eq!(delta("stint_sense_total", &lba_out_of_range), 1.0);
    // A plain LUN has no task set.
    assert_eq!(after.get("stint_task_set_tasks", &[("lun", "0")]), 0.0);

    let hdd_cmd = |kind, status| [("lun", "1"), ("kind", kind), ("status", status)];
    assert_eq!(
        delta("stint_commands_total", &hdd_cmd("read", "good")),
        56.0
    );
    assert_eq!(
        delta("stint_commands_total", &hdd_cmd("write", "good")),
        8.0
    );
    assert_eq!(delta("stint_read_bytes_total", &hdd), 56.0 * 8192.0);
    assert_eq!(delta("stint_written_bytes_total", &hdd), 8.0 * 8192.0);
    for (kind, dld, n) in [
        ("read", "0", 40.0),
        ("read", "1", 16.0),
        ("write", "2", 8.0),
    ] {
        let labels = [("lun", "1"), ("kind", kind), ("dld", dld)];
        let count = "stint_descriptor_latency_seconds_count";
        assert_eq!(delta(count, &labels), n, "{kind} DLD {dld}");
        let buckets = after.buckets("stint_descriptor_latency_seconds", &labels);
        assert_eq!(buckets.len(), 18);
        assert!(buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(
            buckets.last().unwrap(),
            &(f64::INFINITY, after.get(count, &labels))
        );
        assert!(delta("stint_descriptor_latency_seconds_sum", &labels) > 0.0);
        if dld != "0" {
            assert_eq!(delta("stint_cdl_commands_total", &labels), n);
            let good = [
                ("lun", "1"),
                ("kind", kind),
                ("dld", dld),
                ("outcome", "good"),
            ];
            assert_eq!(delta("stint_cdl_completions_total", &good), n);
            let met = delta("stint_cdl_met_total", &labels);
            assert_eq!(met + delta("stint_cdl_missed_total", &labels), n);
        }
    }
    let medium = [("lun", "1"), ("class", "medium")];
    assert_eq!(delta("stint_class_commands_total", &medium), 64.0);
    assert_eq!(delta("stint_class_latency_seconds_count", &medium), 64.0);
    assert_eq!(after.get("stint_task_set_tasks", &hdd), 0.0);
    assert_eq!(after.get("stint_device_queue_commands", &hdd), 0.0);
    assert!(server.stop());
}

/// How a command ended for the host: DLD, status, sense key, ASC, ASCQ.
type Seen = (u8, u8, u8, u8, u8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdl_outcomes_are_counted_as_the_host_saw_them() {
    let server = Server::start(&["--config", FAST_FAIL, "--metrics", "127.0.0.1:0"], 1);
    let mut s = login(&server.urls[0], &[0]).await;
    let before = scrape(&server).await;
    // 96 random 64 KiB reads at once, a third each with DLD 0, 1 (30 ms, Fh) and 2 (30 ms,
    // Dh): many limited ones miss and end early.
    let mut dld_of = BTreeMap::new();
    for i in 0..96u64 {
        let dld = (i % 3) as u8;
        let itt = s
            .submit(0, &read16(spread(i), 128, dld), Vec::new(), 128 * 512)
            .await
            .unwrap();
        dld_of.insert(itt, dld);
    }
    // What the host saw: commands by (DLD, status, sense key, ASC, ASCQ).
    let mut seen = BTreeMap::<Seen, u32>::new();
    for _ in 0..96 {
        let (itt, r) = s.complete().await.unwrap();
        let (key, Asc(asc, ascq)) = sense(&r).map_or((0, Asc(0, 0)), |(k, a)| (k as u8, a));
        *seen
            .entry((dld_of[&itt], r.status, key, asc, ascq))
            .or_default() += 1;
    }
    s.logout().await.unwrap();
    let after = scrape(&server).await;
    let delta =
        |name: &str, labels: &[(&str, &str)]| after.get(name, labels) - before.get(name, labels);
    let count = |f: &dyn Fn(&Seen) -> bool| -> f64 {
        seen.iter()
            .filter(|(k, _)| f(k))
            .map(|(_, n)| f64::from(*n))
            .sum()
    };

    let good = count(&|k| k.1 == 0);
    let failed = count(&|k| k.1 == CHECK_CONDITION);
    assert_eq!(good + failed, 96.0, "{seen:?}");
    // Each ended on the drive model's clock and was handed to its connection at least once
    // (to run its store operation, then with its answer): every hand-off is timed until the
    // connection wrote what followed (the portal-wide histogram, no labels).
    let handed = delta("stint_delivery_seconds_count", &[]);
    assert!(handed >= 96.0, "{handed} hand-offs timed");
    assert!(failed > 0.0, "some limited reads missed: {seen:?}");
    let read = |status| [("kind", "read"), ("status", status)];
    assert_eq!(delta("stint_commands_total", &read("good")), good);
    assert_eq!(
        delta("stint_commands_total", &read("check_condition")),
        failed
    );
    // Every sense the host got, counted by key and ASC/ASCQ.
    let senses: BTreeSet<(u8, u8, u8)> = seen
        .keys()
        .filter(|k| k.1 != 0)
        .map(|k| (k.2, k.3, k.4))
        .collect();
    for (key, asc, ascq) in senses {
        let name = match SenseKey::from_code(key) {
            Some(SenseKey::AbortedCommand) => "aborted_command",
            Some(SenseKey::Completed) => "completed",
            Some(SenseKey::MediumError) => "medium_error",
            other => panic!("unexpected sense key {other:?}"),
        };
        let asc_label = format!("{asc:02X}h/{ascq:02X}h");
        let labels = [
            ("kind", "read"),
            ("sense_key", name),
            ("asc", asc_label.as_str()),
        ];
        let n = count(&|k| (k.2, k.3, k.4) == (key, asc, ascq));
        assert_eq!(delta("stint_sense_total", &labels), n, "{labels:?}");
    }
    // Per descriptor: Fh aborts before or during processing, Dh completes unavailable; each
    // such end is a guideline miss under that policy.
    for (dld, outcome, asc, policy) in [
        (
            1,
            "aborted_before_processing",
            Asc::COMMAND_TIMEOUT_BEFORE_PROCESSING,
            "Fh",
        ),
        (
            1,
            "aborted_during_processing",
            Asc::COMMAND_TIMEOUT_DURING_PROCESSING,
            "Fh",
        ),
        (
            2,
            "completed_unavailable",
            Asc::DATA_CURRENTLY_UNAVAILABLE,
            "Dh",
        ),
    ] {
        let d = dld.to_string();
        let labels = [("kind", "read"), ("dld", d.as_str()), ("outcome", outcome)];
        let n = count(&|k| k.0 == dld && Asc(k.3, k.4) == asc);
        assert_eq!(
            delta("stint_cdl_completions_total", &labels),
            n,
            "{labels:?}"
        );
        let missed = [
            ("kind", "read"),
            ("dld", d.as_str()),
            ("limit", "guideline"),
            ("policy", policy),
        ];
        let medium_error = SenseKey::MediumError as u8;
        let ended = count(&|k| k.0 == dld && k.1 == CHECK_CONDITION && k.2 != medium_error);
        assert_eq!(
            delta("stint_cdl_limit_misses_total", &missed),
            ended,
            "{missed:?}"
        );
    }
    // Every series the dashboard queries is one this server exports (CDL misses, classes,
    // descriptors and sense all counted something by now).
    let dashboard = std::fs::read_to_string(DASHBOARD).unwrap();
    let queried: BTreeSet<&str> = dashboard
        .match_indices("stint_")
        .map(|(at, _)| {
            let rest = &dashboard[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    assert!(queried.len() >= 10, "{queried:?}");
    for name in &queried {
        assert!(
            after.0.iter().any(|s| s.name == *name),
            "examples/grafana/stint.json queries {name}, which the server does not export"
        );
    }
    for dld in [1u8, 2] {
        let d = dld.to_string();
        let labels = [("kind", "read"), ("dld", d.as_str())];
        assert_eq!(delta("stint_cdl_commands_total", &labels), 32.0);
        assert_eq!(
            delta("stint_descriptor_latency_seconds_count", &labels),
            32.0
        );
        let ok = count(&|k| k.0 == dld && k.1 == 0);
        assert!(delta("stint_cdl_met_total", &labels) <= ok);
    }
    assert!(server.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_answers_only_metrics_and_bounds_its_clients() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("stint.toml");
    std::fs::write(
        &config,
        "metrics = \"127.0.0.1:0\"\n[[target]]\nname = \"iqn.2026-11.dev.stint:m\"\n\
         [[target.lun]]\nstore = \"ram\"\nsize = \"1MiB\"\n",
    )
    .unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap()], 1);
    let url = server
        .metrics
        .clone()
        .expect("the config's metrics address");
    let (status, _, body) = http(&url, b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 404 Not Found", "only GET /metrics is served\n")
    );
    let (status, ..) = http(&url, b"PUT /metrics HTTP/1.1\r\n\r\n").await.unwrap();
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, ..) = http(&url, b"\x16\x03\x01\x02\x00\x01\x00\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    let mut long = b"GET /metrics HTTP/1.1\r\nX-Long: ".to_vec();
    long.resize(16 * 1024, b'a');
    let (status, ..) = http(&url, &long).await.unwrap();
    assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");

    // Eight idle clients take every slot: a ninth is closed unanswered, and the iSCSI
    // portal still serves. Once they go, scrapes are answered again.
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut idle = Vec::new();
    for _ in 0..8 {
        let mut c = TcpStream::connect(&addr).await.unwrap();
        c.write_all(b"GET /met").await.unwrap();
        idle.push(c);
    }
    // Once the server has taken them all in, a scrape goes unanswered.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while http(&url, b"GET /metrics HTTP/1.1\r\n\r\n").await.is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a ninth client was served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut s = login(&server.urls[0], &[0]).await;
    let r = s
        .scsi_command(0, &read(form::READ_10, rw(0, 1)), &[], 512)
        .await
        .unwrap();
    assert_eq!(r.status, 0);
    drop(idle);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        if let Some((status, _, body)) = http(&url, b"GET /metrics HTTP/1.0\r\n\r\n").await {
            assert_eq!(status, "HTTP/1.1 200 OK");
            let m = parse(&body);
            let reads = [("lun", "0"), ("kind", "read"), ("status", "good")];
            assert_eq!(m.get("stint_commands_total", &reads), 1.0);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "slots never freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.logout().await.unwrap();
    assert!(server.stop());
}
