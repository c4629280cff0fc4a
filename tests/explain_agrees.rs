//! `sandpit explain` says what a run does, and `sandpit plan` shows what it will
//! enforce, for reads, writes, environment variables and commands, in every network
//! mode and both kernel modes (namespaces, and the Landlock-only fallback), for a
//! dynamic program (the interposer answers first) and a static one (the kernel
//! layer alone). Connections, UDP, listening and Unix sockets are held against
//! explain the same way in `tests/modes.rs`.
//!
//! Explain and the run judge with one effective policy (`run::effective`): the
//! private `/tmp` of namespace mode, the package cache, the run's own directory.
//! Where a mode is weaker for static programs (the fallback leaves protected paths
//! inside the workspace writable, and no mode matches a static program's own
//! exec), the run's start-up line says so, and the test holds it to that.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod kernel_support;

use std::path::{Path, PathBuf};

use common::TestHome;
use kernel_support::build_probe;

/// What one operation does to a real process: allowed, or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A read by a command the agent spawned (`cat`); explained for the agent, as
    /// the two agree wherever `files.agent_read` names nothing.
    Read,
    Write,
    Env,
    Exec,
    /// A read by the agent itself (the shell's own redirect): `explain read`.
    ReadAgent,
    /// A read by a command the agent spawned: `explain read --spawned`.
    ReadSpawned,
}

struct Op {
    kind: Kind,
    /// A path, a variable's name, or a command line.
    target: String,
    /// Whether the static program can be asked (exec is matched by the interposer
    /// and the shims only: a static program's own exec is not, and explain says so).
    for_static: bool,
}

/// The network modes, as a user config's `[network]` table.
const NET: &[(&str, &str)] = &[
    ("offline", "mode = \"offline\""),
    ("filtered", "mode = \"filtered\""),
    ("unrestricted", "mode = \"unrestricted\""),
];

/// The kernel modes: (label, forced fallback).
const KERNEL: &[(&str, bool)] = &[("namespaces", false), ("fallback", true)];

const EXEC_BLOCKED: &str = "table-exec-canary";

fn ops(h: &TestHome, cache: &Path) -> Vec<Op> {
    let w = h.workspace();
    let home = h.home();
    let p = |kind, path: PathBuf| Op {
        kind,
        target: path.display().to_string(),
        for_static: true,
    };
    vec![
        p(Kind::Read, w.join("src/lib.rs")),
        p(Kind::Read, home.join("notes.txt")),
        p(Kind::Read, home.join(".ssh/id_rsa")),
        p(Kind::Read, home.join(".aws/credentials")),
        p(Kind::Read, w.join("deep/er/.env")),
        p(Kind::Read, w.join(".env.example")),
        // The agent's own login (`files.agent_read` in the user config): the agent
        // reads it, no command it spawns does.
        Op {
            kind: Kind::ReadAgent,
            target: home.join(".agentlogin").display().to_string(),
            for_static: false,
        },
        p(Kind::ReadSpawned, home.join(".agentlogin")),
        p(Kind::Write, w.join("out.txt")),
        p(Kind::Write, w.join(".git/hooks/pre-commit")),
        p(Kind::Write, w.join(".sandpit.toml")),
        p(Kind::Write, home.join(".bashrc")),
        p(Kind::Write, home.join("elsewhere.txt")),
        p(Kind::Write, home.join(".sandpit/planted")),
        p(Kind::Write, PathBuf::from("/tmp/sandpit-table-probe")),
        p(Kind::Write, PathBuf::from("/dev/shm/sandpit-table-probe")),
        p(Kind::Write, cache.join("planted")),
        Op {
            kind: Kind::Env,
            target: "TABLE_GITHUB_TOKEN".into(),
            for_static: true,
        },
        Op {
            kind: Kind::Env,
            target: "TABLE_PLAIN".into(),
            for_static: true,
        },
        Op {
            kind: Kind::Exec,
            target: format!("/bin/echo {EXEC_BLOCKED}"),
            for_static: false,
        },
        Op {
            kind: Kind::Exec,
            target: "/bin/echo table-exec-fine".into(),
            for_static: false,
        },
    ]
}

