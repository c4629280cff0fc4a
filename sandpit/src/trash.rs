//! Empty per-run directories of sandpit's own (the scratch directory, the proxy's
//! socket directory), put out of the way at the end of a run instead of removed. On a
//! filesystem mounted `-o discard` an `rmdir` waits for the device (~0.1 ms each on
//! this project's VM), where a rename costs a few µs.
//!
//! A directory that holds no regular file and little else (an empty scratch
//! directory, the sockets' directory) is renamed into `.trash/` beside it, and
//! [`tend`] removes it in sandpit's tending process once the launcher has exited
//! (`sandbox::linux::start_tender`).
//! Anything holding a file is removed at once: no run's data outlives it. (The audit
//! run directory, in the state directory, comes from the placeholders' spares,
//! `sandbox/linux/spare.rs`.)
//!
//! The parent can lie in a sandbox's writable root (a workspace of `/tmp`): `.trash`
//! is used only when it is this user's directory, mode 0700, reached without a link,
//! and it is emptied through descriptors, never following a link. Elsewhere than
//! Linux, and whenever something does not check out, removal as before.
use std::path::Path;

#[cfg(target_os = "linux")]
const TRASH: &str = ".trash";
/// Where [`tend`] removes what it took out of the trash.
#[cfg(target_os = "linux")]
const BURN: &str = ".burn";
/// Entries [`tend`] removes from one trash in one run at most.
#[cfg(target_os = "linux")]
const TEND: usize = 8;
/// What [`discard`] leaves to [`tend`] at most: this many entries, none a regular
/// file or a directory (sockets, links).
#[cfg(target_os = "linux")]
const SMALL_ENTRIES: usize = 4;

#[cfg(target_os = "linux")]
mod imp {
    use rustix::fs::{
        fstat, mkdirat, openat, renameat_with, statat, unlinkat, AtFlags, Dir, FileType, Mode,
        OFlags, RenameFlags, CWD,
    };
    use std::ffi::{CString, OsStr};
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::path::Path;

