//! What the kernel layer refuses alone, reported: a program without the interposer
//! (a static binary, a raw system call, any program in `--kernel-only` runs) meets
//! Landlock's EACCES in silence. The reporting filter (`seccomp::compile_notify`)
//! stops each path-taking system call of the command and its children and hands it
//! to a thread of the launcher ([`serve`]), which reads the path from the caller's
//! memory, tells the [`Observer`] (the run judges it with the policy the Landlock
//! rules were compiled from, and records a denial with its rule), and always answers
//! "continue" (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
//!
//! Reporting only, never deciding: the kernel runs every call as if no notifier
//! were there and Landlock decides it. So the classic weakness of user
//! notification — the caller may change the path in its memory between the read
//! here and the kernel's own (a TOCTOU race) — can only make a report wrong, never
//! let anything through: a call this thread has not answered waits, and one it
//! answered goes to Landlock unchanged.
//!
//! Paced (`limits.launcher_cpu`, [`crate::cpu`]): when the run's share of the
//! launcher's CPU is spent, the thread sleeps before it reads the next call, so a
//! flood of stopped calls waits in the kernel instead of keeping a core busy.
//!
//! Fail-safe: the launcher holds the listener until it exits (the sandbox dies with
//! it). Should this thread stop, the kernel answers every stopped call with ENOSYS
//! once the listener is closed: the call fails, nothing passes that Landlock would
//! refuse, nothing hangs.
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::sys::{self, Notif};

/// What a stopped call does to its path, as Landlock sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Write,
    Exec,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Exec => "exec",
        }
    }
}

/// One path a stopped call is about to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The caller, in the launcher's pid namespace.
    pub pid: u32,
    pub op: Op,
    /// Absolute, as the sandbox sees it (relative paths joined to the caller's
    /// directory or `dirfd`), not normalized.
    pub path: PathBuf,
    /// The call fails with ENOENT before any Landlock check when the path does not
    /// exist (a read, an unlink): only then was something refused.
    pub must_exist: bool,
    /// The call follows a link at the path's last component (an open without
    /// `O_NOFOLLOW`, an exec), rather than acting on the link itself (an unlink, a
    /// rename, a mkdir).
    pub follow: bool,
}

impl Access {
    /// Whether the caller's lookup of the path gets past ENOENT in its view (its
    /// root): the path exists, or a mask in the way refuses the search first (a
    /// masked directory answers EACCES for any name in it). Call it while the
    /// caller waits (inside the observer).
    pub fn exists(&self) -> bool {
        let rel = self.path.strip_prefix("/").unwrap_or(&self.path);
        let root = PathBuf::from(format!("/proc/{}/root", self.pid));
        // Symbolic links inside would resolve against this machine's root: the
        // link's own entry is what is checked.
        match std::fs::symlink_metadata(root.join(rel)) {
            Ok(_) => true,
            Err(e) => {
                e.kind() != io::ErrorKind::NotFound && e.raw_os_error() != Some(libc::ENOTDIR)
            }
        }
    }

    /// The path with its symbolic links followed in the caller's view (its root), as
    /// the kernel's check met it: a link in the workspace to a masked file names the
    /// file. A link that cannot be read is taken as it stands. Call it while the
    /// caller waits (inside the observer).
    pub fn resolved(&self) -> PathBuf {
        let root = format!("/proc/{}/root", self.pid);
        resolve_call(Path::new(&root), &self.path, self.follow)
    }

    /// The caller's executable, as the sandbox names it.
    pub fn program(&self) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{}/exe", self.pid)).ok()
    }
}

/// Told about every path a stopped call uses, while the call waits.
#[derive(Clone)]
pub struct Observer(pub Arc<dyn Fn(&Access) + Send + Sync>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("notify::Observer")
    }
}

/// Answer the calls the reporting filter stops, on a thread of its own, until the
/// launcher exits. The launcher must start it as soon as it holds the listener: the
/// command's own `execve` is the first call it stops.
pub fn serve(
    listener: OwnedFd,
    observer: Option<Observer>,
    share: Option<Arc<crate::cpu::Share>>,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("kernel-refusals".into())
        .spawn(move || answer_all(listener, observer, share))
        .map(drop)
}

