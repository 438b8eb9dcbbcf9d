//! `stint ctl`'s output for a person: `ls` as a tree, `sessions` as a table, `stats` as
//! aligned series.

use crate::admin::proto::{Listing, SessionInfo, Stats};

/// Bytes in binary units: "16 MiB", "1.5 GiB", "512 B".
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let exp = UNITS
        .iter()
        .enumerate()
        .rev()
        .find(|(i, _)| bytes >> (10 * i) > 0)
        .map_or(0, |(i, _)| i);
    let unit = 1u64 << (10 * exp);
    if bytes.is_multiple_of(unit) {
        format!("{} {}", bytes / unit, UNITS[exp])
    } else {
        format!("{:.1} {}", bytes as f64 / unit as f64, UNITS[exp])
    }
}

/// The tree `targetcli ls` draws: a target, then its LUNs.
pub fn ls(listing: &Listing) -> String {
    let mut rows = Vec::new();
    for t in &listing.targets {
        let mut about = vec![format!(
            "{} LUN{}",
            t.luns.len(),
            if t.luns.len() == 1 { "" } else { "s" }
        )];
        if let Some(alias) = &t.alias {
            about.insert(0, format!("alias {alias}"));
        }
        about.push(match (t.chap, t.mutual_chap) {
            (false, _) => "no auth".into(),
            (true, false) => "chap".into(),
            (true, true) => "mutual chap".into(),
        });
        about.push(initiators(&t.allowed_initiators));
        rows.push((format!("o- {}", t.name), about.join(", ")));
        for l in &t.luns {
            let mut about = vec![
                l.store.clone(),
                human(l.size),
                format!("{}-byte blocks", l.block_size),
            ];
            about.extend(l.queue.clone());
            if l.cdl {
                about.push("CDL".into());
            }
            about.push(l.alua.clone());
            if l.read_only {
                about.push("read-only".into());
            }
            if !l.allowed_initiators.is_empty() {
                about.push(initiators(&l.allowed_initiators));
            }
            rows.push((format!("  o- lun{}", l.lun), about.join(", ")));
        }
    }
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0) + 3;
    rows.iter()
        .map(|(name, about)| format!("{name} {:.<w$} [{about}]\n", "", w = width - name.len()))
        .collect()
}

fn initiators(list: &[String]) -> String {
    match list {
        [] => "any initiator".into(),
        list => format!("initiators {}", list.join(" ")),
    }
}

/// Left-aligned columns under a header.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

pub fn sessions(list: &[SessionInfo]) -> String {
    if list.is_empty() {
        return "no sessions\n".into();
    }
    let rows = list
        .iter()
        .map(|s| {
            vec![
                s.id.to_string(),
                s.initiator.clone(),
                s.address.clone(),
                s.target.clone().unwrap_or_else(|| "(discovery)".into()),
                s.isid.clone(),
                s.tsih.to_string(),
                s.authentication.clone(),
                s.in_flight.to_string(),
                human(s.bytes_received),
                human(s.bytes_sent),
            ]
        })
        .collect();
    let header = [
        "ID",
        "INITIATOR",
        "ADDRESS",
        "TARGET",
        "ISID",
        "TSIH",
        "AUTH",
        "IN-FLIGHT",
        "RECEIVED",
        "SENT",
    ];
    table(&header, rows)
}

/// `name{labels} value` rows, values aligned; the target and LUN labels, the same on every
/// row, are left out.
pub fn stats(stats: &Stats) -> String {
    let rows: Vec<(String, String)> = stats
        .samples
        .iter()
        .map(|s| {
            let labels: Vec<String> = s
                .labels
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "target" | "lun"))
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect();
            let series = match labels.is_empty() {
                true => s.name.clone(),
                false => format!("{}{{{}}}", s.name, labels.join(",")),
            };
            (series, s.value.to_string())
        })
        .collect();
    let width = rows.iter().map(|(s, _)| s.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(series, value)| format!("{series:<width$}  {value}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::proto::{LunInfo, TargetInfo};

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(512), "512 B");
        assert_eq!(human(16 << 20), "16 MiB");
        assert_eq!(human(3 << 29), "1.5 GiB");
        assert_eq!(human(22_000_000_000_000), "20.0 TiB");
    }

    #[test]
    fn ls_draws_a_tree() {
        let listing = Listing {
            targets: vec![TargetInfo {
                name: "iqn.2026-11.dev.stint:t".into(),
                alias: None,
                allowed_initiators: vec![],
                chap: true,
                mutual_chap: false,
                luns: vec![LunInfo {
                    lun: 0,
                    store: "ram".into(),
                    size: 16 << 20,
                    block_size: 512,
                    queue: Some("hdd, depth 32, cdl-aware, strict arbitration".into()),
                    cdl: true,
                    alua: "active/optimized".into(),
                    read_only: true,
                    allowed_initiators: vec![],
                }],
            }],
        };
        assert_eq!(
            ls(&listing),
            "o- iqn.2026-11.dev.stint:t ... [1 LUN, chap, any initiator]\n  \
             o- lun0 .................... [ram, 16 MiB, 512-byte blocks, hdd, depth 32, \
             cdl-aware, strict arbitration, CDL, active/optimized, read-only]\n"
        );
    }

    #[test]
    fn a_table_is_aligned() {
        let t = table(
            &["A", "BB"],
            vec![
                vec!["long".into(), "x".into()],
                vec!["s".into(), "y".into()],
            ],
        );
        assert_eq!(t, "A     BB\nlong  x\ns     y\n");
    }
}
