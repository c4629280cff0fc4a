//! Process model of `sandpit run` on Linux.
//!
//! ```text
//! launcher ──fork──▶ C1: unshare(user,mount,pid,net,ipc,uts), uid/gid maps; makes
//!  (relay, signals;       C2 as the launcher's child (CLONE_PARENT), leaves once
//!   waits for C2 and      the guard has joined
//!   the guard)             └─clone─▶ C2 = pid 1: mounts, loopback, bridge listener,
//!   │                                pivot_root; init: reaps, forwards signals
//!   │                                  └─fork─▶ C3: setsid, caps dropped,
//!   │                                           no_new_privs, Landlock, seccomp,
//!   │                                           waits for the guard to watch, exec
//!   └──fork──▶ guard (in the host's pid namespace; joins C1's user and mount
//!              namespaces once C2 has built the mounts): puts back masks and binds
//!              the host takes away
//! ```
//! Setup errors travel to the launcher over a close-on-exec SEQPACKET socket; EOF
//! on it means the command was exec'd. When the command exits, pid 1 exits with its
//! status and the kernel kills everything left in the pid namespace (setsid'd and
//! double-forked daemons included); the launcher, its parent, learns it at once. If
//! the guard stops first, the launcher kills pid 1 and the run ends with 125. In
//! fallback mode (no user namespaces) C1 execs the command itself and the launcher,
//! a child subreaper, kills every descendant.
//!
//! The launcher must still be single-threaded when `run` forks (children run Rust
//! code before exec); threads (the bridge relay, a proxy runtime) start after fork.
use std::ffi::{CString, OsString};
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sandpit_policy::vars::{AGENT_PID_VAR, HIDDEN_VAR};

use super::plan::{Mode, NetPlan, Plan};
use super::spare::Spares;
use super::sys::{self, Exit, Fork, SigSet};
use super::{bridge, guard, landlock, loopback, namespaces, notify, seccomp, tmpfs, udp};

/// Signals the launcher and the inits pass on to the command.
const FORWARD: [libc::c_int; 7] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

/// Block the signals the launcher forwards, before it starts any thread: threads
/// inherit the mask, so a SIGTERM can only reach the thread that forwards it (a
/// helper thread with it unblocked would take the default action and kill the
/// launcher without passing it on).
pub fn block_forwarded_signals() -> std::io::Result<()> {
    SigSet::of(&all_signals()).block()
}

fn all_signals() -> Vec<libc::c_int> {
    let mut v = FORWARD.to_vec();
    v.push(libc::SIGCHLD);
    v
}

/// Which layer a setup failure belongs to (decides which flag could accept it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    UserNamespace,
    Mounts,
    Network,
    Landlock,
    Seccomp,
    Process,
}

