//! TLS ClientHello → SNI on arbitrary bytes: never panics; a name is printable ASCII;
//! a verdict other than "incomplete" does not change when more bytes arrive.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit::proxy::sni::{parse, Sni};

fuzz_target!(|data: &[u8]| {
    let full = parse(data);
    if let Sni::Name(n) = &full {
        assert!(!n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic()));
    }
    if data.len() > 1 {
        let cut = usize::from(data[0]) % data.len();
        let prefix = parse(&data[..cut]);
        assert!(prefix == Sni::Incomplete || prefix == full, "{prefix:?} then {full:?}");
    }
});
