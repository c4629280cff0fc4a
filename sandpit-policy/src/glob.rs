//! Globs in path lists: `*` matches any run of characters within one component, `?`
//! one character, and `**` (a whole component) any number of whole components,
//! none included. A rule holds for every path that matches and everything beneath
//! it, as a plain path rule does (`~/.config/*/credentials*`, `**/.env`).
//!
//! Each layer compiles a glob its own way (`docs/kernel.md`): the decision function
//! and the interposer match it against each path they are asked about, so files
//! made later are held too; the Linux kernel layer needs concrete paths and takes
//! what [`expand`] finds when the run starts.
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Whether some component of `p` holds a wildcard.
pub fn is_glob(p: &[u8]) -> bool {
    p.iter().any(|&b| b == b'*' || b == b'?')
}

/// Why `p` (an expanded policy path) is no glob a rule can hold: `**` must be a
/// whole component.
pub fn check(p: &Path) -> Result<(), String> {
    for c in p.as_os_str().as_bytes().split(|&b| b == b'/') {
        if c != b"**" && c.windows(2).any(|w| w == b"**") {
            return Err(format!(
                "\"**\" must be a whole component (as in \"~/**/.env\"), not part of {:?}",
                String::from_utf8_lossy(c)
            ));
        }
    }
    Ok(())
}

/// The components of `p` before its first wildcard: where [`expand`] starts, and
/// the part of a glob whose symlinks the loader resolves.
pub fn literal_prefix(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        if is_glob(c.as_os_str().as_bytes()) {
            break;
        }
        out.push(c);
    }
    out
}

/// One component against one pattern component (`*`, `?`, bytes). `?` takes one
/// UTF-8 character (all its bytes), as the regular expressions Seatbelt gets do.
fn component(name: &[u8], pat: &[u8]) -> bool {
    let (mut n, mut p) = (0, 0);
    // Where the last `*` was, and how much of `name` it had taken then.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pat.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(b'?') => {
                p += 1;
                n += match name[n] {
                    0xf0.. => 4,
                    0xe0.. => 3,
                    0xc0.. => 2,
                    _ => 1,
                };
                n = n.min(name.len());
            }
            Some(&c) if c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// The first component of `b` (leading `/`s skipped) and what follows it.
fn first(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let start = b.iter().position(|&c| c != b'/')?;
    let b = &b[start..];
    let end = b.iter().position(|&c| c == b'/').unwrap_or(b.len());
    Some(b.split_at(end))
}

/// Whether the components of `names` match those of `pats` whole. Allocates
/// nothing: the interposer asks this of every path it judges.
fn components(names: &[u8], pats: &[u8]) -> bool {
    match first(pats) {
        None => first(names).is_none(),
        Some((b"**", rest)) => {
            let mut n = names;
            loop {
                if components(n, rest) {
                    return true;
                }
                match first(n) {
                    Some((_, more)) => n = more,
                    None => return false,
                }
            }
        }
        Some((p, rest)) => {
            first(names).is_some_and(|(c, more)| component(c, p) && components(more, rest))
        }
    }
}

fn split(p: &[u8]) -> Vec<&[u8]> {
    p.split(|&b| b == b'/').filter(|c| !c.is_empty()).collect()
}

/// The depth (number of components) of the shallowest of `path`'s ancestors, itself
/// included, that `pattern` matches: the rule's depth for this path, as a plain
/// rule's is its own. `None` when the rule does not hold for `path`. Both absolute.
/// Allocates nothing.
pub fn root_depth(path: &[u8], pattern: &[u8]) -> Option<usize> {
    // A pattern of k components without `**` can only match k components.
    let mut fixed = Some(0usize);
    let mut pats = pattern;
    while let Some((c, more)) = first(pats) {
        fixed = fixed.and_then(|n| (c != b"**").then_some(n + 1));
        pats = more;
    }
    let (mut end, mut k) = (0, 0);
    loop {
        if fixed.is_none_or(|f| f == k) && components(&path[..end], pattern) {
            return Some(k);
        }
        if fixed.is_some_and(|f| k >= f) {
            return None;
        }
        let (_, rest) = first(&path[end..])?;
        end = path.len() - rest.len();
        k += 1;
    }
}

/// The most directory entries one glob's [`expand`] may visit (some 50 ms).
pub const WALK_LIMIT: usize = 100_000;

/// Why [`expand`] stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooMany {
    pub visited: usize,
}

