//! Load-time state: the policy snapshot, the variables to put back into every
//! child, and the proxy/DNS/audit endpoints. Built once (at load, or by the first
//! hooked call if another library's constructor calls in first) and never freed.
//!
//! The snapshot is trusted only when it lies inside the state directory, and both
//! are owned by this user (or root) and not writable by group or others. Anything
//! else — missing, unreadable, foreign, corrupt — leaves the library *broken*:
//! every hooked call then fails with `EPERM`, and one line says why.
use crate::decide::Engine;
use std::ffi::{CString, OsStr};
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};

pub use sandpit_policy::vars::{
    AUDIT_VAR, DNS_VAR, LEARN_VAR, PRELOAD_VAR, PROXY_VAR, SNAPSHOT_VAR, STATE_DIR_VAR, TOKEN_VAR,
};
/// The adversary's control socket (see `sandpit_shims::review::SOCKET_VAR`).
pub const ADVERSARY_VAR: &str = sandpit_shims::review::SOCKET_VAR;

pub struct State {
    pub decider: Engine,
    /// `SANDPIT_*=…` entries as this process received them: put back into every
    /// child's environment, replacing whatever the caller passed.
    pub reinject: Vec<CString>,
    /// This library's path as the loader opened it.
    pub lib: Vec<u8>,
    /// The proxy's transparent-redirect listener.
    pub proxy: Option<SocketAddr>,
    /// The per-run token sent in the transparent handshake line.
    pub proxy_token: Option<Vec<u8>>,
    /// sandpit's DNS responder: the only UDP destination allowed.
    pub dns: Option<SocketAddr>,
    /// Where denials are sent (unix datagram socket).
    pub audit: Option<CString>,
}

#[allow(clippy::large_enum_variant)] // one instance, leaked for the process lifetime
enum Loaded {
    Ready(State),
    Broken,
}

static STATE: AtomicPtr<Loaded> = AtomicPtr::new(std::ptr::null_mut());

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0} is not set")]
    Unset(&'static str),
    #[error("{0} must be an absolute path")]
    NotAbsolute(&'static str),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is not owned by this user")]
    Foreign(PathBuf),
    #[error("{0} is writable by group or others")]
    Writable(PathBuf),
    #[error("{0} is not a regular file")]
    NotFile(PathBuf),
    #[error("{snapshot} is not inside the state directory {state_dir}")]
    Outside {
        snapshot: PathBuf,
        state_dir: PathBuf,
    },
    #[error("snapshot {path}: {source}")]
    Corrupt {
        path: PathBuf,
        source: sandpit_policy::Error,
    },
    #[error("{var}: bad address {value:?}")]
    Addr { var: &'static str, value: String },
}

/// The state, or `Err(EPERM)` when the library is broken (already reported).
#[inline]
pub fn get() -> Result<&'static State, libc::c_int> {
    let mut p = STATE.load(Ordering::Acquire);
    if p.is_null() {
        p = init();
    }
    // SAFETY: non-null pointers in STATE come from Box::leak and are never freed.
    match unsafe { &*p } {
        Loaded::Ready(s) => Ok(s),
        Loaded::Broken => Err(libc::EPERM),
    }
}

/// Load once. Safe to race: the loser's value is dropped, the winner's kept.
fn init() -> *mut Loaded {
    let cur = STATE.load(Ordering::Acquire);
    if !cur.is_null() {
        return cur;
    }
    let loaded = crate::guard::with_guard(|| match load() {
        Ok(s) => Loaded::Ready(s),
        Err(e) => {
            crate::report::other(format_args!(
                "sandpit: interposer disabled every guarded call (EPERM): {e}"
            ));
            Loaded::Broken
        }
    });
    let fresh = Box::into_raw(Box::new(loaded));
    match STATE.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => fresh,
        Err(winner) => {
            // SAFETY: `fresh` was never published.
            drop(unsafe { Box::from_raw(fresh) });
            winner
        }
    }
}

extern "C" fn init_ctor() {
    init();
}

#[cfg(not(test))]
#[used]
#[cfg_attr(target_os = "linux", link_section = ".init_array")]
#[cfg_attr(target_os = "macos", link_section = "__DATA,__mod_init_func")]
static INIT: extern "C" fn() = init_ctor;

