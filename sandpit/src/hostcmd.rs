//! The launcher's own programs on the host, outside any sandbox: a credential's
//! `command:` source, the git asked for its configuration (gitcfg.rs), codesign
//! (cli/wrap.rs). Each is started through [`command`], so nothing a sandbox left
//! behind runs in it:
//!
//! - its working directory is `/` (refused when a writable root of the run holds
//!   it): a `json.py` or `./script` the sandbox left in the project is not what
//!   `python3 -c "import json"` or `sh -c ./script` finds;
//! - its `PATH` has no empty or relative entry and no directory in or under a
//!   writable root of the run (the workspace, the scratch directories, every
//!   `files.allow_write` root), links resolved; the program itself is looked up on
//!   that `PATH`, and one that resolves into a writable root is refused;
//! - its environment has none of the variables that make an interpreter, the
//!   dynamic loader or a shell load code from elsewhere ([`REMOVED`],
//!   [`REMOVED_PREFIXES`]; docs/credentials.md has the table with the reason for
//!   each), and `PYTHONNOUSERSITE=1` when Python's per-user site directory is
//!   writable to the sandbox.
//!
//! What the programs then do themselves (a credential command that names a file in
//! the workspace) is the user's own command line; docs/credentials.md says so.
#![forbid(unsafe_code)]
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use sandpit_policy::Policy;

/// Variables removed from a host program's environment, each one making a
/// program load code (or take flags that do) from a place it names.
pub const REMOVED: &[&str] = &[
    // Shells.
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "ZDOTDIR",
    // glibc.
    "GCONV_PATH",
    // Python.
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONEXECUTABLE",
    "PYTHONPYCACHEPREFIX",
    "PYTHONPLATLIBDIR",
    "PYTHONBREAKPOINT",
    "PYTHONWARNINGS",
    // Node, npm, Bun, Deno.
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "BUN_OPTIONS",
    "DENO_DIR",
    // Ruby.
    "RUBYLIB",
    "RUBYOPT",
    "GEM_HOME",
    "GEM_PATH",
    "BUNDLE_GEMFILE",
    // Perl.
    "PERL5LIB",
    "PERLLIB",
    "PERL5OPT",
    "PERL5DB",
    // Java.
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    // Tcl, R, PHP.
    "TCLLIBPATH",
    "R_LIBS",
    "R_LIBS_USER",
    "R_PROFILE",
    "R_PROFILE_USER",
    "R_ENVIRON",
    "R_ENVIRON_USER",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    // Go.
    "GOFLAGS",
    "GOENV",
    // git's own programs (`git` runs `git-NAME` from there).
    "GIT_EXEC_PATH",
    // OpenSSL's config loads engines and providers (shared objects).
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    // GTK, GIO and Qt modules (a password prompt is a GUI program).
    "GTK_PATH",
    "GTK_MODULES",
    "GTK3_MODULES",
    "GIO_EXTRA_MODULES",
    "QT_PLUGIN_PATH",
    "QT_QPA_PLATFORM_PLUGIN_PATH",
];

/// Families removed by prefix (compared case-insensitively for npm's, which npm
/// reads in either case).
pub const REMOVED_PREFIXES: &[&str] = &[
    // The dynamic loader: LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, …
    "LD_",
    // macOS's: DYLD_INSERT_LIBRARIES, DYLD_LIBRARY_PATH, …
    "DYLD_",
    // bash's exported functions (`BASH_FUNC_git%%`): they replace commands.
    "BASH_FUNC_",
    // npm's settings from the environment: node-options, script-shell, userconfig…
    "NPM_CONFIG_",
    // Lua's module paths and init code (LUA_PATH_5_4, …).
    "LUA_PATH",
    "LUA_CPATH",
    "LUA_INIT",
];

/// `PATH` for a host program when the launcher has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether the variable `name` is removed from a host program's environment.
pub fn removed(name: &OsStr) -> bool {
    let Some(n) = name.to_str() else {
        // A name that is not UTF-8 is no variable a program here reads; dropped.
        return true;
    };
    let upper = n.to_ascii_uppercase();
    REMOVED.contains(&n)
        || REMOVED_PREFIXES.iter().any(|p| {
            if *p == "NPM_CONFIG_" {
                upper.starts_with(p)
            } else {
                n.starts_with(p)
            }
        })
}

/// The directories the sandbox of a run can write, links resolved (each kept as
/// written too).
#[derive(Debug, Clone, Default)]
pub struct Writable(Vec<PathBuf>);

impl Writable {
    /// The writable roots of a run under `policy`: the workspace, the run's scratch
    /// directory and the directory of every run's, every `files.allow_write` root
    /// (a glob's literal part).
    pub fn of(policy: &Policy) -> Writable {
        let ctx = &policy.context;
        let mut roots = vec![
            ctx.workspace.clone(),
            // The run's scratch directory, and the directory every run's is made
            // in (config::scratch_root).
            ctx.scratch.clone(),
            ctx.scratch
                .parent()
                .filter(|p| p.parent().is_some())
                .unwrap_or(&ctx.scratch)
                .to_path_buf(),
            // Writable when the run grants it (Linux), whether or not it is yet.
            crate::caches::dir(ctx),
        ];
        roots.extend(policy.files.allow_write.iter().map(|r| {
            if sandpit_policy::glob::is_glob(r.value.as_os_str().as_encoded_bytes()) {
                sandpit_policy::glob::literal_prefix(&r.value)
            } else {
                r.value.clone()
            }
        }));
        Writable::from_roots(roots)
    }

