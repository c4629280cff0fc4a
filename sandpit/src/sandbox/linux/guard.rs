//! The mount guard (namespace mode): keeps masks and read-only binds on paths the
//! host replaces during the run.
//!
//! When a process outside renames a file over one the sandbox has masked or bound
//! read-only (`git config` rewrites `.git/config` that way; so do editors and
//! credential helpers), or removes and recreates a masked directory, the kernel
//! detaches every mount on the old object, in every mount namespace. The guard is a
//! process in the sandbox's user and mount namespaces (a child of the launcher, outside
//! the pid namespace, so the command can neither see nor signal it) that holds the namespace
//! capabilities the command drops: it watches the parent directories of the guarded
//! paths with inotify and puts the mount back when one is gone. It also masks a
//! read-denied path that did not exist at start once the host creates it (`~/.azure`
//! after `az login`), when its parent existed. And it moves aside a file git reads
//! whenever it exists (`.git/commondir`, a `HEAD` at the workspace's top) that the
//! sandbox creates past the interposer, and stops the run (`Restore::Absent`).
//!
//! The launcher forks the guard; it joins once init has built the mount tree. A
//! guard that cannot set up, or stops, makes the launcher stop the run
//! (`supervise.rs`). At the end the launcher kills it and nobody waits for it:
//! releasing an inotify instance waits for an SRCU grace period (~13 ms here), and
//! taking the mount namespace down an RCU one, which would otherwise be added to
//! every run's exit.
//!
//! After each restore the guard looks through the sandbox's `/proc` for anything that
//! opened the exposed object meanwhile, and stops the run if it finds one. What is
//! left: a command spinning on `open` can write and close a replaced protected file
//! in the tens of microseconds before the new mount. The interposer refuses the
//! paths by name throughout. A sealed placeholder the host removes is made again. A
//! protected file the host deletes without replacing stays unguarded (making one in
//! its place would change the user's tree), and so do masks with carve-outs.
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::plan::{strictly_inside, MountOp};
use super::sys;

/// What the guard puts back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// The object now at the path (never through a symlink), bound read-only onto
    /// itself.
    ReadOnly,
    /// An empty mode-000 file or directory, read-only.
    Mask,
    /// A protected path that did not exist at start: sandpit's empty directory on
    /// the host under a read-only directory holding only a `.gitignore` of `*`
    /// (`MountOp::Sealed`). If the host removes the directory (a user cleaning up
    /// an empty `.claude`), it is made again.
    Sealed,
    /// A file git reads whenever it exists, absent at start and with nothing to hold
    /// its name (`Plan::absent_git_files`: `.git/commondir`, a `HEAD` at the
    /// workspace's top). If one appears (a static program, a raw system call: the
    /// interposer refuses it) it is moved aside at once and the run is stopped, so
    /// the user's git (an editor runs it every few seconds) can find it only until
    /// the guard wakes (microseconds when the machine is idle, milliseconds under
    /// load), once, instead of until the run ends.
    Absent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded {
    pub path: PathBuf,
    pub restore: Restore,
}

/// The paths of a plan worth guarding (pure): protected paths bound read-only inside
/// a writable root, masks without carve-outs, and read-denied paths absent at start
/// (`Plan::unmasked_missing`) whose parent exists (`exists`).
pub fn guarded(
    mounts: &[MountOp],
    unmasked_missing: &[PathBuf],
    absent_git_files: &[PathBuf],
    exists: &dyn Fn(&Path) -> bool,
) -> Vec<Guarded> {
    let writable: Vec<&Path> = mounts
        .iter()
        .filter_map(|m| match m {
            MountOp::Writable { path, .. } => Some(path.as_path()),
            _ => None,
        })
        .collect();
    let mut out = vec![];
    for m in mounts {
        let (path, restore) = match m {
            MountOp::ReadOnly { path, .. } if writable.iter().any(|w| strictly_inside(path, w)) => {
                (path, Restore::ReadOnly)
            }
            MountOp::MaskFile { path } => (path, Restore::Mask),
            MountOp::Sealed { path } => (path, Restore::Sealed),
            MountOp::MaskDir {
                path,
                allow,
                writable,
            } if allow.is_empty() && writable.is_empty() => (path, Restore::Mask),
            _ => continue,
        };
        out.push(Guarded {
            path: path.clone(),
            restore,
        });
    }
    // Most share one parent (the home directory): ask once per parent.
    let mut parents: Vec<(&Path, bool)> = vec![];
    for p in unmasked_missing {
        let Some(parent) = p.parent() else { continue };
        let known = parents
            .iter()
            .find(|(q, _)| q.as_os_str() == parent.as_os_str())
            .map(|(_, e)| *e);
        let there = known.unwrap_or_else(|| {
            let e = exists(parent);
            parents.push((parent, e));
            e
        });
        if there {
            out.push(Guarded {
                path: p.clone(),
                restore: Restore::Mask,
            });
        }
    }
    // Their parents (`.git`, the workspace) existed when the plan was made.
    out.extend(absent_git_files.iter().map(|p| Guarded {
        path: p.clone(),
        restore: Restore::Absent,
    }));
    out
}

