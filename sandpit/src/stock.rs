//! sandpit's own per-run directories, kept off the critical path of a run's start
//! and end. On a filesystem mounted `-o discard` an `rmdir` waits for the device and
//! a `mkdir` allocates a block (~0.1 ms each on this project's VM), where a rename
//! costs a few µs.
//!
//! - The audit run directory (`~/.sandpit/run/<id>`) is taken from `.stock/` beside
//!   it: empty 0700 directories made ahead, in sandpit's state directory, which every
//!   namespace-mode sandbox sees read-only (as the placeholders' spares,
//!   `sandbox/linux/spare.rs`). Each is used once, and checked after the rename.
//!   The scratch and socket directories are made with `mkdir`: their parent can lie
//!   in a sandbox's writable root (a workspace of `/tmp`), where a stocked directory
//!   could be planted, or held open and written into once a later run uses it.
//! - At the end, a directory that holds no regular file and little else (an empty
//!   scratch directory, the sockets' directory) is renamed into `.trash/` beside it,
//!   and [`tend`] removes it on a launcher thread while a later run's command runs.
//!   Anything holding a file is removed at once: no run's data outlives it.
//!
//! `.stock` and `.trash` are used only when they are this user's directories, mode
//! 0700, reached without a link; the trash is emptied through descriptors, never
//! following a link. Elsewhere than Linux, and whenever something does not check
//! out, `mkdir` and removal as before.
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
const STOCK: &str = ".stock";
#[cfg(target_os = "linux")]
const TRASH: &str = ".trash";
/// Entries [`tend`] removes from one trash in one run at most.
#[cfg(target_os = "linux")]
const TEND: usize = 8;
/// What [`discard`] leaves to [`tend`] at most: this many entries, none a regular
/// file or a directory (sockets, links).
#[cfg(target_os = "linux")]
const SMALL_ENTRIES: usize = 4;

