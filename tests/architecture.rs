//! The launcher's modules depend one way (docs/architecture.md): `cli` → `run` →
//! `launch` → the layers (`sandbox`, `proxy`, `dns`, `audit`, `inject`,
//! `adversary`) → what they share (`service`, `splice`, `sys`, …) → the
//! `sandpit-policy` crate. Read from the sources: every `crate::MODULE` path in a
//! module's files is an edge. `cargo test --test architecture -- --nocapture`
//! prints the graph.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Module → the modules its code names (`crate::X`), comments left out.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut g = BTreeMap::new();
    for e in std::fs::read_dir(src()).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "main" || name == "lib" {
            continue;
        }
        let mut files = vec![];
        if p.is_dir() {
            rust_files(&p, &mut files);
        } else {
            files.push(p.clone());
        }
        let mut deps = BTreeSet::new();
        for f in files {
            for line in std::fs::read_to_string(&f).unwrap().lines() {
                let code = line.split("//").next().unwrap_or_default();
                for (i, _) in code.match_indices("crate::") {
                    let rest = &code[i + "crate::".len()..];
                    let m: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
                        .collect();
                    if !m.is_empty() && m != name {
                        deps.insert(m);
                    }
                }
            }
        }
        g.insert(name, deps);
    }
    g
}

/// A cycle through `start`, if any (depth-first).
fn cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &BTreeMap<String, BTreeSet<String>>,
        n: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(g, d, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in g.keys() {
        if let Some(c) = visit(g, n, &mut vec![], &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn modules_depend_one_way() {
    let g = graph();
    for (m, deps) in &g {
        println!(
            "{m} -> {}",
            deps.iter().cloned().collect::<Vec<_>>().join(" ")
        );
    }
    // The graph was read: the modules every run goes through are there.
    for m in [
        "cli", "run", "launch", "sandbox", "proxy", "dns", "audit", "inject",
    ] {
        assert!(g.contains_key(m), "no module {m} in {:?}", g.keys());
    }
    assert_eq!(cycle(&g), None, "an import cycle between modules");
    let importers = |m: &str| -> Vec<&String> {
        g.iter()
            .filter(|(_, d)| d.contains(m))
            .map(|(k, _)| k)
            .collect()
    };
    assert!(
        importers("cli").is_empty(),
        "cli is imported by {:?}",
        importers("cli")
    );
    assert_eq!(
        importers("run"),
        ["cli"],
        "run is imported by more than cli"
    );
    for m in importers("launch") {
        assert!(["cli", "run"].contains(&m.as_str()), "{m} imports launch");
    }
    // The layers do not reach up, and the kernel layer does not reach into the
    // network services (what they share is in `service` and `splice`).
    let upper = ["cli", "run", "launch"];
    for layer in [
        "sandbox",
        "proxy",
        "dns",
        "audit",
        "inject",
        "adversary",
        "inspect",
    ] {
        for d in &g[layer] {
            assert!(!upper.contains(&d.as_str()), "{layer} imports {d}");
        }
    }
    for d in ["proxy", "dns", "adversary", "audit"] {
        assert!(!g["sandbox"].contains(d), "the kernel layer imports {d}");
    }
    assert!(!g["dns"].contains("proxy"), "dns imports proxy");
    assert!(!g["audit"].contains("proxy"), "audit imports proxy");
    // The filtering SSH agent decides with the policy crate alone (what it signs
    // must not depend on the proxy's or any layer's state), and only the launch
    // and the run plan use it.
    assert!(
        g["sshagent"].is_empty(),
        "sshagent imports {:?}",
        g["sshagent"]
    );
    for m in importers("sshagent") {
        assert!(
            ["run", "launch"].contains(&m.as_str()),
            "{m} imports sshagent"
        );
    }
}

/// The injected library links the policy crate and the reviewer's protocol, not
/// the shims or the launcher.
#[test]
fn the_injected_library_depends_on_policy_and_protocol_only() {
    let manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandpit-dylib/Cargo.toml"),
    )
    .unwrap();
    let deps: Vec<&str> = manifest
        .lines()
        .skip_while(|l| l.trim() != "[dependencies]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split('=').next().map(str::trim))
        .filter(|d| d.starts_with("sandpit"))
        .collect();
    assert_eq!(deps, ["sandpit-policy", "sandpit-review"], "{manifest}");
}

/// Every program the launcher starts on the host goes through `hostcmd::command`
/// (in `/`, its PATH and environment without the run's writable roots; issue 41):
/// no other module makes a `std::process::Command` outside its tests, but the
/// macOS sandbox (`sandbox/macos/`), whose command is the sandboxed one
/// (`sandbox-exec`).
#[test]
fn host_programs_start_only_through_hostcmd() {
    let mut files = vec![];
    rust_files(&src(), &mut files);
    let mut found = vec![];
    for f in files {
        if f == src().join("hostcmd.rs") || f.starts_with(src().join("sandbox/macos")) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        // The unit tests at the end of a file may start what they like.
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or_default();
            if line.contains("Command::new(") || line.contains("process::Command") {
                found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "programs started on the host other than through hostcmd::command:\n{}",
        found.join("\n")
    );
}
