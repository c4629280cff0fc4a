//! `link`, `linkat`, `symlink`, `symlinkat`. A hard link must not give a readable
//! or writable second name to a file the policy protects: the old name is judged
//! for read and write, the new one for write. A symlink's new name is written; its
//! target is judged whenever something opens through it.
use super::check;
use libc::{c_char, c_int};

hook! {
    fn link(old: *const c_char, new: *const c_char) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's strings.
        unsafe {
            check(st, libc::AT_FDCWD, old, false, true, true)?;
            check(st, libc::AT_FDCWD, new, false, false, true)?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(old, new) })
    }
}

hook! {
    fn linkat(olddir: c_int, old: *const c_char, newdir: c_int, new: *const c_char, flags: c_int) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
        // SAFETY: the caller's strings.
        unsafe {
            check(st, olddir, old, follow, true, true)?;
            check(st, newdir, new, false, false, true)?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(olddir, old, newdir, new, flags) })
    }
}

hook! {
    fn symlink(target: *const c_char, new: *const c_char) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, new, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(target, new) })
    }
}

hook! {
    fn symlinkat(target: *const c_char, newdir: c_int, new: *const c_char) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, newdir, new, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(target, newdir, new) })
    }
}
