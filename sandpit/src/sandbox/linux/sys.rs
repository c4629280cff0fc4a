//! The only place in the kernel layer that makes system calls. Every function here is
//! a thin, safe wrapper over one system call; raw fds become `OwnedFd` at once.
//!
//! Calls go through rustix wherever it has them: rustix's Linux backend issues the
//! raw system call itself (no allocation, no C library lock), so its wrappers are as
//! fit for a child between fork and exec as the C library's, and they carry the
//! descriptor and flag types. What stays hand-written, each with a one-line reason
//! where it is: calls rustix lacks (mount_setattr, close_range, seccomp and its
//! notification ioctls, Landlock, process_vm_readv, the interface-flag and TUN
//! ioctls, dup2 onto a descriptor number that need not be open); calls rustix offers
//! only in its `runtime` module, for programs without a C library (fork and clone,
//! execvpe, _exit, signal dispositions, masks and waits): with glibc in the process
//! they must go through glibc. Constants rustix does not name are the kernel's uapi
//! values (stable ABI), spelled out so the build does not depend on which libc
//! release happens to export them.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::Path;

use rustix::process::{Pid, Signal};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_long(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

// --- new mount API (Linux >= 5.2 / 5.12 for mount_setattr) -----------------------

const AT_EMPTY_PATH: libc::c_uint = 0x1000;
const AT_RECURSIVE: libc::c_uint = 0x8000;
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// An `O_PATH` descriptor for `path`. With `no_symlinks`, no component of the path may
/// be a symlink (openat2 `RESOLVE_NO_SYMLINKS`): the object mounted on is exactly the
/// one named, not one a planted link points to.
pub fn open_path(path: &CStr, no_symlinks: bool) -> io::Result<OwnedFd> {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags, CWD};
    let resolve = if no_symlinks {
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
    } else {
        ResolveFlags::empty()
    };
    Ok(openat2(
        CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        resolve,
    )?)
}

/// An `O_PATH` descriptor of `path` resolved inside the tree at `root`, as if `root`
/// were `/`: an absolute symlink on the way (`/etc/resolv.conf` →
/// `/run/systemd/resolve/stub-resolv.conf`) leads to that path beneath `root`, not
/// beneath the caller's own root, and `..` never climbs out.
pub fn open_path_in(root: &CStr, path: &CStr) -> io::Result<OwnedFd> {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags};
    let dir = open_path(root, false)?;
    Ok(openat2(
        &dir,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT,
    )?)
}

/// A detached copy of the mount (tree) at `fd` (open_tree OPEN_TREE_CLONE).
pub fn clone_mount(fd: BorrowedFd<'_>, recursive: bool) -> io::Result<OwnedFd> {
    use rustix::mount::{open_tree, OpenTreeFlags};
    let mut flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_EMPTY_PATH;
    if recursive {
        flags |= OpenTreeFlags::AT_RECURSIVE;
    }
    Ok(open_tree(fd, c"", flags)?)
}

/// Change per-mount flags (mount_setattr) of the mount at `fd`. By hand: rustix has
/// no mount_setattr.
pub fn set_mount_attr(fd: BorrowedFd<'_>, recursive: bool, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = AT_EMPTY_PATH;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: fd is live, attr is a valid mount_attr of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    cvt_long(r).map(drop)
}

/// Attach the detached mount `tree` on top of the object `target` refers to.
pub fn move_mount(tree: BorrowedFd<'_>, target: BorrowedFd<'_>) -> io::Result<()> {
    use rustix::mount::MoveMountFlags;
    Ok(rustix::mount::move_mount(
        tree,
        c"",
        target,
        c"",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )?)
}

/// A new detached filesystem mount (fsopen → fsconfig → fsmount) with `attrs`.
pub fn new_mount(fstype: &CStr, options: &[(&CStr, &CStr)], attrs: u64) -> io::Result<OwnedFd> {
    use rustix::mount::{
        fsconfig_create, fsconfig_set_string, fsmount, fsopen, FsMountFlags, FsOpenFlags,
        MountAttrFlags,
    };
    let attrs = u32::try_from(attrs).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fs = fsopen(fstype, FsOpenFlags::FSOPEN_CLOEXEC)?;
    for (k, v) in options {
        fsconfig_set_string(&fs, *k, *v)?;
    }
    fsconfig_create(&fs)?;
    Ok(fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::from_bits_retain(attrs),
    )?)
}

/// Classic mount(2): used only for propagation changes.
pub fn make_private_recursive(path: &CStr) -> io::Result<()> {
    use rustix::mount::{mount_change, MountPropagationFlags};
    Ok(mount_change(
        path,
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?)
}

/// mount(2) of a fresh filesystem at a path (used for the staging tmpfs only, before
/// any untrusted file could be in the way).
pub fn mount_fs(
    fstype: &CStr,
    target: &CStr,
    flags: rustix::mount::MountFlags,
    data: &CStr,
) -> io::Result<()> {
    Ok(rustix::mount::mount(fstype, target, fstype, flags, data)?)
}

/// Recursive bind mount by path (staging only: source and target are sandpit's own).
pub fn rbind(source: &CStr, target: &CStr) -> io::Result<()> {
    Ok(rustix::mount::mount_bind_recursive(source, target)?)
}

pub fn pivot_root(new_root: &CStr, put_old: &CStr) -> io::Result<()> {
    Ok(rustix::process::pivot_root(new_root, put_old)?)
}

pub fn umount_detach(path: &CStr) -> io::Result<()> {
    use rustix::mount::{unmount, UnmountFlags};
    Ok(unmount(path, UnmountFlags::DETACH)?)
}

// --- processes -----------------------------------------------------------------------

pub enum Fork {
    Child,
    Parent(libc::pid_t),
}

/// fork(2). The caller must be single-threaded or only use async-signal-safe calls in
/// the child until exec; sandpit forks before it starts any thread. By hand: rustix
/// forks only in its `runtime` module, which skips glibc's fork handlers.
pub fn fork() -> io::Result<Fork> {
    // SAFETY: fork has no memory-safety preconditions; see the doc comment on threads.
    let r = unsafe { libc::fork() };
    match r {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Fork::Child),
        pid => Ok(Fork::Parent(pid)),
    }
}

