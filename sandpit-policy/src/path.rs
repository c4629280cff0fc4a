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
    #[error("path is longer than {MAX_PATH} bytes")]
    TooLong,
}

/// The longest path a policy may name (the kernel's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;

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
    let p = normalize(&base.join(rest));
    if p.as_os_str().len() > MAX_PATH {
        return Err(PathError::TooLong);
    }
    Ok(p)
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
    Resolver::default().resolve(p)
}

/// [`resolve_existing`] for many paths: it remembers each directory it has looked up,
/// so a policy's hundreds of paths under one home cost one `readlink` per distinct
/// component instead of one per component of every path.
#[derive(Debug, Default)]
pub struct Resolver {
    /// Lexical path → its real path, or `None` when it (or a link on the way) is missing.
    /// Keyed by the path's bytes: a `PathBuf` key hashes and compares component by
    /// component, and resolving a policy asks about the same ancestors dozens of times.
    known: std::collections::HashMap<std::ffi::OsString, Option<PathBuf>>,
}

/// The real path of the longest ancestor of `p` (lexically normalized first) that
/// `real` finds, with the rest of `p` appended as written; `p` if none is found.
fn below_longest_real(p: &Path, mut real: impl FnMut(&Path) -> Option<PathBuf>) -> PathBuf {
    let p = normalize(p);
    let mut ancestor = p.as_path();
    let mut tail: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Some(mut out) = real(ancestor) {
            out.extend(tail.iter().rev());
            return normalize(&out);
        }
        match (ancestor.parent(), ancestor.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name);
                ancestor = parent;
            }
            _ => return p,
        }
    }
}

/// Symlinks followed in one lookup before giving up (the kernel's own limit).
const MAX_LINKS: u32 = 40;

impl Resolver {
    /// See [`resolve_existing`].
    pub fn resolve(&mut self, p: &Path) -> PathBuf {
        below_longest_real(p, |a| self.real(a, &mut 0))
    }

    /// The real path of the lexically normal absolute `p`, if it exists: each
    /// component looked up below its parent's real path, links followed the way
    /// `realpath(3)` does (`..` in a link's target leaves the real directory).
    fn real(&mut self, p: &Path, links: &mut u32) -> Option<PathBuf> {
        let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
            return Some(PathBuf::from("/"));
        };
        if let Some(known) = self.known.get(p.as_os_str()) {
            return known.clone();
        }
        let found = self.real(parent, links).and_then(|dir| {
            let candidate = dir.join(name);
            match std::fs::read_link(&candidate) {
                Ok(target) => {
                    *links += 1;
                    if *links > MAX_LINKS {
                        return None;
                    }
                    let mut at = if target.is_absolute() {
                        PathBuf::from("/")
                    } else {
                        dir
                    };
                    for c in target.components() {
                        match c {
                            // As the kernel: `..` (and a trailing `/`) only after a
                            // directory.
                            Component::ParentDir if !at.is_dir() => return None,
                            Component::ParentDir => {
                                at.pop();
                            }
                            Component::Normal(n) => at = self.real(&at.join(n), links)?,
                            _ => {}
                        }
                    }
                    if target.as_os_str().as_encoded_bytes().ends_with(b"/") && !at.is_dir() {
                        return None;
                    }
                    Some(at)
                }
                // EINVAL: it exists and is not a link.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Some(candidate),
                Err(_) => None,
            }
        });
        // A lookup that ran out of links says nothing about the paths it passed
        // through (another lookup, with its own budget, may resolve them).
        if *links <= MAX_LINKS {
            self.known.insert(p.as_os_str().to_owned(), found.clone());
        }
        found
    }
}

/// Whether `path` is `root` or below it, by whole components. Two clean paths (what
/// [`normalize`] makes: absolute, no `.`, `..`, doubled or trailing `/`) compare as
/// bytes; anything else goes through [`Path::starts_with`].
pub fn is_within(path: &Path, root: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    if is_clean(path.as_os_str().as_bytes()) && is_clean(root.as_os_str().as_bytes()) {
        return is_within_normal(path, root);
    }
    path.starts_with(root)
}

/// [`is_within`] for paths the caller knows to be clean (a `/` ending `root` is
/// allowed): a byte comparison, for callers that make thousands of them.
pub fn is_within_normal(path: &Path, root: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (p, r) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    let r = r.strip_suffix(b"/").unwrap_or(r);
    p.starts_with(r) && (p.len() == r.len() || r.is_empty() || p[r.len()] == b'/')
}

