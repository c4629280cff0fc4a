//! The Seatbelt compiler, checked on Linux: golden profiles for every policy shape,
//! rule order (each deny after the allow it overrides), parameterised paths that
//! cannot change the profile's meaning, and the base profile's own rules.
//!
//! Goldens live in tests/golden/seatbelt/; `SANDPIT_BLESS=1` rewrites them (read
//! the diff before committing it).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::{Path, PathBuf};

use sandpit::sandbox::macos::seatbelt::{
    canonical, compile, App, Gui, Input, Network, Profile, BASE, DEV, GUI,
};

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn golden(name: &str, profile: &Profile) {
    let compiled = profile
        .sbpl
        .strip_prefix(BASE)
        .expect("profile starts with the base");
    // The /dev rules are fixed text: named once, not repeated in every golden.
    assert_eq!(compiled.matches(DEV).count(), 1, "the /dev rules once");
    let mut text = compiled.replace(DEV, ";; <profiles/seatbelt-dev.sbpl>\n");
    // So is the GUI allowance, where it is asked for.
    assert!(
        compiled.matches(GUI).count() <= 1,
        "the GUI rules at most once"
    );
    let text_gui = text.replace(GUI, ";; <profiles/seatbelt-gui.sbpl>\n");
    text = text_gui;
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
        devices: vec![],
        trustd: false,
        unix_sockets: vec![],
        control_socket: Some(p("/Users/me/.sandpit/run/1234/control.sock")),
        report_sockets: vec![],
        gui: None,
        dns_port: None,
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
fn golden_local_binding_and_trustd() {
    let input = Input {
        allow_local_binding: true,
        trustd: true,
        ..agent()
    };
    golden("local-binding-trustd", &compile(&input).unwrap());
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

/// One form of SBPL: a symbol, a string, a regex literal `#"…"`, or a list.
#[derive(Debug, Clone)]
enum Sx {
    Atom(String),
    Str(String),
    Regex(String),
    List(Vec<Sx>),
}

/// Read SBPL text into its top-level forms (comments dropped).
fn parse_sbpl(text: &str) -> Vec<Sx> {
    fn string(chars: &mut std::iter::Peekable<std::str::Chars>) -> String {
        let mut out = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => return out,
                '\\' => out.push(chars.next().expect("escape at end of input")),
                c => out.push(c),
            }
        }
        panic!("unterminated string in the profile");
    }
    let mut chars = text.chars().peekable();
    let mut stack: Vec<Vec<Sx>> = vec![vec![]];
    while let Some(c) = chars.next() {
        match c {
            ';' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '(' => stack.push(vec![]),
            ')' => {
                let list = stack.pop().expect("unbalanced `)`");
                stack
                    .last_mut()
                    .expect("unbalanced `)`")
                    .push(Sx::List(list));
            }
            '"' => {
                let s = string(&mut chars);
                stack.last_mut().unwrap().push(Sx::Str(s));
            }
            '#' if chars.peek() == Some(&'"') => {
                chars.next();
                let s = string(&mut chars);
                stack.last_mut().unwrap().push(Sx::Regex(s));
            }
            c if c.is_whitespace() => {}
            c => {
                let mut atom = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || n == '(' || n == ')' {
                        break;
                    }
                    atom.push(n);
                    chars.next();
                }
                stack.last_mut().unwrap().push(Sx::Atom(atom));
            }
        }
    }
    assert_eq!(stack.len(), 1, "unbalanced `(` in the profile");
    stack.pop().unwrap()
}

/// What a rule's filter matches, with parameters replaced by their values.
#[derive(Debug, Clone)]
enum Filter {
    Subpath(String),
    Literal(String),
    Regex(String),
    /// `(remote unix-socket (path-literal …))`
    SocketLiteral(String),
    /// `(remote unix-socket (subpath …))`
    SocketSubpath(String),
    /// Anything else (TCP addresses, socket domains, mach names, …).
    Other,
}

impl Filter {
    fn matches_path(&self, path: &str) -> bool {
        match self {
            Filter::Subpath(v) => within(path, v),
            Filter::Literal(v) => path == v,
            Filter::Regex(r) => regex::Regex::new(r).unwrap().is_match(path),
            _ => false,
        }
    }
    fn matches_socket(&self, path: &str) -> bool {
        match self {
            Filter::SocketLiteral(v) => path == v,
            Filter::SocketSubpath(v) => within(path, v),
            _ => false,
        }
    }
}