fn cstr(p: &Path) -> Option<CString> {
    CString::new(p.as_os_str().as_bytes()).ok()
}

/// A mode-000 file in a detached tmpfs, as a mount to place over a file. Made when
/// needed, never kept: a detached mount still open when the guard dies would make
/// the namespace's teardown wait for its release (an RCU grace period, ~15 ms).
fn mask_file_mount() -> std::io::Result<OwnedFd> {
    let tmpfs = sys::small_tmpfs(c"700", false)?;
    drop(sys::create_at(tmpfs.as_fd(), c"mask", 0o000)?);
    let src = sys::open_path_at(tmpfs.as_fd(), c"mask")?;
    sys::inert_clone(src.as_fd())
}

/// sandpit's sealed directory (see `namespaces.rs`): read-only, mode 555, holding only
/// a `.gitignore` of `*`, in a detached tmpfs of its own.
fn sealed_dir_mount() -> std::io::Result<OwnedFd> {
    let tmpfs = sys::small_tmpfs(c"555", false)?;
    let ignore = sys::create_at(tmpfs.as_fd(), c".gitignore", 0o444)?;
    std::io::Write::write_all(
        &mut std::fs::File::from(ignore),
        crate::sandbox::linux::namespaces::SEALED_GITIGNORE.as_bytes(),
    )?;
    sys::inert_clone(tmpfs.as_fd())
}

/// What a restore covered again.
struct Replaced {
    /// Device and inode.
    object: (u64, u64),
    is_dir: bool,
}

