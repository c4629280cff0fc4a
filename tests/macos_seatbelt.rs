//! The Seatbelt compiler, checked on Linux: golden profiles for every policy shape,
//! rule order (each deny after the allow it overrides), parameterised paths that
//! cannot change the profile's meaning, and the base profile's own rules.
//!
//! Goldens live in tests/golden/seatbelt/; `SANDPIT_BLESS=1` rewrites them (read
//! the diff before committing it).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::{Path, PathBuf};

use sandpit::sandbox::macos::seatbelt::{canonical, compile, Input, Network, Profile, BASE};

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn golden(name: &str, profile: &Profile) {
    let compiled = profile
        .sbpl
        .strip_prefix(BASE)
        .expect("profile starts with the base");
    let mut text = String::from(compiled);
    text.push_str("\n;; parameters\n");
    for (k, v) in &profile.params {
        text.push_str(&format!(";; {k}={v}\n"));
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/golden/seatbelt")
        .join(format!("{name}.sbpl"));
    if std::env::var_os("SANDPIT_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (SANDPIT_BLESS=1 writes it)", path.display()));
    assert_eq!(text, want, "golden {name} differs");
    check_order(profile);
    check_params_used(profile);
}

/// A typical agent policy on a Mac: home /Users/me, project, scratch TMPDIR under
/// /var/folders, proxy on 41000, control socket in sandpit's state dir.
fn agent() -> Input {
    Input {
        block_read: vec![
            p("/Users/me/.ssh"),
            p("/Users/me/.aws"),
            p("/Users/me/.gnupg"),
            p("/Users/me/.netrc"),
            p("/Users/me/Library/Keychains"),
        ],
        allow_read: vec![],
        allow_write: vec![p("/Users/me/project"), p("/var/folders/xy/T/sandpit-1234")],
        block_write: vec![p("/etc"), p("/Users/me/.bashrc"), p("/Users/me/.zshrc")],
        protected: vec![
            p("/Users/me/project/.git/hooks"),
            p("/Users/me/project/.git/config"),
            p("/Users/me/project/.sandpit.toml"),
            p("/Users/me/project/.claude"),
            p("/Users/me/.sandpit"),
        ],
        network: Network::Proxy { port: 41000 },
        allow_local_binding: false,
        weaker_network_isolation: false,
        control_socket: Some(p("/Users/me/.sandpit/run/1234/control.sock")),
        report_sockets: vec![],
    }
}

#[test]
fn golden_minimal_offline() {
    let input = Input {
        allow_write: vec![p("/Users/me/project")],
        ..Input::default()
    };
    golden("minimal-offline", &compile(&input).unwrap());
}

#[test]
fn golden_agent_filtered() {
    golden("agent-filtered", &compile(&agent()).unwrap());
}

#[test]
fn golden_read_exceptions_nested() {
    // block ~/.config/gh, allow one file inside it, block a dir inside that allow.
    let input = Input {
        block_read: vec![
            p("/Users/me/.config/gh"),
            p("/Users/me/.config/gh/hosts.d/private"),
        ],
        allow_read: vec![p("/Users/me/.config/gh/hosts.d")],
        allow_write: vec![p("/Users/me/project")],
        network: Network::Proxy { port: 8080 },
        ..Input::default()
    };
    golden("read-exceptions", &compile(&input).unwrap());
}

#[test]
fn golden_local_binding_and_weaker_network() {
    let input = Input {
        allow_local_binding: true,
        weaker_network_isolation: true,
        ..agent()
    };
    golden("local-binding-weaker-network", &compile(&input).unwrap());
}

