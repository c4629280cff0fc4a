//! Empty directories kept between runs for placeholders (`plan::Placeholder`).
//!
//! A placeholder is an empty directory made in the workspace before a run and
//! removed after it. Making and removing a directory costs a block allocation and a
//! block release (on a filesystem mounted `-o discard` the release waits for the
//! device: ~70 µs a directory here, ~0.9 ms for the default policy's eight), where a
//! rename costs a few µs. So a placeholder is an empty directory renamed out of
//! `dir` (in sandpit's state, read-only to every sandbox) when one is there, and
//! renamed back when the run ends; `mkdir` and `rmdir` remain for a workspace on
//! another filesystem, or when there is none to spare or too many spared.
//!
//! Only an empty directory ever becomes a placeholder or a spare: one is checked
//! after every rename, and what holds anything (written there meanwhile, or put
//! among the spares) goes back where it came from.
use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::sys;

/// Spares kept at most; a placeholder released past that is removed.
const KEEP: usize = 64;

/// Where a spare that turned out not empty is put aside, in `dir`: never taken.
const NOT_EMPTY: &str = ".not-empty";

pub struct Spares {
    dir: Option<PathBuf>,
    /// Spares in `dir` not yet tried, listed once, when first needed.
    names: Option<Vec<OsString>>,
    /// For naming the spares this process releases.
    next: u32,
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput.into())
}

fn rename(from: &Path, to: &Path) -> io::Result<()> {
    sys::rename_noreplace(&cstr(from)?, &cstr(to)?)
}

fn is_empty_dir(p: &Path) -> bool {
    cstr(p).is_ok_and(|c| sys::is_empty_dir(&c).unwrap_or(false))
}

impl Spares {
    /// Spares kept in `dir` (made when the first is released); `None` keeps none.
    pub fn new(dir: Option<PathBuf>) -> Spares {
        Spares {
            dir,
            names: None,
            next: 0,
        }
    }

    fn names(&mut self) -> &mut Vec<OsString> {
        let dir = self.dir.as_deref();
        self.names.get_or_insert_with(|| {
            let Some(d) = dir.and_then(|d| std::fs::read_dir(d).ok()) else {
                return vec![];
            };
            d.filter_map(|e| e.ok().map(|e| e.file_name()))
                .filter(|n| !n.as_bytes().ends_with(NOT_EMPTY.as_bytes()))
                .collect()
        })
    }

