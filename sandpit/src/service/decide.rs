//! The proxy's boundary to the policy: a small trait the launcher implements for
//! `sandpit_policy::Policy`, plus the address-range rule every implementation shares.
use std::net::IpAddr;

use sandpit_policy::host::{canonical_host, canonical_ip, Host, HostMatch};
use sandpit_policy::{NetMode, Policy, Program};

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

/// The last word on a connection the policy allowed: the adversary, with
/// `adversary.review = ["network"]`. Asked after [`Decide::connect`] allowed
/// `host:port` and before anything is resolved or dialed; a deny refuses the
/// connection with the reviewer's reason.
pub trait Review: Send + Sync + 'static {
    fn review<'a>(
        &'a self,
        host: &'a Host,
        port: u16,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Verdict> + Send + 'a>>;
}

/// [`ProxyConfig::review`](super::ProxyConfig::review)'s value.
#[derive(Clone)]
pub struct Reviewing(pub std::sync::Arc<dyn Review>);

impl std::fmt::Debug for Reviewing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reviewing(..)")
    }
}

/// The user's word on a connection the policy denied only because `network.allow`
/// does not name its host (`network.ask_on_blocked_host`): asked after
/// [`Decide::connect`] denied `host:port`, with that verdict. Returns the verdict
/// that stands: `denied` itself when the denial is not one to ask about, or no
/// terminal is there to ask on; the user's allow or deny otherwise.
pub trait Ask: Send + Sync + 'static {
    /// `who`: the program behind the connection, as the question names it (the
    /// kernel's word: see `service::peer`), when known. Called only when a question
    /// is to be asked: the lookup costs milliseconds, and most denials are not.
    fn ask<'a>(
        &'a self,
        host: &'a Host,
        port: u16,
        denied: &'a Verdict,
        who: Who<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Verdict> + Send + 'a>>;
}

/// [`Ask::ask`]'s way to name the program behind a connection, on demand.
pub type Who<'a> = Box<dyn FnOnce() -> Option<String> + Send + 'a>;

/// [`ProxyConfig::ask`](super::ProxyConfig::ask)'s value.
#[derive(Clone)]
pub struct Asking(pub std::sync::Arc<dyn Ask>);

impl std::fmt::Debug for Asking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Asking(..)")
    }
}

/// What the proxy and DNS responder ask the policy.
pub trait Decide: Send + Sync + 'static {
    /// May the sandbox connect to `host:port` (before any resolution)?
    fn connect(&self, host: &Host, port: u16) -> Verdict;
    /// [`Decide::connect`] for a connection from `program` (`None`: not known), with
    /// the `[[network.program]]` entries judged too (a host one of them names is
    /// denied to every other program, and to an unknown one). No default: a decider
    /// that wraps another must pass this on, or the entries go unenforced.
    fn connect_from(&self, host: &Host, port: u16, program: Option<&Program>) -> Verdict;
    /// May the sandbox learn the addresses of `name` (DNS)? A name for which some
    /// port may be connected to.
    fn lookup(&self, name: &str) -> Verdict;
    /// `[network.resolve]` answers for `name`, which come before any resolver.
    fn static_answers(&self, name: &str) -> Option<Vec<IpAddr>>;
    /// True when an allow rule names `addr` literally. (A `[network.resolve]` entry
    /// names its address for its own name only; `resolved` checks that.)
    fn names_address(&self, addr: IpAddr) -> bool;

    /// May the proxy dial `addr`, obtained for `host:port`? Addresses in loopback,
    /// private, link-local, metadata and other non-public ranges, and the machine's
    /// own addresses, only when the policy names them.
    fn resolved(&self, host: &Host, port: u16, addr: IpAddr) -> Verdict;

    /// May this HTTP request go (`[network.http]`: method and path)? Asked for
    /// plain HTTP and for hosts whose TLS sandpit terminates; `target` is the
    /// request target in origin form. Without such rules, yes. No default: a
    /// decider that wraps another must pass this on, or the rules go unenforced.
    fn http(&self, method: &str, scheme: &str, host: &Host, port: u16, target: &str) -> Verdict;
}

fn verdict(v: sandpit_policy::Verdict) -> Verdict {
    Verdict {
        allow: v.is_allowed(),
        rule: v.rule.map(|o| o.to_string()),
        reason: v.reason,
    }
}

/// `decide` with the machine's own addresses (`service::own`); where they cannot be
/// read, a refusal saying so.
fn with_own(decide: impl FnOnce(&[IpAddr]) -> sandpit_policy::Verdict) -> Verdict {
    match super::own::addrs() {
        Ok(own) => verdict(decide(&own)),
        Err(e) => Verdict::deny(None, format!("blocked: {e}")),
    }
}

/// The launcher's decision object: the effective policy, with the machine's own
/// addresses as they are at each decision.
impl Decide for Policy {
    fn connect(&self, host: &Host, port: u16) -> Verdict {
        with_own(|own| sandpit_policy::decide::decide_connect(self, host, port, own))
    }

    fn connect_from(&self, host: &Host, port: u16, program: Option<&Program>) -> Verdict {
        with_own(|own| sandpit_policy::decide_connect_by(self, host, port, program, own))
    }

