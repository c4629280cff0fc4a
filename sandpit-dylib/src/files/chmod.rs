//! `chmod`, `fchmodat`: changing a file's mode is a write to it.
use super::check;
use libc::{c_char, c_int, mode_t};

write_hook! {
    fn chmod(path: *const c_char, mode: mode_t);
    path = path; dir = libc::AT_FDCWD; follow = true;
}

write_hook! {
    fn fchmodat(dir: c_int, path: *const c_char, mode: mode_t, flags: c_int);
    path = path; dir = dir; follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
}
