//! Byte sizes as fio writes them: "128k", "1MiB", "22TB" or a plain number. Multiples are
//! binary ("k" = 1024), as fio's `bs`/`size` defaults are (fio HOWTO "kb_base").

/// Parses "128k", "4KiB", "2m", "1048576" (binary multiples).
pub fn parse_size(text: &str) -> Result<u64, String> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(text.trim())
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
    }
}