/// A home with a workspace that is a git repository, files to read, and the user
/// config for `net`.
///
/// The home lies outside `/tmp`, as a user's does: with HOME under `/tmp` the
/// run's private `/tmp` brings HOME back read-only, and neither explain nor the
/// interposer can say "all of /tmp but HOME", so they refuse `/tmp` writes that the
/// kernel layer would let a static program make in the run's own tmpfs
/// (docs/run.md).
fn setup(net: &str) -> TestHome {
    let h = TestHome::new_in("/var/tmp");
    let w = h.workspace();
    let home = h.home();
    for (p, c) in [
        (w.join("src/lib.rs"), "pub fn f() {}\n"),
        (home.join("notes.txt"), "notes\n"),
        (home.join(".ssh/id_rsa"), "KEY\n"),
        (home.join(".aws/credentials"), "[default]\n"),
        (w.join("deep/er/.env"), "SECRET=1\n"),
        (w.join(".env.example"), "SECRET=\n"),
        (w.join(".git/HEAD"), "ref: refs/heads/main\n"),
        (w.join(".git/hooks/README"), "hooks\n"),
        (home.join(".bashrc"), "# rc\n"),
        (home.join(".agentlogin"), "LOGIN\n"),
    ] {
        h.write(&p, c);
    }
    h.user_config(&format!(
            "[network]\n{net}\n[files]\nblock_read = [\"{}/**/.env\"]\nagent_read = [\"~/.agentlogin\"]\n[exec]\nblock = [\"{EXEC_BLOCKED}\"]\n",
            w.display()
        ),
    );
    h
}

/// `sandpit explain …`'s verdict (ALLOW, DENY, REVIEW) for `op`, as the test user.
fn explain(h: &TestHome, fallback: bool, op: &Op) -> String {
    let mut c = h.sandpit();
    c.arg("explain");
    match op.kind {
        Kind::Read | Kind::ReadAgent => c.args(["read", &op.target]),
        Kind::ReadSpawned => c.args(["read", "--spawned", &op.target]),
        Kind::Write => c.args(["write", &op.target]),
        Kind::Env => c.args(["env", &op.target]),
        Kind::Exec => c.args(["exec", "--"]).args(op.target.split(' ')),
    };
    if fallback {
        c.env("SANDPIT_FORCE_FALLBACK", "1");
    }
    let out = common::explained(&c.output().unwrap());
    out.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// One shell line that prints `OP <index> yes|no` for a dynamic program.
fn dynamic_line(i: usize, op: &Op) -> String {
    let t = &op.target;
    match op.kind {
        Kind::Read | Kind::ReadSpawned => {
            format!("if cat '{t}' >/dev/null 2>&1; then echo OP {i} yes; else echo OP {i} no; fi")
        }
        Kind::ReadAgent => {
            format!(
                "if read -r _ < '{t}' 2>/dev/null; then echo OP {i} yes; else echo OP {i} no; fi"
            )
        }
        Kind::Write => format!(
            "if (printf x >> '{t}') 2>/dev/null; then echo OP {i} yes; else echo OP {i} no; fi"
        ),
        Kind::Env => {
            format!("if [ -n \"${{{t}+set}}\" ]; then echo OP {i} yes; else echo OP {i} no; fi")
        }
        Kind::Exec => format!(
            "if {t} 2>/dev/null | grep -q table-exec; then echo OP {i} yes; else echo OP {i} no; fi"
        ),
    }
}

/// What each op did in a run, by index: `Some(true)` allowed.
fn outcomes(out: &str, n: usize) -> Vec<Option<bool>> {
    let mut v = vec![None; n];
    for l in out.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if let ["OP", i, r] = f[..] {
            if let Ok(i) = i.parse::<usize>() {
                if i < n {
                    v[i] = Some(r == "yes");
                }
            }
        }
    }
    v
}

