//! What the agents' own user configuration names for this machine to run later: a
//! Claude Code status line or hook script, codex's `notify` program, an MCP server's
//! script. The configuration files themselves are read-only (the run-later
//! registry, the profiles' `block_write`), but the scripts they name often lie in the
//! directory the agent's profile makes writable (`~/.claude`, `~/.codex`,
//! `~/.gemini`): a command the agent runs could append to `~/.claude/statusline.sh`,
//! which the user's next `claude` outside sandpit runs at every prompt. Every path
//! such a file names inside a writable root is made read-only as well, existing or
//! not, as `gitcfg` does for what git's configuration names.
use std::path::{Path, PathBuf};

use sandpit_policy::Policy;

/// The agents' user configuration files (from the home) that name programs the
/// agent starts on the host: hooks, status lines, notifiers, MCP servers.
const FILES: &[&str] = &[
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude.json",
    ".codex/config.toml",
    ".gemini/settings.json",
    ".config/opencode/opencode.json",
    ".config/opencode/opencode.jsonc",
    ".pi/agent/settings.json",
    ".config/goose/config.yaml",
    ".aider.conf.yml",
];

/// A file larger than this is no hand-written configuration; it is not read.
const MAX_BYTES: u64 = 4 << 20;

/// How the rules name their origin: `agent config (~/.claude/settings.json)`.
const ORIGIN_PREFIX: &str = "agent config (";

/// Add to `files.block_write` every path the agents' configuration files name that
/// lies in one of the run's writable roots.
pub fn protect(policy: &mut Policy) {
    let (home, workspace) = (
        policy.context.home.clone(),
        policy.context.workspace.clone(),
    );
    let writable = crate::hostcmd::Writable::of(policy);
    for rel in FILES {
        let file = home.join(rel);
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if !meta.is_file() || meta.len() > MAX_BYTES {
            continue;
        }
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for path in named_paths(&text, &home) {
            if path == file || !outside_the_project(&path, &home, &workspace) {
                continue;
            }
            if writable.holding(&path).is_none() {
                continue;
            }
            crate::gitcfg::block_write(
                policy,
                path,
                &format!("named in ~/{rel}"),
                &format!("{ORIGIN_PREFIX}~/{rel})"),
            );
        }
    }
}

/// Whether `p` is for this rule to hold: not the project's own files, which the
/// configuration mentions as projects and history (`~/.claude.json` keys its
/// settings by project directory) and which the registry covers, nor a directory
/// holding the workspace. Where the user named the home (or above) as the
/// workspace, what lies in the home counts again.
fn outside_the_project(p: &Path, home: &Path, workspace: &Path) -> bool {
    if workspace.starts_with(p) {
        return false;
    }
    if !p.starts_with(workspace) {
        return true;
    }
    home.starts_with(workspace) && p.starts_with(home) && p != home
}

/// The absolute paths `text` names: each word that starts with `/`, `~/`, `$HOME/`
/// or `${HOME}/`, a word ending at white space, a quote or a character that ends a
/// value in JSON, TOML, YAML or a command line. `..` and `.` components are folded,
/// so a path cannot climb out of what it names.
pub fn named_paths(text: &str, home: &Path) -> Vec<PathBuf> {
    let ends = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\''
                    | '`'
                    | ','
                    | ';'
                    | '('
                    | ')'
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '='
                    | '|'
                    | '&'
                    | '<'
                    | '>'
            )
    };
    let mut out: Vec<PathBuf> = vec![];
    // `${HOME}` first: its braces end words.
    let text = text.replace("${HOME}", "$HOME");
    for word in text.split(ends) {
        // JSON writes `/` as `\/` at times.
        let word = word.replace("\\/", "/");
        let rest = if let Some(r) = word.strip_prefix("~/") {
            home.join(r)
        } else if let Some(r) = word.strip_prefix("$HOME/") {
            home.join(r)
        } else if word.starts_with('/') && word.len() > 1 {
            PathBuf::from(&word)
        } else {
            continue;
        };
        let p = sandpit_policy::path::normalize(&rest);
        if p != Path::new("/") && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn paths_in_json_toml_and_command_lines_are_found() {
        let home = Path::new("/h");
        let text = r#"{"statusLine": {"type": "command", "command": "bash ~/.claude/statusline.sh --x"},
 "hooks": {"PreToolUse": [{"hooks": [{"command": "$HOME/.claude/scripts/a.py"}]}]},
 "x": "${HOME}/.claude/b.sh", "y": "\/h\/.claude\/c.sh"}
notify = ["python3", "/h/.codex/notify.py"]
command = "node /h/.codex/../.codex/mcp/server.js;/h/tools/t|/h/z"
args = ['relative/not.sh', "~", "/"]"#;
        let got = named_paths(text, home);
        for want in [
            "/h/.claude/statusline.sh",
            "/h/.claude/scripts/a.py",
            "/h/.claude/b.sh",
            "/h/.claude/c.sh",
            "/h/.codex/notify.py",
            "/h/.codex/mcp/server.js",
            "/h/tools/t",
            "/h/z",
        ] {
            assert!(got.contains(&PathBuf::from(want)), "{want}: {got:?}");
        }
        assert!(!got.iter().any(|p| p.ends_with("not.sh")), "{got:?}");
        assert!(!got.contains(&PathBuf::from("/")), "{got:?}");
    }

    #[test]
    fn the_projects_own_files_and_its_parents_are_left_to_the_registry() {
        let (home, ws) = (Path::new("/h"), Path::new("/h/proj"));
        assert!(outside_the_project(Path::new("/h/.claude/s.sh"), home, ws));
        assert!(!outside_the_project(
            Path::new("/h/proj/src/x.rs"),
            home,
            ws
        ));
        assert!(!outside_the_project(Path::new("/h/proj"), home, ws));
        assert!(!outside_the_project(Path::new("/h"), home, ws));
        // The home as the workspace: its files count again.
        assert!(outside_the_project(
            Path::new("/h/.claude/s.sh"),
            home,
            home
        ));
        assert!(!outside_the_project(Path::new("/h"), home, home));
        assert!(outside_the_project(
            Path::new("/h/.codex/n.py"),
            home,
            Path::new("/")
        ));
    }
}
