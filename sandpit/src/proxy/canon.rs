//! Host canonicalization for the proxy: every spelling of a host becomes one
//! [`Host`] before anything is matched or dialled. Pure code, no I/O.
//!
//! - names: IDN (UTS #46 mapping, punycode), lowercase, one trailing dot removed;
//! - IPv4 in every `inet_aton` spelling (`127.1`, `2130706433`, `0x7f000001`,
//!   `0177.0.0.1`), because that is what the C library accepts;
//! - IPv6 in brackets or bare; IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
//!   (`::a.b.c.d`) and NAT64 (`64:ff9b::a.b.c.d`) addresses become the IPv4 address
//!   they reach.
//!
//! Anything odd (userinfo, zone ids, NUL, spaces, `*`, a numeric last label that is not
//! a valid address) is an error, and an error is a denial.
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A canonical host: what policy matching and dialling use.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// Lowercase ASCII (punycode) name without trailing dot.
    Name(String),
    /// An address; IPv4-in-IPv6 spellings are already folded to IPv4.
    Ip(IpAddr),
}

impl Host {
    /// The name, if this is one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Host::Name(n) => Some(n),
            Host::Ip(_) => None,
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V4(a)) => write!(f, "{a}"),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
        }
    }
}

/// Why a host spelling was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("empty host")]
    Empty,
    #[error("host {0:?} contains a character that is never part of a host name")]
    BadChar(String),
    #[error("host {0:?} is not a valid IPv6 address")]
    BadIpv6(String),
    #[error("host {0:?} ends in a numeric label but is not a valid IPv4 address")]
    BadIpv4(String),
    #[error("host {0:?} is not a valid internationalized domain name")]
    Idna(String),
    #[error("host {0:?} is too long or has an empty or overlong label")]
    BadLength(String),
    #[error("authority {0:?} has no valid port")]
    BadPort(String),
}

/// Canonicalize one host spelling (no port, brackets allowed around IPv6).
pub fn canonical_host(raw: &str) -> Result<Host, HostError> {
    if raw.is_empty() {
        return Err(HostError::Empty);
    }
    if raw
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || "@/\\?#*%,;\"'<>`{}|^".contains(c))
    {
        return Err(HostError::BadChar(raw.to_string()));
    }
    let inner = match raw.strip_prefix('[') {
        Some(rest) => match rest.strip_suffix(']') {
            Some(v6) => return parse_v6(v6).map(Host::Ip),
            None => return Err(HostError::BadIpv6(raw.to_string())),
        },
        None => raw,
    };
    if inner.contains(':') {
        return parse_v6(inner).map(Host::Ip);
    }
    if inner.contains('[') || inner.contains(']') {
        return Err(HostError::BadChar(raw.to_string()));
    }
    let ascii = idna::domain_to_ascii(inner).map_err(|_| HostError::Idna(raw.to_string()))?;
    let name = ascii.strip_suffix('.').unwrap_or(&ascii);
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    let labels: Vec<&str> = name.split('.').collect();
    if let Some(last) = labels.last() {
        if is_numeric_label(last) {
            return parse_inet_aton(&labels)
                .map(|a| Host::Ip(IpAddr::V4(a)))
                .ok_or_else(|| HostError::BadIpv4(raw.to_string()));
        }
    }
    if name.len() > 253 || labels.iter().any(|l| l.is_empty() || l.len() > 63) {
        return Err(HostError::BadLength(raw.to_string()));
    }
    if !name.bytes().all(|b| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.' || b == b'_'
    }) {
        return Err(HostError::BadChar(raw.to_string()));
    }
    Ok(Host::Name(name.to_string()))
}

/// Fold an address to the form policy sees: IPv4-mapped, IPv4-compatible and NAT64
/// IPv6 addresses become IPv4.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match embedded_v4(&v6) {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
    }
}

fn embedded_v4(v6: &Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = Ipv4Addr::new(
        (s[6] >> 8) as u8,
        (s[6] & 0xff) as u8,
        (s[7] >> 8) as u8,
        (s[7] & 0xff) as u8,
    );
    // ::ffff:a.b.c.d (mapped)
    if s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff {
        return Some(tail);
    }
    // ::a.b.c.d (compatible, deprecated); :: and ::1 stay IPv6.
    if s[..6] == [0, 0, 0, 0, 0, 0] && (s[6] != 0 || s[7] > 1) {
        return Some(tail);
    }
    // 64:ff9b::a.b.c.d (well-known NAT64 prefix)
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    // ::ffff:0:a.b.c.d (SIIT translated)
    if s[..4] == [0, 0, 0, 0] && s[4] == 0xffff && s[5] == 0 {
        return Some(tail);
    }
    None
}

fn parse_v6(s: &str) -> Result<IpAddr, HostError> {
    if s.contains('%') {
        return Err(HostError::BadIpv6(s.to_string()));
    }
    s.parse::<Ipv6Addr>()
        .map(|a| canonical_ip(IpAddr::V6(a)))
        .map_err(|_| HostError::BadIpv6(s.to_string()))
}

