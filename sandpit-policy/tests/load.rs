//! Validation, layering and tighten-only rules of the policy loader.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use sandpit_policy::{
    decide, load, Context, Decision, Diagnostic, Layer, LoadOptions, NetMode, Policy, Request,
    Source,
};
use std::path::{Path, PathBuf};

use common::ctx;

fn with(layer: Layer, text: &str) -> LoadOptions {
    let mut o = LoadOptions::new(ctx());
    let src = Source::new(layer, format!("{layer:?}.toml"), text);
    match layer {
        Layer::Profile => o.profile = Some(src),
        Layer::User => o.user = Some(src),
        Layer::Project => o.project = Some(src),
        Layer::Flags => o.flags = Some(src),
        Layer::Default => o.default = Some(src),
    }
    o
}

fn user(text: &str) -> Result<Policy, sandpit_policy::Error> {
    load(&with(Layer::User, text))
}

fn err(text: &str) -> Diagnostic {
    err_in(with(Layer::User, text))
}

fn err_in(o: LoadOptions) -> Diagnostic {
    match load(&o) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e
            .diagnostic()
            .cloned()
            .unwrap_or_else(|| panic!("not a diagnostic: {e}")),
    }
}

/// Assert the error is at `line:col` and mentions `needle`, with a hint.
fn at(d: &Diagnostic, line: u32, col: u32, needle: &str) {
    assert_eq!((d.line, d.column), (line, col), "{d}");
    assert!(d.message.contains(needle), "{d}");
    assert!(!d.hint.is_empty(), "{d}");
    assert_eq!(d.file, "User.toml");
}

#[test]
fn unknown_keys_are_located() {
    at(&err("[files]\nblock_reed = []\n"), 2, 1, "unknown field");
    at(&err("[netwerk]\n"), 1, 2, "unknown field");
    at(
        &err("[network]\nmode = \"filtered\"\n  colour = 1\n"),
        3,
        3,
        "unknown field",
    );
}

#[test]
fn bad_types_are_located() {
    at(
        &err("[files]\nblock_read = \"~/.ssh\"\n"),
        2,
        14,
        "invalid type",
    );
    at(
        &err("[network]\nallow_local_binding = \"yes\"\n"),
        2,
        23,
        "invalid type",
    );
    at(&err("[network]\nallow = [1]\n"), 2, 10, "invalid type");
}

#[test]
fn syntax_errors_are_located() {
    let d = err("[files\n");
    assert_eq!(d.line, 1, "{d}");
}

#[test]
fn host_patterns_are_validated() {
    let cases = [
        ("*", "wildcard"),
        ("*.com", "wildcard"),
        ("https://example.com", "scheme"),
        ("example.com/path", "path"),
        ("exa mple.com", "space"),
        ("bad..host", "not a valid host"),
        ("example.com:99999", "port"),
        ("user@example.com", "user info"),
        ("localhost", "every loopback port"),
        ("127.0.0.1", "every loopback port"),
        ("10.0.0.0/33", "CIDR"),
    ];
    for (entry, needle) in cases {
        let d = err(&format!("[network]\nallow = [\"ok.example\", {entry:?}]\n"));
        assert_eq!((d.line, d.column), (2, 24), "{entry}: {d}");
        assert!(
            d.message.to_lowercase().contains(&needle.to_lowercase()),
            "{entry}: {d}"
        );
        assert!(!d.hint.is_empty());
    }
    let d = err("[network]\nallow = [\"a\\u0000b.com\"]\n");
    assert!(
        d.message.contains("NUL") || d.message.contains("control"),
        "{d}"
    );
}

#[test]
fn host_patterns_are_canonicalized() {
    let p =
        user("[network]\nallow = [\"API.Example.COM.\", \"bücher.example:443\", \"[::1]:8080\"]\n")
            .unwrap();
    let shown: Vec<String> = p
        .network
        .allow
        .iter()
        .map(|r| r.value.to_string())
        .collect();
    assert_eq!(
        shown,
        ["api.example.com", "xn--bcher-kva.example:443", "[::1]:8080"]
    );
}

#[test]
fn regexes_paths_and_globs_are_validated() {
    at(&err("[exec]\nblock = [\"re:(unclosed\"]\n"), 2, 10, "regex");
    at(&err("[exec]\nblock = [\"\"]\n"), 2, 10, "empty");
    at(&err("[files]\nallow_write = [\"$FOO/x\"]\n"), 2, 16, "$FOO");
    at(
        &err("[files]\nblock_read = [\"~bob/.ssh\"]\n"),
        2,
        15,
        "another user",
    );
    at(
        &err("[env]\nwithhold = [\"A-B\"]\n"),
        2,
        13,
        "cannot appear",
    );
    at(&err("[network]\nmode = \"open\"\n"), 2, 8, "not a mode");
    at(
        &err("[network.resolve]\n\"x.test\" = \"not-an-ip\"\n"),
        2,
        12,
        "not an IP",
    );
    at(
        &err("[network.resolve]\n\"127.0.0.1\" = \"127.0.0.2\"\n"),
        2,
        1,
        "address, not a name",
    );
    at(
        &err("[adversary]\nmodel = \"m\"\nprovider = \"mistral\"\n"),
        3,
        12,
        "not supported",
    );
    at(
        &err("[adversary]\nmodel = \"m\"\ntimeout_ms = 0\n"),
        3,
        14,
        "out of range",
    );
    at(
        &err("[adversary]\nprovider = \"openai\"\n"),
        1,
        1,
        "model is missing",
    );
    at(
        &err("[adversary]\nmodel = \"m\"\nreview = [\"exec\", \"reads\"]\n"),
        3,
        19,
        "not an event",
    );
    let p =
        user("[adversary]\nmodel = \"m\"\nreview = [\"exec\", \"network\", \"write\"]\n").unwrap();
    use sandpit_policy::ReviewEvent::{Exec, Network, Write};
    assert_eq!(p.adversary.unwrap().review, vec![Exec, Network, Write]);
}

#[test]
fn paths_expand_and_normalize() {
    let p = user("[files]\nblock_read = [\"~/secrets/../keys\", \"//etc/./shadow\"]\nallow_write = [\"$TMPDIR/x\", \"build\"]\n").unwrap();
    let has = |list: &[sandpit_policy::Rule<PathBuf>], want: &str| {
        list.iter().any(|r| r.value == Path::new(want))
    };
    assert!(has(&p.files.block_read, "/nonexistent-home/u/keys"));
    assert!(has(&p.files.block_read, "/etc/shadow"));
    assert!(has(&p.files.allow_write, "/nonexistent-tmp/run/x"));
    assert!(has(&p.files.allow_write, "/nonexistent-home/u/proj/build"));
}

#[test]
fn defaults_deny_credentials_and_outside_writes() {
    let p = load(&LoadOptions::new(ctx())).unwrap();
    for secret in [
        "~/.ssh/id_rsa",
        "~/.aws/credentials",
        "~/.config/gh/hosts.yml",
        "~/.docker/config.json",
        "~/.kube/config",
        "~/.cargo/credentials.toml",
        "~/.gnupg/x",
        "~/.m2/settings.xml",
        "~/.gradle/gradle.properties",
        "~/.npmrc",
        "~/.pypirc",
        "~/.netrc",
        "~/.git-credentials",
        "~/.password-store/x.gpg",
        "~/.codex/auth.json",
        // Sockets that hand out secrets or run code: git's credential cache, SSH
        // agents, container VMs' Docker sockets.
        "~/.cache/git/credential/socket",
        "~/.1password/agent.sock",
        "~/.colima/default/docker.sock",
        "~/.lima/default/sock/ssh.sock",
        "~/.rd/docker.sock",
        "~/.orbstack/run/docker.sock",
    ] {
        let path = PathBuf::from(secret.replace('~', "/nonexistent-home/u"));
        let v = decide(&p, &Request::Read(&path));
        assert_eq!(v.decision, Decision::Deny, "{secret}: {v:?}");
        assert!(v.reason.contains("files.block_read"), "{}", v.reason);
    }
    let w = |s: &str| decide(&p, &Request::Write(Path::new(s))).decision;
    assert_eq!(w("/nonexistent-home/u/proj/src/main.rs"), Decision::Allow);
    assert_eq!(w("/nonexistent-tmp/run/t"), Decision::Allow);
    assert_eq!(w("/nonexistent-home/u/other"), Decision::Deny);
    assert_eq!(w("/etc/passwd"), Decision::Deny);
    for protected in [
        ".git/hooks/pre-commit",
        ".git/config",
        ".sandpit.toml",
        ".claude/settings.json",
        ".codex/x",
        ".vscode/tasks.json",
        ".idea/x",
        ".mcp.json",
    ] {
        assert_eq!(
            w(&format!("/nonexistent-home/u/proj/{protected}")),
            Decision::Deny,
            "{protected}"
        );
    }
    assert_eq!(w("/nonexistent-home/u/.sandpit/lib/x"), Decision::Deny);
    assert_eq!(w("/nonexistent-home/u/.bashrc"), Decision::Deny);
    assert_eq!(p.network.mode.value, NetMode::Filtered);
    assert!(decide(
        &p,
        &Request::Connect {
            host: "example.com",
            port: 443
        }
    )
    .is_denied());
    assert!(
        p.env.is_withheld("GITHUB_TOKEN")
            && p.env.is_withheld("AWS_SECRET_ACCESS_KEY")
            && !p.env.is_withheld("PATH")
    );
}

#[test]
fn layers_stack_and_every_entry_knows_its_file() {
    let mut o = LoadOptions::new(ctx());
    o.profile = Some(Source::new(
        Layer::Profile,
        "profiles/goose.toml",
        "[network]\nallow = [\"api.goose.example\"]\n",
    ));
    o.user = Some(Source::new(
        Layer::User,
        "/u/config.toml",
        "[network]\nallow = [\"github.com\"]\nblock = [\"gist.github.com\"]\n",
    ));
    o.flags = Some(Source::new(
        Layer::Flags,
        "command line",
        "[network]\nallow = [\"crates.io\"]\n",
    ));
    let p = load(&o).unwrap();
    let files: Vec<&str> = p
        .network
        .allow
        .iter()
        .map(|r| r.origin.file.as_str())
        .collect();
    assert_eq!(
        files,
        ["profiles/goose.toml", "/u/config.toml", "command line"]
    );
    let v = decide(
        &p,
        &Request::Connect {
            host: "gist.github.com",
            port: 443,
        },
    );
    assert!(v.is_denied());
    assert_eq!(v.rule.as_ref().unwrap().file, "/u/config.toml");
    assert_eq!(
        (
            v.rule.as_ref().unwrap().line,
            v.rule.as_ref().unwrap().column
        ),
        (3, 10)
    );
    assert!(decide(
        &p,
        &Request::Connect {
            host: "api.goose.example",
            port: 443
        }
    )
    .is_allowed());
}

fn project_over_user(user_text: &str, project: &str) -> Result<Policy, sandpit_policy::Error> {
    let mut o = LoadOptions::new(ctx());
    o.user = Some(Source::new(Layer::User, "user.toml", user_text));
    o.project = Some(Source::new(Layer::Project, "/p/.sandpit.toml", project));
    load(&o)
}

fn project_err(user_text: &str, project: &str, needle: &str) {
    let e = project_over_user(user_text, project).expect_err(project);
    let d = e.diagnostic().unwrap();
    assert_eq!(d.file, "/p/.sandpit.toml");
    assert!(d.message.contains(needle), "{d}");
    assert!(!d.hint.is_empty());
}

