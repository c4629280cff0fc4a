//! FFI of the macOS kernel layer: the libsandbox entry point, looked up at run time,
//! and the pre-exec hook that applies it in the forked child.
//!
//! `sandbox_init_with_parameters` is exported by libSystem (libsystem_sandbox) but
//! not declared in the SDK headers; Chromium and others call it. Looking it up with
//! dlsym keeps the launcher linkable without Apple's SDK and lets sandpit fall back
//! to `/usr/bin/sandbox-exec` when it is missing.
use std::ffi::{c_char, c_int, CString};
use std::os::unix::process::CommandExt;
use std::process::Command;

type InitWithParameters =
    unsafe extern "C" fn(*const c_char, u64, *const *const c_char, *mut *mut c_char) -> c_int;
type FreeError = unsafe extern "C" fn(*mut c_char);

/// The resolved libsandbox functions.
#[derive(Clone, Copy)]
pub(super) struct Sandbox {
    init: InitWithParameters,
    free_error: Option<FreeError>,
}

fn symbol(name: &[u8]) -> *mut libc::c_void {
    debug_assert!(name.ends_with(b"\0"));
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the images already
    // loaded, and dlsym does not retain the pointer.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr().cast()) }
}

/// Resolve `sandbox_init_with_parameters`, `None` when libSystem lacks it.
pub(super) fn lookup() -> Option<Sandbox> {
    let init = symbol(b"sandbox_init_with_parameters\0");
    if init.is_null() {
        return None;
    }
    let free = symbol(b"sandbox_free_error\0");
    // SAFETY: both symbols are libsandbox functions with exactly these C
    // signatures (as declared by Chromium's sandbox/mac/seatbelt.cc); a non-null
    // dlsym result is the function's address.
    unsafe {
        Some(Sandbox {
            init: std::mem::transmute::<*mut libc::c_void, InitWithParameters>(init),
            free_error: (!free.is_null())
                .then(|| std::mem::transmute::<*mut libc::c_void, FreeError>(free)),
        })
    }
}

/// The profile and its parameters as C strings, with the NULL-terminated
/// `key, value, key, value, …, NULL` pointer array built before the fork so the
/// child allocates nothing of its own.
struct Prepared {
    sandbox: Sandbox,
    _profile: CString,
    _params: Vec<CString>,
    profile_ptr: *const c_char,
    param_ptrs: Vec<*const c_char>,
}

// SAFETY: the raw pointers point into the CStrings owned by the same value, which
// is moved into the pre-exec closure and only read there (in the single-threaded
// child after fork). Nothing mutates them.
unsafe impl Send for Prepared {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for Prepared {}

/// Make `cmd` apply the profile in its forked child, right before exec. If the
/// kernel refuses the profile the child writes the reason to stderr and exec never
/// happens: `spawn` fails with EPERM (fail closed).
pub(super) fn apply_in_child(
    cmd: &mut Command,
    sandbox: Sandbox,
    profile: CString,
    params: Vec<CString>,
) {
    let profile_ptr = profile.as_ptr();
    let mut param_ptrs: Vec<*const c_char> = params.iter().map(|c| c.as_ptr()).collect();
    param_ptrs.push(std::ptr::null());
    let prepared = Prepared {
        sandbox,
        _profile: profile,
        _params: params,
        profile_ptr,
        param_ptrs,
    };
    let hook = move || -> std::io::Result<()> {
        // Capture `prepared` whole (not its raw-pointer fields one by one).
        let prepared = &prepared;
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: the profile and the parameter array are valid NUL-terminated C
        // strings / a NULL-terminated array owned by `prepared`; `err` is a valid
        // out-pointer. flags 0 means "the profile is SBPL text".
        let rc = unsafe {
            (prepared.sandbox.init)(
                prepared.profile_ptr,
                0,
                prepared.param_ptrs.as_ptr(),
                &mut err,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        if !err.is_null() {
            // SAFETY: libsandbox returned a NUL-terminated message; write(2) is
            // async-signal-safe and only reads it.
            unsafe {
                let prefix = b"sandpit: seatbelt refused the profile: ";
                libc::write(2, prefix.as_ptr().cast(), prefix.len());
                libc::write(2, err.cast(), libc::strlen(err));
                libc::write(2, b"\n".as_ptr().cast(), 1);
                if let Some(free) = prepared.sandbox.free_error {
                    free(err);
                }
            }
        }
        Err(std::io::Error::from_raw_os_error(libc::EPERM))
    };
    // SAFETY: the hook runs in the child between fork and exec. It calls only
    // sandbox_init_with_parameters (which libsandbox documents for use before exec)
    // and write(2), and allocates nothing itself; macOS's libmalloc re-initialises
    // its locks in the child of fork, so libsandbox's own allocations cannot
    // deadlock on a lock held by another thread of the launcher.
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// Ignore SIGINT and SIGQUIT in the launcher while the command runs (the terminal
/// sends them to the whole foreground group; the command decides, as with
/// `system(3)`), returning the previous handlers for [`restore_signals`]. Called
/// after the fork: the child keeps the default dispositions.
pub(super) fn ignore_terminal_signals() -> [libc::sighandler_t; 2] {
    // SAFETY: installing SIG_IGN for two valid signal numbers has no memory effects.
    unsafe {
        [
            libc::signal(libc::SIGINT, libc::SIG_IGN),
            libc::signal(libc::SIGQUIT, libc::SIG_IGN),
        ]
    }
}

/// Put back the handlers [`ignore_terminal_signals`] returned.
pub(super) fn restore_signals(old: [libc::sighandler_t; 2]) {
    // SAFETY: re-installing handlers signal(2) returned for the same signals.
    unsafe {
        libc::signal(libc::SIGINT, old[0]);
        libc::signal(libc::SIGQUIT, old[1]);
    }
}

/// SIGTERM and SIGHUP: what the launcher forwards to the command.
fn forwarded_set() -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is a valid value for sigemptyset to initialise;
    // sigemptyset/sigaddset only write the local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

/// Block SIGTERM and SIGHUP in this thread (and every thread it starts later), so
/// they wait for [`forward_signals`]. The command's mask is reset by `Command`.
pub(super) fn block_forwarded_signals() -> std::io::Result<()> {
    let set = forwarded_set();
    // SAFETY: `set` is an initialised sigset_t; the old mask is not wanted.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(std::io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Forward every SIGTERM/SIGHUP the launcher receives to `pid` until `done` is set
/// (after the command was reaped, so a reused pid is never signalled).
pub(super) fn forward_signals(
    pid: u32,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::io::Result<()> {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    std::thread::Builder::new()
        .name("sandpit-signals".into())
        .spawn(move || loop {
            let set = forwarded_set();
            let mut sig: c_int = 0;
            // SAFETY: `set` is initialised and `sig` a valid out-pointer.
            if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                continue;
            }
            if done.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            // SAFETY: signalling the command we started, which has not been reaped.
            unsafe { libc::kill(pid, sig) };
        })?;
    Ok(())
}