impl Layer {
    fn tag(self) -> u8 {
        match self {
            Layer::UserNamespace => b'U',
            Layer::Mounts => b'M',
            Layer::Network => b'N',
            Layer::Landlock => b'L',
            Layer::Seccomp => b'S',
            Layer::Process => b'P',
        }
    }
    fn from_tag(t: u8) -> Layer {
        match t {
            b'U' => Layer::UserNamespace,
            b'M' => Layer::Mounts,
            b'N' => Layer::Network,
            b'L' => Layer::Landlock,
            b'S' => Layer::Seccomp,
            _ => Layer::Process,
        }
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layer::UserNamespace => "user namespaces",
            Layer::Mounts => "mount namespace",
            Layer::Network => "network namespace",
            Layer::Landlock => "Landlock",
            Layer::Seccomp => "seccomp",
            Layer::Process => "process setup",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("{layer} could not be set up: {message}")]
    Layer { layer: Layer, message: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> SpawnError {
    let what = what.into();
    move |source| SpawnError::Io { what, source }
}

/// Options that are not part of the pure plan: what the kernel offered.
#[derive(Debug)]
pub struct Layers {
    /// Landlock ABI to use; `None` only when the user accepted running without it.
    pub landlock_abi: Option<u32>,
    /// The placeholder lock of each writable root ([`lock_placeholders`]), held
    /// shared since before the plan looked at the filesystem: placeholders lie in the
    /// workspace and in agents' state directories in the home (`~/.codex`), which
    /// runs in different workspaces share.
    pub placeholder_locks: Vec<(PathBuf, std::fs::File)>,
    /// sandpit's state directory, where placeholders are made ahead of time and put
    /// away to be removed later (`spare.rs`); `None` makes and removes each one.
    pub spare_state: Option<PathBuf>,
    /// What the mount guard names what it moves aside after (`plan::quarantine_path`):
    /// the run's id and a secret of the launcher's, so that the sandbox cannot take
    /// the name first. Never in the command's environment.
    pub quarantine_tag: String,
    /// Told about each connection relayed to a loopback service (the audit log).
    pub loopback_observer: Option<loopback::Observer>,
    /// Decides the UDP relay's flows (`NetPlan::Bridge { udp: true }`); `None`
    /// refuses every destination.
    pub udp_judge: Option<udp::Judge>,
    /// Fallback mode: the bridge's listener on this machine's loopback, bound by the
    /// caller (at the plan's port); `None` binds 127.0.0.1:<plan port> here.
    pub bridge_listener: Option<TcpListener>,
    /// The caller serves the proxy on the bridge's listener itself (sandpit's own
    /// proxy): the spawn hands it over ([`Running::take_bridge`]) instead of relaying
    /// each connection to the proxy's unix socket — one relay and two loopback hops
    /// less per connection.
    pub serve_bridge: bool,
    /// sandpit's own tending process ([`super::start_tender`]): no process of the
    /// command's, so never killed with them.
    pub tender: Option<libc::pid_t>,
    /// The user's terminal, shared with questions about blocked hosts
    /// (`network.ask_on_blocked_host`): attached when the command gets a relayed pty.
    pub console: Option<Arc<crate::console::Console>>,
    /// Told about each path the command's calls use, where `Plan::report_refusals`
    /// asks for it (the audit log's kernel refusals).
    pub refusal_observer: Option<notify::Observer>,
    /// `limits.launcher_cpu`: the refusal reports' thread paces itself on it.
    pub launcher_cpu: Option<Arc<crate::cpu::Share>>,
    /// `limits.tmp_bytes`, for the end's line when a private tmpfs was full
    /// (`None`: no line).
    pub tmp_limit: Option<tmpfs::Limit>,
}

/// Everything the children need, converted before fork.
struct Prepared {
    argv: Vec<CString>,
    envp: Vec<CString>,
    /// The pty slave the command gets as its controlling terminal (when sandpit
    /// runs on a terminal), and whether stderr goes to it too.
    pty_slave: Option<RawFd>,
    pty_stderr: bool,
}

fn prepare(plan: &Plan, argv: &[OsString]) -> Result<Prepared, SpawnError> {
    let cs = |s: &[u8]| {
        CString::new(s).map_err(|_| SpawnError::Io {
            what: format!("{:?} contains a NUL byte", String::from_utf8_lossy(s)),
            source: io::Error::from(io::ErrorKind::InvalidInput),
        })
    };
    let argv = argv
        .iter()
        .map(|a| cs(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    if argv.is_empty() {
        return Err(SpawnError::Io {
            what: "no command given".into(),
            source: io::Error::from(io::ErrorKind::InvalidInput),
        });
    }
    let overridden: Vec<&str> = plan.env.iter().map(|(k, _)| k.as_str()).collect();
    let mut envp = vec![];
    for (k, v) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| {
            overridden.contains(&k)
                || plan.env_withheld.iter().any(|w| w == k)
                || [AGENT_PID_VAR, HIDDEN_VAR].contains(&k)
        }) {
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        envp.push(cs(&kv)?);
    }
    for (k, v) in &plan.env {
        envp.push(cs(format!("{k}={v}").as_bytes())?);
    }
    Ok(Prepared {
        argv,
        envp,
        pty_slave: None,
        pty_stderr: false,
    })
}

/// Send a setup failure to the launcher and exit.
fn fail(ctl: &OwnedFd, layer: Layer, msg: &str) -> ! {
    let mut m = vec![b'E', layer.tag()];
    m.extend_from_slice(msg.as_bytes());
    // SAFETY-free: plain send on our own socket; nothing to do if it fails.
    let _ = send(ctl, &m);
    sys::exit_now(125)
}

fn send(ctl: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut s = std::os::unix::net::UnixStream::from(ctl.try_clone()?);
    let r = s.write_all(msg);
    // Give the descriptor back without closing the original.
    drop(s);
    r
}

/// Run `argv` under `plan`; returns the command's exit status (shell convention).
pub fn run(plan: &Plan, argv: &[OsString], layers: &Layers) -> Result<i32, SpawnError> {
    spawn(plan, argv, layers)?.wait()
}

/// A sandboxed command that has been exec'd (every layer applied).
pub struct Running {
    /// What the launcher waits for: pid 1 of the sandbox (C2), or in fallback mode
    /// C1, which execs the command itself.
    child: libc::pid_t,
    /// The mount guard, when the plan has anything to guard.
    guard: Option<libc::pid_t>,
    /// The helper that made the network namespace, when it had no guarding to do:
    /// reaped at the end.
    net_helper: Option<libc::pid_t>,
    ns: bool,
    sigs: SigSet,
    master: Option<OwnedFd>,
    relay: Option<Relay>,
    created: Vec<PathBuf>,
    locks: Vec<(PathBuf, std::fs::File)>,
    spares: Spares,
    bridge: Option<TcpListener>,
    tender: Option<libc::pid_t>,
    /// The run's memory cgroup (`limits.memory`), removed once the sandbox is gone.
    cgroup: Option<super::memory::RunCgroup>,
    /// The private tmpfs mounts of `limits.tmp_bytes`, held open to see at the end
    /// whether one was full.
    tmpfs: tmpfs::Watch,
    tmp_limit: Option<tmpfs::Limit>,
}

impl Running {
    /// The bridge's listener, when `Layers::serve_bridge` asked for it: connections
    /// from inside the sandbox to the proxy port arrive there.
    pub fn take_bridge(&mut self) -> Option<TcpListener> {
        self.bridge.take()
    }

    /// The run's first process, as the launcher sees it: pid 1 of the sandbox, or in
    /// fallback mode the command's process. Every process of the run descends from it.
    pub fn pid(&self) -> u32 {
        self.child as u32
    }

    /// Forward signals until the command exits, kill what is left, remove the
    /// placeholders; returns the command's status (shell convention).
    pub fn wait(mut self) -> Result<i32, SpawnError> {
        let status = forward_until_exit(
            &self.sigs,
            self.child,
            self.master.as_ref().map(|m| m.as_raw_fd()),
            &mut self.guard,
        );
        crate::timing::mark("init reaped");
        // The guard goes before the placeholders: it would make them again.
        stop(self.guard);
        stop(self.net_helper);
        if !self.ns {
            kill_descendants(self.tender);
        }
        if let Some(r) = self.relay {
            r.finish();
        }
        finish_placeholders(
            std::mem::take(&mut self.locks),
            std::mem::take(&mut self.created),
            &mut self.spares,
        );
        crate::timing::mark("placeholders removed");
        if let Some(cg) = self.cgroup.take() {
            let kills = cg.oom_kills();
            if kills > 0 {
                eprintln!(
                    "sandpit: the run reached limits.memory: the kernel ended {kills} of its \
                     processes; raise it under [limits] in ~/.sandpit/config.toml (0: no limit) \
                     if the command needs more"
                );
            }
        }
        if let Some(l) = &self.tmp_limit {
            if let Some(line) = tmpfs::full_line(&self.tmpfs.full(), &l.scratch, &l.origin) {
                eprintln!("{line}");
            }
        }
        status.map_err(io_err("waiting for the sandboxed command"))
    }
}

/// The lock among `locks` that covers `p`: its innermost root's.
fn lock_of<'a>(locks: &'a [(PathBuf, std::fs::File)], p: &Path) -> Option<&'a std::fs::File> {
    locks
        .iter()
        .filter(|(root, _)| p.starts_with(root))
        .max_by_key(|(root, _)| root.as_os_str().len())
        .map(|(_, f)| f)
}

/// For each writable root, the last run using it to end removes every placeholder
/// any run created there (listed in the root's lock file, one path a line; this
/// run's own are listed too, unless the list could not be read); while another run
/// uses the root they stay.
fn finish_placeholders(
    locks: Vec<(PathBuf, std::fs::File)>,
    created: Vec<PathBuf>,
    spares: &mut Spares,
) {
    use std::io::{Read, Seek};
    use std::os::unix::ffi::OsStringExt;
    // What no lock covers (a placeholder in the run's own scratch) is this run's alone.
    let unlocked: Vec<PathBuf> = created
        .iter()
        .filter(|c| lock_of(&locks, c).is_none())
        .cloned()
        .collect();
    cleanup(&unlocked, spares);
    for (_, f) in &locks {
        let mut f = f;
        if sys::flock(f.as_fd(), true, true).is_err() {
            continue; // another run uses this root: leave the (empty) placeholders
        }
        let mut listed = vec![];
        let mut dirs: Vec<PathBuf> = vec![];
        if f.rewind().is_ok() && f.read_to_end(&mut listed).is_ok() {
            dirs = listed
                .split(|&b| b == b'\n')
                .filter(|l| l.first() == Some(&b'/'))
                .map(|l| PathBuf::from(OsString::from_vec(l.to_vec())))
                .collect();
        }
        for c in &created {
            let mine = lock_of(&locks, c).is_some_and(|l| l.as_raw_fd() == f.as_raw_fd());
            if mine && !dirs.contains(c) {
                dirs.push(c.clone());
            }
        }
        cleanup(&dirs, spares);
        let _ = f.set_len(0);
    }
}

/// Note the placeholders this run created in their roots' lock files.
fn record_placeholders(locks: &[(PathBuf, std::fs::File)], created: &[PathBuf]) {
    use std::io::Write;
    for (_, f) in locks {
        let mut lines = vec![];
        for p in created {
            let mine = lock_of(locks, p).is_some_and(|l| l.as_raw_fd() == f.as_raw_fd());
            let b = p.as_os_str().as_bytes();
            if mine && !b.contains(&b'\n') {
                lines.extend_from_slice(b);
                lines.push(b'\n');
            }
        }
        if !lines.is_empty() {
            // One append (O_APPEND): concurrent runs' lines do not interleave.
            let mut f = f;
            let _ = f.write_all(&lines);
        }
    }
}

/// The placeholder lock whose lock file is `path`, held shared. Every run in
/// namespace mode holds it from before its plan looks at the workspace until it ends,
/// not only one that creates placeholders: a run that finds another run's
/// placeholders relies on them as its own mountpoints. Placeholders are removed only
/// by a run that can take it exclusively (no other run could be relying on them:
/// deleting a mountpoint would unmount it in that run), and until they are gone a
/// run that starts waits here (its plan would otherwise count on them).
pub fn lock_placeholders(path: &Path) -> io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    sys::flock(f.as_fd(), false, false)?;
    Ok(f)
}

