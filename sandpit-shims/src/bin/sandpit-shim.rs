//! The small binary every entry of a `sandpit run --shims` directory links to.
//!
//! `curl ARGS…` (argv[0] names the tool): judge against the run's policy snapshot
//! and exec the real tool, or refuse with exit 126. `sandpit-shim exec --connect HOST
//! PORT`: the ssh ProxyCommand. It links only `sandpit-shims` and `sandpit-policy`
//! so that a shimmed command costs little more than one extra process image; the
//! launcher embeds it and extracts it next to the interposer.
#![forbid(unsafe_code)]

fn main() {
    let code = sandpit_shims::exec::dispatch(&sandpit_shims::exec::no_fallback, true)
        .unwrap_or_else(|| {
            eprintln!(
                "sandpit-shim: run as a PATH shim (a link named after the tool), or `sandpit-shim exec TOOL ARGS…` / `exec --connect HOST PORT`"
            );
            2
        });
    std::process::exit(code);
}
