//! Composing the layers of one `sandpit run` (DESIGN.md, "Process model"): the
//! per-run directory and policy snapshot, the interposer (extracted and verified),
//! the PATH shims, the proxy and DNS responder behind the kernel layer's bridge, the
//! child's environment, the start-up line and the exit summary.
//!
//! Order, as `cli::run` calls it:
//! 1. [`prepare`] (before the fork, single-threaded): run directory, snapshot, mode
//!    choice, library extraction, shim directory, and the proxy/DNS sockets *bound*
//!    (not yet served) so the bridge can connect as soon as the command starts;
//! 2. [`Prepared::network`] feeds the kernel plan; [`Prepared::apply`] adds the
//!    child's variables to the plan; [`Prepared::describe`] is the start-up line;
//! 3. after `linux::spawn`, [`Prepared::start`] starts the tokio runtime that serves
//!    the sockets (threads may only start after the fork);
//! 4. after `Running::wait`, [`Services::finish`] stops it and returns a summary of
//!    denials; dropping [`Prepared`] removes the run directory and the sockets.
use std::ffi::OsString;
use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sandpit_policy::{NetMode, Policy};

use crate::inject::{self, Installed};
#[cfg(target_os = "linux")]
use crate::sandbox::KernelSupport;

mod sys;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not a private directory owned by this user; refusing to use it")]
    NotPrivate(PathBuf),
    #[error(
        "the interposition library could not be installed or verified ({0}); the command \
         was not started. Pass --kernel-only to run without it (no per-call rule names, \
         no transparent connect redirect)"
    )]
    Interposer(#[source] inject::InjectError),
    #[error("the PATH shims could not be built ({0}); the command was not started")]
    Shims(#[source] sandpit_shims::Error),
    #[error(
        "the shim binary could not be installed or verified ({0}); the command was not started"
    )]
    ShimBinary(#[source] inject::InjectError),
    #[error("{0:?} is not valid UTF-8; sandpit cannot pass it to the sandboxed command")]
    NotUtf8(OsString),
    #[error("the proxy could not be started: {0}")]
    Proxy(String),
    #[error("the adversary could not be started ({0}); the command was not started")]
    Adversary(String),
    #[error(
        "the filtering SSH agent's socket {path} could not be bound ({source}); the command \
         was not started. Set ssh.agent = \"off\" under [ssh] in ~/.sandpit/config.toml to run without it"
    )]
    SshAgent {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Credentials(#[from] crate::credentials::CredentialError),
    #[error(
        "{0} names an https:// URL of a host whose TLS sandpit does not terminate (only the \
         hosts of [credentials] are), so it could not be enforced; the command was not \
         started. Add the host to a credential's hosts, or remove the entry"
    )]
    Http(String),
    #[error(
        "could not make {path:?} (files.allow_write entry {entry:?}, a writable state \
         directory): {source}; the command was not started. Make it yourself, or remove \
         the entry"
    )]
    StateDir {
        path: PathBuf,
        entry: String,
        #[source]
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, LaunchError>;

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LaunchError {
    let what = what.into();
    move |source| LaunchError::Io { what, source }
}

/// What the run asked for.
pub struct Options<'a> {
    /// Shims on (the run plan's choice: `--shims` or `shims.enabled`).
    pub shims: bool,
    /// Why the interposer stays out of the command (the run plan's choice:
    /// `--kernel-only`, or a program it cannot load into); `None`: it is injected.
    pub interposer_off: Option<&'a str>,
    /// The agent programs the interposer cannot enter (the run plan's), for the
    /// start-up line.
    pub static_agent: &'a [PathBuf],
    /// The proxy is someone else's (`--proxy-socket`): start none here.
    pub external_proxy: bool,
    /// The run's scratch directory (`TMPDIR`); the sockets go next to it, under the
    /// private scratch root that the sandbox does not see.
    pub scratch: &'a Path,
    /// The audit session's socket (`SANDPIT_AUDIT`): the interposer reports there.
    pub audit_socket: Option<PathBuf>,
    /// The run's id and the audit session's run directory, `<state>/run/<id>/`
    /// (read-only inside the sandbox): the snapshot, the shims and the adversary's
    /// control socket go there too. The session removes it.
    pub run_id: &'a str,
    pub run_dir: &'a Path,
    /// Serve the proxy on 127.0.0.1 (TCP, the per-run token required) instead of a
    /// unix socket behind the kernel layer's bridge, and the DNS responder on
    /// 127.0.0.1 over TCP (macOS: the Seatbelt profile lets the command reach
    /// exactly those two ports; the interposer's resolver hooks ask the responder,
    /// which answers by the policy, and the proxy decides by name).
    pub loopback_proxy: bool,
    /// `[credentials]` as the run plan has it.
    pub credentials: Option<&'a crate::credentials::Plan>,
    /// The filtering SSH agent as the run plan has it.
    pub ssh_agent: Option<&'a crate::sshagent::Plan>,
}

/// Whether the interposer is injected, and why not.
pub enum Interposer {
    On(Installed),
    Off(String),
}

struct Shims {
    dir: PathBuf,
    tools: Vec<String>,
    path: String,
}

/// The proxy's and the DNS responder's sockets, bound before the fork.
struct Sockets {
    dir: PathBuf,
    proxy_path: PathBuf,
    dns_path: PathBuf,
    proxy: Option<UnixListener>,
    dns: Option<UnixDatagram>,
}

impl Drop for Sockets {
    fn drop(&mut self) {
        crate::trash::discard(&self.dir);
    }
}

