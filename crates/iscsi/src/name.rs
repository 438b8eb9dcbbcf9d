//! iSCSI names (RFC 7143 §4.2.7): the three formats a target or initiator may use, checked so a
//! bad name is refused where it is configured instead of surprising an initiator later.

/// Longest name: 223 bytes (RFC 7143 §4.2.7.1).
const MAX_LEN: usize = 223;

/// Checks `name` against RFC 7143 §4.2.7.1–4.2.7.5: `iqn.YYYY-MM.reversed.domain[:unique]`,
/// `eui.` + 16 hex digits, or `naa.` + 16 or 32 hex digits. Names are compared after the
/// stringprep profile of RFC 3722 maps them to lower case, so an `iqn.` name must be written in
/// lower case already; only ASCII letters, digits, '-', '.' and ':' are taken (RFC 3722 allows
/// more of Unicode; no initiator stint is tested with uses it). The error says what is wrong.
pub fn check(name: &str) -> Result<(), String> {
    if name.len() > MAX_LEN {
        return Err(format!(
            "is {} bytes long; iSCSI names have at most {MAX_LEN} (RFC 7143 §4.2.7.1)",
            name.len()
        ));
    }
    if let Some(rest) = name.strip_prefix("iqn.") {
        return check_iqn(rest);
    }
    let hex = |digits: &str, lens: &[usize], what: &str| {
        if lens.contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(())
        } else {
            Err(format!("{what} (RFC 7143 §4.2.7.5)"))
        }
    };
    if let Some(digits) = name.strip_prefix("eui.") {
        return hex(digits, &[16], "an eui. name is eui. and 16 hex digits");
    }
    if let Some(digits) = name.strip_prefix("naa.") {
        return hex(
            digits,
            &[16, 32],
            "a naa. name is naa. and 16 or 32 hex digits",
        );
    }
    Err("must start with iqn., eui. or naa. (e.g. iqn.2026-11.com.example:disk1)".into())
}

/// `YYYY-MM.reversed.domain[:unique]` after "iqn." (RFC 7143 §4.2.7.4).
fn check_iqn(rest: &str) -> Result<(), String> {
    const FORM: &str = "an iqn. name is iqn.YYYY-MM.reversed.domain[:unique], \
                        e.g. iqn.2026-11.com.example:disk1";
    if let Some(c) = rest
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | ':')))
    {
        let hint = if c.is_ascii_uppercase() {
            " (write it in lower case: names are compared lower-cased, RFC 3722)"
        } else {
            ""
        };
        return Err(format!(
            "contains {c:?}; an iqn. name takes only a-z, 0-9, '-', '.' and ':'{hint}"
        ));
    }
    let (date, domain) = rest.split_once('.').ok_or_else(|| FORM.to_owned())?;
    let date_ok = date.len() == 7
        && date.as_bytes()[4] == b'-'
        && date[..4].bytes().all(|b| b.is_ascii_digit())
        && matches!(date[5..].parse::<u8>(), Ok(1..=12));
    if !date_ok {
        return Err(format!("date {date:?} is not YYYY-MM; {FORM}"));
    }
    let authority = domain.split(':').next().unwrap_or_default();
    if authority.split('.').any(str::is_empty) {
        return Err(format!(
            "naming authority {authority:?} is not a domain name; {FORM}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn good_names() {
        for name in [
            "iqn.2026-11.dev.stint:target0",
            "iqn.1993-08.org.debian:01:abcdef",
            "iqn.2001-04.com.example",
            "eui.02004567A425678D",
            "naa.52004567BA64678D",
            "naa.62004567BA64678D0123456789ABCDEF",
        ] {
            assert_eq!(check(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn bad_names_say_why() {
        for (name, why) in [
            ("iqn.bad name", "' '"),
            ("iqn.2026-11.Com.example", "lower case"),
            ("iqn.x", "YYYY-MM"),
            ("iqn.2026-13.com.example", "YYYY-MM"),
            ("iqn.2026-11", "iqn.YYYY-MM"),
            ("iqn.2026-11..com:x", "naming authority"),
            ("eui.0200", "16 hex digits"),
            ("naa.52004567BA64678Z", "hex digits"),
            ("target0", "must start with"),
        ] {
            let e = check(name).unwrap_err();
            assert!(e.contains(why), "{name}: {e}");
        }
        assert!(
            check(&format!("iqn.2026-11.com.example:{}", "a".repeat(220)))
                .unwrap_err()
                .contains("223")
        );
    }
}
