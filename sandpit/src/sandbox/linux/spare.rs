//! Placeholders made ahead of time, and put away to be removed later.
//!
//! A placeholder is an empty directory made in the workspace before a run and
//! removed after it (`plan::Placeholder`). Making and removing a directory costs a
//! block allocation and a block release: on a filesystem mounted `-o discard` the
//! release waits for the device (~70–95 µs a directory on this project's VM, ~0.9 ms
//! for the default policy's eight), where a rename costs a few µs. So, in sandpit's
//! state (read-only to every namespace-mode sandbox):
//!
//! - `spare/` holds empty directories sandpit made there itself. A placeholder is one
//!   of them renamed into place. Never one that has been in a workspace: something
//!   there (a shell whose working directory it was, a descriptor) could still hold it
//!   and write into it wherever it went next.
//! - `trash/` takes placeholders the run is done with, renamed there.
//! - [`tend`], in a process of sandpit's own ([`start_tender`]), makes spares for
//!   the next runs and moves what is in the trash to `burn/` to remove it there, a
//!   bounded number of each per run. An `rmdir` holds its parent's lock while it
//!   waits for the device: done in the trash, it held up the renames of a run ending
//!   meanwhile (eight took 0.5–0.8 ms instead of 0.1 ms here).
//!
//! A workspace on another filesystem, or a state directory that is not a private
//! directory of this user, gets `mkdir` and `rmdir` as before.
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::sys;

/// Spares kept ready (the default policy makes up to fifteen placeholders in a
/// workspace that is no repository, an agent profile a few more).
const KEEP: usize = 32;
/// Directories [`tend`] removes, and spares it makes, in one run at most.
const TEND: usize = 32;
/// Suffix of what is put aside, never taken or removed: a spare that was no empty
/// directory of this user's, or a trashed placeholder something wrote into.
const ASIDE: &str = ".not-empty";

fn rename(from: &Path, to: &Path) -> io::Result<()> {
    sys::rename_noreplace(from, to)
}

fn is_empty_dir(p: &Path) -> bool {
    sys::is_empty_dir(p).unwrap_or(false)
}

/// `state`'s directory `name` (made when missing), if it is a directory of this
/// user's that no one else can write, not a link.
fn private_dir(state: &Path, name: &str) -> Option<PathBuf> {
    let dir = state.join(name);
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let m = std::fs::symlink_metadata(&dir).ok()?;
    (m.is_dir() && m.uid() == crate::sys::uid() && m.mode() & 0o022 == 0).then_some(dir)
}

/// A spare fit to become a placeholder: an empty directory of this user's, not a link,
/// with no special mode bits and not writable by everyone.
fn fit(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .is_ok_and(|m| m.is_dir() && m.uid() == crate::sys::uid() && m.mode() & 0o7002 == 0)
        && is_empty_dir(p)
}

/// A name in `dir` no other process of this user's picks: pid and a count.
fn fresh_name(dir: &Path, next: &mut u32) -> PathBuf {
    *next += 1;
    dir.join(format!("{}.{}", std::process::id(), next))
}

pub struct Spares {
    /// `spare/` and `trash/` in sandpit's state directory, where usable; `None` makes
    /// and removes every placeholder.
    spare: Option<PathBuf>,
    trash: Option<PathBuf>,
    /// Spares not yet tried, listed when first needed.
    names: Option<Vec<OsString>>,
    next: u32,
}

impl Spares {
    /// The spares and trash in `state` (sandpit's state directory).
    pub fn new(state: Option<PathBuf>) -> Spares {
        let dir = |name| state.as_deref().and_then(|s| private_dir(s, name));
        Spares {
            spare: dir("spare"),
            trash: dir("trash"),
            names: None,
            next: 0,
        }
    }

