//! What git's effective configuration for the workspace names inside it, protected as
//! `.git/hooks` is: the hooks directory (`core.hooksPath`; husky sets `.husky/_`),
//! config files it includes (`include.path`, `includeIf.*.path`), and programs given
//! as paths (diff and merge drivers, filters, helpers, editors, `core.fsmonitor`,
//! aliases that run a shell). The user's git runs or reads each of them outside the
//! sandbox later: a hook the sandbox planted in a worktree `core.hooksPath` would run
//! on the user's next `git commit`.
//!
//! They are added to `files.block_write` when the policy is loaded, so every layer
//! (kernel, interposer, Seatbelt) and `sandpit explain` hold the same list, each entry
//! naming the key and the config file it came from.
//!
//! The configuration is git's own answer (`git config --get-regexp`, with includes
//! and conditions as the user's git resolves them), asked only when a config file git
//! reads for this workspace mentions one of these keys: most runs spawn nothing.
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use sandpit_policy::{Origin, Policy, Rule};

/// The keys (lower case, as `git config --get-regexp` prints them), as one regex for
/// git, and what each value is.
const KEYS: &str = "^(core\\.hookspath|include\\.path|includeif\\..*\\.path|core\\.fsmonitor\
                    |core\\.sshcommand|core\\.editor|core\\.pager|core\\.askpass|sequence\\.editor\
                    |gpg\\.program|gpg\\..*\\.program|credential\\.helper|credential\\..*\\.helper\
                    |diff\\.external|diff\\..*\\.textconv|diff\\..*\\.command|merge\\..*\\.driver\
                    |filter\\..*\\.(clean|smudge|process)|interactive\\.difffilter|pager\\..*\
                    |alias\\..*)$";

/// Words one of which a config file must hold for [`KEYS`] to be worth asking git
/// about (lower-cased text; a superset: `include` also finds `includeIf`).
const HINTS: &[&str] = &[
    "hookspath",
    "include",
    "fsmonitor",
    "command",
    "editor",
    "pager",
    "askpass",
    "program",
    "helper",
    "external",
    "textconv",
    "driver",
    "clean",
    "smudge",
    "process",
    "difffilter",
    "alias",
];

/// The hooks git runs, for a hooks directory that is the workspace itself (which
/// cannot be protected whole).
const HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "post-index-change",
];

/// How a key's value names something in the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A directory of hooks, relative to the worktree's top.
    Hooks,
    /// A config file, relative to the file that includes it.
    Include,
    /// A command line: each word that is a path, relative to the worktree's top.
    Command,
}

fn kind(key: &str) -> Kind {
    if key == "core.hookspath" {
        Kind::Hooks
    } else if key.ends_with(".path") {
        Kind::Include
    } else {
        Kind::Command
    }
}

/// One `git config --null --show-origin --get-regexp` entry: where it was set, the
/// key, the value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    origin: String,
    key: String,
    value: String,
}

/// Parse `origin NUL key LF value NUL` records (a key without a value has no LF).
fn parse(out: &[u8]) -> Vec<Entry> {
    let fields: Vec<String> = out
        .split(|&b| b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    fields
        .chunks_exact(2)
        .map(|c| {
            let (key, value) = c[1].split_once('\n').unwrap_or((&c[1], ""));
            Entry {
                origin: c[0].clone(),
                key: key.to_string(),
                value: value.to_string(),
            }
        })
        .collect()
}

/// `p` made absolute against `base` and `~/` against `home`, with `.` and `..`
/// folded lexically (the paths git would open; no link is followed).
fn resolve(p: &str, base: &Path, home: &Path) -> PathBuf {
    let joined = match p.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None => base.join(p),
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The words of a command line that name a path: they hold a `/` and are no URL.
/// Quotes are dropped; a shell alias (`!sh ./x`) loses its `!`.
fn path_words(cmd: &str) -> impl Iterator<Item = &str> {
    cmd.split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
        .map(|w| w.trim_start_matches('!'))
        .filter(|w| w.contains('/') && !w.contains("://"))
}

/// What `entries` name inside `workspace`: each path with the entry that named it.
fn named(entries: &[Entry], workspace: &Path, home: &Path) -> Vec<(PathBuf, Entry)> {
    let mut out = vec![];
    for e in entries {
        let mut push = |p: PathBuf| {
            if p.starts_with(workspace) {
                out.push((p, e.clone()));
            }
        };
        match kind(&e.key) {
            Kind::Hooks => {
                let dir = resolve(&e.value, workspace, home);
                if workspace.starts_with(&dir) {
                    // The workspace itself (or above it): its hooks by name.
                    for h in HOOKS {
                        push(workspace.join(h));
                    }
                } else if dir.file_name().is_some_and(|n| n == "_") {
                    // husky's `.husky/_` runs the user's hooks one level up.
                    push(dir.parent().map(Path::to_path_buf).unwrap_or(dir));
                } else {
                    push(dir);
                }
            }
            Kind::Include => {
                // git names the repository's own config relative to the worktree
                // (`file:.git/config`).
                let file = e.origin.strip_prefix("file:").map(Path::new);
                let base = match file.and_then(Path::parent) {
                    Some(dir) => workspace.join(dir),
                    None => workspace.to_path_buf(),
                };
                push(resolve(&e.value, &base, home));
            }
            Kind::Command => {
                for w in path_words(&e.value) {
                    push(resolve(w, workspace, home));
                }
            }
        }
    }
    out
}

/// The config files git reads for `workspace` that sandpit can find without git.
fn config_files(workspace: &Path, home: &Path) -> Vec<PathBuf> {
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".config"));
    let git = workspace.join(".git");
    vec![
        git.join("config"),
        git.join("config.worktree"),
        home.join(".gitconfig"),
        xdg.join("git/config"),
        PathBuf::from("/etc/gitconfig"),
    ]
}

