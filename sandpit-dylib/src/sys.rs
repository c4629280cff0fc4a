//! Small platform helpers: errno, raw writes.
use libc::c_int;

#[inline]
pub fn set_errno(e: c_int) {
    // SAFETY: the errno location is valid for the calling thread.
    unsafe {
        #[cfg(target_os = "linux")]
        {
            *libc::__errno_location() = e;
        }
        #[cfg(target_os = "macos")]
        {
            *libc::__error() = e;
        }
    }
}

#[inline]
pub fn errno() -> c_int {
    // SAFETY: as above.
    unsafe {
        #[cfg(target_os = "linux")]
        {
            *libc::__errno_location()
        }
        #[cfg(target_os = "macos")]
        {
            *libc::__error()
        }
    }
}

/// `Err(errno)` if `r` is -1, else `Ok(r)`.
#[inline]
pub fn check(r: c_int) -> Result<c_int, c_int> {
    if r == -1 {
        Err(errno())
    } else {
        Ok(r)
    }
}

/// Bytes of a NUL-terminated C string (without the NUL). `None` for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
#[inline]
pub unsafe fn cstr<'a>(p: *const libc::c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: guaranteed by the caller.
        Some(unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes())
    }
}
