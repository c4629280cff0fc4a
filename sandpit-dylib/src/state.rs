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
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};

pub use sandpit_policy::vars::{
    AGENT_PID_VAR, AUDIT_VAR, DNS_VAR, HIDDEN_VAR, PRELOAD_VAR, PROXY_VAR, SNAPSHOT_VAR,
    STATE_DIR_VAR, TOKEN_VAR,
};
/// The adversary's control socket (see `sandpit_review::SOCKET_VAR`).
pub const ADVERSARY_VAR: &str = sandpit_review::SOCKET_VAR;

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
    /// The process this library was loaded into (at its exec): an exec from the
    /// same process is one in place, from any other a child's (after fork/vfork).
    pub pid: libc::pid_t,
    /// `files.agent_read` in this process.
    pub hide: Hide,
}

/// Where this process stands with the agent's own files (`files.agent_read`).
pub enum Hide {
    /// None are named, or this system cannot tell the agent from what it spawns.
    Off,
    /// This process is the agent; the layer for the programs it starts by `fork` and
    /// `exec`, taken between the two.
    #[cfg(target_os = "linux")]
    Agent(crate::hide::Hiding),
    /// A command the agent spawned: the kernel hides them from it already.
    #[cfg(target_os = "linux")]
    Spawned,
}

impl Hide {
    /// Whether this process is the agent and hides the files from what it starts.
    pub fn is_agent(&self) -> bool {
        match self {
            #[cfg(target_os = "linux")]
            Hide::Agent(_) => true,
            _ => false,
        }
    }
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
    #[error("could not hide the agent's own files (files.agent_read) from this command: {0}")]
    Hide(String),
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

/// Open `name` below the directory `dir` without following a link in it.
fn open_below(
    dir: &std::fs::File,
    name: &OsStr,
    flags: libc::c_int,
) -> std::io::Result<std::fs::File> {
    let c = CString::new(name.as_bytes())?;
    // SAFETY: `dir` is an open descriptor and `c` is NUL-terminated.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened, owned by nobody else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// The snapshot's bytes, and the state directory's metadata. The snapshot must lie
/// inside the state directory, and every directory from there down to it, and the
/// file itself, must be ours (or root's) and not writable by group or others. The
/// walk goes by descriptor, one component at a time without following links, so
/// what is checked is what is read; the two paths are resolved (`realpath`) only
/// when one is not spelt below the other.
fn read_snapshot(
    state_dir: &Path,
    snapshot: &Path,
) -> Result<(Vec<u8>, std::fs::Metadata), LoadError> {
    use std::path::Component;
    let below = |dir: &Path, p: &Path| -> Option<Vec<std::ffi::OsString>> {
        let rel = p.strip_prefix(dir).ok()?;
        rel.components()
            .map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .filter(|names| !names.is_empty())
    };
    let (dir, names) = match below(state_dir, snapshot) {
        Some(names) => (state_dir.to_path_buf(), names),
        None => {
            let dir = std::fs::canonicalize(state_dir).map_err(io(state_dir))?;
            let snap = std::fs::canonicalize(snapshot).map_err(io(snapshot))?;
            match below(&dir, &snap) {
                Some(names) => (dir, names),
                None => {
                    return Err(LoadError::Outside {
                        snapshot: snap,
                        state_dir: dir,
                    })
                }
            }
        }
    };
    // A directory is opened only to look below it and to be checked.
    #[cfg(target_os = "linux")]
    const DIR: libc::c_int = libc::O_PATH | libc::O_DIRECTORY;
    #[cfg(not(target_os = "linux"))]
    const DIR: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY;
    let mut at = dir;
    let mut d = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(DIR | libc::O_CLOEXEC)
        .open(&at)
        .map_err(io(&at))?;
    let top = d.metadata().map_err(io(&at))?;
    trusted(&at, &top)?;
    let Some((file, dirs)) = names.split_last() else {
        return Err(LoadError::NotFile(at));
    };
    for name in dirs {
        at.push(name);
        d = open_below(&d, name, DIR).map_err(io(&at))?;
        trusted(&at, &d.metadata().map_err(io(&at))?)?;
    }
    at.push(file);
    // Non-blocking: a FIFO put in its place must fail the check below, not hang.
    let mut f = open_below(&d, file, libc::O_RDONLY | libc::O_NONBLOCK).map_err(io(&at))?;
    let md = f.metadata().map_err(io(&at))?;
    if !md.is_file() {
        return Err(LoadError::NotFile(at));
    }
    trusted(&at, &md)?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(md.len() as usize)
        .map_err(|e| io(&at)(std::io::Error::other(e)))?;
    // Through `take`: `File::read_to_end` would ask for the size once more.
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut f, u64::MAX), &mut bytes)
        .map_err(io(&at))?;
    Ok((bytes, top))
}