/// The run's package cache, as `sandpit plan --json` names it.
fn planned_cache(h: &TestHome) -> PathBuf {
    let o = h
        .sandpit()
        .args(["plan", "--json", "--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "sandpit plan: {}", common::text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    PathBuf::from(
        v["package_cache"]
            .as_str()
            .expect("a package cache is planned"),
    )
}

/// Restore what a run may have changed, so the next run starts from the same state.
fn reset(h: &TestHome, ops: &[Op]) {
    for op in ops.iter().filter(|o| o.kind == Kind::Write) {
        let p = Path::new(&op.target);
        if p.starts_with(h.dir.path()) && p != h.home().join(".bashrc") {
            let _ = std::fs::remove_file(p);
        }
    }
    h.write(&h.home().join(".bashrc"), "# rc\n");
}

#[test]
fn explain_and_a_run_agree_on_files_env_and_exec_in_every_mode_and_linkage() {
    let mut wrong = vec![];
    let mut checked = 0;
    for (net_label, net) in NET {
        let h = setup(net);
        let cache = planned_cache(&h);
        let ops = ops(&h, &cache);
        let read_probe = build_probe(&h, "static_read", true);
        let write_probe = build_probe(&h, "static_write", true);
        let env_probe = build_probe(&h, "env_probe", true);
        for (kernel_label, fallback) in KERNEL {
            let said: Vec<String> = ops.iter().map(|op| explain(&h, *fallback, op)).collect();
            for (linkage, is_static) in [("dynamic", false), ("static", true)] {
                reset(&h, &ops);
                let mut c = h.sandpit();
                c.arg("run");
                if *fallback {
                    c.arg("--allow-degraded").env("SANDPIT_FORCE_FALLBACK", "1");
                }
                c.env("TABLE_GITHUB_TOKEN", "ghp_table")
                    .env("TABLE_PLAIN", "plain");
                let script = if is_static {
                    // The kernel layer alone: no interposer anywhere, and each file
                    // operation made with raw system calls by a static program.
                    c.arg("--kernel-only");
                    let mut s = vec![];
                    for (i, op) in ops.iter().enumerate().filter(|(_, o)| o.for_static) {
                        let t = &op.target;
                        s.push(match op.kind {
                            Kind::Read | Kind::ReadSpawned => format!(
                                "if {} '{t}' | grep -q '^static-read {t}:'; then echo OP {i} yes; else echo OP {i} no; fi",
                                read_probe.display()
                            ),
                            Kind::Write => format!(
                                "if {} '{t}' | grep -q ': written$'; then echo OP {i} yes; else echo OP {i} no; fi",
                                write_probe.display()
                            ),
                            Kind::Env => format!(
                                "if {} show {t} | grep -v '=absent$' | grep -q '^- {t}='; then echo OP {i} yes; else echo OP {i} no; fi",
                                env_probe.display()
                            ),
                            Kind::Exec | Kind::ReadAgent => unreachable!(),
                        });
                    }
                    s.join("\n")
                } else {
                    ops.iter()
                        .enumerate()
                        .map(|(i, op)| dynamic_line(i, op))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let o = c.args(["--", "sh", "-c", &script]).output().unwrap();
                let out = common::text(&o);
                assert!(
                    o.status.success(),
                    "{net_label}/{kernel_label}/{linkage}: {out}"
                );
                let did = outcomes(&String::from_utf8_lossy(&o.stdout), ops.len());
                for (i, op) in ops.iter().enumerate() {
                    if is_static && !op.for_static {
                        continue;
                    }
                    let Some(allowed) = did[i] else {
                        wrong.push(format!(
                            "{net_label}/{kernel_label}/{linkage}: {:?} {} gave no answer: {out}",
                            op.kind, op.target
                        ));
                        continue;
                    };
                    checked += 1;
                    let expected = said[i] == "ALLOW";
                    if allowed == expected {
                        continue;
                    }
                    // The fallback's one stated weakness for static programs, and
                    // the kernel layer's alone: it cannot tell the agent apart.
                    let stated = (*fallback
                        && is_static
                        && op.kind == Kind::Write
                        && Path::new(&op.target).starts_with(h.workspace())
                        && out
                            .contains("weaker: protected paths inside the workspace stay writable"))
                        || (is_static
                            && op.kind == Kind::ReadSpawned
                            && out.contains("weaker: ~/.agentlogin (files.agent_read) readable by every process of the run"));
                    if !stated {
                        wrong.push(format!(
                            "{net_label}/{kernel_label}/{linkage}: explain says {} for {:?} {}, the run {}",
                            said[i],
                            op.kind,
                            op.target,
                            if allowed { "allowed it" } else { "refused it" }
                        ));
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "explain and the run disagree:\n{}",
        wrong.join("\n")
    );
    // 3 network modes x 2 kernel modes x (21 dynamic + 18 static) operations.
    assert_eq!(checked, 3 * 2 * (21 + 18));
}

/// Both verdicts appear in the table: a policy that allowed (or refused) everything
/// would make the comparison above vacuous.
#[test]
fn the_table_has_both_verdicts_for_every_kind() {
    let h = setup("mode = \"filtered\"");
    let cache = planned_cache(&h);
    for kind in [Kind::Read, Kind::Write, Kind::Env, Kind::Exec] {
        let said: Vec<String> = ops(&h, &cache)
            .iter()
            .filter(|o| o.kind == kind)
            .map(|o| explain(&h, false, o))
            .collect();
        assert!(
            said.iter().any(|s| s == "ALLOW") && said.iter().any(|s| s == "DENY"),
            "{kind:?}: {said:?}"
        );
    }
}

/// `sandpit plan` shows what the run then enforces: the paths it lists as
/// unreadable cannot be read, those it lists as writable can be written, and the
/// variables it lists as withheld are absent.
#[test]
fn plan_lists_what_the_run_enforces() {
    let h = setup("mode = \"filtered\"");
    let o = h
        .sandpit()
        .args(["plan", "--json", "--", "sh", "-c", "true"])
        .env("TABLE_GITHUB_TOKEN", "ghp_table")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let home = h.home();
    let abs = |s: &str| match s.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None => PathBuf::from(s),
    };
    let list = |k: &str| -> Vec<PathBuf> {
        v["kernel"][k]
            .as_array()
            .unwrap_or_else(|| panic!("plan has no kernel.{k}: {v}"))
            .iter()
            .map(|s| abs(s.as_str().unwrap()))
            .collect()
    };
    let unreadable = list("unreadable");
    let writable = list("writable");
    assert!(unreadable.contains(&home.join(".ssh")), "{unreadable:?}");
    assert!(
        unreadable.contains(&h.workspace().join("deep/er/.env")),
        "{unreadable:?}"
    );
    assert!(writable.contains(&h.workspace()), "{writable:?}");
    let withheld: Vec<&str> = v["env"]["withheld"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(withheld.contains(&"TABLE_GITHUB_TOKEN"), "{withheld:?}");
    assert_eq!(v["interposer"]["on"], true, "{v}");
    assert_eq!(v["network"]["mode"], "filtered", "{v}");

    // The run: each unreadable file refused, the workspace written, the variable absent.
    let mut script = vec![];
    for (i, p) in [home.join(".ssh/id_rsa"), h.workspace().join("deep/er/.env")]
        .iter()
        .enumerate()
    {
        script.push(format!(
            "if cat '{}' >/dev/null 2>&1; then echo R{i} read; else echo R{i} refused; fi",
            p.display()
        ));
    }
    script.push("echo planned > planned.txt && echo W written".into());
    script.push("echo \"T=${TABLE_GITHUB_TOKEN:-absent}\"".into());
    let o = h
        .sandpit()
        .args(["run", "--", "sh", "-c", &script.join("\n")])
        .env("TABLE_GITHUB_TOKEN", "ghp_table")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("R0 refused") && out.contains("R1 refused"),
        "{}",
        common::text(&o)
    );
    assert!(
        out.contains("W written") && out.contains("T=absent"),
        "{}",
        common::text(&o)
    );
    assert_eq!(
        std::fs::read_to_string(h.workspace().join("planned.txt")).unwrap(),
        "planned\n"
    );
}

/// Nothing is made or started by `sandpit plan`: no run directory, no state
/// directories of a fresh home, no package cache, no log.
#[test]
fn plan_makes_nothing() {
    let h = setup("mode = \"filtered\"");
    let before = tree(&h.home());
    // A profile whose agent keeps state in the home: a run would make it.
    let o = h
        .sandpit()
        .args(["plan", "--profile", "codex", "--", "sh", "-c", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("made at start:"), "{text}");
    assert!(text.contains(".codex"), "{text}");
    assert_eq!(tree(&h.home()), before, "sandpit plan changed the home");
    // The positive control: the run makes what the plan said.
    let o = h
        .sandpit()
        .args(["run", "--profile", "codex", "--", "sh", "-c", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(h.home().join(".codex").is_dir());
}

/// Every path under `dir`, sorted.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                todo.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}