fn var(name: &'static str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

fn abs_var(name: &'static str) -> Result<PathBuf, LoadError> {
    let v = PathBuf::from(var(name).ok_or(LoadError::Unset(name))?);
    if !v.is_absolute() {
        return Err(LoadError::NotAbsolute(name));
    }
    Ok(v)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Owned by us (or root) and not writable by group/others.
pub fn trusted(path: &Path, md: &std::fs::Metadata) -> Result<(), LoadError> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if md.uid() != me && md.uid() != 0 {
        return Err(LoadError::Foreign(path.to_path_buf()));
    }
    if md.mode() & 0o022 != 0 {
        return Err(LoadError::Writable(path.to_path_buf()));
    }
    Ok(())
}

fn addr(name: &'static str) -> Result<Option<SocketAddr>, LoadError> {
    match var(name) {
        None => Ok(None),
        Some(v) => {
            let s = v.to_string_lossy().into_owned();
            s.parse().map(Some).map_err(|_| LoadError::Addr {
                var: name,
                value: s,
            })
        }
    }
}

fn cpath(name: &'static str) -> Result<Option<CString>, LoadError> {
    match var(name) {
        None => Ok(None),
        Some(v) => {
            if !Path::new(&v).is_absolute() {
                return Err(LoadError::NotAbsolute(name));
            }
            Ok(CString::new(v.as_bytes()).ok())
        }
    }
}

fn load() -> Result<State, LoadError> {
    let snapshot = abs_var(SNAPSHOT_VAR)?;
    let state_dir = abs_var(STATE_DIR_VAR)?;
    let state_dir = std::fs::canonicalize(&state_dir).map_err(io(&state_dir))?;
    let snap = std::fs::canonicalize(&snapshot).map_err(io(&snapshot))?;
    if !snap.starts_with(&state_dir) {
        return Err(LoadError::Outside {
            snapshot: snap,
            state_dir,
        });
    }
    // Every directory from the state dir down to the snapshot must be ours.
    let mut dir = snap.parent();
    while let Some(d) = dir {
        let md = std::fs::metadata(d).map_err(io(d))?;
        trusted(d, &md)?;
        if d == state_dir {
            break;
        }
        dir = d.parent();
    }
    let md = std::fs::metadata(&snap).map_err(io(&snap))?;
    if !md.is_file() {
        return Err(LoadError::NotFile(snap));
    }
    trusted(&snap, &md)?;
    let bytes = std::fs::read(&snap).map_err(io(&snap))?;
    let policy =
        sandpit_policy::Policy::from_snapshot(&bytes).map_err(|source| LoadError::Corrupt {
            path: snap.clone(),
            source,
        })?;
    let mut engine = Engine::new(policy);
    engine.set_learn(var(LEARN_VAR).is_some_and(|v| v == "1"));
    engine.set_adversary_socket(var(ADVERSARY_VAR));
    // The command sandpit started keeps the variables the policy withholds (an agent
    // needs its API key; its children get them stripped): its children must not
    // read them back from /proc/<its pid>/environ.
    // SAFETY: the process's own environment, read before the program runs (or by
    // its first hooked call), like getenv.
    let env = || unsafe { crate::envp::entries(crate::exec::environ()) };
    if env().any(|e| engine.withhold(crate::envp::name_of(e))) {
        crate::sys::hide_environ();
    }
    let declared = Path::new(OsStr::from_bytes(engine.state_dir()));
    if std::fs::canonicalize(declared).ok().as_deref() != Some(state_dir.as_path()) {
        return Err(LoadError::Outside {
            snapshot: snap,
            state_dir: declared.to_path_buf(),
        });
    }
    let reinject = env()
        .filter(|e| e.starts_with(b"SANDPIT_") && e.contains(&b'='))
        .filter_map(|e| CString::new(e).ok())
        .collect();
    Ok(State {
        decider: engine,
        reinject,
        lib: own_path(),
        proxy: addr(PROXY_VAR)?,
        proxy_token: var(TOKEN_VAR).map(|v| v.as_bytes().to_vec()),
        dns: addr(DNS_VAR)?,
        audit: cpath(AUDIT_VAR)?,
    })
}

/// The path the loader opened this library from.
fn own_path() -> Vec<u8> {
    // SAFETY: dladdr only reads; `info` is a valid out-parameter.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(init_ctor as *const libc::c_void, &mut info) != 0
            && !info.dli_fname.is_null()
        {
            return std::ffi::CStr::from_ptr(info.dli_fname).to_bytes().to_vec();
        }
    }
    Vec::new()
}

/// The state if it is already loaded and usable; never triggers loading.
pub fn peek() -> Option<&'static State> {
    let p = STATE.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null pointers in STATE come from Box::leak and are never freed.
    match unsafe { &*p } {
        Loaded::Ready(s) => Some(s),
        Loaded::Broken => None,
    }
}
