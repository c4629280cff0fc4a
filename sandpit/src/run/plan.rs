//! The run plan: every decision about one run, made once and without side effects
//! (it reads the filesystem, the environment and the program; it makes, binds and
//! starts nothing). Every layer of the run is configured from it, and `explain`
//! judges with the same effective policy ([`effective`]).
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use sandpit_policy::{NetMode, Policy, ReviewEvent};

use super::Request;

/// What the plan depends on that is not configuration: the machine, and the paths
/// and ports the run has chosen (not yet made) for itself.
pub struct Facts<'a> {
    pub support: &'a crate::sandbox::KernelSupport,
    /// The Linux kernel layer's mode (namespaces, or the Landlock-only fallback).
    #[cfg(target_os = "linux")]
    pub mode: crate::sandbox::linux::Mode,
    /// The launcher's current directory, canonical.
    pub cwd: PathBuf,
    /// The run's directory `<state>/run/<id>/` (the snapshot, the sockets the layers
    /// report to; read-only inside).
    pub run_dir: PathBuf,
    /// The port the proxy appears on inside the sandbox.
    pub proxy_port: u16,
}

/// Whether the interposer goes into the command, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interposition {
    On,
    Off(String),
}

/// Whose proxy the run's connections go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proxy {
    /// None: the network is off.
    None,
    /// sandpit's own, on these unix sockets (proxy, DNS responder), bound at start.
    Own { socket: PathBuf, dns: PathBuf },
    /// Someone else's (`--proxy-socket`, `--dns-socket`).
    External {
        socket: PathBuf,
        dns: Option<PathBuf>,
    },
}

/// Everything one run does, decided before anything is made.
pub struct RunPlan {
    /// The one effective policy: built-in default, profile, user, project and flags,
    /// then git's and other VCS' protected files, the package caches, the private
    /// /tmp and learn mode. Every layer is derived from it, nothing changes it after.
    pub policy: Policy,
    pub profile: Option<String>,
    pub sources: Vec<(sandpit_policy::Layer, String)>,
    pub command: Vec<OsString>,
    pub interposer: Interposition,
    /// Agent programs (behind a wrapper script) the interposer cannot enter.
    pub static_agent: Vec<PathBuf>,
    pub shims: bool,
    pub proxy: Proxy,
    /// UDP to public addresses relayed by the launcher (`network.mode =
    /// "unrestricted"` without network review).
    pub udp_relay: bool,
    /// sandpit's package cache for this workspace, when granted.
    pub caches: Option<PathBuf>,
    /// Variables the command gets besides the layers' own (the caches').
    pub env: Vec<(String, String)>,
    /// This process's variables that never enter the sandbox.
    pub withheld: Vec<String>,
    /// An agent's state directories the run makes on a fresh home, top first, each
    /// with the `files.allow_write` entry that wants it.
    pub state_dirs: Vec<(PathBuf, String)>,
    /// The Linux kernel layer's input.
    #[cfg(target_os = "linux")]
    pub kernel: crate::sandbox::linux::Input,
}

