//! `open`, `open64`, `openat`, `openat64`, `creat`, `creat64`, the fortified
//! `__open_2`, `__open64_2`, `__openat_2`, `__openat64_2` (glibc), and macOS's
//! `open_dprotected_np`, `openat_dprotected_np`, `guarded_open_np`,
//! `guarded_open_dprotected_np`, `openat_authenticated_np`.
//!
//! `open`/`openat` are variadic in C. On x86_64 and aarch64 Linux a variadic
//! argument travels exactly like a fixed one, so the hooks declare `mode` as a
//! fixed third/fourth argument (read only with `O_CREAT`/`O_TMPFILE`). Apple arm64
//! passes variadic arguments on the stack: there the `__interpose` replacement is a
//! C trampoline (`csrc/darwin.c`) that fetches the mode and calls the same body.
//!
//! Fast path: when the policy allows the lexically folded absolute path and the
//! path has no `..`, the file is opened with `openat2(…, RESOLVE_NO_SYMLINKS)` —
//! one syscall, and the kernel guarantees that no symlink changed what was judged.
//! An absolute path is opened as judged; one relative to the cwd relative to the
//! cwd it was judged under, so the kernel walks its few components rather than the
//! whole path from `/` again. A symlink on the way (`ELOOP`), a lexical denial or an
//! old kernel take the slow path: full resolution, judge, then the real call.
use super::{absolute, absolute_from_cwd, judge};
use crate::decide::Access;
use crate::path::{self, PBuf};
use libc::{c_char, c_int, mode_t};
use std::sync::atomic::{AtomicBool, Ordering};

static OPENAT2: AtomicBool = AtomicBool::new(true);
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

pub enum Opened {
    Fd(c_int),
    /// Judged allowed: make the real call with the caller's arguments.
    CallReal,
}

pub(crate) fn wants(flags: c_int) -> (bool, bool) {
    let acc = flags & libc::O_ACCMODE;
    let write = acc != libc::O_RDONLY
        || flags & (libc::O_CREAT | libc::O_TRUNC) != 0
        || crate::sys::is_tmpfile(flags);
    let read = acc != libc::O_WRONLY;
    (read, write)
}

fn creates(flags: c_int) -> bool {
    flags & libc::O_CREAT != 0 || crate::sys::is_tmpfile(flags)
}