/// Put `g`'s mount back if the host took it away. `Ok(None)`: nothing to do.
fn restore(g: &Guarded) -> std::io::Result<Option<Replaced>> {
    let Some(path) = cstr(&g.path) else {
        return Ok(None);
    };
    match sys::is_mount_root(&path) {
        Ok(true) => return Ok(None),
        Ok(false) => {}
        // A removed placeholder: made again, so nothing can be created there.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) && g.restore == Restore::Sealed => {
            match std::fs::create_dir(&g.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        // Nothing there (yet, or any more): nothing to hide or keep read-only.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    }
    // One descriptor for both what is mounted (a read-only bind of it) and where:
    // the object cannot be swapped between two lookups.
    let target = sys::open_path(&path, true)?;
    let (object, is_dir) = sys::fd_identity(target.as_fd())?;
    let tree = match g.restore {
        Restore::ReadOnly => {
            let tree = sys::clone_mount(target.as_fd(), true)?;
            sys::set_mount_attr(
                tree.as_fd(),
                true,
                sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID,
                0,
            )?;
            tree
        }
        // The same mask as at start (`namespaces::apply_op`, `MountOp::MaskDir`).
        Restore::Mask if is_dir => sys::small_tmpfs(c"000", true)?,
        Restore::Mask => mask_file_mount()?,
        // Never mounted over: `check` moves these aside instead.
        Restore::Absent => return Ok(None),
        Restore::Sealed => {
            // What the command made there while the placeholder was gone would
            // reach the host: nothing may be there.
            let empty = is_dir && std::fs::read_dir(&g.path)?.next().is_none();
            if !empty {
                return Err(std::io::Error::other(
                    "the protected path was made anew, not empty, while its placeholder \
                     was gone",
                ));
            }
            sealed_dir_mount()?
        }
    };
    sys::move_mount(tree.as_fd(), target.as_fd())?;
    Ok(Some(Replaced { object, is_dir }))
}

/// The `/proc/<pid>` directories of the sandbox's processes (the guard sees the
/// sandbox's `/proc`, and only its pids).
fn sandbox_processes() -> std::io::Result<impl Iterator<Item = PathBuf>> {
    Ok(std::fs::read_dir("/proc")?
        .flatten()
        .filter(|e| e.file_name().as_bytes().iter().all(u8::is_ascii_digit))
        .map(|e| e.path()))
}

/// Whether a process of the sandbox holds `object` (device, inode) open, as its
/// working directory or root, or mapped: what it opened while the mount was gone
/// outlives the new mount. With `writes_only` (a protected file: reading it is
/// allowed), only a way to change it counts: a file open or mapped for writing, or
/// any hold on a directory.
fn held_inside(object: (u64, u64), is_dir: bool, writes_only: bool) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (dev, ino) = object;
    let counts = |fdinfo: &Path| {
        if !writes_only || is_dir {
            return true;
        }
        // `flags:` is octal; unreadable counts as writable.
        std::fs::read_to_string(fdinfo)
            .ok()
            .and_then(|t| {
                let f = t.lines().find_map(|l| l.strip_prefix("flags:"))?;
                u32::from_str_radix(f.trim(), 8).ok()
            })
            .is_none_or(|flags| flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32)
    };
    let same = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| (m.dev(), m.ino()) == (dev, ino))
            .unwrap_or(false)
    };
    let (major, minor) = sys::dev_major_minor(dev);
    let maps_dev = format!("{major:02x}:{minor:02x}");
    let ino_s = ino.to_string();
    let Ok(procs) = sandbox_processes() else {
        return true; // cannot tell: assume the worst
    };
    for pid in procs {
        if same(&pid.join("cwd")) || same(&pid.join("root")) {
            return true;
        }
        if let Ok(fds) = std::fs::read_dir(pid.join("fd")) {
            let held = fds
                .flatten()
                .any(|f| same(&f.path()) && counts(&pid.join("fdinfo").join(f.file_name())));
            if held {
                return true;
            }
        }
        if let Ok(maps) = std::fs::read_to_string(pid.join("maps")) {
            // address perms offset dev inode path
            let hit = maps.lines().any(|l| {
                let mut f = l.split_whitespace().skip(1);
                let perms = f.next().unwrap_or("");
                let mut f = f.skip(1);
                f.next() == Some(maps_dev.as_str())
                    && f.next() == Some(ino_s.as_str())
                    && (!writes_only || (perms.contains('w') && perms.contains('s')))
            });
            if hit {
                return true;
            }
        }
    }
    false
}

/// The guard, set up (inotify watches, the first pass) but not yet running.
pub struct Guard {
    list: Vec<Guarded>,
    ino: OwnedFd,
    dirs: Vec<(i32, PathBuf)>,
    /// Names what is moved aside (`Layers::quarantine_tag`).
    tag: String,
}

/// Set up the guard for `list` in the sandbox's mount namespace (after init's pivot).
/// An error means the guard cannot work, and the run stops.
pub fn prepare(list: Vec<Guarded>, tag: &str) -> std::io::Result<Guard> {
    let ino = sys::inotify()?;
    let dirs = watch_dirs(ino.as_fd(), &list)?;
    // What changed between the plan and the watches being in place.
    for g in &list {
        check(g, tag);
    }
    Ok(Guard {
        list,
        ino,
        dirs,
        tag: tag.to_string(),
    })
}

/// Watch the parent directory of every guarded path (one watch each).
fn watch_dirs(ino: BorrowedFd<'_>, list: &[Guarded]) -> std::io::Result<Vec<(i32, PathBuf)>> {
    let mut dirs: Vec<(i32, PathBuf)> = vec![];
    for g in list {
        let Some(parent) = g.path.parent() else {
            continue;
        };
        if dirs.iter().any(|(_, d)| d == parent) {
            continue;
        }
        let Some(c) = cstr(parent) else { continue };
        match sys::inotify_watch_dir(ino, &c) {
            Ok(wd) => dirs.push((wd, parent.to_path_buf())),
            // Gone (nothing under it can be replaced any more), or a symlink
            // (`/var/run`): its target is listed under its own name.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("watching {}: {e}", parent.display()),
                ))
            }
        }
    }
    Ok(dirs)
}

