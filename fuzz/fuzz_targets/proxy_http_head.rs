//! HTTP request head parsing on arbitrary bytes: never panics, never claims more bytes
//! than it was given, and every accessor the proxy uses is total.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit::proxy::http::{parse_head, pipelined_heads};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((head, len))) = parse_head(data) {
        assert!(len <= data.len());
        let _ = head.target();
        let _ = head.body_len();
        let _ = head.host();
        if let Ok(Some((again, len2))) = parse_head(&data[..len]) {
            assert_eq!(len, len2);
            assert_eq!(head, again);
        }
    }
    let _ = pipelined_heads(data);
});