fn make_private(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

#[cfg(target_os = "linux")]
mod imp {
    use rustix::fs::{
        fstat, openat, renameat_with, statat, unlinkat, AtFlags, Dir, FileType, Mode, OFlags,
        RenameFlags, CWD,
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
        let path = parent.join(sub);
        let _ = super::make_private(&path);
        let fd = openat(CWD, &path, DIR, Mode::empty()).ok()?;
        let st = fstat(&fd).ok()?;
        (st.st_uid == me() && st.st_mode & 0o7777 == 0o700).then_some(fd)
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

    /// Whether `path` is what sandpit stocks: a directory, not a link, this user's,
    /// mode 0700, empty.
    pub fn fresh(path: &Path) -> bool {
        let is_dir = statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
            FileType::from_raw_mode(st.st_mode) == FileType::Directory
                && st.st_uid == me()
                && st.st_mode & 0o7777 == 0o700
        });
        is_dir && openat(CWD, path, DIR, Mode::empty()).is_ok_and(|fd| names(fd.as_fd()).is_empty())
    }

    /// Rename `name` in `from` to `to`, never replacing anything.
    pub fn rename(from: BorrowedFd<'_>, name: &CString, to: &Path) -> std::io::Result<()> {
        renameat_with(from, name.as_c_str(), CWD, to, RenameFlags::NOREPLACE)
            .map_err(std::io::Error::from)
    }

    /// Rename `path` into the directory `trash` as `name`, never replacing anything.
    pub fn rename_into(path: &Path, trash: BorrowedFd<'_>, name: &OsStr) -> bool {
        renameat_with(CWD, path, trash, name, RenameFlags::NOREPLACE).is_ok()
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

/// `parent/name`, a new empty directory only this user can enter: one from the stock
/// renamed there, else made. Fails as `mkdir` does (`AlreadyExists` when the name is
/// taken). Only for a parent in sandpit's state directory (see the module's doc).
pub fn take(parent: &Path, name: &str) -> io::Result<PathBuf> {
    let to = parent.join(name);
    #[cfg(target_os = "linux")]
    if let Some(stock) = imp::private_sub(parent, STOCK) {
        use std::os::fd::AsFd;
        for entry in imp::names(stock.as_fd()) {
            match imp::rename(stock.as_fd(), &entry, &to) {
                Ok(()) if imp::fresh(&to) => return Ok(to),
                // Not what sandpit stocks: removed, and a new one made.
                Ok(()) => {
                    let _ = std::fs::remove_file(&to).or_else(|_| std::fs::remove_dir_all(&to));
                    break;
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Err(err),
                // Taken by another run in the meantime: the next one.
                Err(_) => {}
            }
        }
    }
    make_private(&to)?;
    Ok(to)
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

/// Remove what is in `parent`'s trash (at most [`TEND`] entries) and, with `keep`
/// above 0, make its stock up to `keep`.
pub fn tend(parent: &Path, keep: usize) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsFd;
        if let Some(trash) = imp::private_sub(parent, TRASH) {
            for name in imp::names(trash.as_fd()).iter().take(TEND) {
                imp::remove_at(trash.as_fd(), name, 0);
            }
        }
        if keep == 0 {
            return;
        }
        let Some(stock) = imp::private_sub(parent, STOCK) else {
            return;
        };
        let mut have = imp::names(stock.as_fd()).len();
        let dir = parent.join(STOCK);
        let pid = std::process::id();
        for n in 0..1000 {
            if have >= keep {
                return;
            }
            match make_private(&dir.join(format!("{pid}.{n}"))) {
                Ok(()) => have += 1,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(_) => return,
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (parent, keep);
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn inode(p: &Path) -> u64 {
        std::fs::symlink_metadata(p).unwrap().ino()
    }

    fn count(p: &Path) -> usize {
        std::fs::read_dir(p).map_or(0, |d| d.count())
    }

    #[test]
    fn directories_come_from_the_stock_and_go_to_the_trash_never_back() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        // Nothing in stock: made.
        let a = take(root, "run-1").unwrap();
        assert!(a.is_dir());
        discard(&a);
        assert!(!a.exists());
        assert_eq!(
            count(&root.join(TRASH)),
            1,
            "an empty one waits in the trash"
        );
        tend(root, 2);
        assert_eq!(count(&root.join(TRASH)), 0);
        let stocked: Vec<u64> = std::fs::read_dir(root.join(STOCK))
            .unwrap()
            .map(|e| inode(&e.unwrap().path()))
            .collect();
        assert_eq!(stocked.len(), 2);
        // The next directories are the stock's (the used one is gone), private, empty.
        let b = take(root, "run-2").unwrap();
        let c = take(root, "run-3").unwrap();
        for d in [&b, &c] {
            let m = std::fs::symlink_metadata(d).unwrap();
            assert!(stocked.contains(&m.ino()));
            assert_eq!(m.mode() & 0o777, 0o700);
            assert_eq!(count(d), 0);
        }
        // A name in use is refused, as mkdir refuses it, and the stock keeps its own.
        tend(root, 1);
        let err = take(root, "run-2").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(count(&root.join(STOCK)), 1);
    }

    #[test]
    fn a_directory_holding_a_file_is_removed_at_once() {
        let t = tempfile::tempdir().unwrap();
        let trashed = |d: &Path| t.path().join(TRASH).join(d.file_name().unwrap()).exists();
        let sockets = take(t.path(), "sockets").unwrap();
        let _l = std::os::unix::net::UnixListener::bind(sockets.join("proxy.sock")).unwrap();
        discard(&sockets);
        assert!(
            !sockets.exists() && trashed(&sockets),
            "sockets only: trashed"
        );
        // A file (a run's temporary data), a directory, too many entries: removed now.
        for (name, fill) in [("file", 0), ("nested", 1), ("many", 2)] {
            let d = take(t.path(), name).unwrap();
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
    fn links_and_foreign_modes_in_place_of_stock_or_trash_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let victim = t.path().join("victim");
        std::fs::create_dir_all(victim.join("keep/deep")).unwrap();
        std::fs::write(victim.join("keep/deep/data"), "x").unwrap();
        // Private like a real stock, so that only not following the link protects it.
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        // `.stock` and `.trash` as links to the victim: neither is used.
        std::os::unix::fs::symlink(&victim, root.join(STOCK)).unwrap();
        std::os::unix::fs::symlink(&victim, root.join(TRASH)).unwrap();
        let d = take(&root, "run").unwrap();
        assert!(
            victim.join("keep").is_dir(),
            "nothing taken from the link's target"
        );
        assert_eq!(count(&d), 0);
        discard(&d);
        tend(&root, 1);
        assert!(
            victim.join("keep/deep/data").exists(),
            "nothing removed through a link"
        );
        assert!(!victim.join("run").exists(), "nothing put through a link");
        std::fs::remove_file(root.join(STOCK)).unwrap();
        std::fs::remove_file(root.join(TRASH)).unwrap();
        // Real ones holding a link and a planted directory: the link is removed, not
        // followed; the planted directory is not taken.
        tend(&root, 0);
        std::fs::set_permissions(root.join(TRASH), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&victim, root.join(TRASH).join("x")).unwrap();
        tend(&root, 0);
        assert!(victim.join("keep/deep/data").exists());
        assert_eq!(count(&root.join(TRASH)), 0);
        std::fs::create_dir_all(root.join(STOCK).join("planted/inside")).unwrap();
        std::fs::set_permissions(root.join(STOCK), std::fs::Permissions::from_mode(0o700)).unwrap();
        let e = take(&root, "run2").unwrap();
        assert_eq!(
            count(&e),
            0,
            "a stocked directory that is not empty is not used"
        );
        // A stock open to others is not used at all.
        std::fs::set_permissions(root.join(STOCK), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(root.join(STOCK).join("open")).unwrap();
        let f = take(&root, "run3").unwrap();
        assert!(root.join(STOCK).join("open").exists(), "left where it is");
        assert_eq!(count(&f), 0);
    }
}