/// What one walk found: the matches, or that it stopped at the limit.
pub type Walk = Result<Vec<PathBuf>, TooMany>;

/// What each glob of a policy's path lists matched when the loader walked it
/// ([`expand`], bounded by [`WALK_LIMIT`]), by the glob's value. The loader walks
/// every glob to find matches reached through a link; the Linux kernel layer takes
/// the same walk's matches instead of walking a `**` over the workspace again.
///
/// A record of the filesystem at load time, not policy: it stays out of the
/// snapshot (the interposer matches each path against the glob instead), and two
/// policies that differ only here are equal. Shared, so cloning a policy is cheap.
#[derive(Debug, Clone, Default)]
pub struct Matches(std::sync::Arc<std::collections::BTreeMap<PathBuf, Walk>>);

impl Matches {
    pub fn new(walks: std::collections::BTreeMap<PathBuf, Walk>) -> Matches {
        Matches(std::sync::Arc::new(walks))
    }

    /// What the glob `pattern` matched when it was loaded; `None` when the loader
    /// did not see it (a rule added since).
    pub fn get(&self, pattern: &Path) -> Option<&Walk> {
        self.0.get(pattern)
    }
}

impl PartialEq for Matches {
    fn eq(&self, _: &Matches) -> bool {
        true
    }
}

impl Eq for Matches {}