/// Fork the sandboxed command and wait until it has been exec'd with every layer
/// applied (or report the layer that failed). The caller must be single-threaded
/// here; it may start threads (a proxy runtime) once this returns, then `wait`.
pub fn spawn(plan: &Plan, argv: &[OsString], layers: &Layers) -> Result<Running, SpawnError> {
    let mut prep = prepare(plan, argv)?;
    let mut locks = vec![];
    if plan.mode == Mode::Namespaces {
        for (root, f) in &layers.placeholder_locks {
            let f = f
                .try_clone()
                .map_err(io_err("holding the placeholder lock"))?;
            locks.push((root.clone(), f));
        }
    }
    let mut created: Vec<PathBuf> = vec![];
    let mut spares = Spares::new(layers.spare_state.clone());
    for ph in &plan.placeholders {
        let made = if ph.file {
            spares.make_file(&ph.path)
        } else {
            spares.make(&ph.path)
        };
        match made {
            Ok(()) => created.push(ph.path.clone()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                cleanup(&created, &mut spares);
                return Err(io_err(format!(
                    "creating placeholder for protected path {:?}",
                    ph.path
                ))(e));
            }
        }
    }
    record_placeholders(&locks, &created);
    match start(plan, &mut prep, layers) {
        Ok(mut r) => {
            r.created = created;
            r.locks = locks;
            r.spares = spares;
            Ok(r)
        }
        Err(e) => {
            finish_placeholders(locks, created, &mut spares);
            Err(e)
        }
    }
}

/// Remove the placeholders the run created (only those still empty).
fn cleanup(created: &[PathBuf], spares: &mut Spares) {
    for p in created.iter().rev() {
        spares.release(p);
    }
}

