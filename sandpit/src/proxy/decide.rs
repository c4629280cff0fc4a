//! The proxy's boundary to the policy: a small trait the launcher implements for
//! `sandpit_policy::Policy`, plus the address-range rule every implementation shares.
use std::net::IpAddr;

use super::canon::{canonical_host, canonical_ip, Host};

/// One decision, with the rule that made it and a reason a model can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub allow: bool,
    /// The rule that decided, as the user wrote it and where (e.g.
    /// `~/.sandpit/config.toml:12 network.allow "a.test"`), if one did.
    pub rule: Option<String>,
    pub reason: String,
}

impl Verdict {
    pub fn allow(rule: Option<String>, reason: impl Into<String>) -> Verdict {
        Verdict {
            allow: true,
            rule,
            reason: reason.into(),
        }
    }
    pub fn deny(rule: Option<String>, reason: impl Into<String>) -> Verdict {
        Verdict {
            allow: false,
            rule,
            reason: reason.into(),
        }
    }
}

/// What the proxy and DNS responder ask the policy.
pub trait Decide: Send + Sync + 'static {
    /// May the sandbox connect to `host:port` (before any resolution)?
    fn connect(&self, host: &Host, port: u16) -> Verdict;
    /// May the sandbox learn the addresses of `name` (DNS)? A name for which some
    /// port may be connected to.
    fn lookup(&self, name: &str) -> Verdict;
    /// `[network.resolve]` answers for `name`, which come before any resolver.
    fn static_answers(&self, name: &str) -> Option<Vec<IpAddr>>;
    /// True when an allow rule names `addr` literally. (A `[network.resolve]` entry
    /// names its address for its own name only; `resolved` checks that.)
    fn names_address(&self, addr: IpAddr) -> bool;

    /// May the proxy dial `addr`, obtained for `host:port`? Addresses in loopback,
    /// private, link-local, metadata and other non-public ranges only when the policy
    /// names them.
    fn resolved(&self, host: &Host, port: u16, addr: IpAddr) -> Verdict {
        let addr = canonical_ip(addr);
        match non_public_range(addr) {
            None => Verdict::allow(None, format!("{host}:{port} → {addr} is a public address")),
            Some(range) => {
                let named_by_resolve = host
                    .name()
                    .and_then(|n| self.static_answers(n))
                    .is_some_and(|a| a.iter().any(|x| canonical_ip(*x) == addr));
                if named_by_resolve || self.names_address(addr) {
                    Verdict::allow(None, format!("{addr} ({range}) is named by the policy"))
                } else {
                    Verdict::deny(
                        None,
                        format!(
                            "{host} resolved to {addr}, a {range} address the policy does not \
                             name; name it in [network] allow or [network.resolve] to allow it"
                        ),
                    )
                }
            }
        }
    }
}

/// The non-public range `ip` falls in, if any.
pub fn non_public_range(ip: IpAddr) -> Option<&'static str> {
    match canonical_ip(ip) {
        IpAddr::V4(a) => {
            let o = a.octets();
            if a.is_loopback() {
                Some("loopback")
            } else if o == [169, 254, 169, 254] || o == [100, 100, 100, 200] {
                Some("cloud metadata")
            } else if a.is_link_local() {
                Some("link-local")
            } else if a.is_private() {
                Some("private")
            } else if a.is_unspecified() || o[0] == 0 {
                Some("unspecified")
            } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
                Some("shared (CGNAT)")
            } else if a.is_multicast() || a.is_broadcast() || o[0] >= 240 {
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
            } else if a.is_unspecified() {
                Some("unspecified")
            } else if s[0] == 0xfd00 && s[1] == 0x0ec2 && s[7] == 0x254 {
                Some("cloud metadata")
            } else if (s[0] & 0xffc0) == 0xfe80 {
                Some("link-local")
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
            } else if s[0] == 0 {
                Some("reserved")
            } else {
                None
            }
        }
    }
}

/// Network mode, as in the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Filtered,
    Offline,
    Unrestricted,
}

/// A self-contained rule set for tests, benches and until the launcher wires the
/// policy crate: exact hosts, `*.suffix`, literal addresses, optional `:port`.
#[derive(Debug, Clone)]
pub struct StaticRules {
    pub mode: Mode,
    allow: Vec<(String, Host, Option<u16>)>,
    block: Vec<(String, Host, Option<u16>)>,
    resolve: Vec<(String, IpAddr)>,
}

fn parse_rule(s: &str) -> Option<(String, Host, Option<u16>)> {
    let (h, port) = super::canon::split_authority(s).ok()?;
    let host = match h.strip_prefix("*.") {
        Some(sfx) => match canonical_host(sfx).ok()? {
            Host::Name(n) => Host::Name(format!("*.{n}")),
            Host::Ip(_) => return None,
        },
        None => canonical_host(h).ok()?,
    };
    Some((s.to_string(), host, port))
}

impl StaticRules {
    /// `allow`/`block` entries as in `[network]`; `resolve` as `[network.resolve]`.
    /// Entries that do not parse are ignored (the real policy crate rejects them).
    pub fn new(mode: Mode, allow: &[&str], block: &[&str], resolve: &[(&str, IpAddr)]) -> Self {
        StaticRules {
            mode,
            allow: allow.iter().filter_map(|s| parse_rule(s)).collect(),
            block: block.iter().filter_map(|s| parse_rule(s)).collect(),
            resolve: resolve
                .iter()
                .filter_map(|(n, a)| match canonical_host(n) {
                    Ok(Host::Name(n)) => Some((n, canonical_ip(*a))),
                    _ => None,
                })
                .collect(),
        }
    }