/// Unrestricted lifts host filtering in the proxy and nothing at this layer: the
/// profile is the filtered one, outbound TCP to the proxy's port alone.
#[test]
fn golden_unrestricted_network() {
    let mut policy = default_policy();
    policy.network.mode.value = sandpit_policy::NetMode::Unrestricted;
    let unrestricted = compile(&Input::from_policy(&policy, 41000)).unwrap();
    policy.network.mode.value = sandpit_policy::NetMode::Filtered;
    let filtered = compile(&Input::from_policy(&policy, 41000)).unwrap();
    assert_eq!(unrestricted, filtered);
    let t = &unrestricted.sbpl;
    assert!(!t.contains("(allow network*)"), "{t}");
    assert_eq!(
        t.matches("(allow network-outbound (remote tcp").count(),
        1,
        "{t}"
    );
    assert!(!t.contains("(remote ip"), "{t}");
    assert!(
        t.contains("(allow network-outbound (remote tcp \"localhost:41000\"))"),
        "{t}"
    );
    assert!(!t.contains("(allow network-bind"), "{t}");
    golden("unrestricted", &unrestricted);
}

#[test]
fn golden_tmp_spellings_are_canonical() {
    // Policy spelled with /tmp and /var, `//` and `/./`, protected paths that do not
    // exist: all emitted as /private/… and still guarded.
    let input = Input {
        block_read: vec![p("/var//db/secret")],
        allow_write: vec![p("/tmp/ws"), p("/private/tmp/ws/./")],
        protected: vec![p("/tmp/ws/.git/hooks"), p("/tmp/ws/not/yet/created")],
        network: Network::Proxy { port: 3128 },
        ..Input::default()
    };
    let prof = compile(&input).unwrap();
    for (_, v) in &prof.params {
        assert!(
            v.starts_with("/private/") && !v.contains("//") && !v.contains("/./"),
            "{v}"
        );
    }
    // /tmp/ws and /private/tmp/ws are one root.
    assert_eq!(
        prof.params
            .iter()
            .filter(|(k, _)| k.starts_with("WRITABLE_ROOT_"))
            .count(),
        1
    );
    golden("tmp-canonical", &prof);
}

/// Parse the compiled rules: (line index, allow?, operation text, parameter values).
fn rules(profile: &Profile) -> Vec<(usize, bool, String, Vec<String>)> {
    let value = |name: &str| -> String {
        profile
            .params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("parameter {name} used but not defined"))
    };
    let mut out = vec![];
    for (i, line) in profile.sbpl.lines().enumerate() {
        let (allow, rest) = if let Some(r) = line.strip_prefix("(allow ") {
            (true, r)
        } else if let Some(r) = line.strip_prefix("(deny ") {
            (false, r)
        } else {
            continue;
        };
        let op = rest.split([' ', ')']).next().unwrap().to_string();
        let mut params = vec![];
        let mut s = rest;
        while let Some(at) = s.find("(param \"") {
            let after = &s[at + 8..];
            let end = after.find('"').unwrap();
            params.push(value(&after[..end]));
            s = &after[end..];
        }
        out.push((i, allow, op, params));
    }
    out
}

fn within(inner: &str, outer: &str) -> bool {
    inner == outer || inner.starts_with(&format!("{outer}/"))
}

/// Every file deny comes after each allow of the same operation family that covers
/// it, unless a more specific allow is meant to carve out of it (reads only).
fn check_order(profile: &Profile) {
    let rs = rules(profile);
    for (di, dallow, dop, dparams) in &rs {
        if *dallow || dparams.is_empty() || !dop.starts_with("file-") {
            continue;
        }
        let family = if dop.starts_with("file-read") {
            "file-read"
        } else {
            "file-write"
        };
        for dp in dparams {
            for (ai, aallow, aop, aparams) in &rs {
                if !*aallow || !aop.starts_with(family) {
                    continue;
                }
                // The global `(allow file-read*)` and subpath allows that contain
                // the denied path must come before the deny.
                let covers = aparams.is_empty() || aparams.iter().any(|ap| within(dp, ap));
                let carve_out = aparams.iter().any(|ap| ap != dp && within(ap, dp));
                if covers && !carve_out {
                    assert!(
                        ai < di,
                        "deny of {dp} (line {di}) precedes the allow at line {ai}:\n{}",
                        profile.sbpl
                    );
                }
            }
        }
    }
}