fn start(plan: &Plan, prep: &mut Prepared, layers: &Layers) -> Result<Running, SpawnError> {
    // On a terminal the command gets a pty of its own (controlling terminal, job
    // control, /dev/tty) relayed by the launcher; TIOCSTI into it reaches only itself.
    let pty = if sys::isatty(0) && sys::isatty(1) {
        let (master, slave) = sys::open_pty().map_err(io_err("allocating a pty"))?;
        let _ = sys::copy_winsize(0, master.as_raw_fd());
        if let Ok(t) = sys::get_termios(0) {
            let _ = sys::set_termios(slave.as_raw_fd(), &t);
        }
        prep.pty_slave = Some(slave.as_raw_fd());
        prep.pty_stderr = sys::isatty(2);
        Some((master, slave))
    } else {
        None
    };
    let prep: &Prepared = prep;
    let sigs = SigSet::of(&all_signals());
    sigs.block().map_err(io_err("blocking signals"))?;
    let (ctl_parent, ctl_child) = sys::seqpacket_pair().map_err(io_err("socketpair"))?;
    let ns = plan.mode == Mode::Namespaces;
    // Fallback: the bridge listens on the host, bound before the fork.
    let mut listener: Option<TcpListener> = None;
    if !ns {
        sys::set_child_subreaper().map_err(io_err("PR_SET_CHILD_SUBREAPER"))?;
        if let NetPlan::Bridge { port, .. } = &plan.net {
            listener = Some(match &layers.bridge_listener {
                Some(l) => l
                    .try_clone()
                    .map_err(io_err("the proxy bridge's listener"))?,
                None => crate::sys::tcp_listener(("127.0.0.1", *port))
                    .map_err(io_err(format!("binding proxy bridge on 127.0.0.1:{port}")))?,
            });
        }
    }
    let launcher = sys::getpid();
    // Namespace mode: the launcher clones pid 1 of the sandbox straight into new user,
    // mount, pid, IPC and UTS namespaces and writes its uid/gid maps; pid 1 waits for
    // them (`mapped`), then builds the mount tree. A helper process, forked next and
    // kept in the host's pid namespace (out of the command's sight, and out of the
    // namespace's teardown), joins the sandbox's user namespace through descriptors
    // the launcher opened, makes the network namespace (~0.4 ms, while pid 1 builds
    // the tree) and hands it to pid 1; then, as the mount guard, it waits for pid 1 to
    // say the tree is built (`built`), joins the mount namespace, watches, and says so
    // (`ready`: the command's process execs only then).
    // Fallback mode: C1, forked, is the command's process.
    let guarded = if ns {
        guard::guarded(
            &plan.mounts,
            &plan.unmasked_missing,
            &plan.absent_git_files,
            &|p| p.exists(),
        )
    } else {
        vec![]
    };
    let net = ns;
    let mut pipes = if guarded.is_empty() {
        None
    } else {
        let (built_r, built_w) = sys::pipe().map_err(io_err("pipe"))?;
        let (ready_r, ready_w) = sys::pipe().map_err(io_err("pipe"))?;
        Some(((built_r, ready_w), (built_w, ready_r)))
    };
    let (mut net_helper, mut net_init) = match net {
        true => {
            let (h, i) = sys::seqpacket_pair().map_err(io_err("socketpair"))?;
            (Some(h), Some(i))
        }
        false => (None, None),
    };
    // Pid 1 waits on `mapped` for its maps, then checks through a pidfd that the
    // launcher still lives (its parent-death signal, set first, covers the rest).
    let (mapped_r, mapped_w) = match ns {
        true => {
            let (r, w) = sys::pipe().map_err(io_err("pipe"))?;
            let alive = sys::pidfd_self().map_err(io_err("pidfd_open"))?;
            (Some((r, alive)), Some(w))
        }
        false => (None, None),
    };
    // limits.memory in a cgroup of the run's own: made before the clone (the
    // launcher moves into a leaf of its cgroup), pid 1 put in it before it runs.
    let cgroup = match &plan.memory {
        Some(super::memory::Memory::Cgroup { own, bytes }) if ns => Some(
            super::memory::RunCgroup::create(own, *bytes).map_err(|e| SpawnError::Layer {
                layer: Layer::Process,
                message: format!("the run's memory cgroup (limits.memory): {e}"),
            })?,
        ),
        _ => None,
    };
    let forked = if ns {
        sys::clone_into_namespaces()
    } else {
        sys::fork()
    };
    let first = match forked {
        Ok(Fork::Child) => {
            drop(ctl_parent);
            drop(listener);
            drop(mapped_w);
            drop(net_helper.take());
            let ends = pipes.take().map(|(g, i)| {
                drop(g);
                i
            });
            // A panic must never unwind back into the launcher's code in this copy.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match mapped_r {
                Some(mapped) => {
                    child_init(plan, prep, layers, ctl_child, mapped, ends, net_init.take())
                }
                None => child_c1(plan, prep, layers, ctl_child, launcher),
            }));
            sys::exit_now(125)
        }
        Ok(Fork::Parent(pid)) => pid,
        // What a kernel without (unprivileged) user namespaces answers; anything else
        // (no memory, no process left) is no reason to accept a weaker mode.
        Err(e)
            if ns
                && matches!(
                    e.raw_os_error(),
                    Some(libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EUSERS)
                ) =>
        {
            return Err(SpawnError::Layer {
                layer: Layer::UserNamespace,
                message: format!("creating the namespaces (clone): {e}"),
            })
        }
        Err(e) => return Err(io_err("fork")(e)),
    };
    // Pid 1 out of the terminal's foreground group: a Ctrl-C reaches the launcher
    // only, which forwards it once (set on both sides of the fork, so no Ctrl-C can
    // fall in between). In fallback mode the command stays in it.
    if ns {
        let _ = sys::setpgid(first, first);
    }
    drop(mapped_r);
    drop(net_init.take());
    let helper_ns = match mapped_w {
        None => None,
        Some(mapped) => {
            // Opened while pid 1 waits for its maps (once it has them it makes
            // itself undumpable, and its /proc entries are closed to this user).
            if let Some(Err(e)) = cgroup.as_ref().map(|cg| cg.add(first)) {
                let _ = sys::kill(first, libc::SIGKILL);
                let _ = sys::wait(first, false);
                return Err(SpawnError::Layer {
                    layer: Layer::Process,
                    message: format!(
                        "putting the sandbox in its memory cgroup (limits.memory): {e}"
                    ),
                });
            }
            let ns = sys::open_namespaces(first).and_then(|ns| {
                namespaces::map_ids(first, sys::getuid(), sys::getgid())?;
                std::io::Write::write_all(&mut std::fs::File::from(mapped), b"M")?;
                Ok(ns)
            });
            match ns {
                Ok(ns) => Some(ns),
                Err(e) => {
                    let _ = sys::kill(first, libc::SIGKILL);
                    let _ = sys::wait(first, false);
                    return Err(SpawnError::Layer {
                        layer: Layer::UserNamespace,
                        message: format!("mapping the sandbox's uid and gid: {e}"),
                    });
                }
            }
        }
    };
    crate::timing::mark("init cloned, ids mapped");
    // A failure from here on is reported once the sandbox's setup has ended (without
    // its guard, the command's process stops before exec).
    let mut setup_error: Option<(Layer, String)> = None;
    let mut helper_ends = pipes.take().map(|(g, i)| {
        drop(i);
        g
    });
    let guarding = helper_ends.is_some();
    let helper = match helper_ns {
        Some(ns) if net_helper.is_some() || guarding => match sys::fork() {
            Err(e) => {
                setup_error = Some((Layer::Process, format!("fork: {e}")));
                None
            }
            Ok(Fork::Child) => {
                drop(ctl_parent);
                drop(listener);
                drop(pty);
                let job = Helper {
                    ns,
                    net: net_helper.take(),
                    tun: matches!(plan.net, NetPlan::Bridge { udp: true, .. }),
                    ctl: ctl_child,
                    guard: helper_ends.take().map(|ends| (guarded, ends)),
                };
                // As in pid 1: a panic must never unwind back into the launcher's
                // code in this copy (its drops would remove the run's files).
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    helper_process(job, &layers.quarantine_tag, launcher)
                }));
                sys::exit_now(125)
            }
            Ok(Fork::Parent(pid)) => {
                let _ = sys::setpgid(pid, pid);
                crate::timing::mark("helper forked");
                Some(pid)
            }
        },
        _ => None,
    };
    // The guard's ends of its pipes are the guard's alone: the command's process learns
    // from end-of-file that the guard did not start.
    drop(helper_ends);
    drop(net_helper);
    drop(ctl_child);
    // The helper as the mount guard: its end ends the run. A helper with no guarding
    // to do leaves once pid 1 has its network namespace.
    let (guard, net_helper) = match guarding {
        true => (helper, None),
        false => (None, helper),
    };
    let master = pty.map(|(m, s)| {
        drop(s);
        m
    });

    // Setup phase: messages until EOF (exec done) or an error report.
    let mut dns: Option<std::net::UdpSocket> = None;
    let mut tun: Option<OwnedFd> = None;
    let mut services: Vec<TcpListener> = vec![];
    let mut factory: Option<OwnedFd> = None;
    let mut tmpfs_mounts: Vec<(PathBuf, OwnedFd)> = vec![];
    let mut exec_error: Option<String> = None;
    let mut buf = vec![0u8; 4096];
    loop {
        let (n, fd) = match sys::recv_msg(ctl_parent.as_fd(), &mut buf) {
            Ok(x) => x,
            Err(e) => {
                stop(guard);
                stop(net_helper);
                let _ = sys::kill(first, libc::SIGKILL);
                let _ = sys::wait(first, false);
                return Err(io_err("reading sandbox setup status")(e));
            }
        };
        if n == 0 && fd.is_none() {
            break;
        }
        match (buf.first(), fd) {
            (Some(b'B'), Some(fd)) => listener = Some(TcpListener::from(fd)),
            (Some(b'D'), Some(fd)) => dns = Some(std::net::UdpSocket::from(fd)),
            (Some(b'T'), Some(fd)) => tun = Some(fd),
            (Some(b'L'), Some(fd)) => services.push(TcpListener::from(fd)),
            (Some(b'F'), Some(fd)) => factory = Some(fd),
            (Some(b'M'), Some(fd)) => tmpfs_mounts.push((
                PathBuf::from(std::ffi::OsStr::from_bytes(&buf[1..n])),
                fd,
            )),
            (Some(b'E'), _) if n >= 2 && setup_error.is_none() => {
                setup_error = Some((
                    Layer::from_tag(buf[1]),
                    String::from_utf8_lossy(&buf[2..n]).into_owned(),
                ))
            }
            // The reporting filter's listener: served at once, since the command's
            // own exec is the first call it stops (every fork is behind us).
            (Some(b'K'), Some(fd)) => {
                if let Err(e) = notify::serve(
                    fd,
                    layers.refusal_observer.clone(),
                    layers.launcher_cpu.clone(),
                ) {
                    setup_error.get_or_insert((
                        Layer::Seccomp,
                        format!("starting the refusal reports' thread: {e}"),
                    ));
                }
            }
            (Some(b'X'), _) => exec_error = Some(String::from_utf8_lossy(&buf[1..n]).into_owned()),
            (Some(b'U'), _) => eprintln!(
                "sandpit: weaker: UDP is not relayed in this run, and stays refused as in network.mode = \"filtered\": the TUN device could not be made ({}); make /dev/net/tun readable and writable (mode 0666, as most distributions have it)",
                String::from_utf8_lossy(&buf[1..n])
            ),
            _ => {}
        }
    }
    drop(ctl_parent);
    // Pid 1 of the sandbox; in fallback mode, the command's process.
    let child = first;
    if let Some((layer, message)) = setup_error {
        stop(guard);
        stop(net_helper);
        let _ = sys::kill(child, libc::SIGKILL);
        let _ = sys::wait(child, false);
        return Err(SpawnError::Layer { layer, message });
    }
    if let Some(msg) = &exec_error {
        eprintln!("sandpit: {msg}");
    }
    let mut handed = None;
    if let (Some(l), NetPlan::Bridge { relay_to, .. }) = (listener, &plan.net) {
        if layers.serve_bridge {
            handed = Some(l);
        } else {
            bridge::serve(l, relay_to.clone());
        }
    }
    if let (
        Some(d),
        NetPlan::Bridge {
            dns_relay_to: Some(to),
            ..
        },
    ) = (dns, &plan.net)
    {
        bridge::serve_dns(d, to.clone());
    }
    if let (Some(t), NetPlan::Bridge { udp: true, .. }) = (tun, &plan.net) {
        let judge = layers
            .udp_judge
            .clone()
            .unwrap_or_else(udp::Judge::refuse_all);
        if let Err(e) = udp::serve(t, judge) {
            // Without its relay the device only swallows packets: end the run.
            stop(guard);
            stop(net_helper);
            let _ = sys::kill(child, libc::SIGKILL);
            let _ = sys::wait(child, false);
            return Err(io_err("starting the UDP relay")(e));
        }
    }
    for l in services {
        let at = l.local_addr().ok();
        if let Some(svc) = plan.loopback.iter().find(|s| Some(s.listen) == at) {
            loopback::serve(l, svc.clone(), layers.loopback_observer.clone());
        }
    }
    if let Some(f) = factory {
        // sandpit's own listeners inside are not the sandbox's servers.
        let mut ours: Vec<std::net::SocketAddr> = plan.loopback.iter().map(|s| s.listen).collect();
        if let NetPlan::Bridge { port, .. } = &plan.net {
            ours.push(std::net::SocketAddr::from(([127, 0, 0, 1], *port)));
        }
        loopback::mirror(f, ours);
    }
    let relay = master
        .as_ref()
        .and_then(|m| Relay::start(m, layers.console.clone()).ok());
    let tmpfs = tmpfs::Watch::new(tmpfs_mounts);
    Ok(Running {
        child,
        guard,
        net_helper,
        ns,
        sigs,
        master,
        relay,
        created: vec![],
        locks: vec![],
        spares: Spares::new(None),
        bridge: handed,
        tender: layers.tender,
        cgroup,
        tmpfs,
        tmp_limit: layers.tmp_limit.clone(),
    })
}

