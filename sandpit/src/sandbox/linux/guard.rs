//! The mount guard (namespace mode): keeps masks and read-only binds on paths the
//! host replaces during the run.
//!
//! When a process outside renames a file over one the sandbox has masked or bound
//! read-only (`git config` rewrites `.git/config` that way; so do editors and
//! credential helpers), or removes and recreates a masked directory, the kernel
//! detaches every mount on the old object, in every mount namespace. The guard is a
//! process in the sandbox's user and mount namespaces (a child of C1, outside the pid
//! namespace, so the command can neither see nor signal it) that holds the namespace
//! capabilities the command drops: it watches the parent directories of the guarded
//! paths with inotify and puts the mount back when one is gone. It also masks a
//! read-denied path that did not exist at start once the host creates it (`~/.azure`
//! after `az login`), when its parent existed.
//!
//! C1 starts the guard once init has built the mount tree; a guard that cannot set
//! up, or stops, makes C1 stop the run (`supervise.rs`). It dies with C1 and nobody
//! waits for it: releasing an inotify instance waits for an SRCU grace period
//! (~13 ms here), which would otherwise be added to every run's exit.
//!
//! The guard narrows these holes to the moment between the host's change and the new
//! mount (a fraction of a millisecond); the interposer refuses the paths by name
//! throughout. A protected file the host deletes without replacing stays unguarded
//! (making one in its place would change the user's tree).
use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::plan::MountOp;
use super::sys;

/// What the guard puts back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// The object now at the path, bound read-only onto itself.
    ReadOnly { no_symlinks: bool },
    /// An empty mode-000 file or directory, read-only.
    Mask,
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
            MountOp::ReadOnly { path, no_symlinks }
                if writable.iter().any(|w| path != w && path.starts_with(w)) =>
            {
                (
                    path,
                    Restore::ReadOnly {
                        no_symlinks: *no_symlinks,
                    },
                )
            }
            MountOp::MaskFile { path } => (path, Restore::Mask),
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
    for p in unmasked_missing {
        if p.parent().is_some_and(exists) {
            out.push(Guarded {
                path: p.clone(),
                restore: Restore::Mask,
            });
        }
    }
    out
}

fn cstr(p: &Path) -> Option<CString> {
    CString::new(p.as_os_str().as_bytes()).ok()
}

/// A mode-000 file in a detached tmpfs, as a mount to place over a file. Made when
/// needed, never kept: a detached mount still open when the guard dies would make
/// the namespace's teardown wait for its release (an RCU grace period, ~15 ms).
fn mask_file_mount() -> std::io::Result<OwnedFd> {
    let tmpfs = sys::new_mount(
        c"tmpfs",
        &[(c"mode", c"700"), (c"size", c"16k"), (c"nr_inodes", c"16")],
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV | sys::MOUNT_ATTR_NOEXEC,
    )?;
    drop(sys::create_at(tmpfs.as_fd(), c"mask", 0o000)?);
    let src = sys::open_path_at(tmpfs.as_fd(), c"mask")?;
    let tree = sys::clone_mount(src.as_fd(), false)?;
    sys::set_mount_attr(
        tree.as_fd(),
        false,
        sys::MOUNT_ATTR_RDONLY
            | sys::MOUNT_ATTR_NOSUID
            | sys::MOUNT_ATTR_NODEV
            | sys::MOUNT_ATTR_NOEXEC,
        0,
    )?;
    Ok(tree)
}

/// Put `g`'s mount back if the host took it away. `Ok(false)`: nothing to do.
fn restore(g: &Guarded) -> std::io::Result<bool> {
    let Some(path) = cstr(&g.path) else {
        return Ok(false);
    };
    match sys::is_mount_root(&path) {
        Ok(true) => return Ok(false),
        Ok(false) => {}
        // Nothing there (yet, or any more): nothing to hide or keep read-only.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(false),
        Err(e) => return Err(e),
    }
    let target = sys::open_path(&path, true)?;
    let is_dir = std::fs::symlink_metadata(&g.path)?.is_dir();
    let tree = match g.restore {
        Restore::ReadOnly { no_symlinks } => {
            let src = sys::open_path(&path, no_symlinks)?;
            let tree = sys::clone_mount(src.as_fd(), true)?;
            sys::set_mount_attr(
                tree.as_fd(),
                true,
                sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID,
                0,
            )?;
            tree
        }
        Restore::Mask if is_dir => sys::new_mount(
            c"tmpfs",
            &[(c"mode", c"000"), (c"size", c"16k"), (c"nr_inodes", c"256")],
            sys::MOUNT_ATTR_RDONLY
                | sys::MOUNT_ATTR_NOSUID
                | sys::MOUNT_ATTR_NODEV
                | sys::MOUNT_ATTR_NOEXEC,
        )?,
        Restore::Mask => mask_file_mount()?,
    };
    sys::move_mount(tree.as_fd(), target.as_fd())?;
    Ok(true)
}

/// The guard, set up (inotify watches, the first pass) but not yet
/// running.
pub struct Guard {
    list: Vec<Guarded>,
    ino: OwnedFd,
    dirs: Vec<(i32, PathBuf)>,
}

/// Set up the guard for `list` in the sandbox's mount namespace (after init's pivot).
/// An error means the guard cannot work, and the run stops.
pub fn prepare(list: Vec<Guarded>) -> std::io::Result<Guard> {
    let ino = sys::inotify()?;
    let mut dirs: Vec<(i32, PathBuf)> = vec![];
    for g in &list {
        let Some(parent) = g.path.parent() else {
            continue;
        };
        if dirs.iter().any(|(_, d)| d == parent) {
            continue;
        }
        let Some(c) = cstr(parent) else { continue };
        match sys::inotify_watch_dir(ino.as_fd(), &c) {
            Ok(wd) => dirs.push((wd, parent.to_path_buf())),
            // Gone since the plan (nothing under it can be replaced any more), or
            // a symlink (`/var/run`): its target is listed under its own name.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("watching {}: {e}", parent.display()),
                ))
            }
        }
    }
    // What changed between the plan and the watches being in place.
    for g in &list {
        let _ = restore(g);
    }
    Ok(Guard { list, ino, dirs })
}

/// Watch and restore until C1 exits (the guard's parent-death signal). If the guard
/// ever stops, C1 stops the command (`supervise.rs`).
pub fn run(g: Guard) -> ! {
    loop {
        let Ok(events) = sys::inotify_read(g.ino.as_fd()) else {
            sys::exit_now(125)
        };
        for (wd, name) in events {
            for p in &g.list {
                let hit = if wd < 0 {
                    true // the queue overflowed: look at everything
                } else {
                    g.dirs
                        .iter()
                        .any(|(w, d)| *w == wd && p.path.parent() == Some(d))
                        && p.path.file_name().map(|n| n.as_bytes()) == Some(name.as_slice())
                };
                if hit {
                    let _ = restore(p);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::linux::plan::Kind;

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
        let got = guarded(&mounts, &missing, &exists);
        let want = vec![
            Guarded {
                path: "/h/p/.git/config".into(),
                restore: Restore::ReadOnly { no_symlinks: true },
            },
            Guarded {
                path: "/h/.netrc".into(),
                restore: Restore::Mask,
            },
            Guarded {
                path: "/h/.ssh".into(),
                restore: Restore::Mask,
            },
            Guarded {
                path: "/h/.azure".into(),
                restore: Restore::Mask,
            },
        ];
        assert_eq!(got, want);
    }
}
