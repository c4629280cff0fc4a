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

/// Linux: mark this process non-dumpable, so no other process of the user — its own
/// children included — can read its `/proc/PID/environ` or memory. A no-op on other
/// systems. The mark is dropped again at the next `execve`.
pub fn hide_environ() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments only; it changes no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
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

/// `openat2(2)`: the new fd or the errno. A direct system call on x86_64 Linux (the
/// hot path of every hooked `open`), libc's `syscall()` elsewhere.
///
/// # Safety
/// `path` is NUL-terminated and `how` points to `size` readable bytes.
#[inline]
pub unsafe fn openat2(
    dirfd: c_int,
    path: *const libc::c_char,
    how: *const u8,
    size: usize,
) -> Result<c_int, c_int> {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        let r: isize;
        // SAFETY: the openat2 system call with the caller's valid arguments; the
        // kernel clobbers rcx and r11 only.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") libc::SYS_openat2 as isize => r,
                in("rdi") dirfd as isize,
                in("rsi") path,
                in("rdx") how,
                in("r10") size,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        if r < 0 {
            Err((-r) as c_int)
        } else {
            Ok(r as c_int)
        }
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: per the contract.
            let r = unsafe { libc::syscall(libc::SYS_openat2, dirfd, path, how, size) };
            if r < 0 {
                Err(errno())
            } else {
                Ok(r as c_int)
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (dirfd, path, how, size);
            Err(libc::ENOSYS)
        }
    }
}

/// Flags that only some platforms have: zero where absent, so `flags & X` is false.
#[cfg(target_os = "linux")]
mod flags {
    pub const O_TMPFILE: libc::c_int = libc::O_TMPFILE;
    pub const SOCK_CLOEXEC: libc::c_int = libc::SOCK_CLOEXEC;
    pub const MSG_NOSIGNAL: libc::c_int = libc::MSG_NOSIGNAL;
    pub const MSG_FASTOPEN: libc::c_int = libc::MSG_FASTOPEN;
}
#[cfg(not(target_os = "linux"))]
mod flags {
    pub const O_TMPFILE: libc::c_int = 0;
    pub const SOCK_CLOEXEC: libc::c_int = 0;
    pub const MSG_NOSIGNAL: libc::c_int = 0;
    pub const MSG_FASTOPEN: libc::c_int = 0;
}
pub use flags::*;
