//! The admin protocol: one JSON object per line each way over a Unix stream socket
//! (docs/ctl.md). A request names its `verb`; a response carries `ok` and either a `result`
//! or an `error`. Both carry `version`, so that a client and a server of different releases
//! refuse each other precisely instead of misreading a field.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// The longest request or response line: a request is a few names; a longer line is a
/// mistake or an attack, and is not buffered.
pub const MAX_LINE: usize = 64 * 1024;

/// The longest response line a client reads: a listing of many LUNs or a session table is
/// larger than any request.
pub const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// A request line: `{"version":1,"verb":"ls"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub version: u32,
    #[serde(flatten)]
    pub request: Request,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verb", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// Targets and their LUNs.
    Ls,
    /// The iSCSI sessions now logged in.
    Sessions,
    /// Ends a session (its connections are closed).
    Logout {
        session: u64,
    },
    /// Reads the configuration file again and applies what changed.
    Reload,
    /// A LUN's counters, as the metrics endpoint exports them.
    Stats {
        target: String,
        lun: u64,
    },
    /// Adds a LUN from a `stint serve --lun` spec (`ram:1GiB`, `file:PATH[:SIZE]`, ...).
    LunAdd {
        target: String,
        #[serde(default)]
        lun: Option<u64>,
        spec: String,
    },
    LunRemove {
        target: String,
        lun: u64,
    },
    /// Sets a LUN's size; without `size`, re-reads its store's size. Shrinking needs `shrink`.
    LunResize {
        target: String,
        lun: u64,
        #[serde(default)]
        size: Option<u64>,
        #[serde(default)]
        shrink: bool,
    },
}

impl Request {
    /// Whether the request changes the server (and is logged with who asked).
    pub fn changes(&self) -> bool {
        !matches!(
            self,
            Request::Ls | Request::Sessions | Request::Stats { .. }
        )
    }

    /// The verb as the protocol spells it.
    pub fn verb(&self) -> &'static str {
        match self {
            Request::Ls => "ls",
            Request::Sessions => "sessions",
            Request::Logout { .. } => "logout",
            Request::Reload => "reload",
            Request::Stats { .. } => "stats",
            Request::LunAdd { .. } => "lun-add",
            Request::LunRemove { .. } => "lun-remove",
            Request::LunResize { .. } => "lun-resize",
        }
    }
}

/// A response line: `{"version":1,"ok":true,"result":...}` or `{"version":1,"ok":false,
/// "error":"..."}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub version: u32,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Response {
    pub fn ok(result: serde_json::Value) -> Response {
        Response {
            version: VERSION,
            ok: true,
            result: Some(result),
            error: None,
        }
    }

    pub fn error(message: impl Into<String>) -> Response {
        Response {
            version: VERSION,
            ok: false,
            result: None,
            error: Some(message.into()),
        }
    }
}

/// `ls`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Listing {
    pub targets: Vec<TargetInfo>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub name: String,
    pub alias: Option<String>,
    /// Empty: any initiator may log in.
    pub allowed_initiators: Vec<String>,
    pub chap: bool,
    pub mutual_chap: bool,
    pub luns: Vec<LunInfo>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LunInfo {
    pub lun: u64,
    /// "ram", "file PATH", "block /dev/...", "rbd pool/image".
    pub store: String,
    /// Bytes, as the unit reports them now (after any resize), not as configured.
    pub size: u64,
    pub block_size: u32,
    /// The drive model and device queue, when the LUN has one.
    pub queue: Option<String>,
    pub cdl: bool,
    /// ALUA access state ("active/optimized", ...).
    pub alua: String,
    /// Read-only by configuration or write-protected by a host (SWP).
    pub read_only: bool,
    /// Empty: every initiator of the target sees it.
    pub allowed_initiators: Vec<String>,
}

/// One row of `sessions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: u64,
    pub initiator: String,
    /// The initiator's IP address and port.
    pub address: String,
    /// `None`: a discovery session.
    pub target: Option<String>,
    pub isid: String,
    pub tsih: u16,
    /// The operational keys negotiated at login.
    pub keys: BTreeMap<String, String>,
    /// "none", or the CHAP algorithm and whether the target proved itself too ("CHAP
    /// SHA3-256, mutual").
    pub authentication: String,
    pub in_flight: usize,
    pub bytes_received: u64,
    pub bytes_sent: u64,
}

/// `stats`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub target: String,
    pub lun: u64,
    pub samples: Vec<Sample>,
}

/// A sample as the Prometheus text format writes it: a histogram is its `_bucket`, `_sum`
/// and `_count` samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// What a change did, one human-readable line each.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    pub changes: Vec<String>,
}