/// Told each verdict of the reviewer: the action (`exec`, `connect`, `write`), what
/// it judged (the argument vector, `["host:port"]`, `["path"]`), the verdict.
pub type OnVerdict = dyn Fn(&str, &[String], &sandpit_policy::Verdict) + Send + Sync;

/// Everything set up for one run before the fork.
pub struct Prepared {
    state_dir: PathBuf,
    snapshot: PathBuf,
    token: String,
    policy: Arc<Policy>,
    interposer: Interposer,
    /// The programs the command starts as the agent itself that no interposer can
    /// enter (`inspect::agent_programs`: codex's static binary behind its Node
    /// wrapper), for the start-up line.
    static_agent: Vec<PathBuf>,
    shims: Option<Shims>,
    sockets: Option<Sockets>,
    /// The loopback proxy listener (`Options::loopback_proxy`), bound before the fork.
    loopback: Option<(SocketAddr, std::net::TcpListener)>,
    /// The DNS responder's loopback listener (DNS over TCP), beside `loopback`.
    loopback_dns: Option<(SocketAddr, std::net::TcpListener)>,
    /// The kernel layer's bridge listener (inside the network namespace, or on this
    /// machine's loopback in fallback mode), handed over after the spawn: the proxy
    /// serves it directly, token required, besides its unix socket.
    bridge: Option<std::net::TcpListener>,
    /// The run's first process, whose tree the proxy attributes connections to.
    run_root: Option<u32>,
    /// The audit session's socket, where the interposer reports (`SANDPIT_AUDIT`).
    audit: Option<PathBuf>,
    /// The adversary's control socket, bound before the fork, served after it.
    adversary: Option<(PathBuf, UnixListener)>,
    nofile: Option<libc::rlim_t>,
    /// `[credentials]`: the secrets and the run's CA, and the variables that point
    /// the sandbox's TLS clients at the CA.
    inject: Option<Injecting>,
    /// What the proxy and DNS responder ask instead of the policy, when set
    /// (`control::Live`: rules `sandpit allow`/`deny` change during the run).
    decide: Option<Arc<dyn crate::proxy::Decide>>,
    /// Who asks the user about hosts missing from `network.allow`
    /// (`network.ask_on_blocked_host`), when the run asks.
    ask: Option<crate::proxy::Asking>,
    /// Where the reviewer reports each verdict (the audit log).
    on_verdict: Option<Arc<OnVerdict>>,
    /// The filtering SSH agent's socket, bound before the fork, served after it.
    ssh_agent: Option<crate::sshagent::Agent>,
}

/// The run's credentials and CA, and the child's variables for them.
type Injecting = (Arc<crate::proxy::mitm::Inject>, Vec<(String, String)>);

/// Create `dir` (mode 0700) if missing; it must be a directory of ours that nobody
/// else can write.
fn private_dir(dir: &Path, recursive: bool) -> Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(recursive)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(format!("creating {}", dir.display()))(e)),
    }
    let m = std::fs::symlink_metadata(dir).map_err(io(format!("{}", dir.display())))?;
    if !m.is_dir() || m.uid() != crate::sys::uid() || m.mode() & 0o022 != 0 {
        return Err(LaunchError::NotPrivate(dir.to_path_buf()));
    }
    Ok(())
}

fn random_hex(n: usize) -> Result<String> {
    crate::sys::random_hex(n).map_err(io("reading /dev/urandom"))
}

/// Write `bytes` to `path` (0600) through a temporary file renamed into place. No
/// fsync: the file lives as long as this run and is only read while it lasts.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(format!("creating {}", tmp.display())))?;
    f.write_all(bytes)
        .map_err(io(format!("writing {}", tmp.display())))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io(format!("renaming to {}", path.display())))
}

