//! Destination syntax shared by the tool parsers: URLs of any scheme, `host:port`
//! with bracketed IPv6, scp-like `user@host:path`, ports and service names.
//!
//! These parsers err towards refusing: a spelling that two programs could read as
//! different hosts (several `@`, backslashes, control characters, percent-encoded
//! hosts that decode to something odd) is refused rather than guessed.

/// A host (and port, when the arguments fix one) that a command will connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dest {
    /// The host as written (lowercased, brackets removed from IPv6 literals). The
    /// policy canonicalizes it further (IDN, inet_aton spellings, trailing dot).
    pub host: String,
    /// `None` when the command leaves the port open (a scan, an unknown scheme).
    pub port: Option<u16>,
    /// The argument that named it, for the error message.
    pub arg: String,
}

/// Something the command line asks for that the shim cannot judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub arg: String,
    pub reason: String,
}

impl Refusal {
    pub fn new(arg: &str, reason: impl Into<String>) -> Refusal {
        Refusal {
            arg: arg.to_string(),
            reason: reason.into(),
        }
    }
}

pub type Res<T> = std::result::Result<T, Refusal>;

/// The well-known port of a URL scheme, `None` when the scheme is not network-bound
/// or unknown.
pub fn scheme_port(scheme: &str) -> Option<u16> {
    Some(match scheme {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        "ftp" => 21,
        "ftps" => 990,
        "ssh" | "sftp" | "scp" | "git+ssh" | "ssh+git" => 22,
        "git" => 9418,
        "rsync" => 873,
        "telnet" => 23,
        "ldap" => 389,
        "ldaps" => 636,
        "smtp" => 25,
        "smtps" => 465,
        "imap" => 143,
        "imaps" => 993,
        "pop3" => 110,
        "pop3s" => 995,
        "dict" => 2628,
        "gopher" | "gophers" => 70,
        "mqtt" => 1883,
        "rtsp" => 554,
        "rtmp" | "rtmpe" | "rtmps" | "rtmpt" | "rtmpte" | "rtmpts" => 1935,
        "smb" | "smbs" => 445,
        "tftp" => 69,
        "socks" | "socks4" | "socks4a" | "socks5" | "socks5h" => 1080,
        "dns" => 53,
        _ => return None,
    })
}

/// Schemes that never leave the machine through the network.
fn is_local_scheme(scheme: &str) -> bool {
    matches!(scheme, "file" | "data" | "about" | "unix")
}

fn valid_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Split `scheme:` off a URL-looking word. Accepts any run of `/` and `\` after the
/// colon (browsers and some libraries do), so `http:\\evil` is judged, not skipped.
/// Returns `(scheme, rest-after-slashes, had_slashes)`.
pub fn split_scheme(s: &str) -> Option<(String, &str)> {
    let (scheme, rest) = s.split_once(':')?;
    if !valid_scheme(scheme) {
        return None;
    }
    let trimmed = rest.trim_start_matches(['/', '\\']);
    if trimmed.len() == rest.len() {
        return None;
    }
    Some((scheme.to_ascii_lowercase(), trimmed))
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Check and normalise a host name or address as written in an argument.
pub fn clean_host(host: &str, arg: &str) -> Res<String> {
    if host.is_empty() {
        return Err(Refusal::new(arg, "empty host name"));
    }
    let decoded = percent_decode(host)
        .ok_or_else(|| Refusal::new(arg, "malformed percent-encoding in host"))?;
    let h = decoded
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(&decoded);
    // An IPv6 zone (`fe80::1%eth0`) does not change the address family's rules.
    let h = match h.split_once('%') {
        Some((addr, _zone)) if addr.contains(':') => addr,
        _ => h,
    };
    if h.is_empty() {
        return Err(Refusal::new(arg, "empty host name"));
    }
    if h.chars().any(|c| {
        c.is_control()
            || c.is_whitespace()
            || matches!(
                c,
                '/' | '\\' | '@' | '?' | '#' | '{' | '}' | '"' | '\'' | '`' | '$'
            )
    }) {
        return Err(Refusal::new(
            arg,
            "host name contains characters sandpit cannot judge",
        ));
    }
    Ok(h.to_ascii_lowercase())
}

/// Parse a decimal port. `0` and out-of-range numbers are refused.
pub fn parse_port(p: &str, arg: &str) -> Res<u16> {
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(Refusal::new(arg, format!("cannot judge port `{p}`"))),
        Ok(n) if p.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        Ok(_) => Err(Refusal::new(arg, format!("cannot judge port `{p}`"))),
    }
}