/// A parsed rule: form index, allow?, operations, filters (empty: matches all).
struct ParsedRule {
    index: usize,
    allow: bool,
    ops: Vec<String>,
    filters: Vec<Filter>,
}

/// Parse the whole profile's rules, parameters resolved.
fn rules(profile: &Profile) -> Vec<ParsedRule> {
    let value = |sx: &Sx| -> Option<String> {
        match sx {
            Sx::Str(s) => Some(s.clone()),
            Sx::List(l) => match l.as_slice() {
                [Sx::Atom(a), Sx::Str(name)] if a == "param" => Some(
                    profile
                        .params
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_else(|| panic!("parameter {name} used but not defined")),
                ),
                _ => None,
            },
            _ => None,
        }
    };
    let filter = |sx: &Sx| -> Filter {
        let Sx::List(l) = sx else {
            return Filter::Other;
        };
        match l.as_slice() {
            [Sx::Atom(k), Sx::Regex(r)] if k == "regex" => Filter::Regex(r.clone()),
            [Sx::Atom(k), v] if k == "subpath" => Filter::Subpath(value(v).unwrap()),
            [Sx::Atom(k), v] if k == "literal" => Filter::Literal(value(v).unwrap()),
            [Sx::Atom(k), Sx::Atom(kind), Sx::List(inner)]
                if k == "remote" && kind == "unix-socket" =>
            {
                match inner.as_slice() {
                    [Sx::Atom(k), v] if k == "path-literal" => {
                        Filter::SocketLiteral(value(v).unwrap())
                    }
                    [Sx::Atom(k), v] if k == "subpath" => Filter::SocketSubpath(value(v).unwrap()),
                    other => panic!("unknown unix-socket filter {other:?}"),
                }
            }
            _ => Filter::Other,
        }
    };
    let mut out = vec![];
    for (index, form) in parse_sbpl(&profile.sbpl).iter().enumerate() {
        let Sx::List(l) = form else { continue };
        let allow = match l.first() {
            Some(Sx::Atom(a)) if a == "allow" => true,
            Some(Sx::Atom(a)) if a == "deny" => false,
            _ => continue,
        };
        let mut ops = vec![];
        let mut filters = vec![];
        for sx in &l[1..] {
            match sx {
                Sx::Atom(a) => ops.push(a.clone()),
                other => filters.push(filter(other)),
            }
        }
        out.push(ParsedRule {
            index,
            allow,
            ops,
            filters,
        });
    }
    out
}

fn op_matches(rule_op: &str, op: &str) -> bool {
    rule_op == op || (rule_op.ends_with('*') && op.starts_with(rule_op.trim_end_matches('*')))
}

fn within(inner: &str, outer: &str) -> bool {
    outer == "/" || inner == outer || inner.starts_with(&format!("{outer}/"))
}