/// Set up everything that must exist before the command starts. Single-threaded.
pub fn prepare(policy: &Policy, o: &Options) -> Result<Prepared> {
    let nofile = sys::raise_nofile().ok();
    let state_dir = policy.context.state_dir.clone();
    private_dir(&state_dir, true)?;
    let state_dir = std::fs::canonicalize(&state_dir).map_err(io(format!(
        "resolving the state directory {}",
        state_dir.display()
    )))?;
    let run_dir = o.run_dir;
    // The snapshot the interposer and `sandpit exec` read.
    let snapshot = run_dir.join("policy.snapshot");
    write_atomic(&snapshot, &policy.snapshot())?;

    let stamps = inject::Stamps::for_policy(policy);
    // `install` verifies the file (ownership, modes, content hash) before returning;
    // failing that is fatal.
    let interposer = match o.interposer_off {
        Some(why) => Interposer::Off(why.to_string()),
        None => {
            Interposer::On(inject::install(&state_dir, stamps).map_err(LaunchError::Interposer)?)
        }
    };
    let static_agent = o.static_agent.to_vec();

    let shims = if o.shims {
        let dir = run_dir.join("shims");
        // The shims link to the small shim binary, not to this one (bench/shim_exec.sh).
        let shim = inject::install_shim(&state_dir, stamps).map_err(LaunchError::ShimBinary)?;
        let exe = shim.path;
        let path = std::env::var("PATH").unwrap_or_default();
        let tools = sandpit_shims::build_for_policy(&dir, &exe, policy, &path)
            .map_err(LaunchError::Shims)?;
        Some(Shims { dir, tools, path })
    } else {
        None
    };

    // Filtered and unrestricted alike: every connection goes through the proxy,
    // which lifts host filtering for the latter and nothing else.
    let ours = !o.external_proxy && policy.network.mode.value != NetMode::Offline;
    let sockets = if ours && !o.loopback_proxy {
        Some(bind_sockets(o.scratch)?)
    } else {
        None
    };
    let loopback_listener = |what: &str| -> Result<(SocketAddr, std::net::TcpListener)> {
        let l = crate::sys::tcp_listener(SocketAddr::from(([127, 0, 0, 1], 0)))
            .map_err(io(format!("binding the {what} on 127.0.0.1")))?;
        let addr = l
            .local_addr()
            .map_err(io(format!("reading the {what}'s loopback address")))?;
        Ok((addr, l))
    };
    let (loopback, loopback_dns) = if ours && o.loopback_proxy {
        (
            Some(loopback_listener("proxy")?),
            Some(loopback_listener("DNS responder")?),
        )
    } else {
        (None, None)
    };

    let inject = prepare_credentials(policy, o.credentials)?;

    // The adversary's socket is bound now (before the fork: the command may ask at
    // once) and served after it; with [adversary] configured, failing to set it up
    // means no run (an unreviewed run would be fail-open).
    let adversary = match &policy.adversary {
        None => None,
        Some(_) => {
            let path = crate::adversary::control::socket_path(&policy.context.state_dir, o.run_id);
            let l = crate::adversary::control::bind_std(&path)
                .map_err(|e| LaunchError::Adversary(e.to_string()))?;
            Some((path, l))
        }
    };

    let ssh_agent = match o.ssh_agent {
        Some(p) => {
            Some(
                crate::sshagent::Agent::bind(p).map_err(|source| LaunchError::SshAgent {
                    path: p.socket.clone(),
                    source,
                })?,
            )
        }
        None => None,
    };

    Ok(Prepared {
        ssh_agent,
        state_dir,
        snapshot,
        token: random_hex(16)?,
        policy: Arc::new(policy.clone()),
        interposer,
        static_agent,
        shims,
        sockets,
        loopback,
        loopback_dns,
        bridge: None,
        run_root: None,
        audit: o.audit_socket.clone(),
        adversary,
        nofile,
        inject,
        decide: None,
        ask: None,
        on_verdict: None,
    })
}

/// Where the proxy's and the DNS responder's sockets of a run with this scratch
/// directory are bound: `(directory, proxy, dns)`, beside the scratch directory, under
/// the private scratch root the sandbox does not see.
pub fn socket_paths(scratch: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let dir = scratch.with_extension("net");
    (dir.clone(), dir.join("proxy.sock"), dir.join("dns.sock"))
}

/// `[credentials]` as the plan says: read every real value (a source that cannot
/// be read stops the run), make the run's CA, and write its certificate and a
/// bundle (the system's roots and the CA) where the plan puts them, in the run
/// directory, which the sandbox reads but cannot write. The CA's key stays in
/// this process.
fn prepare_credentials(
    policy: &Policy,
    plan: Option<&crate::credentials::Plan>,
) -> Result<Option<Injecting>> {
    use crate::credentials::{self, CredentialError};
    let Some(plan) = plan else {
        // A policy with credentials lets their sentinel variables through: never
        // without the run's values behind them.
        if !policy.credentials.is_empty() {
            return Err(CredentialError::Setup(
                "[credentials] without the run plan's part for them".into(),
            )
            .into());
        }
        return Ok(None);
    };
    let Some(secrets) = credentials::Secrets::load(policy)? else {
        return Ok(None);
    };
    let (_, system) = credentials::system_bundle()?;
    let roots = credentials::upstream_roots(policy, &system)?;
    let inject = crate::proxy::mitm::Inject::new(secrets, roots)?;
    write_atomic(&plan.ca, inject.ca_pem().as_bytes())?;
    let mut all = system;
    if !all.ends_with('\n') {
        all.push('\n');
    }
    all.push_str(inject.ca_pem());
    write_atomic(&plan.bundle, all.as_bytes())?;
    let mut env = inject.secrets.child_env();
    env.extend(plan.ca_env.iter().cloned());
    Ok(Some((Arc::new(inject), env)))
}

fn bind_sockets(scratch: &Path) -> Result<Sockets> {
    let (dir, proxy_path, dns_path) = socket_paths(scratch);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(io(format!("creating {}", dir.display())))?;
    let mut s = Sockets {
        proxy_path,
        dns_path,
        dir,
        proxy: None,
        dns: None,
    };
    let private = |p: &Path| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600))
            .map_err(io(format!("setting permissions on {}", p.display())))
    };
    s.proxy = Some(
        UnixListener::bind(&s.proxy_path)
            .map_err(io(format!("binding {}", s.proxy_path.display())))?,
    );
    private(&s.proxy_path)?;
    let dns =
        UnixDatagram::bind(&s.dns_path).map_err(io(format!("binding {}", s.dns_path.display())))?;
    private(&s.dns_path)?;
    // Before anything can be sent: a datagram queued without credentials is dropped.
    #[cfg(target_os = "linux")]
    sys::pass_credentials(&dns).map_err(io(format!("SO_PASSCRED on {}", s.dns_path.display())))?;
    s.dns = Some(dns);
    Ok(s)
}

fn utf8(s: OsString) -> Result<String> {
    s.into_string().map_err(LaunchError::NotUtf8)
}

/// The names of this process's variables that never enter the sandbox: what
/// `decide` says of each for the command sandpit starts (`env.withhold`, less what
/// `env.agent` keeps for the agent).
pub fn withheld_env(policy: &sandpit_policy::Policy) -> Vec<String> {
    use sandpit_policy::{EnvTo, Request};
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|name| {
            sandpit_policy::decide(
                policy,
                &Request::Env {
                    name,
                    to: EnvTo::Command,
                },
            )
            .is_denied()
        })
        .collect()
}

