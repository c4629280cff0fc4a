//! `files.agent_read` in the kernel: the agent's own login files are hidden from the
//! commands it spawns by a Landlock layer of their own.
//!
//! Landlock only ever takes access away, and its rules grant by hierarchy, so "all
//! the base layer allows, but for these files" is said by granting everything beside
//! them: for each directory on the way from `/` down to a hidden file, a rule for each
//! entry that is neither the file nor on the way to another hidden one. The layer
//! handles reading, writing and truncating files, removing them and linking or
//! renaming across directories (`REFER`): a command the agent spawned can neither
//! read the file, nor overwrite it, nor hard-link it to a place it may read, nor move a
//! granted directory's file into its place. What is made later beside a hidden file
//! (a directory on the way) has no rule, so it is out of reach too.
//!
//! It handles making and removing directories and making every kind of entry as
//! well, so nothing is made, removed or renamed directly in a directory on the way.
//! Without that, a spawned command could put a symbolic link where the agent's login
//! is yet to be written (the agent's write follows it into the workspace), or rename
//! a directory on the way (a layer listed later, or the next run's, then grants it
//! under its new name, and the file leaves the name the policy hides).
//!
//! A layer is the calling thread's and its descendants' for good: a spawned command
//! cannot lift it, and what it runs (static programs included) keeps it. The agent
//! never takes it: a dynamic command the agent spawns takes it in its own
//! constructor (this library loads first), a program the agent starts by
//! `fork` + `exec` takes it between the two (static ones included, which this library
//! never loads into), from a ruleset the agent made at start, and one it starts by
//! `posix_spawn`, `system` or `popen` inherits it from a thread of the agent's that
//! took it for that call alone (`crate::exec::start`).
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
const ACCESS_FS_READ_FILE: u64 = 1 << 2;
const ACCESS_FS_REMOVE_DIR: u64 = 1 << 4;
const ACCESS_FS_REMOVE_FILE: u64 = 1 << 5;
/// Making a character device, directory, regular file, socket, FIFO, block device
/// and symbolic link (`MAKE_CHAR` … `MAKE_SYM`, bits 6 to 12).
const ACCESS_FS_MAKE_ANY: u64 = 0x7f << 6;
const ACCESS_FS_REFER: u64 = 1 << 13;
const ACCESS_FS_TRUNCATE: u64 = 1 << 14;
/// The rights a rule may grant on a file (the others are a directory's).
const FILE_RIGHTS: u64 = ACCESS_FS_WRITE_FILE | ACCESS_FS_READ_FILE | ACCESS_FS_TRUNCATE;
const CREATE_RULESET_VERSION: libc::c_uint = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The rights the layer handles on this kernel's Landlock: reading, writing and
/// removing files, making entries and removing directories everywhere; linking or
/// renaming across directories from ABI 2 (`REFER`; before it a Landlock domain may
/// never do that); truncating from ABI 3 (before it a command could empty the file,
/// not read it).
/// Whether this kernel has Landlock (the layer can be taken at all).
pub fn available() -> bool {
    handled().is_ok()
}

