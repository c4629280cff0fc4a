//! Host names, IP spellings and host patterns, canonicalized once.
//!
//! Every spelling of an address (`127.1`, `2130706433`, `0x7f000001`,
//! `[::ffff:127.0.0.1]`, NAT64 `64:ff9b::7f00:1`) becomes one canonical [`Host`], and
//! names are lowercased, stripped of a trailing dot and converted to punycode, so the
//! policy matches what will actually be dialled.
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A canonical destination host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Host {
    /// A lowercase ASCII (punycode) DNS name without trailing dot.
    Name(String),
    /// An address; IPv4-mapped, -compatible and NAT64 IPv6 are folded to IPv4.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(v6)) => write!(f, "[{v6}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("host is empty")]
    Empty,
    #[error("host contains a space, control character or NUL")]
    Control,
    #[error("a scheme (\"{0}://\") is not part of a host")]
    Scheme(String),
    #[error("a path (\"/{0}\") is not part of a host")]
    Path(String),
    #[error("user info (\"user@\") is not part of a host")]
    UserInfo,
    #[error("\"{0}\" is not a valid host name")]
    Invalid(String),
    #[error("\"{0}\" is not a valid port (1-65535)")]
    Port(String),
    #[error("a wildcard must be the whole leftmost label of a name with at least two more labels, as in \"*.example.com\"")]
    Wildcard,
    #[error("\"{0}\" is not a valid CIDR range")]
    Cidr(String),
}

/// Fold IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`) and NAT64
/// (`64:ff9b::/96`) IPv6 addresses to the IPv4 address they carry.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let embedded =
                Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
            let mapped = s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff;
            let compatible = s[..6] == [0; 6] && u32::from(embedded) > 1;
            let nat64 = s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4];
            if mapped || compatible || nat64 {
                IpAddr::V4(embedded)
            } else {
                IpAddr::V6(v6)
            }
        }
    }
}

/// Parse an IPv4 address the way `inet_aton` does: one to four parts, each decimal,
/// octal (leading `0`) or hex (`0x`), the last part filling the remaining bytes.
pub fn parse_inet_aton(s: &str) -> Option<Ipv4Addr> {
    if s.is_empty() || s.ends_with('.') && s.len() == 1 {
        return None;
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut nums = Vec::with_capacity(parts.len());
    for p in &parts {
        nums.push(parse_aton_part(p)?);
    }
    let last = *nums.last()?;
    let head = &nums[..nums.len() - 1];
    if head.iter().any(|&n| n > 255) {
        return None;
    }
    let remaining_bits = 8 * (4 - head.len() as u32);
    if remaining_bits < 32 && last >= (1u64 << remaining_bits) {
        return None;
    }
    if last > u32::MAX as u64 {
        return None;
    }
    let mut v: u32 = 0;
    for (i, &n) in head.iter().enumerate() {
        v |= (n as u32) << (24 - 8 * i as u32);
    }
    v |= last as u32;
    Some(Ipv4Addr::from(v))
}

fn parse_aton_part(p: &str) -> Option<u64> {
    if p.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
        (h, 16)
    } else if p.len() > 1 && p.starts_with('0') {
        (&p[1..], 8)
    } else {
        (p, 10)
    };
    if digits.is_empty() {
        // "0x" alone is 0 for inet_aton.
        return if radix == 16 { Some(0) } else { None };
    }
    if digits.len() > 11 || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Canonicalize a host as written in a URL, a CONNECT line, a SNI or a policy entry.
/// Brackets around IPv6 are accepted; ports are not (see [`parse_authority`]).
pub fn canonical_host(input: &str) -> Result<Host, HostError> {
    let s = input.trim_matches(|c: char| c == ' ' || c == '\t');
    if s.is_empty() {
        return Err(HostError::Empty);
    }
    reject_non_host(s)?;
    if let Some(inner) = s.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| HostError::Invalid(s.into()))?;
        let v6: Ipv6Addr = strip_zone(inner)
            .parse()
            .map_err(|_| HostError::Invalid(s.into()))?;
        return Ok(Host::Ip(canonical_ip(IpAddr::V6(v6))));
    }
    if let Some((_, path)) = s.split_once('/') {
        return Err(HostError::Path(path.to_string()));
    }
    if s.contains(':') {
        let v6: Ipv6Addr = strip_zone(s)
            .parse()
            .map_err(|_| HostError::Invalid(s.into()))?;
        return Ok(Host::Ip(canonical_ip(IpAddr::V6(v6))));
    }
    let no_dot = s.strip_suffix('.').unwrap_or(s);
    if let Some(v4) = parse_inet_aton(no_dot) {
        return Ok(Host::Ip(IpAddr::V4(v4)));
    }
    let ascii = idna::domain_to_ascii(no_dot).map_err(|_| HostError::Invalid(s.into()))?;
    let name = ascii.strip_suffix('.').unwrap_or(&ascii).to_string();
    validate_name(&name).map_err(|_| HostError::Invalid(s.into()))?;
    // A name whose last label is numeric must have been an IPv4 address (WHATWG).
    if name
        .rsplit('.')
        .next()
        .is_some_and(|l| l.chars().all(|c| c.is_ascii_digit()) || l.starts_with("0x"))
    {
        return Err(HostError::Invalid(s.into()));
    }
    Ok(Host::Name(name))
}

