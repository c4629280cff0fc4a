//! `unlink`, `unlinkat`, `rmdir`: the name itself is written (not followed).
use super::check;
use libc::{c_char, c_int};

hook! {
    fn unlink(path: *const c_char) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path) })
    }
}

hook! {
    fn unlinkat(dir: c_int, path: *const c_char, flags: c_int) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, dir, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(dir, path, flags) })
    }
}

hook! {
    fn rmdir(path: *const c_char) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path) })
    }
}