/// The boolean keys a project file may set one way only: shims on, never off where
/// the user's layers turned them on; `allow_local_binding` off, never on where they
/// left it off. Restating the value a lower layer set is no change, and allowed.
#[test]
fn a_project_file_sets_boolean_keys_one_way_only() {
    let (on, off) = ("[shims]\nenabled = true\n", "[shims]\nenabled = false\n");
    assert!(project_over_user("", on).unwrap().shims.enabled);
    assert!(project_over_user(on, on).unwrap().shims.enabled);
    assert!(!project_over_user(off, off).unwrap().shims.enabled);
    assert!(!project_over_user("", off).unwrap().shims.enabled);
    project_err(on, off, "a project file cannot turn shims off");
    let bind = |v: bool| format!("[network]\nallow_local_binding = {v}\n");
    let p = project_over_user("", &bind(false)).unwrap();
    let b = &p.network.allow_local_binding;
    assert!(!b.value);
    assert_eq!((b.origin.layer, b.origin.line), (Layer::Project, 2));
    let p = project_over_user(&bind(true), &bind(false)).unwrap();
    assert!(!p.network.allow_local_binding.value);
    let p = project_over_user(&bind(true), &bind(true)).unwrap();
    assert!(p.network.allow_local_binding.value);
    project_err(
        &bind(false),
        &bind(true),
        "may turn network.allow_local_binding off, never on",
    );
}

#[test]
fn ask_on_blocked_host_is_on_by_default_and_the_project_may_turn_it_off() {
    let p = project_over_user("", "").unwrap();
    assert!(p.network.ask_on_blocked_host.value);
    assert_eq!(p.network.ask_timeout.value, 30);
    let p = project_over_user(
        "[network]\nask_timeout = 20\n",
        "[network]\nask_on_blocked_host = false\nask_timeout = 5\n",
    )
    .unwrap();
    assert!(!p.network.ask_on_blocked_host.value);
    assert_eq!(p.network.ask_on_blocked_host.origin.line, 2);
    assert_eq!(p.network.ask_timeout.value, 5);
    let e = project_over_user("[network]\nask_timeout = 0\n", "").expect_err("0 s");
    assert!(e.diagnostic().unwrap().message.contains("from 1 to 3600"));
    // The user's own config may turn it off.
    let p = project_over_user("[network]\nask_on_blocked_host = false\n", "").unwrap();
    assert!(!p.network.ask_on_blocked_host.value);
}

#[test]
fn project_files_may_only_tighten() {
    let u = "[network]\nallow = [\"*.example.com\", \"github.com\"]\n";
    project_err(
        u,
        "[network]\nallow = [\"evil.test\"]\n",
        "network.allow entry \"evil.test\" widens",
    );
    project_err(
        u,
        "[files]\nallow_write = [\"/\"]\n",
        "files.allow_write entry \"/\" widens",
    );
    project_err(
        u,
        "[files]\nallow_read = [\"~/.ssh/id_rsa\"]\n",
        "files.allow_read entry",
    );
    project_err(u, "[network]\nmode = \"unrestricted\"\n", "looser");
    project_err(u, "[network]\nallow_local_binding = true\n", "never on");
    project_err(
        u,
        "[network]\nask_on_blocked_host = true\n",
        "may turn network.ask_on_blocked_host off, never on",
    );
    project_err(u, "[network]\nask_timeout = 60\n", "may only lower it");
    project_err(
        u,
        "[network.resolve]\n\"a.test\" = \"127.0.0.1\"\n",
        "network.resolve",
    );
    project_err(
        u,
        "[adversary]\non_error = \"allow\"\n",
        "adversary.on_error",
    );
    // Narrowing works: allow replaced by a covered subset, blocks appended, mode tightened.
    let p = project_over_user(u, "[network]\nallow = [\"api.example.com:443\"]\nblock = [\"x.example.com\"]\n[exec]\nblock = [\"rm -rf\"]\n[files]\nallow_write = [\"src\"]\n").unwrap();
    assert!(decide(
        &p,
        &Request::Connect {
            host: "api.example.com",
            port: 443
        }
    )
    .is_allowed());
    assert!(decide(
        &p,
        &Request::Connect {
            host: "github.com",
            port: 443
        }
    )
    .is_denied());
    assert!(decide(&p, &Request::Exec(&["rm".into(), "-rf".into(), "/".into()])).is_denied());
    assert!(decide(
        &p,
        &Request::Write(Path::new("/nonexistent-home/u/proj/README"))
    )
    .is_denied());
    assert!(decide(
        &p,
        &Request::Write(Path::new("/nonexistent-home/u/proj/src/a.rs"))
    )
    .is_allowed());
    let p = project_over_user(u, "[network]\nmode = \"offline\"\n").unwrap();
    assert!(decide(
        &p,
        &Request::Connect {
            host: "github.com",
            port: 443
        }
    )
    .is_denied());
}

#[test]
fn process_limit_defaults_lowers_and_refuses_nonsense() {
    let p = project_over_user("", "").unwrap();
    assert_eq!(p.limits.processes.value, 8192);
    assert!(p.limits.processes.origin.file.contains("default.toml"));
    // The user may raise it or lift it (0); a project may only lower it.
    let p = project_over_user("[limits]\nprocesses = 100000\n", "").unwrap();
    assert_eq!(p.limits.processes.value, 100000);
    assert_eq!(
        (
            p.limits.processes.origin.file.as_str(),
            p.limits.processes.origin.line
        ),
        ("user.toml", 2)
    );
    let p = project_over_user("[limits]\nprocesses = 0\n", "[limits]\nprocesses = 512\n").unwrap();
    assert_eq!(p.limits.processes.value, 512);
    project_err("", "[limits]\nprocesses = 9000\n", "may only lower it");
    project_err("", "[limits]\nprocesses = 0\n", "may only lower it");
    project_err(
        "[limits]\nprocesses = 64\n",
        "[limits]\nprocesses = 128\n",
        "raises the limit of 64 set in user.toml:2:",
    );
    for bad in ["-1", "1", "15"] {
        project_err(
            "",
            &format!("[limits]\nprocesses = {bad}\n"),
            "is not a limit",
        );
    }
    project_err("", "[limits]\nthreads = 5\n", "threads");
}

#[test]
fn unrestricted_has_sandlots_meaning() {
    // The table that sets it accepts no other key.
    for other in [
        "allow = [\"a.com\"]",
        "block = [\"a.com\"]",
        "allow_local_binding = false",
    ] {
        let d = err(&format!("[network]\nmode = \"unrestricted\"\n{other}\n"));
        assert_eq!(d.line, 3, "{d}");
        assert!(d.message.contains("cannot be combined"), "{d}");
    }
    // It removes host filtering only: metadata, files, exec and env rules stay.
    let p = user("[network]\nmode = \"unrestricted\"\n[exec]\nblock = [\"nc -e\"]\n").unwrap();
    assert!(decide(
        &p,
        &Request::Connect {
            host: "anything.example",
            port: 443
        }
    )
    .is_allowed());
    assert!(decide(
        &p,
        &Request::Connect {
            host: "169.254.169.254",
            port: 80
        }
    )
    .is_denied());
    assert!(decide(
        &p,
        &Request::Read(Path::new("/nonexistent-home/u/.ssh/id_rsa"))
    )
    .is_denied());
    assert!(decide(&p, &Request::Exec(&["nc".into(), "-e".into(), "sh".into()])).is_denied());
    assert!(!p.network.allow_local_binding.value);
    // While it is in force a project [network] table is rejected, even a tightening one.
    project_err(
        "[network]\nmode = \"unrestricted\"\n",
        "[network]\nblock = [\"x.com\"]\n",
        "not allowed while network.mode = \"unrestricted\"",
    );
    // A later layer that only adds hosts without re-enabling filtering is an error.
    let mut o = with(Layer::User, "[network]\nmode = \"unrestricted\"\n");
    o.flags = Some(Source::new(
        Layer::Flags,
        "command line",
        "[network]\nallow = [\"a.com\"]\n",
    ));
    let d = err_in(o);
    assert!(d.message.contains("no effect while"), "{d}");
}

/// UDP beyond sandpit's DNS responder: in unrestricted mode to the addresses a TCP
/// connection may reach (public ones), never the host's loopback, the LAN,
/// link-local or metadata addresses in any spelling; in filtered and offline mode,
/// and with network review, nowhere; every refusal names the rule.
#[test]
fn udp_opens_public_addresses_in_unrestricted_mode_only() {
    use sandpit_policy::decide_datagram;
    let at = |s: &str| s.parse::<std::net::SocketAddr>().unwrap();
    let public = [
        "1.2.3.4:443",
        "[2606:4700:4700::1111]:443",
        "[::ffff:8.8.8.8]:53",
    ];
    let closed = [
        "127.0.0.1:53",
        "[::1]:5353",
        "[::ffff:127.0.0.1]:53",
        "10.9.8.7:123",
        "192.168.1.1:53",
        "172.16.0.1:53",
        "[fc00::1]:53",
        "[fe80::1]:53",
        "169.254.169.254:80",
        "[::ffff:169.254.169.254]:80",
        "[fd00:ec2::254]:80",
        "100.100.100.200:80",
        "0.0.0.0:53",
        "[::]:53",
        // Multicast and broadcast would leave the host for its LAN.
        "224.0.0.251:5353",
        "239.255.255.250:1900",
        "255.255.255.255:67",
        "[ff02::fb]:5353",
        "[ff05::c]:1900",
    ];
    let p = user("[network]\nmode = \"unrestricted\"\n").unwrap();
    for a in public {
        let v = decide_datagram(&p, at(a), &[]);
        assert!(v.is_allowed(), "{a}: {v:?}");
        assert!(v.rule.is_some(), "{a}: {v:?}");
        assert!(
            v.reason
                .contains("allowed: network.mode = \"unrestricted\""),
            "{a}: {v:?}"
        );
    }
    for a in closed {
        let v = decide_datagram(&p, at(a), &[]);
        assert!(v.is_denied(), "{a}: {v:?}");
        assert!(v.reason.starts_with("blocked UDP to"), "{a}: {v:?}");
    }
    for (mode, word) in [("filtered", "filtered"), ("offline", "offline")] {
        let p = user(&format!("[network]\nmode = \"{mode}\"\n")).unwrap();
        for a in public.iter().chain(&closed) {
            let v = decide_datagram(&p, at(a), &[]);
            assert!(v.is_denied(), "{mode} {a}: {v:?}");
            assert!(
                v.reason.contains(word) && v.rule.is_some(),
                "{mode} {a}: {v:?}"
            );
        }
    }
    let p = user("[network]\nmode = \"unrestricted\"\n[adversary]\nprovider = \"openai\"\nmodel = \"m\"\nreview = [\"network\"]\n").unwrap();
    let v = decide_datagram(&p, at("1.2.3.4:443"), &[]);
    assert!(
        v.is_denied() && v.reason.contains("adversary.review"),
        "{v:?}"
    );
}

