//! `tests/macos/check-on-mac.sh`, the script a person with a Mac runs, checked
//! here as far as Linux can: it parses (`bash -n`), shellcheck finds nothing, it
//! has every part the macOS work promises (wrap, shims, adversary, name resolution,
//! lifetime) each ending in one summary line, and the programs it builds on the Mac
//! are sound: the C probe compiles here (POSIX only) and every Python helper
//! compiles. What the script finds on a Mac is not known here.
//!
//! Needs shellcheck (`.ci/install`); without it the test fails unless
//! `SANDPIT_MACHINE_LACKS` names `shellcheck`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/macos/check-on-mac.sh")
}

fn text() -> String {
    std::fs::read_to_string(script()).unwrap()
}

/// The bodies of the here-documents opened by a line containing `opener`
/// (`<<'END'` … `END`).
fn heredocs(text: &str, opener: &str) -> Vec<String> {
    let mut out = vec![];
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if !l.contains(opener) {
            continue;
        }
        let end = l
            .rsplit("<<'")
            .next()
            .unwrap()
            .trim_end_matches(['\'', ' ', '&']);
        let end = end.split('\'').next().unwrap();
        let mut body = String::new();
        for b in lines.by_ref() {
            if b == end {
                break;
            }
            body.push_str(b);
            body.push('\n');
        }
        out.push(body);
    }
    out
}

#[test]
fn the_mac_script_parses_and_shellcheck_finds_nothing() {
    let o = Command::new("bash")
        .arg("-n")
        .arg(script())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    match Command::new("shellcheck").arg(script()).output() {
        Ok(o) => assert!(
            o.status.success(),
            "shellcheck:\n{}",
            String::from_utf8_lossy(&o.stdout)
        ),
        Err(e) => assert!(
            common::machine_lacks("shellcheck"),
            "shellcheck cannot run ({e}): install it (.ci/install) or set SANDPIT_MACHINE_LACKS=shellcheck"
        ),
    }
}

#[test]
fn every_part_is_there_with_its_summary_line() {
    let t = text();
    let parts: Vec<&str> = t
        .lines()
        .filter_map(|l| l.strip_prefix("part \""))
        .collect();
    let want = [
        "1 (sandpit check)",
        "2 (Seatbelt profile",
        "3 (sandpit run",
        "4 (sandpit wrap",
        "5 (--shims",
        "6 (the adversary",
        "7 (name resolution",
        "8 (lifetime",
    ];
    assert_eq!(parts.len(), want.len(), "{parts:?}");
    for (p, w) in parts.iter().zip(want) {
        assert!(p.starts_with(w), "part {p:?}, want {w:?}");
    }
    // Each part ends in its summary line (end_part), and the end repeats them all.
    assert!(t.contains("summaries+=(\"SUMMARY part $part_name: $ppass passed, $pfail failed\")"));
    assert!(t.trim_end().ends_with("finish 0"));
    // What each new part must exercise.
    for (what, needle) in [
        (
            "wrap checks the signature",
            "codesign --verify --strict \"$wrapped\"",
        ),
        (
            "wrap checks Info.plist",
            "plutil -extract CFBundleExecutable",
        ),
        ("wrap checks the launcher", "run --gui"),
        ("the GUI app draws", "window=1"),
        ("shims block curl", "run --shims -- curl"),
        ("shims allow curl", "run --shims --allow-host"),
        ("a scripted reviewer", "[adversary]"),
        ("name resolution by getaddrinfo", "resolve allowed.test"),
        ("and gethostbyname", "hostbyname allowed.test"),
        ("the rule in the audit log", "network.block"),
        ("daemons gone", "daemon \"$WS/d1.pid\""),
    ] {
        assert!(t.contains(needle), "{what}: {needle:?} not in the script");
    }
}

#[test]
fn the_probe_it_builds_compiles_and_its_python_helpers_parse() {
    let t = text();
    let c = heredocs(&t, "cat >\"$work/probe.c\" <<'C'");
    assert_eq!(c.len(), 1);
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("probe.c"), &c[0]).unwrap();
    let o = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(d.path().join("probe"))
        .arg(d.path().join("probe.c"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Positive control of the probe itself (no sandpit): resolves localhost.
    let o = Command::new(d.path().join("probe"))
        .args(["resolve", "localhost"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("addr "),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    let py = heredocs(&t, "<<'PY'");
    assert_eq!(py.len(), 3, "the listeners and the scripted reviewer");
    for (i, body) in py.iter().enumerate() {
        let f = d.path().join(format!("helper{i}.py"));
        std::fs::write(&f, body).unwrap();
        let o = Command::new("python3")
            .args(["-m", "py_compile"])
            .arg(&f)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "helper {i}:\n{body}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