fn answer_all(
    listener: OwnedFd,
    observer: Option<Observer>,
    share: Option<Arc<crate::cpu::Share>>,
) {
    let fd = listener.as_fd();
    // Best effort: older kernels wake this thread the ordinary way.
    let _ = sys::seccomp_notif_sync_wake(fd);
    let mut pacer = share.map(|s| s.pacer());
    loop {
        // Before the next call is read: while this thread waits for the share,
        // the callers wait stopped in the kernel.
        if let Some(p) = pacer.as_mut() {
            p.pace();
        }
        let n = match sys::seccomp_notif_recv(fd) {
            Ok(n) => n,
            // Interrupted, or the caller died before its call was read.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::ENOENT)) => continue,
            Err(e) => {
                // The listener closes with this thread: stopped calls fail (ENOSYS).
                eprintln!(
                    "sandpit: warning: the kernel layer's refusal reports stopped ({e}); \
                     the calls they watch now fail"
                );
                return;
            }
        };
        if let Some(obs) = &observer {
            let found = accesses(&n);
            // Read while the caller waits; its pid names it only while the call is
            // still pending (checked after the read).
            if sys::seccomp_notif_valid(fd, n.id) {
                for a in &found {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (obs.0)(a)));
                }
            }
        }
        // ENOENT: the caller died meanwhile; nothing to answer.
        let _ = sys::seccomp_notif_continue(fd, n.id);
    }
}

/// Where a path argument is: `dirfd` (`None`: the path is absolute or relative to
/// the working directory) and the address of the string.
struct PathArg {
    dirfd: Option<i64>,
    addr: u64,
    op: Op,
    must_exist: bool,
    follow: bool,
}

/// The paths a stopped call uses, read from its memory.
fn accesses(n: &Notif) -> Vec<Access> {
    let a = n.args;
    let nr = libc::c_long::from(n.nr);
    // Only opens, execs and truncate follow a link at the last component.
    let at = |dirfd: u64, addr: u64, op: Op, must_exist: bool| PathArg {
        dirfd: Some(dirfd as i32 as i64),
        addr,
        op,
        must_exist,
        follow: false,
    };
    let cwd = |addr: u64, op: Op, must_exist: bool| PathArg {
        dirfd: None,
        addr,
        op,
        must_exist,
        follow: false,
    };
    let following = |p: PathArg, follow: bool| PathArg { follow, ..p };
    let w = Op::Write;
    let args: Vec<PathArg> = match nr {
        libc::SYS_openat => open_op(a[2])
            .map(|(o, m, f)| following(at(a[0], a[1], o, m), f))
            .into_iter()
            .collect(),
        libc::SYS_openat2 => {
            // struct open_how begins with the flags (u64).
            let mut how = [0u8; 8];
            match sys::read_remote(n.pid, a[2], &mut how) {
                Ok(8) => open_op(u64::from_ne_bytes(how))
                    .map(|(o, m, f)| following(at(a[0], a[1], o, m), f))
                    .into_iter()
                    .collect(),
                _ => vec![],
            }
        }
        libc::SYS_execve => vec![following(cwd(a[0], Op::Exec, true), true)],
        libc::SYS_execveat => vec![following(at(a[0], a[1], Op::Exec, true), true)],
        libc::SYS_mkdirat | libc::SYS_mknodat => vec![at(a[0], a[1], w, false)],
        libc::SYS_unlinkat => vec![at(a[0], a[1], w, true)],
        libc::SYS_renameat | libc::SYS_renameat2 => {
            vec![at(a[0], a[1], w, true), at(a[2], a[3], w, false)]
        }
        libc::SYS_linkat => vec![at(a[2], a[3], w, false)],
        libc::SYS_symlinkat => vec![at(a[1], a[2], w, false)],
        libc::SYS_truncate => vec![following(cwd(a[0], w, true), true)],
        #[cfg(target_arch = "x86_64")]
        libc::SYS_open => open_op(a[1])
            .map(|(o, m, f)| following(cwd(a[0], o, m), f))
            .into_iter()
            .collect(),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_creat | libc::SYS_mkdir | libc::SYS_mknod => vec![cwd(a[0], w, false)],
        #[cfg(target_arch = "x86_64")]
        libc::SYS_unlink | libc::SYS_rmdir => vec![cwd(a[0], w, true)],
        #[cfg(target_arch = "x86_64")]
        libc::SYS_rename => vec![cwd(a[0], w, true), cwd(a[1], w, false)],
        #[cfg(target_arch = "x86_64")]
        libc::SYS_link | libc::SYS_symlink => vec![cwd(a[1], w, false)],
        _ => vec![],
    };
    args.into_iter()
        .filter_map(|p| {
            let raw = read_path(n.pid, p.addr)?;
            Some(Access {
                pid: n.pid,
                op: p.op,
                path: absolute(n.pid, p.dirfd, &raw)?,
                must_exist: p.must_exist,
                follow: p.follow,
            })
        })
        .collect()
}