/// Parses a request line; the error is the message the response carries.
pub fn parse_request(line: &str) -> Result<Request, String> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let serde_json::Value::Object(mut fields) = value else {
        return Err("not a JSON object: a request is {\"version\":1,\"verb\":...}".into());
    };
    // The version first: a request of another version may have other verbs and fields.
    match fields.remove("version") {
        None => return Err(format!("no \"version\" (this server speaks {VERSION})")),
        Some(v) if v.as_u64() == Some(u64::from(VERSION)) => {}
        Some(v) => {
            return Err(format!(
                "unsupported protocol version {v}; this server speaks version {VERSION}"
            ))
        }
    }
    match fields.get("verb") {
        None => return Err(format!("no \"verb\" (one of {})", VERBS.join(", "))),
        Some(serde_json::Value::String(verb)) if !VERBS.contains(&verb.as_str()) => {
            return Err(format!(
                "unknown verb {verb:?}; the verbs are {}",
                VERBS.join(", ")
            ))
        }
        Some(serde_json::Value::String(_)) => {}
        Some(other) => return Err(format!("\"verb\" must be a string, not {other}")),
    }
    let request: Request = serde_json::from_value(serde_json::Value::Object(fields.clone()))
        .map_err(|e| e.to_string())?;
    // serde ignores extra fields of a verb without any (`ls`): a field the request does not
    // serialize back is one it does not have.
    if let Ok(serde_json::Value::Object(known)) = serde_json::to_value(&request) {
        if let Some(field) = fields.keys().find(|k| !known.contains_key(*k)) {
            return Err(format!(
                "unknown field `{field}` for verb {}",
                request.verb()
            ));
        }
    }
    Ok(request)
}

/// Every verb, as the protocol spells them.
pub const VERBS: [&str; 8] = [
    "ls",
    "sessions",
    "logout",
    "reload",
    "stats",
    "lun-add",
    "lun-remove",
    "lun-resize",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(request: Request) {
        let line = serde_json::to_string(&Envelope {
            version: VERSION,
            request: request.clone(),
        })
        .unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(parse_request(&line), Ok(request.clone()), "{line}");
        assert!(VERBS.contains(&request.verb()));
        assert!(line.contains(&format!("\"verb\":\"{}\"", request.verb())));
    }

    #[test]
    fn every_request_round_trips() {
        round_trip(Request::Ls);
        round_trip(Request::Sessions);
        round_trip(Request::Logout { session: 7 });
        round_trip(Request::Reload);
        round_trip(Request::Stats {
            target: "iqn.2026-11.dev.stint:t".into(),
            lun: 1,
        });
        round_trip(Request::LunAdd {
            target: "t".into(),
            lun: None,
            spec: "ram:1GiB".into(),
        });
        round_trip(Request::LunAdd {
            target: "t".into(),
            lun: Some(4),
            spec: "file:/x:1G".into(),
        });
        round_trip(Request::LunRemove {
            target: "t".into(),
            lun: 2,
        });
        round_trip(Request::LunResize {
            target: "t".into(),
            lun: 0,
            size: Some(1 << 30),
            shrink: true,
        });
        round_trip(Request::LunResize {
            target: "t".into(),
            lun: 0,
            size: None,
            shrink: false,
        });
    }

    #[test]
    fn the_wire_form_is_the_documented_one() {
        assert_eq!(
            parse_request(r#"{"version":1,"verb":"lun-resize","target":"t","lun":3}"#),
            Ok(Request::LunResize {
                target: "t".into(),
                lun: 3,
                size: None,
                shrink: false
            })
        );
        let ok = serde_json::to_string(&Response::ok(serde_json::json!({"changes": []}))).unwrap();
        assert_eq!(ok, r#"{"version":1,"ok":true,"result":{"changes":[]}}"#);
        let err = serde_json::to_string(&Response::error("no")).unwrap();
        assert_eq!(err, r#"{"version":1,"ok":false,"error":"no"}"#);
    }

    #[test]
    fn results_round_trip() {
        let stats = Stats {
            target: "t".into(),
            lun: 0,
            samples: vec![Sample {
                name: "stint_read_bytes_total".into(),
                labels: [("lun".to_owned(), "0".to_owned())].into(),
                value: 4096.0,
            }],
        };
        let text = serde_json::to_string(&stats).unwrap();
        assert_eq!(serde_json::from_str::<Stats>(&text).unwrap(), stats);
        let session = SessionInfo {
            id: 1,
            initiator: "iqn.x".into(),
            address: "127.0.0.1:5000".into(),
            target: None,
            isid: "00023d000001".into(),
            tsih: 1,
            keys: BTreeMap::new(),
            authentication: "none".into(),
            in_flight: 0,
            bytes_received: 48,
            bytes_sent: 48,
        };
        let text = serde_json::to_string(&session).unwrap();
        assert_eq!(serde_json::from_str::<SessionInfo>(&text).unwrap(), session);
    }

    #[test]
    fn bad_requests_are_named() {
        let cases = [
            ("nonsense", "not a JSON object"),
            ("[1]", "not a JSON object"),
            (r#"{"verb":"ls"}"#, "no \"version\""),
            (
                r#"{"version":2,"verb":"ls"}"#,
                "unsupported protocol version 2; this server speaks version 1",
            ),
            (r#"{"version":1}"#, "no \"verb\""),
            (r#"{"version":1,"verb":"lsx"}"#, "unknown verb \"lsx\""),
            (r#"{"version":1,"verb":7}"#, "\"verb\" must be a string"),
            (
                r#"{"version":1,"verb":"stats","target":"t"}"#,
                "missing field `lun`",
            ),
            (
                r#"{"version":1,"verb":"ls","colour":"red"}"#,
                "unknown field `colour`",
            ),
            (
                r#"{"version":1,"verb":"logout","session":"one"}"#,
                "invalid type",
            ),
        ];
        for (line, expected) in cases {
            let error = parse_request(line).unwrap_err();
            assert!(error.contains(expected), "{line}: {error}");
        }
    }
}