/// The writable roots in the home that do not exist yet (an agent's state
/// directory on a fresh home: `~/.codex`, `~/.local/share/opencode`), each missing
/// directory top first with the entry that wants it, for the run to make (mode 0700), so
/// that the agent can create its state on first run: the home around them is
/// read-only in the sandbox, and a root that is not there has nothing to bind. And,
/// inside such a root, the directories that hold its protected paths
/// (`~/.pi/agent` for `~/.pi/agent/settings.json`): otherwise the first missing one
/// would be the placeholder, and the agent could not make the rest of its state
/// there.
///
/// Only roots from the user's own layers (defaults, profiles, the user config, flags;
/// never a project file), never the workspace, and only names that read as a
/// directory's (no extension: `~/.claude.json` is a file, left for the agent to
/// make). Only looks: [`make_state_dirs`] makes them.
pub fn state_dirs(policy: &sandpit_policy::Policy) -> Vec<(PathBuf, String)> {
    let ctx = &policy.context;
    let home = &ctx.home;
    let roots: Vec<&sandpit_policy::Rule<PathBuf>> = policy
        .files
        .allow_write
        .iter()
        .filter(|r| {
            r.origin.layer != sandpit_policy::Layer::Project
                && r.value.starts_with(home)
                && r.value != *home
                && !ctx.workspace.starts_with(&r.value)
                && !r.value.starts_with(&ctx.workspace)
                && r.value.extension().is_none()
                && !sandpit_policy::glob::is_glob(r.value.as_os_str().as_encoded_bytes())
        })
        .collect();
    let mut wanted: Vec<(&Path, &str)> = vec![];
    for r in &roots {
        wanted.push((&r.value, &r.origin.entry));
        // Never for a project file's entries: a cloned repository must not shape
        // the user's home (`~/.codex/config.toml/x` would make a directory of
        // codex's config).
        for p in policy.files.block_write.iter().filter(|p| {
            p.origin.layer != sandpit_policy::Layer::Project
                && !sandpit_policy::glob::is_glob(p.value.as_os_str().as_encoded_bytes())
        }) {
            if let Some(parent) = p.value.parent() {
                if parent.starts_with(&r.value) {
                    wanted.push((parent, &r.origin.entry));
                }
            }
        }
    }
    let mut missing_all: Vec<(PathBuf, String)> = vec![];
    for (dir, entry) in wanted {
        // Each missing component, top first, so that every one gets the mode.
        let mut missing: Vec<&Path> = dir
            .ancestors()
            .take_while(|a| *a != home.as_path() && a.symlink_metadata().is_err())
            .collect();
        missing.reverse();
        for d in missing {
            if !missing_all.iter().any(|(m, _)| m == d) {
                missing_all.push((d.to_path_buf(), entry.to_string()));
            }
        }
    }
    missing_all
}

/// Make the directories [`state_dirs`] listed (mode 0700), top first. Returns what
/// was made (one made meanwhile by another run is not).
pub fn make_state_dirs(dirs: &[(PathBuf, String)]) -> Result<Vec<PathBuf>> {
    let mut made = vec![];
    for (d, entry) in dirs {
        match std::fs::DirBuilder::new().mode(0o700).create(d) {
            Ok(()) => made.push(d.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(LaunchError::StateDir {
                    path: d.clone(),
                    entry: entry.clone(),
                    source: e,
                })
            }
        }
    }
    Ok(made)
}

/// Set `k=v` in a command's environment, replacing an earlier value.
pub fn set_env(env: &mut Vec<(String, String)>, k: String, v: String) {
    env.retain(|(e, _)| *e != k);
    env.push((k, v));
}

impl Prepared {
    /// The interposer's policy snapshot.
    pub fn snapshot(&self) -> &Path {
        &self.snapshot
    }

    /// Report each of the reviewer's verdicts to `f` (the audit log).
    pub fn set_on_verdict(&mut self, f: Arc<OnVerdict>) {
        self.on_verdict = Some(f);
    }

    /// Let the proxy and DNS responder ask `d` instead of the policy.
    pub fn set_decide(&mut self, d: Arc<dyn crate::proxy::Decide>) {
        self.decide = Some(d);
    }

    /// Let the proxy ask the user about hosts missing from `network.allow`.
    pub fn set_ask(&mut self, a: crate::proxy::Asking) {
        self.ask = Some(a);
    }

    /// The proxy and DNS sockets for the kernel plan's bridge (`None`: no proxy of
    /// ours — the network is offline, or `--proxy-socket` was given).
    pub fn network(&self) -> Option<(PathBuf, PathBuf)> {
        self.sockets
            .as_ref()
            .map(|s| (s.proxy_path.clone(), s.dns_path.clone()))
    }

    pub fn interposer(&self) -> &Interposer {
        &self.interposer
    }

