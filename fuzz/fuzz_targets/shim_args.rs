//! The shims' argument parsers on arbitrary argument vectors, config-file text and
//! git configuration: no panic, and every destination is a plain host.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit_shims::{analyze, Ctx, NoCtx, TOOLS};

/// Serves the fuzz input's tail as every file and as git configuration.
struct FileCtx(String);

impl Ctx for FileCtx {
    fn env(&self, name: &str) -> Option<String> {
        (name == "HOME").then(|| "/h".to_string())
    }
    fn read_file(&self, _: &str) -> Option<String> {
        Some(self.0.clone())
    }
    fn git_config(&self, _: &[String]) -> Option<Vec<(String, String)>> {
        Some(
            self.0
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // argv words separated by NUL; after a second-level separator, file text.
    let (argv_part, file) = text.split_once("\u{1}").unwrap_or((text, ""));
    let args: Vec<String> = argv_part.split('\0').map(str::to_string).collect();
    let tool = TOOLS[usize::from(sel) % TOOLS.len()];
    let file_ctx = FileCtx(file.to_string());
    let ctxs: [&dyn Ctx; 2] = [&NoCtx, &file_ctx];
    for ctx in ctxs {
        let a = analyze(tool, &args, ctx);
        for d in &a.dests {
            assert!(!d.host.is_empty(), "{tool} {args:?}: empty host");
            assert!(
                !d.host.contains(|c: char| c == '/' || c == '@' || c.is_whitespace()),
                "{tool} {args:?}: host {:?}",
                d.host
            );
            assert!(d.port != Some(0), "{tool} {args:?}: port 0");
        }
    }
});
