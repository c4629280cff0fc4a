//! `sandpit run`: one run, planned once and then carried out (docs/run.md).
//!
//! [`plan::plan`] turns the loaded configuration, the command and the platform's
//! facts into a [`RunPlan`] without side effects: the one effective policy after
//! every adjustment, and everything each layer needs derived from it. `linux::run`
//! and `macos::run` carry a plan out: they make directories, bind sockets, start
//! the audit session, the proxy and the command. `sandpit plan` prints the plan a
//! run would carry out, and `sandpit explain` judges with the same effective policy.
use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Result;

use crate::config::PolicyArgs;

#[cfg(target_os = "linux")]
pub mod input;
#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "macos")]
pub mod macos;
pub mod plan;
mod show;

pub use plan::{effective, plan, Facts, Interposition, RunPlan};
pub use show::{to_json, to_text};

/// What the user asked of a run: `sandpit run`'s and `sandpit plan`'s flags.
#[derive(Debug, clap::Args)]
pub struct Request {
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
    /// macOS: give the command what a desktop app needs to draw (window server,
    /// pasteboard, fonts, files picked in the open panel, its own container and
    /// preferences). `sandpit wrap App.app` writes it into the launcher. Apple
    /// Events and LaunchServices stay denied. Linux: no effect.
    #[arg(long)]
    pub gui: bool,
    /// Command and arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// The launch's part of a run, as the plan says: the policy snapshot, the
/// interposer, the shims, the proxy's and DNS responder's sockets (on 127.0.0.1
/// with `loopback_proxy`, macOS), the reviewer's socket.
fn launch(
    run: &RunPlan,
    session: &crate::audit::Session,
    loopback_proxy: bool,
) -> Result<crate::launch::Prepared> {
    Ok(crate::launch::prepare(
        &run.policy,
        &crate::launch::Options {
            shims: run.shims,
            interposer_off: run.interposer_off(),
            static_agent: &run.static_agent,
            external_proxy: matches!(run.proxy, plan::Proxy::External { .. }),
            scratch: &run.policy.context.scratch,
            audit_socket: session.audit_socket(),
            run_id: session.run(),
            run_dir: session.run_dir(),
            loopback_proxy,
            credentials: run.credentials.as_ref(),
            ssh_agent: run.ssh_agent.as_ref(),
        },
    )?)
}

/// Say, one line each, which credentials the run does without and why, what the
/// agent's own configuration changed about its keys, and (for an agent) the set
/// variables it does not get, with the line that would give one back.
fn say_keys(plan: &RunPlan) {
    for s in &plan.policy.credentials_skipped {
        eprintln!("sandpit: {}", s.line());
    }
    for n in &plan.notes {
        eprintln!("sandpit: {n}");
    }
    if let Some(l) = withheld_line(plan) {
        eprintln!("{l}");
    }
}

/// For a run with an agent profile: the set variables the agent does not get
/// (env.withhold), with the line that gives one back; said at start and again
/// after the summary. Not a credential's source: that one is withheld for good
/// reason, and the credential is how it gets in.
pub(crate) fn withheld_line(plan: &RunPlan) -> Option<String> {
    let mut names: Vec<&str> = (plan.withheld.iter())
        .filter(|w| !(plan.policy.credentials.iter()).any(|c| c.source_var() == Some(w.as_str())))
        .map(String::as_str)
        .collect();
    if plan.profile.is_none() || names.is_empty() {
        return None;
    }
    names.sort();
    Some(format!(
        "sandpit: withheld from the agent and all it runs: {} (env.withhold); to hand one to the agent alone: [env] agent = [\"NAME\"] in ~/.sandpit/config.toml",
        names.join(", ")
    ))
}

/// Make the writable state directories of the agent that a fresh home lacks (the
/// plan's `state_dirs`), and say which: they stay after the run. Says what
/// [`say_keys`] says first.
fn make_state_dirs(plan: &RunPlan) -> Result<()> {
    say_keys(plan);
    let made = crate::launch::make_state_dirs(&plan.state_dirs)?;
    let home = &plan.policy.context.home;
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

/// Whether a run asks the user about hosts missing from `network.allow`
/// (`network.ask_on_blocked_host`), and the words for it: on only with sandpit's
/// own proxy, in filtered mode, and a terminal (stdin and stdout) the launcher
/// relays the command's pty from. macOS has no such relay: off there.
pub fn ask_state(
    policy: &sandpit_policy::Policy,
    own_proxy: bool,
    terminal: bool,
) -> (bool, String) {
    let net = &policy.network;
    let key = &net.ask_on_blocked_host;
    let off = |why: String| (false, format!("asking about blocked hosts: off ({why})"));
    if !key.value {
        return off(format!(
            "network.ask_on_blocked_host = false, {}",
            key.origin.location()
        ));
    }
    if net.mode.value != sandpit_policy::NetMode::Filtered {
        return off(format!(
            "network.mode = {:?}: no host is denied for missing from network.allow",
            net.mode.value.as_str()
        ));
    }
    if cfg!(target_os = "macos") {
        return off("the macOS launcher relays no terminal to ask on".into());
    }
    if !own_proxy {
        return off("connections do not go through sandpit's own proxy".into());
    }
    if !terminal {
        return off(
            "stdin or stdout is not a terminal: a host missing from network.allow is denied at once"
                .into(),
        );
    }
    (
        true,
        format!(
            "asking about blocked hosts: on ({}): a connection to a host missing from network.allow waits for your answer on this terminal, denied after {}s",
            key.origin.location(),
            net.ask_timeout.value
        ),
    )
}

/// Whether stdin and stdout are terminals (the spawn relays the command's pty then).
pub fn on_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// The console a run asks on, when it asks ([`ask_state`]), and the words for it.
#[cfg(target_os = "linux")]
fn asking(
    policy: &sandpit_policy::Policy,
    own_proxy: bool,
) -> (Option<std::sync::Arc<crate::console::Console>>, String) {
    let (on, said) = ask_state(policy, own_proxy, on_terminal());
    (
        on.then(|| std::sync::Arc::new(crate::console::Console::new())),
        said,
    )
}

/// Whether a run would ask the user about a connection to `host` that `denied`
/// refused (a name `network.allow` does not name, in filtered mode, with no rule
/// behind the denial), and the words for it: `sandpit explain connect` says it.
pub fn would_ask(
    policy: &sandpit_policy::Policy,
    host: &sandpit_policy::host::Host,
    port: u16,
    denied: &sandpit_policy::Verdict,
) -> Option<String> {
    if denied.is_allowed() || denied.rule.is_some() || !sandpit_policy::askable(policy, host, port)
    {
        return None;
    }
    let key = &policy.network.ask_on_blocked_host;
    Some(if key.value && !cfg!(target_os = "macos") {
        format!(
            "a run on a terminal asks you first (network.ask_on_blocked_host, {}): once, this run, always or deny, denied after {}s without an answer; without a terminal it is denied at once",
            key.origin.location(),
            policy.network.ask_timeout.value
        )
    } else if key.value {
        "not asked: the macOS launcher relays no terminal to ask on".to_string()
    } else {
        format!(
            "not asked: network.ask_on_blocked_host = false ({})",
            key.origin.location()
        )
    })
}
