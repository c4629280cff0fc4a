//! `unlink`, `unlinkat`, `rmdir`: the name itself is written (not followed).
use super::check;
use libc::{c_char, c_int};

write_hook! {
    fn unlink(path: *const c_char);
    path = path; dir = libc::AT_FDCWD; follow = false;
}

write_hook! {
    fn unlinkat(dir: c_int, path: *const c_char, flags: c_int);
    path = path; dir = dir; follow = false;
}

write_hook! {
    fn rmdir(path: *const c_char);
    path = path; dir = libc::AT_FDCWD; follow = false;
}
