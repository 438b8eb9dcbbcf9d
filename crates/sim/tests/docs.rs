//! The examples of the docs are real. Every ```toml block of docs/experiments.md is a complete
//! experiment file and every ```toml fragment block a part of one, merged over a minimal file
//! (tables key by key, arrays of tables element by element); each must load as `stint sim`
//! loads a file, relative paths taken from docs/. In docs/drive-profile.md, ```toml hdd
//! fragment and ```toml ssd fragment blocks are merged over the shipped profiles and must
//! parse and build a drive; a plain ```toml block there is an excerpt whose `[drive]` table
//! must deserialize.

use profile::DeviceSpec;
use sim::Experiment;
mod doc_blocks;

use doc_blocks::{merge, repository, toml_blocks};
use toml::Table;

/// What an experiment fragment is merged over.
const MINIMAL_EXPERIMENT: &str = "id = \"docs\"\nqd = [1]\n[drive]\nmodel = \"instant\"\n\
                                  [[job]]\nname = \"job\"\n";

/// `over` merged over `base`, as TOML text.
fn merged(base: &str, over: &str) -> Result<String, String> {
    let mut doc: Table = base.parse().map_err(|e| format!("{e}"))?;
    let over: Table = over.parse().map_err(|e| format!("{e}"))?;
    merge(&mut doc, &over);
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// A block of docs/experiments.md, loaded as `stint sim` loads a file in docs/.
fn experiment(info: &str, body: &str) -> Result<Experiment, String> {
    let text = match info {
        "toml" => body.to_owned(),
        "toml fragment" => merged(MINIMAL_EXPERIMENT, body)?,
        other => {
            return Err(format!(
                "unknown block kind ```{other} (toml or toml fragment)"
            ))
        }
    };
    Experiment::parse_in(&text, &repository().join("docs")).map_err(|e| e.to_string())
}

/// A block of docs/drive-profile.md.
fn profile(info: &str, body: &str) -> Result<(), String> {
    let shipped = |name: &str| {
        std::fs::read_to_string(repository().join("crates/drive/profiles").join(name))
            .map_err(|e| format!("{name}: {e}"))
    };
    let (model, text) = match info {
        "toml" => {
            #[derive(serde::Deserialize)]
            #[allow(dead_code)]
            struct Excerpt {
                drive: DeviceSpec,
            }
            return toml::from_str::<Excerpt>(body)
                .map(|_| ())
                .map_err(|e| e.to_string());
        }
        "toml hdd fragment" => ("hdd", merged(&shipped("hdd-22tb-cmr.toml")?, body)?),
        "toml ssd fragment" => ("ssd", merged(&shipped("ssd-nvme-tlc.toml")?, body)?),
        other => {
            return Err(format!(
                "unknown block kind ```{other} (toml, toml hdd fragment or toml ssd fragment)"
            ))
        }
    };
    let config = drive::DriveConfig::from_profile(model, &text).map_err(|e| e.to_string())?;
    config.build().map(|_| ()).map_err(|e| e.to_string())
}

/// Checks every toml block of `doc` with `load`; returns how many there are.
fn check(doc: &str, load: fn(&str, &str) -> Result<(), String>) -> usize {
    let text =
        std::fs::read_to_string(repository().join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let blocks = toml_blocks(&text);
    for (line, info, body) in &blocks {
        if let Err(e) = load(info, body) {
            panic!("{doc}:{line}: the ```{info} block does not load: {e}");
        }
    }
    blocks.len()
}

#[test]
fn experiments_md_examples_load() {
    let n = check("docs/experiments.md", |info, body| {
        experiment(info, body).map(|_| ())
    });
    assert!(n >= 6, "only {n} toml blocks");
}

#[test]
fn drive_profile_md_examples_load() {
    let n = check("docs/drive-profile.md", profile);
    assert!(n >= 3, "only {n} toml blocks");
}

#[test]
fn a_bad_example_would_fail() {
    assert!(experiment(
        "toml fragment",
        "[queue]\nscheduler = \"bounded:window_ms=5\""
    )
    .is_err());
    assert!(experiment("toml fragment", "[[job]]\nbogus = 1").is_err());
    assert!(experiment("toml", "id = \"x\"\nqd = [1]\n[[job]]\nname = \"j\"").is_err());
    assert!(experiment("toml fragment", "[[variant]]\nname = \"v\"\nqd = [2]").is_err());
    assert!(profile("toml hdd fragment", "[seek]\nshape = [[0.5, 0.5]]").is_err());
    assert!(profile("toml ssd fragment", "bogus = 1").is_err());
    assert!(profile("toml", "[drive]\nmodel = \"hdd\"\nprofle = \"x.toml\"").is_err());
    assert!(experiment("toml fragment", "title = \"ok\"").is_ok());
}
