//! `truncate`, `truncate64`: a write to the file.
use super::check;
use libc::{c_char, off_t};

write_hook! {
    fn truncate(path: *const c_char, len: off_t);
    path = path; dir = libc::AT_FDCWD; follow = true;
}

#[cfg(target_os = "linux")]
write_hook! {
    fn truncate64(path: *const c_char, len: off_t);
    path = path; dir = libc::AT_FDCWD; follow = true;
}