fn is_numeric_label(l: &str) -> bool {
    if l.is_empty() {
        return false;
    }
    if let Some(hex) = l.strip_prefix("0x").or_else(|| l.strip_prefix("0X")) {
        return hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    l.bytes().all(|b| b.is_ascii_digit())
}

fn parse_part(l: &str) -> Option<u64> {
    if l.is_empty() || l.len() > 34 {
        return None;
    }
    if let Some(hex) = l.strip_prefix("0x").or_else(|| l.strip_prefix("0X")) {
        if hex.is_empty() {
            return None;
        }
        return u64::from_str_radix(hex, 16).ok();
    }
    if l.len() > 1 && l.starts_with('0') {
        return u64::from_str_radix(&l[1..], 8).ok();
    }
    l.parse::<u64>().ok()
}

/// The C library's `inet_aton`: 1 to 4 parts, the last filling the remaining bytes.
fn parse_inet_aton(labels: &[&str]) -> Option<Ipv4Addr> {
    if labels.is_empty() || labels.len() > 4 {
        return None;
    }
    let parts: Vec<u64> = labels
        .iter()
        .map(|l| parse_part(l))
        .collect::<Option<_>>()?;
    let (last, head) = parts.split_last()?;
    let mut value: u64 = 0;
    for (i, p) in head.iter().enumerate() {
        if *p > 255 {
            return None;
        }
        value |= p << (24 - 8 * i);
    }
    let room_bits = 32 - 8 * head.len();
    if room_bits < 64 && *last >= (1u64 << room_bits) {
        return None;
    }
    value |= last;
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

/// Split an authority `host[:port]` / `[v6][:port]`. Userinfo is rejected.
pub fn split_authority(s: &str) -> Result<(&str, Option<u16>), HostError> {
    if s.contains('@') {
        return Err(HostError::BadChar(s.to_string()));
    }
    let (host, port) = if s.starts_with('[') {
        match s.find(']') {
            Some(end) => {
                let rest = &s[end + 1..];
                let port = match rest.strip_prefix(':') {
                    Some(p) => Some(p),
                    None if rest.is_empty() => None,
                    None => return Err(HostError::BadIpv6(s.to_string())),
                };
                (&s[..=end], port)
            }
            None => return Err(HostError::BadIpv6(s.to_string())),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => return Err(HostError::BadIpv6(s.to_string())),
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => Some(parse_port(p).ok_or_else(|| HostError::BadPort(s.to_string()))?),
    };
    if host.is_empty() {
        return Err(HostError::Empty);
    }
    Ok((host, port))
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match p.parse::<u16>() {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Host {
        Host::Ip(s.parse().unwrap())
    }

    #[test]
    fn ipv4_spellings_fold_to_one_address() {
        for s in [
            "127.0.0.1",
            "127.1",
            "127.0.1",
            "2130706433",
            "0x7f000001",
            "0X7F000001",
            "0177.0.0.1",
            "0x7f.1",
            "127.0.0.1.",
            "[::ffff:127.0.0.1]",
            "::ffff:7f00:1",
            "[::127.0.0.1]",
            "[64:ff9b::127.0.0.1]",
            "[64:ff9b::7f00:1]",
            "１２７.０.０.１",
        ] {
            assert_eq!(canonical_host(s), Ok(ip("127.0.0.1")), "{s}");
        }
    }

    #[test]
    fn names_fold_case_trailing_dot_and_idn() {
        assert_eq!(
            canonical_host("Allowed.TEST."),
            Ok(Host::Name("allowed.test".into()))
        );
        assert_eq!(
            canonical_host("bücher.example"),
            Ok(Host::Name("xn--bcher-kva.example".into()))
        );
        assert_eq!(
            canonical_host("BÜCHER.example"),
            Ok(Host::Name("xn--bcher-kva.example".into()))
        );
    }

    #[test]
    fn odd_spellings_are_errors() {
        for s in [
            "",
            ".",
            "a b",
            "a\0b",
            "user@host",
            "*.example",
            "256.0.0.1",
            "1.2.3.4.5",
            "4294967296",
            "example.123",
            "[::1",
            "fe80::1%eth0",
            "a..b",
            "0x",
        ] {
            assert!(canonical_host(s).is_err(), "{s:?} should be rejected");
        }
    }

    #[test]
    fn v6_stays_v6_unless_it_embeds_v4() {
        assert_eq!(canonical_host("[::1]"), Ok(ip("::1")));
        assert_eq!(canonical_host("[2001:db8::1]"), Ok(ip("2001:db8::1")));
    }

    #[test]
    fn authorities_split_with_a_real_parser() {
        assert_eq!(split_authority("a.test:443"), Ok(("a.test", Some(443))));
        assert_eq!(split_authority("a.test"), Ok(("a.test", None)));
        assert_eq!(split_authority("[::1]:80"), Ok(("[::1]", Some(80))));
        assert_eq!(split_authority("[::1]"), Ok(("[::1]", None)));
        assert!(split_authority("::1:80").is_err());
        assert!(split_authority("u:p@a.test:80").is_err());
        assert!(split_authority("a.test:0").is_err());
        assert!(split_authority("a.test:65536").is_err());
        assert!(split_authority("a.test:+80").is_err());
        assert!(split_authority(":80").is_err());
    }
}
