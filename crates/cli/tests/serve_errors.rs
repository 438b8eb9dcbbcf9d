//! Bad `stint serve` arguments and configs end with a precise message and a non-zero exit,
//! never a panic.

use std::process::Command;

fn serve(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stint"))
        .arg("serve")
        .args(args)
        .output()
        .expect("run stint");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_arguments_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.img");
    let bad_toml = dir.path().join("bad.toml");
    std::fs::write(
        &bad_toml,
        "[[target]]\nname = \"iqn.2026-11.dev.stint:x\"\n[[target.lun]]\nstore = \"ram\"\nsize = 1000\n",
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--lun".into(), "tape:1G".into()],
            "expected ram:SIZE, file:PATH[:SIZE], block:DEVICE[:SIZE], rbd:POOL/IMAGE[:CONF] or hdd",
        ),
        (vec!["--lun".into(), "ram:lots".into()], "invalid size"),
        (
            vec!["--listen".into(), "nowhere".into()],
            "invalid socket address",
        ),
        (
            vec!["--lun".into(), format!("file:{}", missing.display())],
            "no size was given",
        ),
        (
            vec!["--config".into(), bad_toml.display().to_string()],
            "multiple of the block size",
        ),
        (
            vec![
                "--config".into(),
                dir.path().join("none.toml").display().to_string(),
            ],
            "reading",
        ),
    ];
    // CHAP tables (issue 11): each mistake is named; nothing listens.
    let open_secret = dir.path().join("open.secret");
    std::fs::write(&open_secret, "readable-by-all-99\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let everyone = std::fs::Permissions::from_mode(0o644);
        std::fs::set_permissions(&open_secret, everyone).unwrap();
    }
    let lun = "[[target.lun]]\nstore = \"ram\"\nsize = \"1MiB\"\n";
    let chap_cases = [
        (
            "chap = { user = \"a\", secret_file = \"open.secret\" }",
            "is readable by everyone (mode 644); `chmod o-r` it",
        ),
        (
            "chap = { user = \"a\", secret = \"short\" }",
            "the secret has 5 bytes; CHAP secrets need at least 12",
        ),
        (
            "chap = { user = \"a\", secret = \"same-secret-12\" }\nmutual_chap = { user = \"t\", secret = \"same-secret-12\" }",
            "mutual_chap must not use the initiator's secret",
        ),
        (
            "mutual_chap = { user = \"t\", secret = \"target-secret-12\" }",
            "mutual_chap needs chap",
        ),
        (
            "chap = { user = \"a\", secret = \"inline-secret-12\", secret_file = \"open.secret\" }",
            "give exactly one of secret and secret_file",
        ),
    ];
    let mut cases = cases;
    for (i, (chap, want)) in chap_cases.into_iter().enumerate() {
        let path = dir.path().join(format!("chap{i}.toml"));
        let text = format!("[[target]]\nname = \"iqn.2026-11.t:c\"\n{chap}\n{lun}");
        std::fs::write(&path, text).unwrap();
        cases.push((vec!["--config".into(), path.display().to_string()], want));
    }
    for (args, want) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, err) = serve(&args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// CPU time (clock ticks) the process has used: utime + stime of /proc/PID/stat.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name, which ends at the last ')': state is field 3, utime 14.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Out of file descriptors, the accept loop waits for some to close instead of spinning
/// (issue 11: 98 % of a CPU).
#[test]
fn out_of_descriptors_the_server_does_not_spin() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new("sh")
        .args([
            "-c",
            "ulimit -n 32 && exec \"$0\" serve --listen 127.0.0.1:0 --lun ram:1MiB",
            env!("CARGO_BIN_EXE_stint"),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start stint serve");
    let url = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("iscsi://"))
        .expect("a URL");
    let portal = url["iscsi://".len()..]
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    // More connections than the server has descriptors left for.
    let clients: Vec<_> = (0..64)
        .map(|_| std::net::TcpStream::connect(&portal).unwrap())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = cpu_ticks(child.id());
    std::thread::sleep(std::time::Duration::from_secs(1));
    let used = cpu_ticks(child.id()) - before;
    let _ = child.kill();
    let _ = child.wait();
    drop(clients);
    // A spinning accept loop uses about 100 ticks in that second.
    assert!(used < 30, "{used} ticks of CPU in one second");
}

/// docs/commands.md's list of supported commands is what `stint serve --list-commands` prints
/// from the command table, so a command added to the table without the doc fails here.
#[test]
fn the_docs_list_exactly_the_command_table() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(["serve", "--list-commands"])
        .output()
        .expect("run stint");
    assert!(out.status.success());
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(listed.contains("| 42h |  | UNMAP | 10 | out | thin-provisioned LUs only |"));
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/commands.md"
    ))
    .unwrap();
    let start = "<!-- stint serve --list-commands -->\n";
    let block = doc
        .split_once(start)
        .and_then(|(_, rest)| rest.split_once("<!-- end -->"))
        .map(|(block, _)| block)
        .expect("docs/commands.md has the command list between its markers");
    assert_eq!(
        block, listed,
        "docs/commands.md's command list differs from `stint serve --list-commands`; paste its output"
    );
    // Listing conflicts with serving.
    let both = std::process::Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(["serve", "--list-commands", "--lun", "ram:1MiB"])
        .output()
        .expect("run stint");
    assert!(!both.status.success());
}
