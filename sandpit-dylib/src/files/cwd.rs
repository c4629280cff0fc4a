//! `chdir` and `fchdir` (Linux): whether the working directory lies inside a
//! read-denied path the kernel layer does not hide (`files.kernel_unmasked`), kept
//! for the kernel-first opens of relative paths (see `open.rs`). Known after the
//! first such open, forgotten at every change of directory.
use crate::path::{self, PBuf};
use crate::state::State;
use libc::{c_char, c_int};
use std::sync::atomic::{AtomicU8, Ordering};

const UNKNOWN: u8 = 0;
const OUTSIDE: u8 = 1;
const INSIDE: u8 = 2;

static CWD: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether the cwd is inside (or is) an unmasked read-denied path; an unreadable
/// cwd counts as inside.
pub fn in_unmasked(st: &State) -> bool {
    match CWD.load(Ordering::Acquire) {
        OUTSIDE => false,
        INSIDE => true,
        _ => {
            let mut cwd = PBuf::new();
            let inside = path::base_dir(libc::AT_FDCWD, &mut cwd).is_err()
                || st.decider.in_unmasked(cwd.as_bytes());
            // A change of directory racing this store is caught by its own reset,
            // which comes after its system call.
            CWD.store(if inside { INSIDE } else { OUTSIDE }, Ordering::Release);
            inside
        }
    }
}

fn forget() {
    CWD.store(UNKNOWN, Ordering::Release);
}

hook! {
    fn chdir(path: *const c_char) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's argument, forwarded.
        let r = unsafe { real(path) };
        forget();
        Ok(r)
    }
}

hook! {
    fn fchdir(fd: c_int) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's argument, forwarded.
        let r = unsafe { real(fd) };
        forget();
        Ok(r)
    }
}