/// Every file deny comes after each allow of the same operation family that covers
/// it, unless a more specific allow is meant to carve out of it (reads, and the
/// devices opened again inside the denied `/dev`).
fn check_order(profile: &Profile) {
    let rs = rules(profile);
    let family = |op: &str| {
        if op.starts_with("file-read") {
            Some("file-read")
        } else if op.starts_with("file-write") {
            Some("file-write")
        } else {
            None
        }
    };
    for d in &rs {
        if d.allow {
            continue;
        }
        let families: Vec<&str> = d.ops.iter().filter_map(|o| family(o)).collect();
        for df in &d.filters {
            // The path a deny names: only path filters are checked.
            let (dp, d_subpath) = match df {
                Filter::Subpath(v) => (v.as_str(), true),
                Filter::Literal(v) => (v.as_str(), false),
                _ => continue,
            };
            for a in &rs {
                if !a.allow
                    || !a
                        .ops
                        .iter()
                        .any(|o| family(o).is_some_and(|f| families.contains(&f)))
                {
                    continue;
                }
                // The global `(allow file-read*)` and allows that contain the denied
                // path must come before the deny.
                let covers = a.filters.is_empty() || a.filters.iter().any(|f| f.matches_path(dp));
                // A carve-out names something strictly inside the denied subpath (or
                // the denied directory alone, by literal).
                let carve_out = d_subpath
                    && a.filters.iter().any(|f| match f {
                        Filter::Subpath(ap) => ap != dp && within(ap, dp),
                        Filter::Literal(ap) => within(ap, dp),
                        Filter::Regex(_) => !f.matches_path(dp),
                        _ => false,
                    });
                if covers && !carve_out {
                    assert!(
                        a.index < d.index,
                        "deny of {dp} (form {}) precedes the allow at form {}:\n{}",
                        d.index,
                        a.index,
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
        trustd: true,
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
        trustd: true,
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
            devices: vec![p(&format!("/dev/{name}"))],
            unix_sockets: vec![p(&format!("/Users/me/.docker/{name}.sock"))],
            network: Network::Proxy { port: 9 },
            ..Input::default()
        };
        let plain = compile(&shape("plain")).unwrap();
        if bad.contains(['*', '?']) {
            // A glob is compiled to a regular expression in the text, not passed as
            // a parameter: one that could end the expression is refused.
            assert!(compile(&shape(bad)).is_err(), "hostile glob #{i}");
            continue;
        }
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

/// A small evaluator of the profile (base, compiled rules, /dev rules): the last
/// matching rule wins, and nothing matching means the base profile's
/// `(deny default)`. `op` is a file operation with `path`, or `network-outbound`
/// with `path` the Unix socket connected to.
fn seatbelt_allows(profile: &Profile, op: &str, path: &str) -> bool {
    let socket = op == "network-outbound";
    let mut verdict = false;
    for r in rules(profile) {
        if r.ops.iter().any(|o| o == "default") || !r.ops.iter().any(|o| op_matches(o, op)) {
            continue;
        }
        let matches = if r.filters.is_empty() {
            true
        } else if socket {
            r.filters.iter().any(|f| f.matches_socket(path))
        } else {
            r.filters.iter().any(|f| f.matches_path(path))
        };
        if matches {
            verdict = r.allow;
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
    let input = Input::from_policy(&policy, 41000).bind(
        Some(41000),
        None,
        Some(p("/Users/me/.sandpit/run/1/control.sock")),
        [],
    );
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

// ---------------------------------------------------------------------------------
// [isolation] and files.devices, from a policy loaded through the user's own layer.

fn user_policy(text: &str) -> sandpit_policy::Policy {
    let mut o = sandpit_policy::LoadOptions::new(mac_context());
    o.user = Some(sandpit_policy::Source::new(
        sandpit_policy::Layer::User,
        "config.toml",
        text,
    ));
    sandpit_policy::load(&o).unwrap()
}

#[test]
fn isolation_macos_trustd_allows_the_trustd_lookup_and_nothing_else_does() {
    let off = compile(&Input::from_policy(&default_policy(), 41000)).unwrap();
    assert!(!off.sbpl.contains("com.apple.trustd"), "{}", off.sbpl);

    let policy = user_policy("[isolation]\nmacos_trustd = true\n");
    let input = Input::from_policy(&policy, 41000);
    assert!(input.trustd);
    let on = compile(&input).unwrap();
    assert!(
        on.sbpl
            .contains("(allow mach-lookup (global-name \"com.apple.trustd.agent\"))"),
        "{}",
        on.sbpl
    );
    assert_eq!(on.sbpl.matches("com.apple.trustd").count(), 1);
    // The switch adds one rule and changes nothing else.
    assert_eq!(on.params, off.params);
    // `false` in a layer leaves it off.
    let policy = user_policy("[isolation]\nmacos_trustd = false\n");
    let prof = compile(&Input::from_policy(&policy, 41000)).unwrap();
    assert!(!prof.sbpl.contains("com.apple.trustd"));
}

#[test]
fn isolation_unix_sockets_are_reachable_by_exact_path_even_inside_a_blocked_directory() {
    let docker = "/Users/me/.docker/run/docker.sock";
    // Positive control first: without the entry, the default policy (which blocks
    // ~/.docker) reaches no host socket.
    let base = compile(&Input::from_policy(&default_policy(), 41000)).unwrap();
    assert!(!seatbelt_allows(&base, "network-outbound", docker));
    assert!(!base.sbpl.contains("UNIX_SOCKET"));

    let policy = user_policy(
        "[isolation]\nunix_sockets = [\"~/.docker/run/docker.sock\", \"/var/sandpit-test/agent.sock\"]\n",
    );
    // ~/.docker is blocked by the default policy: the socket lies inside it.
    assert!(policy
        .files
        .block_read
        .iter()
        .any(|r| r.value == p("/Users/me/.docker")));
    let prof = compile(&Input::from_policy(&policy, 41000)).unwrap();
    let sockets: Vec<(&str, &str)> = prof
        .params
        .iter()
        .filter(|(k, _)| k.starts_with("UNIX_SOCKET_"))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    // Canonical spelling (/var → /private/var), sorted, one parameter each.
    assert_eq!(
        sockets,
        [
            ("UNIX_SOCKET_0", "/Users/me/.docker/run/docker.sock"),
            ("UNIX_SOCKET_1", "/private/var/sandpit-test/agent.sock"),
        ]
    );
    for (k, _) in &sockets {
        assert!(prof.sbpl.contains(&format!(
            "(allow network-outbound (remote unix-socket (subpath (param \"{k}\"))))"
        )));
    }
    // No rule of the profile denies network-outbound: nothing after the allowance
    // can take it back, whatever the order.
    assert!(!rules(&prof)
        .iter()
        .any(|r| !r.allow && r.ops.iter().any(|o| op_matches(o, "network-outbound"))));
    assert!(seatbelt_allows(&prof, "network-outbound", docker));
    assert!(seatbelt_allows(
        &prof,
        "network-outbound",
        "/private/var/sandpit-test/agent.sock"
    ));
    // The path and what lies beneath it, as `decide` holds an entry: not a sibling.
    assert!(!seatbelt_allows(
        &prof,
        "network-outbound",
        "/Users/me/.docker/run/other.sock"
    ));
    assert!(seatbelt_allows(
        &prof,
        "network-outbound",
        "/Users/me/.docker/run/docker.sock/x"
    ));
    // Reading and writing the blocked directory stay denied, the socket file included.
    for path in [
        "/Users/me/.docker",
        "/Users/me/.docker/config.json",
        "/Users/me/.docker/run",
        docker,
    ] {
        assert!(!seatbelt_allows(&prof, "file-read-data", path), "{path}");
        assert!(!seatbelt_allows(&prof, "file-write-data", path), "{path}");
        assert!(!seatbelt_allows(&prof, "file-write-unlink", path), "{path}");
    }
    check_order(&prof);
    check_params_used(&prof);
}

#[test]
fn golden_isolation_and_devices() {
    let input = Input {
        trustd: true,
        unix_sockets: vec![p("/Users/me/.docker/run/docker.sock")],
        devices: vec![p("/dev/cu.usbmodem1101")],
        ..agent()
    };
    golden("isolation-devices", &compile(&input).unwrap());
}

/// Devices no sandboxed program needs: disks, the packet filter, the audit pipe,
/// kernel memory and log, consoles, serial lines.
const HOST_DEVICES: &[&str] = &[
    "/dev/disk0",
    "/dev/disk3s1",
    "/dev/rdisk0",
    "/dev/rdisk3s5",
    "/dev/bpf0",
    "/dev/bpf12",
    "/dev/auditpipe",
    "/dev/auditsessions",
    "/dev/klog",
    "/dev/kmem",
    "/dev/mem",
    "/dev/console",
    "/dev/io8log",
    "/dev/cu.usbmodem1101",
    "/dev/tty.Bluetooth-Incoming-Port",
    "/dev/ttys",
    "/dev/ttysx",
    "/dev/fdx",
    "/dev/nullx",
];

/// Devices every terminal program may use.
const PROGRAM_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/ttys000",
    "/dev/ttys012",
    "/dev/ttyp0",
    "/dev/ptyp0",
    "/dev/ptywf",
    "/dev/fd/0",
    "/dev/fd/12",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/dtracehelper",
];

#[test]
fn dev_is_denied_but_for_what_programs_need() {
    // Worst case for /dev: everything readable and a writable root above /dev.
    let input = Input {
        allow_write: vec![p("/"), p("/Users/me/project")],
        ..agent()
    };
    let prof = compile(&input).unwrap();
    let t = &prof.sbpl;
    assert!(
        t.contains("(deny file-read* file-write* (subpath \"/dev\"))"),
        "{t}"
    );
    // After every rule that would open it again: the global read allow and the
    // writable roots (check_order holds it against each of them).
    let deny = t
        .find("(deny file-read* file-write* (subpath \"/dev\"))")
        .unwrap();
    assert!(t.rfind("(allow file-read*)").unwrap() < deny);
    assert!(t.rfind("(allow file-write* (subpath").unwrap() < deny);
    check_order(&prof);

    for dev in HOST_DEVICES {
        for op in [
            "file-read-data",
            "file-write-data",
            "file-write-create",
            "file-write-unlink",
            "file-ioctl",
        ] {
            assert!(!seatbelt_allows(&prof, op, dev), "{op} {dev}");
        }
    }
    for dev in PROGRAM_DEVICES {
        assert!(seatbelt_allows(&prof, "file-read-data", dev), "read {dev}");
        assert!(
            seatbelt_allows(&prof, "file-write-data", dev),
            "write {dev}"
        );
        // Opened, never created, removed or renamed.
        assert!(
            !seatbelt_allows(&prof, "file-write-unlink", dev),
            "unlink {dev}"
        );
        assert!(
            !seatbelt_allows(&prof, "file-write-create", dev),
            "create {dev}"
        );
    }
    for dev in ["/dev/random", "/dev/urandom"] {
        assert!(seatbelt_allows(&prof, "file-read-data", dev), "read {dev}");
        assert!(
            !seatbelt_allows(&prof, "file-write-data", dev),
            "write {dev}"
        );
    }
    for dev in ["/dev/tty", "/dev/ptmx", "/dev/ttys003", "/dev/dtracehelper"] {
        assert!(seatbelt_allows(&prof, "file-ioctl", dev), "ioctl {dev}");
    }
    // The directory can be listed, nothing created in it.
    assert!(seatbelt_allows(&prof, "file-read-data", "/dev"));
    assert!(!seatbelt_allows(&prof, "file-write-create", "/dev/evil"));
    // Outside /dev the writable root still writes.
    assert!(seatbelt_allows(&prof, "file-write-data", "/Users/me/x"));
    assert!(seatbelt_allows(&prof, "file-read-data", "/devx/y"));
}

#[test]
fn dev_rules_explain_every_allow() {
    // Every paragraph of the /dev file that allows says why, as the base does.
    for para in DEV.split("\n\n") {
        if para.contains("(allow") {
            let first = para.trim_start().lines().next().unwrap();
            assert!(
                first.starts_with(';'),
                "an allow without a comment saying why:\n{para}"
            );
        }
    }
    // It opens devices only: no subpath but /dev/fd, no write beyond data.
    let code: String = DEV
        .lines()
        .filter(|l| !l.trim_start().starts_with(';'))
        .collect::<Vec<_>>()
        .join("\n");
    for never in ["(allow file-write*", "(allow default"] {
        assert!(!code.contains(never), "{never}");
    }
    assert_eq!(code.matches("(subpath").count(), 2, "{code}");
    // The base no longer opens devices itself: the /dev rules follow the file rules.
    assert!(!BASE
        .lines()
        .any(|l| !l.trim_start().starts_with(';') && l.contains("/dev")));
}

#[test]
fn files_devices_pass_through_unless_reading_them_is_refused() {
    let policy = user_policy(
        "[files]\ndevices = [\"/dev/cu.usbmodem1101\", \"/dev/disk4\"]\nblock_read = [\"/dev/disk4\"]\n",
    );
    let input = Input::from_policy(&policy, 41000);
    assert_eq!(input.devices, vec![p("/dev/cu.usbmodem1101")]);
    let prof = compile(&input).unwrap();
    assert!(prof
        .sbpl
        .contains("(allow file-read* file-write-data file-ioctl (subpath (param \"DEVICE_0\")))"));
    assert!(prof
        .params
        .contains(&("DEVICE_0".to_string(), "/dev/cu.usbmodem1101".to_string())));
    for op in ["file-read-data", "file-write-data", "file-ioctl"] {
        assert!(
            seatbelt_allows(&prof, op, "/dev/cu.usbmodem1101"),
            "{op} of a passed-through device"
        );
        assert!(
            !seatbelt_allows(&prof, op, "/dev/disk4"),
            "{op} of a refused one"
        );
    }
    assert!(!seatbelt_allows(
        &prof,
        "file-write-unlink",
        "/dev/cu.usbmodem1101"
    ));
    check_order(&prof);
    // Without the entry the same device is closed.
    let plain = compile(&Input::from_policy(&default_policy(), 41000)).unwrap();
    assert!(!seatbelt_allows(
        &plain,
        "file-read-data",
        "/dev/cu.usbmodem1101"
    ));

    // A directory of devices passes with what it holds.
    let dri = compile(&Input {
        devices: vec![p("/dev/dri")],
        ..agent()
    })
    .unwrap();
    assert!(seatbelt_allows(&dri, "file-read-data", "/dev/dri/card0"));
    // Anything but a device is refused: it would be opened after every file rule.
    for bad in ["/Users/me/.ssh", "/dev", "/devices/x"] {
        assert!(
            compile(&Input {
                devices: vec![p(bad)],
                ..agent()
            })
            .is_err(),
            "{bad}"
        );
    }
}

/// Globs in path lists become regular expressions that match exactly what the
/// policy's own matcher holds (a path the glob matches and everything beneath),
/// checked on many paths with a regex engine; plain paths stay parameters.
#[test]
fn globs_compile_to_regular_expressions_that_mean_what_decide_does() {
    let input = Input {
        block_read: vec![
            PathBuf::from("/Users/u/proj/**/.env"),
            PathBuf::from("/Users/u/.config/*/cred?.json"),
        ],
        allow_write: vec![PathBuf::from("/Users/u/proj")],
        block_write: vec![PathBuf::from("/Users/u/proj/keys/**/*.pem")],
        ..Default::default()
    };
    let p = compile(&input).unwrap();
    let regexes: Vec<&str> = p
        .sbpl
        .lines()
        .filter_map(|l| l.split_once("(regex #\"").map(|(_, r)| r))
        .map(|r| r.split_once("\")").unwrap().0)
        .filter(|r| r.starts_with("^/Users/u"))
        .collect();
    assert!(
        p.sbpl
            .contains(r#"(deny file-read* (regex #"^/Users/u/proj(/[^/]+)*/\.env(/.*)?$"))"#),
        "{}",
        p.sbpl
    );
    assert!(p.sbpl.contains(
        r#"(deny file-write* file-link (regex #"^/Users/u/proj/keys(/[^/]+)*/[^/]*\.pem(/.*)?$"))"#
    ));
    // The literal part of a protected glob inside the workspace cannot be renamed away.
    assert!(p
        .params
        .iter()
        .any(|(n, v)| n.starts_with("PROTECTED_PARENT") && v == "/Users/u/proj/keys"));
    let globs = [
        "/Users/u/proj/**/.env",
        "/Users/u/.config/*/cred?.json",
        "/Users/u/proj/keys/**/*.pem",
    ];
    let paths = [
        "/Users/u/proj/.env",
        "/Users/u/proj/a/b/.env",
        "/Users/u/proj/a/b/.env/x",
        "/Users/u/proj/.envx",
        "/Users/u/proj/a.env",
        "/Users/u/projx/.env",
        "/Users/u/.config/app/cred1.json",
        "/Users/u/.config/app/cred12.json",
        "/Users/u/.config/a/b/cred1.json",
        "/Users/u/.config/cred1.json",
        "/Users/u/.config/app/credXjson",
        "/Users/u/proj/keys/k.pem",
        "/Users/u/proj/keys/a/k.pem",
        "/Users/u/proj/keys/a/k.pemx",
        "/Users/u/proj/k.pem",
    ];
    let mut regexes = regexes;
    regexes.sort_unstable();
    regexes.dedup();
    assert_eq!(regexes.len(), globs.len(), "{}", p.sbpl);
    // Each glob has a regular expression that holds for exactly the paths the
    // policy's matcher holds it for.
    for g in globs {
        let want: Vec<bool> = paths
            .iter()
            .map(|path| sandpit_policy::glob::root_depth(path.as_bytes(), g.as_bytes()).is_some())
            .collect();
        assert!(
            want.iter().any(|w| *w) && want.iter().any(|w| !*w),
            "{g}: a weak case"
        );
        let agrees = regexes.iter().any(|re| {
            let engine = regex::Regex::new(re).unwrap();
            paths
                .iter()
                .map(|path| engine.is_match(path))
                .collect::<Vec<_>>()
                == want
        });
        assert!(agrees, "{g}: no regular expression of {regexes:?} agrees");
    }
    // A quote cannot be carried into a regular expression.
    let bad = Input {
        block_read: vec![PathBuf::from("/Users/u/\"*")],
        ..Default::default()
    };
    assert!(compile(&bad).is_err());
}

// ---------------------------------------------------------------------------------
// The GUI allowance: wrapped apps and `--gui` only.

fn demo_app() -> Gui {
    Gui {
        app: Some(App::new("com.example.demo", Path::new("/Users/me")).unwrap()),
    }
}

#[test]
fn golden_gui_app_and_gui_without_app() {
    let with_app = compile(&Input {
        gui: Some(demo_app()),
        ..agent()
    })
    .unwrap();
    golden("gui-app", &with_app);
    let bare = compile(&Input {
        gui: Some(Gui { app: None }),
        ..agent()
    })
    .unwrap();
    golden("gui-no-app", &bare);
    assert!(bare.params.iter().all(|(k, _)| !k.starts_with("APP_")));
}

#[test]
fn without_gui_no_window_server_pasteboard_or_fonts() {
    let policy = default_policy();
    let plain = compile(&Input::from_policy(&policy, 41000)).unwrap();
    assert_eq!(Input::from_policy(&policy, 41000).gui, None);
    let agent_plain = compile(&agent()).unwrap();
    for prof in [&plain, &agent_plain] {
        for service in [
            "com.apple.windowserver.active",
            "com.apple.pasteboard.1",
            "com.apple.fonts",
            "iokit-open",
            "extension",
            "preference-domain",
        ] {
            assert!(!prof.sbpl.contains(service), "{service} without --gui");
        }
    }
}

#[test]
fn gui_allowance_reaches_no_other_app_and_the_policy_still_wins() {
    let prof = compile(&Input {
        gui: Some(demo_app()),
        ..agent()
    })
    .unwrap();
    let t = &prof.sbpl;
    for want in [
        "(allow mach-lookup\n  (global-name \"com.apple.windowserver.active\")",
        "(global-name \"com.apple.pasteboard.1\")",
        "(global-name \"com.apple.fonts\")",
        "(extension \"com.apple.app-sandbox.read-write\")",
        "(allow user-preference-write (preference-domain (param \"APP_ID_0\")))",
    ] {
        assert!(t.contains(want), "{want}");
    }
    // Apple Events and LaunchServices: still denied, after everything.
    let tail = &t[t.find("(deny lsopen)").unwrap()..];
    assert!(tail.contains("(deny appleevent-send)"));
    assert!(!tail.contains("(allow"));
    let code: String = GUI
        .lines()
        .filter(|l| !l.trim_start().starts_with(';'))
        .collect::<Vec<_>>()
        .join("\n");
    for never in [
        "appleevent",
        "lsopen",
        "launchservicesd",
        "com.apple.lsd",
        "launchd",
        "SecurityServer",
        "network",
        "(allow mach-lookup)",
        "(allow iokit-open)",
        "process-exec",
        "distributed_notifications",
    ] {
        assert!(!code.contains(never), "the GUI allowance contains {never}");
    }

    // The app's own data is readable and writable; another app's is not.
    let own = [
        "/Users/me/Library/Containers/com.example.demo/Data/x",
        "/Users/me/Library/Caches/com.example.demo/c",
        "/Users/me/Library/Saved Application State/com.example.demo.savedState/w.data",
        "/Users/me/Library/Preferences/com.example.demo.plist",
    ];
    for f in own {
        assert!(seatbelt_allows(&prof, "file-write-data", f), "{f}");
        assert!(seatbelt_allows(&prof, "file-read-data", f), "{f}");
    }
    for f in [
        "/Users/me/Library/Containers/com.example.other/Data/x",
        "/Users/me/Library/Containers/com.example.demox/x",
        "/Users/me/Library/Preferences/com.example.other.plist",
        "/Users/me/Library/Preferences/com.example.demo.plist.evil",
        "/Users/me/Library/Caches/com.example.demo2/c",
    ] {
        assert!(!seatbelt_allows(&prof, "file-write-data", f), "{f}");
    }
    // Without --gui the app's own data is not writable.
    let plain = compile(&agent()).unwrap();
    for f in own {
        assert!(!seatbelt_allows(&plain, "file-write-data", f), "{f}");
    }

    // Every denial of the policy comes after the GUI part: a secret stays
    // unreadable, a protected path unwritable, whatever the app asks for.
    let gui_at = t.find("GUI allowance").unwrap();
    let first_compiled = t.find("; --- reads (compiled)").unwrap();
    assert!(gui_at < first_compiled);
    assert!(!seatbelt_allows(
        &prof,
        "file-read-data",
        "/Users/me/.ssh/id_rsa"
    ));
    assert!(!seatbelt_allows(
        &prof,
        "file-write-data",
        "/Users/me/project/.git/hooks/pre-commit"
    ));
    // A policy that blocks the app's container keeps it blocked.
    let blocked = compile(&Input {
        gui: Some(demo_app()),
        block_read: vec![p("/Users/me/Library/Containers")],
        ..agent()
    })
    .unwrap();
    assert!(!seatbelt_allows(
        &blocked,
        "file-read-data",
        "/Users/me/Library/Containers/com.example.demo/Data/x"
    ));
    assert!(!seatbelt_allows(
        &blocked,
        "file-write-data",
        "/Users/me/Library/Containers/com.example.demo/Data/x"
    ));
}

#[test]
fn gui_rules_explain_every_allow() {
    let code: String = GUI
        .lines()
        .filter(|l| !l.trim_start().starts_with(';'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !code.contains("(version"),
        "the GUI part is no whole profile"
    );
    assert!(!code.contains("(deny"), "the GUI part only allows");
    for para in GUI.split("\n\n") {
        if para.contains("(allow") {
            let first = para.trim_start().lines().next().unwrap();
            assert!(
                first.starts_with(';'),
                "an allow without a comment saying why:\n{para}"
            );
        }
    }
}

#[test]
fn app_identifiers_are_checked_and_hostile_homes_are_parameters() {
    for bad in [
        "",
        "com..demo",
        ".demo",
        "demo.",
        "com/demo",
        "../../x",
        "com.demo\"",
        "com.d\u{e9}mo",
        "com.demo\n(allow default)",
        "com demo",
        "com.*",
    ] {
        assert!(App::new(bad, Path::new("/Users/me")).is_err(), "{bad:?}");
    }
    for good in ["com.example.demo", "org.mozilla.firefox", "com.A-b_c.9"] {
        assert!(App::new(good, Path::new("/Users/me")).is_ok(), "{good}");
    }
    let shape = |home: &str| Input {
        gui: Some(Gui {
            app: Some(App::new("com.example.demo", Path::new(home)).unwrap()),
        }),
        ..Input::default()
    };
    let plain = compile(&shape("/Users/plain")).unwrap();
    for bad in HOSTILE {
        let home = format!("/Users/{bad}");
        let hostile = compile(&shape(&home)).unwrap();
        assert_eq!(plain.sbpl, hostile.sbpl, "home {bad:?} changed the profile");
        assert!(hostile.params.iter().any(|(_, v)| v.starts_with(&home)));
    }
    // A home with glob characters is a plain path, not a pattern.
    let globby = compile(&shape("/Users/a*[b]")).unwrap();
    assert_eq!(plain.sbpl, globby.sbpl);
}

#[test]
fn dns_responder_port_is_reachable_with_the_proxy_only() {
    let with_dns = compile(&Input {
        dns_port: Some(41001),
        ..agent()
    })
    .unwrap();
    let outbound: Vec<&str> = with_dns
        .sbpl
        .lines()
        .filter(|l| l.starts_with("(allow network-outbound (remote tcp"))
        .collect();
    assert_eq!(
        outbound,
        vec![
            "(allow network-outbound (remote tcp \"localhost:41000\"))",
            "(allow network-outbound (remote tcp \"localhost:41001\"))",
        ]
    );
    // Still TCP only: the resolver hooks speak DNS over TCP; no UDP socket.
    assert!(!with_dns.sbpl.contains("SOCK_DGRAM"));
    // Offline: neither the proxy nor the responder.
    let offline = compile(&Input {
        dns_port: Some(41001),
        network: Network::Offline,
        ..agent()
    })
    .unwrap();
    assert!(!offline.sbpl.contains("remote tcp"), "{}", offline.sbpl);
    // Without the field, the profile is the one of the goldens.
    assert!(!compile(&agent()).unwrap().sbpl.contains("41001"));
    assert!(compile(&Input {
        dns_port: Some(0),
        ..agent()
    })
    .is_err());
}
