//! DNS query and answer parsing on arbitrary bytes (what the sandbox and an upstream
//! can send): never panics; an answer built for a parsed query parses back.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit::dns::message::{answer, parse_answer, parse_query, RCODE_NOERROR};

fuzz_target!(|data: &[u8]| {
    let _ = parse_answer(data, u16::from_be_bytes([data.first().copied().unwrap_or(0), data.get(1).copied().unwrap_or(0)]));
    if let Ok(q) = parse_query(data) {
        let out = answer(&q, RCODE_NOERROR, &["127.0.0.2".parse().unwrap()], 1);
        assert!(parse_answer(&out, q.id).is_ok());
    }
});