    const DIR: OFlags = OFlags::RDONLY
        .union(OFlags::DIRECTORY)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);
    /// How deep [`remove_at`] goes into what someone else put into a trash.
    const DEPTH: usize = 16;

    fn me() -> u32 {
        crate::sys::uid()
    }

    /// `parent/sub` (made when missing), open, if it is a directory of this user's
    /// that only this user can enter, reached without a link.
    pub fn private_sub(parent: &Path, sub: &str) -> Option<OwnedFd> {
        private_sub_at(openat(CWD, parent, DIR, Mode::empty()).ok()?.as_fd(), sub)
    }

    /// The same, below the open directory `parent`.
    pub fn private_sub_at(parent: BorrowedFd<'_>, sub: &str) -> Option<OwnedFd> {
        let _ = mkdirat(parent, sub, Mode::from_raw_mode(0o700));
        let fd = openat(parent, sub, DIR, Mode::empty()).ok()?;
        let st = fstat(&fd).ok()?;
        (st.st_uid == me() && st.st_mode & 0o7777 == 0o700).then_some(fd)
    }

    /// The directory `path` whose trash [`super::tend`] empties, open: if it is this
    /// user's, not a link, and no one else can write in it. Opened before a sandbox
    /// runs, so that nothing the sandbox puts at `path` meanwhile is followed.
    pub fn open_root(path: &Path) -> Option<OwnedFd> {
        let fd = openat(CWD, path, DIR, Mode::empty()).ok()?;
        let st = fstat(&fd).ok()?;
        (st.st_uid == me() && st.st_mode & 0o022 == 0).then_some(fd)
    }

    /// The names in the directory `dir` (without `.` and `..`).
    pub fn names(dir: BorrowedFd<'_>) -> Vec<CString> {
        let Ok(d) = Dir::read_from(dir) else {
            return vec![];
        };
        d.filter_map(Result::ok)
            .map(|e| e.file_name().to_owned())
            .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
            .collect()
    }

    /// Rename `path` into the directory `trash` as `name`, never replacing anything.
    pub fn rename_into(path: &Path, trash: BorrowedFd<'_>, name: &OsStr) -> bool {
        renameat_with(CWD, path, trash, name, RenameFlags::NOREPLACE).is_ok()
    }

    /// Move `name` from the directory `from` to `to`, never replacing anything.
    pub fn move_at(from: BorrowedFd<'_>, name: &CString, to: BorrowedFd<'_>) {
        let _ = renameat_with(
            from,
            name.as_c_str(),
            to,
            name.as_c_str(),
            RenameFlags::NOREPLACE,
        );
    }

    /// Whether `dir` holds at most `max` entries, none a regular file or a directory.
    pub fn small(dir: &Path, max: usize) -> bool {
        let Ok(fd) = openat(CWD, dir, DIR, Mode::empty()) else {
            return false;
        };
        let names = names(fd.as_fd());
        names.len() <= max
            && names.iter().all(|n| {
                statat(&fd, n.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                    let t = FileType::from_raw_mode(st.st_mode);
                    t != FileType::RegularFile && t != FileType::Directory
                })
            })
    }

    /// Remove `name` in `dir` and, for a directory, what it holds (`depth` levels at
    /// most), through descriptors: a link is removed, never followed.
    pub fn remove_at(dir: BorrowedFd<'_>, name: &CString, depth: usize) {
        if unlinkat(dir, name.as_c_str(), AtFlags::empty()).is_ok() {
            return;
        }
        if depth < DEPTH {
            if let Ok(sub) = openat(dir, name.as_c_str(), DIR, Mode::empty()) {
                for n in names(sub.as_fd()) {
                    remove_at(sub.as_fd(), &n, depth + 1);
                }
            }
        }
        let _ = unlinkat(dir, name.as_c_str(), AtFlags::REMOVEDIR);
    }
}

