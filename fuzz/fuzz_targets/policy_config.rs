//! Arbitrary text as a user config over the built-in default: loading must return a
//! policy or a located diagnostic, never panic; a loaded policy must survive its
//! snapshot round trip.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit_policy::{load, Context, Layer, LoadOptions, Policy, Source};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut o = LoadOptions::new(Context {
        home: "/h".into(),
        workspace: "/h/w".into(),
        scratch: "/t/r".into(),
        state_dir: "/h/.sandpit".into(),
    });
    o.user = Some(Source::new(Layer::User, "fuzz.toml", text));
    o.project = Some(Source::new(Layer::Project, "project.toml", text));
    match load(&o) {
        Ok(p) => {
            let back = Policy::from_snapshot(&p.snapshot()).expect("snapshot round trip");
            assert_eq!(back, p);
        }
        Err(e) => {
            if let Some(d) = e.diagnostic() {
                assert!(d.line >= 1 && d.column >= 1, "{d}");
                assert!(!d.hint.is_empty());
            }
        }
    }
});