/// Absolute, and no empty, `.` or `..` component and no trailing `/` (except `/`).
fn is_clean(b: &[u8]) -> bool {
    if b == b"/" {
        return true;
    }
    b.first() == Some(&b'/')
        && b[1..]
            .split(|&c| c == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..")
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
        assert_eq!(expand(&"d/".repeat(3000), &c), Err(PathError::TooLong));
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

    /// What `resolve_existing` was before it cached: `canonicalize` on the longest
    /// ancestor that has a real path.
    fn by_canonicalize(p: &Path) -> PathBuf {
        below_longest_real(p, |a| std::fs::canonicalize(a).ok())
    }

    #[test]
    fn cached_resolution_agrees_with_canonicalize() {
        use std::os::unix::fs::symlink;
        let d = tempfile::tempdir().unwrap();
        let t = d.path();
        for dir in ["a/b/c", "x/y"] {
            std::fs::create_dir_all(t.join(dir)).unwrap();
        }
        std::fs::write(t.join("a/file"), "").unwrap();
        symlink(t.join("a/b"), t.join("abs")).unwrap(); // absolute
        symlink("a/b/c", t.join("rel")).unwrap(); // relative, several components
        symlink("../../x", t.join("a/b/up")).unwrap(); // `..` from the real directory
        symlink("../rel/..", t.join("x/via")).unwrap(); // `..` after a link: physical
        symlink("abs", t.join("chain")).unwrap(); // link to a link
        symlink("nowhere", t.join("dangling")).unwrap();
        symlink("loop2", t.join("loop1")).unwrap();
        symlink("loop1", t.join("loop2")).unwrap();
        // `..` or a trailing `/` after a file fails as in the kernel.
        symlink("file/..", t.join("a/dotdot_file")).unwrap();
        symlink("file/", t.join("a/slash_file")).unwrap();
        // A chain of 41 links: the lookup through it runs out, and must not leave
        // `target`, its last link, unresolved for the lookups after it.
        symlink(t.join("a/b"), t.join("target")).unwrap();
        symlink("target", t.join("l0")).unwrap();
        for i in 1..40 {
            symlink(format!("l{}", i - 1), t.join(format!("l{i}"))).unwrap();
        }
        let mut cached = Resolver::default();
        for p in [
            "",
            "a",
            "a/b/c",
            "a/b/c/missing/deeper",
            "abs",
            "abs/c",
            "abs/c/new",
            "rel",
            "rel/new",
            "a/b/up",
            "a/b/up/y",
            "a/b/up/y/new",
            "x/via",
            "x/via/c",
            "chain/c",
            "dangling",
            "dangling/x",
            "loop1",
            "loop1/x",
            "a/file",
            "a/file/x",
            "abs/../x",
            "missing",
            "missing/a/b",
            "a/dotdot_file",
            "a/dotdot_file/x",
            "a/slash_file",
            "l39",
            "l39/c",
            "target/c",
        ] {
            let p = t.join(p);
            assert_eq!(cached.resolve(&p), by_canonicalize(&p), "{}", p.display());
            assert_eq!(resolve_existing(&p), by_canonicalize(&p), "{}", p.display());
        }
        assert_eq!(
            cached.resolve(&t.join("target")),
            std::fs::canonicalize(t.join("a/b")).unwrap()
        );
        // Physical `..`: x/via is rel/.. = a/b, not x.
        assert_eq!(
            cached.resolve(&t.join("x/via")),
            std::fs::canonicalize(t.join("a/b")).unwrap()
        );
    }

    #[test]
    fn clean_paths_compare_as_bytes_like_components() {
        let cases = [
            ("/home/u/.ssh/id", "/home/u/.ssh", true),
            ("/home/u/.ssh", "/home/u/.ssh", true),
            ("/home/u/.sshx", "/home/u/.ssh", false),
            ("/home/u", "/home/u/.ssh", false),
            ("/anything", "/", true),
            ("/", "/", true),
            ("/home//u/./.ssh/", "/home/u/.ssh", true),
            ("/home/u/.ssh/../x", "/home/u/.ssh", true),
            ("/home/u/.ssh", "/home/u/.ssh/", true),
            ("relative/x", "relative", true),
        ];
        for (p, r, want) in cases {
            let (p, r) = (Path::new(p), Path::new(r));
            assert_eq!(is_within(p, r), want, "{p:?} within {r:?}");
            assert_eq!(is_within(p, r), p.starts_with(r), "{p:?} within {r:?}");
        }
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
