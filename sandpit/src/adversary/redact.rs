//! Redaction: nothing secret leaves in a review request.
//!
//! Three sources, all replaced by [`MASK`] before a request is built:
//! - **the run's environment**: the launcher's variables that `env.withhold` names,
//!   that look secret by name (`*TOKEN*`, `*SECRET*`, `*KEY*`, …) and every other
//!   value of 8 bytes or more, except a short list of harmless variables (`PATH`,
//!   `HOME`, `LANG`, …) and values that are existing absolute paths;
//! - **withheld files**: every `files.block_read` path (directories walked, bounded):
//!   each text file's whole contents, each of its lines of 8 bytes or more, and each
//!   token of 8 bytes or more that has a digit or punctuation or is 16 bytes long;
//! - **token shapes**: `sk-…`, `ghp_…`/`github_pat_…`, `AKIA…`, Slack, GitLab, Google
//!   API keys, JWTs, PEM private keys, passwords in URLs, and long hex (32+) or
//!   mixed-case base64 (40+) runs — so a git object id of 40 hex digits is masked too.
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::{Captures, Regex};
use sandpit_policy::Policy;
use std::path::Path;

/// What a secret is replaced with.
pub const MASK: &str = "[REDACTED]";

/// Shortest environment value masked wherever it appears (withheld or secret-looking
/// names: [`MIN_NAMED`]).
const MIN_ENV: usize = 8;
const MIN_NAMED: usize = 4;
/// Shortest line or token of a withheld file that is masked.
const MIN_FILE: usize = 8;

/// Bounds on reading withheld files at start-up.
const MAX_FILES: usize = 2000;
const MAX_FILE_BYTES: u64 = 1 << 20;
const MAX_TOTAL_BYTES: u64 = 32 << 20;
const MAX_DEPTH: usize = 8;

/// Variables whose values are not secret (and would only mask paths and words).
const HARMLESS: &[&str] = &[
    "PATH",
    "HOME",
    "PWD",
    "OLDPWD",
    "SHELL",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "TMPDIR",
    "TMP",
    "TEMP",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "DISPLAY",
    "SHLVL",
    "HOSTNAME",
    "MAIL",
    "TZ",
    "_",
    "MANPATH",
    "INFOPATH",
];
const HARMLESS_PREFIX: &[&str] = &["LC_", "XDG_", "TERM_", "SANDPIT_"];
/// Name fragments that mark a variable as secret whatever its value looks like.
const SECRET_NAME: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "PRIVATE",
    "SESSION",
    "COOKIE",
    "PASS",
];

fn harmless(name: &str) -> bool {
    HARMLESS.contains(&name) || HARMLESS_PREFIX.iter().any(|p| name.starts_with(p))
}

fn secret_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    SECRET_NAME.iter().any(|f| up.contains(f))
}

/// The set of secrets for one run.
pub struct Redactor {
    literals: Vec<String>,
    matcher: Option<AhoCorasick>,
    /// Pattern and replacement (`$pre` keeps a URL's scheme).
    shapes: Vec<(Regex, &'static str)>,
    mixed_b64: Option<Regex>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secrets themselves.
        write!(f, "Redactor({} literals)", self.literals.len())
    }
}

fn shape_patterns() -> Vec<(Regex, &'static str)> {
    let mut v: Vec<(Regex, &'static str)> = [
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        r"sk-[A-Za-z0-9_\-]{16,}",
        r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}",
        r"github_pat_[A-Za-z0-9_]{20,}",
        r"(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}",
        r"xox[abprs]-[A-Za-z0-9\-]{10,}",
        r"glpat-[A-Za-z0-9_\-]{20,}",
        r"AIza[0-9A-Za-z_\-]{35}",
        r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
        r"\b[0-9a-fA-F]{32,}\b",
    ]
    .iter()
    .filter_map(|p| Regex::new(p).ok().map(|r| (r, MASK)))
    .collect();
    // user:password@ in a URL.
    if let Ok(r) = Regex::new(r"(?P<pre>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s:@]+:[^/\s@]+@") {
        v.push((r, "${pre}[REDACTED]@"));
    }
    v
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new(Vec::new())
    }
}