fn check_params_used(profile: &Profile) {
    for (k, _) in &profile.params {
        assert!(
            profile.sbpl.contains(&format!("(param \"{k}\")")),
            "parameter {k} defined but unused"
        );
    }
}

#[test]
fn write_denies_follow_every_writable_root() {
    let prof = compile(&agent()).unwrap();
    let text = &prof.sbpl;
    let last_allow = text.rfind("(allow file-write* (subpath").unwrap();
    let first_deny = text.find("(deny file-write* file-link (subpath").unwrap();
    assert!(last_allow < first_deny);
    // Protected paths inside the workspace are denied even though they are absent.
    for want in [
        "/Users/me/project/.git/hooks",
        "/Users/me/project/.sandpit.toml",
    ] {
        let name = prof
            .params
            .iter()
            .find(|(k, v)| k.starts_with("WRITE_DENY_") && v == want)
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| panic!("{want} not denied"));
        assert!(text.contains(&format!(
            "(deny file-write* file-link (subpath (param \"{name}\")))"
        )));
    }
    // The directories above them inside the root cannot be renamed or replaced.
    let guarded: Vec<&str> = prof
        .params
        .iter()
        .filter(|(k, _)| k.starts_with("PROTECTED_PARENT_"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(guarded, vec!["/Users/me/project", "/Users/me/project/.git"]);
    // ~/.sandpit is outside every writable root: denied, no guard needed.
    assert!(prof
        .params
        .iter()
        .any(|(k, v)| k.starts_with("WRITE_DENY_") && v == "/Users/me/.sandpit"));
}

#[test]
fn block_read_is_also_unwritable_and_unlinkable() {
    let prof = compile(&agent()).unwrap();
    let read = prof
        .params
        .iter()
        .find(|(k, v)| k.starts_with("READ_DENY_") && v == "/Users/me/.ssh");
    let write = prof
        .params
        .iter()
        .find(|(k, v)| k.starts_with("WRITE_DENY_") && v == "/Users/me/.ssh");
    assert!(read.is_some() && write.is_some(), "{:?}", prof.params);
}

#[test]
fn network_shapes() {
    let filtered = compile(&agent()).unwrap().sbpl;
    assert!(filtered.contains("(allow network-outbound (remote tcp \"localhost:41000\"))"));
    assert_eq!(
        filtered
            .matches("(allow network-outbound (remote tcp")
            .count(),
        1
    );
    assert!(!filtered.contains("network-bind"));
    assert!(!filtered.contains("network-inbound"));
    assert!(!filtered.contains("(allow network*)"));
    assert!(!filtered.contains("com.apple.trustd.agent"));

    let offline = compile(&Input {
        network: Network::Offline,
        control_socket: None,
        report_sockets: vec![],
        ..agent()
    })
    .unwrap()
    .sbpl;
    assert!(!offline.contains("remote tcp"));
    assert!(!offline.contains("(allow network*)"));
    assert!(
        !offline.contains("AF_INET"),
        "offline creates no TCP/UDP sockets"
    );
    let offline_bind = compile(&Input {
        network: Network::Offline,
        allow_local_binding: true,
        ..agent()
    })
    .unwrap()
    .sbpl;
    assert!(offline_bind.contains("(socket-domain AF_INET)"));
    assert!(offline_bind.contains("(allow network-bind (local ip \"localhost:*\"))"));
    assert!(!offline_bind.contains("network-outbound (remote tcp"));

    let bind = compile(&Input {
        allow_local_binding: true,
        ..agent()
    })
    .unwrap()
    .sbpl;
    assert!(bind.contains("(allow network-bind (local ip \"localhost:*\"))"));
    assert!(bind.contains("(allow network-inbound (local ip \"localhost:*\"))"));
    // Binding never widens outbound: still only the proxy.
    assert_eq!(
        bind.matches("(allow network-outbound (remote tcp").count(),
        1
    );
    assert!(!bind.contains("remote ip"));

    let weaker = compile(&Input {
        weaker_network_isolation: true,
        ..agent()
    })
    .unwrap()
    .sbpl;
    assert!(weaker.contains("(allow mach-lookup (global-name \"com.apple.trustd.agent\"))"));

    assert!(compile(&Input {
        network: Network::Proxy { port: 0 },
        ..agent()
    })
    .is_err());
}

#[test]
fn host_launchers_denied_last() {
    let prof = compile(&Input {
        allow_local_binding: true,
        weaker_network_isolation: true,
        ..agent()
    })
    .unwrap();
    let t = &prof.sbpl;
    let tail_start = t.find("(deny lsopen)").unwrap();
    assert!(
        !t[tail_start..].contains("(allow"),
        "an allow follows the final denials"
    );
    for want in [
        "(deny appleevent-send)",
        "\"/usr/bin/open\"",
        "\"/usr/bin/osascript\"",
        "\"/bin/launchctl\"",
        "\"com.apple.coreservices.launchservicesd\"",
        "\"com.apple.coreservices.appleevents\"",
    ] {
        assert!(t[tail_start..].contains(want), "{want}");
    }
    assert!(t.contains("(deny default)"));
    assert!(!t.contains("(allow default)"));
    assert!(!t.contains("no-sandbox"));
}

/// Paths that would break out of an SBPL string literal if they were spliced in.
const HOSTILE: &[&str] = &[
    "a\"b",
    "a\\\"))(allow default)(deny file-read* (subpath \"x",
    "paren)(allow file-write* (subpath \"x\"))",
    "brackets[]{}#\"",
    "new\nline (allow default)\n",
    "semi;colon #| block |#",
    "tab\there\r",
];

#[test]
fn hostile_paths_cannot_change_the_profile() {
    for (i, bad) in HOSTILE.iter().enumerate() {
        let shape = |name: &str| Input {
            block_read: vec![p(&format!("/Users/me/{name}"))],
            allow_read: vec![p(&format!("/Users/me/{name}/ok"))],
            allow_write: vec![p(&format!("/Users/me/w{name}"))],
            block_write: vec![p(&format!("/Users/me/w{name}/{name}"))],
            protected: vec![p(&format!("/Users/me/w{name}/.git/{name}"))],
            control_socket: Some(p(&format!("/Users/me/{name}.sock"))),
            report_sockets: vec![],
            network: Network::Proxy { port: 9 },
            ..Input::default()
        };
        let plain = compile(&shape("plain")).unwrap();
        let hostile = compile(&shape(bad)).unwrap();
        // The same text: the path is not part of it.
        assert_eq!(
            plain.sbpl, hostile.sbpl,
            "hostile path #{i} changed the profile"
        );
        assert_eq!(plain.params.len(), hostile.params.len());
        for ((k1, v1), (k2, v2)) in plain.params.iter().zip(&hostile.params) {
            assert_eq!(k1, k2);
            // The value is the hostile path verbatim, with `plain` in its place.
            assert_eq!(v1.replace("plain", bad), *v2);
        }
        assert!(!hostile.sbpl.contains(bad));
        // And the sandbox-exec fallback passes each value as one argv element.
        let args = hostile.sandbox_exec_args();
        assert_eq!(args[1], hostile.sbpl);
        assert_eq!(args.len(), 2 + hostile.params.len());
    }
}

#[test]
fn nul_and_relative_and_dotdot_paths_are_refused() {
    for bad in ["relative/x", "/a/../etc"] {
        let input = Input {
            allow_write: vec![p(bad)],
            ..Input::default()
        };
        assert!(compile(&input).is_err(), "{bad}");
    }
    assert!(canonical(Path::new("/tmp/../x")).is_err());
}

#[test]
fn base_profile_explains_every_allow() {
    assert!(BASE.contains("(version 1)"));
    assert!(BASE.contains("(deny default)"));
    for para in BASE.split("\n\n") {
        if para.contains("(allow") {
            let first = para.trim_start().lines().next().unwrap();
            assert!(
                first.starts_with(';'),
                "an allow without a comment saying why:\n{para}"
            );
        }
    }
    // Nothing in the base opens the network, the keychain or launchd.
    for never in [
        "network",
        "com.apple.SecurityServer",
        "securityd",
        "launchd",
        "(allow file-write*",
        "(allow mach-lookup)",
    ] {
        let code: String = BASE
            .lines()
            .filter(|l| !l.trim_start().starts_with(';'))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(!code.contains(never), "base profile contains {never}");
    }
}

// ---------------------------------------------------------------------------------
// The profile compiled from a real policy agrees with the policy's own decide().

fn mac_context() -> sandpit_policy::Context {
    sandpit_policy::Context {
        home: p("/Users/me"),
        workspace: p("/Users/me/project"),
        scratch: p("/var/folders/xy/T/sandpit-1234"),
        state_dir: p("/Users/me/.sandpit"),
    }
}

fn default_policy() -> sandpit_policy::Policy {
    sandpit_policy::load(&sandpit_policy::LoadOptions::new(mac_context())).unwrap()
}

/// A small evaluator of the compiled file rules: the last matching rule wins, and
/// nothing matching means the base profile's `(deny default)`.
fn seatbelt_allows(profile: &Profile, op: &str, path: &str) -> bool {
    let compiled = profile.sbpl.strip_prefix(BASE).unwrap();
    let value = |name: &str| -> &str { &profile.params.iter().find(|(k, _)| k == name).unwrap().1 };
    let mut verdict = false;
    for line in compiled.lines() {
        let (allow, rest) = if let Some(r) = line.strip_prefix("(allow ") {
            (true, r)
        } else if let Some(r) = line.strip_prefix("(deny ") {
            (false, r)
        } else {
            continue;
        };
        let ops_end = rest.find('(').unwrap_or(rest.len());
        let ops: Vec<&str> = rest[..ops_end]
            .trim()
            .trim_end_matches(')')
            .split(' ')
            .collect();
        let op_matches = ops
            .iter()
            .any(|o| *o == op || (o.ends_with('*') && op.starts_with(o.trim_end_matches('*'))));
        if !op_matches {
            continue;
        }
        let filter = &rest[ops_end..];
        let matches = if filter.is_empty() {
            true
        } else if let Some(f) = filter.strip_prefix("(subpath (param \"") {
            let v = value(&f[..f.find('"').unwrap()]);
            within(path, v)
        } else if let Some(f) = filter.strip_prefix("(literal (param \"") {
            path == value(&f[..f.find('"').unwrap()])
        } else {
            continue; // network filters
        };
        if matches {
            verdict = allow;
        }
    }
    verdict
}

fn probes(policy: &sandpit_policy::Policy) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        "/Users/me/project/src/main.rs",
        "/Users/me/project/.git/HEAD",
        "/Users/me/project/.git/hooks/pre-commit",
        "/Users/me/project/.git/config",
        "/Users/me/project/.gitx",
        "/Users/me/project/.sandpit.toml",
        "/Users/me/project/.claude/settings.json",
        "/Users/me/.ssh/id_ed25519",
        "/Users/me/.sshx",
        "/Users/me/.bashrc",
        "/Users/me/notes.txt",
        "/Users/me/.sandpit/lib/x.dylib",
        "/etc/passwd",
        "/private/etc/passwd",
        "/tmp/elsewhere",
        "/var/folders/xy/T/sandpit-1234/build.o",
        "/var/folders/xy/T/other/x",
        "/usr/bin/true",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let f = &policy.files;
    for r in f
        .block_read
        .iter()
        .chain(&f.allow_read)
        .chain(&f.block_write)
        .chain(&f.allow_write)
    {
        out.push(r.value.clone());
        out.push(r.value.join("inner"));
        if let Some(parent) = r.value.parent() {
            out.push(parent.join("sibling"));
        }
    }
    out
}