/// The machine's own addresses (every interface's, public ones included) are
/// refused in unrestricted mode as loopback is: a literal over TCP and UDP, every
/// spelling of it, and a name resolving to it; a public address that is not the
/// machine's stays open. In filtered mode an address the user names in
/// `network.allow` is theirs to open, as a LAN address is.
#[test]
fn the_machines_own_addresses_are_closed_as_loopback_is() {
    use sandpit_policy::decide::decide_connect;
    use sandpit_policy::{check_resolved, decide_connect_by, decide_datagram, Host};
    let own: Vec<std::net::IpAddr> = ["5.45.100.7", "2a01:4f8::7", "127.0.0.1", "::1"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let ip = |s: &str| Host::Ip(s.parse().unwrap());
    let sa = |s: &str| s.parse::<std::net::SocketAddr>().unwrap();
    let p = user("[network]\nmode = \"unrestricted\"\n").unwrap();
    for a in ["5.45.100.7", "2a01:4f8::7", "::ffff:5.45.100.7"] {
        let v = decide_connect(&p, &ip(a), 8080, &own);
        assert!(v.is_denied(), "{a}: {v:?}");
        assert!(v.reason.contains("this machine itself"), "{a}: {v:?}");
        assert!(v.rule.is_some(), "{a}: {v:?}");
        assert!(decide_connect_by(&p, &ip(a), 8080, None, &own).is_denied());
        // Without the machine's addresses (inside the sandbox), a public address.
        assert!(decide_connect(&p, &ip(a), 8080, &[]).is_allowed(), "{a}");
        let name = Host::Name("mine.example".into());
        let v = check_resolved(&p, &name, 443, a.parse().unwrap(), &own);
        assert!(
            v.is_denied() && v.reason.contains("this machine itself"),
            "{a}: {v:?}"
        );
        assert!(check_resolved(&p, &name, 443, a.parse().unwrap(), &[]).is_allowed());
    }
    for a in [
        "5.45.100.7:53",
        "[2a01:4f8::7]:443",
        "[::ffff:5.45.100.7]:53",
    ] {
        let v = decide_datagram(&p, sa(a), &own);
        assert!(v.is_denied(), "{a}: {v:?}");
        assert!(
            v.reason.starts_with("blocked UDP to") && v.reason.contains("this machine itself"),
            "{a}: {v:?}"
        );
        assert!(decide_datagram(&p, sa(a), &[]).is_allowed(), "{a}");
    }
    // Its neighbours on the same networks are other machines.
    for a in ["5.45.100.8", "2a01:4f8::8"] {
        assert!(decide_connect(&p, &ip(a), 8080, &own).is_allowed(), "{a}");
        assert!(check_resolved(&p, &ip(a), 8080, a.parse().unwrap(), &own).is_allowed());
        let to = std::net::SocketAddr::new(a.parse().unwrap(), 53);
        assert!(decide_datagram(&p, to, &own).is_allowed(), "{a}");
    }
    // Filtered: named in network.allow, the user's choice; otherwise refused.
    let p = user("[network]\nallow = [\"5.45.100.7:8080\", \"mine.example\"]\n").unwrap();
    assert!(decide_connect(&p, &ip("5.45.100.7"), 8080, &own).is_allowed());
    assert!(check_resolved(
        &p,
        &ip("5.45.100.7"),
        8080,
        "5.45.100.7".parse().unwrap(),
        &own
    )
    .is_allowed());
    let name = Host::Name("mine.example".into());
    assert!(check_resolved(&p, &name, 443, "2a01:4f8::7".parse().unwrap(), &own).is_denied());
    assert!(check_resolved(&p, &name, 443, "2a01:4f8::8".parse().unwrap(), &own).is_allowed());
}

#[test]
fn reads_prefer_the_more_specific_rule() {
    let p =
        user("[files]\nblock_read = [\"~/secret\"]\nallow_read = [\"~/secret/public\"]\n").unwrap();
    assert!(decide(
        &p,
        &Request::Read(Path::new("/nonexistent-home/u/secret/public/a"))
    )
    .is_allowed());
    assert!(decide(
        &p,
        &Request::Read(Path::new("/nonexistent-home/u/secret/private"))
    )
    .is_denied());
    // Same depth: deny wins.
    let p = user("[files]\nblock_read = [\"~/s\"]\nallow_read = [\"~/s\"]\n").unwrap();
    assert!(decide(&p, &Request::Read(Path::new("/nonexistent-home/u/s/x"))).is_denied());
    // Writes: deny wins even when the allow is deeper.
    let p = user("[files]\nblock_write = [\"/opt\"]\nallow_write = [\"/opt/app\"]\n").unwrap();
    assert!(decide(&p, &Request::Write(Path::new("/opt/app/x"))).is_denied());
}

#[test]
fn snapshot_round_trips() {
    let p = user("[exec]\nblock = [\"re:nc\\\\s+-e\", \"curl --data\"]\n[network]\nallow = [\"a.example\"]\n").unwrap();
    let back = Policy::from_snapshot(&p.snapshot()).unwrap();
    assert_eq!(back, p);
    assert!(!back.learn);
    let mut learning = p.clone();
    learning.learn = true;
    assert!(Policy::from_snapshot(&learning.snapshot()).unwrap().learn);
    assert!(decide(&back, &Request::Exec(&["nc".into(), "-e".into()])).is_denied());
    assert!(Policy::from_snapshot(b"garbage").is_err());
    let mut bytes = p.snapshot();
    bytes.truncate(bytes.len() / 2);
    assert!(Policy::from_snapshot(&bytes).is_err());
    // Every shorter prefix is refused, and so is anything appended.
    let whole = p.snapshot();
    for n in 0..whole.len() {
        assert!(
            Policy::decode_snapshot(&whole[..n]).is_err(),
            "prefix of {n} bytes"
        );
    }
    let mut longer = whole.clone();
    longer.push(0);
    assert!(Policy::decode_snapshot(&longer).is_err());
    // Snapshots of earlier formats are foreign: JSON (v1), postcard before
    // `[limits]` (v2), before the launcher's learn flag (v3).
    assert!(Policy::from_snapshot(b"sandpit-policy-v1\n{}").is_err());
    for old in [&b"sandpit-policy-v2\n"[..], b"sandpit-policy-v3\n"] {
        let mut bytes = old.to_vec();
        bytes.extend_from_slice(&p.snapshot()[b"sandpit-policy-v5\n".len()..]);
        assert!(Policy::from_snapshot(&bytes).is_err());
    }
}

#[test]
fn loopback_services_are_exactly_the_listed_ports() {
    use sandpit_policy::loopback_service;
    let p = user(
        "[network]\nallow = [\"localhost:11434\", \"127.0.0.2:8080\", \"[::1]:9000\", \"api.example\"]\nblock = [\"localhost:11435\"]\n",
    )
    .unwrap();
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    assert!(loopback_service(&p, ip("127.0.0.1"), 11434).is_some());
    assert!(loopback_service(&p, ip("::1"), 11434).is_some());
    assert!(loopback_service(&p, ip("::ffff:127.0.0.1"), 11434).is_some());
    // localhost stands for 127.0.0.1 and ::1, not the whole of 127/8.
    assert!(loopback_service(&p, ip("127.0.0.3"), 11434).is_none());
    assert!(loopback_service(&p, ip("127.0.0.1"), 11433).is_none());
    assert!(loopback_service(&p, ip("127.0.0.2"), 8080).is_some());
    assert!(loopback_service(&p, ip("127.0.0.1"), 8080).is_none());
    assert!(loopback_service(&p, ip("::1"), 9000).is_some());
    assert!(loopback_service(&p, ip("127.0.0.1"), 9000).is_none());
    assert!(loopback_service(&p, ip("10.0.0.1"), 11434).is_none());
    let blocked =
        user("[network]\nallow = [\"localhost:11434\"]\nblock = [\"127.0.0.1:11434\"]\n").unwrap();
    assert!(loopback_service(&blocked, ip("127.0.0.1"), 11434).is_none());
    assert!(loopback_service(&blocked, ip("::1"), 11434).is_some());
    let offline = user("[network]\nmode = \"offline\"\nallow = [\"localhost:11434\"]\n").unwrap();
    assert!(loopback_service(&offline, ip("127.0.0.1"), 11434).is_none());
}

#[test]
fn an_allowed_name_resolving_to_loopback_needs_the_port_listed() {
    use sandpit_policy::{check_resolved, Host};
    let p = user("[network]\nallow = [\"sneaky.example\", \"localhost:11434\"]\n").unwrap();
    let lo = "127.0.0.1".parse().unwrap();
    let name = |s: &str| Host::Name(s.into());
    assert!(check_resolved(&p, &name("sneaky.example"), 11434, lo, &[]).is_denied());
    assert!(check_resolved(&p, &name("sneaky.example"), 80, lo, &[]).is_denied());
    assert!(check_resolved(&p, &name("localhost"), 11434, lo, &[]).is_allowed());
    assert!(
        check_resolved(&p, &name("localhost"), 11434, "::1".parse().unwrap(), &[]).is_allowed()
    );
    assert!(check_resolved(&p, &name("localhost"), 11435, lo, &[]).is_denied());
}

/// `localhost` stands for 127.0.0.1 and ::1, as the kernel layer's relay listeners
/// do: not for the rest of 127.0.0.0/8, whether asked by address or resolved.
#[test]
fn localhost_means_127_0_0_1_and_1_only() {
    use sandpit_policy::{check_resolved, Host};
    let p = user("[network]\nallow = [\"localhost:9999\"]\n").unwrap();
    let connect = |host: &str| decide(&p, &Request::Connect { host, port: 9999 });
    let resolved = |addr: &str| {
        check_resolved(
            &p,
            &Host::Name("localhost".into()),
            9999,
            addr.parse().unwrap(),
            &[],
        )
    };
    for a in ["127.0.0.1", "::1", "::ffff:127.0.0.1", "localhost"] {
        assert!(connect(a).is_allowed(), "{a}: {}", connect(a).reason);
    }
    for a in ["127.0.0.1", "::1", "::ffff:127.0.0.1"] {
        assert!(resolved(a).is_allowed(), "{a}: {}", resolved(a).reason);
    }
    for a in [
        "127.0.0.3",
        "127.1.2.3",
        "::ffff:127.0.0.3",
        "127.2",
        "2130706434",
    ] {
        assert!(connect(a).is_denied(), "{a}: {}", connect(a).reason);
    }
    for a in ["127.0.0.3", "127.1.2.3", "::ffff:127.1.2.3"] {
        assert!(resolved(a).is_denied(), "{a}: {}", resolved(a).reason);
    }
    // An address entry still names exactly its address.
    let p = user("[network]\nallow = [\"127.0.0.3:9999\"]\n").unwrap();
    let connect = |host: &str| decide(&p, &Request::Connect { host, port: 9999 });
    assert!(connect("127.0.0.3").is_allowed());
    assert!(connect("127.0.0.1").is_denied());
    let addr = "127.0.0.3".parse().unwrap();
    assert!(check_resolved(&p, &Host::Name("x.localhost".into()), 9999, addr, &[]).is_allowed());
}

#[test]
fn a_later_layer_carves_out_the_exact_path_an_earlier_one_blocks() {
    let auth = Path::new("/nonexistent-home/u/.pi/agent/auth.json");
    // The built-in default blocks pi's auth file; pi's profile carves it out.
    let mut o = LoadOptions::new(ctx());
    o.profile = Some(Source::new(
        Layer::Profile,
        "profiles/pi.toml",
        "[files]\nallow_read = [\"~/.pi/agent/auth.json\"]\n",
    ));
    let p = load(&o).unwrap();
    let v = decide(&p, &Request::Read(auth));
    assert_eq!(v.decision, Decision::Allow, "{}", v.reason);
    assert_eq!(v.rule.unwrap().file, "profiles/pi.toml");
    // The same carve-out in your own config works too (the denial's advice).
    let p = user("[files]\nallow_read = [\"~/.aws\"]\n").unwrap();
    let v = decide(
        &p,
        &Request::Read(Path::new("/nonexistent-home/u/.aws/credentials")),
    );
    assert_eq!(v.decision, Decision::Allow, "{}", v.reason);
    // A block in a later layer beats a profile's allow of the same path.
    o.user = Some(Source::new(
        Layer::User,
        "/u/config.toml",
        "[files]\nblock_read = [\"~/.pi/agent/auth.json\"]\n",
    ));
    let p = load(&o).unwrap();
    let v = decide(&p, &Request::Read(auth));
    assert_eq!(v.decision, Decision::Deny, "{}", v.reason);
    assert_eq!(v.rule.unwrap().file, "/u/config.toml");
    // Same layer, same path: the block stands.
    let p = user("[files]\nblock_read = [\"~/x\"]\nallow_read = [\"~/x\"]\n").unwrap();
    let v = decide(&p, &Request::Read(Path::new("/nonexistent-home/u/x")));
    assert_eq!(v.decision, Decision::Deny, "{}", v.reason);
}

#[test]
fn a_project_file_never_carves_out_what_lower_layers_block() {
    let mut o = LoadOptions::new(ctx());
    o.profile = Some(Source::new(
        Layer::Profile,
        "profiles/claude.toml",
        "[files]\nallow_read = [\"~/.claude/.credentials.json\"]\n",
    ));
    o.user = Some(Source::new(
        Layer::User,
        "/u/config.toml",
        "[files]\nblock_read = [\"~/.claude/.credentials.json\"]\nallow_read = [\"~/.config\"]\n",
    ));
    // The same path the user blocked over the profile's carve-out.
    o.project = Some(Source::new(
        Layer::Project,
        "/u/proj/.sandpit.toml",
        "[files]\nallow_read = [\"~/.claude/.credentials.json\"]\n",
    ));
    let d = err_in(o.clone());
    assert!(d.message.contains("widens the policy"), "{d}");
    // A default block inside an allow the user granted, at the same depth…
    o.project = Some(Source::new(
        Layer::Project,
        "/u/proj/.sandpit.toml",
        "[files]\nallow_read = [\"~/.config/gh\"]\n",
    ));
    let d = err_in(o.clone());
    assert!(d.message.contains("widens the policy"), "{d}");
    // …or deeper than it.
    o.project = Some(Source::new(
        Layer::Project,
        "/u/proj/.sandpit.toml",
        "[files]\nallow_read = [\"~/.config/gh/hosts.yml\"]\n",
    ));
    let d = err_in(o.clone());
    assert!(d.message.contains("widens the policy"), "{d}");
    // Narrowing is fine: keep only one readable directory of the user's.
    o.project = Some(Source::new(
        Layer::Project,
        "/u/proj/.sandpit.toml",
        "[files]\nallow_read = [\"~/.config/nvim\"]\n",
    ));
    let p = load(&o).unwrap();
    let v = decide(
        &p,
        &Request::Read(Path::new("/nonexistent-home/u/.claude/.credentials.json")),
    );
    assert_eq!(v.decision, Decision::Deny, "{}", v.reason);
}

#[test]
fn writes_to_the_runs_private_tmpfs_are_not_reviewed() {
    let mut p = user(
        "[adversary]\nmodel = \"m\"\nreview = [\"write\"]\n[files]\nallow_write = [\"/nonexistent-data\"]\n",
    )
    .unwrap();
    let mut origin = sandpit_policy::Origin::builtin("files.allow_write", "/tmp");
    origin.file = sandpit_policy::PRIVATE_TMPFS.into();
    p.files.allow_write.push(sandpit_policy::Rule {
        value: PathBuf::from("/tmp"),
        origin,
    });
    let tmp = decide(&p, &Request::Write(Path::new("/tmp/sem.x")));
    assert_eq!(tmp.decision, Decision::Allow, "{}", tmp.reason);
    let data = decide(&p, &Request::Write(Path::new("/nonexistent-data/f")));
    assert_eq!(data.decision, Decision::Review, "{}", data.reason);
}

/// An agent profile makes the agent's own state writable, never what the agent runs
/// later (outside the sandbox too): a hook, a setting that names a command, a
/// directory it takes programs from.
#[test]
fn profiles_keep_what_the_agent_runs_later_read_only() {
    let runs_later: &[(&str, &[&str], &str)] = &[
        (
            "pi",
            &[
                ".pi/agent/settings.json",
                ".pi/agent/extensions/x.ts",
                ".pi/agent/models.json",
                ".pi/agent/bin/rg",
            ],
            ".pi/agent/sessions/s.jsonl",
        ),
        (
            "claude",
            &[
                ".claude/settings.json",
                ".claude/hooks/h.sh",
                ".claude/commands/c.md",
                ".claude/agents/a.md",
            ],
            ".claude/projects/p.jsonl",
        ),
    ];
    for (name, protected, state) in runs_later {
        let (_, text) = sandpit_policy::BUILTIN_PROFILES
            .iter()
            .find(|(n, _)| n == name)
            .unwrap();
        let mut o = LoadOptions::new(ctx());
        o.profile = Some(Source::new(
            Layer::Profile,
            format!("profiles/{name}.toml"),
            *text,
        ));
        let p = load(&o).unwrap();
        let home = Path::new("/nonexistent-home/u");
        for f in *protected {
            let v = decide(&p, &Request::Write(&home.join(f)));
            assert!(v.is_denied(), "{name}: {f} is writable: {}", v.reason);
        }
        let v = decide(&p, &Request::Write(&home.join(state)));
        assert!(v.is_allowed(), "{name}: its state {state}: {}", v.reason);
    }
}

/// `decide` on an environment variable, for the command or a program it starts.
fn env(p: &Policy, name: &str, program: Option<&str>) -> sandpit_policy::Verdict {
    let to = match program {
        Some(p) => sandpit_policy::EnvTo::Spawned(Path::new(p)),
        None => sandpit_policy::EnvTo::Command,
    };
    decide(p, &Request::Env { name, to })
}

#[test]
fn withheld_variables_never_enter_and_the_agent_keeps_only_its_own() {
    let p = user(
        "[env]\nwithhold = [\"*_TOKEN\", \"*_API_KEY\"]\nagent = [\"OPENAI_API_KEY\"]\n\
         agent_programs = [\"codex\", \"*/vendor/*/agent-bin\"]\n\
         [files]\nallow_write = [\".\", \"~/tools\"]\n",
    )
    .unwrap();
    // Not withheld: reaches everything.
    assert!(env(&p, "PATH", None).is_allowed());
    assert!(env(&p, "PATH", Some("/usr/bin/sh")).is_allowed());
    // Withheld, not the agent's: reaches nothing, named by its rule.
    let v = env(&p, "GH_TOKEN", None);
    assert!(v.is_denied(), "{v:?}");
    assert_eq!(v.rule.as_ref().unwrap().entry, "*_TOKEN");
    assert!(
        v.reason.contains("removed before the command starts"),
        "{v:?}"
    );
    assert!(env(&p, "GH_TOKEN", Some("/usr/bin/codex")).is_denied());
    assert!(env(&p, "ANTHROPIC_API_KEY", None).is_denied());
    // The agent's own: the command keeps it, with the rule that keeps it.
    let v = env(&p, "OPENAI_API_KEY", None);
    assert!(v.is_allowed(), "{v:?}");
    assert_eq!(v.rule.as_ref().unwrap().entry, "OPENAI_API_KEY");
    // A program it starts: only the agent's programs, by name or path glob, where
    // the sandbox cannot write them.
    for (program, kept) in [
        ("/usr/bin/sh", false),
        ("/usr/bin/python3", false),
        ("/usr/lib/node_modules/x/codex", true),
        ("/usr/lib/x/vendor/linux/agent-bin", true),
        ("/usr/lib/x/vendor/agent-bin", false),
        ("/usr/bin/codex-helper", false),
        // Inside writable roots: the sandbox could have planted it.
        ("/nonexistent-home/u/proj/codex", false),
        ("/nonexistent-home/u/tools/vendor/x/agent-bin", false),
        ("/nonexistent-tmp/run/codex", false),
    ] {
        let v = env(&p, "OPENAI_API_KEY", Some(program));
        assert_eq!(v.is_allowed(), kept, "{program}: {v:?}");
        if !kept {
            assert_eq!(v.rule.as_ref().unwrap().entry, "*_API_KEY", "{program}");
        }
    }
    // An agent rule for a variable that is not withheld changes nothing.
    let p = user("[env]\nagent = [\"PLAIN\"]\n").unwrap();
    assert!(env(&p, "PLAIN", Some("/usr/bin/sh")).is_allowed());
}

#[test]
fn only_the_users_own_layers_name_what_the_agent_keeps() {
    for key in [
        "agent = [\"OPENAI_API_KEY\"]",
        "agent_programs = [\"codex\"]",
    ] {
        project_err(
            "",
            &format!("[env]\n{key}\n"),
            "cannot be set by a project file",
        );
    }
    // A project may still withhold more.
    let p = project_over_user(
        "[env]\nagent = [\"MY_KEY\"]\n",
        "[env]\nwithhold = [\"MY_*\"]\n",
    )
    .unwrap();
    assert!(env(&p, "MY_OTHER", None).is_denied());
    assert!(env(&p, "MY_KEY", None).is_allowed());
    for (text, needle) in [
        ("agent = [\"A-B\"]", "env.agent entry"),
        ("agent_programs = [\"bin/codex\"]", "a relative path"),
        ("agent_programs = [\"*\"]", "names every program"),
        ("agent_programs = [\"*/*\"]", "names every program"),
        ("agent_programs = [\"\"]", "an empty name"),
    ] {
        let d = err(&format!("[env]\n{text}\n"));
        assert_eq!(d.line, 2, "{d}");
        assert!(d.message.contains(needle), "{text}: {d}");
        assert!(!d.hint.is_empty());
    }
}

#[test]
fn every_agent_profile_binds_its_key_to_its_provider_and_keeps_nothing_else() {
    for (name, key, host) in [
        ("codex", "OPENAI_API_KEY", "api.openai.com"),
        ("codex", "CODEX_API_KEY", "api.openai.com"),
        ("claude", "ANTHROPIC_API_KEY", "api.anthropic.com"),
        ("claude", "ANTHROPIC_AUTH_TOKEN", "api.anthropic.com"),
        (
            "gemini",
            "GEMINI_API_KEY",
            "generativelanguage.googleapis.com",
        ),
        (
            "gemini",
            "GOOGLE_API_KEY",
            "generativelanguage.googleapis.com",
        ),
        ("opencode", "OPENAI_API_KEY", "api.openai.com"),
        ("aider", "OPENAI_API_KEY", "api.openai.com"),
        ("goose", "ANTHROPIC_API_KEY", "api.anthropic.com"),
        ("pi", "ANTHROPIC_API_KEY", "api.anthropic.com"),
        ("mini", "OPENROUTER_API_KEY", "openrouter.ai"),
    ] {
        let text = sandpit_policy::BUILTIN_PROFILES
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no profile {name}"))
            .1;
        let mut p = load(&with(Layer::Profile, text)).unwrap();
        // A credential: the sentinel for every program, the real value for the
        // provider's host alone.
        let c = p
            .credential_for_env(key)
            .unwrap_or_else(|| panic!("{name}: no credential for {key}"));
        assert_eq!(c.hosts, [host], "{name} {key}");
        assert_eq!(c.source_var(), Some(key));
        assert!(!c.required);
        let bash = Some("/usr/bin/bash");
        assert!(env(&p, key, None).is_allowed(), "{name} keeps {key}");
        assert!(
            env(&p, key, bash).is_allowed(),
            "{name}: bash sees the sentinel"
        );
        assert!(
            env(&p, key, bash).reason.contains("holds the sentinel"),
            "{name} {key}"
        );
        for other in [
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "NPM_TOKEN",
        ] {
            assert!(env(&p, other, None).is_denied(), "{name} keeps {other}");
        }
        // Set aside (a plain-HTTP base URL): the agent keeps the key, bash does not.
        let n = c.name.clone();
        p.skip_credential(&n, "test".into());
        assert!(env(&p, key, None).is_allowed(), "{name} keeps {key}");
        assert!(env(&p, key, bash).is_denied(), "{name}: bash gets {key}");
    }
}

#[test]
fn devices_come_from_the_users_own_layers_only_and_lie_under_dev() {
    let p = user("[files]\ndevices = [\"/dev/kvm\", \"/dev/dri\", \"/dev/kvm\"]\n").unwrap();
    let names: Vec<&Path> = p.files.devices.iter().map(|r| r.value.as_path()).collect();
    assert_eq!(names, [Path::new("/dev/kvm"), Path::new("/dev/dri")]);
    assert_eq!(p.files.devices[0].origin.key, "files.devices");
    // Nothing by default.
    assert!(user("").unwrap().files.devices.is_empty());
    project_err(
        "[files]\ndevices = [\"/dev/kvm\"]\n",
        "[files]\ndevices = [\"/dev/kvm\"]\n",
        "files.devices cannot be set by a project file",
    );
    for bad in [
        "/dev",
        "/dev/",
        "/etc/passwd",
        "dev/kvm",
        "/dev/../etc/shadow",
        "/dev/./kvm",
        "/dev/pts",
        "/dev/pts/0",
        "/dev/shm",
        "/dev/ptmx",
        "/dev/fd/3",
        "/dev/stdin",
        "/devices/x",
    ] {
        let d = err(&format!("[files]\ndevices = [\"{bad}\"]\n"));
        assert_eq!(d.line, 2, "{bad}: {d}");
        assert!(d.message.contains("is no device under /dev"), "{bad}: {d}");
        assert!(!d.hint.is_empty());
    }
}

#[test]
fn listening_needs_allow_local_binding_and_a_loopback_address_with_a_port() {
    use sandpit_policy::{decide, Request};
    let listen = |p: &Policy, a: &str| decide(p, &Request::Listen(a.parse().unwrap()));
    let off = user("").unwrap();
    for a in [
        "127.0.0.1:8000",
        "[::1]:8000",
        "0.0.0.0:8000",
        "127.0.0.1:0",
    ] {
        let v = listen(&off, a);
        assert!(v.is_denied(), "{a}: {v:?}");
        assert!(
            v.reason.contains("allow_local_binding = false"),
            "{a}: {v:?}"
        );
        assert_eq!(v.rule.unwrap().key, "network.allow_local_binding");
    }
    let on = user("[network]\nallow_local_binding = true\n").unwrap();
    for a in [
        "127.0.0.1:8000",
        "127.9.9.9:1",
        "[::1]:8000",
        "[::ffff:127.0.0.1]:8000",
    ] {
        assert!(listen(&on, a).is_allowed(), "{a}");
    }
    for a in [
        "0.0.0.0:8000",
        "[::]:8000",
        "10.0.0.1:8000",
        "[::ffff:10.0.0.1]:8000",
        "127.0.0.1:0",
        "[::1]:0",
    ] {
        let v = listen(&on, a);
        assert!(v.is_denied(), "{a}: {v:?}");
        assert!(v.reason.contains("loopback addresses only"), "{a}: {v:?}");
    }
    assert!(listen(&on, "127.0.0.1:0")
        .reason
        .contains("an unbound socket"));
}

#[test]
fn a_write_to_an_unreadable_path_is_refused_as_a_write() {
    use sandpit_policy::{decide, Request};
    let p = user("").unwrap();
    let key = Path::new("/nonexistent-home/u/.ssh/id_rsa");
    let v = decide(&p, &Request::Write(key));
    assert!(v.is_denied());
    assert!(
        v.reason.starts_with("blocked write to ~/.ssh/id_rsa"),
        "{}",
        v.reason
    );
    assert_eq!(v.rule.unwrap().key, "files.block_read");
    assert!(decide(&p, &Request::Read(key))
        .reason
        .starts_with("blocked read of ~/.ssh/id_rsa"));
}

#[test]
fn isolation_switches_are_off_by_default_and_only_the_users_to_turn_on() {
    let off = user("").unwrap();
    assert!(!off.isolation.nested_user_namespaces());
    assert!(!off.isolation.macos_trustd());
    assert!(off.isolation.unix_sockets.is_empty());
    let on = user(
        "[isolation]\nnested_user_namespaces = true\nmacos_trustd = true\n\
         unix_sockets = [\"~/.docker/run/docker.sock\", \"/run/user/1000/ssh.sock\"]\n",
    )
    .unwrap();
    let origin = on.isolation.nested_user_namespaces.as_ref().unwrap();
    assert_eq!(
        (origin.key.as_str(), origin.line),
        ("isolation.nested_user_namespaces", 2)
    );
    assert!(on.isolation.macos_trustd());
    let socks: Vec<&Path> = on
        .isolation
        .unix_sockets
        .iter()
        .map(|r| r.value.as_path())
        .collect();
    assert_eq!(
        socks,
        [
            Path::new("/nonexistent-home/u/.docker/run/docker.sock"),
            Path::new("/run/user/1000/ssh.sock")
        ]
    );
    // A later layer's `false` turns a switch off again; the other stays.
    let mut o = with(
        Layer::Profile,
        "[isolation]\nnested_user_namespaces = true\nmacos_trustd = true\n",
    );
    o.user = Some(Source::new(
        Layer::User,
        "user.toml",
        "[isolation]\nmacos_trustd = false\n",
    ));
    let p = load(&o).unwrap();
    assert!(p.isolation.nested_user_namespaces() && !p.isolation.macos_trustd());
    // A project file names none of them, not even to turn one off.
    for key in [
        "nested_user_namespaces = true",
        "nested_user_namespaces = false",
        "macos_trustd = true",
        "unix_sockets = [\"/var/run/docker.sock\"]",
    ] {
        project_err(
            "",
            &format!("[isolation]\n{key}\n"),
            "cannot be in a project file",
        );
    }
    let d = err("[isolation]\nnested = true\n");
    assert_eq!(d.line, 2, "{d}");
}

#[test]
fn unix_sockets_the_run_may_connect_to() {
    let p = user(
        "[isolation]\nunix_sockets = [\"~/.docker/run/docker.sock\", \"/srv/sockets\"]\n\
         [files]\nblock_read = [\"~/.docker\"]\n",
    )
    .unwrap();
    let unix = |path: &str, host: bool| {
        decide(
            &p,
            &Request::Unix {
                path: Path::new(path),
                host,
            },
        )
    };
    let home = "/nonexistent-home/u";
    // (path, bound by a program outside, allowed, a word of the reason)
    for (path, host, allowed, why) in [
        // Named (or a directory holding it): allowed even inside an unreadable one.
        (
            format!("{home}/.docker/run/docker.sock"),
            true,
            true,
            "isolation.unix_sockets",
        ),
        (
            "/srv/sockets/a/b.sock".into(),
            true,
            true,
            "isolation.unix_sockets",
        ),
        (format!("{home}/.docker/other.sock"), false, false, "hidden"),
        // sandpit's own, this run's.
        (
            format!("{home}/.sandpit/run/1/audit.sock"),
            true,
            true,
            "sandpit's own",
        ),
        // The run's own under a writable root; a host program's there is not.
        (
            format!("{home}/proj/dev.sock"),
            false,
            true,
            "writable root",
        ),
        (
            format!("{home}/proj/dev.sock"),
            true,
            false,
            "outside the sandbox listens",
        ),
        (
            "/nonexistent-tmp/run/x.sock".into(),
            false,
            true,
            "writable root",
        ),
        // Outside the writable roots only host programs make sockets.
        (
            format!("{home}/.local/share/d.sock"),
            false,
            false,
            "outside the writable roots",
        ),
        (
            "/var/run/docker.sock".into(),
            true,
            false,
            "outside the sandbox listens",
        ),
        (
            "/srv/socketsx".into(),
            false,
            false,
            "outside the writable roots",
        ),
    ] {
        let v = unix(&path, host);
        assert_eq!(v.is_allowed(), allowed, "{path} host={host}: {v:?}");
        assert!(v.reason.contains(why), "{path}: {v:?}");
        if !allowed {
            assert!(v.reason.contains("[isolation]"), "{path}: {v:?}");
        }
    }
    assert_eq!(
        unix(&format!("{home}/.docker/run/docker.sock"), true)
            .rule
            .unwrap()
            .key,
        "isolation.unix_sockets"
    );
    // Normalized first, as every path request.
    assert!(unix(&format!("{home}/proj/../.docker/run/./docker.sock"), true).is_allowed());
}

#[test]
fn globs_in_path_lists_are_checked_and_decided() {
    let p = user(
        "[files]\nblock_read = [\"**/.env\", \"~/.config/*/credentials*\"]\n\
         allow_read = [\"docs/**/.env\"]\nblock_write = [\"**/*.pem\"]\n",
    )
    .unwrap();
    let read = |path: &str| decide(&p, &Request::Read(Path::new(path)));
    let write = |path: &str| decide(&p, &Request::Write(Path::new(path)));
    let ws = "/nonexistent-home/u/proj";
    let v = read(&format!("{ws}/a/b/.env"));
    assert!(v.is_denied(), "{v:?}");
    assert_eq!(v.rule.as_ref().unwrap().entry, "**/.env");
    assert!(read(&format!("{ws}/.env")).is_denied());
    assert!(read(&format!("{ws}/.env.example")).is_allowed());
    // The carve-out names more before its wildcard: it wins at the same depth.
    assert!(read(&format!("{ws}/docs/x/.env")).is_allowed());
    assert!(read("/nonexistent-home/u/.config/app/credentials.json").is_denied());
    assert!(read("/nonexistent-home/u/.config/app/settings.json").is_allowed());
    assert!(write(&format!("{ws}/k/key.pem")).is_denied());
    assert!(write(&format!("{ws}/k/key.pemx")).is_allowed());
    // `**` is a whole component.
    let d = err("[files]\nblock_read = [\"~/a**/x\"]\n");
    assert_eq!(d.line, 2, "{d}");
    assert!(d.message.contains("whole component"), "{d}");
    // A project may add globs to what it blocks, never carve one out.
    let p = project_over_user("", "[files]\nblock_read = [\"**/*.key\"]\n").unwrap();
    assert!(decide(&p, &Request::Read(Path::new(&format!("{ws}/a/x.key")))).is_denied());
    project_err(
        "[files]\nblock_read = [\"~/data\"]\n",
        "[files]\nallow_read = [\"~/data/*.csv\"]\n",
        "is a glob",
    );
}

#[test]
fn a_resolve_entry_vouches_for_its_own_name_and_addresses_only() {
    use sandpit_policy::{check_resolved, Host};
    let p = user(
        "[network]\nallow = [\"a.test\", \"b.test\"]\n[network.resolve]\n\"a.test\" = \"10.0.0.1\"\n",
    )
    .unwrap();
    let name = |n: &str| Host::Name(n.into());
    let lan = "10.0.0.1".parse().unwrap();
    assert!(check_resolved(&p, &name("a.test"), 80, lan, &[]).is_allowed());
    // Another allowed name answering with a.test's address: a private answer.
    assert!(check_resolved(&p, &name("b.test"), 80, lan, &[]).is_denied());
    // a.test answering with another private address.
    assert!(check_resolved(&p, &name("a.test"), 80, "10.0.0.2".parse().unwrap(), &[]).is_denied());
}

/// A glob's match through a link to a directory (a dotfile manager's layout) is
/// held where it really is, as every layer judges resolved paths.
#[test]
fn a_glob_holds_its_matches_through_links_where_they_really_are() {
    let d = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(d.path()).unwrap();
    std::fs::create_dir_all(home.join("dots/app")).unwrap();
    std::fs::write(home.join("dots/app/credentials.json"), "x").unwrap();
    std::fs::create_dir_all(home.join(".config")).unwrap();
    std::os::unix::fs::symlink(home.join("dots/app"), home.join(".config/app")).unwrap();
    let mut o = LoadOptions::new(Context {
        home: home.clone(),
        workspace: home.join("proj"),
        scratch: "/nonexistent-tmp/run".into(),
        state_dir: home.join(".sandpit"),
    });
    o.user = Some(Source::new(
        Layer::User,
        "user.toml",
        "[files]\nblock_read = [\"~/.config/*/credentials*\"]\n",
    ));
    let p = load(&o).unwrap();
    let real = home.join("dots/app/credentials.json");
    let v = decide(&p, &Request::Read(&real));
    assert!(v.is_denied(), "{v:?}");
    assert_eq!(v.rule.unwrap().entry, "~/.config/*/credentials*");
    assert!(decide(&p, &Request::Read(&home.join("dots/app/other"))).is_allowed());
}

/// The loader keeps each glob's walk with the policy, for the kernel layer (two
/// layers naming one glob share it), and never in the interposer's snapshot.
#[test]
fn a_glob_s_walk_is_kept_with_the_policy_and_not_in_the_snapshot() {
    let d = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(d.path()).unwrap();
    let secret = home.join("proj/sub/.env-with-a-long-name-to-find-in-bytes");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "x").unwrap();
    let mut o = LoadOptions::new(Context {
        home: home.clone(),
        workspace: home.join("proj"),
        scratch: "/nonexistent-tmp/run".into(),
        state_dir: home.join(".sandpit"),
    });
    let text = "[files]\nblock_read = [\"**/.env*\"]\n";
    o.profile = Some(Source::new(Layer::Profile, "profile.toml", text));
    o.user = Some(Source::new(Layer::User, "user.toml", text));
    let p = load(&o).unwrap();
    let glob = home.join("proj/**/.env*");
    assert_eq!(p.glob_matches.get(&glob), Some(&Ok(vec![secret.clone()])));
    assert_eq!(p.glob_matches.get(&home.join("proj/**/x")), None);
    let snap = p.snapshot();
    let name = b"-with-a-long-name-to-find-in-bytes";
    assert!(!snap.windows(name.len()).any(|w| w == name));
    // The walk is not policy: a policy read back from its snapshot is the same.
    let back = Policy::from_snapshot(&snap).unwrap();
    assert_eq!(back.glob_matches.get(&glob), None);
    assert_eq!(back, p);
    // The snapshot is the same bytes without the record: it adds none.
    let mut bare = p.clone();
    bare.glob_matches = Default::default();
    assert_eq!(bare.snapshot(), snap);
}