fn handled() -> Result<u64, String> {
    // SAFETY: the version query takes no attribute (NULL, size 0).
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if abi < 1 {
        return Err(format!(
            "Landlock is not available: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut rights = ACCESS_FS_READ_FILE
        | ACCESS_FS_WRITE_FILE
        | ACCESS_FS_REMOVE_FILE
        | ACCESS_FS_REMOVE_DIR
        | ACCESS_FS_MAKE_ANY;
    if abi >= 2 {
        rights |= ACCESS_FS_REFER;
    }
    if abi >= 3 {
        rights |= ACCESS_FS_TRUNCATE;
    }
    Ok(rights)
}

/// The layer that hides the agent's files: the rules, listed once (at load), and a
/// ruleset made of them.
pub struct Hiding {
    /// A ruleset of [`Hiding::grants`], close-on-exec.
    ruleset: OwnedFd,
    /// Each entry beside the hidden files and what it is granted.
    grants: Vec<(CString, u64)>,
    handled: u64,
    /// The hidden files, links resolved.
    hidden: Vec<CString>,
}

/// The process that last took the layer between `fork` and `exec` ([`Hiding::
/// restrict_once`]): a program that tries one `exec` after another (a `PATH`
/// search) takes it once, not once a try — Landlock allows 16 layers.
static TOOK: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

impl Hiding {
    /// The layer that grants everything but `hidden` (absolute paths; links in the
    /// part that exists are resolved).
    pub fn new(hidden: &[PathBuf]) -> Result<Hiding, String> {
        let handled = handled()?;
        let hidden: Vec<PathBuf> = hidden.iter().map(|p| resolved(p)).collect();
        let mut grants = vec![];
        grant_beside(&mut grants, Path::new("/"), &hidden, handled)?;
        let ruleset = make_ruleset(handled, &grants).map_err(|(what, e)| {
            format!(
                "{what} for the agent's files: {}",
                std::io::Error::from_raw_os_error(e)
            )
        })?;
        let hidden = c_paths(&hidden);
        Ok(Hiding {
            ruleset,
            grants,
            handled,
            hidden,
        })
    }

    /// [`Hiding::restrict`] for a child between `fork` and `exec`, once: a later
    /// `exec` try of the same process takes no second layer — unless a hidden file
    /// opens (a `vfork` child shares the mark with its parent, and a pid comes back).
    /// Allocation-free.
    pub fn restrict_once(&self) -> Result<(), libc::c_int> {
        use std::sync::atomic::Ordering;
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        if TOOK.load(Ordering::Relaxed) == me && !exposed_c(&self.hidden) {
            return Ok(());
        }
        self.restrict()?;
        TOOK.store(me, Ordering::Relaxed);
        Ok(())
    }

    /// Take the layer: for good, for this thread and what it starts. Allocation-free
    /// (it runs between `fork` and `exec`). A program may have closed the ruleset's
    /// descriptor before its `exec` (Python's subprocess closes every one): the
    /// ruleset is then made again from the rules. `no_new_privs` is set by the kernel
    /// layer before the command starts.
    pub fn restrict(&self) -> Result<(), libc::c_int> {
        if restrict_self(self.ruleset.as_raw_fd()).is_ok() {
            return Ok(());
        }
        let again = make_ruleset(self.handled, &self.grants).map_err(|(_, e)| e)?;
        restrict_self(again.as_raw_fd())
    }
}

fn restrict_self(ruleset: libc::c_int) -> Result<(), libc::c_int> {
    // SAFETY: a descriptor number and no flags; the kernel checks it is a ruleset.
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    match r {
        0 => Ok(()),
        _ => Err(crate::sys::errno()),
    }
}

/// A ruleset of `grants`. Allocation-free. Errors: what failed, and its errno.
fn make_ruleset(
    handled: u64,
    grants: &[(CString, u64)],
) -> Result<OwnedFd, (&'static str, libc::c_int)> {
    let attr = RulesetAttr {
        handled_access_fs: handled,
    };
    // SAFETY: a valid attribute of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(("creating a Landlock ruleset", crate::sys::errno()));
    }
    // SAFETY: a new descriptor the kernel just gave us (close-on-exec by Landlock).
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    for (path, rights) in grants {
        // SAFETY: a NUL-terminated path; O_PATH opens nothing for reading.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            )
        };
        if fd < 0 {
            // Gone since it was listed: granting nothing is safe.
            continue;
        }
        // SAFETY: the descriptor just opened.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let attr = PathBeneathAttr {
            allowed_access: *rights,
            parent_fd: fd.as_raw_fd(),
        };
        // SAFETY: a valid rule attribute for RULE_PATH_BENEATH; no flags.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset.as_raw_fd(),
                RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            )
        };
        match (r, crate::sys::errno()) {
            (0, _) => {}
            // A directory listed then, a file now (or the other way round): its
            // rights do not fit; granting it nothing is safe.
            (_, libc::EINVAL) => {}
            (_, e) => return Err(("granting what lies beside the files", e)),
        }
    }
    Ok(ruleset)
}

/// Whether this process can still open one of the hidden files for reading: it
/// holds no layer that hides them (a mark in its environment notwithstanding). Raw
/// system calls (not this library's own hooks); a file that is not there, or is no
/// regular file, proves nothing either way.
pub fn exposed(hidden: &[PathBuf]) -> bool {
    exposed_c(&c_paths(hidden))
}

/// `paths` as C strings (one with a NUL byte names no file, and is left out).
fn c_paths(paths: &[PathBuf]) -> Vec<CString> {
    (paths.iter())
        .filter_map(|p| CString::new(p.as_os_str().as_bytes()).ok())
        .collect()
}

/// [`exposed`], allocation-free.
fn exposed_c(hidden: &[CString]) -> bool {
    hidden.iter().any(|c| {
        let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, c.as_ptr(), flags, 0) };
        if fd < 0 {
            return false;
        }
        // SAFETY: the descriptor just opened, owned here (closed on drop).
        let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        // SAFETY: plain data, filled by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open descriptor and a valid out-parameter.
        let r = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
        r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG
    })
}

/// `p` with the links of its longest existing prefix resolved.
fn resolved(p: &Path) -> PathBuf {
    let mut rest = vec![];
    let mut at = p;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |acc, c| acc.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// Grant `handled` on every entry of `dir` but the hidden paths; recurse into the
/// entries that lead to one. What cannot be listed is granted nothing: safe, as the
/// layer only ever takes away (a directory the policy masks, the user's own
/// `block_read` over an agent's directory, holds nothing a command may read anyway).
fn grant_beside(
    grants: &mut Vec<(CString, u64)>,
    dir: &Path,
    hidden: &[PathBuf],
    handled: u64,
) -> Result<(), String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for e in entries {
        let Ok(e) = e else { continue };
        let p = dir.join(e.file_name());
        if hidden.contains(&p) {
            continue;
        }
        // Links are not followed: their targets are judged where they are.
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_symlink() {
            continue;
        }
        if kind.is_dir() && hidden.iter().any(|h| h.starts_with(&p)) {
            grant_beside(grants, &p, hidden, handled)?;
            continue;
        }
        let rights = match kind.is_dir() {
            true => handled,
            false => handled & FILE_RIGHTS,
        };
        let c = CString::new(p.as_os_str().as_bytes())
            .map_err(|_| format!("{}: a NUL byte in a name", p.display()))?;
        grants.push((c, rights));
    }
    Ok(())
}