/// Kill the mount guard. Once SIGKILL is pending it returns to none of its own code,
/// so nothing it could restore (a placeholder) comes back after this returns, short
/// of a `mkdir` already under way. Not waited for: as the last process in the
/// sandbox's mount namespace it takes that namespace down on its way out, which
/// waits for an RCU grace period (~15 ms); its zombie is reaped here when it is one
/// already (a non-blocking wait), else by the system once the launcher has exited.
fn stop(guard: Option<libc::pid_t>) {
    if let Some(g) = guard {
        let _ = sys::kill(g, libc::SIGKILL);
        let _ = sys::wait(g, true);
    }
}

/// Forward signals to `child` until it exits; returns its status as an exit code.
/// With a pty, a window-size change is copied to it instead (the kernel then tells
/// the command).
fn forward_until_exit(
    sigs: &SigSet,
    child: libc::pid_t,
    pty_master: Option<RawFd>,
    guard: &mut Option<libc::pid_t>,
) -> io::Result<i32> {
    loop {
        if let Some((_, exit)) = sys::wait(child, true)? {
            return Ok(exit.as_code());
        }
        // Without its mount guard a file the host replaces stays exposed: fail closed.
        if let Some(g) = *guard {
            if sys::wait(g, true).is_ok_and(|r| r.is_some()) {
                *guard = None; // reaped: its pid is no longer ours to signal
                let _ = sys::kill(child, libc::SIGKILL);
                eprintln!("sandpit: the mount guard stopped; the command was killed");
                let _ = sys::wait(child, false);
                return Ok(125);
            }
        }
        match (sigs.wait()?, pty_master) {
            (libc::SIGCHLD, _) => {}
            (libc::SIGWINCH, Some(m)) => {
                let _ = sys::copy_winsize(0, m);
            }
            (sig, _) => {
                let _ = sys::kill(child, sig);
            }
        }
    }
}

/// The launcher's side of the command's pty: the user's terminal in raw mode,
/// keystrokes copied in, output copied out through the
/// [`Console`](crate::console::Console)'s filter; settings restored at the end. A
/// question put up on the console takes the keystrokes and holds the output while
/// it lasts.
struct Relay {
    saved: Option<sys::Termios>,
    output: std::thread::JoinHandle<()>,
    console: Arc<crate::console::Console>,
}