    /// Make `path` an empty directory, as `mkdir` would: `AlreadyExists` when
    /// something is there already.
    pub fn make(&mut self, path: &Path) -> io::Result<()> {
        while let Some(dir) = self.dir.clone() {
            let Some(name) = self.names().pop() else {
                break;
            };
            let spare = dir.join(&name);
            match rename(&spare, path) {
                Ok(()) if is_empty_dir(path) => return Ok(()),
                Ok(()) => {
                    // Not a spare sandpit put there: back, and never taken again.
                    let mut aside = name;
                    aside.push(NOT_EMPTY);
                    if rename(path, &dir.join(aside)).is_err() {
                        let _ = rename(path, &spare);
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    self.names().push(name);
                    return Err(e);
                }
                // Another run took it: the next one.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                // Another filesystem, or the state directory not usable.
                Err(_) => self.dir = None,
            }
        }
        std::fs::create_dir(path)
    }

    /// Remove the directory `path` if it is empty, as `rmdir` would.
    pub fn release(&mut self, path: &Path) {
        if let Some(dir) = self.dir.clone() {
            if self.names().len() < KEEP && is_empty_dir(path) {
                if self.next == 0 {
                    let _ = std::fs::create_dir(&dir);
                }
                self.next += 1;
                let name = format!("{}.{}", std::process::id(), self.next);
                let spare = dir.join(&name);
                if rename(path, &spare).is_ok() {
                    if is_empty_dir(&spare) {
                        self.names().push(name.into());
                        return;
                    }
                    // Written to between the check and the rename: back in place, or
                    // left among the spares under a name never taken, and said.
                    if rename(&spare, path).is_err() {
                        let aside = dir.join(format!("{name}{NOT_EMPTY}"));
                        let kept = if rename(&spare, &aside).is_ok() {
                            aside
                        } else {
                            spare
                        };
                        eprintln!(
                            "sandpit: what was written to {} as the run ended is in {}",
                            path.display(),
                            kept.display()
                        );
                    }
                    return;
                }
            }
        }
        // `rmdir` alone: it removes only an empty directory, never a file or a link
        // (nor what a link points to).
        let _ = std::fs::remove_dir(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn a_released_placeholder_is_the_next_one_made() {
        let t = tmp();
        let dir = t.path().join("spare");
        let ws = t.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let mut s = Spares::new(Some(dir.clone()));
        s.make(&ws.join(".envrc")).unwrap();
        assert!(is_empty_dir(&ws.join(".envrc")));
        s.release(&ws.join(".envrc"));
        assert!(!ws.join(".envrc").exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let kept = std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let before = ino(&kept);
        // Another process (another run) finds it.
        let mut other = Spares::new(Some(dir.clone()));
        other.make(&ws.join(".vscode")).unwrap();
        assert_eq!(ino(&ws.join(".vscode")), before);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        // Nothing spare: mkdir.
        other.make(&ws.join(".idea")).unwrap();
        assert!(is_empty_dir(&ws.join(".idea")));
    }

    #[test]
    fn what_holds_anything_is_never_moved_or_taken() {
        let t = tmp();
        let dir = t.path().join("spare");
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join(".vscode")).unwrap();
        std::fs::write(ws.join(".vscode/settings.json"), "{}").unwrap();
        let mut s = Spares::new(Some(dir.clone()));
        s.release(&ws.join(".vscode"));
        assert_eq!(
            std::fs::read(ws.join(".vscode/settings.json")).unwrap(),
            b"{}"
        );
        // A spare that holds a file, and a file among the spares: neither becomes
        // a placeholder, both are put aside.
        std::fs::create_dir_all(dir.join("1.1")).unwrap();
        std::fs::write(dir.join("1.1/config"), "[core]").unwrap();
        std::fs::write(dir.join("1.2"), "x").unwrap();
        let mut s = Spares::new(Some(dir.clone()));
        s.make(&ws.join(".git")).unwrap();
        assert!(is_empty_dir(&ws.join(".git")));
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["1.1.not-empty", "1.2.not-empty"]);
        assert_eq!(
            std::fs::read(dir.join("1.1.not-empty/config")).unwrap(),
            b"[core]"
        );
        // A symlink to an empty directory is not one.
        std::os::unix::fs::symlink(&dir, ws.join(".idea")).unwrap();
        s.release(&ws.join(".idea"));
        assert!(ws.join(".idea").symlink_metadata().unwrap().is_symlink());
    }

    #[test]
    fn a_name_taken_meanwhile_is_left_alone() {
        let t = tmp();
        let dir = t.path().join("spare");
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(dir.join("1.1")).unwrap();
        std::fs::write(t.path().join(".envrc"), "export A=1").unwrap();
        let mut s = Spares::new(Some(dir.clone()));
        let e = s.make(&t.path().join(".envrc")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            std::fs::read(t.path().join(".envrc")).unwrap(),
            b"export A=1"
        );
    }

    #[test]
    fn past_the_limit_a_placeholder_is_removed() {
        let t = tmp();
        let dir = t.path().join("spare");
        let mut s = Spares::new(Some(dir.clone()));
        for i in 0..KEEP + 3 {
            let p = t.path().join(format!("p{i}"));
            std::fs::create_dir(&p).unwrap();
            s.release(&p);
            assert!(!p.exists());
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), KEEP);
    }
}
