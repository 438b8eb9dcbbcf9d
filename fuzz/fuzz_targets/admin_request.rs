//! Requests on `stint serve`'s admin socket (docs/ctl.md) as the server parses each line:
//! JSON of any shape, any version, verb and fields. Beyond "no panic": a refusal says why,
//! and a request that parses is one the protocol writes back as a line that parses to the
//! same request (what `stint ctl` sends is what the server reads).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stint::admin_protocol::{parse_request, Envelope, MAX_LINE, VERSION};

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    for line in text.lines().take(8).filter(|l| l.len() <= MAX_LINE) {
        match parse_request(line) {
            Err(e) => assert!(!e.is_empty(), "a refusal without a message: {line:?}"),
            Ok(request) => {
                let envelope = Envelope {
                    version: VERSION,
                    request: request.clone(),
                };
                let written = serde_json::to_string(&envelope).expect("a request serializes");
                assert_eq!(
                    parse_request(&written).as_ref(),
                    Ok(&request),
                    "{line:?} parsed, but its own line {written:?} does not parse back"
                );
            }
        }
    }
});
