//! The shape the architecture promises (docs/architecture.md): the crates that make the
//! device (`device`, `qos`, `drive`) never start a thread or read a clock (time is passed in),
//! and `device`'s modules depend on each other without a cycle. Read from the sources, so a
//! change that breaks either fails here with the file and line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The source files of a crate of the workspace, by path.
fn sources(krate: &str) -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path, text));
            }
        }
    }
    files.sort();
    files
}

/// The code of a file without its comments and its `#[cfg(test)]` module (tests may use
/// threads and clocks to check concurrency).
fn code(text: &str) -> String {
    let body = text.split("#[cfg(test)]").next().unwrap_or(text);
    body.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_device_crates_start_no_thread_and_read_no_clock() {
    const FORBIDDEN: [&str; 8] = [
        "std::thread",
        "thread::spawn",
        "thread::sleep",
        "Instant::now",
        "SystemTime",
        "std::time::Instant",
        "tokio",
        "UNIX_EPOCH",
    ];
    let mut found = Vec::new();
    for krate in ["device", "qos", "drive"] {
        for (path, text) in sources(krate) {
            for (n, line) in code(&text).lines().enumerate() {
                for f in FORBIDDEN.iter().filter(|f| line.contains(**f)) {
                    found.push(format!("{}:{}: {f}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "threads or clocks in the device: {found:#?}"
    );
}

/// `device`'s modules and the modules each one names (`crate::module`, or an item the crate
/// root re-exports from it).
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = sources("device");
    let module = |p: &Path| p.file_stem().unwrap().to_string_lossy().into_owned();
    let modules: BTreeSet<String> = files
        .iter()
        .map(|(p, _)| module(p))
        .filter(|m| m != "lib")
        .collect();
    // Items the root re-exports: `pub use module::{A, B};` or `pub use module::A;`.
    let mut reexports = BTreeMap::new();
    let lib = &files.iter().find(|(p, _)| module(p) == "lib").unwrap().1;
    for line in code(lib).lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((m, items)) = rest.split_once("::") else {
            continue;
        };
        if !modules.contains(m) {
            continue;
        }
        for item in items.trim_matches(|c| "{};".contains(c)).split(',') {
            reexports.insert(item.trim().to_owned(), m.to_owned());
        }
    }
    let mut graph = BTreeMap::new();
    for (path, text) in &files {
        let from = module(path);
        if from == "lib" {
            continue;
        }
        let code = code(text);
        let mut to = BTreeSet::new();
        for part in code.split("crate::").skip(1) {
            let mut names = vec![part
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .unwrap_or("")
                .to_owned()];
            // `crate::{a, b::C}`
            if let Some(group) = part.strip_prefix('{') {
                names = group
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|s| s.trim().split("::").next().unwrap_or("").to_owned())
                    .collect();
            }
            for name in names {
                let target = if modules.contains(&name) {
                    Some(name)
                } else {
                    reexports.get(&name).cloned()
                };
                if let Some(t) = target.filter(|t| *t != from) {
                    to.insert(t);
                }
            }
        }
        graph.insert(from, to);
    }
    graph
}

#[test]
fn the_device_modules_depend_on_each_other_without_a_cycle() {
    let graph = module_graph();
    assert!(graph.len() > 10, "{graph:?}");
    // Depth-first search; a module met again while on the path closes a cycle.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_owned());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_owned());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        if let Some(cycle) = visit(m, &graph, &mut Vec::new(), &mut done) {
            panic!("a module cycle in device: {}", cycle.join(" -> "));
        }
    }
}