#[test]
fn audit_bytes_defaults_lowers_and_refuses_nonsense() {
    let p = user("").unwrap();
    assert_eq!(p.limits.audit_bytes.value, 64 << 20);
    assert_eq!(
        user("[limits]\naudit_bytes = 0\n")
            .unwrap()
            .limits
            .audit_bytes
            .value,
        0
    );
    let p = user("[limits]\naudit_bytes = 16384\n").unwrap();
    assert_eq!(
        (p.limits.audit_bytes.value, p.limits.audit_bytes.origin.line),
        (16384, 2)
    );
    for bad in ["-1", "100", "16383"] {
        let d = err(&format!("[limits]\naudit_bytes = {bad}\n"));
        assert!(
            d.message.contains("is not a limit") && d.line == 2,
            "{bad}: {d}"
        );
    }
    assert!(project_over_user("", "[limits]\naudit_bytes = 16384\n").is_ok());
    project_err("", "[limits]\naudit_bytes = 0\n", "may only lower it");
    project_err(
        "[limits]\naudit_bytes = 16384\n",
        "[limits]\naudit_bytes = 32768\n",
        "raises the limit of 16384",
    );
}

#[test]
fn connections_and_memory_limits_default_and_only_tighten_from_a_project() {
    let p = user("").unwrap();
    assert_eq!(
        (
            p.limits.connections.value,
            p.limits.connections_per_second.value,
            p.limits.memory.value
        ),
        (512, 200, 8 << 30)
    );
    assert_eq!(p.limits.memory.origin.key, "limits.memory");
    let p = user("[limits]\nconnections = 64\nconnections_per_second = 0\nmemory = 268435456\n")
        .unwrap();
    assert_eq!(
        (
            p.limits.connections.value,
            p.limits.connections_per_second.value,
            p.limits.memory.value,
            p.limits.memory.origin.line
        ),
        (64, 0, 256 << 20, 4)
    );
    for (key, bad) in [
        ("connections", "15"),
        ("connections_per_second", "9"),
        ("memory", "1048576"),
    ] {
        let d = err(&format!("[limits]\n{key} = {bad}\n"));
        assert!(
            d.message.contains("is not a limit") && d.line == 2,
            "{key}: {d}"
        );
    }
    for key in ["connections", "connections_per_second", "memory"] {
        project_err("", &format!("[limits]\n{key} = 0\n"), "may only lower it");
    }
    assert!(project_over_user("", "[limits]\nmemory = 1073741824\nconnections = 100\n").is_ok());
    project_err(
        "[limits]\nconnections = 100\n",
        "[limits]\nconnections = 200\n",
        "raises the limit of 100",
    );
}