    /// These roots (and where their links lead).
    pub fn from_roots(roots: impl IntoIterator<Item = PathBuf>) -> Writable {
        let mut out = vec![];
        for r in roots {
            if !r.is_absolute() {
                continue;
            }
            for p in real_forms(&r) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        Writable(out)
    }

    /// The root that holds `p` (as written or with its links resolved), if any.
    pub fn holding(&self, p: &Path) -> Option<&Path> {
        let forms = real_forms(p);
        self.0
            .iter()
            .find(|r| forms.iter().any(|f| sandpit_policy::path::is_within(f, r)))
            .map(PathBuf::as_path)
    }
}

/// `p` normalized, resolved as the kernel resolves it (when it exists), and with
/// the links of its longest existing ancestor resolved.
fn real_forms(p: &Path) -> Vec<PathBuf> {
    let mut v = vec![sandpit_policy::path::normalize(p)];
    if let Ok(c) = std::fs::canonicalize(p) {
        v.push(c);
    }
    v.push(sandpit_policy::path::resolve_existing(p));
    v.dedup();
    v
}

/// Why a host program was not started.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(
        "{program} was not found on PATH (outside the directories the sandbox can write: {path:?})"
    )]
    NotFound { program: String, path: OsString },
    #[error("{program} is in {root}, which the sandbox can write: sandpit does not run it outside the sandbox")]
    InWritableRoot { program: String, root: String },
    #[error("/ is writable to the sandbox, so there is no directory for {program} to run in that the sandbox cannot change")]
    NoDirectory { program: String },
}

/// `PATH` for a host program: `path` without empty or relative entries and
/// without any directory in or under a writable root.
pub fn clean_path(path: &OsStr, writable: &Writable) -> OsString {
    let kept: Vec<PathBuf> = std::env::split_paths(path)
        .filter(|d| d.is_absolute() && writable.holding(d).is_none())
        .collect();
    std::env::join_paths(kept).unwrap_or_default()
}

/// The environment of a host program, from the launcher's `vars`: [`removed`]
/// variables left out, `PATH` cleaned, `PWD` the working directory `/`, and
/// `PYTHONNOUSERSITE=1` when the sandbox can write Python's per-user directories.
pub fn clean_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    writable: &Writable,
    home: Option<&Path>,
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = vec![];
    let mut path = None;
    for (k, v) in vars {
        if k == "PATH" {
            path = Some(clean_path(&v, writable));
        } else if k == "PWD" || k == "OLDPWD" || removed(&k) {
            continue;
        } else {
            out.push((k, v));
        }
    }
    // Without a PATH of the launcher's, the shell's usual one (cleaned alike).
    let path = path.unwrap_or_else(|| clean_path(OsStr::new(DEFAULT_PATH), writable));
    out.push(("PATH".into(), path));
    out.push(("PWD".into(), "/".into()));
    if let Some(h) = home {
        // Python adds ~/.local/lib/pythonX.Y/site-packages (~/Library/Python/X.Y on
        // macOS) and runs the `.pth` files there at every start.
        let user_site = [h.join(".local/lib"), h.join("Library/Python")];
        if user_site.iter().any(|d| writable.holding(d).is_some()) {
            out.retain(|(k, _)| k != "PYTHONNOUSERSITE");
            out.push(("PYTHONNOUSERSITE".into(), "1".into()));
        }
    }
    out
}

