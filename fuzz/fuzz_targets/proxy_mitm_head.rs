//! The TLS-terminated request path (proxy/mitm.rs): request heads rewritten for a
//! credential's host, and bodies streamed through substitution and masking, on
//! arbitrary bytes. Never panics; a rewritten head carries no sentinel but in its
//! path, and nothing of another host's credential; a stream gives the same bytes
//! however it is cut into chunks; a masked answer holds no real value.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sandpit::credentials::{Carry, Secrets};
use sandpit::proxy::mitm::{rewrite_head_bytes, Refusal};

const HOST: &str = "api.openai.com";
const REAL: &[u8] = b"sk-real-openai-value/+=";
const OTHER: &[u8] = b"ghp_realgithubvalue";

fn secrets() -> &'static Secrets {
    static S: OnceLock<Secrets> = OnceLock::new();
    S.get_or_init(|| {
        Secrets::from_parts(vec![
            (
                "openai".into(),
                "OPENAI_API_KEY".into(),
                "sandpit-sentinel-openai-aaaa".into(),
                REAL.to_vec(),
                vec![HOST.into()],
            ),
            (
                "gh".into(),
                "GH_TOKEN".into(),
                "sandpit-sentinel-gh-bbbb".into(),
                OTHER.to_vec(),
                vec!["api.github.com".into()],
            ),
        ])
        .unwrap()
    })
}

fn contains(h: &[u8], n: &[u8]) -> bool {
    h.windows(n.len()).any(|w| w == n)
}

fuzz_target!(|data: &[u8]| {
    let s = secrets();
    match rewrite_head_bytes(s, HOST, data) {
        Ok(Some(parts)) => {
            for (k, v) in parts.headers.iter() {
                let v = v.as_bytes();
                assert!(s.any_sentinel(v).is_none(), "{k}: a sentinel left");
                assert!(!contains(v, OTHER) || contains(data, OTHER));
            }
            assert!(!parts.headers.contains_key("proxy-authorization"));
            assert_eq!(parts.headers["accept-encoding"], "identity");
            if let Some(q) = parts.uri.query() {
                assert!(s.any_sentinel(q.as_bytes()).is_none());
            }
        }
        Ok(None) => {}
        Err(Refusal::Leak(l)) => assert_eq!(l.name, "gh"),
        Err(Refusal::Bad(_)) => {}
    }

    // Streams: the same result at any cut.
    let split = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let whole = s.mask(data).unwrap_or_else(|| data.to_vec());
    let mut carry = Carry::default();
    let mut out = Vec::new();
    for c in data.chunks(split) {
        out.extend_from_slice(&s.mask_chunk(&mut carry, bytes::Bytes::copy_from_slice(c), false));
    }
    out.extend_from_slice(&s.mask_chunk(&mut carry, bytes::Bytes::new(), true));
    assert_eq!(out, whole);
    assert!(!contains(&out, REAL) && !contains(&out, OTHER));

    let sent = s.body_to_host(HOST, data).map(|o| o.unwrap_or_else(|| data.to_vec()));
    let mut carry = Carry::default();
    let mut out = Vec::new();
    let mut streamed = Ok(());
    for c in data.chunks(split).map(Some).chain([None]) {
        let (chunk, last) = match c {
            Some(c) => (bytes::Bytes::copy_from_slice(c), false),
            None => (bytes::Bytes::new(), true),
        };
        match s.body_chunk_to_host(HOST, &mut carry, chunk, last) {
            Ok(b) => out.extend_from_slice(&b),
            Err(l) => {
                streamed = Err(l);
                break;
            }
        }
    }
    match (sent, streamed) {
        (Ok(w), Ok(())) => assert_eq!(out, w),
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("whole {:?} and streamed {:?} differ", a.is_ok(), b.is_ok()),
    }
});