impl Redactor {
    /// A redactor for these literal secrets (plus the token shapes).
    pub fn new(mut literals: Vec<String>) -> Redactor {
        literals.retain(|s| !s.is_empty());
        literals.sort_unstable_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        literals.dedup();
        let matcher = if literals.is_empty() {
            None
        } else {
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&literals)
                .ok()
        };
        Redactor {
            literals,
            matcher,
            shapes: shape_patterns(),
            mixed_b64: Regex::new(r"[A-Za-z0-9+/_\-]{40,}={0,2}").ok(),
        }
    }

    /// The secrets of a run: the launcher's environment `env`, the `block_read` files
    /// of `policy`, and `extra` (the API key).
    pub fn for_run(policy: &Policy, env: &[(String, String)], extra: &[&str]) -> Redactor {
        let mut lits: Vec<String> = extra
            .iter()
            .filter(|s| s.len() >= MIN_NAMED)
            .map(|s| s.to_string())
            .collect();
        for (name, value) in env {
            let v = value.trim();
            let named = policy.env.is_withheld(name) || secret_name(name);
            let keep = if named {
                v.len() >= MIN_NAMED
            } else {
                !harmless(name)
                    && v.len() >= MIN_ENV
                    && !(v.starts_with('/') && Path::new(v).exists())
            };
            if keep {
                lits.push(v.to_string());
            }
        }
        let mut budget = Budget {
            files: MAX_FILES,
            bytes: MAX_TOTAL_BYTES,
        };
        for r in &policy.files.block_read {
            if sandpit_policy::glob::is_glob(r.value.as_os_str().as_encoded_bytes()) {
                // What the glob matches now, found within the same bounds.
                let found = sandpit_policy::glob::expand(&r.value, MAX_FILES).unwrap_or_default();
                for p in found {
                    walk(&p, 0, &mut budget, &mut lits);
                }
                continue;
            }
            walk(&r.value, 0, &mut budget, &mut lits);
        }
        Redactor::new(lits)
    }

    /// How many literal secrets are known.
    pub fn len(&self) -> usize {
        self.literals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.literals.is_empty()
    }

    /// `text` with every known secret and token shape masked.
    pub fn redact(&self, text: &str) -> String {
        let mut s = match &self.matcher {
            Some(m) => m.replace_all(text, &vec![MASK; self.literals.len()]),
            None => text.to_string(),
        };
        for (re, with) in &self.shapes {
            if re.is_match(&s) {
                s = re.replace_all(&s, *with).into_owned();
            }
        }
        let Some(b64) = &self.mixed_b64 else {
            return s;
        };
        let mixed = |m: &str| {
            m.bytes().any(|b| b.is_ascii_digit())
                && m.bytes().any(|b| b.is_ascii_uppercase())
                && m.bytes().any(|b| b.is_ascii_lowercase())
        };
        b64.replace_all(&s, |c: &Captures| {
            let m = &c[0];
            // A path whose components are short (`/tmp/tmp-Ab3xYz/extra/file`) is
            // not a token; base64 that happens to hold a `/` still has a long,
            // mixed-case run on one side of it.
            let token = if m.contains('/') {
                m.split('/').any(|seg| seg.len() >= 20 && mixed(seg))
            } else {
                mixed(m)
            };
            if token {
                MASK.to_string()
            } else {
                m.to_string()
            }
        })
        .into_owned()
    }

    /// Whether `text` still holds a known literal secret (the last check on a
    /// request body, after JSON encoding).
    pub fn leaks(&self, text: &str) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(text))
    }
}

struct Budget {
    files: usize,
    bytes: u64,
}

