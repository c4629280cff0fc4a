//! File hooks. Every path is judged as the kernel will see it: made absolute against
//! the cwd or the directory fd, `.`/`..`/`//` folded and symlinks (including `/proc`
//! magic links such as `/proc/self/root` and `/proc/self/fd/N`) resolved.
use crate::decide::Access;
use crate::path::{self, Kind, PBuf};
use crate::state::State;
use libc::{c_char, c_int};

/// A hook whose whole judgement is one write to its path argument `path` (relative
/// to `dir`, the final symlink followed when `follow`), then the real call with the
/// caller's arguments. The calling module imports `check`.
macro_rules! write_hook {
    ($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?);
     path = $path:ident; dir = $dir:expr; follow = $follow:expr $(;)?) => {
        hook! {
            $(#[$meta])*
            fn $name($($arg: $ty),*) -> ::libc::c_int;
            fail = -1;
            |real| {
                let st = crate::state::get()?;
                // SAFETY: the caller's string.
                unsafe { check(st, $dir, $path, $follow, false, true) }?;
                // SAFETY: the caller's arguments, forwarded.
                Ok(unsafe { real($($arg),*) })
            }
        }
    };
}

pub mod attr;
pub mod chmod;
#[cfg(target_os = "macos")]
pub mod clone;
pub mod fopen;
pub mod link;
pub mod mkdir;
pub mod open;
pub mod rename;
pub mod truncate;
pub mod unlink;

/// Absolute form of `path` relative to `dirfd`: `.` and `//` dropped, `..` kept
/// (see [`path::join`]); with no `..` this is exactly the path the kernel walks
/// when no symlink is involved.
pub fn absolute(dirfd: c_int, path: &[u8], out: &mut PBuf) -> Result<(), c_int> {
    if path.first() == Some(&b'/') {
        return path::join(b"/", path, out);
    }
    let mut base = PBuf::new();
    path::base_dir(dirfd, &mut base)?;
    path::join(base.as_bytes(), path, out)
}

/// [`absolute`] for a path relative to the cwd, the cwd taken from memory when
/// `recalled` allows it and there is one (Linux, [`crate::cwd`]); whether it was.
pub fn absolute_from_cwd(path: &[u8], out: &mut PBuf, recalled: bool) -> Result<bool, c_int> {
    #[cfg(target_os = "linux")]
    if recalled {
        let mut base = PBuf::new();
        // A remembered cwd never fails an open: if the join fails, ask the kernel's.
        if crate::cwd::recall(&mut base) && path::join(base.as_bytes(), path, out).is_ok() {
            return Ok(true);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = recalled;
    absolute(libc::AT_FDCWD, path, out).map(|()| false)
}

/// Ask the policy about a resolved path; report and return `EACCES` on denial.
pub fn judge(
    st: &State,
    kind: Kind,
    resolved: &[u8],
    read: bool,
    write: bool,
) -> Result<(), c_int> {
    if kind == Kind::NotAPath {
        return Ok(());
    }
    let ask = |access: Access| match st.decider.path(access, resolved) {
        Ok(()) => Ok(()),
        Err(d) => {
            crate::report::denied(&d);
            Err(libc::EACCES)
        }
    };
    if read {
        if !write
            && kind == Kind::Missing
            && !st.decider.path_allowed_fast(Access::Read, resolved)
            && absent(resolved)
        {
            // Nothing there to read: the kernel's own answer, and no denial to report.
            // Tools probe absent config files (`~/.npmrc`, `~/.yarnrc.yml`) and treat
            // ENOENT as "none" but EACCES as fatal (yarn). Judged at each call, so a
            // file created later is refused like any other; a path hidden behind a
            // mask (lstat: EACCES) is still a reported denial.
            return Err(libc::ENOENT);
        }
        ask(Access::Read)?;
    }
    // Writing into an existing device, FIFO or socket changes no file.
    if write && kind != Kind::Special {
        ask(Access::Write)?;
    }
    Ok(())
}

/// Whether nothing exists at the absolute path `p` (lstat fails with ENOENT or
/// ENOTDIR), as opposed to a path sandpit's masks make unreachable.
pub fn absent(p: &[u8]) -> bool {
    let mut c = PBuf::new();
    if c.set(p).is_err() {
        return false;
    }
    // SAFETY: zeroed stat is a valid out-parameter; `c` is NUL-terminated.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::lstat(c.as_ptr(), &mut st) } == 0 {
        return false;
    }
    matches!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR)
    )
}

/// Resolve `path` (relative to `dirfd`) and judge it. `follow`: whether the last
/// component is followed if it is a symlink.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub unsafe fn check(
    st: &State,
    dirfd: c_int,
    path: *const c_char,
    follow: bool,
    read: bool,
    write: bool,
) -> Result<(), c_int> {
    // SAFETY: per the contract.
    let p = unsafe { crate::sys::cstr(path) }.ok_or(libc::EFAULT)?;
    let mut abs = PBuf::new();
    absolute(dirfd, p, &mut abs)?;
    let mut res = PBuf::new();
    let kind = path::resolve(abs.as_bytes(), follow, &mut res)?;
    judge(st, kind, res.as_bytes(), read, write)
}