/// What an open with `flags` does: `None` for `O_PATH` (no access Landlock checks);
/// else the operation, whether the path must exist, and whether a link at its last
/// component is followed (not with `O_NOFOLLOW`, nor `O_CREAT | O_EXCL`).
fn open_op(flags: u64) -> Option<(Op, bool, bool)> {
    let f = flags as i32;
    if f & libc::O_PATH != 0 {
        return None;
    }
    let writes = f & libc::O_ACCMODE != libc::O_RDONLY || f & (libc::O_CREAT | libc::O_TRUNC) != 0;
    let exclusive = f & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL;
    let follow = f & libc::O_NOFOLLOW == 0 && !exclusive;
    Some(match writes {
        true => (Op::Write, f & libc::O_CREAT == 0, follow),
        false => (Op::Read, true, follow),
    })
}

/// A NUL-terminated path from the caller's memory (at most PATH_MAX bytes), read
/// page by page (a string may end just before an unmapped page).
fn read_path(pid: u32, addr: u64) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    const MAX: usize = libc::PATH_MAX as usize;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < MAX {
        let room = (PAGE - at % PAGE) as usize;
        let mut buf = vec![0u8; room.min(MAX - out.len())];
        let n = sys::read_remote(pid, at, &mut buf).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Some(out);
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    None
}

/// What a call on `path` (absolute) acts on, below `root`: its links followed, but for
/// the last component's when the call does not `follow` it.
fn resolve_call(root: &Path, path: &Path, follow: bool) -> PathBuf {
    match (follow, path.parent(), path.file_name()) {
        (false, Some(dir), Some(name)) => resolve_in(root, dir).join(name),
        _ => resolve_in(root, path),
    }
}

/// `path` (absolute) with its links followed below `root`, where each link is read
/// (`root` + the path so far), its target taken against the same `root`. At most 40
/// links, as the kernel follows.
fn resolve_in(root: &Path, path: &Path) -> PathBuf {
    use std::collections::VecDeque;
    use std::path::Component;
    let parts = |p: &Path| -> Vec<std::ffi::OsString> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect()
    };
    let mut rest: VecDeque<std::ffi::OsString> = parts(path).into();
    let mut out = PathBuf::from("/");
    let mut links = 0;
    while let Some(c) = rest.pop_front() {
        if c == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&c);
        let inside = root.join(next.strip_prefix("/").unwrap_or(&next));
        match std::fs::read_link(&inside) {
            Ok(target) if links < 40 => {
                links += 1;
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                for t in parts(&target).into_iter().rev() {
                    rest.push_front(t);
                }
            }
            _ => out = next,
        }
    }
    out
}