/// Debug builds check that the caller is single-threaded (before a raw clone, or a
/// fork whose child goes on with more than async-signal-safe calls).
pub fn debug_assert_single_threaded() {
    #[cfg(debug_assertions)]
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        assert_eq!(tasks.count(), 1, "forked from a process with more threads");
    }
}

/// fork(2) into new user, mount, pid, IPC and UTS namespaces: the child is pid 1 of
/// its pid namespace, with no uid or gid mapped until its parent writes the maps
/// (`namespaces::map_ids`).
///
/// The raw system call skips the C library's fork handlers, so the caller must be
/// single-threaded: the launcher clones before it starts any thread (the audit
/// socket's reader, the proxy runtime), which debug builds check. By hand: rustix
/// has no clone into new namespaces.
pub fn clone_into_namespaces() -> io::Result<Fork> {
    debug_assert_single_threaded();
    let flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::SIGCHLD;
    // SAFETY: clone with no new stack and no shared memory behaves as fork: the child
    // runs on a copy of this stack. Single-threaded caller (see above), so no lock of
    // the C library's can be held by a thread that does not exist in the child.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    match r {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Fork::Child),
        pid => Ok(Fork::Parent(pid as libc::pid_t)),
    }
}

/// unshare(2) into new namespaces (`CLONE_NEW*` flags only).
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    use rustix::thread::{unshare_unsafe, UnshareFlags};
    let flags = UnshareFlags::from_bits_retain(flags as u32);
    let own_tables = UnshareFlags::FILES | UnshareFlags::FS | UnshareFlags::SYSVSEM;
    if flags.intersects(own_tables) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: rustix marks unshare unsafe for CLONE_FILES and CLONE_FS (a thread
    // with tables of its own behind std's back), refused above; new namespaces
    // change no memory.
    Ok(unsafe { unshare_unsafe(flags) }?)
}

/// `pid` as rustix takes it: 0 is `None` (the caller, or a new group). A negative
/// number (a process group, or every process) is no argument of these wrappers.
fn pid_arg(pid: libc::pid_t) -> io::Result<Option<Pid>> {
    if pid < 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(Pid::from_raw(pid))
}

/// setpgid(2): `pid` (0: the caller) into process group `pgid` (0: a new one of its
/// own).
pub fn setpgid(pid: libc::pid_t, pgid: libc::pid_t) -> io::Result<()> {
    Ok(rustix::process::setpgid(pid_arg(pid)?, pid_arg(pgid)?)?)
}

pub fn setsid() -> io::Result<()> {
    rustix::process::setsid()?;
    Ok(())
}

pub fn set_no_new_privs() -> io::Result<()> {
    Ok(rustix::thread::set_no_new_privs(true)?)
}