/// The decision (and, on the fast path, the open itself) for every open-like hook.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
pub unsafe fn open_impl(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> Result<Opened, c_int> {
    let st = crate::state::get()?;
    // SAFETY: per the contract.
    let p = unsafe { crate::sys::cstr(path) }.ok_or(libc::EFAULT)?;
    if p.is_empty() {
        // The kernel's answer; joining "" onto the cwd would open the cwd instead.
        return Err(libc::ENOENT);
    }
    let (read, write) = wants(flags);
    let mut abs = PBuf::new();
    // An absolute path already in canonical spelling is used as the caller passed
    // it (no copy); anything else is made absolute in `abs`.
    let (clean, dotdot) = if p.first() == Some(&b'/') {
        path::scan(p)
    } else {
        (false, path::has_dotdot(p))
    };
    let from_cwd = p.first() != Some(&b'/') && dirfd == libc::AT_FDCWD;
    // A read-only open relative to the cwd is judged against the remembered cwd,
    // which is trusted only to allow it on the fast path below (see crate::cwd). Not
    // a write: in fallback mode, and for a protected path holding a writable root,
    // the interposer is the only layer that keeps protected paths unwritten.
    let mut recalled = false;
    if !clean {
        if from_cwd {
            recalled = absolute_from_cwd(p, &mut abs, !write)?;
        } else {
            absolute(dirfd, p, &mut abs)?;
        }
    }
    // What the fast path opens (from the cwd): the caller's string or `abs`. A path
    // relative to the cwd, without `..`, names the same file from the cwd as the
    // judged absolute path (getcwd: physical, and inside this mount namespace — an
    // unreachable cwd has no such path and fails above) does from `/`, unless the
    // cwd moves in between — which a process could as well do with a raw system
    // call; the kernel layer holds either way. A directory fd is not used so: one
    // inherited from outside the sandbox's mount namespace reads as a path of this
    // namespace.
    let open_path = if clean || from_cwd {
        path
    } else {
        abs.as_ptr()
    };

    if OPENAT2.load(Ordering::Relaxed) && !dotdot {
        let d = &st.decider;
        // A write is allowed on the fast path only where a read is: one check.
        let lexical_ok = |abs: &[u8]| match (read, write) {
            (_, true) => d.path_allowed_fast(Access::Write, abs),
            (true, false) => d.path_allowed_fast(Access::Read, abs),
            (false, false) => true,
        };
        let mut ok = lexical_ok(if clean { p } else { abs.as_bytes() });
        if !ok && recalled {
            recalled = absolute_from_cwd(p, &mut abs, false)?;
            ok = lexical_ok(abs.as_bytes());
        }
        if ok {
            let how = OpenHow {
                flags: flags as u32 as u64,
                mode: if creates(flags) {
                    u64::from(mode & 0o7777)
                } else {
                    0
                },
                resolve: RESOLVE_NO_SYMLINKS,
            };
            // SAFETY: `open_path` is NUL-terminated (the caller's string or `abs`)
            // and `how` is a valid open_how of the size passed.
            let r = unsafe {
                crate::sys::openat2(
                    libc::AT_FDCWD,
                    open_path,
                    (&raw const how).cast(),
                    std::mem::size_of::<OpenHow>(),
                )
            };
            let e = match r {
                Ok(fd) => return Ok(Opened::Fd(fd)),
                Err(e) => e,
            };
            match e {
                // Answers the kernel gives before any symlink could matter.
                e @ (libc::ENOENT | libc::EACCES | libc::EEXIST | libc::EISDIR | libc::ENOTDIR) => {
                    return Err(e)
                }
                libc::ENOSYS => OPENAT2.store(false, Ordering::Relaxed),
                // ELOOP (a symlink or magic link on the way), EINVAL (flags openat2
                // refuses but open ignores), EXDEV, …: decide the slow way.
                _ => {}
            }
        }
    }
    if recalled {
        // The slow path may deny: never on a remembered cwd.
        absolute_from_cwd(p, &mut abs, false)?;
    }
    let abs_bytes = if clean { p } else { abs.as_bytes() };

    let follow =
        flags & libc::O_NOFOLLOW == 0 && !(flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0);
    let mut res = PBuf::new();
    let kind = path::resolve(abs_bytes, follow, &mut res)?;
    judge(st, kind, res.as_bytes(), read, write)?;
    Ok(Opened::CallReal)
}

macro_rules! open_hooks {
    ($($(#[$m:meta])* $name:ident = [$($syms:tt)*]),*) => {$(
        $(#[$m])*
        hook! {
            fn $name(path: *const c_char, flags: c_int, mode: mode_t) -> c_int;
            fail = -1;
            macos_variadic = [$($syms)*];
            |real| {
                // SAFETY: the caller's arguments, forwarded.
                match unsafe { open_impl(libc::AT_FDCWD, path, flags, mode) }? {
                    Opened::Fd(fd) => Ok(fd),
                    // SAFETY: the caller's arguments, forwarded.
                    Opened::CallReal => Ok(unsafe { real(path, flags, mode) }),
                }
            }
        }
    )*};
}
open_hooks!(
    open = ["open", "open$NOCANCEL"],
    #[cfg(target_os = "linux")]
    open64 = ["open64"]
);

macro_rules! openat_hooks {
    ($($(#[$m:meta])* $name:ident = [$($syms:tt)*]),*) => {$(
        $(#[$m])*
        hook! {
            fn $name(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int;
            fail = -1;
            macos_variadic = [$($syms)*];
            |real| {
                // SAFETY: the caller's arguments, forwarded.
                match unsafe { open_impl(dirfd, path, flags, mode) }? {
                    Opened::Fd(fd) => Ok(fd),
                    // SAFETY: the caller's arguments, forwarded.
                    Opened::CallReal => Ok(unsafe { real(dirfd, path, flags, mode) }),
                }
            }
        }
    )*};
}
openat_hooks!(
    openat = ["openat", "openat$NOCANCEL"],
    #[cfg(target_os = "linux")]
    openat64 = ["openat64"]
);

macro_rules! creat_hooks {
    ($($(#[$m:meta])* $name:ident = [$($syms:tt)*]),*) => {$(
        $(#[$m])*
        hook! {
            fn $name(path: *const c_char, mode: mode_t) -> c_int;
            fail = -1;
            macos = [$($syms)*];
            |real| {
                let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
                // SAFETY: the caller's arguments, forwarded.
                match unsafe { open_impl(libc::AT_FDCWD, path, flags, mode) }? {
                    Opened::Fd(fd) => Ok(fd),
                    // SAFETY: the caller's arguments, forwarded.
                    Opened::CallReal => Ok(unsafe { real(path, mode) }),
                }
            }
        }
    )*};
}
creat_hooks!(
    creat = ["creat", "creat$NOCANCEL"],
    #[cfg(target_os = "linux")]
    creat64 = ["creat64"]
);

// Fortified variants (`_FORTIFY_SOURCE`, glibc): no mode, they refuse O_CREAT
// themselves.
macro_rules! open2_hooks {
    ($($name:ident),*) => {$(
        #[cfg(target_os = "linux")]
        hook! {
            fn $name(path: *const c_char, flags: c_int) -> c_int;
            fail = -1;
            |real| {
                // SAFETY: the caller's arguments, forwarded.
                match unsafe { open_impl(libc::AT_FDCWD, path, flags, 0) }? {
                    Opened::Fd(fd) => Ok(fd),
                    // SAFETY: the caller's arguments, forwarded.
                    Opened::CallReal => Ok(unsafe { real(path, flags) }),
                }
            }
        }
    )*};
}
open2_hooks!(__open_2, __open64_2);

macro_rules! openat2_hooks {
    ($($name:ident),*) => {$(
        #[cfg(target_os = "linux")]
        hook! {
            fn $name(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
            fail = -1;
            |real| {
                // SAFETY: the caller's arguments, forwarded.
                match unsafe { open_impl(dirfd, path, flags, 0) }? {
                    Opened::Fd(fd) => Ok(fd),
                    // SAFETY: the caller's arguments, forwarded.
                    Opened::CallReal => Ok(unsafe { real(dirfd, path, flags) }),
                }
            }
        }
    )*};
}
openat2_hooks!(__openat_2, __openat64_2);

/// macOS: judge an open for the variants below; the real call does the open (the
/// `openat2` fast path does not exist there, but an fd it returned is closed so the
/// caller's protection class or guard is never skipped).
#[cfg(target_os = "macos")]
unsafe fn judge_only(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> Result<(), c_int> {
    // SAFETY: the caller's string, per the contract.
    if let Opened::Fd(fd) = unsafe { open_impl(dirfd, path, flags, mode) }? {
        // SAFETY: an fd we opened and nobody else has seen.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

// macOS data-protection and guarded opens: C-variadic like `open` (the mode follows
// the last named argument), and each would otherwise open a path unjudged.
#[cfg(target_os = "macos")]
hook! {
    fn open_dprotected_np(path: *const c_char, flags: c_int, class: c_int, dpflags: c_int, mode: mode_t) -> c_int;
    fail = -1;
    macos_variadic = ["open_dprotected_np"];
    |real| {
        // SAFETY: the caller's arguments, forwarded.
        unsafe { judge_only(libc::AT_FDCWD, path, flags, mode) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, flags, class, dpflags, mode) })
    }
}

#[cfg(target_os = "macos")]
hook! {
    fn openat_dprotected_np(dirfd: c_int, path: *const c_char, flags: c_int, class: c_int, dpflags: c_int, mode: mode_t) -> c_int;
    fail = -1;
    macos_variadic = ["openat_dprotected_np"];
    |real| {
        // SAFETY: the caller's arguments, forwarded.
        unsafe { judge_only(dirfd, path, flags, mode) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(dirfd, path, flags, class, dpflags, mode) })
    }
}

#[cfg(target_os = "macos")]
hook! {
    fn guarded_open_np(path: *const c_char, guard: *const u64, guardflags: libc::c_uint, flags: c_int, mode: mode_t) -> c_int;
    fail = -1;
    macos_variadic = ["guarded_open_np"];
    |real| {
        // SAFETY: the caller's arguments, forwarded.
        unsafe { judge_only(libc::AT_FDCWD, path, flags, mode) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, guard, guardflags, flags, mode) })
    }
}

#[cfg(target_os = "macos")]
hook! {
    fn guarded_open_dprotected_np(path: *const c_char, guard: *const u64, guardflags: libc::c_uint, flags: c_int, class: c_int, dpflags: c_int, mode: mode_t) -> c_int;
    fail = -1;
    macos_variadic = ["guarded_open_dprotected_np"];
    |real| {
        // SAFETY: the caller's arguments, forwarded.
        unsafe { judge_only(libc::AT_FDCWD, path, flags, mode) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(path, guard, guardflags, flags, class, dpflags, mode) })
    }
}

#[cfg(target_os = "macos")]
hook! {
    fn openat_authenticated_np(dirfd: c_int, path: *const c_char, flags: c_int, authfd: c_int) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's arguments, forwarded.
        unsafe { judge_only(dirfd, path, flags, 0) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(dirfd, path, flags, authfd) })
    }
}