#[test]
fn default_policy_golden_and_agreement_with_decide() {
    use sandpit_policy::{decide, Request};
    let policy = default_policy();
    let input = Input::from_policy(&policy, 41000)
        .with_control_socket(p("/Users/me/.sandpit/run/1/control.sock"));
    assert_eq!(input.network, Network::Proxy { port: 41000 });
    assert!(input.protected.contains(&p("/Users/me/.sandpit")));
    let prof = compile(&input).unwrap();
    golden("default-policy", &prof);

    let mut checked = 0;
    for probe in probes(&policy) {
        let seen = canonical(&probe).unwrap();
        let read = decide(&policy, &Request::Read(&probe));
        assert_eq!(
            seatbelt_allows(&prof, "file-read-data", &seen),
            read.is_allowed(),
            "read {seen}: policy says {:?}",
            read.reason
        );
        let write = decide(&policy, &Request::Write(&probe));
        let sb_write = seatbelt_allows(&prof, "file-write-data", &seen);
        let sb_create = seatbelt_allows(&prof, "file-write-create", &seen);
        if write.is_allowed() {
            assert!(sb_write, "write {seen}: policy allows, Seatbelt denies");
        } else {
            assert!(
                !sb_write && !sb_create,
                "write {seen}: policy denies ({}), Seatbelt allows",
                write.reason
            );
        }
        // Hard links of anything unwritable are refused.
        if !write.is_allowed()
            && policy
                .files
                .block_write
                .iter()
                .chain(&policy.files.block_read)
                .any(|r| within(&seen, &canonical(&r.value).unwrap()))
        {
            assert!(!seatbelt_allows(&prof, "file-link", &seen), "link {seen}");
        }
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
    eprintln!("checked {checked} probe paths");

    // The guards: `.git` and the workspace root can be neither removed nor created.
    for dir in ["/Users/me/project/.git", "/Users/me/project"] {
        assert!(!seatbelt_allows(&prof, "file-write-unlink", dir), "{dir}");
        assert!(!seatbelt_allows(&prof, "file-write-create", dir), "{dir}");
    }
    // …while ordinary files in them can.
    assert!(seatbelt_allows(
        &prof,
        "file-write-unlink",
        "/Users/me/project/.git/index.lock"
    ));
    assert!(seatbelt_allows(
        &prof,
        "file-write-create",
        "/Users/me/project/src"
    ));
}

#[test]
fn offline_policy_has_no_outbound_rule() {
    let mut policy = default_policy();
    policy.network.mode.value = sandpit_policy::NetMode::Offline;
    let prof = compile(&Input::from_policy(&policy, 41000)).unwrap();
    assert!(!prof.sbpl.contains("remote tcp"));
    policy.network.mode.value = sandpit_policy::NetMode::Unrestricted;
    let prof = compile(&Input::from_policy(&policy, 41000)).unwrap();
    assert!(prof
        .sbpl
        .contains("(allow network-outbound (remote tcp \"localhost:41000\"))"));
    assert!(!prof.sbpl.contains("(allow network*)"));
}

#[test]
fn secrets_inside_a_writable_root_cannot_be_renamed_out_from_under_their_rule() {
    let input = Input {
        block_read: vec![p("/Users/me/project/config/secrets/key.pem")],
        allow_write: vec![p("/Users/me/project")],
        ..Input::default()
    };
    let prof = compile(&input).unwrap();
    for dir in [
        "/Users/me/project/config/secrets",
        "/Users/me/project/config",
        "/Users/me/project",
    ] {
        assert!(
            !seatbelt_allows(&prof, "file-write-unlink", dir),
            "{dir} can be renamed away"
        );
        assert!(
            !seatbelt_allows(&prof, "file-write-create", dir),
            "{dir} can be replaced"
        );
    }
    assert!(!seatbelt_allows(
        &prof,
        "file-read-data",
        "/Users/me/project/config/secrets/key.pem"
    ));
    assert!(!seatbelt_allows(
        &prof,
        "file-write-unlink",
        "/Users/me/project/config/secrets/key.pem"
    ));
    // Positive control: a sibling file is writable and removable.
    assert!(seatbelt_allows(
        &prof,
        "file-write-unlink",
        "/Users/me/project/config/app.toml"
    ));
    assert!(seatbelt_allows(
        &prof,
        "file-read-data",
        "/Users/me/project/config/app.toml"
    ));
}
