//! Files the sandbox sees as copies with the secrets taken out (docs/run.md
//! "Shell startup files" and "`.env` files"): the shells' startup files without the
//! assignments and exports of withheld variables ([`shell`]), and the workspace's
//! `.env` files with every secret-looking value replaced by a sentinel
//! ([`dotenv`]). The run plan finds them ([`discover`]: which files, and whether
//! each holds anything to take out); in Linux's mount namespace each is shown as a
//! read-only copy bound over the original ([`render`], at the run's start, with the
//! credentials' sentinels); where no mount namespace exists (the Landlock-only
//! fallback, macOS) each becomes unreadable instead (`files.block_read`).
pub mod dotenv;
pub mod shell;

use std::path::{Path, PathBuf};

use sandpit_policy::{Policy, RunEnv};

/// What a copy is made from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Kind {
    Shell(shell::Dialect),
    Dotenv,
}

/// A file shown as a copy: its path (links resolved) and how it is read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Copy {
    pub path: PathBuf,
    pub kind: Kind,
}

/// What [`discover`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Found {
    /// Each file with something to take out.
    pub copies: Vec<Copy>,
    /// The `.env` search stopped at its bound ([`DOTENV_WALK`] entries): those
    /// further in are refused by the interposer, and read as they are by a static
    /// program.
    pub dotenv_walk_stopped: bool,
    /// Every `.env` file the search found (as found and with links resolved),
    /// sorted: those the interposer lets through when the search stopped.
    pub dotenv_seen: Vec<PathBuf>,
}

/// Startup files of the shells, under the home (`~/` is stripped) or absolute.
const RC_FILES: &[&str] = &[
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.bash_logout",
    "~/.profile",
    "~/.bash_aliases",
    "~/.zshenv",
    "~/.zshrc",
    "~/.zprofile",
    "~/.zlogin",
    // zsh with ZDOTDIR at the XDG place (the launcher's own ZDOTDIR: `discover`).
    "~/.config/zsh/.zshenv",
    "~/.config/zsh/.zshrc",
    "~/.config/zsh/.zprofile",
    "~/.config/zsh/.zlogin",
    "~/.kshrc",
    "~/.mkshrc",
    "~/.config/fish/config.fish",
    "~/.config/fish/fish_variables",
    "/etc/profile",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/zshenv",
    "/etc/zshrc",
    "/etc/zsh/zshenv",
    "/etc/zsh/zshrc",
    "/etc/zsh/zprofile",
    "/etc/fish/config.fish",
];

/// Directories whose every file a startup file conventionally sources.
const RC_DIRS: &[&str] = &[
    "~/.bashrc.d",
    "~/.zshrc.d",
    "~/.profile.d",
    "~/.config/fish/conf.d",
    "/etc/profile.d",
];

/// The most startup files looked at (sourced files included).
const RC_MAX: usize = 256;

/// The most directory entries the `.env` search visits: it stops there, and the
/// run goes on (what lies further in is shown as it is; docs/run.md).
pub const DOTENV_WALK: usize = 20_000;

/// Directories the `.env` search does not enter: tools' own trees, not the project's
/// configuration.
const DOTENV_SKIP: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".cache",
    ".next",
    ".gradle",
];

/// Whether `name` is a `.env` file (`sandpit_policy::is_dotenv_name`).
pub fn is_dotenv(name: &str) -> bool {
    sandpit_policy::is_dotenv_name(name.as_bytes())
}

fn dialect(path: &Path) -> shell::Dialect {
    let s = path.to_string_lossy();
    if path.file_name().is_some_and(|n| n == "fish_variables") {
        shell::Dialect::FishVariables
    } else if s.ends_with(".fish") || s.contains("/fish/") {
        shell::Dialect::Fish
    } else {
        shell::Dialect::Posix
    }
}

/// What becomes of `name` in a startup file: a credential's variable gets its
/// sentinel (`sentinel`), the source of one and every withheld variable go, the
/// rest stays.
pub fn shell_fate(policy: &Policy, name: &str, sentinel: &dyn Fn(&str) -> String) -> shell::Fate {
    match sandpit_policy::run_env(policy, name) {
        Some(RunEnv::Sentinel(c)) => shell::Fate::Value(sentinel(&c.env)),
        Some(RunEnv::Source(_)) => shell::Fate::Remove,
        Some(RunEnv::Ca(_) | RunEnv::Set(_)) => shell::Fate::Keep,
        None if policy.env.is_withheld(name) => shell::Fate::Remove,
        None => shell::Fate::Keep,
    }
}