/// How long a redraw waits for the command to draw at the size it was given
/// before giving the real size back.
const REDRAW_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Relay {
    /// Without a `console` (nobody asks), one of the relay's own filters the output.
    fn start(master: &OwnedFd, console: Option<Arc<crate::console::Console>>) -> io::Result<Relay> {
        use std::io::{Read, Write};
        let console = console.unwrap_or_default();
        let saved = sys::get_termios(0).ok();
        if let Some(t) = &saved {
            let _ = sys::set_raw(0, t);
        }
        let mut to_master = std::fs::File::from(master.try_clone()?);
        let keys = console.clone();
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdin.read(&mut buf) {
                if n == 0 {
                    break;
                }
                // A question up takes the keystrokes: the command never sees them.
                if !keys.keystrokes(&buf[..n]) {
                    continue;
                }
                if to_master.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
        let mut from_master = std::fs::File::from(master.try_clone()?);
        let held = console.clone();
        let output = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let copy = |bytes: &[u8]| {
                let mut out = std::io::stdout().lock();
                let ok = out.write_all(bytes).is_ok();
                let _ = out.flush();
                ok
            };
            // EIO once every holder of the slave is gone. While a question is up
            // the output waits (then the command's writes block on the full pty).
            while let Ok(n) = from_master.read(&mut buf) {
                if n == 0 || !held.relay(&buf[..n], copy) {
                    break;
                }
            }
        });
        // After a question the command redraws: its pty one row shorter
        // until it has drawn (or a second), then the terminal's size again; the
        // kernel tells it of each change (SIGWINCH), and it redraws all at a size
        // that is new to it.
        let pty = master.try_clone()?;
        let weak = Arc::downgrade(&console);
        let redraw: crate::console::Redraw = Arc::new(move || {
            let Some(c) = weak.upgrade() else { return };
            let before = c.relayed();
            if sys::nudge_winsize(0, pty.as_raw_fd()).is_err() {
                return;
            }
            let end = std::time::Instant::now() + REDRAW_WAIT;
            while c.relayed() == before && std::time::Instant::now() < end {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let _ = sys::copy_winsize(0, pty.as_raw_fd());
        });
        console.attach(Some(redraw));
        Ok(Relay {
            saved,
            output,
            console,
        })
    }

    fn finish(self) {
        let _ = self.output.join();
        self.console.detach();
        if let Some(t) = &self.saved {
            let _ = sys::set_termios(0, t);
        }
    }
}

/// How long fallback mode keeps finding and killing the command's descendants.
const KILL_FOR: std::time::Duration = std::time::Duration::from_secs(5);

/// Fallback mode: kill every descendant, however deep (we are a child subreaper, so
/// orphans come back to us). Each round walks the whole tree below us, stopping each
/// process (SIGSTOP: it forks no more) before reading its children, then kills
/// everything it found and reaps our own children; rounds repeat until one finds
/// nothing (a fork that was under way shows up in the next), for at most `KILL_FOR`.
fn kill_descendants(except: Option<libc::pid_t>) {
    let until = std::time::Instant::now() + KILL_FOR;
    loop {
        let (found, own) = descendants(sys::getpid(), except);
        if found.is_empty() {
            return;
        }
        for &pid in &found {
            let _ = sys::kill(pid, libc::SIGKILL);
        }
        for &pid in &own {
            let _ = sys::wait(pid, false);
        }
        if std::time::Instant::now() >= until {
            eprintln!(
                "sandpit: warning: the command's processes were still appearing after {} s \
                 of killing them; some may outlive the run",
                KILL_FOR.as_secs()
            );
            return;
        }
    }
}

/// Every process below `me` but `except` (and what is below it), each sent SIGSTOP
/// before its children are read; and `me`'s own children among them.
fn descendants(
    me: libc::pid_t,
    except: Option<libc::pid_t>,
) -> (Vec<libc::pid_t>, Vec<libc::pid_t>) {
    let mut own = children(me);
    own.retain(|&p| Some(p) != except);
    let mut found = std::collections::HashSet::new();
    let mut next = own.clone();
    while let Some(pid) = next.pop() {
        if found.insert(pid) {
            let _ = sys::kill(pid, libc::SIGSTOP);
            next.extend(children(pid));
        }
    }
    (found.into_iter().collect(), own)
}

/// The children of every thread of `pid`.
fn children(pid: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<libc::pid_t>>()
        })
        .collect()
}

/// Fallback mode's only process: the command's, forked by the launcher.
fn child_c1(
    plan: &Plan,
    prep: &Prepared,
    layers: &Layers,
    ctl: OwnedFd,
    launcher: libc::pid_t,
) -> ! {
    if sys::set_parent_death_signal(libc::SIGKILL).is_err() || sys::getppid() != launcher {
        sys::exit_now(125);
    }
    exec_command(plan, prep, layers, &ctl, None)
}

/// What the helper process does (see `start`).
struct Helper {
    /// The sandbox's user and mount namespaces.
    ns: sys::Namespaces,
    /// To pid 1: the network namespace, when the plan has one.
    net: Option<OwnedFd>,
    /// Make the UDP relay's TUN device in it, for the launcher.
    tun: bool,
    /// To the launcher: what failed.
    ctl: OwnedFd,
    /// The mount guard's work: what it guards, and its ends of the `built` and
    /// `ready` pipes.
    guard: Option<(Vec<guard::Guarded>, (OwnedFd, OwnedFd))>,
}

/// The helper, the launcher's child in the host's pid namespace: joins the sandbox's
/// user namespace, makes its network namespace for pid 1, then serves as the mount
/// guard (guard.rs): waits for pid 1 to build the mount tree, joins it, watches.
/// Whatever fails ends it; pid 1 then fails too and the launcher ends the run.
fn helper_process(job: Helper, quarantine_tag: &str, launcher: libc::pid_t) -> ! {
    let _ = sys::setpgid(0, 0);
    if sys::set_parent_death_signal(libc::SIGKILL).is_err() || sys::getppid() != launcher {
        sys::exit_now(125);
    }
    let _ = sys::set_dumpable(false);
    let Helper {
        ns,
        net,
        tun,
        ctl,
        guard,
    } = job;
    if let Err(e) = sys::setns(ns.user.as_fd(), libc::CLONE_NEWUSER) {
        fail(
            &ctl,
            Layer::UserNamespace,
            &format!("joining the sandbox's user namespace: {e}"),
        )
    }
    if let Some(to_init) = net {
        let handed = namespaces::make_network()
            .map_err(|e| e.to_string())
            .and_then(|ns| {
                // The device belongs to the namespace it is made in, and needs
                // CAP_NET_ADMIN over it: made here, before pid 1 has the namespace.
                if tun {
                    match udp::make_device() {
                        Ok(dev) => {
                            sys::send_fd(ctl.as_fd(), b"T", dev.as_fd())
                                .map_err(|e| format!("handing over the TUN device: {e}"))?;
                            crate::timing::mark("helper: TUN device made");
                        }
                        // Without the device nothing is relayed: UDP stays refused, as
                        // in "filtered" (the sandbox has no route out), and the run
                        // says so. Nothing is opened that the policy would not.
                        Err(e) => {
                            let mut m = b"U".to_vec();
                            m.extend_from_slice(e.as_bytes());
                            let _ = send(&ctl, &m);
                        }
                    }
                }
                sys::send_fd(to_init.as_fd(), b"N", ns.as_fd())
                    .map_err(|e| format!("handing the network namespace to pid 1: {e}"))
            });
        if let Err(e) = handed {
            fail(&ctl, Layer::Network, &e)
        }
        crate::timing::mark("helper: network namespace made");
    }
    drop(ctl);
    let Some((guarded, (built, ready))) = guard else {
        sys::exit_now(0)
    };
    let mut byte = [0u8; 1];
    if !std::io::Read::read(&mut std::fs::File::from(built), &mut byte).is_ok_and(|n| n == 1) {
        // Pid 1 failed before the command and reports why; the launcher ends the run.
        sys::exit_now(0)
    }
    crate::timing::mark("guard: tree built, joining");
    if let Err(e) = sys::setns(ns.mount.as_fd(), libc::CLONE_NEWNS) {
        eprintln!("sandpit: mount guard: joining the sandbox's mount namespace: {e}");
        sys::exit_now(125);
    }
    drop(ns);
    // Nothing of the launcher's (terminal, pipes, the placeholder lock) stays open.
    let ready = match sys::keep_only([ready]).map(|[r]| r) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sandpit: mount guard: closing inherited descriptors: {e}");
            sys::exit_now(125)
        }
    };
    let g = match guard::prepare(guarded, quarantine_tag) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("sandpit: mount guard: {e}");
            sys::exit_now(125)
        }
    };
    crate::timing::mark("guard: watching");
    if std::io::Write::write_all(&mut std::fs::File::from(ready), b"R").is_err() {
        sys::exit_now(125);
    }
    guard::run(g)
}

