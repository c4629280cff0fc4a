//! sandpit's own per-run directories (the scratch directory, the proxy's socket
//! directory, the audit run directory), made ahead of time and put aside after the
//! run, as placeholders are (`sandbox/linux/spare.rs`). On a filesystem mounted
//! `-o discard` an `rmdir` waits for the device and a `mkdir` allocates a block; the
//! three directories' cost ~0.4 ms on every run's start and end on this project's VM,
//! where a rename costs a few µs.
//!
//! In each parent (a private directory of this user's, which no sandbox can write):
//! - `.stock/` holds empty 0700 directories made ahead; [`take`] renames one to the
//!   name asked for. Each is used once: what a run leaves goes to the trash.
//! - `.trash/` takes what [`discard`] puts aside; [`tend`] removes it and refills the
//!   stock, on a launcher thread while a later run's command runs.
//!
//! Elsewhere than Linux, and whenever a rename fails, `mkdir` and removal as before.
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

const STOCK: &str = ".stock";
const TRASH: &str = ".trash";
/// Directories [`tend`] removes from one trash in one run at most.
const TEND: usize = 8;

fn make_private(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

#[cfg(target_os = "linux")]
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE).map_err(io::Error::from)
}

/// `parent/name`, a new empty directory only this user can enter: one from the stock
/// renamed there, else made. Fails as `mkdir` does (`AlreadyExists` when the name is
/// taken).
pub fn take(parent: &Path, name: &str) -> io::Result<PathBuf> {
    let to = parent.join(name);
    #[cfg(target_os = "linux")]
    if let Ok(entries) = std::fs::read_dir(parent.join(STOCK)) {
        for e in entries.flatten() {
            match rename_noreplace(&e.path(), &to) {
                Ok(()) => return Ok(to),
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Err(err),
                // Taken by another run in the meantime: the next one.
                Err(_) => {}
            }
        }
    }
    make_private(&to)?;
    Ok(to)
}

/// What [`discard`] leaves to [`tend`] at most: a run's temporary files never outlive
/// it by more than a few small files (a socket, the policy snapshot).
const SMALL_ENTRIES: usize = 4;
const SMALL_BYTES: u64 = 1 << 20;

/// Whether `dir` holds at most [`SMALL_ENTRIES`] entries, no directory among them,
/// and at most [`SMALL_BYTES`] together.
fn small(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut bytes = 0u64;
    for (i, e) in entries.enumerate() {
        // DirEntry::metadata does not follow a link.
        let Some(m) = e.ok().and_then(|e| e.metadata().ok()) else {
            return false;
        };
        bytes += m.len();
        if i >= SMALL_ENTRIES || m.is_dir() || bytes > SMALL_BYTES {
            return false;
        }
    }
    true
}

/// Remove `dir` and what it holds: a small one ([`small`]) is put out of the way for
/// [`tend`] to remove, anything else (or what cannot be moved) removed here.
pub fn discard(dir: &Path) {
    #[cfg(target_os = "linux")]
    if let (Some(parent), Some(name), true) = (dir.parent(), dir.file_name(), small(dir)) {
        let trash = parent.join(TRASH);
        let _ = make_private(&trash);
        if rename_noreplace(dir, &trash.join(name)).is_ok() {
            return;
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Remove what is in `parent`'s trash (at most [`TEND`] directories) and make its
/// stock up to `keep`.
pub fn tend(parent: &Path, keep: usize) {
    if let Ok(entries) = std::fs::read_dir(parent.join(TRASH)) {
        for e in entries.flatten().take(TEND) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let stock = parent.join(STOCK);
    let _ = make_private(&stock);
    let mut have = std::fs::read_dir(&stock).map_or(keep, |d| d.count());
    let pid = std::process::id();
    for n in 0..1000 {
        if have >= keep {
            return;
        }
        match make_private(&stock.join(format!("{pid}.{n}"))) {
            Ok(()) => have += 1,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn inode(p: &Path) -> u64 {
        std::fs::symlink_metadata(p).unwrap().ino()
    }

    #[test]
    fn directories_come_from_the_stock_and_go_to_the_trash_never_back() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        // Nothing in stock: made.
        let a = take(root, "run-1").unwrap();
        assert!(a.is_dir());
        std::fs::write(a.join("left"), "x").unwrap();
        let used = inode(&a);
        discard(&a);
        assert!(!a.exists());
        tend(root, 2);
        assert_eq!(std::fs::read_dir(root.join(TRASH)).unwrap().count(), 0);
        let stocked: Vec<u64> = std::fs::read_dir(root.join(STOCK))
            .unwrap()
            .map(|e| inode(&e.unwrap().path()))
            .collect();
        assert_eq!(stocked.len(), 2);
        // The next directories are the stock's, private and empty, never the used one.
        let b = take(root, "run-2").unwrap();
        let c = take(root, "run-3").unwrap();
        for d in [&b, &c] {
            let m = std::fs::symlink_metadata(d).unwrap();
            assert!(stocked.contains(&m.ino()) && m.ino() != used);
            assert_eq!(m.mode() & 0o777, 0o700);
            assert_eq!(std::fs::read_dir(d).unwrap().count(), 0);
        }
        // A name in use is refused, as mkdir refuses it, and the stock keeps its own.
        tend(root, 1);
        let err = take(root, "run-2").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_dir(root.join(STOCK)).unwrap().count(), 1);
    }

    #[test]
    fn only_a_small_directory_waits_in_the_trash() {
        let t = tempfile::tempdir().unwrap();
        let trashed = |d: &Path| t.path().join(TRASH).join(d.file_name().unwrap()).exists();
        let small = take(t.path(), "small").unwrap();
        std::fs::write(small.join("policy.snapshot"), vec![0u8; 4096]).unwrap();
        discard(&small);
        assert!(!small.exists() && trashed(&small));
        // Too many entries, a directory, too many bytes: removed at once.
        for (name, fill) in [("many", 0), ("nested", 1), ("big", 2)] {
            let d = take(t.path(), name).unwrap();
            match fill {
                0 => (0..=SMALL_ENTRIES)
                    .for_each(|i| std::fs::write(d.join(i.to_string()), "").unwrap()),
                1 => std::fs::create_dir(d.join("sub")).unwrap(),
                _ => std::fs::write(d.join("f"), vec![0u8; SMALL_BYTES as usize + 1]).unwrap(),
            }
            discard(&d);
            assert!(!d.exists() && !trashed(&d), "{name}");
        }
    }

    #[test]
    fn without_a_parent_to_move_into_it_is_removed_in_place() {
        let t = tempfile::tempdir().unwrap();
        let d = take(t.path(), "x").unwrap();
        std::fs::write(d.join("f"), "x").unwrap();
        // The trash's name taken by a file: no trash, so removal here.
        std::fs::write(t.path().join(TRASH), "").unwrap();
        discard(&d);
        assert!(!d.exists());
    }
}
