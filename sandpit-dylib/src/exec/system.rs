//! `system`, `popen`: glibc runs `/bin/sh -c CMD` through its internal spawn with
//! the process's `environ`. The hook judges `sh -c CMD`, then points `environ` at
//! the composed environment for the duration of the real call. (A concurrent
//! `setenv` in another thread during that window is lost; `getenv` there sees the
//! child's environment.)
use super::{prepare, Find, How};
use crate::envp::Envp;
use libc::{c_char, c_int, FILE};

/// Run `f` with `environ` set to the composed child environment.
///
/// # Safety
/// `cmd` is NUL-terminated.
unsafe fn with_child_env<R>(cmd: *const c_char, f: impl FnOnce() -> R) -> Result<R, c_int> {
    let argv = [c"/bin/sh".as_ptr(), c"-c".as_ptr(), cmd, std::ptr::null()];
    let mut env = Envp::new();
    // SAFETY: a NULL-terminated argv of valid strings; the process environment.
    let child = unsafe {
        prepare(
            Some(b"/bin/sh"),
            Find::Path,
            How::Spawn,
            argv.as_ptr(),
            super::environ(),
            &mut env,
        )
    }?;
    let env = crate::sys::environ_ptr();
    // SAFETY: swapping libc's global environment pointer around the real call.
    let old = unsafe { std::ptr::replace(env, child.envp) };
    // The agent's call runs on a thread holding the layer for `files.agent_read`.
    let r = super::start(child.hide, f);
    // SAFETY: as above.
    unsafe { std::ptr::write(env, old) };
    r
}

hook! {
    fn system(cmd: *const c_char) -> c_int;
    fail = -1;
    macos = ["system", "system$NOCANCEL"];
    |real| {
        if cmd.is_null() {
            // SAFETY: system(NULL) only asks whether a shell exists.
            return Ok(unsafe { real(cmd) });
        }
        // SAFETY: the caller's command string; the real call gets the caller's
        // arguments, forwarded.
        unsafe { with_child_env(cmd, || real(cmd)) }
    }
}

hook! {
    fn popen(cmd: *const c_char, mode: *const c_char) -> *mut FILE;
    fail = std::ptr::null_mut();
    macos = ["popen", "popen$DARWIN_EXTSN"];
    |real| {
        if cmd.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's strings; the real call gets the caller's arguments,
        // forwarded.
        unsafe { with_child_env(cmd, || real(cmd, mode)) }
    }
}