    fn lookup(&self, name: &str) -> Verdict {
        let host = match canonical_host(name) {
            Ok(h @ Host::Name(_)) => h,
            Ok(Host::Ip(_)) => {
                return Verdict::deny(None, format!("{name} is an address, not a name"))
            }
            Err(e) => return Verdict::deny(None, format!("{name:?} is not a host name: {e}")),
        };
        let net = &self.network;
        if net.mode.value == NetMode::Offline {
            return Verdict::deny(
                Some(net.mode.origin.to_string()),
                format!("lookup of {host} refused: network.mode = \"offline\""),
            );
        }
        // A block entry without a port blocks the name on every port.
        if let Some(b) = net
            .block
            .iter()
            .find(|r| r.value.port.is_none() && r.value.matches(&host, 1))
        {
            return Verdict::deny(
                Some(b.origin.to_string()),
                format!("lookup of {host} refused: blocked by {}", b.origin),
            );
        }
        if net.mode.value == NetMode::Unrestricted {
            return Verdict::allow(
                Some(net.mode.origin.to_string()),
                format!("lookup of {host}: network.mode = \"unrestricted\""),
            );
        }
        let any_port = |r: &&sandpit_policy::Rule<sandpit_policy::HostPattern>| {
            r.value.matches(&host, r.value.port.unwrap_or(1))
        };
        match net.allow.iter().find(any_port) {
            Some(a) => Verdict::allow(Some(a.origin.to_string()), format!("lookup of {host} allowed by {}", a.origin)),
            None => Verdict::deny(
                None,
                format!("lookup of {host} refused: the name is not in network.allow. To allow it, add \"{host}\" to [network] allow in ~/.sandpit/config.toml"),
            ),
        }
    }

    fn static_answers(&self, name: &str) -> Option<Vec<IpAddr>> {
        self.network
            .resolve
            .iter()
            .find(|r| r.value.name == name)
            .map(|r| r.value.addrs.clone())
    }

    fn names_address(&self, addr: IpAddr) -> bool {
        let addr = canonical_ip(addr);
        self.network.allow.iter().any(|r| {
            matches!(r.value.host, HostMatch::Ip(_) | HostMatch::Cidr(..))
                && r.value.matches(&Host::Ip(addr), r.value.port.unwrap_or(1))
        })
    }

    fn resolved(&self, host: &Host, port: u16, addr: IpAddr) -> Verdict {
        with_own(|own| sandpit_policy::check_resolved(self, host, port, addr, own))
    }

    fn http(&self, method: &str, scheme: &str, host: &Host, port: u16, target: &str) -> Verdict {
        verdict(sandpit_policy::decide(
            self,
            &sandpit_policy::Request::Http {
                method,
                scheme,
                host: &host.to_string(),
                port,
                target,
            },
        ))
    }
}

/// A policy from one TOML text layered as the user file over the built-in default
/// (tests, benches, fuzzing).
pub fn policy_from_toml(text: &str) -> Result<Policy, sandpit_policy::Error> {
    let dir = std::env::temp_dir();
    let ctx = sandpit_policy::Context {
        home: dir.join("sandpit-home"),
        workspace: dir.join("sandpit-home/project"),
        scratch: dir.join("sandpit-scratch"),
        state_dir: dir.join("sandpit-home/.sandpit"),
    };
    let mut o = sandpit_policy::LoadOptions::new(ctx);
    o.user = Some(sandpit_policy::Source::new(
        sandpit_policy::Layer::User,
        "test.toml",
        text,
    ));
    sandpit_policy::load(&o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_adapter() {
        let p = policy_from_toml(
            r#"
[network]
allow = ["allowed.test", "*.wild.test", "only.test:443", "sneaky.test"]
block = ["bad.wild.test"]
[network.resolve]
"allowed.test" = "127.0.0.2"
"blocked.test" = "127.0.0.1"
"#,
        )
        .unwrap();
        let n = |s: &str| Host::Name(s.into());
        assert!(p.connect(&n("allowed.test"), 80).allow);
        assert!(p.connect(&n("a.wild.test"), 80).allow);
        assert!(!p.connect(&n("wild.test"), 80).allow);
        assert!(!p.connect(&n("bad.wild.test"), 80).allow);
        assert!(p.connect(&n("only.test"), 443).allow);
        assert!(!p.connect(&n("only.test"), 80).allow);
        assert!(!p.connect(&n("blocked.test"), 80).allow);
        assert!(p.lookup("only.test").allow);
        assert!(p.lookup("ALLOWED.test.").allow);
        assert!(!p.lookup("blocked.test").allow);
        assert!(!p.lookup("bad.wild.test").allow);
        let a = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(p.resolved(&n("allowed.test"), 80, a("127.0.0.2")).allow);
        assert!(
            p.resolved(&n("allowed.test"), 80, a("::ffff:127.0.0.2"))
                .allow
        );
        // The resolve map names 127.0.0.1 for blocked.test only.
        assert!(!p.resolved(&n("sneaky.test"), 80, a("127.0.0.1")).allow);
        assert!(
            !p.resolved(&n("sneaky.test"), 80, a("169.254.169.254"))
                .allow
        );
        assert!(p.resolved(&n("sneaky.test"), 80, a("1.1.1.1")).allow);
        assert_eq!(p.static_answers("allowed.test"), Some(vec![a("127.0.0.2")]));
    }

    #[test]
    fn empty_allowlist_and_offline_deny() {
        let p = policy_from_toml("").unwrap();
        assert!(!p.connect(&Host::Name("allowed.test".into()), 443).allow);
        assert!(!p.lookup("allowed.test").allow);
        let p = policy_from_toml("[network]\nmode = \"offline\"\nallow = [\"a.test\"]\n").unwrap();
        assert!(!p.connect(&Host::Name("a.test".into()), 443).allow);
        assert!(!p.lookup("a.test").allow);
    }
}
