//! `.env` files with every secret-looking value replaced (pure; docs/run.md
//! "`.env` files"). The format is dotenv's: `[export ] NAME=value` lines, values
//! bare (to the end of the line or a ` #` comment), single-, double- or
//! back-quoted (the quotes may span lines: a PEM key). A value is secret by its
//! variable's name or by its shape ([`secret_value`]); a URL's password alone is
//! replaced, so a `DATABASE_URL` still names its host. Everything else is left
//! byte for byte.

/// What the caller decides for a variable: `Some(sentinel)` replaces its value
/// whatever it looks like, `None` lets the value's shape decide.
pub type ByName<'a> = &'a dyn Fn(&str) -> Option<String>;

/// `text` with the secrets replaced: `by_name` first, then the value's shape,
/// which gets `sentinel`. The second item: whether anything was replaced.
pub fn scrub(text: &str, by_name: ByName, sentinel: &str) -> (String, bool) {
    let b = text.as_bytes();
    let n = b.len();
    let mut out = String::with_capacity(n);
    let mut last = 0;
    let mut changed = false;
    let mut i = 0;
    while i < n {
        let line_end = b[i..].iter().position(|&c| c == b'\n').map_or(n, |p| i + p);
        let Some((name, vstart)) = head(text, i, line_end) else {
            i = line_end + 1;
            continue;
        };
        // The value: quoted (maybe over lines) or bare.
        let (vs, ve, stmt_end) = match b.get(vstart) {
            Some(&q @ (b'"' | b'\'' | b'`')) => {
                let mut j = vstart + 1;
                while j < n && b[j] != q {
                    j += if b[j] == b'\\' && q == b'"' { 2 } else { 1 };
                }
                let close = j.min(n);
                let after = (close + 1).min(n);
                let le = b[after..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(n, |p| after + p);
                (vstart, after, le)
            }
            _ => {
                let mut e = line_end;
                // ` #comment` ends a bare value.
                if let Some(p) = text[vstart..line_end].find(" #") {
                    e = vstart + p;
                }
                let v = text[vstart..e].trim_end();
                (vstart, vstart + v.len(), line_end)
            }
        };
        let raw = &text[vs..ve];
        let value = unquote(raw);
        let replacement = match by_name(name) {
            Some(s) if !value.is_empty() => Some(s),
            Some(_) => None,
            None if secret_name(name) && !value.is_empty() && !is_flag(value) => {
                Some(sentinel.to_string())
            }
            None => match url_password(value) {
                Some((ps, pe)) => {
                    // The password alone, the rest of the URL as it was.
                    let off = raw.find(value).unwrap_or(0);
                    let mut v = String::new();
                    v.push_str(&raw[..off + ps]);
                    v.push_str(sentinel);
                    v.push_str(&raw[off + pe..]);
                    Some(v)
                }
                None => secret_value(value).then(|| sentinel.to_string()),
            },
        };
        if let Some(r) = replacement {
            out.push_str(&text[last..vs]);
            out.push_str(&r);
            last = ve;
            changed = true;
        }
        i = stmt_end + 1;
    }
    out.push_str(&text[last..]);
    (out, changed)
}

/// `NAME` and where its value starts, for an assignment line at `i..end`.
fn head(text: &str, i: usize, end: usize) -> Option<(&str, usize)> {
    let line = &text[i..end];
    let t = line.trim_start();
    let mut off = i + (line.len() - t.len());
    let t2 = t.strip_prefix("export ").map(str::trim_start);
    if let Some(t2) = t2 {
        off += t.len() - t2.len();
    }
    let t = t2.unwrap_or(t);
    let eq = t.find('=')?;
    let name = t[..eq].trim_end();
    let ok = name
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
    if !ok {
        return None;
    }
    let after = &t[eq + 1..];
    let v = after.trim_start_matches([' ', '\t']);
    Some((name, off + eq + 1 + (after.len() - v.len())))
}

fn unquote(raw: &str) -> &str {
    for q in ['"', '\'', '`'] {
        if let Some(r) = raw.strip_prefix(q) {
            return r.strip_suffix(q).unwrap_or(r);
        }
    }
    raw
}

/// Values that are settings, never secrets, whatever the name says.
fn is_flag(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "0" | "1" | "none" | "null"
    )
}

