//! macOS-only copies and swaps: `clonefile`, `clonefileat`, `fclonefileat`
//! (copy-on-write copies: the source is read, the new name written) and
//! `exchangedata` (both names written). Registered on macOS only; Linux has no
//! such entry points.
use super::check;
use libc::{c_char, c_int, c_uint};

/// `CLONE_NOFOLLOW`: the source is not followed if it is a symlink.
const CLONE_NOFOLLOW: u32 = 0x0001;

hook! {
    fn clonefile(src: *const c_char, dst: *const c_char, flags: u32) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        let follow = flags & CLONE_NOFOLLOW == 0;
        // SAFETY: the caller's strings.
        unsafe {
            check(st, libc::AT_FDCWD, src, follow, true, false)?;
            check(st, libc::AT_FDCWD, dst, false, false, true)?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(src, dst, flags) })
    }
}

hook! {
    fn clonefileat(srcdir: c_int, src: *const c_char, dstdir: c_int, dst: *const c_char, flags: u32) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        let follow = flags & CLONE_NOFOLLOW == 0;
        // SAFETY: the caller's strings.
        unsafe {
            check(st, srcdir, src, follow, true, false)?;
            check(st, dstdir, dst, false, false, true)?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(srcdir, src, dstdir, dst, flags) })
    }
}

hook! {
    fn fclonefileat(srcfd: c_int, dstdir: c_int, dst: *const c_char, flags: u32) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // The source is an open descriptor (judged when it was opened).
        // SAFETY: the caller's string.
        unsafe { check(st, dstdir, dst, false, false, true) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(srcfd, dstdir, dst, flags) })
    }
}

hook! {
    fn exchangedata(a: *const c_char, b: *const c_char, options: c_uint) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // FSOPT_NOFOLLOW (1): neither name is followed.
        let follow = options & 1 == 0;
        // SAFETY: the caller's strings.
        unsafe {
            check(st, libc::AT_FDCWD, a, follow, true, true)?;
            check(st, libc::AT_FDCWD, b, follow, true, true)?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(a, b, options) })
    }
}
