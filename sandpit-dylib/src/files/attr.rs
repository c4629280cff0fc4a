//! Metadata changes that alter a file: `chown`, `lchown`, `fchownat`, `utime`,
//! `utimes`, `lutimes`, `utimensat`, and new nodes: `mknod`, `mknodat`, `mkfifo`,
//! `mkfifoat`. Each is a write to the path (fd-only forms are not path-based and
//! pass through).
use super::check;
use libc::{c_char, c_int, dev_t, gid_t, mode_t, timespec, timeval, uid_t, utimbuf};

hook! {
    fn chown(path: *const c_char, uid: uid_t, gid: gid_t) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, true, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, uid, gid) })
    }
}

hook! {
    fn lchown(path: *const c_char, uid: uid_t, gid: gid_t) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, uid, gid) })
    }
}

hook! {
    fn fchownat(dir: c_int, path: *const c_char, uid: uid_t, gid: gid_t, flags: c_int) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        // SAFETY: the caller's string.
        unsafe { check(st, dir, path, follow, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(dir, path, uid, gid, flags) })
    }
}

hook! {
    fn utime(path: *const c_char, times: *const utimbuf) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, true, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, times) })
    }
}

hook! {
    fn utimes(path: *const c_char, times: *const timeval) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, true, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, times) })
    }
}

hook! {
    fn lutimes(path: *const c_char, times: *const timeval) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, times) })
    }
}

hook! {
    fn utimensat(dir: c_int, path: *const c_char, times: *const timespec, flags: c_int) -> c_int;
    fail = -1;
    |real| {
        if !path.is_null() {
            let st = crate::state::get()?;
            let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
            // SAFETY: the caller's string.
            unsafe { check(st, dir, path, follow, false, true) }?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(dir, path, times, flags) })
    }
}

hook! {
    fn mknod(path: *const c_char, mode: mode_t, dev: dev_t) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, libc::AT_FDCWD, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, mode, dev) })
    }
}

hook! {
    fn mknodat(dir: c_int, path: *const c_char, mode: mode_t, dev: dev_t) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, dir, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(dir, path, mode, dev) })
    }
}

hook! {
    fn mkfifo(path: *const c_char, mode: mode_t) -> c_int;
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
    fn mkfifoat(dir: c_int, path: *const c_char, mode: mode_t) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's string.
        unsafe { check(st, dir, path, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(dir, path, mode) })
    }
}