/// A port given as a number or a service name (`http`, `ssh`…).
pub fn parse_service(p: &str, arg: &str) -> Res<u16> {
    if p.bytes().all(|b| b.is_ascii_digit()) {
        return parse_port(p, arg);
    }
    let lower = p.to_ascii_lowercase();
    match lower.as_str() {
        "domain" => Ok(53),
        "http-alt" => Ok(8080),
        "www" => Ok(80),
        other => {
            scheme_port(other).ok_or_else(|| Refusal::new(arg, format!("unknown service `{p}`")))
        }
    }
}

/// Split `host[:port]`, `[v6][:port]`. A bare IPv6 literal without brackets (more
/// than one colon) is taken as a host without port.
pub fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let host = &s[..end + 2];
            let after = &rest[end + 1..];
            return (host, after.strip_prefix(':'));
        }
        return (s, None);
    }
    match s.matches(':').count() {
        0 => (s, None),
        1 => match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        },
        _ => (s, None),
    }
}

/// Parse `host[:port]` with a default port.
pub fn host_port(s: &str, default_port: Option<u16>, arg: &str) -> Res<Dest> {
    let (h, p) = split_host_port(s);
    let port = match p {
        Some("") | None => default_port,
        Some(p) => Some(parse_port(p, arg)?),
    };
    Ok(Dest {
        host: clean_host(h, arg)?,
        port,
        arg: arg.to_string(),
    })
}

/// How to read a URL-ish word without a scheme.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NoScheme<'a> {
    /// Guess like curl: `host[:port][/path]` with this scheme's port.
    Assume(&'a str),
    /// Not a URL at all.
    NotUrl,
}

/// Parse a URL and return the destination it names. `Ok(None)` for local schemes
/// (`file:`) and for words that are not URLs under `no_scheme = NotUrl`.
pub fn parse_url(s: &str, no_scheme: NoScheme, globbing: bool) -> Res<Option<Dest>> {
    let (scheme, rest) = match split_scheme(s) {
        Some((scheme, rest)) => (scheme, rest),
        None => match no_scheme {
            NoScheme::NotUrl => return Ok(None),
            NoScheme::Assume(scheme) => {
                let rest = s.trim_start();
                let lower = rest.to_ascii_lowercase();
                // curl guesses the protocol from the host name's first label.
                let guessed = ["ftp", "dict", "ldap", "imap", "smtp", "pop3"]
                    .into_iter()
                    .find(|p| lower.starts_with(&format!("{p}.")))
                    .unwrap_or(scheme);
                (guessed.to_string(), rest)
            }
        },
    };
    if is_local_scheme(&scheme) {
        if scheme == "file" {
            // file://host/path with a remote host is a network share on some
            // platforms; only the local spellings are let through.
            let authority = rest.split(['/', '\\']).next().unwrap_or("");
            if !(authority.is_empty() || authority.eq_ignore_ascii_case("localhost"))
                && s.contains("://")
                && !s.contains(":///")
            {
                return Err(Refusal::new(s, "file: URL with a remote host"));
            }
        }
        return Ok(None);
    }
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if globbing && authority.contains(['{', '}', '[']) && !authority.starts_with('[') {
        return Err(Refusal::new(
            s,
            "URL globbing in the host part cannot be judged (pass -g/--globoff or spell each host)",
        ));
    }
    let hostport = match authority.matches('@').count() {
        0 => authority,
        1 => authority.rsplit_once('@').map(|x| x.1).unwrap_or(authority),
        _ => {
            return Err(Refusal::new(
                s,
                "several `@` in the authority: programs disagree on which is the host",
            ))
        }
    };
    let default_port = scheme_port(&scheme);
    host_port(hostport, default_port, s).map(Some)
}

/// `[user@]host:path` as scp, rsync and git read it: a colon (outside `[…]`) before
/// any slash; `/abs`, `./a:b` and `../a:b` are local. Returns the `[user@]host` part.
pub fn scp_like_host(s: &str) -> Option<&str> {
    if s.starts_with('/') || s.starts_with("./") || s.starts_with("../") {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '/' if depth == 0 => return None,
            ':' if depth == 0 => {
                return if i == 0 { None } else { Some(&s[..i]) };
            }
            _ => {}
        }
    }
    None
}