/// Watch and restore until C1 exits (the guard's parent-death signal). If the guard
/// ever stops, C1 stops the command (`supervise.rs`).
pub fn run(mut g: Guard) -> ! {
    loop {
        let events = match sys::inotify_read(g.ino.as_fd()) {
            Ok(e) => e,
            Err(e) => stop(&format!("reading events: {e}")),
        };
        let mut again = false;
        for (wd, name) in events {
            if wd < 0 {
                again = true;
                continue;
            }
            for p in &g.list {
                let hit = g
                    .dirs
                    .iter()
                    .any(|(w, d)| *w == wd && p.path.parent() == Some(d))
                    && p.path.file_name().map(|n| n.as_bytes()) == Some(name.as_slice());
                if hit {
                    check(p, &g.tag);
                }
            }
        }
        if again {
            // A queue overflow, or a watched directory replaced: watch the
            // directories now at those paths and look at every guarded path.
            g.dirs = match watch_dirs(g.ino.as_fd(), &g.list) {
                Ok(d) => d,
                Err(e) => stop(&e.to_string()),
            };
            for p in &g.list {
                check(p, &g.tag);
            }
        }
    }
}

/// Restore `p` if needed; stop the run if that fails, or if something inside already
/// holds what was exposed, or if `p` is a git file that must stay absent and is there.
fn check(p: &Guarded, tag: &str) {
    if p.restore == Restore::Absent {
        return set_aside(&p.path, tag);
    }
    match restore(p) {
        Ok(None) => {}
        Ok(Some(r)) => {
            if held_inside(r.object, r.is_dir, p.restore == Restore::ReadOnly) {
                stop(&format!(
                    "{} changed on the host (replaced or created) and was opened inside \
                     the sandbox before its mount was back; the run was stopped",
                    p.path.display()
                ))
            }
        }
        // Replaced again meanwhile: the next event brings it back here.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => stop(&format!("restoring {}: {e}", p.path.display())),
    }
}

/// Move a file of `Plan::absent_git_files` aside, to `plan::quarantine_path(path,
/// tag)`: never over anything there (renameat2 `RENAME_NOREPLACE`), never following a
/// link at `path`. `tag` holds a secret of the launcher's, so the sandbox cannot take
/// that name first (a directory there made every rename fail); once one file has been
/// moved the name shows, so a name found taken is retried with a fresh random part.
/// `Ok(None)`: nothing at `path`.
pub fn move_aside(path: &Path, tag: &str) -> std::io::Result<Option<PathBuf>> {
    let invalid = || std::io::Error::from(std::io::ErrorKind::InvalidInput);
    let mut name = tag.to_string();
    let mut last = None;
    for _ in 0..8 {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            // Not even looked at (the directory's mode changed): no "nothing there".
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        let to = crate::sandbox::linux::quarantine_path(path, &name).ok_or_else(invalid)?;
        match sys::rename_noreplace(path, &to) {
            Ok(()) => return Ok(Some(to)),
            // Gone again meanwhile (the command renamed it): nothing to move.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                name = format!("{tag}-{}", crate::sys::random_hex(4)?);
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(invalid))
}

/// A git file that must stay absent (`Restore::Absent`), if it is there: the sandbox
/// is killed first (nothing inside can put the file back or change its directory's
/// mode afterwards), then the file is moved aside (the guard's capabilities in the
/// sandbox's user namespace override a mode the sandbox set) and the guard stops. The
/// launcher says where it went and records it once the run has ended.
/// `config.worktree` counts only while `extensions.worktreeConfig` is on (the user's
/// `.git/config`, read-only inside): otherwise git does not read it, and the launcher
/// moves it aside when the run ends.
fn set_aside(path: &Path, tag: &str) {
    let why = crate::sandbox::linux::absent_git_file_danger(path);
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            kill_sandbox();
            stop(&format!(
                "{} cannot be looked at ({e}): the sandbox changed its directory; the run \
                 was stopped",
                path.display()
            ))
        }
        Ok(_) => {}
    }
    if path.file_name().is_some_and(|n| n == "config.worktree") && !worktree_config_on(path) {
        return;
    }
    // Said first: once the sandbox is dead the launcher may end the guard any time
    // (and then moves the file aside itself).
    eprintln!(
        "sandpit: mount guard: {} appeared during the run ({why}); the run is stopped and \
         the file moved aside",
        path.display()
    );
    kill_sandbox();
    if let Err(e) = move_aside(path, tag) {
        stop(&format!("moving {} aside: {e}", path.display()));
    }
    sys::exit_now(125)
}

