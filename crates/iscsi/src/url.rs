//! libiscsi-style URLs, `iscsi://[user[%password]@]host[:port]/target-iqn/lun` with
//! `?target_user=NAME&target_password=SECRET` for mutual CHAP (the form `stint serve` prints and
//! libiscsi's tools take), for the initiator's users.

use crate::chap::{Chap, Credentials};

/// Default iSCSI port (RFC 7143 §13.4 "well-known port" 3260).
pub const DEFAULT_PORT: u16 = 3260;

/// A parsed iSCSI URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IscsiUrl {
    /// `host:port` (IPv6 hosts in brackets), ready for `TcpStream::connect`.
    pub portal: String,
    pub target: String,
    pub lun: u64,
    /// CHAP credentials, when the URL carries a user and password: ours, and the target's
    /// for mutual CHAP.
    pub chap: Option<Chap>,
}

/// Why a URL was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlError(pub String);

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (expected iscsi://host[:port]/target-iqn/lun)",
            self.0
        )
    }
}

impl std::error::Error for UrlError {}

impl std::str::FromStr for IscsiUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<IscsiUrl, UrlError> {
        let rest = s
            .strip_prefix("iscsi://")
            .ok_or_else(|| UrlError(format!("{s:?} does not start with iscsi://")))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest
            .split_once('/')
            .ok_or_else(|| UrlError(format!("{s:?} has no target name")))?;
        let (user, host) = match authority.rsplit_once('@') {
            Some((cred, host)) => (Some(cred), host),
            None => (None, authority),
        };
        // Error messages show the URL without its secrets.
        let s = &redacted(s);
        let chap = chap(user, query).map_err(|e| UrlError(format!("{s:?}: {e}")))?;
        if host.is_empty() {
            return Err(UrlError(format!("{s:?} has no host")));
        }
        // A port is present after the last ':' unless that ':' is inside an IPv6 literal.
        let has_port = match host.rfind(':') {
            Some(i) => {
                !host[i..].contains(']')
                    && (host.starts_with('[') || host.matches(':').count() == 1)
            }
            None => false,
        };
        let portal = if has_port {
            let (_, port) = host.rsplit_once(':').unwrap_or((host, ""));
            port.parse::<u16>()
                .map_err(|_| UrlError(format!("bad port in {s:?}")))?;
            host.to_string()
        } else {
            format!("{host}:{DEFAULT_PORT}")
        };
        let (target, lun) = path
            .rsplit_once('/')
            .ok_or_else(|| UrlError(format!("{s:?} has no LUN")))?;
        if target.is_empty() {
            return Err(UrlError(format!("{s:?} has no target name")));
        }
        let lun = lun
            .parse::<u64>()
            .map_err(|_| UrlError(format!("bad LUN in {s:?}")))?;
        Ok(IscsiUrl {
            portal,
            target: target.to_string(),
            lun,
            chap,
        })
    }
}

/// The CHAP credentials of the user part (`user%password`) and the query
/// (`target_user=…&target_password=…`).
fn chap(user: Option<&str>, query: &str) -> Result<Option<Chap>, String> {
    let credentials = |user: &str, secret: &str, what: &str| {
        if user.is_empty() || secret.is_empty() {
            return Err(format!("{what} needs both a name and a secret"));
        }
        Ok(Credentials {
            user: user.to_owned(),
            secret: secret.as_bytes().to_vec(),
        })
    };
    let (mut target_user, mut target_password) = (None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("target_user", v)) => target_user = Some(v),
            Some(("target_password", v)) => target_password = Some(v),
            _ => {
                let key = pair.split('=').next().unwrap_or(pair);
                return Err(format!(
                    "unknown URL argument {key:?} (known: target_user, target_password)"
                ));
            }
        }
    }
    let target = match (target_user, target_password) {
        (None, None) => None,
        (u, p) => Some(credentials(
            u.unwrap_or(""),
            p.unwrap_or(""),
            "mutual CHAP (target_user, target_password)",
        )?),
    };
    let Some(user) = user else {
        return match target {
            Some(_) => Err("mutual CHAP needs the initiator's user%password@ too".into()),
            None => Ok(None),
        };
    };
    let (name, secret) = user.split_once('%').unwrap_or((user, ""));
    Ok(Some(Chap {
        initiator: credentials(name, secret, "CHAP (user%password@)")?,
        target,
    }))
}