#[test]
fn the_cache_limit_defaults_to_16_gib_and_only_tightens_from_a_project() {
    let p = user("").unwrap();
    assert_eq!(p.limits.cache_bytes.value, 16 << 30);
    assert_eq!(p.limits.cache_bytes.origin.key, "limits.cache_bytes");
    let p = user("[limits]\ncache_bytes = 33554432\n").unwrap();
    assert_eq!(
        (p.limits.cache_bytes.value, p.limits.cache_bytes.origin.line),
        (32 << 20, 2)
    );
    let d = err("[limits]\ncache_bytes = 1000\n");
    assert!(d.message.contains("is not a limit") && d.line == 2, "{d}");
    project_err("", "[limits]\ncache_bytes = 0\n", "may only lower it");
    project_err(
        "[limits]\ncache_bytes = 33554432\n",
        "[limits]\ncache_bytes = 67108864\n",
        "raises the limit of 33554432",
    );
    let p = project_over_user("", "[limits]\ncache_bytes = 2097152\n").unwrap();
    assert_eq!(p.limits.cache_bytes.value, 2 << 20);
}

#[test]
fn the_launcher_cpu_share_defaults_to_half_a_core_and_only_tightens_from_a_project() {
    let p = user("").unwrap();
    assert_eq!(p.limits.launcher_cpu.value, 50);
    assert_eq!(p.limits.launcher_cpu.origin.key, "limits.launcher_cpu");
    let p = user("[limits]\nlauncher_cpu = 20\n").unwrap();
    assert_eq!(
        (
            p.limits.launcher_cpu.value,
            p.limits.launcher_cpu.origin.line
        ),
        (20, 2)
    );
    // More than one core is a share too; below the smallest is not.
    assert_eq!(
        user("[limits]\nlauncher_cpu = 150\n")
            .unwrap()
            .limits
            .launcher_cpu
            .value,
        150
    );
    let d = err("[limits]\nlauncher_cpu = 2\n");
    assert!(
        d.message.contains("is not a limit")
            && d.line == 2
            && d.hint.contains("percent of one core"),
        "{d}"
    );
    project_err("", "[limits]\nlauncher_cpu = 0\n", "may only lower it");
    project_err(
        "[limits]\nlauncher_cpu = 20\n",
        "[limits]\nlauncher_cpu = 40\n",
        "raises the limit of 20",
    );
    let p = project_over_user("", "[limits]\nlauncher_cpu = 10\n").unwrap();
    assert_eq!(p.limits.launcher_cpu.value, 10);
}

