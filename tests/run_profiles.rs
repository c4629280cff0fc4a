//! Agent profiles under `sandpit run` on a fresh HOME (their state directories do not
//! exist yet) and on a HOME where they do, including single-file writable roots.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::TestHome;

fn run(h: &TestHome, profile: &str, script: &str) -> std::process::Output {
    h.sandpit()
        .args(["run", "--profile", profile, "--", "sh", "-c", script])
        .output()
        .unwrap()
}

#[test]
fn every_profile_runs_on_a_fresh_home() {
    let h = TestHome::new();
    for (name, _) in sandpit_policy::BUILTIN_PROFILES {
        let o = run(&h, name, "echo ok > note.txt && cat note.txt");
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ok", "{name}");
    }
}

#[test]
fn single_file_roots_are_writable_and_protected_files_beside_them_are_not() {
    let h = TestHome::new();
    h.write(&h.home().join(".claude.json"), "{}");
    h.write(&h.home().join(".claude/history"), "");
    h.write(&h.home().join(".claude/settings.json"), "{\"hooks\":{}}");
    let o = run(&h, "claude", "echo '{\"a\":1}' > ~/.claude.json && echo x >> ~/.claude/history && echo evil > ~/.claude/settings.json");
    assert!(!o.status.success(), "the settings write must fail");
    assert_eq!(
        std::fs::read_to_string(h.home().join(".claude.json"))
            .unwrap()
            .trim(),
        "{\"a\":1}"
    );
    assert_eq!(
        std::fs::read_to_string(h.home().join(".claude/history")).unwrap(),
        "x\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.home().join(".claude/settings.json")).unwrap(),
        "{\"hooks\":{}}"
    );
    // Outside any profile root, home stays read-only.
    let o = run(&h, "claude", "echo x > ~/.other");
    assert!(!o.status.success());
    assert!(!h.home().join(".other").exists());
}
