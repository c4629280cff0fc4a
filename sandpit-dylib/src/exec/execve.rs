//! `execve`, `execv`, `execveat`, `fexecve`, and the variadic `execl`, `execle`
//! (C shim + naked trampolines, see `csrc/variadic.c`).
use super::{environ, in_place, Find};
#[cfg(target_os = "linux")]
use crate::path::{fd_link, PBuf};
use libc::{c_char, c_int};

type ExecveFn =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;

/// The real `execve`.
pub fn real_execve() -> Result<ExecveFn, c_int> {
    execve::real()
}

/// Judge and exec `path argv` with `envp` made safe. Returns only on failure.
///
/// # Safety
/// As for `execve`.
pub unsafe fn execve_impl(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> Result<c_int, c_int> {
    // SAFETY: the caller's string.
    let p = unsafe { crate::sys::cstr(path) }.ok_or(libc::EFAULT)?;
    let exec = |envp| {
        let real = real_execve()?;
        // SAFETY: arguments valid per the contract; `envp` is the child's.
        Ok(crate::guard::released(|| unsafe { real(path, argv, envp) }))
    };
    // SAFETY: per the contract.
    unsafe { in_place(p, Find::Path, argv, envp, exec) }
}

hook! {
    fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fail = -1;
    |_real| {
        // SAFETY: the caller's arguments.
        unsafe { execve_impl(path, argv, envp) }
    }
}

hook! {
    fn execv(path: *const c_char, argv: *const *const c_char) -> c_int;
    fail = -1;
    |_real| {
        // SAFETY: the caller's arguments and the process environment.
        unsafe { execve_impl(path, argv, environ()) }
    }
}

#[cfg(target_os = "linux")]
hook! {
    fn execveat(dir: c_int, path: *const c_char, argv: *const *const c_char, envp: *const *const c_char, flags: c_int) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's string.
        let p = unsafe { crate::sys::cstr(path) }.ok_or(libc::EFAULT)?;
        // The program as a path this process can open: a name relative to `dir`
        // is found below the descriptor's /proc/self/fd link.
        let mut prog = PBuf::new();
        if p.is_empty() {
            fd_link(dir, &mut prog)?;
        } else if p[0] == b'/' || dir == libc::AT_FDCWD {
            prog.set(p)?;
        } else {
            fd_link(dir, &mut prog)?;
            prog.push(p)?;
        }
        // SAFETY: the caller's arguments; `envp` is the child's.
        let exec = |envp| Ok(crate::guard::released(|| unsafe { real(dir, path, argv, envp, flags) }));
        // SAFETY: the caller's arrays.
        unsafe { in_place(prog.as_bytes(), Find::Path, argv, envp, exec) }
    }
}

#[cfg(target_os = "linux")]
hook! {
    fn fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fail = -1;
    |real| {
        let mut link = PBuf::new();
        fd_link(fd, &mut link)?;
        // SAFETY: the caller's arguments; `envp` is the child's.
        let exec = |envp| Ok(crate::guard::released(|| unsafe { real(fd, argv, envp) }));
        // SAFETY: the caller's arrays.
        unsafe { in_place(link.as_bytes(), Find::Path, argv, envp, exec) }
    }
}

/// Called by the C shim for `execl`/`execle`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sandpit_execve_impl(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the shim passes the caller's arguments.
    crate::guard::run(-1, move || unsafe { execve_impl(path, argv, envp) })
}

#[cfg(not(target_os = "macos"))]
extern "C" {
    fn sandpit_c_execl();
    fn sandpit_c_execle();
    fn sandpit_c_execlp();
}

#[cfg(not(target_os = "macos"))]
macro_rules! trampoline {
    ($name:ident => $target:ident) => {
        /// Variadic entry point: jumps to the C shim with registers and stack as the
        /// caller left them.
        #[unsafe(naked)]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name() {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!("jmp {t}", t = sym $target);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!("b {t}", t = sym $target);
        }
    };
}
#[cfg(not(target_os = "macos"))]
trampoline!(execl => sandpit_c_execl);
#[cfg(not(target_os = "macos"))]
trampoline!(execle => sandpit_c_execle);
#[cfg(not(target_os = "macos"))]
trampoline!(execlp => sandpit_c_execlp);

// macOS: the C functions are C-variadic themselves and interpose directly.
crate::__interpose!(c_only; "execl");
crate::__interpose!(c_only; "execle");
crate::__interpose!(c_only; "execlp");
