//! `sandpit run [--profile P] [--shims] [--kernel-only] [--allow-degraded] -- CMD ARGS…`:
//! run a command under every layer (docs/run.md): the kernel layer (here), and —
//! through `crate::launch` — the policy snapshot, the interposer, the proxy and DNS
//! responder behind the kernel bridge, and the PATH shims. Prints one line to stderr
//! saying which layers are active, then passes the command's exit status through.
//! If a layer the mode needs cannot be set up, the command does not start (exit 125)
//! and the error names the layer and the flag that would accept a weaker mode.
use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Result;

use crate::config::PolicyArgs;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub audit: crate::audit::RunOptions,
    /// Accept a weaker kernel layer (Landlock + seccomp without namespaces, or no
    /// Landlock) when the full one cannot be set up; the weaker mode is reported.
    #[arg(long)]
    pub allow_degraded: bool,
    /// Use this unix socket as the proxy instead of starting sandpit's own (tests):
    /// the sandbox reaches it as 127.0.0.1:PORT.
    #[arg(long, value_name = "PATH")]
    pub proxy_socket: Option<PathBuf>,
    /// Port the proxy appears on inside the sandbox [default: 3128 in namespace
    /// mode; a free port in the fallback mode, where it is a port of this machine].
    #[arg(long)]
    pub proxy_port: Option<u16>,
    /// With --proxy-socket: unix datagram socket of a DNS responder; the sandbox's
    /// resolv.conf points at 127.0.0.1 and queries are relayed there.
    #[arg(long, value_name = "PATH")]
    pub dns_socket: Option<PathBuf>,
    /// Put sandpit's PATH shims (curl, wget, nc, ssh, git, …) first on the command's
    /// PATH (also on with `shims.enabled = true` in the policy).
    #[arg(long)]
    pub shims: bool,
    /// Do not inject the interposition library (kernel layer, proxy and shims only).
    #[arg(long)]
    pub kernel_only: bool,
    /// Command and arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// Run the command under this platform's kernel layer.
pub fn run(args: RunArgs) -> Result<i32> {
    if let Some(missing) = not_found(&args.command) {
        // Before anything is made or started: an agent that is not installed.
        eprintln!(
            "sandpit: error: {missing} was not found{}; the command was not started. \
             Install it (docs/agents.md says how for each agent), or give its path",
            if missing.contains('/') {
                ""
            } else {
                " on PATH"
            }
        );
        return Ok(EXIT_NOT_FOUND);
    }
    #[cfg(target_os = "linux")]
    return linux::run(args);
    #[cfg(target_os = "macos")]
    return macos::run(args);
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = args;
        anyhow::bail!("sandpit run: this platform's kernel layer is not implemented yet")
    }
}

/// The shell's exit status for a command that was not found.
pub const EXIT_NOT_FOUND: i32 = 127;

/// The command's name, if it is no program `execvp` would find (from the current
/// directory, on this process's PATH: the sandbox has the same).
fn not_found(command: &[OsString]) -> Option<String> {
    let name = command.first()?.to_str()?;
    let cwd = std::env::current_dir().ok()?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    crate::inspect::which(name, &path, &cwd)
        .is_none()
        .then(|| name.to_string())
}

/// Make the writable state directories of the agent that a fresh home lacks
/// (`launch::make_state_dirs`), and say which: they stay after the run.
fn make_state_dirs(policy: &sandpit_policy::Policy) -> Result<()> {
    let made = crate::launch::make_state_dirs(policy)?;
    let home = &policy.context.home;
    for d in made
        .iter()
        .filter(|d| !made.iter().any(|o| o != *d && o.starts_with(d)))
    {
        let shown = crate::audit::summary::tilde(home, &d.to_string_lossy());
        eprintln!("sandpit: made {shown} (files.allow_write), where the agent keeps its state");
    }
    Ok(())
}

/// A fresh per-run scratch directory (mode 0700) under `root`, which must be ours.
fn make_scratch(root: &std::path::Path) -> Result<PathBuf> {
    use anyhow::{bail, Context};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .with_context(|| format!("creating {}", root.display()))?;
    let m = std::fs::symlink_metadata(root).with_context(|| format!("{}", root.display()))?;
    let me = crate::sys::uid();
    if !m.is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
        bail!(
            "scratch root {} is not a private directory owned by this user; refusing to use it",
            root.display()
        );
    }
    for n in 0..1000u32 {
        let p = root.join(format!("run-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", p.display())),
        }
    }
    bail!(
        "could not create a scratch directory under {}",
        root.display()
    )
}

