//! `execvp`, `execvpe` and (through the C shim) `execlp`: the PATH search is done
//! here, calling the real `execve` for each candidate, because glibc's own search
//! calls its internal execve (not through the PLT).
use super::execve::real_execve;
use super::{environ, in_place, Argv, Find};
use crate::path::PBuf;
use libc::{c_char, c_int};
use std::ops::ControlFlow;

/// The name `file` that a search runs: an empty one names no file (ENOENT, as the
/// C library says), and is refused before anything is judged.
///
/// # Safety
/// `file` is NULL or a NUL-terminated string that outlives `'a`.
unsafe fn search_name<'a>(file: *const c_char) -> Result<&'a [u8], c_int> {
    // SAFETY: per the contract.
    let f = unsafe { crate::sys::cstr(file) }.ok_or(libc::EFAULT)?;
    if f.is_empty() {
        return Err(libc::ENOENT);
    }
    Ok(f)
}

/// # Safety
/// As for `execvpe`.
pub unsafe fn execvpe_impl(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> Result<c_int, c_int> {
    // SAFETY: the caller's string.
    let f = unsafe { search_name(file) }?;
    // SAFETY: the caller's arguments; `envp` is the child's.
    let exec = |envp| unsafe { search(file, f, argv, envp) };
    // SAFETY: the caller's arrays.
    unsafe { in_place(f, Find::Search, argv, envp, exec) }
}

/// Run `f` (the bytes of `file`) as `execvpe` does, with `envp` composed already:
/// the path itself when it has a `/`, else each candidate on `PATH` in turn.
/// Returns only on failure.
///
/// # Safety
/// As for `execvpe`.
unsafe fn search(
    file: *const c_char,
    f: &[u8],
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> Result<c_int, c_int> {
    let real = real_execve()?;
    if f.contains(&b'/') {
        // SAFETY: the caller's arguments; `envp` lives in `env`.
        crate::guard::released(|| unsafe { real(file, argv, envp) });
        let e = crate::sys::errno();
        if e == libc::ENOEXEC {
            // SAFETY: as above.
            unsafe { run_as_script(file, argv, envp) };
        }
        return Err(crate::sys::errno());
    }
    // The PATH of the caller's process, as glibc uses it.
    // SAFETY: getenv reads the process environment; the result is copied at once.
    let path_var =
        unsafe { crate::sys::cstr(libc::getenv(c"PATH".as_ptr())) }.unwrap_or(b"/bin:/usr/bin");
    let mut pbuf = PBuf::new();
    pbuf.set(path_var)?;
    let mut seen_eacces = false;
    let failed = super::on_path(pbuf.as_bytes(), f, |cand| {
        // SAFETY: `cand` is NUL-terminated; arrays as above.
        crate::guard::released(|| unsafe { real(cand.as_ptr(), argv, envp) });
        match crate::sys::errno() {
            libc::ENOEXEC => {
                // SAFETY: as above.
                unsafe { run_as_script(cand.as_ptr(), argv, envp) };
                ControlFlow::Break(crate::sys::errno())
            }
            libc::EACCES => {
                seen_eacces = true;
                ControlFlow::Continue(())
            }
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {
                ControlFlow::Continue(())
            }
            e => ControlFlow::Break(e),
        }
    });
    Err(failed.unwrap_or(if seen_eacces {
        libc::EACCES
    } else {
        libc::ENOENT
    }))
}

/// glibc's fallback for a file without a recognised format: run it with /bin/sh.
///
/// # Safety
/// As for `execve`.
unsafe fn run_as_script(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) {
    let Ok(real) = real_execve() else { return };
    let mut args: crate::envp::Scratch<*const c_char, 256> = crate::envp::Scratch::new();
    let mut old = Argv::new();
    // SAFETY: the caller's argv.
    if unsafe { super::decode(argv, &mut old) }.is_err() {
        return;
    }
    let sh = c"/bin/sh".as_ptr();
    if args.push(sh).is_err() || args.push(path).is_err() {
        return;
    }
    let n = old.as_slice().len();
    for i in 1..n {
        // SAFETY: i < n, within the caller's NULL-terminated argv.
        if args.push(unsafe { *argv.add(i) }).is_err() {
            return;
        }
    }
    if args.push(std::ptr::null()).is_err() {
        return;
    }
    // SAFETY: a NULL-terminated argv of valid strings; `envp` already composed.
    crate::guard::released(|| unsafe { real(sh, args.as_ptr(), envp) });
}

hook! {
    fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int;
    fail = -1;
    |_real| {
        // SAFETY: the caller's arguments and the process environment.
        unsafe { execvpe_impl(file, argv, environ()) }
    }
}

#[cfg(target_os = "linux")]
hook! {
    fn execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fail = -1;
    |_real| {
        // SAFETY: the caller's arguments.
        unsafe { execvpe_impl(file, argv, envp) }
    }
}

/// Called by the C shim for `execlp`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sandpit_execvpe_impl(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the shim passes the caller's arguments.
    crate::guard::run(-1, move || unsafe { execvpe_impl(file, argv, envp) })
}

/// macOS `execvP(file, search_path, argv)`: `execvp` with the directories given
/// instead of `PATH`. libSystem's own search calls its internal `execve`, not the
/// interposed one, so the search is done here: the first candidate that is an
/// executable file is judged by [`super::execve::execve_impl`] as the exact path
/// that runs, and run; a refusal ends the search there.
///
/// # Safety
/// As for `execvP`.
#[cfg(any(target_os = "macos", test))]
pub unsafe fn execv_search_impl(
    file: *const c_char,
    search_path: &[u8],
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> Result<c_int, c_int> {
    // SAFETY: the caller's string.
    let f = unsafe { search_name(file) }?;
    if f.contains(&b'/') {
        // SAFETY: the caller's arguments.
        return unsafe { super::execve::execve_impl(file, argv, envp) };
    }
    let mut seen_eacces = false;
    let found = super::on_path(search_path, f, |cand| {
        // SAFETY: a NUL-terminated candidate path.
        if unsafe { libc::access(cand.as_ptr(), libc::X_OK) } == 0 {
            // SAFETY: the candidate and the caller's arrays.
            let r = unsafe { super::execve::execve_impl(cand.as_ptr(), argv, envp) };
            return ControlFlow::Break(r);
        }
        seen_eacces |= crate::sys::errno() == libc::EACCES;
        ControlFlow::Continue(())
    });
    found.unwrap_or(Err(if seen_eacces {
        libc::EACCES
    } else {
        libc::ENOENT
    }))
}

#[cfg(target_os = "macos")]
hook! {
    // libSystem's name.
    #[allow(non_snake_case)]
    fn execvP(file: *const c_char, search_path: *const c_char, argv: *const *const c_char) -> c_int;
    fail = -1;
    |_real| {
        // SAFETY: the caller's string; NULL means libSystem's default path.
        let search = unsafe { crate::sys::cstr(search_path) }.unwrap_or(b"/usr/bin:/bin");
        // SAFETY: the caller's arguments and the process environment.
        unsafe { execv_search_impl(file, search, argv, environ()) }
    }
}
