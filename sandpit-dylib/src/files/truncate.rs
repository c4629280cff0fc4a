//! `truncate`, `truncate64`: a write to the file.
use super::check;
use libc::{c_char, c_int, off_t};

macro_rules! truncate_hooks {
    ($($name:ident),*) => {$(
        hook! {
            fn $name(path: *const c_char, len: off_t) -> c_int;
            fail = -1;
            |real| {
                let st = crate::state::get()?;
                // SAFETY: the caller's string.
                unsafe { check(st, libc::AT_FDCWD, path, true, false, true) }?;
                // SAFETY: the caller's arguments, forwarded.
                Ok(unsafe { real(path, len) })
            }
        }
    )*};
}
truncate_hooks!(truncate);
#[cfg(target_os = "linux")]
truncate_hooks!(truncate64);