    fn matches(rule: &Host, host: &Host) -> bool {
        match (rule, host) {
            (Host::Name(r), Host::Name(h)) => match r.strip_prefix("*.") {
                Some(sfx) => {
                    h.len() > sfx.len() + 1
                        && h.ends_with(sfx)
                        && h[..h.len() - sfx.len()].ends_with('.')
                }
                None => r == h,
            },
            (Host::Ip(r), Host::Ip(h)) => r == h,
            _ => false,
        }
    }

    fn find<'a>(
        list: &'a [(String, Host, Option<u16>)],
        host: &Host,
        port: Option<u16>,
    ) -> Option<&'a str> {
        list.iter()
            .find(|(_, h, p)| {
                Self::matches(h, host) && (p.is_none() || port.is_none() || *p == port)
            })
            .map(|(s, _, _)| s.as_str())
    }
}

impl Decide for StaticRules {
    fn connect(&self, host: &Host, port: u16) -> Verdict {
        match self.mode {
            Mode::Offline => {
                return Verdict::deny(
                    Some("network.mode = \"offline\"".into()),
                    "the network is off for this run",
                )
            }
            Mode::Unrestricted => {
                return Verdict::allow(
                    Some("network.mode = \"unrestricted\"".into()),
                    "host filtering is off",
                )
            }
            Mode::Filtered => {}
        }
        if let Some(r) = Self::find(&self.block, host, Some(port)) {
            return Verdict::deny(
                Some(format!("network.block {r:?}")),
                format!("{host}:{port} is blocked"),
            );
        }
        if let Some(r) = Self::find(&self.allow, host, Some(port)) {
            return Verdict::allow(
                Some(format!("network.allow {r:?}")),
                format!("{host}:{port} is allowed"),
            );
        }
        Verdict::deny(None, format!("{host}:{port} is not in [network] allow"))
    }

    fn lookup(&self, name: &str) -> Verdict {
        let Ok(host) = canonical_host(name) else {
            return Verdict::deny(None, format!("{name:?} is not a valid host name"));
        };
        match self.mode {
            Mode::Offline => {
                return Verdict::deny(
                    Some("network.mode = \"offline\"".into()),
                    "the network is off for this run",
                )
            }
            Mode::Unrestricted => {
                return Verdict::allow(
                    Some("network.mode = \"unrestricted\"".into()),
                    "host filtering is off",
                )
            }
            Mode::Filtered => {}
        }
        if let Some(r) = self
            .block
            .iter()
            .find(|(_, h, p)| p.is_none() && Self::matches(h, &host))
        {
            return Verdict::deny(
                Some(format!("network.block {:?}", r.0)),
                format!("{host} is blocked"),
            );
        }
        if let Some(r) = Self::find(&self.allow, &host, None) {
            return Verdict::allow(
                Some(format!("network.allow {r:?}")),
                format!("{host} is allowed"),
            );
        }
        Verdict::deny(None, format!("{host} is not in [network] allow"))
    }

    fn static_answers(&self, name: &str) -> Option<Vec<IpAddr>> {
        let v: Vec<IpAddr> = self
            .resolve
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, a)| *a)
            .collect();
        (!v.is_empty()).then_some(v)
    }

    fn names_address(&self, addr: IpAddr) -> bool {
        let addr = canonical_ip(addr);
        self.allow.iter().any(|(_, h, _)| *h == Host::Ip(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        for a in [
            "127.0.0.2",
            "10.1.2.3",
            "169.254.169.254",
            "172.16.0.1",
            "192.168.1.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "0.0.0.0",
            "100.64.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(non_public_range(a.parse().unwrap()).is_some(), "{a}");
        }
        for a in ["1.1.1.1", "140.82.112.3", "2606:4700::1111"] {
            assert!(non_public_range(a.parse().unwrap()).is_none(), "{a}");
        }
    }

    #[test]
    fn static_rules() {
        let r = StaticRules::new(
            Mode::Filtered,
            &["allowed.test", "*.wild.test", "only.test:443"],
            &["bad.wild.test"],
            &[("allowed.test", "127.0.0.2".parse().unwrap())],
        );
        let n = |s: &str| Host::Name(s.into());
        assert!(r.connect(&n("allowed.test"), 80).allow);
        assert!(r.connect(&n("a.wild.test"), 80).allow);
        assert!(!r.connect(&n("wild.test"), 80).allow);
        assert!(!r.connect(&n("bad.wild.test"), 80).allow);
        assert!(r.connect(&n("only.test"), 443).allow);
        assert!(!r.connect(&n("only.test"), 80).allow);
        assert!(r.lookup("only.test").allow);
        assert!(!r.lookup("blocked.test").allow);
        let lo: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(r.resolved(&n("allowed.test"), 80, lo).allow);
        assert!(
            !r.resolved(&n("a.wild.test"), 80, "127.0.0.1".parse().unwrap())
                .allow
        );
    }
}
