//! The experiments shipped in experiments/, built into the binary so `stint sim b1` runs them
//! from any directory (an installed `stint` has no repository beside it).

use crate::error::SimError;
use crate::experiment::Experiment;
use std::path::Path;

/// (id, file text) of every shipped experiment, in the order `stint sim --list` prints them.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    ("a1", include_str!("../../../experiments/a1.toml")),
    ("a2", include_str!("../../../experiments/a2.toml")),
    ("a3", include_str!("../../../experiments/a3.toml")),
    ("a4", include_str!("../../../experiments/a4.toml")),
    ("a5", include_str!("../../../experiments/a5.toml")),
    ("b1", include_str!("../../../experiments/b1.toml")),
    ("b2", include_str!("../../../experiments/b2.toml")),
    ("b3", include_str!("../../../experiments/b3.toml")),
    ("b4", include_str!("../../../experiments/b4.toml")),
    ("b5", include_str!("../../../experiments/b5.toml")),
    ("c1", include_str!("../../../experiments/c1.toml")),
    ("c2", include_str!("../../../experiments/c2.toml")),
    ("d1", include_str!("../../../experiments/d1.toml")),
    ("e1", include_str!("../../../experiments/e1.toml")),
    ("e2", include_str!("../../../experiments/e2.toml")),
    ("e3", include_str!("../../../experiments/e3.toml")),
    ("f1", include_str!("../../../experiments/f1.toml")),
];

/// (path as the shipped experiments name it, text) of the traces they replay.
pub const TRACES: &[(&str, &str)] = &[(
    "traces/stream-checkpoint.iolog",
    include_str!("../../../experiments/traces/stream-checkpoint.iolog"),
)];

/// The text of the shipped trace a shipped experiment names `path`.
pub fn trace(path: &str) -> Option<&'static str> {
    TRACES.iter().find(|(p, _)| *p == path).map(|(_, t)| *t)
}

/// (id, title) of every shipped experiment.
pub fn list() -> Vec<(&'static str, String)> {
    EXPERIMENTS
        .iter()
        .map(|(id, text)| {
            let title = Experiment::parse_shipped(text).map_or_else(|e| e.to_string(), |e| e.title);
            (*id, title)
        })
        .collect()
}

/// The experiment `arg` names: a file when one exists at that path, else a shipped experiment's
/// id ("b1"). An unknown name lists the shipped ones.
pub fn resolve(arg: &Path) -> Result<Experiment, SimError> {
    if arg.exists() {
        return Experiment::load(arg);
    }
    let name = arg.to_string_lossy();
    match EXPERIMENTS.iter().find(|(id, _)| *id == name) {
        // Shipped files use model names only, and their traces are built in.
        Some((_, text)) => Experiment::parse_shipped(text),
        None => {
            let ids: Vec<&str> = EXPERIMENTS.iter().map(|(id, _)| *id).collect();
            Err(SimError::Parse(format!(
                "no such file, and not a shipped experiment ({}; `stint sim --list` shows \
                 their titles)",
                ids.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new file in experiments/ is listed too, under its own id.
    #[test]
    fn every_experiment_file_is_shipped() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".toml").map(str::to_owned)
            })
            .collect();
        files.sort();
        let ids: Vec<&str> = EXPERIMENTS.iter().map(|(id, _)| *id).collect();
        assert_eq!(files, ids);
        for (id, title) in list() {
            let exp = Experiment::parse_shipped(EXPERIMENTS.iter().find(|e| e.0 == id).unwrap().1);
            assert_eq!(exp.unwrap().id, id);
            assert!(!title.is_empty());
        }
    }

    #[test]
    fn names_resolve_to_shipped_experiments() {
        assert_eq!(resolve(Path::new("b1")).unwrap().id, "b1");
        let err = resolve(Path::new("b9")).unwrap_err().to_string();
        assert!(err.contains("not a shipped experiment (a1, a2"), "{err}");
    }
}
