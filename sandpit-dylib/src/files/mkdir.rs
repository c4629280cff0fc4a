//! `mkdir`, `mkdirat`: the new name is written.
use super::check;
use libc::{c_char, c_int, mode_t};

hook! {
    fn mkdir(path: *const c_char, mode: mode_t) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, mode) })
    }
}

hook! {
    fn mkdirat(dir: c_int, path: *const c_char, mode: mode_t) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, dir, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(dir, path, mode) })
    }
}