/// What can never be part of a host: white space and control characters (NUL
/// included), a scheme, user info.
fn reject_non_host(s: &str) -> Result<(), HostError> {
    if s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(HostError::Control);
    }
    if let Some((scheme, _)) = s.split_once("://") {
        return Err(HostError::Scheme(scheme.to_string()));
    }
    if s.contains('@') {
        return Err(HostError::UserInfo);
    }
    Ok(())
}

fn strip_zone(s: &str) -> &str {
    // Zone ids (fe80::1%eth0) do not change which host is meant for policy purposes.
    s.split('%').next().unwrap_or(s)
}

fn validate_name(name: &str) -> Result<(), ()> {
    if name.is_empty() || name.len() > 253 {
        return Err(());
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(());
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(());
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(());
        }
    }
    Ok(())
}

/// Split `host[:port]` / `[v6]:port` with an authority parser (never `split(':')`).
/// A bare IPv6 address without brackets is a host with no port.
pub fn parse_authority(input: &str) -> Result<(Host, Option<u16>), HostError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some((scheme, _)) = s.split_once("://") {
        return Err(HostError::Scheme(scheme.to_string()));
    }
    if s.starts_with('[') {
        let end = s.find(']').ok_or_else(|| HostError::Invalid(s.into()))?;
        let host = canonical_host(&s[..=end])?;
        let rest = &s[end + 1..];
        if rest.is_empty() {
            return Ok((host, None));
        }
        let port = rest
            .strip_prefix(':')
            .ok_or_else(|| HostError::Invalid(s.into()))?;
        return Ok((host, Some(parse_port(port)?)));
    }
    match s.matches(':').count() {
        0 => Ok((canonical_host(s)?, None)),
        1 => {
            let (h, p) = s.split_once(':').ok_or(HostError::Empty)?;
            Ok((canonical_host(h)?, Some(parse_port(p)?)))
        }
        _ => Ok((canonical_host(s)?, None)),
    }
}

pub fn parse_port(p: &str) -> Result<u16, HostError> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HostError::Port(p.into()));
    }
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(HostError::Port(p.into())),
        Ok(n) => Ok(n),
    }
}

/// What a host pattern matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostMatch {
    /// Exactly this name.
    Exact(String),
    /// Any name strictly below this suffix (`*.example.com`).
    Subdomains(String),
    /// Exactly this address.
    Ip(IpAddr),
    /// Any address in this range.
    Cidr(IpAddr, u8),
}

