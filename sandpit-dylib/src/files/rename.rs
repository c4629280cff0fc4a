//! `rename`, `renameat`, `renameat2`: both names are written (neither is followed).
use super::check;
use libc::{c_char, c_int, c_uint};

hook! {
    fn rename(old: *const c_char, new: *const c_char) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's strings.
        unsafe {
            check(st, libc::AT_FDCWD, old, false, false, true)?;
            check(st, libc::AT_FDCWD, new, false, false, true)?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(old, new) })
    }
}

hook! {
    fn renameat(olddir: c_int, old: *const c_char, newdir: c_int, new: *const c_char) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's strings.
        unsafe {
            check(st, olddir, old, false, false, true)?;
            check(st, newdir, new, false, false, true)?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(olddir, old, newdir, new) })
    }
}

hook! {
    fn renameat2(olddir: c_int, old: *const c_char, newdir: c_int, new: *const c_char, flags: c_uint) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's strings.
        unsafe {
            check(st, olddir, old, false, false, true)?;
            check(st, newdir, new, false, false, true)?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(olddir, old, newdir, new, flags) })
    }
}