const CRED: &str = "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:REAL_KEY\"\nhosts = [\"API.OpenAI.com.\", \"api.openai.com\"]\n";

#[test]
fn credentials_load_with_their_origin() {
    let p = user(&format!(
        "{CRED}[credentials.gh]\nenv = \"GH_TOKEN\"\nsource = \"file:~/.gh-token\"\nhosts = [\"api.github.com\"]\n[network.tls]\nextra_roots = [\"~/corp-ca.pem\"]\n"
    ))
    .unwrap();
    assert_eq!(p.credentials.len(), 2);
    assert!(
        p.credentials.iter().all(|c| !c.body),
        "bodies are off by default"
    );
    let c = &p.credentials[0];
    assert_eq!(c.name, "gh");
    assert_eq!(
        c.source,
        sandpit_policy::CredentialSource::File("/nonexistent-home/u/.gh-token".into())
    );
    let c = &p.credentials[1];
    assert_eq!(
        (c.name.as_str(), c.env.as_str()),
        ("openai", "OPENAI_API_KEY")
    );
    // Canonical, once.
    assert_eq!(c.hosts, vec!["api.openai.com".to_string()]);
    assert_eq!((c.origin.line, c.origin.layer), (1, Layer::User));
    assert!(p.inject_host("api.openai.com") && !p.inject_host("openai.com"));
    assert_eq!(
        p.network.tls.extra_roots[0].value,
        PathBuf::from("/nonexistent-home/u/corp-ca.pem")
    );
    // The source file is unreadable in the sandbox, by the credential's rule.
    let v = decide(
        &p,
        &Request::Read(Path::new("/nonexistent-home/u/.gh-token")),
    );
    assert_eq!(v.decision, Decision::Deny, "{v:?}");
    assert_eq!(v.rule.unwrap().key, "credentials.gh.source");
}

#[test]
fn credential_variables_reach_programs_and_sources_do_not() {
    // Even when env.withhold names the variable, its sentinel reaches every program.
    let p = user(&format!(
        "[env]\nwithhold = [\"*_KEY\", \"OPENAI_*\"]\n{CRED}"
    ))
    .unwrap();
    let env = |name: &str, to| decide(&p, &Request::Env { name, to });
    let spawned = sandpit_policy::EnvTo::Spawned(Path::new("/usr/bin/curl"));
    assert_eq!(env("OPENAI_API_KEY", spawned).decision, Decision::Allow);
    assert_eq!(
        env("OPENAI_API_KEY", sandpit_policy::EnvTo::Command).decision,
        Decision::Allow
    );
    let v = env("REAL_KEY", sandpit_policy::EnvTo::Command);
    assert_eq!(v.decision, Decision::Deny, "{v:?}");
    assert!(v.reason.contains("credentials.openai"), "{v:?}");
}