/// A name that says it holds a secret.
pub fn secret_name(name: &str) -> bool {
    let u = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "PRIVATE",
        "DSN",
        "SALT",
    ]
    .iter()
    .any(|w| u.contains(w))
        || u.ends_with("_PASS")
        || u.ends_with("_PAT")
        || u.ends_with("_AUTH")
}

/// Prefixes of well-known keys and tokens.
const KEY_PREFIXES: &[&str] = &[
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "ya29.",
    "hf_",
    "npm_",
    "pypi-",
    "SG.",
    "shpat_",
    "dop_v1_",
    "-----BEGIN",
    "eyJ",
];

/// A value shaped like a secret: a known key's prefix, or a long run of
/// high-entropy characters with letters and digits (not a path or a URL).
pub fn secret_value(v: &str) -> bool {
    if v.len() >= 8 && KEY_PREFIXES.iter().any(|p| v.starts_with(p)) {
        return true;
    }
    if v.len() < 20
        || v.contains(char::is_whitespace)
        || v.contains("://")
        || v.starts_with(['/', '.', '~'])
    {
        return false;
    }
    let letters = v.bytes().any(|c| c.is_ascii_alphabetic());
    let digits = v.bytes().any(|c| c.is_ascii_digit());
    letters && digits && entropy(v) >= 3.5
}

/// Shannon entropy in bits per character.
fn entropy(v: &str) -> f64 {
    let mut counts = [0u32; 256];
    for c in v.bytes() {
        counts[usize::from(c)] += 1;
    }
    let n = v.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// Where the secret of a URL with userinfo lies in `v`: the password of
/// `scheme://user:password@host`, or the user of `scheme://token@host`.
fn url_password(v: &str) -> Option<(usize, usize)> {
    let s = v.find("://")? + 3;
    let rest = &v[s..];
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..auth_end].rfind('@')?;
    let info = &rest[..at];
    if info.is_empty() {
        return None;
    }
    Some(match info.find(':') {
        Some(c) if c + 1 < info.len() => (s + c + 1, s + at),
        Some(_) => return None,
        None => (s, s + at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "sandpit-dotenv-xx";

    fn by_name(name: &str) -> Option<String> {
        (name == "OPENAI_API_KEY").then(|| "sandpit-sentinel-openai-aa".into())
    }

    fn run(t: &str) -> String {
        scrub(t, &by_name, S).0
    }

    #[test]
    fn secrets_are_replaced_and_the_rest_kept() {
        let t = "# comment\nPORT=8080\nDEBUG=true\nHOST=localhost\nAPI_KEY=abc123\nexport DB_PASSWORD='hunter2' # old\nSTRIPE=sk_live_abcdefgh\nRANDOM_ID=Zx9Kq2LmW8pT4vR7nY3bHs\nOPENAI_API_KEY=sk-real\nDATABASE_URL=postgres://app:p4ss@db.example:5432/app\nREPO=https://ghp_abcdefgh@github.com/o/r\nNEXT_PUBLIC_URL=https://example.com/a/b/c/d/e/f\nFEATURE_KEY_ENABLED=false\nEMPTY_TOKEN=\n";
        let want = "# comment\nPORT=8080\nDEBUG=true\nHOST=localhost\nAPI_KEY=sandpit-dotenv-xx\nexport DB_PASSWORD=sandpit-dotenv-xx # old\nSTRIPE=sandpit-dotenv-xx\nRANDOM_ID=sandpit-dotenv-xx\nOPENAI_API_KEY=sandpit-sentinel-openai-aa\nDATABASE_URL=postgres://app:sandpit-dotenv-xx@db.example:5432/app\nREPO=https://sandpit-dotenv-xx@github.com/o/r\nNEXT_PUBLIC_URL=https://example.com/a/b/c/d/e/f\nFEATURE_KEY_ENABLED=false\nEMPTY_TOKEN=\n";
        assert_eq!(run(t), want);
    }

    #[test]
    fn a_quoted_value_over_lines_goes_whole() {
        let t = "PRIVATE_KEY=\"-----BEGIN KEY-----\nabc\n-----END KEY-----\"\nPORT=1\n";
        assert_eq!(run(t), "PRIVATE_KEY=sandpit-dotenv-xx\nPORT=1\n");
    }

    #[test]
    fn nothing_to_replace_is_unchanged() {
        let t = "PORT=8080\nNODE_ENV=production\n\nnot an assignment\n=x\n";
        assert_eq!(scrub(t, &by_name, S), (t.to_string(), false));
    }
}
