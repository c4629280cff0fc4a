//! `mkdir`, `mkdirat`: the new name is written.
use super::check;
use libc::{c_char, c_int, mode_t};

write_hook! {
    fn mkdir(path: *const c_char, mode: mode_t);
    path = path; dir = libc::AT_FDCWD; follow = false;
}

write_hook! {
    fn mkdirat(dir: c_int, path: *const c_char, mode: mode_t);
    path = path; dir = dir; follow = false;
}
