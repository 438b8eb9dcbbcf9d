//! `stint completions SHELL` as a user installs it: a script each shell recognizes, naming every
//! subcommand and their flags; an unknown shell is a usage error.

use std::process::{Command, Output};

fn stint(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn each_shell_gets_a_script_naming_every_subcommand() {
    // What marks a script as that shell's: bash's `complete` call, zsh's compdef tag, fish's
    // `complete -c stint`.
    for (shell, marker) in [
        ("bash", "complete -F _stint"),
        ("zsh", "#compdef stint"),
        ("fish", "complete -c stint"),
    ] {
        let out = stint(&["completions", shell]);
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stderr.is_empty(), "{shell}: stderr not empty");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains(marker),
            "{shell}: no {marker:?} in\n{script}"
        );
        for word in [
            "serve",
            "bench",
            "cdl",
            "sim",
            "completions",
            "ctl",
            // flags of serve and bench (fish writes them `-l config`)
            "config",
            "url",
        ] {
            assert!(script.contains(word), "{shell}: {word} missing");
        }
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = stint(&["completions", "powershell"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with("error: invalid value 'powershell' for '<SHELL>'")
            && stderr.contains("[possible values: bash, zsh, fish]"),
        "{stderr}"
    );
}

#[test]
fn help_points_at_the_documentation() {
    for (args, doc) in [
        (&["--help"][..], "docs/"),
        (&["serve", "--help"][..], "docs/configuration.md"),
        (&["bench", "--help"][..], "docs/bench.md"),
        (&["cdl", "--help"][..], "docs/cdl-tool.md"),
        (&["sim", "--help"][..], "docs/experiments.md"),
        (&["ctl", "--help"][..], "docs/ctl.md"),
    ] {
        let out = stint(args);
        assert!(out.status.success());
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(help.contains(doc), "stint {args:?}: no {doc} in\n{help}");
        // Every doc named in a help text exists.
        for name in help.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')') {
            let name = name.trim_end_matches(['.', ';', ':']);
            if name.starts_with("docs/") || name.ends_with("README.md") {
                let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../..")
                    .join(name);
                assert!(
                    path.exists(),
                    "stint {args:?} names {name}, which does not exist"
                );
            }
        }
    }
}
