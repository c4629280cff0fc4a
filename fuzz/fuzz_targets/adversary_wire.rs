#![no_main]
//! The adversary's parsers on hostile input: the control-socket request and answer
//! lines (round trip where they decode), the model's answer text, and redaction.
use libfuzzer_sys::fuzz_target;
use sandpit::adversary::{answer, redact::Redactor};
use sandpit_review::{decode_answer, decode_request, encode_answer, encode_event_request};

fuzz_target!(|data: &[u8]| {
    if let Some(r) = decode_request(data) {
        let argv: Vec<&[u8]> = r.argv.iter().map(|a| a.as_slice()).collect();
        let again = decode_request(&encode_event_request(r.event, &r.cwd, &argv));
        assert_eq!(again.as_ref(), Some(&r));
    }
    if let Some(a) = decode_answer(data) {
        assert_eq!(decode_answer(&encode_answer(&a)), Some(a));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = answer::parse(text);
        let r = Redactor::new(vec!["secretvalue1".into()]);
        assert!(!r.redact(text).contains("secretvalue1"));
    }
});