/// `url` with the password and target_password replaced by `***`.
pub fn redacted(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(rest) = url.strip_prefix("iscsi://") {
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            if let Some(pct) = rest[..at].find('%') {
                let start = "iscsi://".len() + pct + 1;
                out.replace_range(start..start + at - pct - 1, "***");
            }
        }
    }
    if let Some((head, query)) = out.clone().split_once('?') {
        let query: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some(("target_password", _)) => "target_password=***".to_owned(),
                _ => p.to_owned(),
            })
            .collect();
        out = format!("{head}?{}", query.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_serve_prints() {
        let u: IscsiUrl = "iscsi://127.0.0.1:3260/iqn.2026-11.dev.stint:target0/1"
            .parse()
            .unwrap();
        assert_eq!(u.portal, "127.0.0.1:3260");
        assert_eq!(u.target, "iqn.2026-11.dev.stint:target0");
        assert_eq!(u.lun, 1);
        assert_eq!(u.chap, None);
    }

    #[test]
    fn default_port_ipv6_and_credentials() {
        let u: IscsiUrl = "iscsi://host/iqn.x/0".parse().unwrap();
        assert_eq!(u.portal, "host:3260");
        let u: IscsiUrl = "iscsi://[::1]:3261/iqn.x/0".parse().unwrap();
        assert_eq!(u.portal, "[::1]:3261");
        let u: IscsiUrl = "iscsi://[::1]/iqn.x/0".parse().unwrap();
        assert_eq!(u.portal, "[::1]:3260");
        let u: IscsiUrl = "iscsi://bob%secret@h:1/iqn.x/2".parse().unwrap();
        let chap = u.chap.unwrap();
        assert_eq!(chap.initiator.user, "bob");
        assert_eq!(chap.initiator.secret, b"secret");
        assert_eq!(chap.target, None);
        let u: IscsiUrl = "iscsi://bob%se%cret@h/iqn.x/2?target_user=t&target_password=p@ss"
            .parse()
            .unwrap();
        assert_eq!(u.portal, "h:3260");
        assert_eq!(u.lun, 2);
        let chap = u.chap.unwrap();
        assert_eq!(chap.initiator.secret, b"se%cret");
        let target = chap.target.unwrap();
        assert_eq!(
            (target.user.as_str(), target.secret.as_slice()),
            ("t", &b"p@ss"[..])
        );
    }

    #[test]
    fn refuses_malformed_urls() {
        for bad in [
            "http://h/iqn.x/0",
            "iscsi://h",
            "iscsi://h/iqn.x",
            "iscsi://h/iqn.x/lun",
            "iscsi://h:port/iqn.x/0",
            "iscsi:///iqn.x/0",
            "iscsi://h//0",
            "iscsi://bob@h/iqn.x/0",
            "iscsi://%secret@h/iqn.x/0",
            "iscsi://h/iqn.x/0?target_user=t&target_password=p",
            "iscsi://a%b@h/iqn.x/0?target_user=t",
            "iscsi://a%b@h/iqn.x/0?header_digest=crc32c",
        ] {
            assert!(bad.parse::<IscsiUrl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn errors_never_show_a_secret() {
        for bad in [
            "iscsi://alice%hunter2-secret@h/iqn.x/lun",
            "iscsi://alice%hunter2-secret@h/iqn.x/0?target_user=t",
            "iscsi://a%b@h/iqn.x/0?target_password=hunter2-secret&oops=1",
        ] {
            let e = bad.parse::<IscsiUrl>().unwrap_err().to_string();
            assert!(!e.contains("hunter2"), "{e}");
            assert!(e.contains("***"), "{e}");
        }
        assert_eq!(
            redacted("iscsi://a%b@h/t/0?target_user=u&target_password=v"),
            "iscsi://a%***@h/t/0?target_user=u&target_password=***"
        );
        assert_eq!(redacted("iscsi://h/t/0"), "iscsi://h/t/0");
    }
}
