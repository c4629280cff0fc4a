//! Exec patterns and environment-variable globs.
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// An `exec.block` entry: a case-insensitive substring of the whole command line, or a
/// regex with the `re:` prefix (compiled once, on first use after load validation).
#[derive(Debug, Serialize, Deserialize)]
pub struct ExecPattern {
    /// The entry as written (including any `re:` prefix).
    pub source: String,
    #[serde(skip)]
    compiled: OnceLock<Option<regex_lite::Regex>>,
}

impl Clone for ExecPattern {
    fn clone(&self) -> Self {
        ExecPattern {
            source: self.source.clone(),
            compiled: OnceLock::new(),
        }
    }
}

impl PartialEq for ExecPattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}
impl Eq for ExecPattern {}

impl ExecPattern {
    /// Validate an entry; a regex that does not compile is an error with the
    /// compiler's message.
    pub fn parse(source: &str) -> Result<ExecPattern, String> {
        if source.trim().is_empty() {
            return Err("an empty pattern would match every command".into());
        }
        if source.contains('\0') {
            return Err("pattern contains NUL".into());
        }
        let p = ExecPattern {
            source: source.to_string(),
            compiled: OnceLock::new(),
        };
        if let Some(re) = source.strip_prefix("re:") {
            let compiled = build_regex(re)?;
            let _ = p.compiled.set(Some(compiled));
        }
        Ok(p)
    }

    pub fn is_regex(&self) -> bool {
        self.source.starts_with("re:")
    }

    /// Match against a command line already joined with single spaces and lowercased
    /// (see [`command_line`]).
    pub fn matches(&self, lowered_command: &str) -> bool {
        match self.source.strip_prefix("re:") {
            Some(re) => self
                .compiled
                .get_or_init(|| build_regex(re).ok())
                .as_ref()
                // A regex that no longer compiles matches everything: fail closed.
                .is_none_or(|r| r.is_match(lowered_command)),
            None => lowered_command.contains(&self.source.to_lowercase()),
        }
    }

    /// The first word of a substring pattern (the command it names), if any.
    pub fn command_word(&self) -> Option<&str> {
        if self.is_regex() {
            return None;
        }
        self.source.split_whitespace().next()
    }
}

/// regex-lite, not regex: every process the interposer loads into relocates its
/// engine's tables (the regex crate's made the library twice the size and cost
/// ~130 µs per exec). Its classes (`\s`, `\w`, `\d`, `\b`) are ASCII and it folds
/// ASCII case only, so a pattern naming non-ASCII text (a character, or an escape
/// above `\x7f`) could silently stop matching what the regex crate matched: such a
/// pattern is refused at load, and a substring entry covers that text.
fn build_regex(re: &str) -> Result<regex_lite::Regex, String> {
    if let Some(what) = non_ascii(re) {
        return Err(format!(
            "{what}: `re:` patterns are ASCII (their classes and case folding are); \
             use a plain substring entry for non-ASCII text"
        ));
    }
    regex_lite::RegexBuilder::new(re)
        .case_insensitive(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("invalid regex: {e}"))
}

/// The first non-ASCII character of a pattern, or escape (`\xHH`, `\x{…}`, `\uHHHH`,
/// `\u{…}`, `\UHHHHHHHH`, `\U{…}`) of a code point above 0x7f, described.
fn non_ascii(re: &str) -> Option<String> {
    if let Some(c) = re.chars().find(|c| !c.is_ascii()) {
        return Some(format!("non-ASCII character {c:?}"));
    }
    let b = re.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let digits = match b.get(i + 1) {
            Some(b'x') => 2,
            Some(b'u') => 4,
            Some(b'U') => 8,
            // `\\` and every other escape: skip the escaped character.
            _ => {
                i += 2;
                continue;
            }
        };
        let rest = &re[i + 2..];
        let hex = match rest.strip_prefix('{') {
            Some(r) => r.split('}').next().unwrap_or(r),
            None => rest.get(..digits.min(rest.len())).unwrap_or(rest),
        };
        if u32::from_str_radix(hex.trim(), 16).is_ok_and(|v| v > 0x7f) {
            return Some(format!("escape \\{}{hex}", b[i + 1] as char));
        }
        i += 2;
    }
    None
}

/// The form exec patterns are matched against: argv joined with single spaces,
/// lowercased.
pub fn command_line(argv: &[String]) -> String {
    argv.join(" ").to_lowercase()
}

/// Match an environment-variable name against a glob with `*` and `?`.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    glob_match_bytes(pattern.as_bytes(), name.as_bytes())
}

