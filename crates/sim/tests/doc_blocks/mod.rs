//! Fenced ```toml blocks of the docs, and merging a fragment over a minimal file: shared by the
//! tests that keep docs/*.md true (this crate's `docs` test and the stint.toml checks in
//! crates/cli/src/config.rs, which include this file by path).

use std::path::{Path, PathBuf};
use toml::{Table, Value};

pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (line, info string, text) of every fenced block whose language is toml.
pub fn toml_blocks(doc: &str) -> Vec<(usize, String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for (n, line) in doc.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => open = Some((n + 1, info.trim().to_owned(), String::new())),
            (Some(_), Some("")) => {
                let block = open.take().expect("a block is open");
                if block.1.split_whitespace().next() == Some("toml") {
                    blocks.push(block);
                }
            }
            (Some((_, _, text)), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a fenced block is not closed");
    blocks
}

pub fn merge(base: &mut Table, over: &Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            (Some(Value::Array(b)), Value::Array(o)) => {
                for (i, item) in o.iter().enumerate() {
                    match (b.get_mut(i), item) {
                        (Some(Value::Table(bt)), Value::Table(ot)) => merge(bt, ot),
                        (Some(slot), _) => *slot = item.clone(),
                        (None, _) => b.push(item.clone()),
                    }
                }
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}
