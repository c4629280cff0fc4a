//! Applying a compiled profile to a child (macOS only).
//!
//! Preferred: sandpit calls `sandbox_init_with_parameters` in the forked child before
//! exec. sandpit is not SIP-protected, so the environment it sets —
//! `DYLD_INSERT_LIBRARIES` included — reaches the agent and both layers stack.
//! Fallback: `/usr/bin/sandbox-exec -p PROFILE -DKEY=VALUE… PROGRAM ARGS…`. sandbox-exec
//! lives under /usr (SIP), so dyld strips DYLD_* variables from it and its child:
//! the run loses interposition and must be reported as kernel mode.
#![forbid(unsafe_code)]
use std::ffi::{CString, OsStr};
use std::path::Path;
use std::process::Command;

use super::seatbelt::Profile;
use super::{sys, Error, Result};

pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// How the profile will be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// In the forked child by sandpit: interposition survives.
    InProcess,
    /// Through `/usr/bin/sandbox-exec`: DYLD_* variables are stripped.
    SandboxExec,
}

/// Seatbelt can be applied on this machine.
pub fn available() -> bool {
    sys::lookup().is_some() || Path::new(SANDBOX_EXEC).is_file()
}

fn cstring(name: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::Nul {
        name: name.to_string(),
    })
}

/// A command that runs `program args…` under `profile`. Fails when neither way of
/// applying Seatbelt exists: the command must not run unconfined.
pub fn command(profile: &Profile, program: &OsStr, args: &[&OsStr]) -> Result<(Command, Applied)> {
    if let Some(sandbox) = sys::lookup() {
        let sbpl = cstring("profile", &profile.sbpl)?;
        let mut params = Vec::with_capacity(profile.params.len() * 2);
        for (k, v) in &profile.params {
            params.push(cstring(k, k)?);
            params.push(cstring(k, v)?);
        }
        let mut cmd = Command::new(program);
        cmd.args(args);
        sys::apply_in_child(&mut cmd, sandbox, sbpl, params);
        return Ok((cmd, Applied::InProcess));
    }
    if Path::new(SANDBOX_EXEC).is_file() {
        let mut cmd = Command::new(SANDBOX_EXEC);
        cmd.args(profile.sandbox_exec_args())
            .arg(program)
            .args(args);
        return Ok((cmd, Applied::SandboxExec));
    }
    Err(Error::Unavailable)
}

/// Block the signals the launcher forwards (SIGTERM, SIGHUP) before any launcher
/// thread starts: every thread inherits the mask, so only the forwarder takes them.
pub fn block_forwarded_signals() -> Result<()> {
    sys::block_forwarded_signals().map_err(|source| Error::Io {
        what: "blocking SIGTERM and SIGHUP".into(),
        source,
    })
}

/// Wait for the command started from [`command`]: its exit status, or 128 + the
/// signal that killed it. SIGTERM/SIGHUP sent to the launcher are forwarded to the
/// command (see [`block_forwarded_signals`]); the terminal's SIGINT/SIGQUIT are
/// ignored by the launcher meanwhile (the command decides what they mean). If the kernel refused the
/// profile, `spawn` already failed: the command never runs without Seatbelt.
pub fn wait_for(mut child: std::process::Child) -> Result<i32> {
    use std::os::unix::process::ExitStatusExt;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    sys::forward_signals(child.id(), done.clone()).map_err(|source| Error::Io {
        what: "starting the signal forwarder".into(),
        source,
    })?;
    let old = sys::ignore_terminal_signals();
    let status = child.wait();
    done.store(true, std::sync::atomic::Ordering::Release);
    sys::restore_signals(old);
    let status = status.map_err(|source| Error::Io {
        what: "waiting for the command".into(),
        source,
    })?;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => 125,
    })
}