    /// Make `path` an empty directory, as `mkdir` would (`AlreadyExists` when
    /// something is there already).
    pub fn make(&mut self, path: &Path) -> io::Result<()> {
        if let Some(dir) = &self.spare {
            let names = self.names.get_or_insert_with(|| list(dir));
            while let Some(name) = names.pop() {
                let spare = dir.join(&name);
                if !fit(&spare) {
                    let _ = rename(&spare, &aside(&spare));
                    continue;
                }
                match rename(&spare, path) {
                    // Checked before the move; only this user can have changed it since
                    // (the state directory is no sandbox's to write in namespace mode).
                    Ok(()) if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) => {
                        return Ok(())
                    }
                    Ok(()) => {
                        return Err(io::Error::other(format!(
                            "{} changed while it was made a placeholder",
                            spare.display()
                        )))
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                        names.push(name);
                        return Err(e);
                    }
                    // Another run took it: the next one. (Or `path`'s parent is
                    // missing, which `mkdir` below reports.)
                    Err(e) if e.kind() == io::ErrorKind::NotFound && spare.exists() => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    // Another filesystem: `mkdir`.
                    Err(_) => break,
                }
            }
        }
        std::fs::create_dir(path)
    }

    /// Make `path` a read-only file placeholder holding
    /// [`super::plan::placeholder_contents`], as `O_CREAT|O_EXCL` would
    /// (`AlreadyExists` when something is there already).
    pub fn make_file(&mut self, path: &Path) -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?
            .write_all(super::plan::placeholder_contents(path))
    }

    /// Remove the placeholder `path` if it is as made: a file holding just its
    /// placeholder contents is unlinked; an empty directory is put in the trash when
    /// it can be, else `rmdir` (which removes only an empty directory, never a file
    /// or a link).
    pub fn release(&mut self, path: &Path) {
        if super::plan::is_placeholder_file(path) {
            let _ = std::fs::remove_file(path);
            return;
        }
        if let Some(trash) = &self.trash {
            if is_empty_dir(path) && rename(path, &fresh_name(trash, &mut self.next)).is_ok() {
                return;
            }
        }
        let _ = std::fs::remove_dir(path);
    }
}

fn list(dir: &Path) -> Vec<OsString> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.file_name()))
                .filter(|n| !n.as_bytes().ends_with(ASIDE.as_bytes()))
                .collect()
        })
        .unwrap_or_default()
}

fn aside(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(ASIDE);
    PathBuf::from(s)
}

/// Make spares up to [`KEEP`] in `state` and empty its trash, at most [`TEND`] of
/// each. Spares first: they are quick to make and the next run needs them. A
/// trashed placeholder that holds something (written through a handle held on it
/// after its run) is kept, put aside, and with `say` said.
pub fn tend(state: &Path, say: bool) {
    if let Some(spare) = private_dir(state, "spare") {
        let have = list(&spare).len();
        let mut next = 0;
        for _ in have..KEEP.min(have + TEND) {
            let _ = std::fs::create_dir(fresh_name(&spare, &mut next));
        }
    }
    let (Some(trash), Some(burn)) = (private_dir(state, "trash"), private_dir(state, "burn"))
    else {
        return;
    };
    // Out of the trash first, a quick rename each: the slow removals then hold
    // only `burn/`'s lock, never the one a run ending now renames into.
    for name in list(&trash).into_iter().take(TEND) {
        let _ = rename(&trash.join(&name), &burn.join(&name));
    }
    for name in list(&burn).into_iter().take(TEND) {
        let p = burn.join(&name);
        match std::fs::remove_dir(&p) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {
                let to = aside(&p);
                if rename(&p, &to).is_ok() && say {
                    eprintln!(
                        "sandpit: what was written into a placeholder after its run ended \
                         is in {}",
                        to.display()
                    );
                }
            }
            _ => {}
        }
    }
}

/// The tending process's name in `ps`: never the launcher's command line, which
/// holds the command's.
const TITLE: &str = "sandpit-tend";

/// How long a run goes before [`start_tender`]'s process tends while it runs: never
/// while a run starts, whose processes would wait for the CPU.
const TEND_DURING_MS: i32 = 1000;

