//! Byte sizes as fio writes them: "128k", "1MiB" or a plain number. Multiples are binary
//! ("k" = 1024), as fio's `bs`/`size` defaults are (fio HOWTO "kb_base").

/// Parses "128k", "4KiB", "2m", "1048576" (binary multiples). "1GB" is refused: fio reads it as
/// 2^30 bytes and SI as 10^9, so a job file says which it means.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let si = t
        .to_ascii_lowercase()
        .strip_suffix('b')
        .is_some_and(|n| n.ends_with(['k', 'm', 'g', 't', 'p', 'e']));
    if si {
        let (num, unit) = t[..t.len() - 1].split_at(t.len() - 2);
        let unit = unit.to_ascii_uppercase();
        return Err(format!(
            "size {text:?} is ambiguous (fio reads \"1GB\" as 2^30 bytes, SI as 10^9): write \
             {num}{unit}iB or {num}{unit} for binary multiples, or the byte count"
        ));
    }
    parse_size::Config::new()
        .with_binary()
        .parse_size(t)
        .map_err(|e| format!("invalid size {text:?} ({e}; examples: 4k, 128KiB, 1MiB, 4096)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_style_sizes() {
        assert_eq!(parse_size("128k"), Ok(128 * 1024));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("2m"), Ok(2 << 20));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("lots").unwrap_err().contains("lots"));
        let e = parse_size("22TB").unwrap_err();
        assert!(e.contains("ambiguous") && e.contains("22TiB or 22T"), "{e}");
        assert!(parse_size("1kb").is_err());
    }
}
