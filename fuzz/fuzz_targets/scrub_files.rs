//! The startup-file and `.env` scrubbers on arbitrary text: no panic; a withheld
//! name's assignment never survives (scrubbing the output again changes nothing);
//! the `.env` scrubber does not panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit::scrub::{dotenv, shell};

fn fate(name: &str) -> shell::Fate {
    match name {
        "GH_TOKEN" | "A" => shell::Fate::Remove,
        "KEY" => shell::Fate::Value("sandpit-sentinel-k".into()),
        _ => shell::Fate::Keep,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let dialect = match sel % 3 {
        0 => shell::Dialect::Posix,
        1 => shell::Dialect::Fish,
        _ => shell::Dialect::FishVariables,
    };
    let once = shell::scrub(text, dialect, &fate);
    let twice = shell::scrub(&once.text, dialect, &fate);
    // Only sentinel values may be written again; nothing is left to remove.
    let removed_again = shell::scrub(&once.text, dialect, &|n| match fate(n) {
        shell::Fate::Value(_) => shell::Fate::Keep,
        f => f,
    });
    assert!(!removed_again.changed, "{text:?} -> {:?}", once.text);
    assert_eq!(twice.text, once.text, "{text:?}");
    let by_name = |n: &str| (n == "KEY").then(|| "sandpit-sentinel-k".to_string());
    let _ = dotenv::scrub(text, &by_name, "sandpit-s");
});
