//! Small platform helpers: errno, raw writes, the loader's preload variable, the
//! process environment pointer, the path behind a directory fd.
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

/// The loader variable that injects this library, and its `NAME=` prefix.
pub const PRELOAD_NAME: &[u8] = crate::state::PRELOAD_VAR.as_bytes();
#[cfg(not(target_os = "macos"))]
pub const PRELOAD_ENTRY: &[u8] = b"LD_PRELOAD=";
#[cfg(target_os = "macos")]
pub const PRELOAD_ENTRY: &[u8] = b"DYLD_INSERT_LIBRARIES=";

/// Where libc keeps the process environment (`&environ`). In a macOS dylib
/// `environ` is not linkable; `_NSGetEnviron()` is the documented way.
pub fn environ_ptr() -> *mut *const *const libc::c_char {
    #[cfg(not(target_os = "macos"))]
    {
        extern "C" {
            static mut environ: *const *const libc::c_char;
        }
        // Taking the address of libc's global (not reading it) needs no unsafe.
        &raw mut environ
    }
    #[cfg(target_os = "macos")]
    {
        // SAFETY: _NSGetEnviron has no preconditions and returns libc's pointer.
        unsafe { libc::_NSGetEnviron() }.cast()
    }
}

/// The absolute path of the directory (or file) `fd` names, into `buf` (at least
/// PATH_MAX bytes): its length. macOS: `fcntl(F_GETPATH)`; Linux reads
/// `/proc/self/fd/N` instead (see `path::base_dir`).
///
/// # Safety
/// `buf` points to `len` writable bytes, `len >= PATH_MAX`.
#[cfg(target_os = "macos")]
pub unsafe fn fd_path(fd: c_int, buf: *mut libc::c_char, len: usize) -> Result<usize, c_int> {
    if len < libc::PATH_MAX as usize {
        return Err(libc::ENAMETOOLONG);
    }
    // SAFETY: F_GETPATH writes at most PATH_MAX bytes, NUL included, into `buf`.
    check(unsafe { libc::fcntl(fd, libc::F_GETPATH, buf) })?;
    // SAFETY: the kernel wrote a NUL-terminated string.
    Ok(unsafe { libc::strlen(buf) })
}

/// `O_TMPFILE` is set in `flags` (Linux; never elsewhere).
#[inline]
pub fn is_tmpfile(flags: c_int) -> bool {
    #[cfg(target_os = "linux")]
    {
        flags & O_TMPFILE == O_TMPFILE
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = flags;
        false
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
