//! The decision boundary of the library: a small trait the hooks consult, and the
//! snapshot format it is loaded from.
//!
//! Until the policy crate's snapshot lands this reads a line-based format of its own
//! (documented on [`parse`]); the hooks only see [`Decider`].
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    pub fn verb(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetMode {
    Filtered,
    Offline,
    Unrestricted,
}

/// The rule that decided a denial, as the user wrote it.
#[derive(Debug, Clone, Copy)]
pub struct Rule<'a> {
    /// `files.block_read`, `exec.block`, …
    pub key: &'a str,
    /// The entry text as written (`~/.ssh`).
    pub entry: &'a str,
    /// Where it was written (`/home/u/.sandpit/config.toml:3`), or a built-in name.
    pub origin: &'a str,
}

impl fmt::Display for Rule<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} \"{}\" in {}", self.key, self.entry, self.origin)
    }
}

pub trait Decider: Send + Sync {
    /// `path` is absolute and canonical (no `.`, `..`, `//`, symlinks).
    fn path(&self, access: Access, path: &[u8]) -> Result<(), Rule<'_>>;
    /// The whole command line, argv joined by spaces.
    fn exec(&self, argv: &[&[u8]]) -> Result<(), Rule<'_>>;
    /// True when the variable named `name` must not reach spawned commands.
    fn withhold(&self, name: &[u8]) -> bool;
    fn net_mode(&self) -> NetMode;
    /// The home directory the policy was written against (to print `~/…`).
    fn home(&self) -> &[u8];
    /// The state directory the snapshot must live in.
    fn state_dir(&self) -> &[u8];
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("not a sandpit snapshot (bad header)")]
    Header,
    #[error("line {line}: {msg}")]
    Line { line: usize, msg: &'static str },
}

struct Entry {
    value: Vec<u8>,
    entry: String,
    origin: String,
}

/// A policy decoded from the snapshot.
pub struct Snapshot {
    home: Vec<u8>,
    state_dir: Vec<u8>,
    net: NetMode,
    block_read: Vec<Entry>,
    allow_write: Vec<Entry>,
    block_write: Vec<Entry>,
    exec_block: Vec<Entry>,
    withhold: Vec<Vec<u8>>,
}

pub const HEADER: &str = "sandpit-snapshot v1";

/// Parse the snapshot:
/// ```text
/// sandpit-snapshot v1
/// home /home/u
/// state_dir /home/u/.sandpit
/// net filtered|offline|unrestricted
/// block_read  /abs/path \t entry-as-written \t origin
/// allow_write /abs/path \t entry \t origin
/// block_write /abs/path \t entry \t origin
/// exec_block  lowercase-substring \t entry \t origin
/// withhold    NAME_GLOB
/// ```
/// Reads are allowed unless under a `block_read` path. Writes are allowed only under
/// an `allow_write` path and not under a `block_write` or `block_read` path.
pub fn parse(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    let text = std::str::from_utf8(bytes).map_err(|_| SnapshotError::Header)?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(SnapshotError::Header);
    }
    let mut s = Snapshot {
        home: Vec::new(),
        state_dir: Vec::new(),
        net: NetMode::Offline,
        block_read: vec![],
        allow_write: vec![],
        block_write: vec![],
        exec_block: vec![],
        withhold: vec![],
    };
    let mut saw_net = false;
    for (i, line) in lines.enumerate() {
        let line_no = i + 2;
        let bad = |msg| SnapshotError::Line { line: line_no, msg };
        if line.is_empty() {
            continue;
        }
        let (key, rest) = line.split_once(' ').ok_or(bad("missing value"))?;
        let rest = rest.trim_start();
        let entry = |rest: &str| -> Result<Entry, SnapshotError> {
            let mut f = rest.split('\t');
            let value = f.next().unwrap_or("").trim_end();
            let entry = f.next().ok_or(bad("missing entry text"))?;
            let origin = f.next().ok_or(bad("missing origin"))?;
            if value.is_empty() {
                return Err(bad("empty value"));
            }
            Ok(Entry {
                value: value.as_bytes().to_vec(),
                entry: entry.to_string(),
                origin: origin.to_string(),
            })
        };
        let abs = |e: Entry| -> Result<Entry, SnapshotError> {
            if e.value.first() != Some(&b'/') {
                return Err(bad("path is not absolute"));
            }
            Ok(e)
        };
        match key {
            "home" => s.home = rest.as_bytes().to_vec(),
            "state_dir" => s.state_dir = rest.as_bytes().to_vec(),
            "net" => {
                saw_net = true;
                s.net = match rest {
                    "filtered" => NetMode::Filtered,
                    "offline" => NetMode::Offline,
                    "unrestricted" => NetMode::Unrestricted,
                    _ => return Err(bad("unknown network mode")),
                }
            }
            "block_read" => s.block_read.push(abs(entry(rest)?)?),
            "allow_write" => s.allow_write.push(abs(entry(rest)?)?),
            "block_write" => s.block_write.push(abs(entry(rest)?)?),
            "exec_block" => {
                let mut e = entry(rest)?;
                e.value.make_ascii_lowercase();
                s.exec_block.push(e)
            }
            "withhold" => s.withhold.push(rest.as_bytes().to_vec()),
            _ => return Err(bad("unknown key")),
        }
    }
    if s.home.first() != Some(&b'/') || s.state_dir.first() != Some(&b'/') || !saw_net {
        return Err(SnapshotError::Line {
            line: 0,
            msg: "home, state_dir and net are required",
        });
    }
    Ok(s)
}

