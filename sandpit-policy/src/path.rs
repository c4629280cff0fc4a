//! Policy paths: expansion of `~`, `$HOME`, `$TMPDIR` and `.`, lexical normalization,
//! symlink resolution of the part that exists, and matching by whole components
//! (never by string prefix: `/home/u/.sshx` is not inside `/home/u/.ssh`).
use std::path::{Component, Path, PathBuf};

/// The directories policy paths are expanded against.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Context {
    /// The user's home directory (`~`, `$HOME`).
    pub home: PathBuf,
    /// The project directory (`.`); writable, and where `.sandpit.toml` lives.
    pub workspace: PathBuf,
    /// The run's scratch directory (`$TMPDIR`).
    pub scratch: PathBuf,
    /// sandpit's own state (`~/.sandpit`): never writable from the sandbox.
    pub state_dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path is empty")]
    Empty,
    #[error("path contains a NUL or control character")]
    Control,
    #[error("unknown variable ${0}: only ~, $HOME and $TMPDIR are expanded")]
    Variable(String),
    #[error("\"~{0}\" (another user's home) is not supported")]
    OtherUser(String),
}

/// Expand a policy path and make it absolute and lexically normal. Relative paths are
/// relative to the workspace. Does not touch the filesystem.
pub fn expand(raw: &str, ctx: &Context) -> Result<PathBuf, PathError> {
    if raw.is_empty() {
        return Err(PathError::Empty);
    }
    if raw.chars().any(|c| c.is_control()) {
        return Err(PathError::Control);
    }
    let (base, rest): (&Path, &str) = if raw == "~" {
        (&ctx.home, "")
    } else if let Some(r) = raw.strip_prefix("~/") {
        (&ctx.home, r)
    } else if let Some(user) = raw.strip_prefix('~') {
        return Err(PathError::OtherUser(
            user.split('/').next().unwrap_or("").into(),
        ));
    } else if let Some(var) = raw.strip_prefix('$') {
        let (name, r) = var.split_once('/').unwrap_or((var, ""));
        let name = name.trim_start_matches('{').trim_end_matches('}');
        match name {
            "HOME" => (&ctx.home, r),
            "TMPDIR" => (&ctx.scratch, r),
            other => return Err(PathError::Variable(other.into())),
        }
    } else if let Some(r) = raw.strip_prefix('/') {
        (Path::new("/"), r)
    } else {
        (&ctx.workspace, raw)
    };
    Ok(normalize(&base.join(rest)))
}

/// Lexically normalize an absolute path: drop `.` and empty components, apply `..`
/// (never above `/`). Relative input is taken relative to `/`.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Resolve symlinks in the longest existing ancestor of `p` (so a rule on `~/.ssh`
/// still holds when `~/.ssh` links elsewhere, and `/tmp` becomes `/private/tmp` on
/// macOS), keeping the part that does not exist yet as written.
pub fn resolve_existing(p: &Path) -> PathBuf {
    let p = normalize(p);
    let mut existing = p.as_path();
    let mut tail: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for t in tail.iter().rev() {
                out.push(t);
            }
            return normalize(&out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name);
                existing = parent;
            }
            _ => return p,
        }
    }
}

/// Whether `path` is `root` or below it, by whole components.
pub fn is_within(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

/// How many normal components a path has (a deeper rule is more specific).
pub fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// Show a path the way a user wrote it: `~/…` for paths under home.
pub fn display(p: &Path, ctx: &Context) -> String {
    match p.strip_prefix(&ctx.home) {
        Ok(rest) if rest.as_os_str().is_empty() => "~".into(),
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => p.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn ctx() -> Context {
        Context {
            home: "/home/u".into(),
            workspace: "/home/u/proj".into(),
            scratch: "/tmp/sandpit-1/run".into(),
            state_dir: "/home/u/.sandpit".into(),
        }
    }

    #[test]
    fn expansion() {
        let c = ctx();
        assert_eq!(expand("~/.ssh", &c).unwrap(), Path::new("/home/u/.ssh"));
        assert_eq!(expand("~", &c).unwrap(), Path::new("/home/u"));
        assert_eq!(expand("$HOME/.aws", &c).unwrap(), Path::new("/home/u/.aws"));
        assert_eq!(
            expand("${HOME}/.aws", &c).unwrap(),
            Path::new("/home/u/.aws")
        );
        assert_eq!(
            expand("$TMPDIR", &c).unwrap(),
            Path::new("/tmp/sandpit-1/run")
        );
        assert_eq!(expand(".", &c).unwrap(), Path::new("/home/u/proj"));
        assert_eq!(
            expand(".git/hooks", &c).unwrap(),
            Path::new("/home/u/proj/.git/hooks")
        );
        assert_eq!(
            expand("//etc/./x/../passwd", &c).unwrap(),
            Path::new("/etc/passwd")
        );
        assert_eq!(expand("/../../etc", &c).unwrap(), Path::new("/etc"));
        assert_eq!(expand("", &c), Err(PathError::Empty));
        assert_eq!(expand("a\0b", &c), Err(PathError::Control));
        assert_eq!(expand("$FOO/x", &c), Err(PathError::Variable("FOO".into())));
        assert_eq!(
            expand("~bob/x", &c),
            Err(PathError::OtherUser("bob".into()))
        );
    }

    #[test]
    fn within_is_by_component() {
        assert!(is_within(
            Path::new("/home/u/.ssh/id_rsa"),
            Path::new("/home/u/.ssh")
        ));
        assert!(is_within(
            Path::new("/home/u/.ssh"),
            Path::new("/home/u/.ssh")
        ));
        assert!(!is_within(
            Path::new("/home/u/.sshx"),
            Path::new("/home/u/.ssh")
        ));
    }

    #[test]
    fn resolve_keeps_missing_tail() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, d.path().join("link")).unwrap();
        let got = resolve_existing(&d.path().join("link/not/yet"));
        assert_eq!(got, std::fs::canonicalize(&real).unwrap().join("not/yet"));
    }
}
