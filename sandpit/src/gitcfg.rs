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
                    |gpg\\.program|gpg\\..*\\.program|gpg\\.ssh\\.defaultkeycommand|credential\\.helper|credential\\..*\\.helper\
                    |diff\\.external|diff\\..*\\.textconv|diff\\..*\\.command|merge\\..*\\.driver\
                    |filter\\..*\\.(clean|smudge|process)|interactive\\.difffilter|pager\\..*\
                    |alias\\..*|(merge|diff)tool\\..*\\.(cmd|path)|remote\\..*\\.(uploadpack|receivepack)\
                    |core\\.gitproxy|core\\.alternaterefscommand|sendemail\\..*(cmd|smtpserver)\
                    |guitool\\..*\\.cmd|browser\\..*\\.(cmd|path)|man\\..*\\.(cmd|path)\
                    |trailer\\..*\\.(cmd|command)|submodule\\..*\\.update|uploadpack\\.packobjectshook)$";

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
    "cmd",
    "tool",
    "uploadpack",
    "receivepack",
    "gitproxy",
    "alternaterefs",
    "smtpserver",
    "browser",
    "[man",
    "update",
    "packobjectshook",
    "keycommand",
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
    /// A command line: each word that names a file, relative to the worktree's top.
    Command,
}

fn kind(key: &str) -> Kind {
    if key == "core.hookspath" {
        Kind::Hooks
    } else if key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path")) {
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
/// folded lexically, then with the links of what exists resolved (the path git
/// would open, spelled as the policy spells paths).
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
    sandpit_policy::path::resolve_existing(&out)
}

/// The words of a command line that may name a program or script: split at blanks,
/// quotes and the shell's operators; a shell alias (`!sh hook.sh`) loses its `!`;
/// options, variables and URLs are no file.
fn command_words(cmd: &str) -> impl Iterator<Item = &str> {
    cmd.split(|c: char| c.is_whitespace() || "\"'`;&|()<>".contains(c))
        .map(|w| w.trim_start_matches('!'))
        .filter(|w| !w.is_empty() && !w.starts_with('-') && !w.contains('$') && !w.contains("://"))
}

/// What `entries` name inside `workspace`, git's worktree being `top` (the
/// workspace or a directory above it): each path with the entry that named it.
fn named(entries: &[Entry], top: &Path, workspace: &Path, home: &Path) -> Vec<(PathBuf, Entry)> {
    let mut out = vec![];
    for e in entries {
        let mut push = |p: PathBuf| {
            if p.starts_with(workspace) {
                out.push((p, e.clone()));
            }
        };
        match kind(&e.key) {
            Kind::Hooks => {
                let dir = resolve(&e.value, top, home);
                if dir == workspace {
                    // The workspace itself: its hooks by name.
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
                // git names a repository's own config relative to where it runs
                // (`file:.git/config`): the worktree's top.
                let file = e.origin.strip_prefix("file:").map(Path::new);
                let base = match file.and_then(Path::parent) {
                    Some(dir) => top.join(dir),
                    None => top.to_path_buf(),
                };
                push(resolve(&e.value, &base, home));
            }
            Kind::Command => {
                for w in command_words(&e.value) {
                    let p = resolve(w, top, home);
                    // A file there, or a path that is not there yet (the sandbox could
                    // make it): never a directory or the workspace itself (an alias's
                    // arguments, `add ./`, name those).
                    let fits = match std::fs::metadata(&p) {
                        Ok(m) => m.is_file(),
                        Err(_) => w.contains('/'),
                    };
                    if fits && p != workspace {
                        push(p);
                    }
                }
            }
        }
    }
    out
}

/// The top of the worktree `workspace` lies in: the nearest directory, from the
/// workspace up, holding a `.git` (a directory, or a linked worktree's file), unless
/// that is an empty directory (another run's placeholder: no repository).
fn worktree_top(workspace: &Path) -> Option<PathBuf> {
    let top = workspace
        .ancestors()
        .find(|d| d.join(".git").symlink_metadata().is_ok())?;
    let git = top.join(".git");
    let placeholder = std::fs::read_dir(&git).is_ok_and(|mut d| d.next().is_none());
    (!placeholder).then(|| top.to_path_buf())
}

/// The config files git reads for the worktree at `top` that sandpit can find
/// without git.
fn config_files(top: &Path, home: &Path) -> Vec<PathBuf> {
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".config"));
    let git = top.join(".git");
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
fn worth_asking(top: &Path, home: &Path) -> bool {
    let git = top.join(".git");
    if std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_file())
        || std::env::vars_os().any(|(k, _)| k.to_string_lossy().starts_with("GIT_CONFIG"))
    {
        return true;
    }
    config_files(top, home).iter().any(|f| {
        std::fs::read(f).is_ok_and(|b| {
            let text = String::from_utf8_lossy(&b).to_ascii_lowercase();
            HINTS.iter().any(|h| text.contains(h))
        })
    })
}