/// The running kernel's `major.minor`, from `uname`.
pub fn kernel_release() -> Option<(u32, u32)> {
    let u = rustix::system::uname();
    let r = u.release().to_str().ok()?;
    let mut it = r.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// `resource` to `n` (soft and hard), or to the hard limit already in force if
/// that is lower (raising it needs a privilege the command must not have).
fn cap_limit(resource: rustix::process::Resource, n: u64) -> io::Result<()> {
    use rustix::process::{getrlimit, setrlimit, Rlimit};
    // `None` is RLIM_INFINITY.
    let n = getrlimit(resource).maximum.map_or(n, |hard| n.min(hard));
    Ok(setrlimit(
        resource,
        Rlimit {
            current: Some(n),
            maximum: Some(n),
        },
    )?)
}

/// `RLIMIT_NPROC` to `n` (soft and hard), or to the hard limit already in force if
/// that is lower (raising it needs a privilege the command must not have).
pub fn limit_tasks(n: u64) -> io::Result<()> {
    cap_limit(rustix::process::Resource::Nproc, n)
}

/// `RLIMIT_DATA` of this process (and what it starts): its heap and private
/// writable mappings may take at most `bytes` (`limits.memory` without a cgroup).
pub fn limit_data(bytes: u64) -> io::Result<()> {
    cap_limit(rustix::process::Resource::Data, bytes)
}

/// `RLIMIT_FSIZE` of this process (and what it starts): no file it writes may grow
/// past `bytes` (`limits.cache_bytes`), or the hard limit already in force if lower.
/// `SIGXFSZ` is ignored (kept across `execve`), so such a write fails with `EFBIG`
/// instead of the signal ending the process with a core dump.
pub fn limit_file_size(bytes: u64) -> io::Result<()> {
    cap_limit(rustix::process::Resource::Fsize, bytes)?;
    // By hand: rustix sets dispositions only in its `runtime` module, for programs
    // without a C library; with glibc in the process they go through glibc.
    // SAFETY: SIG_IGN is a valid disposition for SIGXFSZ; no handler runs.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Make this process (and what it starts) the OOM killer's first choice: a memory
/// flood in the sandbox then ends the sandbox, not the user's other programs. Raising
/// it needs no privilege; the sandbox may lower it again, to 0 and no further.
pub fn prefer_for_oom_kill() -> io::Result<()> {
    std::fs::write("/proc/self/oom_score_adj", b"1000")
}

pub fn set_parent_death_signal(sig: libc::c_int) -> io::Result<()> {
    Ok(rustix::process::set_parent_process_death_signal(Some(
        signal_arg(sig)?,
    ))?)
}

/// A pidfd of the calling process (`pidfd_open`, close-on-exec).
pub fn pidfd_self() -> io::Result<OwnedFd> {
    use rustix::process::{getpid, pidfd_open, PidfdFlags};
    Ok(pidfd_open(getpid(), PidfdFlags::empty())?)
}

/// Whether the process `pidfd` refers to has exited (it reads as ready then); never
/// waits.
pub fn has_exited(pidfd: BorrowedFd<'_>) -> bool {
    crate::sys::readable(pidfd, 0).unwrap_or(false)
}

pub fn set_dumpable(on: bool) -> io::Result<()> {
    use rustix::process::{set_dumpable_behavior, DumpableBehavior};
    Ok(set_dumpable_behavior(if on {
        DumpableBehavior::Dumpable
    } else {
        DumpableBehavior::NotDumpable
    })?)
}

pub fn set_child_subreaper() -> io::Result<()> {
    // rustix passes the pid as the (non-zero: on) flag.
    Ok(rustix::process::set_child_subreaper(Some(
        rustix::process::getpid(),
    ))?)
}

/// The parent's pid, 0 when the parent is outside this pid namespace.
pub fn getppid() -> libc::pid_t {
    Pid::as_raw(rustix::process::getppid())
}

pub fn getpid() -> libc::pid_t {
    rustix::process::getpid().as_raw_pid()
}

pub fn getuid() -> u32 {
    rustix::process::getuid().as_raw()
}

pub fn getgid() -> u32 {
    rustix::process::getgid().as_raw()
}

/// A named signal from its number (EINVAL for 0 and the real-time ones, which
/// sandpit never sends).
fn signal_arg(sig: libc::c_int) -> io::Result<Signal> {
    Signal::from_named_raw(sig).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

/// kill(2) to one process (`pid` > 0; a group or every process is EINVAL).
pub fn kill(pid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    let pid = pid_arg(pid)?.ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(rustix::process::kill_process(pid, signal_arg(sig)?)?)
}

/// How a waited-for child ended, or `None` if it has not (WNOHANG).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    /// The shell's convention: the code, or 128 + the signal number.
    pub fn as_code(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
        }
    }
}

/// waitpid for the child `pid`, or for any child with -1; returns `Ok(None)` when
/// nothing changed (with `nohang`).
pub fn wait(pid: libc::pid_t, nohang: bool) -> io::Result<Option<(libc::pid_t, Exit)>> {
    use rustix::process::WaitOptions;
    let flags = if nohang {
        WaitOptions::NOHANG
    } else {
        WaitOptions::empty()
    };
    // rustix's `waitpid(None)` is waitpid(0) (the caller's process group): any
    // child is `wait`.
    let child = if pid == -1 {
        None
    } else {
        Some(pid_arg(pid)?.ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?)
    };
    loop {
        let r = match child {
            None => rustix::process::wait(flags),
            Some(p) => rustix::process::waitpid(Some(p), flags),
        };
        let (who, status) = match r {
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(None) => return Ok(None),
            Ok(Some(r)) => r,
        };
        if let Some(code) = status.exit_status() {
            return Ok(Some((who.as_raw_pid(), Exit::Code(code))));
        }
        if let Some(sig) = status.terminating_signal() {
            return Ok(Some((who.as_raw_pid(), Exit::Signal(sig))));
        }
        if nohang {
            return Ok(None);
        }
    }
}

/// _exit(2). By hand: rustix exits only in its `runtime` module.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and skips atexit handlers, as a forked child must.
    unsafe { libc::_exit(code) }
}

/// A set of signals for blocking and waiting. By hand: rustix has signal masks and
/// sigwaitinfo only in its `runtime` module; glibc reserves signals of its own.
pub struct SigSet(libc::sigset_t);

impl SigSet {
    pub fn of(signals: &[libc::c_int]) -> SigSet {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it fully.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: set is a valid sigset_t.
        unsafe { libc::sigemptyset(&mut set) };
        for s in signals {
            // SAFETY: set is valid; an invalid signal number only makes this fail.
            unsafe { libc::sigaddset(&mut set, *s) };
        }
        SigSet(set)
    }

    /// Block these signals in the calling thread (inherited by threads and children).
    pub fn block(&self) -> io::Result<()> {
        // SAFETY: valid set pointer, null old-set.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &self.0, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(())
    }

    /// Unblock every signal and restore default dispositions (in a child before exec).
    pub fn reset_all() -> io::Result<()> {
        for s in 1..32 {
            if s == libc::SIGKILL || s == libc::SIGSTOP {
                continue;
            }
            // SAFETY: restoring the default disposition is always valid.
            unsafe { libc::signal(s, libc::SIG_DFL) };
        }
        let empty = SigSet::of(&[]);
        // SAFETY: valid set pointer.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &empty.0, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(())
    }

