//! The terminal filter (sandpit/src/console/filter.rs): fed the command's output
//! in reads split anywhere, it never panics, never lets a forbidden sequence
//! through (an 8-bit control, a DCS/SOS/PM/APC introducer, an OSC it does not
//! pass), gives the same bytes however the input is split, and passes its own
//! output unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit::console::filter::{clean, filtered, Filter};

fuzz_target!(|data: &[u8]| {
    let whole = filtered(data);
    assert!(clean(&whole), "forbidden bytes out of {data:?}: {whole:?}");
    // Split into reads at the points the first byte picks.
    let step = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut f = Filter::new();
    let mut out = Vec::new();
    for part in data.chunks(step) {
        f.feed(part, &mut out);
    }
    assert_eq!(out, whole, "split every {step} bytes");
    assert_eq!(filtered(&whole), whole, "not idempotent");
});
