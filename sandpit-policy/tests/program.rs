//! `[[network.program]]`: loading with file:line diagnostics, and the decision that
//! limits a host to the programs an entry names.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use common::options;
use sandpit_policy::{decide_connect_by, load, Host, Program};

const USER: &str = r#"[network]
allow = ["github.com", "*.githubusercontent.com", "pypi.org"]

[[network.program]]
name = "git only"
programs = ["git", "/usr/lib/git-core/git-remote-*"]
hosts = ["github.com", "*.githubusercontent.com"]
"#;

fn program(path: &str) -> Program {
    Program {
        path: path.into(),
        pid: Some(42),
    }
}

fn host(h: &str) -> Host {
    sandpit_policy::canonical_host(h).unwrap()
}

#[test]
fn only_the_named_programs_reach_the_hosts_and_the_verdict_names_the_entry() {
    let p = load(&options(USER, None)).unwrap();
    let git = program("/usr/bin/git");
    let v = decide_connect_by(&p, &host("github.com"), 443, Some(&git), &[]);
    assert!(v.is_allowed(), "{v:?}");
    assert!(v.reason.contains("git only"), "{}", v.reason);
    let remote = program("/usr/lib/git-core/git-remote-https");
    let v = decide_connect_by(
        &p,
        &host("raw.githubusercontent.com"),
        443,
        Some(&remote),
        &[],
    );
    assert!(v.is_allowed(), "{v:?}");

    let py = program("/usr/bin/python3.12");
    let v = decide_connect_by(&p, &host("github.com"), 443, Some(&py), &[]);
    assert!(v.is_denied(), "{v:?}");
    let rule = v.rule.as_ref().unwrap();
    assert_eq!((rule.key.as_str(), rule.line), ("network.program", 5));
    assert!(rule.file.ends_with("config.toml"));
    for part in ["git only", "config.toml:5", "/usr/bin/python3.12 (pid 42)"] {
        assert!(v.reason.contains(part), "{part}: {}", v.reason);
    }
    // Not known: denied, and said so.
    let v = decide_connect_by(&p, &host("github.com"), 443, None, &[]);
    assert!(
        v.is_denied() && v.reason.contains("could not be identified"),
        "{v:?}"
    );
    // Other hosts: every program, as before.
    assert!(decide_connect_by(&p, &host("pypi.org"), 443, Some(&py), &[]).is_allowed());
    assert!(decide_connect_by(&p, &host("pypi.org"), 443, None, &[]).is_allowed());
}

#[test]
fn an_entry_never_allows_a_host_the_host_rules_deny() {
    let p = load(&options(USER, None)).unwrap();
    let git = program("/usr/bin/git");
    let text =
        "[[network.program]]\nname = \"x\"\nprograms = [\"git\"]\nhosts = [\"evil.example\"]\n";
    let q = load(&options(text, None)).unwrap();
    for p in [&p, &q] {
        let v = decide_connect_by(p, &host("evil.example"), 443, Some(&git), &[]);
        assert!(v.is_denied(), "{v:?}");
        assert!(v.reason.contains("not in network.allow"), "{}", v.reason);
    }
}

#[test]
fn a_program_the_sandbox_can_write_is_never_one_of_them() {
    let p = load(&options(USER, None)).unwrap();
    // A copy of python3 named git in the workspace.
    let planted = program("/nonexistent-home/u/proj/git");
    let v = decide_connect_by(&p, &host("github.com"), 443, Some(&planted), &[]);
    assert!(v.is_denied(), "{v:?}");
    assert!(v.reason.contains("can write"), "{}", v.reason);
}

#[test]
fn a_project_entry_narrows_and_never_widens() {
    let widen = "[[network.program]]\nname = \"python too\"\nprograms = [\"python3*\"]\nhosts = [\"github.com\"]\n";
    let p = load(&options(USER, Some(widen))).unwrap();
    let py = program("/usr/bin/python3.12");
    assert!(decide_connect_by(&p, &host("github.com"), 443, Some(&py), &[]).is_denied());
    // Named by neither: the verdict names the user's entry (the user's layers are
    // judged first).
    let curl = program("/usr/bin/curl");
    let v = decide_connect_by(&p, &host("github.com"), 443, Some(&curl), &[]);
    assert!(v.is_denied() && v.reason.contains("git only"), "{v:?}");
    assert!(
        v.rule.as_ref().unwrap().file.ends_with("config.toml"),
        "{v:?}"
    );
    let git = program("/usr/bin/git");
    // git is not named by the project's entry: narrowed away.
    let v = decide_connect_by(&p, &host("github.com"), 443, Some(&git), &[]);
    assert!(v.is_denied() && v.reason.contains("python too"), "{v:?}");
    // A project entry alone limits a host the user allows.
    let narrow =
        "[[network.program]]\nname = \"pip\"\nprograms = [\"pip\"]\nhosts = [\"pypi.org\"]\n";
    let p = load(&options(USER, Some(narrow))).unwrap();
    assert!(decide_connect_by(&p, &host("pypi.org"), 443, Some(&py), &[]).is_denied());
    let pip = program("/usr/bin/pip");
    assert!(decide_connect_by(&p, &host("pypi.org"), 443, Some(&pip), &[]).is_allowed());
}

