//! `posix_spawn`, `posix_spawnp`: judged and given a composed environment; glibc's
//! spawned child then calls its internal execve, which needs no hook because the
//! environment already carries the preload. The agent's spawn runs on a thread that
//! holds the layer hiding `files.agent_read` (`super::start`). (On macOS `posix_spawn` is a system
//! call: this hook is the only place the interposer sees the new program.)
//!
//! macOS: `posix_spawn_file_actions_addopen` names a file the kernel opens in the
//! child, where no hook runs: the path is judged like an `open` when the action is
//! recorded. (It is resolved against the caller's current directory; a later
//! `addchdir_np` action can change what the kernel opens — Seatbelt still holds.)
use super::{prepare, start, Find, How};
use crate::envp::Envp;
use libc::{c_char, c_int, pid_t, posix_spawn_file_actions_t, posix_spawnattr_t};

macro_rules! spawn_hooks {
    ($($name:ident: $find:expr),*) => {$(
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
                let prep = match unsafe { prepare(Some(p), $find, How::Spawn, argv, envp, &mut env) } {
                    Ok(e) => e,
                    Err(e) => return Ok(e),
                };
                let envp = prep.envp;
                // SAFETY: the caller's arguments; `envp` lives in `env`.
                match start(prep.hide, || unsafe { real(pid, path, actions, attr, argv, envp) }) {
                    Ok(r) => Ok(r),
                    Err(e) => Ok(e),
                }
            }
        }
    )*};
}
spawn_hooks!(posix_spawn: Find::Path, posix_spawnp: Find::Search);

#[cfg(target_os = "macos")]
hook! {
    fn posix_spawn_file_actions_addopen(
        actions: *mut posix_spawn_file_actions_t,
        fd: c_int,
        path: *const c_char,
        flags: c_int,
        mode: libc::mode_t
    ) -> c_int;
    // Reports errors in its return value, not errno.
    fail = libc::EPERM;
    |real| {
        let st = crate::state::get()?;
        let (read, write) = crate::files::open::wants(flags);
        let follow = flags & libc::O_NOFOLLOW == 0
            && !(flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0);
        // SAFETY: the caller's string.
        if let Err(e) = unsafe { crate::files::check(st, libc::AT_FDCWD, path, follow, read, write) } {
            return Ok(e);
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(actions, fd, path, flags, mode) })
    }
}