    /// Wait for one of these (blocked) signals.
    pub fn wait(&self) -> io::Result<libc::c_int> {
        loop {
            // SAFETY: valid set pointer; info may be null.
            let r = unsafe { libc::sigwaitinfo(&self.0, std::ptr::null_mut()) };
            if r >= 0 {
                return Ok(r);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Mark every descriptor from `first` up as close-on-exec. By hand: rustix has no
/// close_range.
pub fn cloexec_from(first: u32) -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range with integer arguments only.
    cvt_long(unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, CLOSE_RANGE_CLOEXEC) })
        .map(drop)
}

/// execvpe: returns only on failure. By hand: rustix's execve is in its `runtime`
/// module and does no PATH search.
pub fn execvpe(file: &CStr, argv: &[CString], envp: &[CString]) -> io::Error {
    let mut a: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
    a.push(std::ptr::null());
    let mut e: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
    e.push(std::ptr::null());
    // SAFETY: all arrays are NULL-terminated arrays of NUL-terminated strings that
    // outlive the call.
    unsafe { libc::execvpe(file.as_ptr(), a.as_ptr(), e.as_ptr()) };
    io::Error::last_os_error()
}

// --- seccomp -------------------------------------------------------------------------

/// One classic-BPF instruction, as `struct sock_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

#[repr(C)]
struct SockFprog {
    len: libc::c_ushort,
    filter: *const SockFilter,
}

/// Install a seccomp filter on the calling thread (no_new_privs must be set). By
/// hand, as every seccomp call here: rustix has no seccomp.
pub fn seccomp_install(prog: &[SockFilter]) -> io::Result<()> {
    seccomp_set_filter(prog, 0).map(drop)
}

/// Install `prog` with a user-notification listener
/// (`SECCOMP_FILTER_FLAG_NEW_LISTENER`); returns the listener (close-on-exec).
pub fn seccomp_install_listener(prog: &[SockFilter]) -> io::Result<OwnedFd> {
    let r = seccomp_set_filter(prog, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER)?;
    let fd = RawFd::try_from(r)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "seccomp listener fd"))?;
    // SAFETY: the kernel just returned this new descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)`: what the call returned.
fn seccomp_set_filter(prog: &[SockFilter], flags: libc::c_ulong) -> io::Result<libc::c_long> {
    let len = libc::c_ushort::try_from(prog.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "seccomp program too long"))?;
    let fprog = SockFprog {
        len,
        filter: prog.as_ptr(),
    };
    // SAFETY: fprog points to `len` valid instructions that outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const SockFprog,
        )
    };
    cvt_long(r)
}

/// One system call stopped by a `SECCOMP_RET_USER_NOTIF` filter.
#[derive(Debug, Clone, Copy)]
pub struct Notif {
    pub id: u64,
    /// In the listener's (the launcher's) pid namespace.
    pub pid: u32,
    pub nr: i32,
    pub args: [u64; 6],
}

/// Wait for the next notification on `listener`.
pub fn seccomp_notif_recv(listener: BorrowedFd<'_>) -> io::Result<Notif> {
    // SAFETY: seccomp_notif is plain data; the kernel wants it zeroed.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: RECV writes one seccomp_notif into `n`, which is valid and writable.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            &mut n as *mut libc::seccomp_notif,
        )
    };
    cvt(r)?;
    Ok(Notif {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr,
        args: n.data.args,
    })
}

/// Let the stopped call `id` go on as if no filter had stopped it
/// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the kernel runs it, Landlock included.
pub fn seccomp_notif_continue(listener: BorrowedFd<'_>, id: u64) -> io::Result<()> {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: SEND reads one seccomp_notif_resp from `resp`, valid for the call.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            &mut resp as *mut libc::seccomp_notif_resp,
        )
    };
    cvt(r).map(drop)
}

/// Ask the kernel to wake the listener's reader on the caller's CPU and switch to
/// it at once (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, Linux 6.6): a stopped call then
/// costs a direct hand-over, not two trips through a busy run queue.
pub fn seccomp_notif_sync_wake(listener: BorrowedFd<'_>) -> io::Result<()> {
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
    // SAFETY: SET_FLAGS takes its flags by value.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
    cvt(r).map(drop)
}

/// Whether the call `id` still waits for its answer (its process has not died, so
/// its pid still names it).
pub fn seccomp_notif_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    let mut id = id;
    // SAFETY: ID_VALID reads one u64 from `id`, valid for the call.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &mut id as *mut u64,
        )
    };
    r == 0
}

/// Read another process's memory at `addr` into `buf` (`process_vm_readv`); the
/// count read, short at an unmapped page. By hand: rustix has no process_vm_readv.
pub fn read_remote(pid: u32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `local` describes `buf`, writable for its length; `remote` is only an
    // address in the other process, which the kernel checks.
    let r = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// Is seccomp filtering available (`prctl(PR_GET_SECCOMP)` answers)?
pub fn seccomp_available() -> bool {
    rustix::thread::secure_computing_mode().is_ok()
}

/// The Landlock ABI version the kernel offers, `None` when unsupported. By hand:
/// rustix has no Landlock.
pub fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a version query takes a null attr and size 0.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(r).ok().filter(|v| *v > 0)
}

// --- network -------------------------------------------------------------------------

