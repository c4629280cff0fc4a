//! Where the policy layers come from on this machine, and the flags that form the
//! last layer. `sandpit_policy` does the loading; this module only finds the sources.
#![forbid(unsafe_code)]
use sandpit_policy::{Context, Layer, LoadOptions, Policy, Source, BUILTIN_PROFILES};
use std::path::{Path, PathBuf};

/// Policy flags shared by `run`, `config`, `explain` and `check`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PolicyArgs {
    /// Agent profile (default: the command's name when a profile of that name exists).
    #[arg(long, value_name = "NAME", global = true)]
    pub profile: Option<String>,
    /// User config file (default: $SANDPIT_CONFIG, then ~/.sandpit/config.toml).
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// The project directory (default: the current directory).
    #[arg(long, value_name = "DIR", global = true)]
    pub workspace: Option<PathBuf>,
    /// Also allow connections to HOST[:PORT] for this run.
    #[arg(long = "allow-host", value_name = "HOST", global = true)]
    pub allow_host: Vec<String>,
    /// Also block HOST[:PORT] for this run.
    #[arg(long = "block-host", value_name = "HOST", global = true)]
    pub block_host: Vec<String>,
    /// Also make PATH writable for this run.
    #[arg(long = "allow-write", value_name = "PATH", global = true)]
    pub allow_write: Vec<String>,
    /// Also make PATH unreadable for this run.
    #[arg(long = "block-read", value_name = "PATH", global = true)]
    pub block_read: Vec<String>,
    /// Network mode for this run: filtered, offline or unrestricted.
    #[arg(long = "network", value_name = "MODE", global = true)]
    pub network: Option<String>,
    /// Let commands listen on loopback ports for this run.
    #[arg(long = "allow-local-binding", global = true)]
    pub allow_local_binding: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Policy(#[from] sandpit_policy::Error),
    #[error("HOME is not set to an absolute path; sandpit needs it to find ~/.sandpit and the credentials it protects")]
    NoHome,
    #[error("workspace {path}: {source}")]
    Workspace {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} given with --config does not exist")]
    MissingConfig { path: String },
    #[error("{0}")]
    Git(String),
}

/// The policy and the sources it was built from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub policy: Policy,
    /// The profile in effect, if any.
    pub profile: Option<String>,
    /// Every source that took part, lowest layer first.
    pub sources: Vec<(Layer, String)>,
    /// What the agent's own configuration changed that a run says at start
    /// ([`crate::agentkeys::settle`]).
    pub notes: Vec<String>,
}

pub fn home() -> Result<PathBuf, ConfigError> {
    match std::env::var_os("HOME").map(PathBuf::from) {
        Some(h) if h.is_absolute() => Ok(sandpit_policy::path::resolve_existing(&h)),
        _ => Err(ConfigError::NoHome),
    }
}

/// sandpit's own state: `~/.sandpit`.
pub fn state_dir(home: &Path) -> PathBuf {
    home.join(".sandpit")
}

/// Where per-run scratch directories are made: `$XDG_RUNTIME_DIR/sandpit`, else
/// `/tmp/sandpit-<uid>`.
pub fn scratch_root() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(d) if d.is_absolute() && d.is_dir() => d.join("sandpit"),
        _ => std::env::temp_dir().join(format!("sandpit-{}", crate::sys::uid())),
    }
}

fn workspace(args: &PolicyArgs) -> Result<PathBuf, ConfigError> {
    let raw = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|source| ConfigError::Workspace {
            path: ".".into(),
            source,
        })?,
    };
    std::fs::canonicalize(&raw).map_err(|source| ConfigError::Workspace {
        path: raw.display().to_string(),
        source,
    })
}

/// The profile for this run: `--profile`, else the command's basename when a profile
/// of that name exists. A profile in `~/.sandpit/profiles/NAME.toml` replaces the
/// built-in one of the same name.
fn profile_source(
    args: &PolicyArgs,
    command: Option<&str>,
    state: &Path,
) -> Result<Option<(String, Source)>, ConfigError> {
    let (name, explicit) = match (&args.profile, command) {
        (Some(p), _) => (p.clone(), true),
        (None, Some(cmd)) => match Path::new(cmd).file_name().and_then(|n| n.to_str()) {
            Some(n) => (n.to_string(), false),
            None => return Ok(None),
        },
        (None, None) => return Ok(None),
    };
    if name.is_empty() || name.contains(['/', '\0']) || name.starts_with('.') {
        return Ok(None);
    }
    let user_path = state.join("profiles").join(format!("{name}.toml"));
    if let Some(src) = Source::read(Layer::Profile, &user_path)? {
        return Ok(Some((name, src)));
    }
    if let Some((_, text)) = BUILTIN_PROFILES.iter().find(|(n, _)| *n == name) {
        return Ok(Some((
            name.clone(),
            Source::new(
                Layer::Profile,
                format!("profiles/{name}.toml (built-in)"),
                *text,
            ),
        )));
    }
    if explicit {
        let known: Vec<&str> = BUILTIN_PROFILES.iter().map(|(n, _)| *n).collect();
        return Err(sandpit_policy::Error::UnknownProfile {
            name,
            path: user_path.display().to_string(),
            hint: format!("built-in profiles: {}", known.join(", ")),
        }
        .into());
    }
    Ok(None)
}