/// A validated `network.allow` / `network.block` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPattern {
    pub host: HostMatch,
    /// `None` matches every port.
    pub port: Option<u16>,
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostMatch::Exact(n) => f.write_str(n)?,
            HostMatch::Subdomains(n) => write!(f, "*.{n}")?,
            HostMatch::Ip(ip) => write!(f, "{}", Host::Ip(*ip))?,
            HostMatch::Cidr(ip, len) => write!(f, "{ip}/{len}")?,
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl HostPattern {
    /// Parse and validate a pattern: `name`, `*.name`, `name:port`, `[v6]:port`,
    /// an address, or a CIDR range.
    pub fn parse(input: &str) -> Result<HostPattern, HostError> {
        let s = input.trim();
        reject_non_host(s)?;
        if let Some((addr, len)) = s.split_once('/') {
            if let Ok(ip) = addr.trim_matches(['[', ']']).parse::<IpAddr>() {
                let ip = canonical_ip(ip);
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let len: u8 = len
                    .parse()
                    .ok()
                    .filter(|l| *l <= max)
                    .ok_or_else(|| HostError::Cidr(s.into()))?;
                return Ok(HostPattern {
                    host: HostMatch::Cidr(mask(ip, len), len),
                    port: None,
                });
            }
            return Err(HostError::Path(len.to_string()));
        }
        if let Some(rest) = s.strip_prefix("*.") {
            let (host, port) = parse_authority(rest)?;
            return match host {
                Host::Name(n) if n.contains('.') => Ok(HostPattern {
                    host: HostMatch::Subdomains(n),
                    port,
                }),
                _ => Err(HostError::Wildcard),
            };
        }
        if s.contains('*') {
            return Err(HostError::Wildcard);
        }
        let (host, port) = parse_authority(s)?;
        Ok(HostPattern {
            host: match host {
                Host::Name(n) => HostMatch::Exact(n),
                Host::Ip(ip) => HostMatch::Ip(ip),
            },
            port,
        })
    }

    /// Whether this pattern covers `host:port`.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, host) {
            (HostMatch::Exact(p), Host::Name(n)) => p == n,
            (HostMatch::Exact(p), Host::Ip(ip)) => p == "localhost" && is_localhost(*ip),
            (HostMatch::Subdomains(p), Host::Name(n)) => {
                n.len() > p.len() + 1
                    && n.ends_with(p.as_str())
                    && n[..n.len() - p.len()].ends_with('.')
            }
            (HostMatch::Subdomains(_), Host::Ip(_)) => false,
            (HostMatch::Ip(p), Host::Ip(ip)) => p == ip,
            (HostMatch::Cidr(net, len), Host::Ip(ip)) => mask(*ip, *len) == *net,
            (HostMatch::Ip(_) | HostMatch::Cidr(..), Host::Name(_)) => false,
        }
    }

    /// Whether every host:port this pattern matches is also matched by `wider`.
    pub fn is_covered_by(&self, wider: &HostPattern) -> bool {
        if wider.port.is_some() && wider.port != self.port {
            return false;
        }
        match (&self.host, &wider.host) {
            (HostMatch::Exact(a), _) => wider.matches(
                &Host::Name(a.clone()),
                self.port.or(wider.port).unwrap_or(1),
            ),
            (HostMatch::Subdomains(a), HostMatch::Subdomains(b)) => {
                a == b
                    || (a.len() > b.len()
                        && a.ends_with(b.as_str())
                        && a[..a.len() - b.len()].ends_with('.'))
            }
            (HostMatch::Ip(a), _) => {
                wider.matches(&Host::Ip(*a), self.port.or(wider.port).unwrap_or(1))
            }
            (HostMatch::Cidr(a, la), HostMatch::Cidr(b, lb)) => la >= lb && mask(*a, *lb) == *b,
            _ => false,
        }
    }

    /// Whether this pattern names a loopback destination.
    pub fn is_loopback(&self) -> bool {
        match &self.host {
            HostMatch::Exact(n) => n == "localhost" || n.ends_with(".localhost"),
            HostMatch::Ip(ip) => is_loopback(*ip),
            HostMatch::Cidr(ip, _) => is_loopback(*ip),
            HostMatch::Subdomains(n) => n == "localhost",
        }
    }
}

fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - len as u32)
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & m))
        }
        IpAddr::V6(v6) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len as u32)
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & m))
        }
    }
}

pub fn is_loopback(ip: IpAddr) -> bool {
    canonical_ip(ip).is_loopback()
}

/// The addresses a `localhost` entry stands for: 127.0.0.1 and ::1 (also as
/// `::ffff:127.0.0.1`), not the rest of 127.0.0.0/8 — the kernel layer's relay
/// listeners are at those two addresses only.
pub fn is_localhost(ip: IpAddr) -> bool {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => v4 == Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => v6 == Ipv6Addr::LOCALHOST,
    }
}

/// Cloud metadata endpoints and link-local ranges: denied in every network mode
/// unless an entry names them. IPv4 link-local (169.254.0.0/16: AWS, Azure, GCP,
/// Oracle and DigitalOcean at 169.254.169.254, Tencent at 169.254.0.23), Alibaba's
/// 100.100.100.200, IPv6 link-local (fe80::/10), AWS's fd00:ec2::254 and GCP's
/// fd20:ce::254; every spelling folds to these first (`canonical_ip`).
pub fn is_metadata(ip: IpAddr) -> bool {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => v4.is_link_local() || v4 == Ipv4Addr::new(100, 100, 100, 200),
        IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
                || v6 == Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254)
        }
    }
}

/// The non-public range `ip` falls in, if any: loopback, cloud metadata,
/// link-local, private, shared (CGNAT), unspecified, multicast, broadcast,
/// reserved, special-purpose, documentation, unique-local and the IPv6 ranges that
/// carry IPv4 (6to4, Teredo). The one classification every layer uses: the policy's
/// decisions, the proxy's dial check and the resolver's answers.
pub fn non_public_range(ip: IpAddr) -> Option<&'static str> {
    if is_metadata(ip) {
        return Some(match canonical_ip(ip) {
            IpAddr::V4(v4) if v4.is_link_local() => "link-local",
            IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => "link-local",
            _ => "cloud metadata",
        });
    }
    match canonical_ip(ip) {
        IpAddr::V4(a) => {
            let o = a.octets();
            if a.is_loopback() {
                Some("loopback")
            } else if a.is_private() {
                Some("private")
            } else if o[0] == 0 {
                Some("unspecified")
            } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
                Some("shared (CGNAT)")
            } else if a.is_multicast() || o[0] >= 240 {
                Some("multicast/reserved")
            } else if (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (o[1] & 0xfe) == 18)
            {
                Some("special-purpose")
            } else if a.is_documentation() {
                Some("documentation")
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            if a.is_loopback() {
                Some("loopback")
            } else if s[0] == 0 {
                // ::/16: the unspecified address, and the IPv4-compatible spellings
                // `canonical_ip` left as they are.
                Some("unspecified/reserved")
            } else if (s[0] & 0xffc0) == 0xfec0 {
                Some("site-local")
            } else if (s[0] & 0xfe00) == 0xfc00 {
                Some("private (ULA)")
            } else if (s[0] & 0xff00) == 0xff00 {
                Some("multicast")
            } else if s[0] == 0x2002
                || (s[0] == 0x2001 && s[1] == 0)
                || (s[0] == 0x64 && s[1] == 0xff9b)
            {
                Some("IPv4-translation")
            } else if s[0] == 0x2001 && s[1] == 0x0db8 {
                Some("documentation")
            } else {
                None
            }
        }
    }
}