    /// Add the child's variables to the plan (see [`Prepared::child_env`]), with the
    /// proxy and DNS addresses as the sandbox sees them through the bridge.
    #[cfg(target_os = "linux")]
    pub fn apply(&self, plan: &mut crate::sandbox::linux::Plan) -> Result<()> {
        use crate::sandbox::linux::plan::NetPlan;
        let (proxy, dns) = match &plan.net {
            NetPlan::Bridge {
                port, dns_relay_to, ..
            } => (
                Some(SocketAddr::from(([127, 0, 0, 1], *port))),
                dns_relay_to
                    .as_ref()
                    .map(|_| SocketAddr::from(([127, 0, 0, 1], 53))),
            ),
            _ => (None, None),
        };
        for (k, v) in self.child_env(proxy, dns)? {
            set_env(&mut plan.env, k, v);
        }
        // credentials.NAME.file: the masked copy bound read-only over the file,
        // last, over whatever else the plan put there. Only a mount namespace can.
        if let Some((inject, _)) = &self.inject {
            for (name, path, contents) in inject.secrets.masked_files() {
                if plan.mode != crate::sandbox::linux::Mode::Namespaces {
                    return Err(crate::credentials::CredentialError::Setup(format!(
                        "credentials.{name}.file ({}) is shown masked through a mount namespace, which this run has none of; remove the key or run where user namespaces are available",
                        path.display()
                    ))
                    .into());
                }
                plan.mounts
                    .push(crate::sandbox::linux::plan::MountOp::File {
                        path: path.clone(),
                        contents: contents.clone(),
                    });
            }
        }
        Ok(())
    }

    /// The sentinel that the credential whose sandbox variable is `env` holds in
    /// this run, if any.
    pub fn sentinel(&self, env: &str) -> Option<String> {
        let (inject, _) = self.inject.as_ref()?;
        (inject.secrets.iter())
            .find(|s| s.env == env)
            .map(|s| s.sentinel.clone())
    }

    /// The loopback proxy's address (`Options::loopback_proxy`), `None` otherwise.
    pub fn loopback_proxy(&self) -> Option<SocketAddr> {
        self.loopback.as_ref().map(|(a, _)| *a)
    }

    /// The loopback DNS responder's address (DNS over TCP, beside the loopback
    /// proxy), `None` otherwise.
    pub fn loopback_dns(&self) -> Option<SocketAddr> {
        self.loopback_dns.as_ref().map(|(a, _)| *a)
    }

    /// Unix sockets the command must be able to reach: the adversary's control
    /// socket, then the interposer's audit socket.
    pub fn reachable_sockets(&self) -> (Option<PathBuf>, Option<PathBuf>) {
        (
            self.adversary.as_ref().map(|(p, _)| p.clone()),
            self.audit.clone(),
        )
    }

    /// The child's variables: proxy variables with this run's token, the preload and
    /// what the interposer needs (snapshot, state dir, the proxy and DNS addresses as
    /// the command sees them), the adversary's socket and the shim PATH.
    pub fn child_env(
        &self,
        proxy: Option<SocketAddr>,
        dns: Option<SocketAddr>,
    ) -> Result<Vec<(String, String)>> {
        let ours = self.sockets.is_some() || self.loopback.is_some();
        let token = ours.then(|| self.token.clone());
        let mut env: Vec<(String, String)> = vec![];
        if let (Some(addr), Some(t)) = (proxy, &token) {
            env.extend(crate::proxy::child_env(addr, t));
        }
        if let Interposer::On(lib) = &self.interposer {
            let ends = inject::Endpoints {
                proxy,
                proxy_token: token.clone(),
                dns,
                audit: self.audit.clone(),
            };
            let existing = std::env::var_os(inject::PRELOAD_VAR);
            for (k, v) in inject::child_env(
                existing.as_deref(),
                lib,
                &self.snapshot,
                &self.state_dir,
                &ends,
            ) {
                env.push((utf8(k)?, utf8(v)?));
            }
        }
        if let Some((path, _)) = &self.adversary {
            env.push((
                crate::adversary::control::ENV_VAR.into(),
                utf8(path.clone().into_os_string())?,
            ));
        }
        if let Some((_, vars)) = &self.inject {
            env.extend(vars.iter().cloned());
        }
        if let Some(sh) = &self.shims {
            env.extend(sandpit_shims::child_env(&sh.dir, &sh.path));
            env.push((
                sandpit_shims::exec::SNAPSHOT_VAR.into(),
                utf8(self.snapshot.clone().into_os_string())?,
            ));
            if let Some(addr) = proxy {
                let url = match &token {
                    Some(t) => format!("http://sandpit:{t}@{addr}"),
                    None => format!("http://{addr}"),
                };
                env.push((sandpit_shims::exec::PROXY_URL_VAR.into(), url));
            }
        }
        Ok(env)
    }

    /// What the proxy lets through, for the start-up line: `filtered, 3 allowed
    /// hosts`, or `unrestricted: public addresses only`.
    fn proxy_rules(&self) -> String {
        match self.policy.network.mode.value {
            NetMode::Unrestricted => "unrestricted: public addresses only".into(),
            _ => {
                let n = self.policy.network.allow.len();
                format!(
                    "filtered, {n} allowed host{}",
                    if n == 1 { "" } else { "s" }
                )
            }
        }
    }

    /// The layers part of the start-up line after the kernel layer, for a run whose
    /// network is not bridged (macOS): e.g. `interposer, proxy (filtered, 3 allowed
    /// hosts on 127.0.0.1:PORT), shims (17 tools)`.
    pub fn describe_unbridged(&self) -> Vec<String> {
        let mut parts = self.describe_interposer();
        parts.push(match (self.policy.network.mode.value, &self.loopback) {
            (NetMode::Offline, _) => "network off".into(),
            (_, Some((addr, _))) => format!("proxy ({} on {addr})", self.proxy_rules()),
            (_, None) => "proxy (external)".into(),
        });
        if let Some(sh) = &self.shims {
            parts.push(format!("shims ({} tools)", sh.tools.len()));
        }
        if let Some(n) = self.nofile {
            if n < 4096 {
                parts.push(format!("open-file limit {n}"));
            }
        }
        parts
    }