/// A UDP socket of the current network namespace, for interface ioctls.
fn ioctl_socket() -> io::Result<OwnedFd> {
    use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};
    Ok(socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Bring the loopback interface of the current network namespace up. The flag
/// ioctls by hand: rustix has no SIOCGIFFLAGS/SIOCSIFFLAGS.
pub fn loopback_up() -> io::Result<()> {
    let s = ioctl_socket()?;
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo\0".iter().enumerate() {
        ifr.ifr_name[i] = *b as libc::c_char;
    }
    // SAFETY: s is a socket; ifr is a valid ifreq that the kernel fills in.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS as libc::Ioctl, &mut ifr) })?;
    // SAFETY: reading the union member that SIOCGIFFLAGS just filled.
    let flags = unsafe { ifr.ifr_ifru.ifru_flags };
    ifr.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: as above.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS as libc::Ioctl, &ifr) }).map(drop)
}

/// A TUN device named `name` in the current network namespace (IFF_TUN|IFF_NO_PI:
/// each read or write is one bare IP packet). Needs CAP_NET_ADMIN over the
/// namespace, and `/dev/net/tun` open to this user. TUNSETIFF by hand: rustix has
/// no TUN ioctls.
pub fn tun_open(name: &str) -> io::Result<OwnedFd> {
    use rustix::fs::{open, Mode, OFlags};
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let fd = open(
        c"/dev/net/tun",
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in name.bytes().enumerate() {
        ifr.ifr_name[i] = b as libc::c_char;
    }
    ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: fd is the TUN control device; ifr is a valid ifreq it reads.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF as libc::Ioctl, &ifr) })?;
    Ok(fd)
}

/// The index of the network interface `name` in the current network namespace.
pub fn if_index(name: &str) -> io::Result<u32> {
    Ok(rustix::net::netdevice::name_to_index(
        ioctl_socket()?,
        name,
    )?)
}

/// A route netlink socket of the current network namespace.
pub fn netlink_route() -> io::Result<OwnedFd> {
    use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};
    // NETLINK_ROUTE is protocol 0, which rustix spells `None`.
    Ok(socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// A socket-diagnostics netlink socket (`NETLINK_SOCK_DIAG`) of the current
/// network namespace: the kernel's socket tables, asked for by family.
pub fn netlink_sock_diag() -> io::Result<OwnedFd> {
    use rustix::net::{netlink, socket_with, AddressFamily, SocketFlags, SocketType};
    Ok(socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        Some(netlink::SOCK_DIAG),
    )?)
}

/// Send `buf` on a socket (one netlink message).
pub fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::net::send(fd, buf, rustix::net::SendFlags::empty())?)
}

/// Receive into `buf` from a socket (a signal interrupting the wait is retried).
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match rustix::net::recv(fd, &mut *buf, rustix::net::RecvFlags::empty()) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
            Ok((n, _)) => return Ok(n),
        }
    }
}

/// Make `fd` non-blocking.
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    Ok(fcntl_setfl(fd, fcntl_getfl(fd)? | OFlags::NONBLOCK)?)
}

/// Wait up to `timeout_ms` for any of `fds` to be readable; which are (errors and
/// hang-ups count: a read then reports them). Interrupted: none are.
pub fn poll_readable(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> io::Result<Vec<bool>> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut p: Vec<PollFd<'_>> = fds
        .iter()
        .map(|f| PollFd::from_borrowed_fd(*f, PollFlags::IN))
        .collect();
    let timeout = (timeout_ms >= 0).then(|| Timespec {
        tv_sec: i64::from(timeout_ms / 1000),
        tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
    });
    match poll(&mut p, timeout.as_ref()) {
        Err(rustix::io::Errno::INTR) => Ok(vec![false; fds.len()]),
        Err(e) => Err(e.into()),
        Ok(_) => Ok(p.iter().map(|x| !x.revents().is_empty()).collect()),
    }
}

/// Send one descriptor with a short message over a unix socket (SCM_RIGHTS). The
/// control buffer is on the stack: children between fork and exec hand over
/// descriptors with this.
pub fn send_fd(sock: BorrowedFd<'_>, msg: &[u8], fd: BorrowedFd<'_>) -> io::Result<()> {
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [fd];
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
    }
    sendmsg(
        sock,
        &[io::IoSlice::new(msg)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    Ok(())
}

/// Receive one message (up to `buf.len()` bytes) and at most one descriptor
/// (close-on-exec); a signal interrupting the wait is retried.
pub fn recv_msg(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let n = loop {
        let mut iov = [io::IoSliceMut::new(buf)];
        match recvmsg(sock, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC) {
            Err(rustix::io::Errno::INTR) => continue,
            r => break r?.bytes,
        }
    };
    let mut fd = None;
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = m {
            // Any but the last are closed as they are replaced.
            for f in fds {
                fd = Some(f);
            }
        }
    }
    Ok((n, fd))
}

/// A connected pair of `SOCK_SEQPACKET` unix sockets (message boundaries, EOF on close).
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    Ok(socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

extern "C" fn noop_handler(_: libc::c_int) {}

/// Give each signal a no-op handler (pid 1 of a pid namespace only receives signals
/// it handles; they stay blocked and are collected with `SigSet::wait`). By hand:
/// rustix has sigaction only in its `runtime` module.
pub fn install_noop_handlers(signals: &[libc::c_int]) -> io::Result<()> {
    for s in signals {
        // SAFETY: sigaction is plain data; the handler is a valid extern "C" fn.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = noop_handler as *const () as libc::sighandler_t;
        // SAFETY: valid sigaction pointers.
        cvt(unsafe { libc::sigaction(*s, &sa, std::ptr::null_mut()) })?;
    }
    Ok(())
}

/// Drop every capability for good: bounding set, ambient set, securebits so that a
/// uid 0 inside the namespace regains nothing on exec, then the effective sets.
pub fn drop_all_capabilities() -> io::Result<()> {
    use rustix::thread::{
        clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
        set_capabilities_secure_bits, CapabilitiesSecureBits as Sec, CapabilitySet, CapabilitySets,
    };
    // By number, not by rustix's names: a capability newer than rustix is dropped
    // too. EINVAL past the kernel's last capability is expected.
    for cap in 0..64 {
        let _ = remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(1 << cap));
    }
    clear_ambient_capability_set()?;
    set_capabilities_secure_bits(
        Sec::NO_ROOT
            | Sec::NO_ROOT_LOCKED
            | Sec::NO_SETUID_FIXUP
            | Sec::NO_SETUID_FIXUP_LOCKED
            | Sec::NO_CAP_AMBIENT_RAISE
            | Sec::NO_CAP_AMBIENT_RAISE_LOCKED,
    )?;
    Ok(set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )?)
}