/// `raw` made absolute in the caller's view: joined to its working directory, or
/// to the directory `dirfd` names. An empty path (`AT_EMPTY_PATH`) names the
/// descriptor itself: nothing to report by name.
fn absolute(pid: u32, dirfd: Option<i64>, raw: &[u8]) -> Option<PathBuf> {
    if raw.is_empty() {
        return None;
    }
    let p = Path::new(std::ffi::OsStr::from_bytes(raw));
    if p.is_absolute() {
        return Some(p.to_path_buf());
    }
    // The links under /proc read back as the caller's paths (its root is below the
    // launcher's, or the same).
    let base = match dirfd {
        None => format!("/proc/{pid}/cwd"),
        Some(d) if d == i64::from(libc::AT_FDCWD) => format!("/proc/{pid}/cwd"),
        Some(d) => format!("/proc/{pid}/fd/{d}"),
    };
    let dir = std::fs::read_link(base).ok()?;
    Some(dir.join(p))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn opens_are_reads_unless_they_write_create_or_truncate() {
        let o = |f: i32| open_op(f as u64);
        assert_eq!(o(libc::O_RDONLY), Some((Op::Read, true, true)));
        assert_eq!(
            o(libc::O_RDONLY | libc::O_CLOEXEC),
            Some((Op::Read, true, true))
        );
        assert_eq!(o(libc::O_WRONLY), Some((Op::Write, true, true)));
        assert_eq!(o(libc::O_RDWR), Some((Op::Write, true, true)));
        assert_eq!(
            o(libc::O_WRONLY | libc::O_CREAT),
            Some((Op::Write, false, true))
        );
        assert_eq!(o(libc::O_TRUNC), Some((Op::Write, true, true)));
        assert_eq!(o(libc::O_PATH | libc::O_RDONLY), None);
        // A link at the last component is the file's own unless these say not.
        assert_eq!(
            o(libc::O_RDONLY | libc::O_NOFOLLOW),
            Some((Op::Read, true, false))
        );
        let excl = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        assert_eq!(o(excl), Some((Op::Write, false, false)));
        assert_eq!(
            o(libc::O_WRONLY | libc::O_EXCL),
            Some((Op::Write, true, true))
        );
    }

    #[test]
    fn a_call_that_does_not_follow_the_last_link_names_the_link() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("home/u/.ssh")).unwrap();
        std::fs::create_dir_all(root.join("home/u/proj")).unwrap();
        std::os::unix::fs::symlink("/home/u/.ssh/id_rsa", root.join("home/u/proj/lk")).unwrap();
        std::os::unix::fs::symlink("/home/u/proj", root.join("home/u/p")).unwrap();
        let access = |follow: bool| resolve_call(root, Path::new("/home/u/p/lk"), follow);
        assert_eq!(access(true), PathBuf::from("/home/u/.ssh/id_rsa"));
        // An unlink of the link: its directory's links followed, not the link.
        assert_eq!(access(false), PathBuf::from("/home/u/proj/lk"));
    }

    #[test]
    fn links_are_followed_below_the_callers_root() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for dir in ["home/u/.ssh", "home/u/proj/sub", "etc"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("home/u/.ssh/id_rsa"), "k").unwrap();
        let link = |target: &str, at: &str| {
            std::os::unix::fs::symlink(target, root.join(at)).unwrap();
        };
        // Absolute targets are taken in the root, not this machine's.
        link("/home/u/.ssh/id_rsa", "home/u/proj/abs");
        link("../.ssh", "home/u/proj/rel");
        link("/home/u/proj/abs", "home/u/proj/sub/chain");
        link("loop", "home/u/proj/loop");
        for (given, want) in [
            ("/home/u/proj/abs", "/home/u/.ssh/id_rsa"),
            ("/home/u/proj/rel/id_rsa", "/home/u/.ssh/id_rsa"),
            ("/home/u/proj/sub/chain", "/home/u/.ssh/id_rsa"),
            ("/home/u/proj/sub/../abs", "/home/u/.ssh/id_rsa"),
            ("/home/u/proj/plain.txt", "/home/u/proj/plain.txt"),
            ("/home/u/proj/loop", "/home/u/proj/loop"),
            ("/etc/../../home/u/proj/rel", "/home/u/.ssh"),
        ] {
            assert_eq!(
                resolve_in(root, Path::new(given)),
                PathBuf::from(want),
                "{given}"
            );
        }
    }

    #[test]
    fn paths_are_read_from_this_process_and_made_absolute() {
        let pid = std::process::id();
        // A path that ends right before a page boundary is found whole.
        let mut page = vec![b'x'; 8192];
        let base = page.as_ptr() as u64;
        let to_boundary = (4096 - base % 4096) as usize;
        let start = to_boundary - 5;
        page[start..start + 4].copy_from_slice(b"/a/b");
        page[start + 4] = 0;
        assert_eq!(
            read_path(pid, base + start as u64).as_deref(),
            Some(&b"/a/b"[..])
        );
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute(pid, None, b"f"), Some(cwd.join("f")));
        assert_eq!(
            absolute(pid, Some(i64::from(libc::AT_FDCWD)), b"f"),
            Some(cwd.join("f"))
        );
        assert_eq!(
            absolute(pid, None, b"/etc/x"),
            Some(PathBuf::from("/etc/x"))
        );
        assert_eq!(absolute(pid, None, b""), None);
    }
}