/// Whether `extensions.worktreeConfig` may be on in the `config` beside `path` (when
/// unsure: yes).
fn worktree_config_on(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path.with_file_name("config")) else {
        return true;
    };
    text.lines().any(|l| {
        let l: String = l
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        l.starts_with("worktreeconfig")
            && !["=false", "=no", "=off", "=0"]
                .iter()
                .any(|f| l.ends_with(f))
    })
}

/// Kill the sandbox (its pid 1, and so its whole pid namespace) and wait, at most
/// 2 s, until none of its processes is left.
fn kill_sandbox() {
    if let Ok(init) = std::fs::File::open("/proc/1") {
        let _ = sys::kill_proc_dir(init.as_fd());
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < until {
        if !sandbox_processes().is_ok_and(|mut p| p.next().is_some()) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// End the guard (and so the run: C1 stops it), saying why.
fn stop(why: &str) -> ! {
    eprintln!("sandpit: mount guard: {why}");
    sys::exit_now(125)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::linux::plan::Kind;

    /// The name a file is moved aside to, taken first (the sandbox can read it once a
    /// first file was moved in the same run): the move takes another; nothing is
    /// replaced.
    #[test]
    fn a_name_taken_first_is_no_obstacle_to_moving_aside() {
        let t = tempfile::tempdir().unwrap();
        let head = t.path().join("HEAD");
        std::fs::write(&head, "ref: refs/heads/x\n").unwrap();
        let taken = crate::sandbox::linux::quarantine_path(&head, "run-secret").unwrap();
        std::fs::create_dir_all(taken.join("keep")).unwrap();
        let to = move_aside(&head, "run-secret").unwrap().unwrap();
        assert_ne!(to, taken);
        assert!(!head.exists());
        assert_eq!(std::fs::read(&to).unwrap(), b"ref: refs/heads/x\n");
        assert!(taken.join("keep").is_dir(), "nothing replaced");
        assert_eq!(move_aside(&head, "run-secret").unwrap(), None);
    }

    #[test]
    fn guards_protected_binds_masks_and_absent_denials_with_a_parent() {
        let mounts = vec![
            MountOp::Writable {
                path: "/h/p".into(),
                no_symlinks: false,
            },
            MountOp::ReadOnly {
                path: "/h/p/.git/config".into(),
                no_symlinks: true,
            },
            // A read-only bind outside every writable root: the host view under it
            // is read-only anyway.
            MountOp::ReadOnly {
                path: "/h/.sandpit".into(),
                no_symlinks: false,
            },
            MountOp::MaskFile {
                path: "/h/.netrc".into(),
            },
            MountOp::Sealed {
                path: "/h/p/.claude".into(),
            },
            MountOp::MaskDir {
                path: "/h/.ssh".into(),
                allow: vec![],
                writable: vec![],
            },
            // Carve-outs are not rebuilt by the guard.
            MountOp::MaskDir {
                path: "/h/.config/gh".into(),
                allow: vec![("/h/.config/gh/config.yml".into(), Kind::File)],
                writable: vec![],
            },
        ];
        let missing: Vec<PathBuf> = vec!["/h/.azure".into(), "/h/.m2/settings.xml".into()];
        let exists = |p: &Path| p == Path::new("/h");
        let absent: Vec<PathBuf> = vec!["/h/p/.git/commondir".into(), "/h/p/HEAD".into()];
        let got = guarded(&mounts, &missing, &absent, &exists);
        let want = vec![
            Guarded {
                path: "/h/p/.git/config".into(),
                restore: Restore::ReadOnly,
            },
            Guarded {
                path: "/h/.netrc".into(),
                restore: Restore::Mask,
            },
            Guarded {
                path: "/h/p/.claude".into(),
                restore: Restore::Sealed,
            },
            Guarded {
                path: "/h/.ssh".into(),
                restore: Restore::Mask,
            },
            Guarded {
                path: "/h/.azure".into(),
                restore: Restore::Mask,
            },
            Guarded {
                path: "/h/p/.git/commondir".into(),
                restore: Restore::Absent,
            },
            Guarded {
                path: "/h/p/HEAD".into(),
                restore: Restore::Absent,
            },
        ];
        assert_eq!(got, want);
    }
}