/// A `Command` for `program` (a name looked up on the cleaned `PATH`, or an
/// absolute path) to run on the host: in `/`, with the cleaned environment.
/// Refused when `/` is writable to the sandbox, when the program is not found
/// outside the writable roots, or when it resolves into one.
pub fn command(program: &str, writable: &Writable) -> Result<Command, HostError> {
    let cwd = Path::new("/");
    if writable.holding(cwd).is_some() {
        return Err(HostError::NoDirectory {
            program: program.into(),
        });
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let env = clean_env(std::env::vars_os(), writable, home.as_deref());
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let exe = if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| p.is_absolute() && p.is_file())
    } else {
        crate::sys::which(program, &path, cwd)
    };
    let Some(exe) = exe else {
        return Err(HostError::NotFound {
            program: program.into(),
            path,
        });
    };
    if let Some(root) = writable.holding(&exe) {
        return Err(HostError::InWritableRoot {
            program: exe.display().to_string(),
            root: root.display().to_string(),
        });
    }
    let mut c = Command::new(&exe);
    c.current_dir(cwd).env_clear().envs(env);
    Ok(c)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn roots(d: &Path) -> Writable {
        Writable::from_roots([d.join("ws"), d.join("tmp")])
    }

    #[test]
    fn a_runs_writable_roots_are_its_workspace_scratch_cache_and_allow_write() {
        use sandpit_policy::{Context, Layer, LoadOptions, Source};
        let ctx = Context {
            home: "/h".into(),
            workspace: "/h/p".into(),
            scratch: "/run/u/sandpit/run-1".into(),
            state_dir: "/h/.sandpit".into(),
        };
        let mut o = LoadOptions::new(ctx.clone());
        o.user = Some(Source::new(
            Layer::User,
            "u.toml",
            "[files]\nallow_write = [\"~/tools\", \"/opt/x/*/bin\"]\n",
        ));
        let w = Writable::of(&sandpit_policy::load(&o).unwrap());
        for inside in [
            "/h/p/bin",
            "/run/u/sandpit/run-1/x",
            "/run/u/sandpit/run-2",
            "/h/tools/bin",
            "/opt/x/y/bin",
        ] {
            assert!(w.holding(Path::new(inside)).is_some(), "{inside}");
        }
        let cache = crate::caches::dir(&ctx).join("cargo/bin");
        assert!(w.holding(&cache).is_some());
        for outside in [
            "/h",
            "/h/bin",
            "/h/.local/bin",
            "/run/u",
            "/opt/y",
            "/usr/bin",
            "/",
        ] {
            assert!(w.holding(Path::new(outside)).is_none(), "{outside}");
        }
    }

    #[test]
    fn path_loses_relative_empty_and_writable_entries() {
        let d = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(d.path()).unwrap();
        for sub in ["ws/bin", "tmp", "tools", "outside"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        // A link outside that leads into the workspace is in it.
        std::os::unix::fs::symlink(d.join("ws/bin"), d.join("tools/link")).unwrap();
        let w = roots(&d);
        let path = format!(
            "{ws}/bin::bin:./x:{tmp}:{tools}/link:{outside}:{ws}/../ws/bin:/usr/bin",
            ws = d.join("ws").display(),
            tmp = d.join("tmp").display(),
            tools = d.join("tools").display(),
            outside = d.join("outside").display(),
        );
        let clean = clean_path(OsStr::new(&path), &w);
        assert_eq!(
            clean,
            OsString::from(format!("{}:/usr/bin", d.join("outside").display()))
        );
    }

    #[test]
    fn code_loading_variables_are_removed_and_others_kept() {
        let w = Writable::from_roots([PathBuf::from("/nonexistent-ws")]);
        let vars = [
            "PYTHONPATH",
            "NODE_OPTIONS",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "BASH_ENV",
            "BASH_FUNC_git%%",
            "npm_config_script_shell",
            "NPM_CONFIG_USERCONFIG",
            "LUA_PATH_5_4",
            "PERL5OPT",
            "JAVA_TOOL_OPTIONS",
            "RUBYOPT",
            "PWD",
            "HOME",
            "PYTHONSAFEPATH",
            "GIT_CONFIG_GLOBAL",
            "LANG",
        ]
        .map(|k| (OsString::from(k), OsString::from("v")));
        let env = clean_env(vars, &w, None);
        let names: Vec<&OsStr> = env.iter().map(|(k, _)| k.as_os_str()).collect();
        assert_eq!(
            names,
            [
                "HOME",
                "PYTHONSAFEPATH",
                "GIT_CONFIG_GLOBAL",
                "LANG",
                "PATH",
                "PWD"
            ]
        );
        assert!(env.contains(&("PWD".into(), "/".into())));
    }

    #[test]
    fn python_user_site_off_only_where_the_sandbox_writes_it() {
        let home = PathBuf::from("/nonexistent-home");
        let vars = || [(OsString::from("PATH"), OsString::from("/usr/bin"))];
        let nousersite = |w: &Writable| {
            clean_env(vars(), w, Some(&home))
                .iter()
                .any(|(k, v)| k == "PYTHONNOUSERSITE" && v == "1")
        };
        assert!(nousersite(&Writable::from_roots([home.clone()])));
        assert!(nousersite(&Writable::from_roots([home.join(".local")])));
        assert!(!nousersite(&Writable::from_roots([home.join("project")])));
    }

    #[test]
    fn programs_are_found_outside_writable_roots_and_run_in_root() {
        let d = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(d.path()).unwrap();
        let w = Writable::from_roots([d.clone()]);
        let c = command("sh", &w).unwrap();
        assert!(Path::new(c.get_program()).is_absolute());
        assert_eq!(c.get_current_dir(), Some(Path::new("/")));
        // An absolute program inside a writable root is refused.
        let planted = d.join("git");
        std::fs::write(&planted, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(
            command(planted.to_str().unwrap(), &w),
            Err(HostError::InWritableRoot { .. })
        ));
        // With / writable there is nowhere to run.
        let all = Writable::from_roots([PathBuf::from("/")]);
        assert!(matches!(
            command("sh", &all),
            Err(HostError::NoDirectory { .. })
        ));
    }
}