/// The policy a run enforces, from the policy as loaded: learn mode from the flag,
/// and, where the kernel layer gives the run private `/tmp` and `/dev/shm` (Linux
/// namespace mode), writing there allowed as the kernel allows it. Not when HOME or
/// the state dir lies beneath (the kernel plan brings them back read-only there,
/// and an allow of the whole tmpfs would let the interposer pass writes the kernel
/// then refuses unexplained). `sandpit explain` judges with this same policy.
pub fn effective(loaded: Policy, private_tmp: bool, learn: bool) -> Policy {
    let mut p = loaded;
    p.learn = learn;
    if private_tmp {
        for dir in ["/tmp", "/dev/shm"] {
            let ctx = &p.context;
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

/// Whether this platform's kernel layer gives the run a private `/tmp`.
#[cfg(target_os = "linux")]
pub fn private_tmp(mode: crate::sandbox::linux::Mode) -> bool {
    mode == crate::sandbox::linux::Mode::Namespaces
}

/// Plan a run of `req` under the configuration `loaded`.
pub fn plan(req: &Request, loaded: crate::config::Loaded, facts: &Facts) -> Result<RunPlan> {
    #[cfg(target_os = "linux")]
    let private = private_tmp(facts.mode);
    #[cfg(not(target_os = "linux"))]
    let private = false;
    let policy = effective(loaded.policy, private, req.audit.learn);
    let reviewed = policy
        .adversary
        .as_ref()
        .is_some_and(|a| a.review.contains(&ReviewEvent::Network));
    // Loopback services are relayed straight to the host port, past the proxy where
    // the reviewer sits: asking for network review with them would review nothing
    // for those connections.
    #[cfg(target_os = "linux")]
    {
        let direct = crate::sandbox::linux::loopback::services(&policy);
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
    }
    if req.proxy_socket.is_none() && req.dns_socket.is_some() {
        bail!("--dns-socket needs --proxy-socket (sandpit's own proxy has its own resolver)");
    }

    // The program, inspected as `sandpit check` does: the interposer unless it cannot
    // load there (static, foreign loader, Go, …) or the user chose --kernel-only. A
    // program that cannot be inspected (not found) gets the interposer: the stricter
    // choice; the exec then fails on its own.
    let inspection = req.command.first().and_then(|c| c.to_str()).and_then(|p| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        crate::inspect::inspect(p, &path, &facts.cwd, crate::inspect::Host::current()).ok()
    });
    let interposer = if req.kernel_only {
        Interposition::Off("--kernel-only".into())
    } else {
        match inspection
            .as_ref()
            .map(|i| crate::inspect::choose_mode(i, facts.support))
        {
            Some(c) if !c.interposition => Interposition::Off(c.reasons.join("; ")),
            _ => Interposition::On,
        }
    };
    let static_agent: Vec<PathBuf> = inspection
        .as_ref()
        .map(|i| {
            crate::inspect::agent_programs(i, &policy)
                .into_iter()
                .filter(|a| !a.interposition)
                .map(|a| a.path)
                .collect()
        })
        .unwrap_or_default();

    let proxy = match (&req.proxy_socket, policy.network.mode.value) {
        (Some(s), _) => Proxy::External {
            socket: std::path::absolute(s)?,
            dns: req
                .dns_socket
                .as_deref()
                .map(std::path::absolute)
                .transpose()?,
        },
        // Filtered and unrestricted alike: every connection goes through the proxy,
        // which lifts host filtering for the latter and nothing else.
        (None, NetMode::Offline) => Proxy::None,
        (None, _) => {
            let (_, socket, dns) = crate::launch::socket_paths(&policy.context.scratch);
            Proxy::Own { socket, dns }
        }
    };
    // Not with network review: the reviewer sees only the proxy's connections
    // (`sandpit_policy::decide_datagram` refuses UDP then).
    let udp_relay =
        policy.network.mode.value == NetMode::Unrestricted && !reviewed && proxy != Proxy::None;

    #[cfg(target_os = "linux")]
    let caches = crate::caches::granted(&policy).then(|| crate::caches::dir(&policy.context));
    #[cfg(not(target_os = "linux"))]
    let caches: Option<PathBuf> = None;
    let env = caches
        .as_deref()
        .map(crate::caches::env)
        .unwrap_or_default();
    let state_dirs = crate::launch::state_dirs(&policy);
    let shims = req.shims || policy.shims.enabled;

    #[cfg(target_os = "linux")]
    let kernel = {
        let will_exist: Vec<PathBuf> = caches
            .iter()
            .cloned()
            .chain(state_dirs.iter().map(|(d, _)| d.clone()))
            .collect();
        let bridge = match &proxy {
            Proxy::None => None,
            Proxy::Own { socket, dns } => {
                Some((socket.clone(), facts.proxy_port, Some(dns.clone())))
            }
            Proxy::External { socket, dns } => {
                Some((socket.clone(), facts.proxy_port, dns.clone()))
            }
        };
        super::input::plan_input(
            &policy,
            facts.mode,
            bridge,
            udp_relay,
            facts.cwd.clone(),
            &will_exist,
            &facts.run_dir,
        )?
    };

    Ok(RunPlan {
        withheld: crate::launch::withheld_env(&policy),
        policy,
        profile: loaded.profile,
        sources: loaded.sources,
        command: req.command.clone(),
        interposer,
        static_agent,
        shims,
        proxy,
        udp_relay,
        caches,
        env,
        state_dirs,
        #[cfg(target_os = "linux")]
        kernel,
    })
}

impl RunPlan {
    /// Why the interposer stays out, `None` when it goes in.
    pub fn interposer_off(&self) -> Option<&str> {
        match &self.interposer {
            Interposition::On => None,
            Interposition::Off(why) => Some(why),
        }
    }

    /// The proxy's and DNS responder's sockets for the kernel layer's bridge.
    pub fn bridge_sockets(&self) -> Option<(&Path, Option<&Path>)> {
        match &self.proxy {
            Proxy::None => None,
            Proxy::Own { socket, dns } => Some((socket, Some(dns))),
            Proxy::External { socket, dns } => Some((socket, dns.as_deref())),
        }
    }
}