/// flock(2) on an open file: shared or exclusive, optionally non-blocking.
pub fn flock(fd: BorrowedFd<'_>, exclusive: bool, nonblocking: bool) -> io::Result<()> {
    use rustix::fs::FlockOperation as Op;
    let op = match (exclusive, nonblocking) {
        (true, false) => Op::LockExclusive,
        (true, true) => Op::NonBlockingLockExclusive,
        (false, false) => Op::LockShared,
        (false, true) => Op::NonBlockingLockShared,
    };
    loop {
        match rustix::fs::flock(fd, op) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return Ok(r?),
        }
    }
}

/// Rename `from` to `to` unless `to` exists (renameat2 `RENAME_NOREPLACE`).
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    Ok(renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE)?)
}

/// Whether `path` is a directory, not a symlink to one, holding nothing.
pub fn is_empty_dir(path: &Path) -> io::Result<bool> {
    use rustix::fs::{openat, Dir, Mode, OFlags, CWD};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = openat(CWD, path, flags, Mode::empty())?;
    for entry in Dir::new(dir)? {
        let entry = entry?;
        if ![&b"."[..], b".."].contains(&entry.file_name().to_bytes()) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// SIGKILL to the process whose `/proc/<pid>` directory `dir` is open (a pidfd made
/// from the directory: the process of that procfs's pid namespace, whatever the
/// caller's).
pub fn kill_proc_dir(dir: BorrowedFd<'_>) -> io::Result<()> {
    use rustix::process::{pidfd_send_signal, Signal};
    Ok(pidfd_send_signal(dir, Signal::KILL)?)
}

pub fn chdir(path: &CStr) -> io::Result<()> {
    Ok(rustix::process::chdir(path)?)
}

pub fn sethostname(name: &[u8]) -> io::Result<()> {
    Ok(rustix::system::sethostname(name)?)
}

// --- terminal ------------------------------------------------------------------------

/// `fd` borrowed for one call. The terminal wrappers take the raw numbers their
/// callers hold across fork (0, 1, 2, the pty's ends).
fn borrow(fd: RawFd) -> BorrowedFd<'static> {
    // SAFETY: each caller uses it for one system call only; a descriptor that is not
    // open fails that call with EBADF, as the C library's wrapper would.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

pub fn isatty(fd: RawFd) -> bool {
    rustix::termios::isatty(borrow(fd))
}

/// A new pseudo-terminal pair (master, slave), both close-on-exec, neither becoming
/// our controlling terminal. The slave is opened from the master (TIOCGPTPEER), not
/// by its name under /dev/pts.
pub fn open_pty() -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::pty::{grantpt, ioctl_tiocgptpeer, openpt, unlockpt, OpenptFlags};
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = openpt(flags)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let slave = ioctl_tiocgptpeer(&master, flags)?;
    Ok((master, slave))
}

/// Saved terminal settings of an fd.
pub struct Termios(rustix::termios::Termios);

pub fn get_termios(fd: RawFd) -> io::Result<Termios> {
    Ok(Termios(rustix::termios::tcgetattr(borrow(fd))?))
}

pub fn set_termios(fd: RawFd, t: &Termios) -> io::Result<()> {
    use rustix::termios::{tcsetattr, OptionalActions};
    Ok(tcsetattr(borrow(fd), OptionalActions::Drain, &t.0)?)
}

/// Put the terminal on `fd` in raw mode (input passes through untouched).
pub fn set_raw(fd: RawFd, saved: &Termios) -> io::Result<()> {
    let mut raw = Termios(saved.0.clone());
    raw.0.make_raw();
    set_termios(fd, &raw)
}

/// Copy the window size of terminal `from` to terminal `to`.
pub fn copy_winsize(from: RawFd, to: RawFd) -> io::Result<()> {
    use rustix::termios::{tcgetwinsize, tcsetwinsize};
    Ok(tcsetwinsize(borrow(to), tcgetwinsize(borrow(from))?)?)
}

/// Give terminal `to` the size of `from` less one row (one more when `from` has
/// one or none): a size change the program on `to` is told of.
pub fn nudge_winsize(from: RawFd, to: RawFd) -> io::Result<()> {
    use rustix::termios::{tcgetwinsize, tcsetwinsize};
    let mut w = tcgetwinsize(borrow(from))?;
    w.ws_row = if w.ws_row > 1 {
        w.ws_row - 1
    } else {
        w.ws_row + 1
    };
    Ok(tcsetwinsize(borrow(to), w)?)
}

/// Make `fd` (a pty slave) the controlling terminal of this new session.
pub fn set_controlling_tty(fd: RawFd) -> io::Result<()> {
    Ok(rustix::process::ioctl_tiocsctty(borrow(fd))?)
}

/// dup2(2) of `from` onto descriptor `to`. Onto stdin, stdout or stderr through
/// rustix; onto any other number by hand, since rustix's `dup2` takes its target as
/// an open `OwnedFd`, and here it need not be open.
pub fn dup2(from: RawFd, to: RawFd) -> io::Result<()> {
    let fd = borrow(from);
    match to {
        0 => Ok(rustix::stdio::dup2_stdin(fd)?),
        1 => Ok(rustix::stdio::dup2_stdout(fd)?),
        2 => Ok(rustix::stdio::dup2_stderr(fd)?),
        // SAFETY: dup2 takes only integers.
        _ => cvt(unsafe { libc::dup2(from, to) }).map(drop),
    }
}

// --- splice (the launcher's bridge relay) ---------------------------------------

/// A blocking pipe, both ends close-on-exec, of the kernel's usual size.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::pipe::{pipe_with, PipeFlags};
    Ok(pipe_with(PipeFlags::CLOEXEC)?)
}