#[test]
fn the_runs_ca_variables_reach_every_program_only_with_credentials() {
    // `AWS_*` withheld would take the AWS CLI's pointer to the run's CA.
    let withhold = "[env]\nwithhold = [\"AWS_*\", \"NODE_*\", \"SSL_*\"]\n";
    let with = user(&format!("{withhold}{CRED}")).unwrap();
    let without = user(withhold).unwrap();
    let spawned = sandpit_policy::EnvTo::Spawned(Path::new("/usr/bin/aws"));
    for name in ["AWS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE"] {
        for to in [sandpit_policy::EnvTo::Command, spawned] {
            let v = decide(&with, &Request::Env { name, to });
            assert_eq!(v.decision, Decision::Allow, "{name}: {v:?}");
            assert!(v.reason.contains("certificate authority"), "{v:?}");
            assert_eq!(v.rule.unwrap().key, "credentials.openai", "{name}");
            // Without a credential the run sets none of them: the user's own stay
            // withheld.
            let v = decide(&without, &Request::Env { name, to });
            assert_eq!(v.decision, Decision::Deny, "{name}: {v:?}");
        }
    }
    // Only those names: another variable of the same family stays withheld.
    let v = decide(
        &with,
        &Request::Env {
            name: "AWS_SECRET_ACCESS_KEY",
            to: spawned,
        },
    );
    assert_eq!(v.decision, Decision::Deny, "{v:?}");
    assert!(with.sets_ca_env("NODE_EXTRA_CA_CERTS") && !with.sets_ca_env("NODE_OPTIONS"));
}

#[test]
fn bad_credentials_are_located() {
    at(
        &err("[credentials.openai]\nenv = \"K\"\nsource = \"env:K\"\nhosts = [\"a.test\"]\nheaders = \"x\"\n"),
        5,
        1,
        "unknown field",
    );
    at(
        &err("[credentials.openai]\nenv = \"K\"\nsource = \"env:K\"\nhosts = []\n"),
        4,
        9,
        "hosts is empty",
    );
    at(
        &err("[credentials.openai]\nenv = \"K\"\nsource = \"vault:K\"\nhosts = [\"a.test\"]\n"),
        3,
        10,
        "unknown scheme",
    );
    at(
        &err("[credentials.openai]\nenv = \"K\"\nsource = \"env:\"\nhosts = [\"a.test\"]\n"),
        3,
        10,
        "not a variable name",
    );
    at(
        &err("[credentials.openai]\nenv = \"K-1\"\nsource = \"env:K\"\nhosts = [\"a.test\"]\n"),
        2,
        7,
        "not a variable name",
    );
    for h in ["*.a.test", "a.test:443", "https://a.test", "10.0.0.1"] {
        let d = err(&format!(
            "[credentials.openai]\nenv = \"K\"\nsource = \"env:K\"\nhosts = [\"{h}\"]\n"
        ));
        at(&d, 4, 10, "credentials.openai.hosts entry");
    }
    at(
        &err("[credentials.openai]\nenv = \"K\"\nhosts = [\"a.test\"]\n"),
        1,
        1,
        "has no source",
    );
    // Two credentials may not share a variable.
    at(
        &err(&format!("{CRED}[credentials.other]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:X\"\nhosts = [\"b.test\"]\n")),
        6,
        7,
        "already credentials.openai's variable",
    );
}

#[test]
fn credentials_are_the_users_own() {
    let mut o = with(Layer::User, "");
    o.project = Some(Source::new(Layer::Project, "Project.toml", CRED));
    let d = err_in(o);
    assert_eq!((d.file.as_str(), d.line), ("Project.toml", 1), "{d}");
    assert!(d.message.contains("project file"), "{d}");
    let mut o = with(Layer::User, CRED);
    o.project = Some(Source::new(
        Layer::Project,
        "Project.toml",
        "[network.tls]\nextra_roots = [\"ca.pem\"]\n",
    ));
    let d = err_in(o);
    assert!(d.message.contains("network.tls"), "{d}");
    // Unrestricted mode rejects them, either order.
    let d = err(&format!("[network]\nmode = \"unrestricted\"\n{CRED}"));
    assert!(d.message.contains("unrestricted"), "{d}");
    let mut o = with(Layer::User, CRED);
    o.flags = Some(Source::new(
        Layer::Flags,
        "Flags.toml",
        "[network]\nmode = \"unrestricted\"\n",
    ));
    let d = err_in(o);
    assert!(d.message.contains("[credentials]"), "{d}");
    // A later layer's table of the same name replaces the earlier one.
    let mut o = with(Layer::Profile, CRED);
    o.user = Some(Source::new(
        Layer::User,
        "User.toml",
        "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:OTHER\"\nhosts = [\"b.test\"]\n",
    ));
    let p = load(&o).unwrap();
    assert_eq!(p.credentials.len(), 1);
    assert_eq!(p.credentials[0].hosts, vec!["b.test".to_string()]);
}

#[test]
fn a_profiles_credential_gives_way_to_the_users_and_to_unrestricted_mode() {
    // The user's own table for the profile's variable, under another name,
    // replaces the profile's (in the same layer it is an error: above).
    let mut o = with(Layer::Profile, CRED);
    o.user = Some(Source::new(
        Layer::User,
        "User.toml",
        "[credentials.mine]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:MINE\"\nhosts = [\"b.test\"]\nrequired = true\n",
    ));
    let p = load(&o).unwrap();
    assert_eq!(p.credentials.len(), 1, "{:?}", p.credentials);
    assert_eq!(p.credentials[0].name, "mine");
    assert!(p.credentials[0].required);
    // Unrestricted mode from a later layer sets the profile's credentials aside,
    // saying why; the user's own still refuse it.
    let mut o = with(Layer::Profile, CRED);
    o.flags = Some(Source::new(
        Layer::Flags,
        "Flags.toml",
        "[network]\nmode = \"unrestricted\"\n",
    ));
    let p = load(&o).unwrap();
    assert!(p.credentials.is_empty());
    assert_eq!(p.credentials_skipped.len(), 1);
    assert!(p.credentials_skipped[0].why.contains("unrestricted"));
    assert!(p.credentials_skipped[0]
        .line()
        .starts_with("credentials.openai ("));
    // Its variable is the environment rules' again.
    let v = decide(
        &p,
        &Request::Env {
            name: "OPENAI_API_KEY",
            to: sandpit_policy::EnvTo::Command,
        },
    );
    assert!(v.is_denied(), "{v:?}");
    assert!(v.reason.contains("is skipped in this run"), "{v:?}");
}

#[test]
fn http_rules_decide_method_and_path() {
    let p = user(
        "[network.http]\nallow = [\"GET https://api.github.com/repos/me/**\", \"* http://a.test:8080/v1/*/x\"]\nblock = [\"POST https://api.github.com/repos/me/secret/**\"]\n",
    )
    .unwrap();
    let d = |method: &str, scheme: &str, host: &str, port: u16, target: &str| {
        decide(
            &p,
            &Request::Http {
                method,
                scheme,
                host,
                port,
                target,
            },
        )
        .decision
    };
    let gh = |m: &str, t: &str| d(m, "https", "API.github.com", 443, t);
    assert_eq!(gh("GET", "/repos/me/x/pulls?state=open"), Decision::Allow);
    assert_eq!(
        gh("GET", "/repos/me"),
        Decision::Allow,
        "** matches no segment"
    );
    assert_eq!(gh("POST", "/repos/me/x"), Decision::Deny);
    assert_eq!(gh("GET", "/repos/other/x"), Decision::Deny);
    assert_eq!(gh("GET", "/repos/me/../other"), Decision::Deny);
    assert_eq!(gh("GET", "/repos/me/%2e%2e/other"), Decision::Deny);
    assert_eq!(gh("GET", "/repos/me/%2"), Decision::Deny);
    assert_eq!(gh("POST", "/repos/me/secret/1"), Decision::Deny);
    // Another port or scheme is another origin: no entry names it.
    assert_eq!(
        d("DELETE", "https", "api.github.com", 8443, "/"),
        Decision::Allow
    );
    assert_eq!(
        d("DELETE", "http", "api.github.com", 80, "/"),
        Decision::Allow
    );
    // * within one segment.
    assert_eq!(
        d("PUT", "http", "a.test", 8080, "/v1/abc/x"),
        Decision::Allow
    );
    assert_eq!(
        d("PUT", "http", "a.test", 8080, "/v1/a/b/x"),
        Decision::Deny
    );
    // Shape errors.
    at(
        &err("[network.http]\nallow = [\"get https://a.test/\"]\n"),
        2,
        10,
        "not a method",
    );
    at(
        &err("[network.http]\nallow = [\"GET a.test/x\"]\n"),
        2,
        10,
        "scheme",
    );
    at(
        &err("[network.http]\nallow = [\"GET ftp://a.test/x\"]\n"),
        2,
        10,
        "scheme",
    );
    at(
        &err("[network.http]\nallow = [\"GET https://*.a.test/x\"]\n"),
        2,
        10,
        "wildcard",
    );
    at(
        &err("[network.http]\nblock = [\"GET https://a.test/x?y=1\"]\n"),
        2,
        10,
        "query",
    );
    // A project may add blocks, not allows.
    let mut o = with(Layer::User, "");
    o.project = Some(Source::new(
        Layer::Project,
        "Project.toml",
        "[network.http]\nblock = [\"DELETE https://a.test/**\"]\n",
    ));
    assert_eq!(load(&o).unwrap().network.http.block.len(), 1);
    o.project = Some(Source::new(
        Layer::Project,
        "Project.toml",
        "[network.http]\nallow = [\"GET https://a.test/**\"]\n",
    ));
    assert!(err_in(o).message.contains("network.http.allow"));
    // An https entry for a host sandpit does not terminate cannot be enforced.
    assert!(p.unenforceable_http().is_some());
    let p = user(&format!(
        "{CRED}[network.http]\nallow = [\"GET https://api.openai.com/v1/**\"]\n"
    ))
    .unwrap();
    assert!(p.unenforceable_http().is_none());
}

#[test]
fn a_credential_file_is_shown_masked_so_it_is_readable() {
    let p = user("[credentials.codex]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:K\"\nhosts = [\"api.openai.com\"]\nfile = \"~/.codex/auth.json\"\n").unwrap();
    let f = PathBuf::from("/nonexistent-home/u/.codex/auth.json");
    assert_eq!(p.credentials[0].file.as_deref(), Some(f.as_path()));
    // The built-in default blocks it; the credential's masked copy is what shows.
    let v = decide(&p, &Request::Read(&f));
    assert_eq!(v.decision, Decision::Allow, "{v:?}");
    assert_eq!(v.rule.unwrap().key, "credentials.codex.file");
    let d = err("[credentials.codex]\nenv = \"K\"\nsource = \"file:~/a\"\nhosts = [\"a.test\"]\nfile = \"~/a\"\n");
    at(&d, 5, 8, "the source itself");
}