/// Remove `dir` and what it holds: one holding no regular file and little else is
/// put out of the way for [`tend`] to remove, anything else removed here.
pub fn discard(dir: &Path) {
    #[cfg(target_os = "linux")]
    if let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
        use std::os::fd::AsFd;
        if imp::small(dir, SMALL_ENTRIES) {
            if let Some(trash) = imp::private_sub(parent, TRASH) {
                if imp::rename_into(dir, trash.as_fd(), name) {
                    return;
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(target_os = "linux")]
pub use imp::open_root;

/// Remove what is in the trash of the directory `root` ([`open_root`]), at most
/// [`TEND`] entries. Each is renamed to `.burn/` first and removed there, so the
/// slow removals never hold the trash's lock, which a run ending meanwhile needs for
/// its renames.
#[cfg(target_os = "linux")]
pub fn tend(root: std::os::fd::BorrowedFd<'_>) {
    use std::os::fd::AsFd;
    if let (Some(trash), Some(burn)) = (
        imp::private_sub_at(root, TRASH),
        imp::private_sub_at(root, BURN),
    ) {
        for name in imp::names(trash.as_fd()).iter().take(TEND) {
            imp::move_at(trash.as_fd(), name, burn.as_fd());
        }
        for name in imp::names(burn.as_fd()).iter().take(TEND) {
            imp::remove_at(burn.as_fd(), name, 0);
        }
    }
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

    fn count(p: &Path) -> usize {
        std::fs::read_dir(p).map_or(0, |d| d.count())
    }

    fn tend_dir(p: &Path) {
        use std::os::fd::AsFd;
        tend(open_root(p).unwrap().as_fd());
    }

    fn private(p: &Path) -> std::path::PathBuf {
        std::fs::DirBuilder::new().mode(0o700).create(p).unwrap();
        p.to_path_buf()
    }

    #[test]
    fn an_empty_directory_waits_in_the_trash_until_tended() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let a = private(&root.join("run-1"));
        discard(&a);
        assert!(!a.exists());
        assert_eq!(
            count(&root.join(TRASH)),
            1,
            "an empty one waits in the trash"
        );
        tend_dir(root);
        assert_eq!(count(&root.join(TRASH)) + count(&root.join(BURN)), 0);
    }

    #[test]
    fn a_directory_holding_a_file_is_removed_at_once() {
        let t = tempfile::tempdir().unwrap();
        let trashed = |d: &Path| t.path().join(TRASH).join(d.file_name().unwrap()).exists();
        let sockets = private(&t.path().join("sockets"));
        let _l = std::os::unix::net::UnixListener::bind(sockets.join("proxy.sock")).unwrap();
        discard(&sockets);
        assert!(
            !sockets.exists() && trashed(&sockets),
            "sockets only: trashed"
        );
        // A file (a run's temporary data), a directory, too many entries: removed now.
        for (name, fill) in [("file", 0), ("nested", 1), ("many", 2)] {
            let d = private(&t.path().join(name));
            match fill {
                0 => std::fs::write(d.join("token"), "secret").unwrap(),
                1 => std::fs::create_dir(d.join("sub")).unwrap(),
                _ => (0..=SMALL_ENTRIES)
                    .for_each(|i| std::os::unix::fs::symlink("/", d.join(i.to_string())).unwrap()),
            }
            discard(&d);
            assert!(!d.exists() && !trashed(&d), "{name}");
        }
    }

    #[test]
    fn links_and_foreign_modes_in_place_of_the_trash_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let victim = t.path().join("victim");
        std::fs::create_dir_all(victim.join("keep/deep")).unwrap();
        std::fs::write(victim.join("keep/deep/data"), "x").unwrap();
        // Private like a real trash, so that only not following the link protects it.
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        // `.trash` as a link to the victim: not used.
        std::os::unix::fs::symlink(&victim, root.join(TRASH)).unwrap();
        let d = private(&root.join("run"));
        discard(&d);
        assert!(!d.exists());
        tend_dir(&root);
        assert!(
            victim.join("keep/deep/data").exists(),
            "nothing removed through a link"
        );
        assert!(!victim.join("run").exists(), "nothing put through a link");
        std::fs::remove_file(root.join(TRASH)).unwrap();
        // A real one holding a link and a planted tree: the link is removed, not
        // followed, and the tree with it.
        tend_dir(&root);
        std::os::unix::fs::symlink(&victim, root.join(TRASH).join("x")).unwrap();
        std::fs::create_dir_all(root.join(TRASH).join("planted/inside")).unwrap();
        tend_dir(&root);
        assert!(victim.join("keep/deep/data").exists());
        assert_eq!(count(&root.join(TRASH)) + count(&root.join(BURN)), 0);
        // `.burn` as a link to the victim: nothing moved or removed through it.
        std::fs::remove_dir(root.join(BURN)).unwrap();
        std::os::unix::fs::symlink(&victim, root.join(BURN)).unwrap();
        let b = private(&root.join("run1"));
        discard(&b);
        tend_dir(&root);
        assert!(victim.join("keep/deep/data").exists() && !victim.join("run1").exists());
        assert_eq!(count(&root.join(TRASH)), 1, "left in the trash");
        std::fs::remove_file(root.join(BURN)).unwrap();
        tend_dir(&root);
        assert_eq!(count(&root.join(TRASH)) + count(&root.join(BURN)), 0);
        // A trash open to others is not used at all.
        std::fs::set_permissions(root.join(TRASH), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(root.join(TRASH).join("open")).unwrap();
        let e = private(&root.join("run2"));
        discard(&e);
        assert!(!e.exists(), "removed in place");
        assert!(!root.join(TRASH).join("run2").exists(), "not put there");
        tend_dir(&root);
        assert!(root.join(TRASH).join("open").exists(), "left where it is");
    }
}