/// Whether `path` (not followed if a symlink) is the root of a mount: a bind or
/// mask still in place (statx `STATX_ATTR_MOUNT_ROOT`, Linux 5.8).
pub fn is_mount_root(path: &CStr) -> io::Result<bool> {
    use rustix::fs::{statx, AtFlags, StatxAttributes, StatxFlags, CWD};
    let st = statx(CWD, path, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::empty())?;
    if !st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    Ok(st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
}

/// An inotify instance (close-on-exec, blocking reads).
pub fn inotify() -> io::Result<OwnedFd> {
    use rustix::fs::inotify::{init, CreateFlags};
    Ok(init(CreateFlags::CLOEXEC)?)
}

/// Watch the directory `dir` for entries appearing, disappearing and being renamed.
pub fn inotify_watch_dir(ino: BorrowedFd<'_>, dir: &CStr) -> io::Result<i32> {
    use rustix::fs::inotify::{add_watch, WatchFlags as W};
    let mask = W::CREATE
        | W::MOVED_TO
        | W::MOVED_FROM
        | W::DELETE
        | W::DELETE_SELF
        | W::MOVE_SELF
        | W::ONLYDIR
        | W::DONT_FOLLOW;
    Ok(add_watch(ino, dir, mask)?)
}

/// Block until inotify events arrive; returns `(watch descriptor, name)` of each.
/// A queue overflow, or a watched directory itself moved, deleted or unwatched,
/// comes as watch descriptor -1: look at everything again.
pub fn inotify_read(ino: BorrowedFd<'_>) -> io::Result<Vec<(i32, Vec<u8>)>> {
    use rustix::fs::inotify::{ReadFlags as R, Reader};
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
    let mut events = Reader::new(ino, &mut buf);
    let mut out = vec![];
    // The first read blocks; what it brought is taken, and no more.
    loop {
        let ev = match events.next() {
            Err(rustix::io::Errno::INTR) if out.is_empty() => continue,
            r => r?,
        };
        let whole = R::QUEUE_OVERFLOW | R::IGNORED | R::DELETE_SELF | R::MOVE_SELF;
        let wd = if ev.events().intersects(whole) {
            -1
        } else {
            ev.wd()
        };
        let name = ev
            .file_name()
            .map(|n| n.to_bytes().to_vec())
            .unwrap_or_default();
        out.push((wd, name));
        if events.is_buffer_empty() {
            return Ok(out);
        }
    }
}

/// Create the file `name` (mode `mode`, exclusive) in the directory `dir`.
pub fn create_at(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<OwnedFd> {
    use rustix::fs::{openat, Mode, OFlags};
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
    Ok(openat(dir, name, flags, Mode::from_raw_mode(mode))?)
}

/// An `O_PATH` descriptor for `name` in the directory `dir` (not followed if a
/// symlink).
pub fn open_path_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    use rustix::fs::{openat, Mode, OFlags};
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(openat(dir, name, flags, Mode::empty())?)
}

/// Join the user namespace, then the mount namespace, of process `pid`. The caller
/// must be single-threaded (the kernel refuses to move a threaded process into a
/// user namespace).
/// A process's user and mount namespaces, open.
pub struct Namespaces {
    pub user: OwnedFd,
    pub mount: OwnedFd,
}

/// Open the user and mount namespaces of `pid`.
pub fn open_namespaces(pid: libc::pid_t) -> io::Result<Namespaces> {
    let open = |ns: &str| std::fs::File::open(format!("/proc/{pid}/ns/{ns}")).map(OwnedFd::from);
    Ok(Namespaces {
        user: open("user")?,
        mount: open("mnt")?,
    })
}

/// setns(2): join the namespace `ns` refers to, which must be of type `nstype` (a
/// `CLONE_NEW*` flag; the kernel checks it).
pub fn setns(ns: BorrowedFd<'_>, nstype: libc::c_int) -> io::Result<()> {
    use rustix::thread::{move_into_thread_name_spaces, ThreadNameSpaceType};
    Ok(move_into_thread_name_spaces(
        ns,
        ThreadNameSpaceType::from_bits_retain(nstype as u32),
    )?)
}

/// Name this process `title` where `ps` and `/proc` show it: its command name (15
/// bytes at most) and its command line, written over its argument strings as
/// `setproctitle` does. For a process forked from the launcher that outlives it and
/// must not pass for it (or for the command, whose words are in the launcher's).
pub fn set_title(title: &str) {
    let comm = std::ffi::CString::new(&title.as_bytes()[..title.len().min(15)]).unwrap_or_default();
    let _ = rustix::thread::set_name(&comm);
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // Fields 48 and 49, arg_start and arg_end; the first after the name is field 3.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let at = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<usize>().ok());
    let (Some(start), Some(end)) = (at(48), at(49)) else {
        return;
    };
    if end <= start || start == 0 {
        return;
    }
    // SAFETY: [start, end) holds this process's argument strings, in its (writable)
    // stack mapping, as the kernel reports for this very process; this process is a
    // fork that holds no reference into them (nothing reads its arguments any more).
    let args = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    args.fill(0);
    let n = title.len().min(args.len() - 1);
    args[..n].copy_from_slice(&title.as_bytes()[..n]);
}

/// Stderr becomes `/dev/null`.
pub fn quiet() -> io::Result<()> {
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    dup2(null.as_raw_fd(), 2)
}

/// Keep only `fds` (moved to descriptors 3, 4, …, returned in order) and stderr:
/// every other descriptor is closed and stdin and stdout become `/dev/null`. For a
/// helper process that must not keep the caller's pipes, terminal or locks open.
pub fn keep_only<const N: usize>(fds: [OwnedFd; N]) -> io::Result<[OwnedFd; N]> {
    let first = 3 + N as RawFd;
    // Above every target first, so that moving one never closes another. (These
    // copies are close-on-exec: dup2 below makes the kept ones plain again.)
    let mut high = [0 as RawFd; N];
    for (h, f) in high.iter_mut().zip(&fds) {
        *h = rustix::io::fcntl_dupfd_cloexec(f, first)?.into_raw_fd();
    }
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    dup2(null.as_raw_fd(), 0)?;
    dup2(null.as_raw_fd(), 1)?;
    for (i, h) in high.iter().enumerate() {
        dup2(*h, 3 + i as RawFd)?;
    }
    // The originals and the copies above are closed by close_range (or were
    // replaced by dup2), as is `null`.
    std::mem::forget(fds);
    std::mem::forget(null);
    // By hand: rustix has no close_range.
    // SAFETY: close_range with integer arguments only; descriptors 3.. first-1 stay.
    cvt_long(unsafe { libc::syscall(libc::SYS_close_range, first as u32, u32::MAX, 0u32) })?;
    // SAFETY: each of 3.. first-1 was just made a copy of one of `fds`, owned by
    // nothing else.
    Ok(std::array::from_fn(|i| unsafe {
        OwnedFd::from_raw_fd(3 + i as RawFd)
    }))
}

/// Ignore `signals` (a process that must finish what it does whatever the
/// terminal sends its process group). By hand: as `install_noop_handlers`.
pub fn ignore(signals: &[libc::c_int]) {
    for &s in signals {
        // SAFETY: setting SIG_IGN is always valid.
        unsafe { libc::signal(s, libc::SIG_IGN) };
    }
}

/// `(major, minor)` of a device number, as `/proc/<pid>/maps` prints them.
pub fn dev_major_minor(dev: u64) -> (u32, u32) {
    (rustix::fs::major(dev), rustix::fs::minor(dev))
}

/// A detached, read-only, inert (nosuid, nodev, noexec) copy of the single mount at
/// `src`: what a mask or a template is placed with.
pub fn inert_clone(src: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let tree = clone_mount(src, false)?;
    set_mount_attr(
        tree.as_fd(),
        false,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        0,
    )?;
    Ok(tree)
}

/// A small detached tmpfs of sandpit's own (16 KiB, 256 inodes; nosuid, nodev,
/// noexec, and read-only when asked) with its root at `mode`: what masks and
/// templates are made of.
pub fn small_tmpfs(mode: &CStr, read_only: bool) -> io::Result<OwnedFd> {
    let mut attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    if read_only {
        attrs |= MOUNT_ATTR_RDONLY;
    }
    new_mount(
        c"tmpfs",
        &[(c"mode", mode), (c"size", c"16k"), (c"nr_inodes", c"256")],
        attrs,
    )
}

/// Device, inode, and whether it is a directory, of the object behind `fd`.
pub fn fd_identity(fd: BorrowedFd<'_>) -> io::Result<((u64, u64), bool)> {
    use rustix::fs::{fstat, FileType};
    let st = fstat(fd)?;
    Ok((
        (st.st_dev, st.st_ino),
        FileType::from_raw_mode(st.st_mode) == FileType::Directory,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only relays' pipes are grown: each grown pipe counts 256 pages against the
    /// user's pipe allowance, and a run's handshake pipes carry a byte or two.
    #[test]
    fn only_relay_pipes_are_grown() {
        let size = |w: &OwnedFd| rustix::pipe::fcntl_getpipe_size(w).unwrap();
        let (_r, plain) = pipe().unwrap();
        let grown = crate::splice::Pipe::new(false).unwrap();
        assert_eq!(size(&grown.write), 1 << 20, "a relay's pipe is grown");
        assert!(
            size(&plain) < size(&grown.write),
            "a handshake pipe keeps the usual size"
        );
    }

    #[test]
    fn a_pidfd_reads_ready_once_its_process_has_exited() {
        use rustix::process::{pidfd_open, Pid, PidfdFlags};
        assert!(
            !has_exited(pidfd_self().unwrap().as_fd()),
            "this process lives"
        );
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let fd = pidfd_open(Pid::from_child(&child), PidfdFlags::empty()).unwrap();
        assert!(!has_exited(fd.as_fd()), "sleeping");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(has_exited(fd.as_fd()), "killed");
    }
}
