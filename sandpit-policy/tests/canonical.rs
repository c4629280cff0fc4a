//! Property tests: canonicalization is idempotent, and deciding a request gives the
//! same verdict as deciding its canonical form.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use proptest::prelude::*;
use sandpit_policy::host::{canonical_host, canonical_ip, Host};
use sandpit_policy::path::normalize;
use sandpit_policy::{decide, load, Context, Layer, LoadOptions, Policy, Request, Source};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::OnceLock;

fn policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        let mut o = LoadOptions::new(Context {
            home: "/h".into(),
            workspace: "/h/w".into(),
            scratch: "/t/run".into(),
            state_dir: "/h/.sandpit".into(),
        });
        o.user = Some(Source::new(
            Layer::User,
            "u.toml",
            "[network]\nallow = [\"a.example\", \"*.b.example\", \"10.0.0.0/8\", \"127.0.0.2:80\", \"[::1]:8080\"]\nblock = [\"x.b.example\"]\n[files]\nallow_read = [\"~/.ssh/pub\"]\n",
        ));
        load(&o).unwrap()
    })
}

fn path_strategy() -> impl Strategy<Value = String> {
    let comp = prop_oneof![
        Just("h".to_string()),
        Just("w".to_string()),
        Just(".ssh".to_string()),
        Just("pub".to_string()),
        Just(".git".to_string()),
        Just("hooks".to_string()),
        Just("..".to_string()),
        Just(".".to_string()),
        Just("".to_string()),
        Just("t".to_string()),
        Just("run".to_string()),
        "[a-z]{1,3}",
    ];
    prop::collection::vec(comp, 0..8).prop_map(|v| format!("/{}", v.join("/")))
}

fn host_spelling() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u32>().prop_map(|v| Ipv4Addr::from(v).to_string()),
        any::<u32>().prop_map(|v| v.to_string()),
        any::<u32>().prop_map(|v| format!("0x{v:x}")),
        any::<u32>().prop_map(|v| {
            let o = Ipv4Addr::from(v).octets();
            format!("{}.{}", o[0], u32::from_be_bytes([0, o[1], o[2], o[3]]))
        }),
        any::<u32>().prop_map(|v| format!("[::ffff:{}]", Ipv4Addr::from(v))),
        any::<u32>().prop_map(|v| format!("[64:ff9b::{}]", Ipv4Addr::from(v))),
        any::<u128>().prop_map(|v| format!("[{}]", Ipv6Addr::from(v))),
        "[a-zA-Z0-9-]{1,8}(\\.[a-zA-Z0-9-]{1,8}){0,3}\\.?",
        Just("A.Example.".to_string()),
        Just("Q.B.EXAMPLE".to_string()),
        Just("127.1".to_string()),
        Just("0177.0.0.2".to_string()),
    ]
}

proptest! {
    #[test]
    fn path_normalization_is_idempotent(p in path_strategy()) {
        let once = normalize(std::path::Path::new(&p));
        prop_assert_eq!(normalize(&once), once.clone());
    }

    #[test]
    fn path_verdicts_are_spelling_independent(p in path_strategy()) {
        let raw = PathBuf::from(&p);
        let canon = normalize(&raw);
        prop_assert_eq!(decide(policy(), &Request::Read(&raw)), decide(policy(), &Request::Read(&canon)));
        prop_assert_eq!(decide(policy(), &Request::Write(&raw)), decide(policy(), &Request::Write(&canon)));
    }

    #[test]
    fn host_canonicalization_is_idempotent(h in host_spelling()) {
        if let Ok(c) = canonical_host(&h) {
            prop_assert_eq!(canonical_host(&c.to_string()), Ok(c.clone()));
        }
    }

    #[test]
    fn host_verdicts_are_spelling_independent(h in host_spelling(), port in 1u16..) {
        if let Ok(c) = canonical_host(&h) {
            let a = decide(policy(), &Request::Connect { host: &h, port });
            let b = decide(policy(), &Request::Connect { host: &c.to_string(), port });
            prop_assert_eq!(a.decision, b.decision);
            prop_assert_eq!(a.rule, b.rule);
        }
    }

    #[test]
    fn ip_folding_is_idempotent_and_agrees_with_v4(v in any::<u32>(), x in any::<u128>()) {
        let v4 = IpAddr::V4(Ipv4Addr::from(v));
        let mapped = IpAddr::V6(Ipv4Addr::from(v).to_ipv6_mapped());
        prop_assert_eq!(canonical_ip(mapped), v4);
        let any6 = IpAddr::V6(Ipv6Addr::from(x));
        prop_assert_eq!(canonical_ip(canonical_ip(any6)), canonical_ip(any6));
        prop_assert_eq!(canonical_host(&format!("[{}]", Ipv6Addr::from(x))).map(|h| matches!(h, Host::Ip(_))), Ok(true));
    }
}
