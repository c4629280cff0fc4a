//! `rename`, `renameat`, `renameat2` (Linux), `renamex_np`, `renameatx_np` (macOS):
//! both names are written (neither is followed).
use super::check;
use libc::{c_char, c_int};

/// Judge both names of a rename as writes, neither followed.
///
/// # Safety
/// `old` and `new` are NULL or NUL-terminated.
unsafe fn both_written(
    olddir: c_int,
    old: *const c_char,
    newdir: c_int,
    new: *const c_char,
) -> Result<(), c_int> {
    let st = crate::state::get()?;
    // SAFETY: per the contract.
    unsafe {
        check(st, olddir, old, false, false, true)?;
        check(st, newdir, new, false, false, true)
    }
}

hook! {
    fn rename(old: *const c_char, new: *const c_char) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's strings.
        unsafe { both_written(libc::AT_FDCWD, old, libc::AT_FDCWD, new) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(old, new) })
    }
}

hook! {
    fn renameat(olddir: c_int, old: *const c_char, newdir: c_int, new: *const c_char) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's strings.
        unsafe { both_written(olddir, old, newdir, new) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(olddir, old, newdir, new) })
    }
}

#[cfg(target_os = "linux")]
hook! {
    fn renameat2(olddir: c_int, old: *const c_char, newdir: c_int, new: *const c_char, flags: libc::c_uint) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's strings.
        unsafe { both_written(olddir, old, newdir, new) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(olddir, old, newdir, new, flags) })
    }
}

#[cfg(target_os = "macos")]
hook! {
    fn renamex_np(old: *const c_char, new: *const c_char, flags: libc::c_uint) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's strings.
        unsafe { both_written(libc::AT_FDCWD, old, libc::AT_FDCWD, new) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(old, new, flags) })
    }
}

#[cfg(target_os = "macos")]
hook! {
    fn renameatx_np(olddir: c_int, old: *const c_char, newdir: c_int, new: *const c_char, flags: libc::c_uint) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's strings.
        unsafe { both_written(olddir, old, newdir, new) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(olddir, old, newdir, new, flags) })
    }
}
