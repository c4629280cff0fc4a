//! `files.agent_read`: the agent's own files, read by the agent (`Request::Read`) and
//! by no command it spawns (`Request::ReadSpawned`, `WriteSpawned`), with the entry
//! named in the verdict; who may set it, and how.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use std::path::Path;

use sandpit_policy::{decide, load, Decision, Layer, LoadOptions, Request, Source};

const PROFILE: &str = r#"[files]
agent_read = ["~/.codex/auth.json", "~/.agentdir"]
allow_write = ["~/.codex", "~/.agentdir"]
"#;

/// `common::options` under a profile that names two agent files.
fn options(user: &str, project: Option<&str>) -> LoadOptions {
    let mut o = common::options(user, project);
    o.profile = Some(Source::new(Layer::Profile, "profiles/codex.toml", PROFILE));
    o
}

#[test]
fn the_agent_reads_its_files_and_no_spawned_command_touches_them() {
    let p = load(&options("", None)).unwrap();
    for (path, entry) in [
        ("/nonexistent-home/u/.codex/auth.json", "~/.codex/auth.json"),
        ("/nonexistent-home/u/.agentdir/token", "~/.agentdir"),
        ("/nonexistent-home/u/.agentdir", "~/.agentdir"),
    ] {
        let path = Path::new(path);
        // The default's block_read hides ~/.codex/auth.json; the entry carves it out
        // for the agent.
        let agent = decide(&p, &Request::Read(path));
        assert_eq!(
            agent.decision,
            Decision::Allow,
            "{path:?}: {}",
            agent.reason
        );
        if entry == "~/.codex/auth.json" {
            assert_eq!(agent.rule.unwrap().key, "files.agent_read");
        }
        assert_eq!(decide(&p, &Request::Write(path)).decision, Decision::Allow);
        for req in [Request::ReadSpawned(path), Request::WriteSpawned(path)] {
            let v = decide(&p, &req);
            assert_eq!(v.decision, Decision::Deny, "{req:?}");
            let rule = v.rule.unwrap();
            assert_eq!(
                (rule.key.as_str(), rule.entry.as_str()),
                ("files.agent_read", entry)
            );
            assert_eq!(rule.layer, Layer::Profile);
        }
    }
    let v = decide(
        &p,
        &Request::ReadSpawned(Path::new("/nonexistent-home/u/.codex/auth.json")),
    );
    assert!(
        v.reason
            .starts_with("blocked read of ~/.codex/auth.json (files.agent_read"),
        "{}",
        v.reason
    );
    let v = decide(
        &p,
        &Request::WriteSpawned(Path::new("/nonexistent-home/u/.codex/auth.json")),
    );
    assert!(
        v.reason
            .starts_with("blocked write to ~/.codex/auth.json (files.agent_read"),
        "{}",
        v.reason
    );
}

#[test]
fn everything_else_is_decided_for_a_spawned_command_as_for_the_agent() {
    let p = load(&options("", None)).unwrap();
    for path in [
        "/nonexistent-home/u/.codex/history.jsonl",
        "/nonexistent-home/u/.codex/auth.json.bak",
        "/nonexistent-home/u/.codex",
        "/nonexistent-home/u/proj/src/main.rs",
        "/nonexistent-home/u/.ssh/id_rsa",
        "/etc/passwd",
    ] {
        let path = Path::new(path);
        for (agent, spawned) in [
            (Request::Read(path), Request::ReadSpawned(path)),
            (Request::Write(path), Request::WriteSpawned(path)),
        ] {
            let (a, s) = (decide(&p, &agent), decide(&p, &spawned));
            assert_eq!(
                (a.decision, a.rule, a.reason),
                (s.decision, s.rule, s.reason),
                "{path:?}"
            );
        }
    }
}

#[test]
fn a_project_file_cannot_name_one_and_an_entry_names_a_path() {
    let e = load(&options("", Some("[files]\nagent_read = [\"~/.x\"]\n")))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(".sandpit.toml:2") && e.contains("files.agent_read"),
        "{e}"
    );
    let e = load(&options("[files]\nagent_read = [\"~/.x/*.json\"]\n", None))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("config.toml:2") && e.contains("is a glob"),
        "{e}"
    );
    // The user's own config may name one.
    let p = load(&options("[files]\nagent_read = [\"~/.x\"]\n", None)).unwrap();
    let v = decide(
        &p,
        &Request::ReadSpawned(Path::new("/nonexistent-home/u/.x")),
    );
    assert_eq!(v.rule.unwrap().layer, Layer::User);
}