#[test]
fn telemetry_is_the_users_to_set_and_never_in_the_snapshot() {
    assert_eq!(user("").unwrap().telemetry.otlp_endpoint, None);
    let p = user(
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/\"\n\
         headers = { authorization = \"Bearer s3cret\" }\n",
    )
    .unwrap();
    let e = p.telemetry.otlp_endpoint.as_ref().unwrap();
    assert_eq!(e.value, "http://127.0.0.1:4318");
    assert_eq!(
        (e.origin.key.as_str(), e.origin.line),
        ("telemetry.otlp_endpoint", 2)
    );
    assert_eq!(
        p.telemetry.headers,
        [("authorization".to_string(), "Bearer s3cret".to_string())]
    );
    // The token reaches neither the sandbox's snapshot nor a debug print.
    let snap = p.snapshot();
    assert!(!snap.windows(6).any(|w| w == b"s3cret"));
    assert!(!format!("{p:?}").contains("s3cret"));
    let back = Policy::from_snapshot(&snap).unwrap();
    assert_eq!(back.telemetry.otlp_endpoint, None);
    // Not a URL, a bad header: located errors.
    at(
        &err("[telemetry]\notlp_endpoint = \"127.0.0.1:4318\"\n"),
        2,
        17,
        "not an http(s) URL",
    );
    at(
        &err("[telemetry]\notlp_endpoint = \"http://x\"\nheaders = { \"a b\" = \"v\" }\n"),
        3,
        13,
        "not an HTTP header name",
    );
    // A project file may not redirect the user's records, nor add headers.
    project_err(
        "",
        "[telemetry]\notlp_endpoint = \"http://evil.example:4318\"\n",
        "cannot be in a project file",
    );
    let u = "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n";
    project_err(u, "[telemetry]\n", "cannot be in a project file");
}

#[test]
fn env_set_gives_the_command_values_that_pass_withhold() {
    // A profile sets it, the user's file replaces the value; withhold has no say.
    let mut o = LoadOptions::new(ctx());
    o.profile = Some(Source::new(
        Layer::Profile,
        "profiles/x.toml",
        "[env.set]\nX_NO_RELAUNCH = \"true\"\n",
    ));
    o.user = Some(Source::new(
        Layer::User,
        "user.toml",
        "[env]\nwithhold = [\"X_*\"]\n[env.set]\nX_NO_RELAUNCH = \"1\"\nX_MODE = \"quiet\"\n",
    ));
    let p = load(&o).unwrap();
    let set: Vec<(&str, &str, u32)> = (p.env.set.iter())
        .map(|r| (r.value.name.as_str(), r.value.value.as_str(), r.origin.line))
        .collect();
    assert_eq!(set, [("X_MODE", "quiet", 5), ("X_NO_RELAUNCH", "1", 4)]);
    let spawned = sandpit_policy::EnvTo::Spawned(Path::new("/usr/bin/node"));
    for to in [sandpit_policy::EnvTo::Command, spawned] {
        let v = decide(&p, &Request::Env { name: "X_MODE", to });
        assert_eq!(v.decision, Decision::Allow, "{v:?}");
        assert_eq!(v.rule.as_ref().unwrap().key, "env.set");
        assert!(v.reason.contains("\"quiet\""), "{v:?}");
        // Its neighbour is still withheld.
        let v = decide(
            &p,
            &Request::Env {
                name: "X_OTHER",
                to,
            },
        );
        assert_eq!(v.decision, Decision::Deny, "{v:?}");
    }
    assert!(p.env.set_by("X_MODE").is_some() && p.env.set_by("X_OTHER").is_none());
}

#[test]
fn env_set_refuses_what_sandpit_or_the_loader_owns_and_project_files() {
    for (name, needle) in [
        ("LD_PRELOAD", "dynamic loader"),
        ("ld_library_path", "dynamic loader"),
        ("DYLD_INSERT_LIBRARIES", "dynamic loader"),
        ("SANDPIT_SNAPSHOT", "set by sandpit"),
        ("https_proxy", "set by sandpit"),
        ("PATH", "set by sandpit"),
        ("HOME", "set by sandpit"),
        ("TMPDIR", "set by sandpit"),
        ("SSL_CERT_FILE", "set by sandpit"),
        ("NODE_EXTRA_CA_CERTS", "set by sandpit"),
        ("1X", "not a variable name"),
        ("A-B", "not a variable name"),
    ] {
        at(
            &err(&format!("[env.set]\n\"{name}\" = \"v\"\n")),
            2,
            1,
            needle,
        );
    }
    at(&err("[env.set]\nX = \"a\\u0000b\"\n"), 2, 5, "NUL");
    assert!(user("[env.set]\nNODE_OPTIONS = \"--max-old-space-size=4096\"\n").is_ok());
    project_err(
        "",
        "[env.set]\nNODE_OPTIONS = \"--require /p/x.js\"\n",
        "project file",
    );
    // A credential's variable, or its source, is the credential's: in either order.
    let cred = "[credentials.gh]\nenv = \"GH_TOKEN\"\nsource = \"env:REAL_GH\"\nhosts = [\"api.github.com\"]\n";
    // Nor may a credential use one of the run's CA variables.
    for (env, source) in [("SSL_CERT_FILE", "REAL_GH"), ("GH_TOKEN", "CURL_CA_BUNDLE")] {
        let e = user(&format!(
            "[credentials.gh]\nenv = \"{env}\"\nsource = \"env:{source}\"\nhosts = [\"api.github.com\"]\n"
        ))
        .expect_err(env);
        assert!(e.to_string().contains("certificate authority"), "{e}");
    }
    for set in ["GH_TOKEN", "REAL_GH"] {
        let set = format!("[env.set]\n{set} = \"x\"\n");
        // The credential in a lower layer (a profile), env.set in the user's file.
        let mut o = LoadOptions::new(ctx());
        o.profile = Some(Source::new(Layer::Profile, "profiles/x.toml", cred));
        o.user = Some(Source::new(Layer::User, "user.toml", &set));
        let e = load(&o).expect_err("set over a profile's credential");
        assert!(
            e.to_string().contains("is credentials.gh's variable"),
            "{e}"
        );
        let e = user(&format!("{cred}{set}")).expect_err("set after");
        assert!(e.to_string().contains("credentials.gh"), "{e}");
        let e = user(&format!("{set}{cred}")).expect_err("set before");
        assert!(e.to_string().contains("env.set"), "{e}");
    }
}

/// `files.allow_home_workspace`: the user's own layers may accept the home as the
/// workspace (with the rule's origin), a project file may not, even set as the
/// user's own config sets it (issue 41).
#[test]
fn the_home_as_workspace_is_accepted_by_the_users_own_layers_only() {
    let p = user("[files]\nallow_home_workspace = true\n").unwrap();
    let o = p.files.allow_home_workspace.expect("accepted");
    assert_eq!((o.key.as_str(), o.line), ("files.allow_home_workspace", 2));
    assert!(user("[files]\nallow_home_workspace = false\n")
        .unwrap()
        .files
        .allow_home_workspace
        .is_none());
    assert!(user("").unwrap().files.allow_home_workspace.is_none());
    for value in ["true", "false"] {
        project_err(
            "[files]\nallow_home_workspace = true\n",
            &format!("[files]\nallow_home_workspace = {value}\n"),
            "files.allow_home_workspace cannot be set by a project file",
        );
    }
}

/// A run whose `.env` search stopped refuses reading (and so writing) the `.env`
/// files it did not find in the workspace, and nothing else; the user's own
/// carve-out still wins.
#[test]
fn dotenv_files_past_a_stopped_search_are_refused_to_read() {
    use sandpit_policy::{
        decide, Context, DotenvBeyond, Layer, LoadOptions, Origin, Request, Source,
    };
    let mut o = LoadOptions::new(Context {
        home: "/h".into(),
        workspace: "/h/w".into(),
        scratch: "/t/run".into(),
        state_dir: "/h/.sandpit".into(),
    });
    o.user = Some(Source::new(
        Layer::User,
        "u.toml",
        "[files]\nallow_read = [\"/h/w/keep/.env\"]\n",
    ));
    let mut p = sandpit_policy::load(&o).unwrap();
    let read = |p: &sandpit_policy::Policy, path: &str| {
        !decide(p, &Request::Read(std::path::Path::new(path))).is_denied()
    };
    assert!(read(&p, "/h/w/deep/.env"));
    p.files.dotenv_beyond = Some(DotenvBeyond {
        origin: Origin::builtin("files.dotenv", "**/.env"),
        seen: vec!["/h/w/.env".into(), "/h/w/a/.env.local".into()],
    });
    for denied in [
        "/h/w/deep/.env",
        "/h/w/deep/.env.production",
        "/h/w/x/../deep/.env",
    ] {
        assert!(!read(&p, denied), "{denied}");
    }
    for allowed in [
        "/h/w/.env",
        "/h/w/a/.env.local",
        "/h/w/deep/.env.example",
        "/h/w/deep/.env.local.sample",
        "/h/w/deep/.envrc",
        "/h/w/deep/env",
        "/h/other/.env",
        "/h/w/keep/.env",
    ] {
        assert!(read(&p, allowed), "{allowed}");
    }
    // Unreadable, and so unwritable, as every refused read.
    assert!(decide(&p, &Request::Write(std::path::Path::new("/h/w/deep/.env"))).is_denied());
    assert!(!decide(&p, &Request::Write(std::path::Path::new("/h/w/deep/x"))).is_denied());
}

#[test]
fn real_dotenv_is_the_users_own_setting() {
    use sandpit_policy::{Context, Layer, LoadOptions, Source};
    let ctx = Context {
        home: "/h".into(),
        workspace: "/h/w".into(),
        scratch: "/t/run".into(),
        state_dir: "/h/.sandpit".into(),
    };
    let mut o = LoadOptions::new(ctx.clone());
    o.user = Some(Source::new(
        Layer::User,
        "u.toml",
        "[files]\nreal_dotenv = true\n",
    ));
    assert!(sandpit_policy::load(&o)
        .unwrap()
        .files
        .real_dotenv
        .is_some());
    let mut o = LoadOptions::new(ctx);
    o.project = Some(Source::new(
        Layer::Project,
        ".sandpit.toml",
        "[files]\nreal_dotenv = true\n",
    ));
    let e = sandpit_policy::load(&o).unwrap_err().to_string();
    assert!(
        e.contains("files.real_dotenv cannot be turned on by a project file"),
        "{e}"
    );
    assert!(e.contains(".sandpit.toml:2"), "{e}");
}

/// `[ssh] agent`: "filtered" or "off", located when wrong; a project file may only
/// turn the filtering agent off.
#[test]
fn ssh_agent_is_filtered_or_off_and_a_project_only_turns_it_off() {
    assert_eq!(user("").unwrap().ssh.agent, None);
    let p = user("[ssh]\nagent = \"filtered\"\n").unwrap();
    let a = p.ssh.agent.unwrap();
    assert_eq!(a.value, sandpit_policy::SshAgent::Filtered);
    assert_eq!(a.origin.location(), "User.toml:2:9");
    let d = err("[ssh]\nagent = \"on\"\n");
    at(&d, 2, 9, "ssh.agent \"on\"");
    project_err(
        "",
        "[ssh]\nagent = \"filtered\"\n",
        "only turn the SSH agent off",
    );
    let p = project_over_user("[ssh]\nagent = \"filtered\"\n", "[ssh]\nagent = \"off\"\n").unwrap();
    assert_eq!(p.ssh.agent.unwrap().value, sandpit_policy::SshAgent::Off);
}