/// Fork sandpit's tending of what runs leave and need, a process of its own: in
/// namespace mode the spares (placeholders, audit run directories) and trash in
/// `state` (sandpit's state directory, which no sandbox can write there), and the
/// trash of the scratch and socket directories under `scratch` ([`crate::trash`],
/// opened here, before any sandbox runs). It tends once the launcher has exited
/// (this run's trash included), and in a run that lasts, once while it runs as
/// well. A removal waits for the device (~0.1–0.5 ms each on this project's VM, a
/// run leaves about ten), so neither the launcher nor its exit waits for them (a
/// thread of its own would hold its exit up), and nothing piles up from one short
/// run to the next.
///
/// Returns its pid, unless the fork failed (the next run tends then). Call while
/// the launcher is single-threaded. Nobody waits for it.
pub fn start_tender(state: Option<PathBuf>, scratch: &Path) -> Option<libc::pid_t> {
    sys::debug_assert_single_threaded();
    let launcher = sys::pidfd_self().ok()?;
    let root = crate::trash::open_root(scratch)?;
    match sys::fork().ok()? {
        sys::Fork::Parent(pid) => Some(pid),
        sys::Fork::Child => {
            let _ = std::panic::catch_unwind(move || tending(launcher, root, state.as_deref()));
            sys::exit_now(0)
        }
    }
}