/// Split `user@host` into host, refusing several `@`.
pub fn strip_user<'a>(s: &'a str, arg: &str) -> Res<&'a str> {
    match s.matches('@').count() {
        0 => Ok(s),
        1 => Ok(s.rsplit_once('@').map(|x| x.1).unwrap_or(s)),
        _ => Err(Refusal::new(arg, "several `@` in the destination")),
    }
}

/// Expand a port list like `22,80,8000-8010` (nmap `-p`, nc ranges). Refuses more
/// than `limit` ports.
pub fn port_list(s: &str, limit: usize, arg: &str) -> Res<Vec<u16>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        // nmap allows protocol prefixes: T:80, U:53, S:…
        let part = part
            .split_once(':')
            .map(|(pfx, p)| if pfx.len() == 1 { p } else { part })
            .unwrap_or(part);
        if let Some((a, b)) = part.split_once('-') {
            let a = if a.is_empty() {
                1
            } else {
                parse_service(a, arg)?
            };
            let b = if b.is_empty() {
                65535
            } else {
                parse_service(b, arg)?
            };
            if b < a || usize::from(b - a) >= limit.saturating_sub(out.len()) {
                return Err(Refusal::new(arg, "port range too wide to judge"));
            }
            out.extend(a..=b);
        } else {
            out.push(parse_service(part, arg)?);
        }
        if out.len() > limit {
            return Err(Refusal::new(arg, "too many ports to judge"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Res<Option<Dest>> {
        parse_url(s, NoScheme::Assume("http"), true)
    }
    fn hp(s: &str) -> (String, Option<u16>) {
        let d = url(s).unwrap().unwrap();
        (d.host, d.port)
    }

    #[test]
    fn urls_of_any_scheme() {
        assert_eq!(
            hp("https://Example.COM/x"),
            ("example.com".into(), Some(443))
        );
        assert_eq!(hp("http://u:p@h.test:8080/"), ("h.test".into(), Some(8080)));
        assert_eq!(hp("ftp.h.test/a"), ("ftp.h.test".into(), Some(21)));
        assert_eq!(hp("h.test"), ("h.test".into(), Some(80)));
        assert_eq!(hp("gopher://h.test"), ("h.test".into(), Some(70)));
        assert_eq!(hp("weird+s://h.test"), ("h.test".into(), None));
        assert_eq!(hp("http://[::1]:81/"), ("::1".into(), Some(81)));
        assert_eq!(hp("http:\\\\evil.test\\x"), ("evil.test".into(), Some(80)));
        assert_eq!(hp("http://%65vil.test/"), ("evil.test".into(), Some(80)));
        assert_eq!(hp("h.test?x=http://y"), ("h.test".into(), Some(80)));
        assert_eq!(url("file:///etc/passwd").unwrap(), None);
        assert!(url("file://evil.test/share").is_err());
    }

    #[test]
    fn ambiguous_urls_are_refused() {
        assert!(url("http://a@b@c.test/").is_err());
        assert!(url("http://{a,b}.test/").is_err());
        assert!(url("http://h[1-3].test/").is_err());
        assert!(parse_url("http://{a,b}.test/", NoScheme::Assume("http"), false).is_err());
        assert!(url("http://h.test:99999/").is_err());
        assert!(url("http://h.test:0/").is_err());
        assert!(url("http://%zz/").is_err());
    }

    #[test]
    fn scp_like() {
        assert_eq!(scp_like_host("u@h:p"), Some("u@h"));
        assert_eq!(scp_like_host("h:"), Some("h"));
        assert_eq!(scp_like_host("./a:b"), None);
        assert_eq!(scp_like_host("dir/a:b"), None);
        assert_eq!(scp_like_host("[::1]:x"), Some("[::1]"));
        assert_eq!(scp_like_host("plain"), None);
        assert_eq!(scp_like_host("u@[::1]:x"), Some("u@[::1]"));
        assert_eq!(scp_like_host(":x"), None);
    }

    #[test]
    fn ports() {
        assert_eq!(
            port_list("22,80-82", 100, "x").unwrap(),
            vec![22, 80, 81, 82]
        );
        assert!(port_list("1-65535", 100, "x").is_err());
        assert!(port_list("-", 100, "x").is_err());
        assert_eq!(parse_service("https", "x").unwrap(), 443);
        assert!(parse_service("nosuch", "x").is_err());
    }
}
