//! `sandpit run [--profile P] [--allow-degraded] -- CMD ARGS…`: run a command under
//! the kernel layer. Prints one line to stderr saying which layers are active, then
//! passes the command's exit status through. If a layer the mode needs cannot be
//! applied, the command does not start (exit 125) and the error names the layer and
//! the flag that would accept a weaker mode.
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Agent profile (profiles/<name>.toml) once the policy loader lands.
    #[arg(long)]
    pub profile: Option<String>,
    /// Accept a weaker kernel layer (Landlock + seccomp without namespaces, or no
    /// Landlock) when the full one cannot be set up; the weaker mode is reported.
    #[arg(long)]
    pub allow_degraded: bool,
    /// Unix socket of sandpit's proxy: the sandbox reaches it as 127.0.0.1:PORT.
    /// Without it the sandbox has no network at all.
    #[arg(long, value_name = "PATH")]
    pub proxy_socket: Option<PathBuf>,
    /// Port the proxy appears on inside the sandbox.
    #[arg(long, default_value_t = 3128)]
    pub proxy_port: u16,
    /// Command and arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// Credential paths under HOME masked by default (until the policy crate provides
/// `files.block_read`).
const DEFAULT_BLOCK_READ: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".config/gcloud",
    ".azure",
    ".docker",
    ".kube",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".npmrc",
    ".pypirc",
    ".password-store",
    ".local/share/keyrings",
];

/// Paths inside the workspace that code outside the sandbox would later run or trust.
const DEFAULT_PROTECTED: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".sandpit.toml",
    ".mcp.json",
    ".claude",
    ".codex",
    ".vscode",
];

/// The inputs the kernel plan needs, before `sandpit_policy` provides them.
#[derive(Debug, Clone)]
pub struct Defaults {
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub state_dir: PathBuf,
    pub scratch: PathBuf,
}

fn canonical(p: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(p).with_context(|| format!("resolving {}", p.display()))
}

/// Lexically normalise an absolute path (no filesystem access): for paths that may
/// not exist, under a canonical parent.
fn join(base: &Path, rel: &str) -> PathBuf {
    let mut p = base.to_path_buf();
    for c in Path::new(rel).components() {
        if let std::path::Component::Normal(c) = c {
            p.push(c)
        }
    }
    p
}

impl Defaults {
    pub fn from_env() -> Result<Defaults> {
        let home = std::env::var_os("HOME").context("HOME is not set")?;
        let home = canonical(Path::new(&home))?;
        let workspace = canonical(&std::env::current_dir().context("current directory")?)?;
        let state_dir = home.join(".sandpit");
        std::fs::create_dir_all(&state_dir)
            .with_context(|| format!("creating {}", state_dir.display()))?;
        let state_dir = canonical(&state_dir)?;
        let runs = state_dir.join("run");
        std::fs::create_dir_all(&runs).with_context(|| format!("creating {}", runs.display()))?;
        let scratch = runs.join(format!("{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&scratch)
                .with_context(|| format!("creating scratch dir {}", scratch.display()))?;
        }
        Ok(Defaults {
            home,
            workspace,
            state_dir,
            scratch,
        })
    }
}

#[cfg(target_os = "linux")]
pub fn run(args: RunArgs) -> Result<i32> {
    use crate::sandbox::linux::{self, Layer, Mode, Network, SpawnError};

    if let Some(p) = &args.profile {
        eprintln!("sandpit: --profile {p}: profiles are not loaded yet; using built-in defaults");
    }
    let d = Defaults::from_env()?;
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
    let network = match &args.proxy_socket {
        Some(s) => Network::Proxy {
            socket: std::path::absolute(s).context("proxy socket path")?,
            port: args.proxy_port,
            resolver: None,
        },
        None => Network::Offline,
    };
    let input = linux::Input {
        mode,
        home: d.home.clone(),
        workspace: d.workspace.clone(),
        scratch: d.scratch.clone(),
        state_dir: d.state_dir.clone(),
        writable: vec![],
        read_denied: DEFAULT_BLOCK_READ
            .iter()
            .map(|r| join(&d.home, r))
            .collect(),
        read_allowed: vec![],
        write_protected: DEFAULT_PROTECTED
            .iter()
            .map(|r| join(&d.workspace, r))
            .collect(),
        network,
        cwd: d.workspace.clone(),
    };
    let plan = linux::plan(&input, &linux::HostFs)?;
    eprintln!("sandpit: {}", describe(&plan, &support));
    let layers = linux::Layers {
        landlock_abi: support.landlock_abi,
    };
    let result = linux::run(&plan, &args.command, &layers);
    let _ = std::fs::remove_dir_all(&d.scratch);
    match result {
        Ok(code) => Ok(code),
        Err(SpawnError::Layer { layer, message }) => {
            let hint = match layer {
                Layer::UserNamespace | Layer::Landlock => {
                    " Pass --allow-degraded to accept a weaker mode."
                }
                _ => "",
            };
            bail!("{layer} could not be set up: {message}; the command was not started.{hint}")
        }
        Err(e) => Err(e.into()),
    }
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