/// The last layer: command-line flags, expressed as a TOML source so they are
/// validated exactly like files.
fn flags_source(args: &PolicyArgs) -> Option<Source> {
    use toml::{Table, Value};
    let list = |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
    let mut files = Table::new();
    if !args.allow_write.is_empty() {
        files.insert("allow_write".into(), list(&args.allow_write));
    }
    if !args.block_read.is_empty() {
        files.insert("block_read".into(), list(&args.block_read));
    }
    let mut net = Table::new();
    if let Some(m) = &args.network {
        net.insert("mode".into(), Value::String(m.clone()));
    }
    if !args.allow_host.is_empty() {
        net.insert("allow".into(), list(&args.allow_host));
    }
    if !args.block_host.is_empty() {
        net.insert("block".into(), list(&args.block_host));
    }
    if args.allow_local_binding {
        net.insert("allow_local_binding".into(), Value::Boolean(true));
    }
    let mut doc = Table::new();
    if !files.is_empty() {
        doc.insert("files".into(), Value::Table(files));
    }
    if !net.is_empty() {
        doc.insert("network".into(), Value::Table(net));
    }
    if doc.is_empty() {
        return None;
    }
    Some(Source::new(
        Layer::Flags,
        "command line",
        toml::to_string(&doc).unwrap_or_default(),
    ))
}

/// The user's config file (`--config`, else `$SANDPIT_CONFIG`, else
/// `~/.sandpit/config.toml` in the state directory `state`), and whether it was
/// named (then it must exist).
pub fn user_config(args: &PolicyArgs, state: &std::path::Path) -> (PathBuf, bool) {
    match (&args.config, std::env::var_os("SANDPIT_CONFIG")) {
        (Some(p), _) => (p.clone(), true),
        (None, Some(p)) if !p.is_empty() => (PathBuf::from(p), true),
        _ => (state.join("config.toml"), false),
    }
}

/// Find and load every layer for a run of `command` (or for inspection when `None`).
/// `scratch` is the run's scratch directory (`$TMPDIR` in the policy).
pub fn load(
    args: &PolicyArgs,
    command: Option<&str>,
    scratch: PathBuf,
) -> Result<Loaded, ConfigError> {
    let home = home()?;
    let state = state_dir(&home);
    let ws = workspace(args)?;
    let context = Context {
        home: home.clone(),
        workspace: ws.clone(),
        scratch: sandpit_policy::path::resolve_existing(&scratch),
        state_dir: sandpit_policy::path::resolve_existing(&state),
    };
    let mut opts = LoadOptions::new(context);
    let mut sources = vec![(Layer::Default, "built-in default".to_string())];
    let mut profile = None;
    if let Some((name, src)) = profile_source(args, command, &state)? {
        sources.push((Layer::Profile, src.name.clone()));
        profile = Some(name);
        opts.profile = Some(src);
    }
    let user_path = Some(user_config(args, &state));
    if let Some((path, required)) = user_path {
        match Source::read(Layer::User, &path)? {
            Some(src) => {
                sources.push((Layer::User, src.name.clone()));
                opts.user = Some(src);
            }
            None if required => {
                return Err(ConfigError::MissingConfig {
                    path: path.display().to_string(),
                })
            }
            None => {}
        }
    }
    // A directory there is the empty placeholder another run in this workspace keeps
    // while `.sandpit.toml` does not exist (see `sandbox::linux::plan::Placeholder`).
    let project = ws.join(".sandpit.toml");
    let placeholder = std::fs::symlink_metadata(&project).is_ok_and(|m| m.is_dir());
    if let Some(src) = (!placeholder)
        .then(|| Source::read(Layer::Project, &project))
        .transpose()?
        .flatten()
    {
        sources.push((Layer::Project, src.name.clone()));
        opts.project = Some(src);
    }
    if let Some(src) = flags_source(args) {
        sources.push((Layer::Flags, src.name.clone()));
        opts.flags = Some(src);
    }
    let mut policy = sandpit_policy::load(&opts)?;
    // What git's configuration names inside the workspace (a worktree hooks
    // directory): protected on every layer and in `explain` alike.
    crate::gitcfg::protect(&mut policy).map_err(ConfigError::Git)?;
    // The same for the other version-control systems' directories.
    crate::vcs::protect(&mut policy);
    #[cfg(target_os = "linux")]
    crate::caches::grant(&mut policy);
    // The agent's keys: its own configuration's custom providers bound, and the
    // credentials whose source is missing set aside (sandpit's environment).
    let notes = crate::agentkeys::settle(&mut policy, profile.as_deref(), &|v| {
        std::env::var_os(v).and_then(|x| x.into_string().ok())
    });
    Ok(Loaded {
        policy,
        profile,
        sources,
        notes,
    })
}
