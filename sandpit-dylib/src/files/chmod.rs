//! `chmod`, `fchmodat`: changing a file's mode is a write to it.
use super::check;
use libc::{c_char, c_int, mode_t};

hook! {
    fn chmod(path: *const c_char, mode: mode_t) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, true, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, mode) })
    }
}

hook! {
    fn fchmodat(dir: c_int, path: *const c_char, mode: mode_t, flags: c_int) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        // SAFETY: the caller's string.
        unsafe { check(st, dir, path, follow, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(dir, path, mode, flags) })
    }
}