/// `path` equals `prefix` or lies below it.
pub fn under(path: &[u8], prefix: &[u8]) -> bool {
    let prefix = if prefix.len() > 1 && prefix.ends_with(b"/") {
        &prefix[..prefix.len() - 1]
    } else {
        prefix
    };
    if prefix == b"/" {
        return path.first() == Some(&b'/');
    }
    path.starts_with(prefix) && (path.len() == prefix.len() || path[prefix.len()] == b'/')
}

/// Shell-style glob with `*` only, case-sensitive (environment variable names).
pub fn glob(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while i < s.len() {
        if p < pat.len() && pat[p] == b'*' {
            star = Some(p);
            mark = i;
            p += 1;
        } else if p < pat.len() && pat[p] == s[i] {
            p += 1;
            i += 1;
        } else if let Some(sp) = star {
            p = sp + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

fn rule<'a>(key: &'a str, e: &'a Entry) -> Rule<'a> {
    Rule {
        key,
        entry: &e.entry,
        origin: &e.origin,
    }
}

impl Decider for Snapshot {
    fn path(&self, access: Access, path: &[u8]) -> Result<(), Rule<'_>> {
        if let Some(e) = self.block_read.iter().find(|e| under(path, &e.value)) {
            return Err(rule("files.block_read", e));
        }
        if access == Access::Write {
            if let Some(e) = self.block_write.iter().find(|e| under(path, &e.value)) {
                return Err(rule("files.block_write", e));
            }
            if !self.allow_write.iter().any(|e| under(path, &e.value)) {
                return Err(Rule {
                    key: "files.allow_write",
                    entry: "(no entry covers this path)",
                    origin: "the policy",
                });
            }
        }
        Ok(())
    }

    fn exec(&self, argv: &[&[u8]]) -> Result<(), Rule<'_>> {
        for e in &self.exec_block {
            let n = &e.value;
            // Case-insensitive substring over argv joined by single spaces, without
            // building the joined string.
            let total: usize = argv.iter().map(|a| a.len() + 1).sum::<usize>();
            let at = |k: usize| -> u8 {
                let mut k = k;
                for a in argv {
                    if k < a.len() {
                        return a[k].to_ascii_lowercase();
                    }
                    if k == a.len() {
                        return b' ';
                    }
                    k -= a.len() + 1;
                }
                0
            };
            let len = total.saturating_sub(1);
            if n.len() <= len && (0..=len - n.len()).any(|s| (0..n.len()).all(|j| at(s + j) == n[j]))
            {
                return Err(rule("exec.block", e));
            }
        }
        Ok(())
    }

    fn withhold(&self, name: &[u8]) -> bool {
        self.withhold.iter().any(|p| glob(p, name))
    }

    fn net_mode(&self) -> NetMode {
        self.net
    }

    fn home(&self) -> &[u8] {
        &self.home
    }

    fn state_dir(&self) -> &[u8] {
        &self.state_dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap() -> Snapshot {
        parse(
            b"sandpit-snapshot v1\nhome /h\nstate_dir /h/.sandpit\nnet filtered\n\
block_read /h/.ssh\t~/.ssh\t/h/.sandpit/config.toml:3\n\
allow_write /h/p\t.\tbuiltin\nblock_write /h/p/.git/hooks\t.git/hooks\tbuiltin\n\
exec_block curl --data\tcurl --data\tbuiltin\nwithhold *_TOKEN\n",
        )
        .unwrap()
    }

    #[test]
    fn paths() {
        let s = snap();
        assert!(s.path(Access::Read, b"/h/.ssh/id_rsa").is_err());
        assert!(s.path(Access::Read, b"/h/.ssh").is_err());
        assert!(s.path(Access::Read, b"/h/.sshx").is_ok());
        assert!(s.path(Access::Write, b"/h/p/x").is_ok());
        assert!(s.path(Access::Write, b"/h/q").is_err());
        assert!(s.path(Access::Write, b"/h/p/.git/hooks/pre-commit").is_err());
        let r = s.path(Access::Read, b"/h/.ssh/k").unwrap_err();
        assert_eq!(
            r.to_string(),
            "files.block_read \"~/.ssh\" in /h/.sandpit/config.toml:3"
        );
    }

    #[test]
    fn exec_and_env() {
        let s = snap();
        assert!(s.exec(&[b"/usr/bin/CURL", b"--data", b"x"]).is_err());
        assert!(s.exec(&[b"curl", b"-d"]).is_ok());
        assert!(s.exec(&[b"curl"]).is_ok());
        assert!(s.withhold(b"GH_TOKEN"));
        assert!(!s.withhold(b"TOKEN_GH"));
        assert!(glob(b"AWS_*", b"AWS_SECRET"));
        assert!(glob(b"*", b""));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse(b"garbage").is_err());
        assert!(parse(b"sandpit-snapshot v1\nhome /h\n").is_err());
        assert!(parse(b"sandpit-snapshot v1\nhome /h\nstate_dir /s\nnet x\n").is_err());
    }
}
