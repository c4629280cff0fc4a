//! `sandpit run [--profile P] [--allow-degraded] -- CMD ARGS…`: run a command under
//! the kernel layer. Prints one line to stderr saying which layers are active, then
//! passes the command's exit status through. If a layer the mode needs cannot be
//! applied, the command does not start (exit 125) and the error names the layer and
//! the flag that would accept a weaker mode.
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::config::{load, scratch_root, PolicyArgs};

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
    /// Unix socket of sandpit's proxy: the sandbox reaches it as 127.0.0.1:PORT.
    /// Without it a `filtered` network means no network at all.
    #[arg(long, value_name = "PATH")]
    pub proxy_socket: Option<PathBuf>,
    /// Port the proxy appears on inside the sandbox.
    #[arg(long, default_value_t = 3128)]
    pub proxy_port: u16,
    /// Command and arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// A fresh per-run scratch directory (mode 0700) under `root`, which must be ours.
fn make_scratch(root: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .with_context(|| format!("creating {}", root.display()))?;
    let m = std::fs::symlink_metadata(root).with_context(|| format!("{}", root.display()))?;
    let me = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
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

/// The kernel plan's input from the effective policy. `block_read` → masked,
/// `allow_read` → carve-outs, `allow_write` → writable roots, `block_write` →
/// read-only (inside writable roots, including paths that do not exist yet),
/// `context.scratch` → TMPDIR, `context.state_dir` → read-only.
#[cfg(target_os = "linux")]
pub fn plan_input(
    policy: &sandpit_policy::Policy,
    mode: crate::sandbox::linux::Mode,
    proxy: Option<(PathBuf, u16)>,
    cwd: PathBuf,
) -> crate::sandbox::linux::Input {
    use crate::sandbox::linux::Network;
    use sandpit_policy::NetMode;
    let values = |v: &[sandpit_policy::Rule<PathBuf>]| v.iter().map(|r| r.value.clone()).collect();
    let ctx = &policy.context;
    let network = match policy.network.mode.value {
        NetMode::Unrestricted => Network::Host,
        NetMode::Offline => Network::Offline,
        NetMode::Filtered => match proxy {
            Some((socket, port)) => Network::Proxy {
                socket,
                port,
                resolver: None,
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
    crate::sandbox::linux::Input {
        mode,
        home: ctx.home.clone(),
        workspace: ctx.workspace.clone(),
        scratch: ctx.scratch.clone(),
        state_dir: ctx.state_dir.clone(),
        writable: values(&policy.files.allow_write),
        read_denied: values(&policy.files.block_read),
        read_allowed: values(&policy.files.allow_read),
        write_protected: values(&policy.files.block_write),
        network,
        cwd,
    }
}

#[cfg(target_os = "linux")]
pub fn run(args: RunArgs) -> Result<i32> {
    use crate::sandbox::linux::{Layer, Mode, SpawnError};

    let support = crate::sandbox::probe();
    if !support.seccomp {
        bail!("seccomp is not available in this kernel; sandpit cannot run without it");
    }
    let forced_fallback = std::env::var_os("SANDPIT_FORCE_FALLBACK").is_some();
    let mode = if support.user_namespaces && !forced_fallback {
        Mode::Namespaces
    } else if args.allow_degraded {
        Mode::LandlockOnly
    } else {
        bail!(
            "user namespaces are unavailable{}, so reads of credential paths cannot be \
             masked and the network cannot be isolated; the command was not started. \
             Pass --allow-degraded to run with Landlock + seccomp only (weaker).",
            if forced_fallback {
                " (SANDPIT_FORCE_FALLBACK)"
            } else {
                ""
            }
        );
    };
    if support.landlock_abi.is_none() {
        if mode == Mode::LandlockOnly {
            bail!(
                "neither user namespaces nor Landlock are available: no kernel layer can \
                 confine files; the command was not started"
            );
        }
        if !args.allow_degraded {
            bail!(
                "Landlock is unavailable in this kernel; the command was not started. Pass \
                 --allow-degraded to run with namespaces + seccomp only."
            );
        }
    }
    let scratch = make_scratch(&scratch_root())?;
    let result = run_with_scratch(&args, mode, &support, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    match result {
        Ok(code) => Ok(code),
        Err(e) => match e.downcast::<SpawnError>() {
            Ok(SpawnError::Layer { layer, message }) => {
                let hint = match layer {
                    Layer::UserNamespace | Layer::Landlock => {
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

#[cfg(target_os = "linux")]
fn run_with_scratch(
    args: &RunArgs,
    mode: crate::sandbox::linux::Mode,
    support: &crate::sandbox::KernelSupport,
    scratch: &Path,
) -> Result<i32> {
    use crate::sandbox::linux;
    let cmd0 = args.command.first().and_then(|c| c.to_str());
    let loaded = load(&args.policy, cmd0, scratch.to_path_buf())?;
    let proxy = match &args.proxy_socket {
        Some(s) => Some((
            std::path::absolute(s).context("proxy socket path")?,
            args.proxy_port,
        )),
        None => None,
    };
    let cwd = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .context("current directory")?;
    // Audit log, interposer socket and learn mode (before the plan: it makes
    // ~/.sandpit, which the plan then binds read-only).
    let session = crate::audit::Session::start(&loaded.policy, &args.audit, &args.command)?;
    let input = plan_input(&loaded.policy, mode, proxy, cwd);
    let mut plan = linux::plan(&input, &linux::HostFs)?;
    plan.env.extend(session.child_env());
    let profile = loaded
        .profile
        .as_deref()
        .map(|p| format!(" [profile {p}]"))
        .unwrap_or_default();
    eprintln!("sandpit: {}{profile}", describe(&plan, support));
    session.kernel_layer(&describe(&plan, support));
    let layers = linux::Layers {
        landlock_abi: support.landlock_abi,
    };
    let result = linux::run(&plan, &args.command, &layers);
    session.finish(result.as_ref().ok().copied());
    Ok(result?)
}

#[cfg(not(target_os = "linux"))]
pub fn run(_args: RunArgs) -> Result<i32> {
    bail!("sandpit run: this platform's kernel layer is not implemented yet")
}

#[cfg(target_os = "linux")]
fn describe(plan: &crate::sandbox::linux::Plan, s: &crate::sandbox::KernelSupport) -> String {
    use crate::sandbox::linux::{plan::NetPlan, Mode};
    let mut parts = vec![];
    match plan.mode {
        Mode::Namespaces => parts.push("namespaces (user, mount, pid, net, ipc, uts)".to_string()),
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
        crate::sandbox::linux::seccomp::table(plan.seccomp).len()
    ));
    let net = match &plan.net {
        NetPlan::Bridge { port, relay_to } => {
            format!(
                "network: proxy only (127.0.0.1:{port} -> {})",
                relay_to.display()
            )
        }
        NetPlan::Offline => "network: none".to_string(),
        NetPlan::Host => "network: host (unrestricted)".to_string(),
    };
    let mut line = format!("kernel layer: {}; {net}", parts.join(" + "));
    for w in &plan.weaker {
        line.push_str("; weaker: ");
        line.push_str(w);
    }
    line
}
