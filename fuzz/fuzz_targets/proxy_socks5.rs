//! SOCKS5 negotiation parsers on arbitrary bytes: never panic, never consume more
//! than they were given, and a complete parse is stable under extra bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit::proxy::socks5::{parse_greeting, parse_request, parse_userpass};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((_, n))) = parse_greeting(data) {
        assert!(n <= data.len());
    }
    if let Ok(Some((_, n))) = parse_userpass(data) {
        assert!(n <= data.len());
    }
    if let Ok(Some((req, n))) = parse_request(data) {
        assert!(n <= data.len());
        let mut more = data.to_vec();
        more.extend_from_slice(b"extra");
        assert_eq!(parse_request(&more).ok().flatten(), Some((req, n)));
    }
});
