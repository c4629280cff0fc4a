//! The launcher's glue for `[telemetry]`: how the OTLP export (`audit::otlp`)
//! masks secrets. The audit layer does not reach up to the reviewer, so the masker
//! is made here, from the reviewer's redactor: the launcher's secret-looking and
//! withheld environment values, the contents of `files.block_read` files, token
//! shapes (`adversary::redact`).
#![forbid(unsafe_code)]
use crate::audit::otlp::{Masker, MaskerFactory};

/// A masker for a run under `policy`, built when the exporter's thread starts
/// (reading the withheld files is off the run's start-up path).
pub fn masker(policy: &sandpit_policy::Policy) -> MaskerFactory {
    let policy = policy.clone();
    Box::new(move || -> Masker {
        let env: Vec<(String, String)> = std::env::vars().collect();
        let r = crate::adversary::redact::Redactor::for_run(&policy, &env, &[]);
        Box::new(move |s: &str| r.redact(s))
    })
}