/// Whether `ip` is not on the public internet ([`non_public_range`]).
pub fn is_non_public(ip: IpAddr) -> bool {
    non_public_range(ip).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Host {
        Host::Ip(s.parse().unwrap())
    }

    #[test]
    fn ip_spellings_fold_to_one_address() {
        for s in [
            "127.0.0.1",
            "127.1",
            "2130706433",
            "0x7f000001",
            "0177.0.0.1",
            "0x7f.1",
            "[::ffff:127.0.0.1]",
            "::ffff:7f00:1",
            "[64:ff9b::7f00:1]",
            "[::127.0.0.1]",
            "127.0.0.1.",
        ] {
            assert_eq!(canonical_host(s).unwrap(), ip("127.0.0.1"), "{s}");
        }
        assert_eq!(canonical_host("[::1]").unwrap(), ip("::1"));
        assert_eq!(canonical_host("::").unwrap(), ip("::"));
    }

    #[test]
    fn names_are_lowercased_undotted_and_punycoded() {
        assert_eq!(
            canonical_host("Example.COM.").unwrap(),
            Host::Name("example.com".into())
        );
        assert_eq!(
            canonical_host("bücher.example").unwrap(),
            Host::Name("xn--bcher-kva.example".into())
        );
        assert_eq!(
            canonical_host("EXAMPLE.com").unwrap(),
            canonical_host("example.com").unwrap()
        );
    }

    #[test]
    fn bad_hosts_are_rejected_with_their_class() {
        assert_eq!(canonical_host(""), Err(HostError::Empty));
        assert_eq!(canonical_host("a b.com"), Err(HostError::Control));
        assert_eq!(canonical_host("a\0b.com"), Err(HostError::Control));
        assert!(matches!(
            canonical_host("https://x.com"),
            Err(HostError::Scheme(_))
        ));
        assert!(matches!(
            canonical_host("x.com/path"),
            Err(HostError::Path(_))
        ));
        assert_eq!(canonical_host("user@x.com"), Err(HostError::UserInfo));
        assert!(matches!(
            canonical_host("1.2.3.4.5"),
            Err(HostError::Invalid(_))
        ));
        assert!(matches!(
            canonical_host("256.1.1.1"),
            Err(HostError::Invalid(_))
        ));
        assert!(matches!(canonical_host("a..b"), Err(HostError::Invalid(_))));
        assert!(matches!(
            canonical_host("-a.com"),
            Err(HostError::Invalid(_))
        ));
    }

    #[test]
    fn authorities_parse_ports_without_splitting_v6() {
        assert_eq!(
            parse_authority("[::1]:8080").unwrap(),
            (ip("::1"), Some(8080))
        );
        assert_eq!(parse_authority("::1").unwrap(), (ip("::1"), None));
        assert_eq!(
            parse_authority("Example.com:443").unwrap(),
            (Host::Name("example.com".into()), Some(443))
        );
        assert!(matches!(
            parse_authority("x.com:0"),
            Err(HostError::Port(_))
        ));
        assert!(matches!(
            parse_authority("x.com:65536"),
            Err(HostError::Port(_))
        ));
        assert!(matches!(
            parse_authority("x.com:+1"),
            Err(HostError::Port(_))
        ));
        assert!(matches!(
            parse_authority("[::1]x"),
            Err(HostError::Invalid(_))
        ));
    }

    #[test]
    fn patterns_validate_and_match() {
        assert_eq!(HostPattern::parse("*"), Err(HostError::Wildcard));
        assert_eq!(HostPattern::parse("*.com"), Err(HostError::Wildcard));
        assert_eq!(HostPattern::parse("a.*.com"), Err(HostError::Wildcard));
        assert_eq!(HostPattern::parse("a*b.com"), Err(HostError::Wildcard));
        let p = HostPattern::parse("*.githubusercontent.com").unwrap();
        assert!(p.matches(&Host::Name("raw.githubusercontent.com".into()), 443));
        assert!(!p.matches(&Host::Name("githubusercontent.com".into()), 443));
        assert!(!p.matches(&Host::Name("evilgithubusercontent.com".into()), 443));
        let p = HostPattern::parse("registry.npmjs.org:443").unwrap();
        assert!(p.matches(&Host::Name("registry.npmjs.org".into()), 443));
        assert!(!p.matches(&Host::Name("registry.npmjs.org".into()), 80));
        let p = HostPattern::parse("10.0.0.0/8").unwrap();
        assert!(p.matches(&ip("10.1.2.3"), 1));
        assert!(!p.matches(&ip("11.1.2.3"), 1));
        let p = HostPattern::parse("localhost:11434").unwrap();
        assert!(p.matches(&ip("127.0.0.1"), 11434));
        assert!(p.matches(&ip("::1"), 11434));
        assert!(p.matches(&ip("::ffff:127.0.0.1"), 11434));
        assert!(!p.matches(&ip("127.0.0.1"), 11435));
        // localhost is 127.0.0.1 and ::1, not all of 127.0.0.0/8.
        assert!(!p.matches(&ip("127.0.0.3"), 11434));
        assert!(!p.matches(&ip("127.1.2.3"), 11434));
        assert!(!p.matches(&ip("::ffff:127.0.0.3"), 11434));
    }

    #[test]
    fn coverage_is_subset() {
        let wide = HostPattern::parse("*.example.com").unwrap();
        assert!(HostPattern::parse("a.example.com")
            .unwrap()
            .is_covered_by(&wide));
        assert!(HostPattern::parse("a.example.com:443")
            .unwrap()
            .is_covered_by(&wide));
        assert!(HostPattern::parse("*.a.example.com")
            .unwrap()
            .is_covered_by(&wide));
        assert!(!HostPattern::parse("example.com")
            .unwrap()
            .is_covered_by(&wide));
        let port = HostPattern::parse("x.com:443").unwrap();
        assert!(!HostPattern::parse("x.com").unwrap().is_covered_by(&port));
        let net = HostPattern::parse("10.0.0.0/8").unwrap();
        assert!(HostPattern::parse("10.1.0.0/16")
            .unwrap()
            .is_covered_by(&net));
        assert!(!HostPattern::parse("0.0.0.0/0").unwrap().is_covered_by(&net));
    }

    /// Every range at both of its edges and just outside them, by the name the
    /// classification gives it (`None`: public). A branch that is dropped, widened
    /// or narrowed changes one of these rows.
    #[test]
    fn address_classes_at_their_edges() {
        let table: &[(&str, Option<&str>)] = &[
            ("0.0.0.0", Some("unspecified")),
            ("0.255.255.255", Some("unspecified")),
            ("1.0.0.0", None),
            ("9.255.255.255", None),
            ("10.0.0.0", Some("private")),
            ("10.255.255.255", Some("private")),
            ("11.0.0.0", None),
            ("100.63.255.255", None),
            ("100.64.0.0", Some("shared (CGNAT)")),
            ("100.100.100.200", Some("cloud metadata")),
            ("100.100.100.201", Some("shared (CGNAT)")),
            ("100.127.255.255", Some("shared (CGNAT)")),
            ("100.128.0.0", None),
            ("126.255.255.255", None),
            ("127.0.0.0", Some("loopback")),
            ("127.255.255.255", Some("loopback")),
            ("128.0.0.0", None),
            ("169.253.255.255", None),
            ("169.254.0.0", Some("link-local")),
            ("169.254.169.254", Some("link-local")),
            ("169.255.0.0", None),
            ("172.15.255.255", None),
            ("172.16.0.0", Some("private")),
            ("172.31.255.255", Some("private")),
            ("172.32.0.0", None),
            ("191.255.255.255", None),
            ("192.0.0.0", Some("special-purpose")),
            ("192.0.0.255", Some("special-purpose")),
            ("192.0.1.0", None),
            ("192.0.2.0", Some("documentation")),
            ("192.0.2.255", Some("documentation")),
            ("192.0.3.0", None),
            ("192.167.255.255", None),
            ("192.168.0.0", Some("private")),
            ("192.168.255.255", Some("private")),
            ("192.169.0.0", None),
            ("198.17.255.255", None),
            ("198.18.0.0", Some("special-purpose")),
            ("198.19.255.255", Some("special-purpose")),
            ("198.20.0.0", None),
            ("198.51.100.7", Some("documentation")),
            ("203.0.113.7", Some("documentation")),
            ("203.0.114.0", None),
            ("223.255.255.255", None),
            ("224.0.0.0", Some("multicast/reserved")),
            ("239.255.255.255", Some("multicast/reserved")),
            ("240.0.0.0", Some("multicast/reserved")),
            ("255.255.255.255", Some("multicast/reserved")),
            ("::", Some("unspecified/reserved")),
            ("::1", Some("loopback")),
            ("::2", Some("unspecified")),
            ("0:ffff::", Some("unspecified/reserved")),
            ("1::", None),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:10.0.0.1", Some("private")),
            ("::ffff:169.254.169.254", Some("link-local")),
            ("::ffff:93.184.216.34", None),
            ("64:ff9b::a9fe:a9fe", Some("link-local")),
            ("64:ff9b::5db8:d822", None),
            ("64:ff9b:1::1", Some("IPv4-translation")),
            ("64:ff9a::1", None),
            ("2001::1", Some("IPv4-translation")),
            ("2001:0:ffff::", Some("IPv4-translation")),
            ("2001:1::", None),
            ("2001:db7:ffff::", None),
            ("2001:db8::", Some("documentation")),
            ("2001:db8:ffff::", Some("documentation")),
            ("2001:db9::", None),
            ("2002::", Some("IPv4-translation")),
            ("2002:ffff::", Some("IPv4-translation")),
            ("2003::", None),
            ("2606:4700::1111", None),
            ("fbff:ffff::", None),
            ("fc00::", Some("private (ULA)")),
            ("fd00:ec2::254", Some("cloud metadata")),
            ("fd00:ec2::253", Some("private (ULA)")),
            ("fd20:ce::254", Some("cloud metadata")),
            ("fd20:ce::255", Some("private (ULA)")),
            ("fdff:ffff::", Some("private (ULA)")),
            ("fe00::", None),
            ("fe7f:ffff::", None),
            ("fe80::", Some("link-local")),
            ("febf:ffff::", Some("link-local")),
            ("fec0::", Some("site-local")),
            ("feff:ffff::", Some("site-local")),
            ("ff00::", Some("multicast")),
            ("ffff:ffff::", Some("multicast")),
        ];
        let mut wrong = vec![];
        for (a, want) in table {
            let ip: IpAddr = a.parse().unwrap();
            let got = non_public_range(ip);
            if got != *want || is_non_public(ip) != want.is_some() {
                wrong.push(format!("{a}: {got:?}, want {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
        let metadata = [
            "169.254.0.0",
            "169.254.169.254",
            "169.254.255.255",
            "::ffff:169.254.169.254",
            "100.100.100.200",
            "fe80::",
            "febf:ffff::",
            "fd00:ec2::254",
            "fd20:ce::254",
        ];
        for a in metadata {
            assert!(is_metadata(a.parse().unwrap()), "{a}");
        }
        for a in [
            "169.253.255.255",
            "169.255.0.0",
            "100.100.100.201",
            "100.100.100.199",
            "fe7f:ffff::",
            "fec0::",
            "fd00:ec2::253",
            "fd00:ec2:1::254",
            "fd20:ce::253",
            "fd20:cf::254",
            "1.1.1.1",
        ] {
            assert!(!is_metadata(a.parse().unwrap()), "{a}");
        }
    }
}
