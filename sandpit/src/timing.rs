//! `SANDPIT_TIMING=1`: one line on stderr for each start-up step of `sandpit run` on
//! Linux, with the milliseconds since the launcher started and the process that
//! reached it (the launcher; C1, init, the guard and the command's process are forks
//! of it and share the clock). For finding where a machine spends its start;
//! `bench/run_startup.sh` (section 4) prints the medians of many runs.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The variable that turns the lines on (`1`).
pub const VAR: &str = "SANDPIT_TIMING";

static ON: AtomicBool = AtomicBool::new(false);
static START: OnceLock<Instant> = OnceLock::new();

/// Note the launcher's start and read [`VAR`]: first thing in `main`.
pub fn init() {
    START.get_or_init(Instant::now);
    ON.store(
        std::env::var_os(VAR).is_some_and(|v| v == "1"),
        Ordering::Relaxed,
    );
}

/// `sandpit: timing 1.234 ms STEP (pid N)`, when turned on.
#[inline]
pub fn mark(step: &str) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    if let Some(start) = START.get() {
        // One write, so lines from the launcher's forks do not interleave.
        let line = format!(
            "sandpit: timing {:.3} ms {step} (pid {})\n",
            start.elapsed().as_secs_f64() * 1e3,
            std::process::id()
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
}
