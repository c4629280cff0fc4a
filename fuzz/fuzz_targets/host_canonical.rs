//! Host canonicalization: never panics, is idempotent, and patterns that parse match
//! their own canonical host.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit_policy::host::{canonical_host, parse_authority, HostPattern};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(h) = canonical_host(s) {
        let again = canonical_host(&h.to_string()).expect("canonical form re-parses");
        assert_eq!(again, h);
    }
    if let Ok((h, port)) = parse_authority(s) {
        let shown = match port {
            Some(p) => format!("{h}:{p}"),
            None => h.to_string(),
        };
        let (h2, p2) = parse_authority(&shown).expect("authority re-parses");
        assert_eq!((h2, p2), (h, port));
    }
    if let Ok(p) = HostPattern::parse(s) {
        let again = HostPattern::parse(&p.to_string()).expect("pattern re-parses");
        assert_eq!(again, p);
    }
});
