//! What the kernel layer refuses alone reaches the run's summary with its rule: a
//! program without the interposer (any program under `--kernel-only`, a static
//! program in the default mode) reading a credential or writing outside the
//! workspace fails, and the summary names the refusal, its layer and the rule's
//! file:line. Reading and writing in the workspace (the control) work and record
//! nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod kernel_support;

use common::TestHome;
use kernel_support::*;

/// A HOME with a default credential and one under a rule of the user's own
/// (`~/.sandpit/config.toml` line 2), a file outside the workspace, and one inside.
fn home() -> TestHome {
    let h = TestHome::new();
    let home = h.home();
    h.write(&home.join(".aws/credentials"), CANARY);
    h.write(&home.join(".aws/config"), CANARY);
    h.write(&home.join("private/key"), CANARY);
    h.write(&home.join("outside.txt"), "ORIGINAL");
    h.write(&h.workspace().join("ok.txt"), "WS-CONTENT");
    h.user_config("[files]\nblock_read = [\"~/private\"]\n");
    h
}

/// The summary's entry for `what` (`deny read ~/x`): its line and the next (the
/// rule), or `None`.
fn entry<'a>(err: &'a str, what: &str) -> Option<(&'a str, &'a str)> {
    let lines: Vec<&str> = err.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.trim_start().starts_with(&format!("{what} ")))?;
    Some((lines[i], lines.get(i + 1).copied().unwrap_or("")))
}

fn assert_held(h: &TestHome, out: &std::process::Output) -> (String, String) {
    let (o, e) = (common::stdout(out), common::stderr(out));
    assert!(
        !o.contains(CANARY) && !e.contains(CANARY),
        "canary leaked: {o}{e}"
    );
    assert_eq!(
        content(&h.home().join("outside.txt")).as_deref(),
        Some("ORIGINAL"),
        "{o}{e}"
    );
    (o, e)
}

#[test]
fn refusals_of_the_kernel_layer_alone_reach_the_summary_with_their_rule() {
    // Without sandpit every attack works (the control of the probe itself).
    // The last read goes through a link in the workspace: the refusal names the
    // file the kernel checked.
    let script = "cat $HOME/.aws/credentials; cat $HOME/private/key; \
                  echo PWNED > $HOME/outside.txt; cat ok.txt; echo ws > made.txt; \
                  ln -s $HOME/.aws/config lk; cat lk; echo END";
    let bare_home = home();
    let t = text(&bare(&bare_home, script));
    assert!(t.matches(CANARY).count() == 3, "{t}");
    assert_eq!(
        content(&bare_home.home().join("outside.txt")).as_deref(),
        Some("PWNED\n")
    );

    // Namespace mode, and the fallback mode without namespaces (Landlock alone).
    for fallback in [false, true] {
        let h = home();
        let out = match fallback {
            false => sandboxed(&h, script),
            true => sandpit_cmd(&h, &["--allow-degraded"], script)
                .env("SANDPIT_FORCE_FALLBACK", "1")
                .output()
                .unwrap(),
        };
        summary_names_each_refusal(&h, &out);
    }
}

fn summary_names_each_refusal(h: &TestHome, out: &std::process::Output) {
    let (o, e) = assert_held(h, out);
    assert!(
        o.contains("WS-CONTENT") && o.contains("END"),
        "control: {o}{e}"
    );
    assert_eq!(
        content(&h.workspace().join("made.txt")).as_deref(),
        Some("ws\n")
    );

    let (line, rule) = entry(&e, "deny read ~/.aws/credentials").expect(&e);
    assert!(line.contains("[kernel]"), "{e}");
    assert!(rule.contains("rule: files.block_read \"~/.aws"), "{e}");
    let (line, rule) = entry(&e, "deny read ~/private/key").expect(&e);
    assert!(line.contains("[kernel]"), "{e}");
    let config = h.user_config_path();
    assert!(
        rule.contains(&format!(
            "files.block_read \"~/private\" in {}:2:",
            config.display()
        )) || rule.contains("files.block_read \"~/private\" in ~/.sandpit/config.toml:2:"),
        "{e}"
    );
    let (line, _) = entry(&e, "deny write ~/outside.txt").expect(&e);
    assert!(line.contains("[kernel]"), "{e}");
    let (line, rule) = entry(&e, "deny read ~/.aws/config").expect(&e);
    assert!(
        line.contains("[kernel]") && rule.contains("rule: files.block_read \"~/.aws"),
        "{e}"
    );
    // The workspace's reads and writes are nobody's refusal.
    assert!(!e.contains("ok.txt") && !e.contains("made.txt"), "{e}");
    assert!(!e.contains("no layer recorded"), "{e}");
}

#[test]
fn a_static_program_in_the_default_mode_has_its_refusals_reported() {
    let h = home();
    build_probe(&h, "static_read", true);
    build_probe(&h, "static_write", true);
    let creds = h.home().join(".aws/credentials");
    let outside = h.home().join("outside.txt");
    // The command itself is static: the run says so and reports for it.
    let out = h
        .sandpit_run(false)
        .arg("./static_read")
        .arg(&creds)
        .arg("ok.txt")
        .output()
        .unwrap();
    let (o, e) = assert_held(&h, &out);
    assert!(
        o.contains("static-read ok.txt:WS-CONTENT"),
        "control: {o}{e}"
    );
    assert!(
        o.contains(&format!(
            "static-open {}: Permission denied",
            creds.display()
        )),
        "{o}{e}"
    );
    let (line, rule) = entry(&e, "deny read ~/.aws/credentials").expect(&e);
    assert!(line.contains("[kernel]"), "{e}");
    assert!(rule.contains("rule: files.block_read"), "{e}");
    assert!(!e.contains("ok.txt"), "{e}");

    let out = h
        .sandpit_run(false)
        .arg("./static_write")
        .arg(&outside)
        .arg("new-in-ws.txt")
        .output()
        .unwrap();
    let (o, e) = assert_held(&h, &out);
    assert!(
        o.contains("static-write new-in-ws.txt: written"),
        "control: {o}{e}"
    );
    assert_eq!(
        content(&h.workspace().join("new-in-ws.txt")).as_deref(),
        Some("evil\n")
    );
    let (line, _) = entry(&e, "deny write ~/outside.txt").expect(&e);
    assert!(line.contains("[kernel]"), "{e}");
    assert!(!e.contains("new-in-ws.txt"), "{e}");
    assert!(!e.contains("no layer recorded"), "{e}");
}

/// `sandpit plan` says whether the kernel layer's refusals are reported: for a
/// static program and under `--kernel-only`, not for a dynamic one with the
/// interposer (which reports its own).
#[test]
fn the_plan_says_when_kernel_refusals_are_reported() {
    let h = home();
    build_probe(&h, "static_read", true);
    let said = "kernel refusals: reported with their rule";
    for (args, reported) in [
        (&["plan", "--", "./static_read"][..], true),
        (&["plan", "--kernel-only", "--", "cat"][..], true),
        (&["plan", "--", "cat"][..], false),
    ] {
        let out = h.sandpit().args(args).output().unwrap();
        let o = common::stdout(&out);
        assert!(
            out.status.success(),
            "{args:?}: {o}{}",
            common::stderr(&out)
        );
        assert_eq!(o.contains(said), reported, "{args:?}: {o}");
    }
}
