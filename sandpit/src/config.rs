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
    /// Accept the home directory (or a directory holding it) as the workspace: all
    /// of it becomes writable. `/` is refused even so.
    #[arg(long = "allow-home-workspace", global = true)]
    pub allow_home_workspace: bool,
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
    #[error("config file {path} given with --config does not exist; hint: give the path of an existing TOML file (`sandpit init` writes a commented one at ~/.sandpit/config.toml)")]
    MissingConfig { path: String },
    #[error("{0}")]
    Git(String),
    #[error("the workspace would be {what}, and the directory sandpit runs in (or --workspace) becomes writable to the command: {why} Run sandpit from a project directory (cd into the project, or pass --workspace DIR){how}")]
    HomeWorkspace {
        what: String,
        why: &'static str,
        how: &'static str,
    },
    #[error(
        "the {what} {path} lies in {protected}, which sandpit keeps read-only ({why}): \
         a program the sandbox left there would run on this machine later. Run sandpit \
         from a project directory outside it (docs/run-later.md)"
    )]
    RunLaterRoot {
        what: &'static str,
        path: String,
        protected: String,
        why: String,
    },
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

/// Refuse a workspace that would make the home writable, before anything else is
/// done or printed: `/` always, the home or a directory holding it unless the user
/// accepted that (`--allow-home-workspace`, `files.allow_home_workspace` in their
/// own config; a project file may not, the loader says so with its line).
pub fn check_workspace(ws: &Path, home: &Path, accepted: bool) -> Result<(), ConfigError> {
    if ws == Path::new("/") {
        return Err(ConfigError::HomeWorkspace {
            what: "/".into(),
            why: "the whole filesystem that you can write, your home with it.",
            how: "; / is refused even with --allow-home-workspace.",
        });
    }
    if accepted || !home.starts_with(ws) {
        return Ok(());
    }
    let what = if ws == home {
        format!("your home directory {}", ws.display())
    } else {
        format!(
            "{}, which holds your home directory {}",
            ws.display(),
            home.display()
        )
    };
    Err(ConfigError::HomeWorkspace {
        what,
        why: "every file there that your shell, git, editor or another agent runs later on the host (~/.bashrc, ~/.gitconfig, ~/bin, ~/.local/bin) could be changed.",
        how: "; to give the command your whole home anyway, pass --allow-home-workspace or set files.allow_home_workspace = true in ~/.sandpit/config.toml.",
    })
}

/// [`check_workspace`] for `args` alone, before a run makes or prints anything
/// (`load` checks again).
pub fn check_args_workspace(args: &PolicyArgs) -> Result<(), ConfigError> {
    let home = home()?;
    let ws = workspace(args)?;
    let (user, _) = user_config(args, &state_dir(&home));
    let accepted = args.allow_home_workspace
        || Source::read(Layer::User, &user)?.is_some_and(|s| allows_home(&s));
    check_workspace(&ws, &home, accepted)
}

/// Whether the user's own config accepts the home as the workspace
/// (`files.allow_home_workspace = true`; the loader checks the file fully later).
fn allows_home(user: &Source) -> bool {
    toml::from_str::<toml::Table>(&user.text).is_ok_and(|t| {
        t.get("files")
            .and_then(|f| f.get("allow_home_workspace"))
            .and_then(toml::Value::as_bool)
            == Some(true)
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
    if args.allow_home_workspace {
        files.insert("allow_home_workspace".into(), Value::Boolean(true));
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

/// A writable root (the workspace, an `allow_write` entry) that lies in a file the
/// host runs later (`sandpit_policy::runlater`): the rule would make it read-only,
/// and a kernel layer cannot hold part of a root it binds writable, so the run is
/// refused before anything is made.
fn refuse_runlater_roots(policy: &Policy) -> Result<(), ConfigError> {
    let ctx = &policy.context;
    let roots = std::iter::once(("workspace", &ctx.workspace)).chain(
        policy
            .files
            .allow_write
            .iter()
            .filter(|r| r.origin.file != sandpit_policy::PRIVATE_TMPFS && r.value != ctx.scratch)
            .map(|r| ("allow_write entry", &r.value)),
    );
    for (what, root) in roots {
        let hit =
            policy.files.block_write.iter().find(|r| {
                sandpit_policy::runlater::is_origin(&r.origin) && root.starts_with(&r.value)
            });
        if let Some(r) = hit {
            let why = match sandpit_policy::runlater::entry(&r.origin.entry) {
                Some(e) => format!("{}: {}", e.tool, e.runs),
                None => {
                    "a directory on your PATH: its programs run when you type their name".into()
                }
            };
            return Err(ConfigError::RunLaterRoot {
                what,
                path: root.display().to_string(),
                protected: r.value.display().to_string(),
                why,
            });
        }
    }
    Ok(())
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
    // Before the project's file is read and any glob of the workspace walked.
    check_workspace(
        &ws,
        &home,
        args.allow_home_workspace || opts.user.as_ref().is_some_and(allows_home),
    )?;
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
    // What the agents' own configuration names for the host to run (a status line
    // script in ~/.claude), where the run may write it.
    crate::agentcfg::protect(&mut policy);
    // The same for the other version-control systems' directories.
    crate::vcs::protect(&mut policy);
    // The directories on the user's PATH in the home (the registry's files are
    // added by the loader under the built-in default).
    if let Some(path) = std::env::var_os("PATH") {
        sandpit_policy::runlater::protect_path(&mut policy, &path);
    }
    refuse_runlater_roots(&policy)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_and_what_holds_it_are_workspaces_only_when_accepted_and_root_never() {
        let home = Path::new("/home/me");
        for accepted in [false, true] {
            assert!(check_workspace(Path::new("/"), home, accepted).is_err());
            for ok in ["/home/me/src/p", "/home/other", "/home/me2", "/srv"] {
                assert!(
                    check_workspace(Path::new(ok), home, accepted).is_ok(),
                    "{ok}"
                );
            }
            for held in ["/home/me", "/home"] {
                let r = check_workspace(Path::new(held), home, accepted);
                assert_eq!(r.is_ok(), accepted, "{held}");
            }
        }
        let e = check_workspace(Path::new("/home"), home, false).unwrap_err();
        assert!(e
            .to_string()
            .contains("/home, which holds your home directory /home/me"));
    }

    #[test]
    fn only_a_true_allow_home_workspace_in_files_accepts() {
        let src = |t: &str| Source::new(Layer::User, "u.toml", t);
        assert!(allows_home(&src("[files]\nallow_home_workspace = true\n")));
        for no in [
            "",
            "[files]\nallow_home_workspace = false\n",
            "[files]\nallow_home_workspace = \"true\"\n",
            "allow_home_workspace = true\n",
            "[network]\nallow_home_workspace = true\n",
            "[files\n",
        ] {
            assert!(!allows_home(&src(no)), "{no}");
        }
    }
}