    /// Why refusals of this run may go unrecorded: the interposer reports each one it
    /// makes, the kernel layer none.
    pub fn unrecorded(&self) -> Option<String> {
        if let Interposer::Off(why) = &self.interposer {
            return Some(format!("the interposer is off ({why})"));
        }
        self.static_agent.first().map(|a| {
            format!(
                "the agent program {} is static (no interposer in it)",
                a.display()
            )
        })
    }

    /// The interposer's part of the start-up line, and the agent programs it cannot
    /// enter (codex's static binary behind its Node wrapper).
    fn describe_interposer(&self) -> Vec<String> {
        let mut parts = vec![match &self.interposer {
            Interposer::On(_) => "interposer".into(),
            Interposer::Off(why) => format!("interposer OFF ({why})"),
        }];
        for a in &self.static_agent {
            let name = a.file_name().map_or_else(
                || a.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            parts.push(format!(
                "agent program {name} static: no interposer in it, only in what it spawns"
            ));
        }
        parts
    }

    /// The command as the child runs it. With shims on, a bare program name that has
    /// a shim goes through it (`curl URL` runs `<shims>/curl URL`), as it would when
    /// typed inside the sandbox: the launcher execs with its own PATH, which does not
    /// start with the shim directory.
    pub fn command(&self, command: &[OsString]) -> Vec<OsString> {
        let mut argv = command.to_vec();
        if let (Some(sh), Some(first)) = (&self.shims, argv.first_mut()) {
            let bare = first.to_str().filter(|n| !n.contains('/'));
            if let Some(name) = bare.filter(|n| sh.tools.iter().any(|t| t == n)) {
                *first = sh.dir.join(name).into_os_string();
            }
        }
        argv
    }

    /// The layers part of the start-up line, e.g. `kernel (namespaces+Landlock ABI
    /// 6+seccomp), interposer, proxy (filtered, 3 hosts), dns, shims (17 tools)`.
    #[cfg(target_os = "linux")]
    pub fn describe(&self, plan: &crate::sandbox::linux::Plan, s: &KernelSupport) -> String {
        use crate::sandbox::linux::{plan::NetPlan, Mode};
        let mut k = vec![];
        if plan.mode == Mode::Namespaces {
            k.push("namespaces".to_string());
        }
        if let Some(abi) = s.landlock_abi {
            k.push(format!("Landlock ABI {abi}"));
        }
        k.push("seccomp".into());
        let mut parts = vec![format!("kernel ({})", k.join("+"))];
        parts.extend(self.describe_interposer());
        match &plan.net {
            NetPlan::Bridge { dns_relay_to, .. } => {
                parts.push(if self.sockets.is_some() {
                    format!("proxy ({})", self.proxy_rules())
                } else {
                    "proxy (external socket)".into()
                });
                if dns_relay_to.is_some() {
                    parts.push("dns".into());
                }
            }
            NetPlan::Offline => parts.push("network off".into()),
        }
        if let Some(sh) = &self.shims {
            parts.push(format!("shims ({} tools)", sh.tools.len()));
        }
        if let Some(n) = self.nofile {
            if n < 4096 {
                parts.push(format!("open-file limit {n}"));
            }
        }
        parts.join(", ")
    }

    /// The bridge's listener from the spawn ([`crate::sandbox::linux::Running::take_bridge`]):
    /// `start` serves the proxy on it directly.
    pub fn serve_bridge(&mut self, listener: std::net::TcpListener) {
        self.bridge = Some(listener);
    }

    /// The run's first process (launcher's view, after the spawn): the proxy finds
    /// the process behind each connection among it and its descendants.
    pub fn attribute_to(&mut self, root: u32) {
        self.run_root = Some(root);
    }

    /// Whether this launch runs sandpit's own proxy (so it can serve the bridge).
    pub fn has_own_proxy(&self) -> bool {
        self.sockets.is_some()
    }

    /// Serve the proxy and DNS sockets (after the fork: this starts threads).
    /// `log`, when given, also receives every proxy and DNS decision.
    pub fn start(&mut self, log: Option<Arc<dyn crate::proxy::AuditSink>>) -> Result<Services> {
        let mut services = Services {
            net: None,
            adversary: None,
            ssh_agent: None,
        };
        if let Some(agent) = self.ssh_agent.take() {
            let hosts = Arc::new(crate::sshagent::PolicyHosts::new(
                self.policy.clone(),
                agent.plan().known_hosts.clone(),
            ));
            let tally = Arc::new(crate::sshagent::Tally::default());
            agent.serve(hosts, tally.clone());
            services.ssh_agent = Some(tally);
        }
        let mut review = None;
        if let Some((_, listener)) = self.adversary.take() {
            let (service, reviewer) =
                start_adversary(&self.policy, listener, self.on_verdict.clone())?;
            if reviews(&self.policy, sandpit_policy::ReviewEvent::Network) {
                review = Some(crate::proxy::Reviewing(Arc::new(
                    crate::adversary::NetworkReview::new(reviewer, service.rt.handle().clone()),
                )));
            }
            services.adversary = Some(service);
        }
        let listener = match (self.sockets.as_mut(), self.loopback.take()) {
            (Some(s), _) => match (s.proxy.take(), s.dns.take()) {
                (Some(l), Some(d)) => Listener::Bridge(l, d),
                _ => return Ok(services),
            },
            (None, Some((_, l))) => Listener::Loopback(l),
            (None, None) => return Ok(services),
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sandpit-proxy")
            .enable_all()
            .build()
            .map_err(|e| LaunchError::Proxy(format!("tokio runtime: {e}")))?;
        let _enter = rt.enter();
        use crate::proxy::limits::Limit;
        // The live rules (`sandpit allow`/`deny`) when set, else the policy; with
        // [credentials], a sentinel bound for another host is refused first.
        let rules: Arc<dyn crate::proxy::Decide> = match &self.decide {
            Some(d) => d.clone(),
            None => self.policy.clone(),
        };
        let decide: Arc<dyn crate::proxy::Decide> = match &self.inject {
            Some((inject, _)) => Arc::new(crate::proxy::mitm::SentinelGuard {
                inner: rules,
                inject: inject.clone(),
            }),
            None => rules,
        };
        let resolver = Arc::new(crate::dns::Resolver::new(crate::dns::Upstream::System));
        let (sink, mut rx) = crate::proxy::ChannelSink::new(CHANNEL);
        let sent = sink.sent();
        let handled = Arc::new(AtomicU64::new(0));
        let channel = Arc::new(sink);
        let sink: Arc<dyn crate::proxy::AuditSink> = channel.clone();
        let logged = log.clone();
        let proxy = crate::proxy::Proxy::new(
            decide.clone(),
            resolver.clone(),
            sink.clone(),
            crate::proxy::ProxyConfig {
                token: Some(self.token.clone()),
                review,
                ask: self.ask.clone(),
                connections: Limit::from_rule(&self.policy.limits.connections),
                connections_per_second: Limit::from_rule(
                    &self.policy.limits.connections_per_second,
                ),
                inject: self.inject.as_ref().map(|(i, _)| i.clone()),
                run: self.run_root.map(|root| crate::service::peer::Run { root }),
                ..crate::proxy::ProxyConfig::default()
            },
        );
        let (running, dns_sock) = match listener {
            Listener::Bridge(l, d) => (proxy.serve_unix_std(l), Some(d)),
            Listener::Loopback(l) => (proxy.serve_tcp_std(l), None),
        };
        let running = running.map_err(|e| LaunchError::Proxy(e.to_string()))?;
        let bridge = match self.bridge.take() {
            Some(l) => Some(
                proxy
                    .serve_tcp_std(l)
                    .map_err(|e| LaunchError::Proxy(e.to_string()))?,
            ),
            None => None,
        };
        if let Some(dns_sock) = dns_sock {
            serve_dns(
                decide.clone(),
                resolver.clone(),
                sink.clone(),
                dns_sock,
                rt.handle().clone(),
            )?;
        }
        // macOS: DNS over TCP on loopback, for the interposer's resolver hooks.
        let dns_tcp = match self.loopback_dns.take() {
            Some((_, l)) => Some(
                crate::dns::DnsServer::new(decide, resolver, sink)
                    .serve_tcp_std(l)
                    .map_err(|e| LaunchError::Proxy(e.to_string()))?,
            ),
            None => None,
        };

        let denied: Arc<Mutex<Denials>> = Arc::default();
        let d = denied.clone();
        let h = handled.clone();
        // With an audit log, its summary names the denials; this line is the fallback.
        let summarize = log.is_none();
        rt.spawn(async move {
            while let Some(ev) = rx.recv().await {
                if let Some(log) = &log {
                    log.record(ev.clone());
                }
                let _counted = Counted(&h);
                if ev.allow || !summarize {
                    continue;
                }
                if let Ok(mut d) = d.lock() {
                    d.count += 1;
                    let what = if ev.port == 0 {
                        format!("{} (dns)", ev.host)
                    } else {
                        format!("{}:{}", ev.host, ev.port)
                    };
                    if d.hosts.len() < 5 && !d.hosts.contains(&what) {
                        d.hosts.push(what);
                    }
                }
            }
        });
        drop(_enter);
        services.net = Some(NetServices {
            rt,
            _proxy: running,
            _bridge: bridge,
            _dns_tcp: dns_tcp,
            denied,
            sent,
            handled,
            channel,
            log: logged,
        });
        Ok(services)
    }
}

/// The proxy's listener: a unix socket behind the bridge (with the DNS responder's
/// socket), or loopback TCP.
enum Listener {
    Bridge(UnixListener, UnixDatagram),
    Loopback(std::net::TcpListener),
}

/// Answer DNS queries arriving on `dns_sock` from the bridge's relay, which runs in
/// this process. A datagram from any other process is dropped unread: in degraded
/// mode another run's sandbox can reach this socket's path (Landlock has no right
/// for sending to a unix socket), and this run's resolver would carry its data out
/// in query names. The kernel reports the sender's pid (`SO_PASSCRED`); only a
/// process privileged over the pid namespace could claim another.
fn serve_dns(
    decide: Arc<dyn crate::proxy::Decide>,
    resolver: Arc<crate::dns::Resolver>,
    sink: Arc<dyn crate::proxy::AuditSink>,
    dns_sock: UnixDatagram,
    handle: tokio::runtime::Handle,
) -> Result<()> {
    let dns = crate::dns::DnsServer::new(decide, resolver, sink);
    let dns_sock = Arc::new(dns_sock);
    std::thread::Builder::new()
        .name("sandpit-dns".into())
        .spawn(move || {
            let me = std::process::id() as libc::pid_t;
            let mut buf = [0u8; 4096];
            loop {
                let Ok((n, Some(pid), Some(from))) = sys::recv_with_pid(&dns_sock, &mut buf) else {
                    continue;
                };
                if pid != me {
                    continue;
                }
                let (packet, dns, out) = (buf[..n].to_vec(), dns.clone(), dns_sock.clone());
                handle.spawn(async move {
                    if let Some(reply) = dns.handle(&packet).await {
                        let _ = out.send_to_addr(&reply, &from);
                    }
                });
            }
        })
        .map_err(|e| LaunchError::Proxy(format!("DNS thread: {e}")))?;
    Ok(())
}

/// Counts one handled event when dropped (however the loop body ends).
struct Counted<'a>(&'a AtomicU64);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

#[derive(Default)]
struct Denials {
    count: u64,
    hosts: Vec<String>,
}

/// The proxy and DNS responder while the command runs.
/// The adversary's reviewer serving its control socket while the command runs.
struct AdversaryService {
    rt: tokio::runtime::Runtime,
    task: tokio::task::JoinHandle<()>,
}

/// Whether `[adversary].review` names `event`.
fn reviews(policy: &Policy, event: sandpit_policy::ReviewEvent) -> bool {
    policy
        .adversary
        .as_ref()
        .is_some_and(|a| a.review.contains(&event))
}

fn start_adversary(
    policy: &Policy,
    listener: UnixListener,
    on_verdict: Option<Arc<OnVerdict>>,
) -> Result<(AdversaryService, Arc<crate::adversary::Reviewer>)> {
    let err = |e: &dyn std::fmt::Display| LaunchError::Adversary(e.to_string());
    let env: Vec<(String, String)> = std::env::vars().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("sandpit-adversary")
        .enable_all()
        .build()
        .map_err(|e| err(&e))?;
    let _enter = rt.enter();
    let reviewer = crate::adversary::Reviewer::from_policy(policy, &env)
        .map_err(|e| err(&e))?
        .ok_or_else(|| err(&"no [adversary] in the policy"))?;
    let reviewer = match on_verdict {
        Some(f) => reviewer.on_verdict(move |q, v| {
            let action = match q.event {
                sandpit_policy::ReviewEvent::Exec => "exec",
                sandpit_policy::ReviewEvent::Network => "connect",
                sandpit_policy::ReviewEvent::Write => "write",
            };
            f(action, &q.argv, v)
        }),
        None => reviewer,
    };
    listener.set_nonblocking(true).map_err(|e| err(&e))?;
    let listener = tokio::net::UnixListener::from_std(listener).map_err(|e| err(&e))?;
    let reviewer = Arc::new(reviewer);
    let task = rt.spawn(crate::adversary::control::serve(listener, reviewer.clone()));
    drop(_enter);
    Ok((AdversaryService { rt, task }, reviewer))
}

struct NetServices {
    rt: tokio::runtime::Runtime,
    _proxy: crate::proxy::Running,
    _bridge: Option<crate::proxy::Running>,
    /// The loopback DNS responder (macOS).
    _dns_tcp: Option<crate::proxy::Running>,
    denied: Arc<Mutex<Denials>>,
    /// Events the proxy and DNS put into the channel, and those the logger handled.
    sent: Arc<AtomicU64>,
    handled: Arc<AtomicU64>,
    /// What the channel dropped, and the log told of it at the end.
    channel: Arc<crate::proxy::ChannelSink>,
    log: Option<Arc<dyn crate::proxy::AuditSink>>,
}

/// Events the proxy and DNS responder may queue for the logger (a flood of
/// decisions past it is counted, and the log says how many).
const CHANNEL: usize = 16 * 1024;

/// What runs in the launcher while the command runs: the audit receiver and the
/// proxy and DNS responder.
pub struct Services {
    net: Option<NetServices>,
    adversary: Option<AdversaryService>,
    ssh_agent: Option<Arc<crate::sshagent::Tally>>,
}

impl Services {
    /// Stop serving; lines summarising what was denied, if anything.
    pub fn finish(self) -> Vec<String> {
        let mut lines = vec![];
        if let Some(net) = self.net {
            lines.extend(net.finish());
        }
        if let Some(a) = self.adversary {
            a.task.abort();
            a.rt.shutdown_background();
        }
        if let Some(line) = self.ssh_agent.and_then(|t| t.summary()) {
            lines.push(line);
        }
        lines
    }
}

impl NetServices {
    fn finish(self) -> Option<String> {
        // Wait (briefly, bounded) until the logger has handled every event sent so
        // far: the decisions about the command's last connections.
        let sent = self.sent.load(Ordering::Acquire);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while self.handled.load(Ordering::Acquire) < sent && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        let line = self.denied.lock().ok().and_then(|d| {
            (d.count > 0).then(|| {
                format!(
                    "sandpit: the network layer refused or could not complete {} request{} ({}{}); `sandpit explain connect HOST:PORT` names the rule",
                    d.count,
                    if d.count == 1 { "" } else { "s" },
                    d.hosts.join(", "),
                    if d.hosts.len() >= 5 { ", …" } else { "" }
                )
            })
        });
        drop(self._proxy);
        self.rt.shutdown_background();
        // Never dropped unsaid: what the channel refused, and what it still held.
        let unhandled = self
            .sent
            .load(Ordering::Acquire)
            .saturating_sub(self.handled.load(Ordering::Acquire));
        if let Some(log) = &self.log {
            log.lost(self.channel.dropped() + unhandled);
        }
        line
    }
}

/// Stop the just-started command when a layer failed after the fork: the launcher
/// forwards the SIGTERM it sends itself.
pub fn abort_command() {
    sys::terminate_self();
}
