//! Metadata changes that alter a file: `chown`, `lchown`, `fchownat`, `utime`,
//! `utimes`, `lutimes`, `utimensat`, and new nodes: `mknod`, `mknodat`, `mkfifo`,
//! `mkfifoat`. Each is a write to the path (fd-only forms are not path-based and
//! pass through).
use super::check;
use libc::{c_char, c_int, dev_t, gid_t, mode_t, timespec, timeval, uid_t, utimbuf};

write_hook! {
    fn chown(path: *const c_char, uid: uid_t, gid: gid_t);
    path = path; dir = libc::AT_FDCWD; follow = true;
}

write_hook! {
    fn lchown(path: *const c_char, uid: uid_t, gid: gid_t);
    path = path; dir = libc::AT_FDCWD; follow = false;
}

write_hook! {
    fn fchownat(dir: c_int, path: *const c_char, uid: uid_t, gid: gid_t, flags: c_int);
    path = path; dir = dir; follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
}

write_hook! {
    fn utime(path: *const c_char, times: *const utimbuf);
    path = path; dir = libc::AT_FDCWD; follow = true;
}

write_hook! {
    fn utimes(path: *const c_char, times: *const timeval);
    path = path; dir = libc::AT_FDCWD; follow = true;
}

write_hook! {
    fn lutimes(path: *const c_char, times: *const timeval);
    path = path; dir = libc::AT_FDCWD; follow = false;
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

write_hook! {
    fn mknod(path: *const c_char, mode: mode_t, dev: dev_t);
    path = path; dir = libc::AT_FDCWD; follow = false;
}

write_hook! {
    fn mknodat(dir: c_int, path: *const c_char, mode: mode_t, dev: dev_t);
    path = path; dir = dir; follow = false;
}

write_hook! {
    fn mkfifo(path: *const c_char, mode: mode_t);
    path = path; dir = libc::AT_FDCWD; follow = false;
}

write_hook! {
    fn mkfifoat(dir: c_int, path: *const c_char, mode: mode_t);
    path = path; dir = dir; follow = false;
}
