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

/// Every process of the machine, from `proc_listallpids` and each one's
/// `PROC_PIDTBSDINFO` (a process that exits meanwhile is left out).
pub(super) fn list_processes() -> std::io::Result<Vec<super::reap::ProcInfo>> {
    use super::reap::{ProcId, ProcInfo};
    // SAFETY: a NULL buffer asks for the number of pids.
    let n = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Room for processes started between the two calls.
    let cap = usize::try_from(n).unwrap_or(0) + 64;
    let mut pids: Vec<libc::pid_t> = vec![0; cap];
    let bytes = c_int::try_from(cap * std::mem::size_of::<libc::pid_t>())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `pids` has room for `bytes` bytes of pid_t.
    let got = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes) };
    if got < 0 {
        return Err(std::io::Error::last_os_error());
    }
    pids.truncate(usize::try_from(got).unwrap_or(0).min(cap));
    let mut out = Vec::with_capacity(pids.len());
    for pid in pids {
        if pid <= 0 {
            continue;
        }
        // SAFETY: an all-zero proc_bsdinfo is a valid value to be overwritten.
        let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let size = c_int::try_from(std::mem::size_of::<libc::proc_bsdinfo>()).unwrap_or(0);
        // SAFETY: `info` is a proc_bsdinfo of `size` bytes, what PROC_PIDTBSDINFO fills.
        let r = unsafe {
            libc::proc_pidinfo(
                pid,
                libc::PROC_PIDTBSDINFO,
                0,
                (&mut info as *mut libc::proc_bsdinfo).cast(),
                size,
            )
        };
        if r != size {
            continue;
        }
        out.push(ProcInfo {
            id: ProcId {
                pid,
                start: info
                    .pbi_start_tvsec
                    .saturating_mul(1_000_000)
                    .saturating_add(info.pbi_start_tvusec),
            },
            ppid: i32::try_from(info.pbi_ppid).unwrap_or(0),
            uid: info.pbi_uid,
        });
    }
    Ok(out)
}

/// The `KERN_PROCARGS2` buffer of `pid` (arguments and environment; readable for
/// the user's own processes), `None` when it cannot be read.
pub(super) fn procargs(pid: i32) -> Option<Vec<u8>> {
    let mut max: c_int = 0;
    let mut size = std::mem::size_of::<c_int>();
    let mut mib = [libc::CTL_KERN, libc::KERN_ARGMAX];
    // SAFETY: a two-element MIB; `max` is an int-sized out-buffer of `size` bytes.
    let r = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            2,
            (&mut max as *mut c_int).cast(),
            &mut size,
            std::ptr::null_mut(),
            0,
        )
    };
    if r != 0 || max <= 0 {
        return None;
    }
    let mut buf = vec![0u8; usize::try_from(max).ok()?];
    let mut size = buf.len();
    let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
    // SAFETY: a three-element MIB; `buf` has `size` writable bytes.
    let r = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            3,
            buf.as_mut_ptr().cast(),
            &mut size,
            std::ptr::null_mut(),
            0,
        )
    };
    if r != 0 {
        return None;
    }
    buf.truncate(size);
    Some(buf)
}

/// Send `sig` to `pid`; false when it is gone or not ours.
pub(super) fn signal(pid: i32, sig: c_int) -> bool {
    // SAFETY: kill(2) has no memory effects; the caller names a process it found
    // in a listing just before (pid and start time).
    unsafe { libc::kill(pid, sig) == 0 }
}

/// This process's pid and real user id.
pub(super) fn me() -> (i32, u32) {
    // SAFETY: getpid and getuid have no preconditions.
    unsafe { (libc::getpid(), libc::getuid()) }
}