/// [`glob_match`] on bytes (`?` is one byte; `*` also crosses `/`).
pub fn glob_match_bytes(p: &[u8], n: &[u8]) -> bool {
    let (mut pi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            pi += 1;
            mark = ni;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// A glob compiled for matching many names (the interposer checks every variable
/// of every environment it passes on): the usual shapes — `NAME`, `PRE*`, `*SUF`,
/// `*MID*`, `PRE*SUF` — are one or two comparisons; any other (`?`, more stars)
/// runs [`glob_match`]. Means exactly what [`glob_match`] does.
#[derive(Debug, Clone)]
pub enum Glob {
    Exact(Box<[u8]>),
    Prefix(Box<[u8]>),
    Suffix(Box<[u8]>),
    Infix(Box<[u8]>),
    Ends(Box<[u8]>, Box<[u8]>),
    Other(Box<[u8]>),
}

impl Glob {
    pub fn new(pattern: &str) -> Glob {
        let p = pattern.as_bytes();
        let boxed = |b: &[u8]| b.to_vec().into_boxed_slice();
        if p.contains(&b'?') {
            return Glob::Other(boxed(p));
        }
        let stars: Vec<usize> = (0..p.len()).filter(|&i| p[i] == b'*').collect();
        match stars[..] {
            [] => Glob::Exact(boxed(p)),
            [0] => Glob::Suffix(boxed(&p[1..])),
            [i] if i == p.len() - 1 => Glob::Prefix(boxed(&p[..i])),
            [i] => Glob::Ends(boxed(&p[..i]), boxed(&p[i + 1..])),
            [0, j] if j == p.len() - 1 => Glob::Infix(boxed(&p[1..j])),
            _ => Glob::Other(boxed(p)),
        }
    }

    pub fn matches(&self, name: &[u8]) -> bool {
        match self {
            Glob::Exact(x) => name == &x[..],
            Glob::Prefix(x) => name.starts_with(x),
            Glob::Suffix(x) => name.ends_with(x),
            Glob::Infix(x) => x.is_empty() || name.windows(x.len()).any(|w| w == &x[..]),
            Glob::Ends(a, b) => {
                name.len() >= a.len() + b.len() && name.starts_with(a) && name.ends_with(b)
            }
            Glob::Other(p) => glob_match_bytes(p, name),
        }
    }
}

/// Validate an `env.withhold` glob.
pub fn validate_env_glob(g: &str) -> Result<(), String> {
    if g.is_empty() {
        return Err("empty pattern".into());
    }
    if let Some(c) = g
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '*' | '?')))
    {
        return Err(format!(
            "{c:?} cannot appear in an environment variable name"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_substring_is_case_insensitive() {
        let p = ExecPattern::parse("curl --data").unwrap();
        assert!(p.matches(&command_line(&[
            "/usr/bin/CURL".into(),
            "--DATA".into(),
            "x".into()
        ])));
        assert!(!p.matches(&command_line(&["curl".into(), "-d".into()])));
        assert_eq!(p.command_word(), Some("curl"));
    }

    #[test]
    fn exec_regex() {
        let p = ExecPattern::parse(r"re:nc\s+-e").unwrap();
        assert!(p.matches("nc -e /bin/sh"));
        assert!(p.matches(&command_line(&["NC".into(), "-E".into()])));
        // Non-ASCII text in a pattern is refused (regex-lite's classes and case
        // folding are ASCII): as a character or as an escape above 0x7f.
        for bad in [
            "re:ÄRGER",
            "re:οδοσ",
            r"re:\x{C4}rger",
            r"re:\xC4rger",
            r"re:\u00c4",
            r"re:\U000000C4",
            r"re:[\x{C0}-\x{DE}]",
            r"re:\p{L}",
        ] {
            let e = ExecPattern::parse(bad).unwrap_err();
            assert!(
                e.contains("ASCII") || e.contains("invalid regex"),
                "{bad}: {e}"
            );
        }
        assert!(
            ExecPattern::parse("ärger").is_ok(),
            "a substring entry takes it"
        );
        // ASCII escapes, an escaped backslash before `x`, and case-sensitive
        // classes keep their meaning.
        let p = ExecPattern::parse(r"re:^\S+ -\D \x41\\xc4$").unwrap();
        assert!(p.matches(&command_line(&["nc".into(), "-E".into(), r"A\XC4".into()])));
        assert!(!p.matches(&command_line(&["nc".into(), "-1".into(), r"a\xc4".into()])));
        assert!(ExecPattern::parse("re:(").is_err());
        assert!(ExecPattern::parse("  ").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob_match("*_TOKEN", "GITHUB_TOKEN"));
        assert!(!glob_match("*_TOKEN", "GITHUB_TOKENS"));
        assert!(glob_match("AWS_*", "AWS_SECRET_ACCESS_KEY"));
        assert!(glob_match("A?C", "ABC"));
        assert!(glob_match("*", "X"));
        assert!(validate_env_glob("A-B").is_err());
    }

    /// The compiled glob against [`glob_match`]: every pattern of up to four
    /// characters from `A`, `B`, `*`, `?` against every name of up to five from `A`,
    /// `B` (and the shapes it compiles, each seen at least once).
    #[test]
    fn compiled_globs_mean_what_glob_match_does() {
        fn all(alphabet: &[char], max: usize) -> Vec<String> {
            let mut out = vec![String::new()];
            let mut layer = vec![String::new()];
            for _ in 0..max {
                layer = layer
                    .iter()
                    .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                    .collect();
                out.extend(layer.iter().cloned());
            }
            out
        }
        let names = all(&['A', 'B'], 5);
        let mut shapes = std::collections::BTreeSet::new();
        for p in all(&['A', 'B', '*', '?'], 4) {
            let g = Glob::new(&p);
            shapes.insert(format!("{g:?}").split('(').next().unwrap().to_string());
            for n in &names {
                assert_eq!(g.matches(n.as_bytes()), glob_match(&p, n), "{p:?} {n:?}");
            }
        }
        assert_eq!(shapes.len(), 6, "{shapes:?}");
    }
}