/// The sentinel of a `.env` value by its name alone: a credential's variable gets
/// the credential's, a withheld variable and a credential's source `other`;
/// `None`: the value's shape decides.
fn dotenv_by_name(
    policy: &Policy,
    name: &str,
    sentinel: &dyn Fn(&str) -> String,
    other: &str,
) -> Option<String> {
    match sandpit_policy::run_env(policy, name) {
        Some(RunEnv::Sentinel(c)) => Some(sentinel(&c.env)),
        Some(RunEnv::Source(_)) => Some(other.to_string()),
        _ => policy.env.is_withheld(name).then(|| other.to_string()),
    }
}

/// `copy`'s file with its secrets taken out, read now; `None` when it cannot be
/// read as text. `sentinel`: a credential's sentinel by its variable; `other`: the
/// run's sentinel for the other secrets of `.env` files.
pub fn render(
    copy: &Copy,
    policy: &Policy,
    sentinel: &dyn Fn(&str) -> String,
    other: &str,
) -> Option<(String, bool)> {
    let text = std::fs::read(&copy.path).ok()?;
    let text = String::from_utf8(text).ok()?;
    Some(match copy.kind {
        Kind::Shell(d) => {
            let s = shell::scrub(&text, d, &|n| shell_fate(policy, n, sentinel));
            (s.text, s.changed)
        }
        Kind::Dotenv => dotenv::scrub(
            &text,
            &|n| dotenv_by_name(policy, n, sentinel, other),
            other,
        ),
    })
}

/// `path` with links resolved, when it is a regular file the policy lets the
/// sandbox read (one it hides stays hidden: no copy goes over its mask).
fn readable_file(policy: &Policy, path: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(path).ok()?;
    if !std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let denied =
        |p: &Path| sandpit_policy::decide(policy, &sandpit_policy::Request::Read(p)).is_denied();
    (!denied(path) && !denied(&real)).then_some(real)
}

/// A `.`/`source` argument as written, expanded where it is a literal path under
/// the home (`~/…`, `$HOME/…`, `${HOME}/…`) or absolute with no expansion left.
fn sourced_path(arg: &str, home: &Path) -> Option<PathBuf> {
    let rest = ["~/", "$HOME/", "${HOME}/"]
        .iter()
        .find_map(|p| arg.strip_prefix(p));
    let p = match rest {
        Some(r) => home.join(r),
        None if arg.starts_with('/') => PathBuf::from(arg),
        None => return None,
    };
    let s = p.to_string_lossy();
    (!s.contains(['$', '`', '*', '?', '['])).then_some(p)
}

/// The startup files and `.env` files of this run with something to take out.
pub fn discover(policy: &Policy) -> Found {
    let home = &policy.context.home;
    let at = |s: &str| match s.strip_prefix("~/") {
        Some(r) => home.join(r),
        None => PathBuf::from(s),
    };
    let mut todo: Vec<PathBuf> = RC_FILES.iter().map(|s| at(s)).collect();
    // zsh reads its files from $ZDOTDIR when the user's environment sets it.
    if let Some(z) = std::env::var_os("ZDOTDIR").map(PathBuf::from) {
        if z.is_absolute() {
            todo.extend([".zshenv", ".zshrc", ".zprofile", ".zlogin"].map(|f| z.join(f)));
        }
    }
    for d in RC_DIRS {
        if let Ok(entries) = std::fs::read_dir(at(d)) {
            let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            files.sort();
            todo.extend(files);
        }
    }
    let mut seen: Vec<PathBuf> = vec![];
    let mut found = Found::default();
    let placeholder = |_: &str| String::from("sandpit-sentinel");
    let mut i = 0;
    while i < todo.len() && seen.len() < RC_MAX {
        let p = todo[i].clone();
        i += 1;
        let Some(real) = readable_file(policy, &p) else {
            continue;
        };
        if seen.contains(&real) {
            continue;
        }
        seen.push(real.clone());
        let Ok(text) = std::fs::read_to_string(&real) else {
            continue;
        };
        // By the name it is sourced as: a link's target may be named otherwise.
        let d = match dialect(&p) {
            shell::Dialect::Posix => dialect(&real),
            d => d,
        };
        let s = shell::scrub(&text, d, &|n| shell_fate(policy, n, &placeholder));
        todo.extend(s.sourced.iter().filter_map(|a| sourced_path(a, home)));
        if s.changed {
            found.copies.push(Copy {
                path: real,
                kind: Kind::Shell(d),
            });
        }
    }
    if policy.files.real_dotenv.is_none() {
        let (files, stopped) = dotenv_files(&policy.context.workspace);
        found.dotenv_walk_stopped = stopped;
        for p in files {
            found.dotenv_seen.push(p.clone());
            if let Ok(real) = std::fs::canonicalize(&p) {
                found.dotenv_seen.push(real);
            }
            let Some(real) = readable_file(policy, &p) else {
                continue;
            };
            if seen.contains(&real) {
                continue;
            }
            // direnv's `.envrc` is a shell script (`export AWS_SECRET_ACCESS_KEY=…`).
            let kind = if p.file_name().is_some_and(|n| n == ".envrc") {
                Kind::Shell(shell::Dialect::Posix)
            } else {
                Kind::Dotenv
            };
            let copy = Copy {
                path: real.clone(),
                kind,
            };
            if render(&copy, policy, &placeholder, "sandpit-sentinel").is_some_and(|(_, c)| c) {
                seen.push(real);
                found.copies.push(copy);
            }
        }
    }
    found.dotenv_seen.sort();
    found.dotenv_seen.dedup();
    found
}

