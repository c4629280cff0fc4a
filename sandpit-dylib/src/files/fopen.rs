//! `fopen`, `fopen64`, `freopen`, `freopen64`, `opendir`: glibc opens these with
//! its internal `__open`, not through the PLT, so they are hooked themselves. `fopen`
//! and `opendir` open through the same decision as `open` and wrap the fd with
//! `fdopen`/`fdopendir`.
use super::open::{open_impl, Opened};
use libc::{c_char, c_int, DIR, FILE};

/// `open(2)` flags for an `fopen` mode string; `None` if the mode is invalid.
pub fn mode_flags(mode: &[u8]) -> Option<c_int> {
    let mut flags = match mode.first()? {
        b'r' => libc::O_RDONLY,
        b'w' => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        b'a' => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
        _ => return None,
    };
    for &c in &mode[1..] {
        match c {
            b'+' => flags = (flags & !libc::O_ACCMODE) | libc::O_RDWR,
            b'x' => flags |= libc::O_EXCL,
            b'e' => flags |= libc::O_CLOEXEC,
            b',' => break,
            _ => {}
        }
    }
    Some(flags)
}

/// # Safety
/// `path` and `mode` are NULL or NUL-terminated.
unsafe fn fopen_impl(
    path: *const c_char,
    mode: *const c_char,
    real: unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE,
) -> Result<*mut FILE, c_int> {
    // SAFETY: per the contract.
    let m = unsafe { crate::sys::cstr(mode) }.ok_or(libc::EINVAL)?;
    let flags = mode_flags(m).ok_or(libc::EINVAL)?;
    // SAFETY: per the contract.
    match unsafe { open_impl(libc::AT_FDCWD, path, flags, 0o666) }? {
        Opened::CallReal => {
            // SAFETY: the caller's arguments, forwarded.
            Ok(unsafe { real(path, mode) })
        }
        Opened::Fd(fd) => {
            // SAFETY: `fd` is ours; `mode` is the caller's valid mode string.
            let f = unsafe { libc::fdopen(fd, mode) };
            if f.is_null() {
                let e = crate::sys::errno();
                // SAFETY: closing the fd we just opened.
                unsafe { libc::close(fd) };
                return Err(e);
            }
            Ok(f)
        }
    }
}

hook! {
    fn fopen(path: *const c_char, mode: *const c_char) -> *mut FILE;
    fail = std::ptr::null_mut();
    macos = ["fopen", "fopen$DARWIN_EXTSN"];
    |real| {
        // SAFETY: the caller's arguments, forwarded.
        unsafe { fopen_impl(path, mode, real) }
    }
}

#[cfg(target_os = "linux")]
hook! {
    fn fopen64(path: *const c_char, mode: *const c_char) -> *mut FILE;
    fail = std::ptr::null_mut();
    |real| {
        // SAFETY: the caller's arguments, forwarded.
        unsafe { fopen_impl(path, mode, real) }
    }
}

macro_rules! freopen_hooks {
    ($($name:ident),*) => {$(
        hook! {
            fn $name(path: *const c_char, mode: *const c_char, stream: *mut FILE) -> *mut FILE;
            fail = std::ptr::null_mut();
            |real| {
                if !path.is_null() {
                    let st = crate::state::get()?;
                    // SAFETY: the caller's mode string.
                    let m = unsafe { crate::sys::cstr(mode) }.ok_or(libc::EINVAL)?;
                    let flags = mode_flags(m).ok_or(libc::EINVAL)?;
                    let acc = flags & libc::O_ACCMODE;
                    let read = acc != libc::O_WRONLY;
                    let write = acc != libc::O_RDONLY;
                    // SAFETY: the caller's path string.
                    unsafe { super::check(st, libc::AT_FDCWD, path, true, read, write) }?;
                }
                // SAFETY: the caller's arguments, forwarded.
                Ok(unsafe { real(path, mode, stream) })
            }
        }
    )*};
}
freopen_hooks!(freopen);
#[cfg(target_os = "linux")]
freopen_hooks!(freopen64);

hook! {
    fn opendir(path: *const c_char) -> *mut DIR;
    fail = std::ptr::null_mut();
    // x86_64 programs call the 64-bit-inode variant; arm64 has only one.
    macos = ["opendir", #[cfg(target_arch = "x86_64")] "opendir$INODE64"];
    |real| {
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: the caller's path, forwarded.
        match unsafe { open_impl(libc::AT_FDCWD, path, flags, 0) }? {
            // SAFETY: the caller's arguments, forwarded.
            Opened::CallReal => Ok(unsafe { real(path) }),
            Opened::Fd(fd) => {
                // SAFETY: `fd` is a directory fd we own; fdopendir takes it over.
                let d = unsafe { libc::fdopendir(fd) };
                if d.is_null() {
                    let e = crate::sys::errno();
                    // SAFETY: closing the fd we opened.
                    unsafe { libc::close(fd) };
                    return Err(e);
                }
                Ok(d)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::mode_flags;

    #[test]
    fn modes() {
        assert_eq!(mode_flags(b"r"), Some(libc::O_RDONLY));
        assert_eq!(mode_flags(b"r+"), Some(libc::O_RDWR));
        assert_eq!(
            mode_flags(b"wxe"),
            Some(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_EXCL | libc::O_CLOEXEC)
        );
        assert_eq!(
            mode_flags(b"ab+"),
            Some(libc::O_RDWR | libc::O_CREAT | libc::O_APPEND)
        );
        assert_eq!(mode_flags(b"q"), None);
    }
}
