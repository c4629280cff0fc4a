//! Withheld variables never reach a program in the sandbox, whatever the agent and
//! its children are linked as; the agent's own variables (`env.agent`) reach the
//! agent — the command sandpit starts, what it execs in place, and the programs of
//! `env.agent_programs` that the sandbox cannot write — and, through the interposer,
//! nothing a dynamic process spawns besides. A static agent has no interposer: the
//! variables it holds reach what it spawns (the documented limit), never the
//! withheld ones.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod kernel_support;

use common::{text, TestHome};
use kernel_support::build_probe;

const GH: &str = "CANARY-gh-5e1f";
const KEY: &str = "CANARY-key-9b7c";

#[test]
fn withheld_variables_reach_no_program_and_the_agent_keeps_only_its_own() {
    let h = TestHome::new();
    h.user_config("[env]\nagent = [\"MY_API_KEY\"]\nagent_programs = [\"agent-helper\"]\n");
    let s = h.workspace().join("env_probe_static");
    std::fs::rename(build_probe(&h, "env_probe", true), &s).unwrap();
    let d = build_probe(&h, "env_probe", false);
    // The agent's helper where the sandbox cannot write it (the home is read-only
    // inside), and the same name planted in the workspace.
    let bin = h.home().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    h.give_to_test_user(&bin);
    let a = bin.join("agent-helper");
    let w = h.workspace().join("agent-helper");
    for copy in [&a, &w] {
        std::fs::copy(&s, copy).unwrap();
        h.give_to_test_user(copy);
    }
    let (s, d, a, w) = (
        s.to_str().unwrap(),
        d.to_str().unwrap(),
        a.to_str().unwrap(),
        w.to_str().unwrap(),
    );
    let show = ["show", "GH_TOKEN", "MY_API_KEY", "OTHER"];
    let v = |xs: &[&str]| -> Vec<String> {
        xs.iter()
            .chain(show.iter())
            .map(|x| x.to_string())
            .collect()
    };
    // (case, argv, the key reaches the last program: with the interposer, without)
    let cases: Vec<(&str, Vec<String>, bool, bool)> = vec![
        ("static agent", v(&[s]), true, true),
        ("dynamic agent", v(&[d]), true, true),
        (
            "static agent -> dynamic child",
            v(&[s, "spawn", d]),
            true,
            true,
        ),
        (
            "static agent -> static child",
            v(&[s, "spawn", s]),
            true,
            true,
        ),
        (
            "dynamic agent -> static child",
            v(&[d, "spawn", s]),
            false,
            true,
        ),
        (
            "dynamic agent -> dynamic child",
            v(&[d, "spawn", d]),
            false,
            true,
        ),
        (
            "dynamic agent -> exec in place",
            v(&[d, "exec", s]),
            true,
            true,
        ),
        (
            "dynamic agent -> its read-only helper",
            v(&[d, "spawn", a]),
            true,
            true,
        ),
        (
            "dynamic agent -> a planted helper",
            v(&[d, "spawn", w]),
            false,
            true,
        ),
        (
            "dynamic agent -> sh -> static",
            vec![
                d.into(),
                "exec".into(),
                "/bin/sh".into(),
                "-c".into(),
                format!("{s} show GH_TOKEN MY_API_KEY OTHER"),
            ],
            false,
            true,
        ),
        (
            "dynamic agent -> env -i",
            v(&[d, "spawn", "/usr/bin/env", "-i", s]),
            false,
            false,
        ),
    ];
    let run = |argv: &[String], flags: &[&str]| {
        h.sandpit()
            .env("GH_TOKEN", GH)
            .env("MY_API_KEY", KEY)
            .env("OTHER", "kept")
            .arg("run")
            .args(flags)
            .arg("--")
            .args(argv)
            .output()
            .unwrap()
    };
    // Control: without sandpit every variable reaches every program.
    for (case, argv, ..) in &cases {
        if argv.iter().any(|x| x == "-i") {
            continue;
        }
        let o = h
            .command(&argv[0])
            .env("GH_TOKEN", GH)
            .env("MY_API_KEY", KEY)
            .env("OTHER", "kept")
            .args(&argv[1..])
            .output()
            .unwrap();
        let out = text(&o);
        assert!(
            out.contains(&format!("GH_TOKEN={GH}")) && out.contains(&format!("proc GH_TOKEN={GH}")),
            "bare {case}: {out}"
        );
    }
    let mut wrong = vec![];
    for (flags, interposer) in [(&[][..], true), (&["--kernel-only"][..], false)] {
        for (case, argv, with, without) in &cases {
            let o = run(argv, flags);
            let out = text(&o);
            let mode = if interposer {
                "interposer"
            } else {
                "kernel only"
            };
            if !o.status.success() {
                wrong.push(format!("{mode}, {case}: {out}"));
                continue;
            }
            if out.contains(GH) {
                wrong.push(format!("{mode}, {case}: GH_TOKEN reached it: {out}"));
            }
            let key = if interposer { *with } else { *without };
            // What the program has (getenv), and never more in /proc/self/environ
            // (a dynamic program holding a withheld variable hides its environ).
            let has = out.contains(&format!("- MY_API_KEY={KEY}"));
            let absent = out.contains("- MY_API_KEY=absent");
            let proc_leak = !key && !out.contains("- proc MY_API_KEY=absent");
            if has != key || absent == key || proc_leak {
                wrong.push(format!(
                    "{mode}, {case}: MY_API_KEY {} (want {}): {out}",
                    if has { "present" } else { "absent" },
                    if key { "present" } else { "absent" }
                ));
            }
            let other = !argv.iter().any(|x| x == "-i");
            if out.contains("- OTHER=kept") != other {
                wrong.push(format!("{mode}, {case}: OTHER: {out}"));
            }
        }
    }
    // A dynamic agent's children cannot read its key back from /proc either.
    let o = run(
        &[
            d.into(),
            "spawn".into(),
            s.into(),
            "peek".into(),
            "parent".into(),
        ],
        &[],
    );
    let out = text(&o);
    assert!(out.contains("- peek"), "{out}");
    if out.contains(KEY) || out.contains(GH) {
        wrong.push(format!("the agent's environ from its child: {out}"));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn explain_env_names_the_rule_and_says_what_the_run_does() {
    let h = TestHome::new();
    h.user_config("[env]\nagent = [\"MY_API_KEY\"]\nagent_programs = [\"agent-helper\"]\n");
    let explain = |args: &[&str]| {
        let o = h
            .sandpit()
            .arg("explain")
            .arg("env")
            .args(args)
            .output()
            .unwrap();
        common::explained(&o)
    };
    let o = explain(&["GH_TOKEN"]);
    assert!(o.starts_with("DENY  env GH_TOKEN"), "{o}");
    assert!(o.contains("env.withhold \"*_TOKEN\""), "{o}");
    assert!(o.contains("removed before the command starts"), "{o}");
    let o = explain(&["MY_API_KEY"]);
    assert!(o.starts_with("ALLOW  env MY_API_KEY"), "{o}");
    assert!(o.contains("env.agent \"MY_API_KEY\""), "{o}");
    let o = explain(&["MY_API_KEY", "--program", "/usr/bin/sh"]);
    assert!(o.starts_with("DENY"), "{o}");
    let helper = h.home().join("bin/agent-helper");
    let o = explain(&["MY_API_KEY", "--program", helper.to_str().unwrap()]);
    assert!(o.starts_with("ALLOW"), "{o}");
    let planted = h.workspace().join("agent-helper");
    let o = explain(&["MY_API_KEY", "--program", planted.to_str().unwrap()]);
    assert!(o.starts_with("DENY") && o.contains("can write it"), "{o}");
    let o = explain(&["PATH"]);
    assert!(o.starts_with("ALLOW"), "{o}");
}