/// Whether git's answer is worth asking for: something names these keys, or sandpit
/// cannot see all of git's config (a `.git` file of a worktree, config given in the
/// environment).
fn worth_asking(workspace: &Path, home: &Path) -> bool {
    let git = workspace.join(".git");
    if std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_file())
        || std::env::vars_os().any(|(k, _)| k.to_string_lossy().starts_with("GIT_CONFIG"))
    {
        return true;
    }
    config_files(workspace, home).iter().any(|f| {
        std::fs::read(f).is_ok_and(|b| {
            let text = String::from_utf8_lossy(&b).to_ascii_lowercase();
            HINTS.iter().any(|h| text.contains(h))
        })
    })
}

/// Ask git (the user's, as the user) for [`KEYS`] in `workspace`. Nothing when the
/// workspace is no repository or git is missing: then git cannot run these either.
fn ask_git(workspace: &Path) -> Vec<Entry> {
    let out = Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(["config", "--null", "--show-origin", "--get-regexp", KEYS])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match out {
        Ok(o) => parse(&o.stdout),
        Err(_) => vec![],
    }
}

/// Add what git's configuration names inside the workspace to `files.block_write`.
pub fn protect(policy: &mut Policy) {
    let ctx = &policy.context;
    let (workspace, home) = (ctx.workspace.clone(), ctx.home.clone());
    if !workspace.join(".git").exists() || !worth_asking(&workspace, &home) {
        return;
    }
    for (path, e) in named(&ask_git(&workspace), &workspace, &home) {
        if policy
            .files
            .block_write
            .iter()
            .any(|r| path.starts_with(&r.value))
        {
            continue;
        }
        let mut origin = Origin::builtin("files.block_write", &format!("{} = {}", e.key, e.value));
        origin.file = format!("git config ({})", e.origin);
        policy.files.block_write.push(Rule {
            value: path,
            origin,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(origin: &str, key: &str, value: &str) -> Entry {
        Entry {
            origin: origin.into(),
            key: key.into(),
            value: value.into(),
        }
    }

    #[test]
    fn parses_git_records() {
        let out = b"file:.git/config\0core.hookspath\n.husky/_\0command line:\0alias.x\0";
        assert_eq!(
            parse(out),
            vec![
                entry("file:.git/config", "core.hookspath", ".husky/_"),
                entry("command line:", "alias.x", ""),
            ]
        );
    }

    #[test]
    fn names_what_runs_inside_the_workspace_only() {
        let ws = Path::new("/h/proj");
        let home = Path::new("/h");
        let entries = [
            entry("file:/h/proj/.git/config", "core.hookspath", ".husky/_"),
            entry("file:/h/.gitconfig", "core.hookspath", "~/hooks"),
            entry("file:.git/config", "include.path", "../team.gitconfig"),
            entry(
                "file:/h/proj/.git/config",
                "includeif.onbranch:main.path",
                "/etc/elsewhere",
            ),
            entry(
                "file:/h/proj/.git/config",
                "diff.img.textconv",
                "\"./tools/conv img\" --flag",
            ),
            entry(
                "file:/h/proj/.git/config",
                "alias.up",
                "!sh scripts/up.sh https://example.com/x",
            ),
            entry("file:/h/proj/.git/config", "core.pager", "less -R"),
            entry(
                "file:/h/proj/.git/config",
                "merge.x.driver",
                "../../outside %O",
            ),
        ];
        let got: Vec<(PathBuf, String)> = named(&entries, ws, home)
            .into_iter()
            .map(|(p, e)| (p, e.key))
            .collect();
        let want: Vec<(PathBuf, String)> = [
            ("/h/proj/.husky", "core.hookspath"),
            ("/h/proj/team.gitconfig", "include.path"),
            ("/h/proj/tools/conv", "diff.img.textconv"),
            ("/h/proj/scripts/up.sh", "alias.up"),
        ]
        .iter()
        .map(|(p, k)| (PathBuf::from(p), k.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_hooks_directory_that_is_the_workspace_protects_each_hook() {
        let ws = Path::new("/h/proj");
        for value in [".", "./", "/h/proj", "sub/.."] {
            let e = [entry("file:/h/proj/.git/config", "core.hookspath", value)];
            let got: Vec<PathBuf> = named(&e, ws, Path::new("/h"))
                .into_iter()
                .map(|(p, _)| p)
                .collect();
            assert_eq!(got.len(), HOOKS.len(), "{value}");
            assert!(
                got.contains(&PathBuf::from("/h/proj/pre-commit")),
                "{value}"
            );
            assert!(!got.contains(&PathBuf::from("/h/proj")), "{value}");
        }
        // A plain directory is protected whole.
        let e = [entry(
            "file:/h/proj/.git/config",
            "core.hookspath",
            "githooks",
        )];
        assert_eq!(
            named(&e, ws, Path::new("/h"))[0].0,
            PathBuf::from("/h/proj/githooks")
        );
    }
}
