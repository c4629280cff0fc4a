//! HTTP request head parsing on arbitrary bytes: never panics, never claims more bytes
//! than it was given, and every accessor the proxy uses is total.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit::proxy::http::{parse_head, RequestStream, ResponseStart};

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
    // The request stream forwards exactly its input when every head is accepted, at
    // any split of the input.
    let split = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut rs = RequestStream::new();
    let mut out = Vec::new();
    let mut ok = true;
    for chunk in data.chunks(split) {
        if rs.feed(chunk, &mut out, &mut |_| Ok(())).is_err() {
            ok = false;
            break;
        }
    }
    assert!(out.len() <= data.len());
    if ok {
        assert_eq!(&out[..], &data[..out.len()]);
        // The server's answer to an Upgrade releases held bytes, in order.
        if rs.answer(split % 2 == 0, &mut out, &mut |_| Ok(())).is_ok() {
            assert!(out.len() <= data.len());
            assert_eq!(&out[..], &data[..out.len()]);
        }
    }
    // The start of a response stream, as server bytes: never panics, at any split.
    let mut start = ResponseStart::new();
    for chunk in data.chunks(split) {
        if start.feed(chunk).is_some() {
            break;
        }
    }
});