/// pid 1 of the new pid namespace.
fn child_init(
    plan: &Plan,
    prep: &Prepared,
    layers: &Layers,
    ctl: OwnedFd,
    (mapped, launcher): (OwnedFd, OwnedFd),
    guard: Option<(OwnedFd, OwnedFd)>,
    net: Option<OwnedFd>,
) -> ! {
    let _ = sys::set_parent_death_signal(libc::SIGKILL);
    let _ = sys::setpgid(0, 0);
    // The launcher writes the uid/gid maps, then a byte; end of file: it failed, and
    // says so itself.
    if !std::io::Read::read(&mut std::fs::File::from(mapped), &mut [0u8; 1]).is_ok_and(|n| n == 1) {
        sys::exit_now(125)
    }
    // A launcher that died before the parent-death signal was set sends none.
    if sys::has_exited(launcher.as_fd()) {
        sys::exit_now(125)
    }
    drop(launcher);
    // The launcher has opened what it needs of pid 1 (its namespaces); nothing of the
    // command's may read its memory or descriptors.
    let _ = sys::set_dumpable(false);
    if let Err(e) = sys::install_noop_handlers(&all_signals()) {
        fail(&ctl, Layer::Process, &format!("signal handlers: {e}"))
    }
    crate::timing::mark("init: ids mapped");
    if let Err(e) = namespaces::apply_mounts(plan) {
        fail(&ctl, Layer::Mounts, &e.to_string())
    }
    crate::timing::mark("init: mounts built");
    // The bounded tmpfs mounts, for the launcher to see at the end whether one was
    // full (limits.tmp_bytes): it cannot open them itself.
    for (path, fd) in tmpfs::open(plan) {
        let mut msg = b"M".to_vec();
        msg.extend_from_slice(path.as_os_str().as_bytes());
        let _ = sys::send_fd(ctl.as_fd(), &msg, fd.as_fd());
    }
    if let Some(from_helper) = net {
        let joined = match sys::recv_msg(from_helper.as_fd(), &mut [0u8; 1]) {
            Ok((_, Some(ns))) => namespaces::join_network(ns.as_fd()).map_err(|e| e.to_string()),
            Ok((_, None)) => {
                Err("the helper ended without handing over the network namespace".into())
            }
            Err(e) => Err(format!("receiving the network namespace: {e}")),
        };
        if let Err(e) = joined {
            fail(&ctl, Layer::Network, &e)
        }
    }
    if let NetPlan::Bridge { port, .. } = &plan.net {
        match crate::sys::tcp_listener(("127.0.0.1", *port)) {
            Ok(l) => {
                if let Err(e) = sys::send_fd(ctl.as_fd(), b"B", l.as_fd()) {
                    fail(&ctl, Layer::Network, &format!("handing over bridge: {e}"))
                }
            }
            Err(e) => fail(
                &ctl,
                Layer::Network,
                &format!("bridge listener on 127.0.0.1:{port}: {e}"),
            ),
        }
    }
    if let NetPlan::Bridge {
        dns_relay_to: Some(_),
        ..
    } = &plan.net
    {
        match std::net::UdpSocket::bind(("127.0.0.1", 53)) {
            Ok(u) => {
                if let Err(e) = sys::send_fd(ctl.as_fd(), b"D", u.as_fd()) {
                    fail(
                        &ctl,
                        Layer::Network,
                        &format!("handing over DNS socket: {e}"),
                    )
                }
            }
            Err(e) => fail(
                &ctl,
                Layer::Network,
                &format!("DNS listener 127.0.0.1:53: {e}"),
            ),
        }
    }
    for svc in &plan.loopback {
        match crate::sys::tcp_listener(svc.listen) {
            Ok(l) => {
                if let Err(e) = sys::send_fd(ctl.as_fd(), b"L", l.as_fd()) {
                    fail(
                        &ctl,
                        Layer::Network,
                        &format!("handing over loopback listener: {e}"),
                    )
                }
            }
            // No IPv6 in this kernel/namespace: clients cannot dial ::1 either.
            Err(e) if svc.listen.is_ipv6() && e.kind() == io::ErrorKind::AddrNotAvailable => {}
            Err(e) => fail(
                &ctl,
                Layer::Network,
                &format!(
                    "listener for loopback service {:?} at {}: {e}",
                    svc.entry, svc.listen
                ),
            ),
        }
    }
    if plan.mirror {
        let (ours, theirs) = match sys::seqpacket_pair() {
            Ok(p) => p,
            Err(e) => fail(&ctl, Layer::Network, &format!("socketpair: {e}")),
        };
        match sys::fork() {
            Err(e) => fail(&ctl, Layer::Process, &format!("fork: {e}")),
            Ok(Fork::Child) => {
                drop(ctl);
                drop(theirs);
                let _ = sys::set_dumpable(false);
                loopback::factory(ours)
            }
            Ok(Fork::Parent(_)) => {
                drop(ours);
                if let Err(e) = sys::send_fd(ctl.as_fd(), b"F", theirs.as_fd()) {
                    fail(&ctl, Layer::Network, &format!("handing over mirror: {e}"))
                }
            }
        }
    }
    crate::timing::mark("init: network set up");
    let _ = sys::sethostname(b"sandpit");
    // The mount tree is final: the guard joins it while the command's process is
    // made and restricted; the command execs only once the guard watches.
    let guard_ready = guard.map(|(built, ready)| {
        let _ = std::io::Write::write_all(&mut std::fs::File::from(built), b"M");
        ready
    });
    match sys::fork() {
        Err(e) => fail(&ctl, Layer::Process, &format!("fork: {e}")),
        Ok(Fork::Child) => exec_command(plan, prep, layers, &ctl, guard_ready),
        Ok(Fork::Parent(agent)) => {
            drop(ctl);
            drop(guard_ready);
            let _ = sys::set_dumpable(false);
            let sigs = SigSet::of(&all_signals());
            loop {
                // Reap every orphan; leave when the command itself is gone.
                loop {
                    match sys::wait(-1, true) {
                        Ok(Some((pid, exit))) if pid == agent => {
                            crate::timing::mark("init: command reaped");
                            sys::exit_now(exit.as_code())
                        }
                        Ok(Some(_)) => continue,
                        Ok(None) => break,
                        Err(_) => sys::exit_now(Exit::Code(125).as_code()),
                    }
                }
                match sigs.wait() {
                    Ok(libc::SIGCHLD) => {}
                    Ok(sig) => {
                        let _ = sys::kill(agent, sig);
                    }
                    Err(_) => sys::exit_now(125),
                }
            }
        }
    }
}