fn walk(path: &Path, depth: usize, budget: &mut Budget, out: &mut Vec<String>) {
    if budget.files == 0 || budget.bytes == 0 || depth > MAX_DEPTH {
        return;
    }
    // Not following symlinks out of a credential directory: a link to / would walk
    // the whole disk. A link given directly in the policy was resolved at load.
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        let Ok(rd) = std::fs::read_dir(path) else {
            return;
        };
        let mut entries: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        entries.sort();
        for e in entries {
            walk(&e, depth + 1, budget, out);
        }
    } else if meta.is_file() && meta.len() <= MAX_FILE_BYTES {
        budget.files -= 1;
        budget.bytes = budget.bytes.saturating_sub(meta.len());
        if let Ok(bytes) = std::fs::read(path) {
            add_file(&bytes, out);
        }
    }
}

/// The secrets of one withheld file's contents.
pub fn add_file(bytes: &[u8], out: &mut Vec<String>) {
    if bytes.contains(&0) {
        return; // binary: cannot be a command-line argument as it is
    }
    let text = String::from_utf8_lossy(bytes);
    let whole = text.trim();
    if whole.len() >= MIN_FILE {
        out.push(whole.to_string());
    }
    for line in text.lines() {
        let line = line.trim();
        if line.len() >= MIN_FILE {
            out.push(line.to_string());
        }
        for tok in line.split(|c: char| {
            c.is_whitespace() || matches!(c, '=' | ':' | '"' | '\'' | ',' | ';' | '@' | '/')
        }) {
            let t = tok.trim_matches(|c: char| matches!(c, '[' | ']' | '{' | '}' | '(' | ')'));
            let telling = t.bytes().any(|b| b.is_ascii_digit())
                || t.bytes()
                    .any(|b| !b.is_ascii_alphanumeric() && !matches!(b, b'.' | b'-' | b'_'))
                || t.len() >= 16;
            if t.len() >= MIN_FILE && telling {
                out.push(t.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_shapes_are_masked() {
        let r = Redactor::new(vec!["hunter2hunter2".into()]);
        let out = r.redact("echo hunter2hunter2 sk-ant-api03-abcdefghijklmnopqrst AKIAABCDEFGHIJKLMNOP ghp_abcdefghijklmnopqrstuvwxyz0123");
        assert_eq!(out, format!("echo {MASK} {MASK} {MASK} {MASK}"));
        assert!(r.leaks("x hunter2hunter2 y"));
        assert!(!r.leaks("x hunter2 y"));
    }

    #[test]
    fn long_hex_and_mixed_base64_but_not_paths() {
        let r = Redactor::default();
        assert_eq!(
            r.redact("git show 0123456789abcdef0123456789abcdef01234567"),
            format!("git show {MASK}")
        );
        assert_eq!(
            r.redact("echo QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xt"),
            format!("echo {MASK}")
        );
        let path = "ls /home/someone/projects/my-project/source/modules/thing";
        assert_eq!(r.redact(path), path);
        // A temporary directory's random, mixed-case name does not make a path a token.
        let path = "/tmp/sandpit-test-E4UbCl/home/extra/forbidden-target.txt";
        assert_eq!(r.redact(path), path);
        // Base64 with a `/` in it is still masked.
        assert_eq!(
            r.redact("echo QUJDREVGR0hJSktMTU5PUFFS/1RVVldYWVphYmNkZWZnaGlqa2xt"),
            format!("echo {MASK}")
        );
        assert_eq!(
            r.redact("curl https://me:s3cret-pw@example.com/x"),
            format!("curl https://{MASK}@example.com/x")
        );
    }

    #[test]
    fn private_keys_are_masked_whole() {
        let r = Redactor::default();
        let out = r.redact(
            "x -----BEGIN OPENSSH PRIVATE KEY-----\nabc\ndef\n-----END OPENSSH PRIVATE KEY----- y",
        );
        assert_eq!(out, format!("x {MASK} y"));
    }

    #[test]
    fn file_contents_give_lines_and_telling_tokens() {
        let mut v = vec![];
        add_file(b"[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG\nmachine github.com password hunter22\n", &mut v);
        assert!(
            v.contains(&"wJalrXUtnFEMI".to_string())
                || v.iter().any(|s| s.contains("wJalrXUtnFEMI"))
        );
        assert!(v.contains(&"hunter22".to_string()));
        assert!(!v.contains(&"github.com".to_string()));
        assert!(!v.contains(&"password".to_string()));
    }
}
