//! `posix_spawn`, `posix_spawnp`: judged and given a composed environment; glibc's
//! spawned child then calls its internal execve, which needs no hook because the
//! environment already carries the preload.
use super::prepare;
use crate::envp::Envp;
use libc::{c_char, c_int, pid_t, posix_spawn_file_actions_t, posix_spawnattr_t};

macro_rules! spawn_hooks {
    ($($name:ident),*) => {$(
        hook! {
            fn $name(
                pid: *mut pid_t,
                path: *const c_char,
                actions: *const posix_spawn_file_actions_t,
                attr: *const posix_spawnattr_t,
                argv: *const *const c_char,
                envp: *const *const c_char
            ) -> c_int;
            // posix_spawn reports errors in its return value, not errno.
            fail = libc::EPERM;
            |real| {
                // SAFETY: the caller's string.
                let p = unsafe { crate::sys::cstr(path) }.ok_or(libc::EFAULT)?;
                let mut env = Envp::new();
                // SAFETY: the caller's arrays.
                let envp = match unsafe { prepare(Some(p), argv, envp, &mut env) } {
                    Ok(e) => e,
                    Err(e) => return Ok(e),
                };
                // SAFETY: the caller's arguments; `envp` lives in `env`.
                Ok(crate::guard::released(|| unsafe { real(pid, path, actions, attr, argv, envp) }))
            }
        }
    )*};
}
spawn_hooks!(posix_spawn, posix_spawnp);