/// The existing paths `pattern` matches, found by walking from its literal prefix
/// (a link to a directory is followed where a named component matches it, never
/// by `**`; a path through one is given as written), in
/// sorted order, matches beneath a match left out (the match covers them). Stops
/// after visiting `limit` directory entries.
pub fn expand(pattern: &Path, limit: usize) -> Result<Vec<PathBuf>, TooMany> {
    let pats: Vec<Vec<u8>> = split(pattern.as_os_str().as_bytes())
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect();
    let start = literal_prefix(pattern);
    let skip = split(start.as_os_str().as_bytes()).len();
    let mut out = vec![];
    let mut visited = 0;
    // (directory, the pattern components left for what lies in it)
    let mut todo: Vec<(PathBuf, Vec<Vec<u8>>)> = vec![(start.clone(), pats[skip..].to_vec())];
    if pats[skip..].iter().all(|c| c == b"**") {
        // No wildcard at all, or only `**`s, which match none: the path itself.
        return Ok(if start.symlink_metadata().is_ok() {
            vec![start]
        } else {
            vec![]
        });
    }
    while let Some((dir, rest)) = todo.pop() {
        let Some((first, tail)) = rest.split_first() else {
            continue;
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            visited += 1;
            if visited > limit {
                return Err(TooMany { visited });
            }
            let name = e.file_name();
            let name = name.as_bytes();
            let path = dir.join(e.file_name());
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            // A link to a directory is followed where a named component took it
            // (`~/.config/*/…` through a dotfile manager's link), never by `**`,
            // which could loop.
            let walk_into = |follow: bool| {
                is_dir || (follow && std::fs::metadata(&path).is_ok_and(|m| m.is_dir()))
            };
            // (what is left of the pattern, whether a link may be followed into)
            let mut next: Vec<(Vec<Vec<u8>>, bool)> = vec![];
            if first == b"**" {
                // `**` takes this entry and stays, or is done with (zero or more).
                next.push((rest.to_vec(), false));
                if let Some((after, more)) = tail.split_first() {
                    if component(name, after) {
                        next.push((more.to_vec(), true));
                    }
                } else {
                    next.push((vec![], false));
                }
            } else if component(name, first) {
                next.push((tail.to_vec(), true));
            }
            for (left, follow) in next {
                if left.is_empty() {
                    out.push(path.clone());
                } else if walk_into(follow) {
                    todo.push((path.clone(), left));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    // A match beneath another adds nothing.
    let mut kept: Vec<PathBuf> = vec![];
    for p in out {
        if !kept.iter().any(|k| p.starts_with(k)) {
            kept.push(p);
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_match_wildcards_within_one_component() {
        for (name, pat, want) in [
            ("credentials", "credentials*", true),
            ("credentials.json", "credentials*", true),
            ("xcredentials", "credentials*", false),
            ("a.env", "*.env", true),
            (".env", "*.env", true),
            ("env", "*.env", false),
            ("abc", "a?c", true),
            ("ac", "a?c", false),
            ("abcbc", "a*bc", true),
            ("abcbd", "a*bc", false),
            ("", "*", true),
            ("x", "", false),
            ("id_rsa", "id_*", true),
            ("aaa", "a*a*a", true),
            ("aa", "a*a*a", false),
            // `?` is one character, however many bytes.
            ("caf\u{e9}", "caf?", true),
            ("\u{1f600}x", "?x", true),
            ("\u{1f600}x", "??x", false),
        ] {
            assert_eq!(
                component(name.as_bytes(), pat.as_bytes()),
                want,
                "{name} {pat}"
            );
        }
    }

    #[test]
    fn a_glob_holds_from_the_shallowest_ancestor_it_matches() {
        let d = |p: &str, g: &str| root_depth(p.as_bytes(), g.as_bytes());
        assert_eq!(
            d(
                "/h/.config/gcloud/credentials.db",
                "/h/.config/*/credentials*"
            ),
            Some(4)
        );
        assert_eq!(
            d(
                "/h/.config/gcloud/credentials.db/x",
                "/h/.config/*/credentials*"
            ),
            Some(4)
        );
        assert_eq!(
            d("/h/.config/credentials", "/h/.config/*/credentials*"),
            None
        );
        assert_eq!(
            d("/h/.config/a/b/credentials", "/h/.config/*/credentials*"),
            None
        );
        // `**`: none, one or many components.
        assert_eq!(d("/w/.env", "/w/**/.env"), Some(2));
        assert_eq!(d("/w/a/b/.env", "/w/**/.env"), Some(4));
        assert_eq!(d("/w/a/b/.env/inner", "/w/**/.env"), Some(4));
        assert_eq!(d("/w/a/.envrc", "/w/**/.env"), None);
        assert_eq!(d("/x/.env", "/w/**/.env"), None);
        assert_eq!(d("/w", "/w/**"), Some(1));
        assert_eq!(d("/w/a/b", "/w/**/b/**"), Some(3));
        // Whole components only: `?` and `*` never take a `/`.
        assert_eq!(d("/h/a/b", "/h/a?b"), None);
        assert_eq!(d("/h/a/b", "/h/*"), Some(2));
    }

    #[test]
    fn checks_and_prefixes() {
        assert!(check(Path::new("/w/**/.env")).is_ok());
        assert!(check(Path::new("/w/a**/.env")).is_err());
        assert!(check(Path::new("/w/***")).is_err());
        assert_eq!(
            literal_prefix(Path::new("/h/.config/*/c*")),
            Path::new("/h/.config")
        );
        assert_eq!(literal_prefix(Path::new("/h/x")), Path::new("/h/x"));
        assert!(is_glob(b"/a/b?") && is_glob(b"/a/*/b") && !is_glob(b"/a/b"));
    }

    #[test]
    fn expand_walks_from_the_literal_prefix() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for f in [
            "a/.env",
            "a/b/c/.env",
            ".env",
            "a/.envrc",
            "x/credentials.json",
            "y/z/credentials",
        ] {
            let p = r.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
        }
        std::fs::create_dir_all(r.join("d/.env/inner/.env")).unwrap();
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(r).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            rel(expand(&r.join("**/.env"), 1000).unwrap()),
            [".env", "a/.env", "a/b/c/.env", "d/.env"]
        );
        assert_eq!(
            rel(expand(&r.join("*/credentials*"), 1000).unwrap()),
            ["x/credentials.json"]
        );
        assert_eq!(
            rel(expand(&r.join("nothing/*"), 1000).unwrap()),
            Vec::<String>::new()
        );
        assert!(expand(&r.join("**/.env"), 3).is_err());
        // The limit counts the entries visited: `x` and `y` under `*/…` are two.
        std::fs::create_dir_all(r.join("only/x")).unwrap();
        std::fs::create_dir_all(r.join("only/y")).unwrap();
        assert_eq!(
            rel(expand(&r.join("only/*"), 2).unwrap()),
            ["only/x", "only/y"]
        );
        assert_eq!(expand(&r.join("only/*"), 1), Err(TooMany { visited: 2 }));
        // `**` alone matches none too: the directory itself.
        assert_eq!(rel(expand(&r.join("only/**"), 10).unwrap()), ["only"]);
        // A symlinked directory is not walked down by `**`, and is by a named
        // component.
        std::os::unix::fs::symlink(r.join("a"), r.join("link")).unwrap();
        assert!(!rel(expand(&r.join("**/.env"), 1000).unwrap()).contains(&"link/.env".to_string()));
        assert_eq!(
            rel(expand(&r.join("l*/.env"), 1000).unwrap()),
            ["link/.env"]
        );
    }
}