/// How long git may take to answer (an include that is a FIFO would block it).
const GIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The user's git, as every program the launcher runs on the host
/// (hostcmd.rs): the first on a `PATH` without the writable roots, run in `/`
/// (`-C` names the worktree) with nothing in its environment that loads code.
/// `None` when git is not installed there: then nothing runs what the config
/// names.
fn git_command(writable: &crate::hostcmd::Writable) -> Result<Option<Command>, String> {
    match crate::hostcmd::command("git", writable) {
        Ok(c) => Ok(Some(c)),
        Err(crate::hostcmd::HostError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Ask git (the user's, as the user) for [`KEYS`] in the worktree at `top`, never
/// above it, or in the config file `file` alone (with its includes). Nothing when
/// git is not installed: then nothing runs these.
fn ask_git(
    top: &Path,
    writable: &crate::hostcmd::Writable,
    file: Option<&Path>,
) -> Result<Vec<Entry>, String> {
    use std::io::Read;
    let Some(mut c) = git_command(writable)? else {
        return Ok(vec![]);
    };
    let git = PathBuf::from(c.get_program());
    c.arg("-C").arg(top).arg("config");
    if let Some(f) = file {
        c.arg("--file").arg(f).arg("--includes");
    }
    c.args(["--null", "--show-origin", "--get-regexp", KEYS])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(parent) = top.parent() {
        c.env("GIT_CEILING_DIRECTORIES", parent);
    }
    let mut child = c
        .spawn()
        .map_err(|e| format!("starting {}: {e}", git.display()))?;
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let reader = std::thread::spawn(move || {
        let (mut o, mut e) = (vec![], vec![]);
        if let Some(s) = out.as_mut() {
            let _ = s.read_to_end(&mut o);
        }
        if let Some(s) = err.as_mut() {
            let _ = s.read_to_end(&mut e);
        }
        (o, e)
    });
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() < GIT_TIMEOUT => {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("git config took longer than {GIT_TIMEOUT:?}"));
            }
            Err(e) => return Err(format!("waiting for git: {e}")),
        }
    };
    let (out, err) = reader.join().unwrap_or_default();
    match status.code() {
        Some(0) => Ok(parse(&out)),
        // None of the keys is set.
        Some(1) => Ok(vec![]),
        _ => Err(format!(
            "{status}: {}",
            String::from_utf8_lossy(&err).trim()
        )),
    }
}

/// Whether git takes `top/.git` for a repository, as git checks it: `HEAD` a
/// symbolic ref or an object id, `objects/` and `refs/` directories (in the common
/// directory a linked worktree's `commondir` names). `git config` outside a
/// repository still answers, from the other scopes alone, without `.git/config`.
fn is_repository(top: &Path) -> bool {
    let dot = top.join(".git");
    let gitdir = match std::fs::read_to_string(&dot) {
        // A linked worktree's or a submodule's file: `gitdir: PATH`.
        Ok(text) => match text.trim_end().strip_prefix("gitdir: ") {
            Some(d) => top.join(d),
            None => return false,
        },
        Err(_) => dot,
    };
    let head = std::fs::read_to_string(gitdir.join("HEAD")).unwrap_or_default();
    let head = head.trim_end();
    let head_ok = head.starts_with("ref: refs/")
        || ((head.len() == 40 || head.len() == 64) && head.bytes().all(|b| b.is_ascii_hexdigit()));
    let common = match std::fs::read_to_string(gitdir.join("commondir")) {
        Ok(c) => gitdir.join(c.trim_end()),
        Err(_) => gitdir,
    };
    head_ok && common.join("objects").is_dir() && common.join("refs").is_dir()
}

/// Whether a `files.block_write` rule is a config file git's configuration includes
/// (added by [`protect`]): git reads it whenever it exists.
pub fn is_include(origin: &Origin) -> bool {
    origin.file.starts_with(ORIGIN_PREFIX)
        && (origin.entry.starts_with("include.path ") || origin.entry.starts_with("includeif."))
}

/// Add `path` to `files.block_write`, its origin `entry` in `file` (what named it),
/// unless a rule holds it already.
pub(crate) fn block_write(policy: &mut Policy, path: PathBuf, entry: &str, file: &str) {
    let mut origin = Origin::builtin("files.block_write", entry);
    origin.file = file.into();
    // The run-later registry's rule for the same path (`.husky`) gives way to the
    // key that names it: `explain` and the summary say why git runs it.
    if let Some(r) = policy
        .files
        .block_write
        .iter_mut()
        .find(|r| r.value == path && sandpit_policy::runlater::is_origin(&r.origin))
    {
        r.origin = origin;
        return;
    }
    if policy
        .files
        .block_write
        .iter()
        .any(|r| path.starts_with(&r.value))
    {
        return;
    }
    policy.files.block_write.push(Rule {
        value: path,
        origin,
    });
}

/// How [`protect`]'s rules name their origin: `git config (file:…)`.
const ORIGIN_PREFIX: &str = "git config (";

/// Why the run does not start: git could not read the configuration at `top`.
fn cannot_read(top: &Path, why: &str) -> String {
    format!(
        "git cannot read the configuration of the repository at {} ({why}); the command \
         was not started: the hooks directory and programs it names could not be \
         protected. Repair the repository (`git status` there says what is wrong)",
        top.display()
    )
}

/// Where the home is writable (it is the workspace, lies in it, or in an
/// `allow_write` root): what the user's own config files (`~/.gitconfig`,
/// `$XDG_CONFIG_HOME/git/config`) name in the home, protected as the workspace's
/// are. A global `core.hooksPath = ~/.githooks` runs its hooks in every repository
/// the user commits in. The files themselves are the run-later registry's.
fn protect_global(policy: &mut Policy) -> Result<(), String> {
    let (home, workspace) = (
        policy.context.home.clone(),
        policy.context.workspace.clone(),
    );
    let writable =
        home.starts_with(&workspace)
            || policy.files.allow_write.iter().any(|r| {
                r.origin.file != sandpit_policy::PRIVATE_TMPFS && home.starts_with(&r.value)
            });
    if !writable {
        return Ok(());
    }
    let files = config_files(&home, &home);
    let host = crate::hostcmd::Writable::of(policy);
    for f in &files[2..4] {
        let hinted = std::fs::read(f).is_ok_and(|b| {
            let text = String::from_utf8_lossy(&b).to_ascii_lowercase();
            HINTS.iter().any(|h| text.contains(h))
        });
        if !hinted {
            continue;
        }
        let entries = ask_git(&home, &host, Some(f)).map_err(|why| {
            format!(
                "git cannot read your configuration {} ({why}); the command was not \
                 started: the hooks directory and programs it names could not be protected",
                f.display()
            )
        })?;
        for (path, e) in named(&entries, &home, &home, &home) {
            let entry = format!("{} = {}", e.key, e.value);
            block_write(
                policy,
                path,
                &entry,
                &format!("{ORIGIN_PREFIX}{})", e.origin),
            );
        }
    }
    Ok(())
}

/// Add what git's configuration names inside the workspace to `files.block_write`.
/// Err: git could not read the configuration of the repository the workspace lies
/// in; the run must not start (what it names could not be protected).
pub fn protect(policy: &mut Policy) -> Result<(), String> {
    protect_global(policy)?;
    let ctx = &policy.context;
    let (workspace, home) = (ctx.workspace.clone(), ctx.home.clone());
    let Some(top) = worktree_top(&workspace) else {
        return Ok(());
    };
    if !worth_asking(&top, &home) {
        return Ok(());
    }
    let writable = crate::hostcmd::Writable::of(policy);
    let mut entries = ask_git(&top, &writable, None).map_err(|why| cannot_read(&top, &why))?;
    // git reads `.git/config` only where it takes `.git` for a repository; a run could
    // have broken `HEAD` to hide what the config names until a later run repairs it.
    // Read it as a file then.
    let local = top.join(".git/config");
    if !is_repository(&top) && local.is_file() {
        let more = ask_git(&top, &writable, Some(&local)).map_err(|why| cannot_read(&top, &why))?;
        entries.extend(more);
    }
    // An `includeIf` git skips now (`onbranch:` another branch) applies once the
    // condition holds, and the sandbox can make it hold (switch branches): what its
    // file names is protected too, read as a file whatever the condition.
    let mut conditional: Vec<PathBuf> = entries
        .iter()
        .filter(|e| kind(&e.key) == Kind::Include && e.key.starts_with("includeif."))
        .map(|e| {
            // Targets outside the workspace too: what they set can name paths inside.
            let base = e
                .origin
                .strip_prefix("file:")
                .map(Path::new)
                .and_then(Path::parent);
            resolve(
                &e.value,
                &base.map_or_else(|| top.clone(), |d| top.join(d)),
                &home,
            )
        })
        .filter(|p| p.is_file())
        .collect();
    conditional.sort();
    conditional.dedup();
    for target in conditional {
        let more =
            ask_git(&top, &writable, Some(&target)).map_err(|why| cannot_read(&top, &why))?;
        entries.extend(more);
    }
    for (path, e) in named(&entries, &top, &workspace, &home) {
        let entry = format!("{} = {}", e.key, e.value);
        block_write(
            policy,
            path,
            &entry,
            &format!("{ORIGIN_PREFIX}{})", e.origin),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `named`'s answer is `want`, as (path, key) pairs in order.
    fn assert_named(named: Vec<(PathBuf, Entry)>, want: &[(&str, &str)]) {
        let got: Vec<(String, String)> = named
            .into_iter()
            .map(|(p, e)| (p.display().to_string(), e.key))
            .collect();
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(p, k)| (p.to_string(), k.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    fn entry(origin: &str, key: &str, value: &str) -> Entry {
        Entry {
            origin: origin.into(),
            key: key.into(),
            value: value.into(),
        }
    }

    #[test]
    fn the_worktrees_top_is_the_nearest_non_empty_git_above() {
        let d = tempfile::tempdir().unwrap();
        let top = sandpit_policy::path::resolve_existing(d.path());
        let sub = top.join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(worktree_top(&sub), None, "no .git anywhere up to /tmp");
        // Another run's placeholder: an empty .git is no repository.
        std::fs::create_dir(top.join(".git")).unwrap();
        assert_eq!(worktree_top(&sub), None);
        std::fs::write(top.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(worktree_top(&sub), Some(top.clone()));
        assert_eq!(worktree_top(&top), Some(top.clone()));
        // A linked worktree's file counts too, and the nearest wins.
        std::fs::write(top.join("a/.git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(worktree_top(&sub), Some(top.join("a")));
    }

    #[test]
    fn only_gitcfgs_include_rules_are_includes() {
        let origin = |file: &str, entry: &str| {
            let mut o = Origin::builtin("files.block_write", entry);
            o.file = file.into();
            o
        };
        let git = "git config (file:.git/config)";
        assert!(is_include(&origin(git, "include.path = ../x.gitconfig")));
        assert!(is_include(&origin(git, "includeif.onbranch:main.path = x")));
        assert!(!is_include(&origin(git, "core.hookspath = .husky/_")));
        assert!(!is_include(&origin(git, "alias.path = !x")));
        assert!(!is_include(&origin(
            "profiles/default.toml",
            "include.path = x"
        )));
    }

    /// Every key that names a program, as a config file spells it, is one git
    /// returns for [`KEYS`] and one [`HINTS`] finds in the file; neighbours that
    /// name no program are not.
    #[test]
    fn program_keys_are_asked_for_and_hinted() {
        let programs = [
            "[core]\n\thooksPath = h",
            "[core]\n\tgitProxy = ./p",
            "[core]\n\talternateRefsCommand = ./p",
            "[core]\n\tsshCommand = ./p",
            "[mergetool \"m\"]\n\tcmd = ./p $BASE",
            "[mergetool \"m\"]\n\tpath = ./p",
            "[difftool \"d\"]\n\tcmd = ./p",
            "[remote \"origin\"]\n\tuploadpack = ./p",
            "[remote \"origin\"]\n\treceivepack = ./p",
            "[sendemail]\n\tsendmailCmd = ./p",
            "[sendemail]\n\tsmtpServer = ./p",
            "[sendemail \"id\"]\n\ttoCmd = ./p",
            "[guitool \"g\"]\n\tcmd = ./p",
            "[browser \"b\"]\n\tcmd = ./p",
            "[browser \"b\"]\n\tpath = ./p",
            "[man \"v\"]\n\tpath = ./p",
            "[trailer \"t\"]\n\tcommand = ./p",
            "[trailer \"t\"]\n\tcmd = ./p",
            "[submodule \"s\"]\n\tupdate = !./p",
            "[uploadpack]\n\tpackObjectsHook = ./p",
            "[gpg \"ssh\"]\n\tprogram = ./p",
            "[gpg \"ssh\"]\n\tdefaultKeyCommand = ./p",
            "[filter \"f\"]\n\tprocess = ./p",
        ];
        let others = [
            "[remote \"origin\"]\n\turl = ./p",
            "[submodule \"s\"]\n\turl = ./p",
            "[man]\n\tviewer = ./p",
            "[core]\n\texcludesFile = ./p",
        ];
        let d = tempfile::tempdir().unwrap();
        let writable = crate::hostcmd::Writable::from_roots([d.path().to_path_buf()]);
        let asked = |text: &str| -> Vec<Entry> {
            let f = d.path().join("config");
            std::fs::write(&f, text).unwrap();
            let o = git_command(&writable)
                .unwrap()
                .expect("git is installed")
                .args(["config", "--null", "--show-origin", "--file"])
                .arg(&f)
                .args(["--get-regexp", KEYS])
                .output()
                .unwrap();
            parse(&o.stdout)
        };
        for text in programs {
            assert_eq!(asked(text).len(), 1, "not asked for: {text}");
            let lower = text.to_ascii_lowercase();
            assert!(HINTS.iter().any(|h| lower.contains(h)), "no hint: {text}");
        }
        for text in others {
            assert!(asked(text).is_empty(), "asked for: {text}");
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
        assert_named(
            named(&entries, ws, ws, home),
            &[
                ("/h/proj/.husky", "core.hookspath"),
                ("/h/proj/team.gitconfig", "include.path"),
                ("/h/proj/tools/conv", "diff.img.textconv"),
                ("/h/proj/scripts/up.sh", "alias.up"),
            ],
        );
    }

    #[test]
    fn a_workspace_below_the_worktrees_top_is_judged_from_the_top() {
        // husky's monorepo recipe: `cd .. && husky frontend/.husky`.
        let (top, ws, home) = (
            Path::new("/h/repo"),
            Path::new("/h/repo/frontend"),
            Path::new("/h"),
        );
        let e = [
            entry("file:.git/config", "core.hookspath", "frontend/.husky/_"),
            entry(
                "file:.git/config",
                "alias.t",
                "!sh frontend/t.sh && ./top.sh",
            ),
            entry("file:.git/config", "alias.sa", "add ./frontend"),
            entry(
                "file:.git/config",
                "include.path",
                "../frontend/x.gitconfig",
            ),
            entry(
                "file:.git/config",
                "alias.path",
                "!echo frontend/not-an-include",
            ),
        ];
        // `./top.sh` lies above the workspace, `./frontend` is the workspace itself.
        assert_named(
            named(&e, top, ws, home),
            &[
                ("/h/repo/frontend/.husky", "core.hookspath"),
                ("/h/repo/frontend/t.sh", "alias.t"),
                ("/h/repo/frontend/x.gitconfig", "include.path"),
                ("/h/repo/frontend/not-an-include", "alias.path"),
            ],
        );
        assert_eq!(kind("alias.path"), Kind::Command);
        assert_eq!(kind("includeif.gitdir:~/w/.path"), Kind::Include);
    }

    #[test]
    fn command_words_split_at_shell_operators() {
        let w: Vec<&str> =
            command_words("!cd scripts && ./run;./x|y \"a b\" --opt $HOME/z 'q' https://e.x/y")
                .collect();
        assert_eq!(w, ["cd", "scripts", "./run", "./x", "y", "a", "b", "q"]);
    }

    #[test]
    fn a_hooks_directory_that_is_the_workspace_protects_each_hook() {
        let ws = Path::new("/h/proj");
        for value in [".", "./", "/h/proj", "sub/.."] {
            let e = [entry("file:/h/proj/.git/config", "core.hookspath", value)];
            let got: Vec<PathBuf> = named(&e, ws, ws, Path::new("/h"))
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
            named(&e, ws, ws, Path::new("/h"))[0].0,
            PathBuf::from("/h/proj/githooks")
        );
    }
}
