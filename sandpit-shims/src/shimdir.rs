//! The shim directory: one entry per installed network tool (and per installed
//! command that an `exec.block` pattern starts with), each re-entering
//! `sandpit exec TOOL "$@"`.
//!
//! Two kinds were measured (see `bench/shim_exec.sh`): a symlink named after the tool
//! that points at the sandpit binary, which dispatches on argv[0], and a two-line sh
//! script. The symlink saves a shell start-up on every call and is the default.
use crate::{Error, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The network tools that get a shim when installed.
pub const TOOLS: &[&str] = &[
    "curl", "wget", "nc", "ncat", "netcat", "ssh", "scp", "sftp", "rsync", "socat", "telnet",
    "ftp", "dig", "nslookup", "host", "nmap", "git",
];

/// First line marker of script shims; `sandpit exec` skips files that carry it when
/// it looks for the real binary.
pub const SHIM_MARKER: &str = "# sandpit-shim";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShimKind {
    /// `TOOL -> sandpit` symlink; sandpit dispatches on argv[0].
    Symlink,
    /// `#!/bin/sh` script running `exec sandpit exec TOOL "$@"`.
    Script,
}

/// Find `name` as an executable file in `path` (a PATH value), skipping `skip`.
pub fn which(name: &str, path: &str, skip: &Path) -> Option<PathBuf> {
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let d = Path::new(dir);
        if d == skip {
            continue;
        }
        let cand = d.join(name);
        if let Ok(meta) = std::fs::metadata(&cand) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Some(cand);
            }
        }
    }
    None
}

/// The first word of an `exec.block` pattern if it names a plain command (`re:`
/// patterns: the literal word before any regex syntax).
pub fn pattern_command(pattern: &str) -> Option<String> {
    let p = pattern.strip_prefix("re:").unwrap_or(pattern).trim_start();
    let p = p.strip_prefix('^').unwrap_or(p);
    let word: String = p
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
        .collect();
    let rest = &p[word.len()..];
    // "nc\\s+-e": the word ends at a regex escape or whitespace; "curl.*" is not a
    // plain word.
    if word.is_empty()
        || word.ends_with('.')
        || rest.starts_with(['*', '?', '+', '{', '|', '(', '['])
    {
        return None;
    }
    Some(word.to_ascii_lowercase())
}

/// Create (or refresh) the shim directory `dir` for every tool in [`TOOLS`] and
/// every command named first by an `exec.block` pattern that is installed on
/// `path`. `dir` is made 0755 and every entry points at `sandpit_exe`. Returns the
/// tools shimmed.
pub fn build_shim_dir(
    dir: &Path,
    sandpit_exe: &Path,
    exec_block_patterns: &[String],
    path: &str,
    kind: ShimKind,
) -> Result<Vec<String>> {
    if !dir.is_absolute() {
        return Err(Error::Relative(dir.to_path_buf()));
    }
    let io = |source| Error::ShimDir {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    let mut names: Vec<String> = TOOLS.iter().map(|t| t.to_string()).collect();
    names.extend(
        exec_block_patterns
            .iter()
            .filter_map(|p| pattern_command(p)),
    );
    names.sort();
    names.dedup();
    let mut made = Vec::new();
    for name in names {
        if name == "sandpit" || name.contains('/') || which(&name, path, dir).is_none() {
            continue;
        }
        let target = dir.join(&name);
        let _ = std::fs::remove_file(&target);
        match kind {
            ShimKind::Symlink => std::os::unix::fs::symlink(sandpit_exe, &target).map_err(io)?,
            ShimKind::Script => {
                let exe = sandpit_exe.to_string_lossy().replace('\'', r"'\''");
                let text = format!("#!/bin/sh\n{SHIM_MARKER}\nexec '{exe}' exec {name} \"$@\"\n");
                std::fs::write(&target, text).map_err(io)?;
                std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))
                    .map_err(io)?;
            }
        }
        made.push(name);
    }
    Ok(made)
}

/// [`build_shim_dir`] for a policy: the built-in tools, the commands `exec.block`
/// patterns start with, and `shims.extra`. Symlink shims (the faster kind).
pub fn build_for_policy(
    dir: &Path,
    sandpit_exe: &Path,
    policy: &sandpit_policy::Policy,
    path: &str,
) -> Result<Vec<String>> {
    let mut patterns: Vec<String> = policy
        .exec
        .block
        .iter()
        .map(|r| r.value.source.clone())
        .collect();
    patterns.extend(policy.shims.extra.iter().map(|r| r.value.clone()));
    build_shim_dir(dir, sandpit_exe, &patterns, path, ShimKind::Symlink)
}

/// The variables a child of `sandpit run --shims` needs besides the snapshot
/// (`SANDPIT_SNAPSHOT`) and proxy (`SANDPIT_PROXY_URL`): PATH with the shim
/// directory first, and the directory itself so `sandpit exec` can skip it.
pub fn child_env(dir: &Path, path: &str) -> Vec<(String, String)> {
    let d = dir.to_string_lossy().into_owned();
    let path = if path.is_empty() {
        d.clone()
    } else {
        format!("{d}:{path}")
    };
    vec![
        ("PATH".to_string(), path),
        ("SANDPIT_SHIM_DIR".to_string(), d),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_commands() {
        assert_eq!(pattern_command("curl --data").as_deref(), Some("curl"));
        assert_eq!(pattern_command("re:nc\\s+-e").as_deref(), Some("nc"));
        assert_eq!(pattern_command("re:^base64 -d").as_deref(), Some("base64"));
        assert_eq!(pattern_command("re:curl.*x"), None);
        assert_eq!(pattern_command("re:(a|b)"), None);
        assert_eq!(pattern_command("python3 -c"), Some("python3".into()));
    }
}