fn tending(launcher: OwnedFd, root: OwnedFd, state: Option<&Path>) {
    // Nothing of the launcher's kept open (its pipes, terminal, lock, sockets) but
    // stderr, until the launcher is gone.
    let Ok([launcher, root]) = sys::keep_only([launcher, root]) else {
        return;
    };
    // Signals as a process of its own (the launcher blocks those it forwards), but
    // what the terminal sends the process group: a few milliseconds of removals are
    // finished.
    let _ = sys::SigSet::reset_all();
    sys::ignore(&[libc::SIGHUP, libc::SIGINT, libc::SIGQUIT]);
    let _ = std::env::set_current_dir("/");
    sys::set_title(TITLE);
    // Fallback mode tends no state and has nothing to say: stderr goes at once (a
    // sandbox there runs as this user and could stop this process; it must hold
    // nothing of the caller's then).
    if state.is_none() && sys::quiet().is_err() {
        return;
    }
    let all = |say| {
        if let Some(s) = state {
            tend(s, say);
        }
        crate::trash::tend(root.as_fd());
    };
    // A run still going after a while: tend now (the start-up is over), able to say.
    if !crate::sys::readable(launcher.as_fd(), TEND_DURING_MS).unwrap_or(true) {
        all(true);
        while !crate::sys::readable(launcher.as_fd(), -1).unwrap_or(true) {}
    }
    // Past the launcher's exit nothing is said: its caller may be reading stderr.
    if sys::quiet().is_ok() {
        all(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn ino(p: &Path) -> u64 {
        std::fs::symlink_metadata(p).unwrap().ino()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn placeholders_come_from_spares_and_go_to_the_trash_never_back() {
        let t = tempfile::tempdir().unwrap();
        let state = t.path().join("state");
        let ws = t.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        // Nothing spare yet: mkdir.
        let mut s = Spares::new(Some(state.clone()));
        s.make(&ws.join(".envrc")).unwrap();
        s.release(&ws.join(".envrc"));
        assert!(!ws.join(".envrc").exists());
        assert_eq!(names(&state.join("trash")).len(), 1);
        tend(&state, true);
        assert!(
            names(&state.join("trash")).is_empty() && names(&state.join("burn")).is_empty(),
            "the trash is emptied"
        );
        let spares = names(&state.join("spare"));
        assert_eq!(spares.len(), KEEP);
        // The next run's placeholders are those spares, never the released directory.
        let made: Vec<u64> = spares
            .iter()
            .map(|n| ino(&state.join("spare").join(n)))
            .collect();
        let mut s = Spares::new(Some(state.clone()));
        s.make(&ws.join(".vscode")).unwrap();
        assert!(made.contains(&ino(&ws.join(".vscode"))));
        assert_eq!(names(&state.join("spare")).len(), KEEP - 1);
    }

    #[test]
    fn a_handle_on_a_released_placeholder_reaches_no_other_workspace() {
        let t = tempfile::tempdir().unwrap();
        let state = t.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let mut s = Spares::new(Some(state.clone()));
        s.make(&ws.join(".vscode")).unwrap();
        let held = std::fs::File::open(ws.join(".vscode")).unwrap();
        s.release(&ws.join(".vscode"));
        // Written through the handle after the run: kept, put aside.
        use std::os::fd::AsRawFd;
        let via = PathBuf::from(format!("/proc/self/fd/{}/config", held.as_raw_fd()));
        std::fs::write(&via, "[core]").unwrap();
        tend(&state, true);
        tend(&state, true);
        assert!(names(&state.join("trash")).is_empty());
        let kept = names(&state.join("burn"));
        assert_eq!(kept.len(), 1);
        assert!(kept[0].ends_with(ASIDE), "{kept:?}");
        assert_eq!(std::fs::read(&via).unwrap(), b"[core]");
        for _ in 0..KEEP {
            let mut s = Spares::new(Some(state.clone()));
            let p = ws.join(".git");
            s.make(&p).unwrap();
            assert!(is_empty_dir(&p));
            std::fs::remove_dir(&p).unwrap();
        }
    }

    #[test]
    fn only_an_empty_directory_of_this_user_becomes_a_placeholder() {
        let t = tempfile::tempdir().unwrap();
        let state = t.path().join("state");
        let spare = state.join("spare");
        std::fs::create_dir_all(&spare).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&spare, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::create_dir(spare.join("1.1")).unwrap();
        std::fs::write(spare.join("1.1/config"), "[core]").unwrap();
        std::fs::write(spare.join("1.2"), "x").unwrap();
        std::os::unix::fs::symlink(t.path(), spare.join("1.3")).unwrap();
        std::fs::create_dir(spare.join("1.4")).unwrap();
        std::fs::set_permissions(spare.join("1.4"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let mut s = Spares::new(Some(state.clone()));
        s.make(&ws.join(".git")).unwrap();
        assert!(is_empty_dir(&ws.join(".git")));
        assert!(!ws.join(".git").symlink_metadata().unwrap().is_symlink());
        assert_eq!(
            names(&spare),
            [
                "1.1.not-empty",
                "1.2.not-empty",
                "1.3.not-empty",
                "1.4.not-empty"
            ]
        );
        assert_eq!(
            std::fs::read(spare.join("1.1.not-empty/config")).unwrap(),
            b"[core]"
        );
    }

    #[test]
    fn what_holds_anything_or_is_taken_is_left_alone() {
        let t = tempfile::tempdir().unwrap();
        let state = t.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        tend(&state, true);
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join(".vscode")).unwrap();
        std::fs::write(ws.join(".vscode/settings.json"), "{}").unwrap();
        std::fs::write(ws.join(".envrc"), "export A=1").unwrap();
        let mut s = Spares::new(Some(state.clone()));
        s.release(&ws.join(".vscode"));
        assert_eq!(
            std::fs::read(ws.join(".vscode/settings.json")).unwrap(),
            b"{}"
        );
        let e = s.make(&ws.join(".envrc")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(ws.join(".envrc")).unwrap(), b"export A=1");
        assert_eq!(
            names(&state.join("spare")).len(),
            KEEP,
            "the spare was kept"
        );
        // A link to an empty directory is not one.
        std::os::unix::fs::symlink(&state, ws.join(".idea")).unwrap();
        s.release(&ws.join(".idea"));
        assert!(ws.join(".idea").symlink_metadata().unwrap().is_symlink());
    }

    #[test]
    fn a_state_directory_others_can_write_is_not_used() {
        let t = tempfile::tempdir().unwrap();
        let state = t.path().join("state");
        std::fs::create_dir_all(state.join("spare")).unwrap();
        std::fs::create_dir(state.join("spare/1.1")).unwrap();
        std::fs::set_permissions(state.join("spare"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let mut s = Spares::new(Some(state.clone()));
        s.make(&ws.join(".git")).unwrap();
        assert!(state.join("spare/1.1").exists(), "not taken");
    }
}