#[test]
fn bad_entries_are_load_errors_with_file_and_line() {
    let cases = [
        (
            "[[network.program]]\nname = \"a\"\nprograms = []\nhosts = [\"a.test\"]\n",
            3,
            "names no program",
        ),
        (
            "[[network.program]]\nname = \"a\"\nprograms = [\"git\"]\nhosts = []\n",
            4,
            "names no host",
        ),
        (
            "[[network.program]]\nname = \"a\"\nprograms = [\"git\"]\nhosts = [\"*.com\"]\n",
            4,
            "network.program.hosts entry",
        ),
        (
            "[[network.program]]\nname = \"a\"\nprograms = [\"bin/git\"]\nhosts = [\"a.test\"]\n",
            3,
            "relative path",
        ),
        (
            "[[network.program]]\nname = \"a\"\nprograms = [\"*\"]\nhosts = [\"a.test\"]\n",
            3,
            "every program",
        ),
        (
            "[[network.program]]\nname = \"a\"\nprogram = [\"git\"]\nhosts = [\"a.test\"]\n",
            3,
            "unknown field",
        ),
        (
            "\n[[network.program]]\nprograms = [\"git\"]\nhosts = [\"a.test\"]\n",
            2,
            "no name",
        ),
    ];
    for (text, line, says) in cases {
        let e = match load(&options(text, None)) {
            Err(sandpit_policy::Error::Config(d)) => d,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(e.file, "config.toml", "{text}");
        assert_eq!(e.line, line, "{text}: {e:?}");
        assert!(e.message.contains(says), "{says}: {e:?}");
    }
}

#[test]
fn entries_hold_in_unrestricted_mode_too() {
    let text = "[network]\nmode = \"unrestricted\"\n[[network.program]]\nname = \"git only\"\nprograms = [\"git\"]\nhosts = [\"github.com\"]\n";
    let p = load(&options(text, None)).unwrap();
    let py = program("/usr/bin/python3");
    assert!(decide_connect_by(&p, &host("github.com"), 443, Some(&py), &[]).is_denied());
    assert!(decide_connect_by(
        &p,
        &host("github.com"),
        443,
        Some(&program("/usr/bin/git")),
        &[]
    )
    .is_allowed());
    // UDP has no program: a host an entry names stays closed to it.
    let ip = "[network]\nmode = \"unrestricted\"\n[[network.program]]\nname = \"dns\"\nprograms = [\"dig\"]\nhosts = [\"1.1.1.1\"]\n";
    let p = load(&options(ip, None)).unwrap();
    assert!(sandpit_policy::decide_datagram(&p, "1.1.1.1:53".parse().unwrap(), &[]).is_denied());
    assert!(sandpit_policy::decide_datagram(&p, "1.0.0.1:53".parse().unwrap(), &[]).is_allowed());
}

/// `askable`: which refusals for a host missing from `network.allow` may be put to
/// the user: names only, in filtered mode, not `localhost` names, and not a host a
/// program entry limits (an answer would bypass the entry).
#[test]
fn only_unlisted_names_in_filtered_mode_may_be_asked_about() {
    let p = load(&options(USER, None)).unwrap();
    assert!(sandpit_policy::askable(&p, &host("example.test"), 443));
    // github.com and its port-less pattern: limited to git by the entry.
    assert!(!sandpit_policy::askable(&p, &host("github.com"), 443));
    assert!(!sandpit_policy::askable(
        &p,
        &host("raw.githubusercontent.com"),
        80
    ));
    assert!(!sandpit_policy::askable(&p, &host("localhost"), 443));
    assert!(!sandpit_policy::askable(&p, &host("a.localhost"), 443));
    assert!(sandpit_policy::askable(&p, &host("localhost.test"), 443));
    assert!(!sandpit_policy::askable(&p, &host("192.0.2.7"), 443));
    for mode in ["offline", "unrestricted"] {
        let p = load(&options(&format!("[network]\nmode = \"{mode}\"\n"), None)).unwrap();
        assert!(
            !sandpit_policy::askable(&p, &host("example.test"), 443),
            "{mode}"
        );
    }
}
