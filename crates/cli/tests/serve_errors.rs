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
        "[[target]]\nname = \"iqn.x\"\n[[target.lun]]\nstore = \"ram\"\nsize = 1000\n",
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--lun".into(), "tape:1G".into()],
            "expected ram:SIZE, file:PATH[:SIZE] or hdd",
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
    for (args, want) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, err) = serve(&args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