/// The `.env` files under `root`, breadth first, at most [`DOTENV_WALK`] entries
/// visited (links not followed into); whether the search stopped there.
pub fn dotenv_files(root: &Path) -> (Vec<PathBuf>, bool) {
    let mut out = vec![];
    let mut queue = std::collections::VecDeque::from([root.to_path_buf()]);
    let mut visited = 0usize;
    while let Some(dir) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            visited += 1;
            if visited > DOTENV_WALK {
                return (out, true);
            }
            let name = e.file_name();
            let name = name.to_string_lossy();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                if !DOTENV_SKIP.contains(&name.as_ref()) {
                    queue.push_back(e.path());
                }
            } else if is_dotenv(&name) || name == ".envrc" {
                out.push(e.path());
            }
        }
    }
    out.sort();
    (out, false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn dotenv_names() {
        for yes in [".env", ".env.local", ".env.production", ".env.local.dev"] {
            assert!(is_dotenv(yes), "{yes}");
        }
        for no in [
            ".env.example",
            ".env.sample",
            ".env.template",
            ".env.dist",
            ".env.local.example",
            ".envrc",
            "env",
            ".env.",
            "x.env",
        ] {
            assert!(!is_dotenv(no), "{no}");
        }
    }

    #[test]
    fn sourced_paths_under_home_or_absolute() {
        let h = Path::new("/h");
        assert_eq!(sourced_path("~/.secrets", h), Some("/h/.secrets".into()));
        assert_eq!(sourced_path("$HOME/a/b.sh", h), Some("/h/a/b.sh".into()));
        assert_eq!(sourced_path("${HOME}/x", h), Some("/h/x".into()));
        assert_eq!(sourced_path("/etc/x", h), Some("/etc/x".into()));
        assert_eq!(sourced_path("$f", h), None);
        assert_eq!(sourced_path("~/.bashrc.d/*.sh", h), None);
        assert_eq!(sourced_path("rel.sh", h), None);
    }

    #[test]
    fn the_dotenv_search_stops_at_its_bound_without_failing() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(".env"), "A=1\n").unwrap();
        std::fs::create_dir(d.path().join("node_modules")).unwrap();
        std::fs::write(d.path().join("node_modules/.env"), "A=1\n").unwrap();
        let big = d.path().join("big");
        std::fs::create_dir(&big).unwrap();
        for i in 0..DOTENV_WALK {
            std::fs::write(big.join(i.to_string()), "").unwrap();
        }
        std::fs::create_dir(big.join("deep")).unwrap();
        std::fs::write(big.join("deep/.env"), "A=1\n").unwrap();
        let (files, stopped) = dotenv_files(d.path());
        assert!(stopped);
        assert_eq!(files, [d.path().join(".env")]);
        std::fs::remove_dir_all(&big).unwrap();
        assert_eq!(dotenv_files(d.path()), (vec![d.path().join(".env")], false));
    }
}