#[cfg(target_os = "macos")]
#[path = "run_macos.rs"]
pub mod macos;

#[cfg(target_os = "linux")]
pub mod linux {
    //! The Linux side: policy → `sandbox::linux::Input` → plan → run.
    use super::{make_scratch, RunArgs};
    use crate::config::{load, scratch_root};
    use anyhow::{bail, Context, Result};
    use std::path::{Path, PathBuf};

    /// One placeholder lock per writable root (placeholders lie in the workspace and
    /// in agents' state directories, `~/.codex`, which runs in several workspaces
    /// share): FNV-1a of its path, stable across sandpit versions.
    fn placeholder_lock(root: &Path) -> PathBuf {
        use std::os::unix::ffi::OsStrExt;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in root.as_os_str().as_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        scratch_root().join(format!("placeholders-{h:016x}.lock"))
    }

    /// Host daemons that run code or hand out secrets on request listen on sockets,
    /// and a read-only mount does not stop `connect()`: the directories that hold
    /// them are masked like credentials. That is all of `/run` (the session bus and
    /// the systemd user manager under /run/user/UID, screen sessions, the system bus,
    /// container engines, …), the container managers' directories under /var, and
    /// where the environment puts the SSH agent's, screen's, tmux's and git's
    /// credential cache's sockets (never a directory that holds one of `keep`), and
    /// the virtual consoles the user owns.
    /// Returns them with what comes back inside them.
    fn host_sockets(keep: &[&Path]) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut masked: Vec<PathBuf> = ["/run", "/var/run"]
            .iter()
            .chain(&["/var/lib/lxd", "/var/snap/lxd/common/lxd", "/var/lib/incus"])
            .map(PathBuf::from)
            // /var/run is a link to /run on most systems: masked through it.
            .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_dir()))
            .collect();
        masked.dedup();
        // Where the user's environment puts such sockets, wherever that is: the SSH
        // agent's (the variable is withheld from the command, but a path can be
        // guessed or found), screen's and tmux's sessions, git's credential cache
        // under XDG_CACHE_HOME. Not what is masked already, and never a directory
        // that holds the workspace or home (a TMUX_TMPDIR of ~ masks only its
        // tmux-UID).
        let uid = crate::sys::uid();
        let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
        let named = [
            var("SSH_AUTH_SOCK"),
            var("SCREENDIR"),
            var("TMUX_TMPDIR").map(|d| d.join(format!("tmux-{uid}"))),
            var("XDG_CACHE_HOME").map(|d| d.join("git/credential")),
        ];
        for p in named.into_iter().flatten() {
            let Ok(p) = std::fs::canonicalize(p) else {
                continue;
            };
            if !masked.iter().any(|m| p.starts_with(m)) && !keep.iter().any(|k| k.starts_with(&p)) {
                masked.push(p);
            }
        }
        // Virtual consoles the user is logged in on (login hands the console to the
        // user): `/dev` is the host's, and only `/dev/pts` is the sandbox's own.
        for n in 1..=63 {
            let tty = PathBuf::from(format!("/dev/tty{n}"));
            if std::fs::metadata(&tty).is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == uid)
            {
                masked.push(tty);
            }
        }
        // Back inside, read-only: the file resolv.conf links to (sandpit's own is bound
        // over it), and programs kept under /run: NixOS's and Guix's system profile,
        // setuid wrappers and GPU drivers, and the directories on PATH there (not the
        // runtime directory's, which holds the session's sockets).
        let mut back: Vec<PathBuf> = std::fs::canonicalize("/etc/resolv.conf")
            .into_iter()
            .chain(
                [
                    "/run/current-system",
                    "/run/booted-system",
                    "/run/wrappers",
                    "/run/opengl-driver",
                    "/run/opengl-driver-32",
                ]
                .map(PathBuf::from),
            )
            .chain(std::env::split_paths(
                &std::env::var_os("PATH").unwrap_or_default(),
            ))
            .filter(|p| p.starts_with("/run") && !p.starts_with("/run/user"))
            .filter(|p| {
                use std::path::Component;
                p.components()
                    .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
                    && p.exists()
            })
            .collect();
        back.sort();
        back.dedup();
        (masked, back)
    }

    /// The most directory entries one glob may walk to find what it matches
    /// (`sandpit_policy::glob::expand`): some 50 ms of start-up.
    pub const GLOB_WALK: usize = sandpit_policy::glob::WALK_LIMIT;

    /// The paths `rules` name, for the kernel layer: a glob becomes what it matches
    /// when the run starts. One that would walk more than [`GLOB_WALK`] entries
    /// stops the run (the kernel layer could not hold it whole).
    fn concrete(rules: &[sandpit_policy::Rule<PathBuf>]) -> Result<Vec<PathBuf>> {
        let mut out = vec![];
        for r in rules {
            if !sandpit_policy::glob::is_glob(r.value.as_os_str().as_encoded_bytes()) {
                out.push(r.value.clone());
                continue;
            }
            let found = sandpit_policy::glob::expand(&r.value, GLOB_WALK).map_err(|e| {
                anyhow::anyhow!(
                    "{} {:?} ({}) would walk more than {} entries under {} to find what it \
                     matches; the command was not started, as the kernel layer could not \
                     hold it whole. Narrow it (a directory before the `**`, e.g. \"src/**/.env\")",
                    r.origin.key,
                    r.origin.entry,
                    r.origin.location(),
                    e.visited - 1,
                    sandpit_policy::glob::literal_prefix(&r.value).display()
                )
            })?;
            out.extend(found);
        }
        Ok(out)
    }

    /// The kernel plan's input from the effective policy. `block_read` → masked,
    /// `allow_read` → carve-outs, `allow_write` → writable roots, `block_write` →
    /// read-only (inside writable roots, including paths that do not exist yet),
    /// `context.scratch` → TMPDIR, `context.state_dir` → read-only.
    pub fn plan_input(
        policy: &sandpit_policy::Policy,
        mode: crate::sandbox::linux::Mode,
        proxy: Option<(PathBuf, u16, Option<PathBuf>)>,
        cwd: PathBuf,
    ) -> Result<crate::sandbox::linux::Input> {
        use crate::sandbox::linux::Network;
        use sandpit_policy::NetMode;
        let values = concrete;
        let ctx = &policy.context;
        // Unrestricted goes through the proxy as filtered does: the proxy lifts host
        // filtering, and the kernel layer keeps everything else (docs/run.md) but UDP
        // to public addresses, which the launcher relays from a TUN device inside
        // (`sandbox/linux/udp.rs`). Not with network review: the reviewer sees only
        // the proxy's connections (`sandpit_policy::decide_datagram` refuses UDP then).
        let reviewed = policy
            .adversary
            .as_ref()
            .is_some_and(|a| a.review.contains(&sandpit_policy::ReviewEvent::Network));
        let udp = policy.network.mode.value == NetMode::Unrestricted && !reviewed;
        let network = match policy.network.mode.value {
            NetMode::Offline => Network::Offline,
            NetMode::Filtered | NetMode::Unrestricted => match proxy {
                Some((socket, port, dns_socket)) => Network::Proxy {
                    socket,
                    port,
                    resolver: None,
                    dns_socket,
                    udp,
                },
                // No proxy to reach: nothing is allowed out.
                None => Network::Offline,
            },
        };
        let cwd = if cwd.starts_with(&ctx.workspace) {
            cwd
        } else {
            ctx.workspace.clone()
        };
        // A block_read entry that a later layer carves out whole (a profile's
        // allow_read of its own agent's auth file) is not masked. Only an entry at or
        // below some allow_read rule can be carved out: the rest skip `decide`.
        let files = &policy.files;
        let mut read_denied: Vec<PathBuf> = concrete(&files.block_read)?
            .into_iter()
            .filter(|p| {
                !files
                    .allow_read
                    .iter()
                    .any(|a| sandpit_policy::decide::rule_depth(&a.value, p).is_some())
                    || sandpit_policy::decide(policy, &sandpit_policy::Request::Read(p)).is_denied()
            })
            .collect();
        let (sockets, back) = host_sockets(&[&ctx.home, &ctx.workspace]);
        read_denied.extend(sockets);
        // Every other socket a program on this machine has bound, wherever it is
        // (the kernel's socket table names them): hidden unless the policy lets the
        // sandbox connect to it. Only a mount hides one: Landlock has no right for
        // connecting, so the fallback mode leaves them (docs/kernel.md).
        let host_sockets = if mode == crate::sandbox::linux::Mode::Namespaces {
            crate::sandbox::linux::sockets::bound()
                .into_iter()
                .filter(|s| {
                    let unix = sandpit_policy::Request::Unix {
                        path: s,
                        host: true,
                    };
                    sandpit_policy::decide(policy, &unix).is_denied()
                })
                .collect()
        } else {
            vec![]
        };
        let mut read_allowed: Vec<PathBuf> = values(&policy.files.allow_read)?;
        read_allowed.extend(back);
        // Sockets the policy allows come back inside whatever mask holds them (all
        // of /run, ~/.docker).
        // The sockets themselves: a directory or glob there must not bring back
        // the other files of a masked directory.
        for p in values(&policy.isolation.unix_sockets)? {
            read_allowed.extend(crate::sandbox::linux::sockets::named_by(&p, GLOB_WALK));
        }
        Ok(crate::sandbox::linux::Input {
            mode,
            home: ctx.home.clone(),
            workspace: ctx.workspace.clone(),
            scratch: ctx.scratch.clone(),
            state_dir: ctx.state_dir.clone(),
            // A writable root that does not exist yet has nothing to bind: it stays
            // absent (and unwritable, as its parent is read-only) for this run.
            writable: concrete(&policy.files.allow_write)?
                .into_iter()
                .filter(|p| p.symlink_metadata().is_ok())
                .collect(),
            read_denied,
            read_allowed,
            write_protected: values(&policy.files.block_write)?,
            network,
            allow_local_binding: policy.network.allow_local_binding.value,
            loopback: crate::sandbox::linux::loopback::services(policy),
            cwd,
            processes: policy.limits.processes.value,
            processes_void: crate::sandbox::linux::process_limit_void(
                mode == crate::sandbox::linux::Mode::Namespaces,
            ),
            env_withheld: crate::launch::withheld_env(policy),
            devices: values(&policy.files.devices)?,
            host_sockets,
            nested_user_namespaces: policy.isolation.nested_user_namespaces(),
            tmp_bytes: policy.limits.tmp_bytes.value,
            read_if_present: policy
                .files
                .block_write
                .iter()
                .filter(|r| {
                    crate::gitcfg::is_include(&r.origin)
                        || r.origin.file == crate::vcs::ORIGIN
                        || (r.value.parent() == Some(&ctx.workspace)
                            && r.value
                                .file_name()
                                .and_then(|n| n.to_str())
                                .is_some_and(|n| {
                                    crate::sandbox::linux::plan::READ_IF_PRESENT.contains(&n)
                                }))
                })
                .map(|r| r.value.clone())
                .collect(),
        })
    }

    pub fn run(args: RunArgs) -> Result<i32> {
        use crate::sandbox::linux::{Layer, Mode, SpawnError};

        // No trial namespace here (that costs a few ms): the run itself tries, and a
        // failure to create the user namespace is handled below.
        let support = crate::sandbox::linux::probe::quick();
        if !support.seccomp {
            bail!("seccomp is not available in this kernel; sandpit cannot run without it");
        }
        let no_userns = |why: &str| {
            anyhow::anyhow!(
                "user namespaces are unavailable ({why}), so reads of credential paths cannot \
                 be masked and the network cannot be isolated; the command was not started. \
                 Pass --allow-degraded to run with Landlock + seccomp only (weaker)."
            )
        };
        let degrade = |why: &str| -> Result<Mode> {
            if !args.allow_degraded {
                return Err(no_userns(why));
            }
            if support.landlock_abi.is_none() {
                bail!(
                    "neither user namespaces ({why}) nor Landlock are available: no kernel \
                     layer can confine files; the command was not started"
                );
            }
            Ok(Mode::LandlockOnly)
        };
        let mut mode = if std::env::var_os("SANDPIT_FORCE_FALLBACK").is_some() {
            degrade("SANDPIT_FORCE_FALLBACK is set")?
        } else {
            Mode::Namespaces
        };
        if support.landlock_abi.is_none() && !args.allow_degraded {
            bail!(
                "Landlock is unavailable in this kernel; the command was not started. Pass \
                 --allow-degraded to run with namespaces + seccomp only."
            );
        }
        crate::timing::mark("arguments parsed, kernel probed");
        let scratch = make_scratch(&scratch_root())?;
        let mut result = run_with_scratch(&args, mode, &support, &scratch);
        if mode == Mode::Namespaces {
            if let Some(SpawnError::Layer {
                layer: Layer::UserNamespace,
                message,
            }) = result
                .as_ref()
                .err()
                .and_then(|e| e.downcast_ref::<SpawnError>())
            {
                let message = message.clone();
                mode = match degrade(&message) {
                    Ok(m) => m,
                    Err(e) => {
                        crate::trash::discard(&scratch);
                        return Err(e);
                    }
                };
                result = run_with_scratch(&args, mode, &support, &scratch);
            }
        }
        let allow_degraded = args.allow_degraded;
        crate::trash::discard(&scratch);
        match result {
            Ok(code) => Ok(code),
            Err(e) => match e.downcast::<SpawnError>() {
                Ok(SpawnError::Layer { layer, message }) => {
                    let hint = match layer {
                        Layer::UserNamespace | Layer::Landlock if !allow_degraded => {
                            " Pass --allow-degraded to accept a weaker mode."
                        }
                        _ => "",
                    };
                    bail!("{layer} could not be set up: {message}; the command was not started.{hint}")
                }
                Ok(other) => Err(other.into()),
                Err(e) => Err(e),
            },
        }
    }

    fn run_with_scratch(
        args: &RunArgs,
        mode: crate::sandbox::linux::Mode,
        support: &crate::sandbox::KernelSupport,
        scratch: &Path,
    ) -> Result<i32> {
        use crate::sandbox::linux;
        // Before the audit session's and the launch's threads exist (they inherit it).
        linux::block_forwarded_signals().context("blocking signals")?;
        let cmd0 = args.command.first().and_then(|c| c.to_str());
        let mut loaded = load(&args.policy, cmd0, scratch.to_path_buf())?;
        // Learn mode reaches the interposer in the snapshot, from this flag alone.
        loaded.policy.learn = args.audit.learn;
        crate::timing::mark("policy loaded");
        // Audit log, audit socket and learn mode first: the launch's interposer
        // reports to the session's socket (and it makes ~/.sandpit, which the plan
        // then binds read-only).
        // Loopback services are relayed straight to the host port, past the proxy where
        // the reviewer sits: asking for network review with them would review
        // nothing for those connections.
        let reviewed = loaded
            .policy
            .adversary
            .as_ref()
            .is_some_and(|a| a.review.contains(&sandpit_policy::ReviewEvent::Network));
        let direct = crate::sandbox::linux::loopback::services(&loaded.policy);
        if reviewed && !direct.is_empty() {
            let entries: Vec<&str> = direct.iter().map(|l| l.entry.as_str()).collect();
            bail!(
                "adversary.review includes \"network\", but the loopback services in \
                 network.allow ({}) are relayed directly to this machine's port, where the \
                 reviewer does not see them; the command was not started. Remove them from \
                 network.allow or \"network\" from adversary.review",
                entries.join(", ")
            );
        }
        let mut session = crate::audit::Session::start(&loaded.policy, &args.audit, &args.command)?;
        crate::timing::mark("audit session started");
        let mut launch = crate::launch::prepare(
            &with_private_tmp(&loaded.policy, mode),
            &crate::launch::Options {
                command: &args.command,
                shims: args.shims,
                kernel_only: args.kernel_only,
                external_proxy: args.proxy_socket.is_some(),
                support,
                scratch,
                audit_socket: session.audit_socket(),
                run_id: session.run(),
                run_dir: session.run_dir(),
                loopback_proxy: false,
            },
        )?;
        // `sandpit allow`/`deny` during the run (src/control); the reviewer's verdicts
        // and the OTLP export's masking of secrets (src/telemetry).
        let (live, control) = crate::control::prepare(&loaded.policy, &session, launch.snapshot());
        launch.set_decide(live);
        launch.set_on_verdict(session.verdict_recorder());
        session.set_export_masker(crate::telemetry::masker(&loaded.policy));
        // Fallback mode: the bridge listens on this machine's loopback, so it takes a
        // free port (bound now, handed to the spawn) unless one was asked for.
        crate::timing::mark("run prepared (snapshot, interposer, sockets)");
        let bridge_listener = match (mode, args.proxy_port) {
            (linux::Mode::LandlockOnly, None) => Some(
                crate::sys::tcp_listener(("127.0.0.1", 0))
                    .context("binding the proxy bridge on 127.0.0.1")?,
            ),
            _ => None,
        };
        let proxy_port = match &bridge_listener {
            Some(l) => l.local_addr().context("proxy bridge address")?.port(),
            None => args.proxy_port.unwrap_or(3128),
        };
        let proxy = match &args.proxy_socket {
            Some(s) => Some((
                std::path::absolute(s).context("proxy socket path")?,
                proxy_port,
                match &args.dns_socket {
                    Some(d) => Some(std::path::absolute(d).context("DNS socket path")?),
                    None => None,
                },
            )),
            None => launch
                .network()
                .map(|(proxy, dns)| (proxy, proxy_port, Some(dns))),
        };
        let cwd = std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .context("current directory")?;
        // Package caches of sandpit's own, writable (the host's stay read-only).
        let cache = crate::caches::dir(&loaded.policy.context);
        let caches = crate::caches::granted(&loaded.policy);
        if caches {
            crate::caches::ensure(&cache, crate::sys::uid())?;
        }
        super::make_state_dirs(&loaded.policy)?;
        let mut input = plan_input(&loaded.policy, mode, proxy, cwd)?;
        // Other runs' sockets (audit, adversary) and every run's log stay out of
        // reach: only this run's directory shows through.
        let state = &loaded.policy.context.state_dir;
        input
            .read_denied
            .extend([state.join("run"), state.join("logs")]);
        input.read_allowed.push(session.run_dir().to_path_buf());
        // Held before the plan looks for placeholders other runs made.
        let mut placeholder_locks = vec![];
        if mode == linux::Mode::Namespaces {
            // Once each: two of this process's locks on one file would stand in each
            // other's way when the last run takes it exclusively.
            // Not the run's own scratch directory ($TMPDIR): no other run shares it,
            // and its lock file would be left behind by every run.
            let roots: std::collections::BTreeSet<&PathBuf> = std::iter::once(&input.workspace)
                .chain(&input.writable)
                .filter(|r| !r.starts_with(&input.scratch))
                .collect();
            for root in roots {
                let path = placeholder_lock(root);
                let f = linux::lock_placeholders(&path)
                    .with_context(|| format!("locking {}", path.display()))?;
                placeholder_locks.push((root.clone(), f));
            }
        }
        let mut plan = linux::plan(&input, &linux::HostFs::default())?;
        crate::timing::mark("planned");
        if caches {
            plan.env.extend(crate::caches::env(&cache));
        }
        plan.env.extend(session.child_env());
        if plan.sealed_git() {
            // The sealed `.git` of a directory that is no repository is not one go
            // can stamp a build from.
            let mut flags = std::env::var("GOFLAGS").unwrap_or_default();
            flags.push_str(if flags.is_empty() { "" } else { " " });
            flags.push_str("-buildvcs=false");
            plan.env.push(("GOFLAGS".into(), flags));
        }
        launch.apply(&mut plan)?;
        let profile = loaded
            .profile
            .as_deref()
            .map(|p| format!(" [profile {p}]"))
            .unwrap_or_default();
        let line = format!(
            "layers: {}{profile}; {}",
            launch.describe(&plan, support),
            describe(&plan, support)
        );
        eprintln!("sandpit: {line}");
        session.kernel_layer(&line);
        session.set_unrecorded(launch.unrecorded());
        // The run's id and a secret no process of the sandbox sees: the sandbox
        // cannot take the names files are moved aside to before they are.
        let quarantine_tag = format!(
            "{}-{}",
            session.run(),
            crate::sys::random_hex(4).context("reading /dev/urandom")?
        );
        // Remove what the last runs left (placeholders, their own directories) and
        // make the next runs' placeholders, off the start and the end of every run.
        // Forked while the launcher is single-threaded.
        let ns = plan.mode == linux::Mode::Namespaces;
        let tender = linux::start_tender(ns.then(|| state.clone()), &scratch_root());
        let layers = linux::Layers {
            landlock_abi: support.landlock_abi,
            placeholder_locks,
            spare_state: Some(state.clone()),
            quarantine_tag: quarantine_tag.clone(),
            loopback_observer: Some(loopback_audit(session.sink())),
            // The policy is copied for the relay's thread only where there is one.
            udp_judge: matches!(plan.net, linux::plan::NetPlan::Bridge { udp: true, .. })
                .then(|| udp_judge(&loaded.policy, session.sink())),
            bridge_listener,
            serve_bridge: launch.has_own_proxy(),
            tender,
        };
        let mut running = match linux::spawn(&plan, &launch.command(&args.command), &layers) {
            Ok(r) => r,
            Err(e) => {
                session.finish(None);
                return Err(e.into());
            }
        };
        crate::timing::mark("command exec'd");
        session.listen();
        let control = crate::control::serve(control);
        if let Some(l) = running.take_bridge() {
            launch.serve_bridge(l);
        }
        // Threads (the proxy runtime) only after the fork.
        let services = match launch.start(Some(session.sink())) {
            Ok(s) => s,
            Err(e) => {
                crate::launch::abort_command();
                let _ = running.wait();
                session.finish(None);
                return Err(e.into());
            }
        };
        crate::timing::mark("proxy and DNS started");
        let result = running.wait();
        crate::timing::mark("command and its supervisors exited");
        for line in services.finish() {
            eprintln!("{line}");
        }
        for p in &plan.absent_git_files {
            quarantine(p, &quarantine_tag, &session);
        }
        crate::timing::mark("proxy and DNS stopped");
        drop(control);
        session.finish(result.as_ref().ok().copied());
        crate::timing::mark("audit session finished, run directory removed");
        Ok(result?)
    }

    /// A protected file git reads whenever it exists (`.git/commondir`) that appeared
    /// during the run past the interposer (a static program, a raw system call; for
    /// `config.worktree`, possibly git on the host): moved aside so that the user's
    /// git does not take its config from where the sandbox pointed it, or found moved
    /// by the mount guard, which stopped the run; said and recorded either way.
    fn quarantine(path: &Path, tag: &str, session: &crate::audit::Session) {
        use crate::sandbox::linux;
        let why = linux::absent_git_file_danger(path);
        let who = if path.file_name().is_some_and(|n| n == "config.worktree") {
            "appeared during the run (made inside the sandbox, or by git on the host: `git \
             sparse-checkout`, `git config --worktree`)"
        } else {
            "was created by the run"
        };
        let guard_moved =
            || linux::quarantine_path(path, tag).filter(|to| std::fs::symlink_metadata(to).is_ok());
        let moved = match linux::move_aside(path, tag) {
            Err(e)
                if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
                    && path.parent().is_some_and(give_back_rights) =>
            {
                linux::move_aside(path, tag)
            }
            r => r,
        };
        match moved.map(|m| m.or_else(guard_moved)) {
            Ok(None) => {}
            Ok(Some(to)) => {
                eprintln!(
                    "sandpit: warning: {} {who} ({why}); moved it to {}",
                    path.display(),
                    to.display()
                );
                session.quarantined(path, &to, why);
            }
            Err(e) => {
                eprintln!(
                    "sandpit: error: {} {who} ({why}) and could not be moved aside ({e}); \
                     remove it before running git in this workspace",
                    path.display()
                );
                session.quarantined(path, path, &format!("{why}; could not be moved: {e}"));
            }
        }
    }

    /// The run may have taken the write or search right of a directory it owns (this
    /// user's): given back to its owner, and said. Whether it was.
    fn give_back_rights(dir: &Path) -> bool {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let Ok(m) = std::fs::symlink_metadata(dir) else {
            return false;
        };
        let mode = m.mode() & 0o7777;
        if !m.is_dir() || m.uid() != crate::sys::uid() {
            return false;
        }
        if std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700)).is_err() {
            return false;
        }
        eprintln!(
            "sandpit: warning: the run had set {}'s mode to {mode:o}; it is {:o} again",
            dir.display(),
            mode | 0o700
        );
        true
    }

    /// The policy the interposer and shims decide with: in namespace mode `/tmp` and
    /// `/dev/shm` are private tmpfs mounts of this run (the plan mounts them), so
    /// writing there is allowed like the kernel allows it; in the fallback they are
    /// the host's and stay unwritable. Not when HOME or the state dir lies beneath
    /// (the plan brings them back read-only there, and an allow of the whole tmpfs
    /// would let the interposer pass writes the kernel then refuses unexplained).
    /// The plan itself is built from the policy as loaded (it must not bind the
    /// host's /tmp writable).
    pub(crate) fn with_private_tmp(
        policy: &sandpit_policy::Policy,
        mode: crate::sandbox::linux::Mode,
    ) -> sandpit_policy::Policy {
        let mut p = policy.clone();
        if mode == crate::sandbox::linux::Mode::Namespaces {
            let ctx = &policy.context;
            for dir in ["/tmp", "/dev/shm"] {
                if ctx.home.starts_with(dir) || ctx.state_dir.starts_with(dir) {
                    continue;
                }
                let mut origin = sandpit_policy::Origin::builtin("files.allow_write", dir);
                origin.file = sandpit_policy::PRIVATE_TMPFS.into();
                p.files.allow_write.push(sandpit_policy::Rule {
                    value: PathBuf::from(dir),
                    origin,
                });
            }
        }
        p
    }

    /// Connections relayed to a host loopback service go to the audit log like the
    /// proxy's decisions (the proxy is not on their path).
    fn loopback_audit(
        sink: std::sync::Arc<dyn crate::proxy::AuditSink>,
    ) -> crate::sandbox::linux::loopback::Observer {
        use crate::proxy::{AuditEvent, Way};
        crate::sandbox::linux::loopback::Observer(std::sync::Arc::new(move |svc, to| {
            let host = sandpit_policy::Host::Ip(svc.listen.ip()).to_string();
            let port = svc.listen.port();
            let (allow, reason) = match to {
                Some(a) => (
                    true,
                    format!("{host}:{port} is a loopback service of this machine, relayed to {a}"),
                ),
                None => (
                    false,
                    format!(
                        "{}nothing answers at this machine's {host}:{port}",
                        crate::audit::ALLOWED_BUT
                    ),
                ),
            };
            sink.record(AuditEvent {
                time: std::time::SystemTime::now(),
                way: Way::Loopback,
                host,
                port,
                addr: to,
                allow,
                rule: Some(svc.rule.clone()),
                reason,
            });
        }))
    }

    /// The UDP relay's judge: `sandpit_policy::decide_datagram`, each decision (a new
    /// flow, or a refused destination) written to the audit log.
    fn udp_judge(
        policy: &sandpit_policy::Policy,
        sink: std::sync::Arc<dyn crate::proxy::AuditSink>,
    ) -> crate::sandbox::linux::udp::Judge {
        use crate::proxy::{AuditEvent, Way};
        let policy = policy.clone();
        crate::sandbox::linux::udp::Judge(std::sync::Arc::new(move |dst| {
            let v = sandpit_policy::decide_datagram(&policy, dst);
            let allow = v.is_allowed();
            sink.record(AuditEvent {
                time: std::time::SystemTime::now(),
                way: Way::Udp,
                host: sandpit_policy::Host::Ip(sandpit_policy::host::canonical_ip(dst.ip()))
                    .to_string(),
                port: dst.port(),
                addr: allow.then_some(dst),
                allow,
                rule: v.rule.map(|o| o.to_string()),
                reason: v.reason,
            });
            allow
        }))
    }

    fn describe(plan: &crate::sandbox::linux::Plan, s: &crate::sandbox::KernelSupport) -> String {
        use crate::sandbox::linux::{plan::NetPlan, Mode};
        let mut parts = vec![];
        match plan.mode {
            Mode::Namespaces => {
                parts.push("namespaces (user, mount, pid, net, ipc, uts)".to_string())
            }
            Mode::LandlockOnly => parts.push("DEGRADED: no namespaces".to_string()),
        }
        match s.landlock_abi {
            Some(abi) => parts.push(format!(
                "Landlock ABI {abi}{}{}",
                if abi >= 6 { " with scopes" } else { "" },
                if plan.landlock.tcp_connect.is_some() {
                    ", TCP connect limited"
                } else {
                    ""
                }
            )),
            None => parts.push("DEGRADED: no Landlock".to_string()),
        }
        parts.push(format!(
            "seccomp ({} rules)",
            crate::sandbox::linux::seccomp::table(plan.seccomp, plan.nested_user_namespaces).len()
        ));
        if let Some(n) = plan.processes {
            parts.push(format!("at most {n} processes and threads"));
        }
        let net = match &plan.net {
            NetPlan::Bridge { port, relay_to, .. } => {
                format!(
                    "network: proxy only (127.0.0.1:{port} -> {})",
                    relay_to.display()
                )
            }
            NetPlan::Offline => "network: none".to_string(),
        };
        let mut net = net;
        if let NetPlan::Bridge { udp: true, .. } = &plan.net {
            net.push_str(&format!(
                " + UDP to public addresses (relayed from the TUN device {})",
                crate::sandbox::linux::udp::DEVICE
            ));
        }
        if !plan.loopback.is_empty() {
            let at: Vec<String> = plan.loopback.iter().map(|l| l.listen.to_string()).collect();
            net.push_str(&format!(
                " + loopback services {} (relayed to this machine)",
                at.join(", ")
            ));
        } else if let (Mode::LandlockOnly, Some(ports)) = (plan.mode, &plan.landlock.tcp_connect) {
            if ports.len() > 1 {
                net.push_str(" + loopback service ports by Landlock rule");
            }
        }
        if plan.mirror {
            net.push_str(
                "; servers on loopback inside are mirrored on this machine (allow_local_binding)",
            );
        }
        let mut line = format!("kernel layer: {}; {net}", parts.join(" + "));
        for w in &plan.weaker {
            line.push_str("; weaker: ");
            line.push_str(w);
        }
        line
    }
}
