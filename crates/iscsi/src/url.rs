//! libiscsi-style URLs, `iscsi://[user[%password]@]host[:port]/target-iqn/lun` (the form
//! `stint serve` prints and libiscsi's tools take), for the initiator's users.

/// Default iSCSI port (RFC 7143 §13.4 "well-known port" 3260).
pub const DEFAULT_PORT: u16 = 3260;

/// A parsed iSCSI URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IscsiUrl {
    /// `host:port` (IPv6 hosts in brackets), ready for `TcpStream::connect`.
    pub portal: String,
    pub target: String,
    pub lun: u64,
    /// CHAP user and password, when given (CHAP is not implemented yet).
    pub user: Option<(String, String)>,
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
        let (authority, path) = rest
            .split_once('/')
            .ok_or_else(|| UrlError(format!("{s:?} has no target name")))?;
        let (user, host) = match authority.rsplit_once('@') {
            Some((cred, host)) => {
                let (u, p) = cred.split_once('%').unwrap_or((cred, ""));
                (Some((u.to_string(), p.to_string())), host)
            }
            None => (None, authority),
        };
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
            user,
        })
    }
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
        assert_eq!(u.user, None);
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
        assert_eq!(u.user, Some(("bob".into(), "secret".into())));
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
        ] {
            assert!(bad.parse::<IscsiUrl>().is_err(), "{bad}");
        }
    }
}
