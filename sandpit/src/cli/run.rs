//! `sandpit run [--profile P] [--shims] [--kernel-only] [--allow-degraded] -- CMD ARGS…`:
//! run a command under every layer (docs/run.md), planned and carried out by
//! `crate::run`. Prints one line to stderr saying which layers are active, then
//! passes the command's exit status through. If a layer the mode needs cannot be set
//! up, the command does not start (exit 125) and the error names the layer and the
//! flag that would accept a weaker mode.
use std::ffi::OsString;

use anyhow::Result;

pub use crate::run::Request as RunArgs;

/// Run the command under this platform's kernel layer.
pub fn run(args: RunArgs) -> Result<i32> {
    // Before anything is printed: a workspace that would make the home writable.
    crate::config::check_args_workspace(&args.policy)?;
    if let Some(missing) = not_found(&args.command) {
        // Before anything is made or started: an agent that is not installed.
        eprintln!(
            "sandpit: error: {missing} was not found{}; the command was not started. \
             Install it (docs/agents.md says how for each agent), or give its path",
            if missing.contains('/') {
                ""
            } else {
                " on PATH"
            }
        );
        return Ok(EXIT_NOT_FOUND);
    }
    #[cfg(target_os = "linux")]
    return crate::run::linux::run(args);
    #[cfg(target_os = "macos")]
    return crate::run::macos::run(args);
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = args;
        anyhow::bail!("sandpit run: this platform's kernel layer is not implemented yet")
    }
}

/// The shell's exit status for a command that was not found.
pub const EXIT_NOT_FOUND: i32 = 127;

/// The command's name, if it is no program `execvp` would find (from the current
/// directory, on this process's PATH: the sandbox has the same).
pub(crate) fn not_found(command: &[OsString]) -> Option<String> {
    let name = command.first()?.to_str()?;
    let cwd = std::env::current_dir().ok()?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    crate::inspect::which(name, &path, &cwd)
        .is_none()
        .then(|| name.to_string())
}