fn load() -> Result<State, LoadError> {
    let snapshot = abs_var(SNAPSHOT_VAR)?;
    let state_dir = abs_var(STATE_DIR_VAR)?;
    let (bytes, state_md) = read_snapshot(&state_dir, &snapshot)?;
    let policy =
        sandpit_policy::Policy::from_snapshot(&bytes).map_err(|source| LoadError::Corrupt {
            path: snapshot.clone(),
            source,
        })?;
    let mut engine = Engine::new(policy);
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
    // The policy's own state directory is the one checked above.
    let declared = Path::new(OsStr::from_bytes(engine.state_dir()));
    let same = |md: std::fs::Metadata| md.dev() == state_md.dev() && md.ino() == state_md.ino();
    if !std::fs::metadata(declared).is_ok_and(same) {
        return Err(LoadError::Outside {
            snapshot,
            state_dir: declared.to_path_buf(),
        });
    }
    let mut reinject: Vec<CString> = env()
        .filter(|e| e.starts_with(b"SANDPIT_") && e.contains(&b'='))
        .filter_map(|e| CString::new(e).ok())
        .collect();
    let hide = hide_agent_files(&mut engine, &mut reinject)?;
    Ok(State {
        decider: engine,
        reinject,
        lib: own_path(),
        proxy: addr(PROXY_VAR)?,
        proxy_token: var(TOKEN_VAR).map(|v| v.as_bytes().to_vec()),
        dns: addr(DNS_VAR)?,
        audit: cpath(AUDIT_VAR)?,
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() },
        hide,
    })
}

/// Tell the agent from a command it spawned, and hide `files.agent_read` from the
/// latter in the kernel (see `crate::hide`). The agent is the command sandpit started
/// (`SANDPIT_AGENT_PID`, whatever it execs in place) or a program of
/// `env.agent_programs`; every other process is one it spawned. Fails closed: a
/// spawned command that cannot take the layer does not run.
#[cfg(target_os = "linux")]
fn hide_agent_files(engine: &mut Engine, reinject: &mut Vec<CString>) -> Result<Hide, LoadError> {
    let Some(agent_pid) = var(AGENT_PID_VAR) else {
        return Ok(Hide::Off);
    };
    let hidden: Vec<PathBuf> = (engine.policy().files.agent_read.iter())
        .map(|r| r.value.clone())
        .collect();
    if hidden.is_empty() {
        return Ok(Hide::Off);
    }
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let started = agent_pid.as_bytes() == me.to_string().as_bytes();
    let is_agent = |engine: &Engine| {
        let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
        started || engine.agent_program(exe.as_os_str().as_bytes())
    };
    if !crate::hide::available() {
        // No Landlock (a degraded run): this library's own refusals alone, for the
        // dynamic programs it loads into; the run's layers line says so.
        if !is_agent(engine) {
            engine.set_spawned();
        }
        return Ok(Hide::Off);
    }
    // The mark is taken at its word only where the kernel agrees: a process that
    // can still open a hidden file takes the layer, mark or not.
    let marked = !started && var(HIDDEN_VAR).is_some() && !crate::hide::exposed(&hidden);
    if marked {
        // An agent program started below a command the agent spawned is held too.
        engine.set_spawned();
        return Ok(Hide::Spawned);
    }
    if is_agent(engine) {
        // The mark says "hidden already": never the agent's to pass on (whoever
        // set it in sandpit's own environment).
        let mark = format!("{HIDDEN_VAR}=");
        reinject.retain(|e| !e.as_bytes().starts_with(mark.as_bytes()));
        // SAFETY: at load, before the program's own code runs.
        unsafe { libc::unsetenv(c"SANDPIT_AGENT_FILES_HIDDEN".as_ptr()) };
        let layer = crate::hide::Hiding::new(&hidden).map_err(LoadError::Hide)?;
        return Ok(Hide::Agent(layer));
    }
    engine.set_spawned();
    let taken = crate::hide::Hiding::new(&hidden).and_then(|l| {
        l.restrict()
            .map_err(|e| std::io::Error::from_raw_os_error(e).to_string())
    });
    if let Err(e) = taken {
        // Not a broken library that answers EPERM: a program could still read with
        // its own system calls. It does not run.
        crate::report::other(format_args!("sandpit: {}", LoadError::Hide(e)));
        // SAFETY: ends the process at once, as exec failing would.
        unsafe { libc::_exit(126) }
    }
    let marker = crate::envp::HIDDEN_MARK.to_owned();
    // SAFETY: at load, before the program's own code runs: no other thread reads the
    // environment yet. The string stays where it is for good (it moves into
    // `reinject`, which is never freed). Programs that copy `environ` for their
    // children (not through this library) pass the mark on too.
    unsafe { libc::putenv(marker.as_ptr().cast_mut()) };
    reinject.push(marker);
    Ok(Hide::Spawned)
}

#[cfg(not(target_os = "linux"))]
fn hide_agent_files(_: &mut Engine, _: &mut Vec<CString>) -> Result<Hide, LoadError> {
    Ok(Hide::Off)
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