/// The command's own process: last restrictions, then (once the mount guard, if
/// any, reports on `guard_ready` that it watches) exec.
fn exec_command(
    plan: &Plan,
    prep: &Prepared,
    layers: &Layers,
    ctl: &OwnedFd,
    guard_ready: Option<OwnedFd>,
) -> ! {
    crate::timing::mark("command's process forked");
    // Pid 1 is not dumpable; its child is the command's own (exec would make it so),
    // and its /proc files must be its own to write (`oom_score_adj`).
    let _ = sys::set_dumpable(true);
    if let Err(e) = SigSet::reset_all() {
        fail(ctl, Layer::Process, &format!("signal mask: {e}"))
    }
    if let Err(e) = sys::setsid() {
        fail(ctl, Layer::Process, &format!("setsid: {e}"))
    }
    if let Some(slave) = prep.pty_slave {
        let mut r = sys::set_controlling_tty(slave)
            .and_then(|()| sys::dup2(slave, 0))
            .and_then(|()| sys::dup2(slave, 1));
        if prep.pty_stderr {
            r = r.and_then(|()| sys::dup2(slave, 2));
        }
        if let Err(e) = r {
            fail(ctl, Layer::Process, &format!("attaching the terminal: {e}"))
        }
    }
    if plan.mode == Mode::LandlockOnly {
        if let Ok(cwd) = CString::new(plan.cwd.as_os_str().as_bytes()) {
            if let Err(e) = sys::chdir(&cwd) {
                fail(ctl, Layer::Process, &format!("chdir {:?}: {e}", plan.cwd))
            }
        }
    }
    if plan.mode == Mode::Namespaces || sys::getuid() == 0 {
        if let Err(e) = sys::drop_all_capabilities() {
            fail(ctl, Layer::Process, &format!("dropping capabilities: {e}"))
        }
    }
    if let Err(e) = sys::set_no_new_privs() {
        fail(ctl, Layer::Process, &format!("no_new_privs: {e}"))
    }
    if let Err(e) = sys::prefer_for_oom_kill() {
        fail(ctl, Layer::Process, &format!("oom_score_adj: {e}"))
    }
    if let Some(super::memory::Memory::Data { bytes }) = plan.memory {
        if let Err(e) = sys::limit_data(bytes) {
            fail(
                ctl,
                Layer::Process,
                &format!("limiting each process's data to {bytes} bytes (limits.memory): {e}"),
            )
        }
    }
    if let Some(n) = plan.processes {
        if let Err(e) = sys::limit_tasks(n) {
            fail(
                ctl,
                Layer::Process,
                &format!("limiting processes to {n} (limits.processes): {e}"),
            )
        }
    }
    if let Some(bytes) = plan.file_bytes {
        if let Err(e) = sys::limit_file_size(bytes) {
            fail(
                ctl,
                Layer::Process,
                &format!("limiting each file to {bytes} bytes (limits.cache_bytes): {e}"),
            )
        }
    }
    if layers.landlock_abi.is_some() {
        if let Err(e) = landlock::apply(&plan.landlock, layers.landlock_abi) {
            fail(ctl, Layer::Landlock, &e.to_string())
        }
    }
    crate::timing::mark("command's process: Landlock applied");
    let prog = match seccomp::compile(&seccomp::table(plan.seccomp, plan.nested_user_namespaces)) {
        Ok(p) => p,
        Err(e) => fail(ctl, Layer::Seccomp, &e.to_string()),
    };
    if let Err(e) = sys::seccomp_install(&prog) {
        fail(ctl, Layer::Seccomp, &format!("installing filter: {e}"))
    }
    if plan.report_refusals {
        // Installed after the deny filter, whose answers take precedence; the
        // listener goes to the launcher, which must hold it before the exec below.
        let listener = seccomp::compile_notify()
            .map_err(|e| e.to_string())
            .and_then(|p| {
                sys::seccomp_install_listener(&p)
                    .map_err(|e| format!("installing the reporting filter: {e}"))
            });
        match listener {
            Ok(fd) => {
                if let Err(e) = sys::send_fd(ctl.as_fd(), b"K", fd.as_fd()) {
                    fail(
                        ctl,
                        Layer::Seccomp,
                        &format!("handing over the listener: {e}"),
                    )
                }
            }
            Err(e) => fail(ctl, Layer::Seccomp, &e),
        }
    }
    crate::timing::mark("command's process: seccomp installed");
    if let Some(ready) = guard_ready {
        let mut byte = [0u8; 1];
        if !std::io::Read::read(&mut std::fs::File::from(ready), &mut byte).is_ok_and(|n| n == 1) {
            fail(
                ctl,
                Layer::Mounts,
                "the mount guard could not start (its message is above)",
            )
        }
    }
    crate::timing::mark("command's process: the guard watches; exec");
    if let Err(e) = sys::cloexec_from(3) {
        fail(ctl, Layer::Process, &format!("close_range: {e}"))
    }
    // The interposer takes this process for the agent (`files.agent_read`): its pid
    // is known only now.
    let mut envp = prep.envp.clone();
    envp.extend(CString::new(format!("{AGENT_PID_VAR}={}", sys::getpid())));
    let e = sys::execvpe(&prep.argv[0], &prep.argv, &envp);
    let mut m = b"X".to_vec();
    m.extend_from_slice(
        format!("{}: {e}", String::from_utf8_lossy(prep.argv[0].as_bytes())).as_bytes(),
    );
    let _ = send(ctl, &m);
    let code = if e.kind() == io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    sys::exit_now(code)
}
