//! Files that run code later, named by git's configuration inside the workspace: a
//! worktree hooks directory (`core.hooksPath`, as husky sets it), an included config
//! file, a diff driver given as a path. The user's git runs or reads each outside the
//! sandbox later, so the sandbox must not write them, whatever writes: a dynamic
//! shell with the interposer, the same without it (`--kernel-only`), a static program
//! with raw system calls. `sandpit explain` says the same, naming the git key. Without
//! sandpit the same writes land (the control); in the sandbox the workspace stays
//! writable and `git commit` works.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod kernel_support;

use common::{text, TestHome};
use kernel_support::build_probe;

/// Written by the attack; (path in the workspace, what it held before: None if absent).
const TARGETS: &[(&str, Option<&str>)] = &[
    (".husky/pre-commit", Some("echo benign\n")),
    (".husky/post-checkout", None),
    (".husky/_/pre-push", None),
    ("team.gitconfig", Some("[user]\n\tname = team\n")),
    ("tools/conv.sh", Some("cat \"$1\"\n")),
];

fn repo() -> TestHome {
    let h = TestHome::new();
    let ws = h.workspace();
    let git = |args: &[&str]| {
        let o = h.command("git").args(args).output().unwrap();
        assert!(o.status.success(), "git {args:?}: {}", text(&o));
    };
    git(&["init", "-q"]);
    git(&["config", "core.hooksPath", ".husky/_"]);
    git(&["config", "include.path", "../team.gitconfig"]);
    git(&["config", "diff.conv.textconv", "./tools/conv.sh"]);
    h.write(&ws.join(".husky/_/h"), "#!/bin/sh\n");
    for (p, before) in TARGETS {
        if let Some(b) = before {
            h.write(&ws.join(p), b);
        }
    }
    h
}

/// Each target as it was before the attack.
fn assert_untouched(h: &TestHome, case: &str, out: &str) {
    for (p, before) in TARGETS {
        let now = std::fs::read_to_string(h.workspace().join(p)).ok();
        assert_eq!(now.as_deref(), *before, "{case}: {p} was written\n{out}");
    }
}

/// `script` (which writes protected files, printing `WROTE …` for each write that
/// lands, and ends `echo … control-ok`) under sandpit, every layer or the kernel
/// layer alone: no write lands and the control does. Its output.
fn held(h: &TestHome, kernel_only: bool, script: &str) -> String {
    let o = h
        .sandpit_run(kernel_only)
        .args(["sh", "-c", script])
        .output()
        .unwrap();
    let out = text(&o);
    assert!(
        out.contains("control-ok") && !out.contains("WROTE"),
        "{out}"
    );
    out
}

/// Past the interposer, `script` makes `made` (a protected name that has no
/// placeholder): the mount guard moves it aside at once and stops the run.
fn stopped_when_made(h: &TestHome, script: &str, made: &str) {
    let o = h
        .sandpit_run(true)
        .args(["sh", "-c", &format!("{script}; sleep 2; echo after")])
        .output()
        .unwrap();
    let out = text(&o);
    assert!(!out.contains("after"), "the run went on: {out}");
    assert!(out.contains("appeared during the run"), "{out}");
    assert!(!h.workspace().join(made).exists(), "{out}");
}

fn attack_script() -> String {
    let mut s = String::new();
    for (p, _) in TARGETS {
        s += &format!("(echo evil > {p}) 2>/dev/null && echo \"WROTE {p}\"\n");
    }
    s + "echo ok > ok.txt && echo control-ok\n"
}

#[test]
fn what_git_config_names_in_the_workspace_stays_unwritable() {
    // Control: without sandpit every write lands.
    let h = repo();
    let o = h
        .command("sh")
        .args(["-c", &attack_script()])
        .output()
        .unwrap();
    for (p, _) in TARGETS {
        assert!(
            text(&o).contains(&format!("WROTE {p}")),
            "bare: {}",
            text(&o)
        );
    }

    for kernel_only in [false, true] {
        let h = repo();
        let out = held(&h, kernel_only, &attack_script());
        let case = format!("sh (kernel only: {kernel_only})");
        assert_untouched(&h, &case, &out);
        assert_eq!(
            std::fs::read_to_string(h.workspace().join("ok.txt")).unwrap(),
            "ok\n"
        );
    }

    // A static program, past any interposer.
    let h = repo();
    let probe = build_probe(&h, "static_write", true);
    let o = h
        .sandpit_run(false)
        .arg(&probe)
        .args(TARGETS.iter().map(|(p, _)| *p))
        .arg("ok-static.txt")
        .output()
        .unwrap();
    let out = text(&o);
    assert!(
        out.contains("static-write ok-static.txt: written"),
        "static: {out}"
    );
    assert_untouched(&h, "static", &out);
}

#[test]
fn explain_names_the_git_key_and_git_still_commits() {
    let h = repo();
    let explain =
        |p: &str| common::explained(&h.sandpit().args(["explain", "write", p]).output().unwrap());
    for (p, key) in [
        (".husky/pre-commit", "core.hookspath = .husky/_"),
        (".husky/_/pre-push", "core.hookspath = .husky/_"),
        ("team.gitconfig", "include.path = ../team.gitconfig"),
        ("tools/conv.sh", "diff.conv.textconv = ./tools/conv.sh"),
    ] {
        let out = explain(p);
        assert!(out.starts_with("DENY"), "{p}: {out}");
        assert!(out.contains(key), "{p}: {out}");
        assert!(out.contains("git config (file:.git/config)"), "{p}: {out}");
    }
    assert!(explain("src/main.rs").starts_with("ALLOW"));

    // The workflow still works: git commits inside the sandbox.
    let o = h
        .sandpit_run(false)
        .args(["sh", "-c"])
        .arg(
            "echo x > a.txt && git add a.txt && \
             git -c user.name=a -c user.email=a@example.com commit -qm x && git log --oneline",
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

/// The workspace is a subdirectory of the repository (husky's monorepo recipe:
/// `core.hooksPath = frontend/.husky/_`): what the config names is judged from the
/// worktree's top, and what lies in the workspace is protected.
#[test]
fn a_workspace_below_the_repositorys_top_is_protected_too() {
    let h = TestHome::new();
    let git = |args: &[&str]| {
        let o = h.command("git").args(args).output().unwrap();
        assert!(o.status.success(), "git {args:?}: {}", text(&o));
    };
    git(&["init", "-q"]);
    let front = h.workspace().join("frontend");
    git(&["config", "core.hooksPath", "frontend/.husky/_"]);
    // An alias's directory arguments stay writable: only files are protected.
    git(&["config", "alias.fmt", "!prettier --write frontend/src/"]);
    h.write(&front.join(".husky/pre-commit"), "npm test\n");
    h.write(&front.join("src/app.js"), "1\n");
    let o = h
        .sandpit()
        .args(["run", "--workspace"])
        .arg(&front)
        .args(["--", "sh", "-c"])
        .arg("(echo evil > .husky/pre-commit) 2>/dev/null && echo WROTE; echo 2 > src/app.js && echo src-ok")
        .current_dir(&front)
        .output()
        .unwrap();
    let out = text(&o);
    assert!(!out.contains("WROTE"), "{out}");
    assert!(out.contains("src-ok"), "{out}");
    assert_eq!(
        std::fs::read_to_string(front.join(".husky/pre-commit")).unwrap(),
        "npm test\n"
    );
}

/// A repository whose `.git` git does not take for one (a run wrote garbage into
/// `HEAD`, so that git would not read `.git/config` and `core.hooksPath` would go
/// unseen until a later run repaired it): its config is read as a file, and the
/// hooks stay protected.
#[test]
fn a_repository_with_a_broken_head_keeps_its_hooks_protected() {
    let h = repo();
    h.write(&h.workspace().join(".git/HEAD"), "garbage\n");
    let o = h
        .sandpit_run(false)
        .args([
            "sh",
            "-c",
            "(echo evil > .husky/pre-commit) 2>/dev/null && echo WROTE; echo ran",
        ])
        .output()
        .unwrap();
    let out = text(&o);
    assert!(out.contains("ran") && !out.contains("WROTE"), "{out}");
    assert_untouched(&h, "broken HEAD", &out);
    let o = h
        .sandpit()
        .args(["explain", "write", ".husky/pre-commit"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.starts_with("DENY") && said.contains("core.hookspath"),
        "{said}"
    );
}

/// A config file `include.path` names that does not exist yet: no placeholder
/// directory (git's include of a directory fails: "bad config"), git works inside;
/// creating it is refused by the interposer, and past it (the kernel layer alone) the
/// mount guard moves it aside and stops the run, so the user's git never includes it.
#[test]
fn a_missing_include_target_is_held_without_breaking_git() {
    let h = repo();
    let o = h
        .command("git")
        .args(["config", "include.path", "../later.gitconfig"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let later = h.workspace().join("later.gitconfig");
    let script = "git status --short >/dev/null && echo git-ok; \
                  (printf '[core]\\n\\tfsmonitor = evil\\n' > later.gitconfig) 2>/dev/null && echo WROTE; \
                  sleep 1; echo after";
    for kernel_only in [false, true] {
        let o = h
            .sandpit_run(kernel_only)
            .args(["sh", "-c", script])
            .output()
            .unwrap();
        let out = text(&o);
        let case = format!("kernel only: {kernel_only}");
        assert!(out.contains("git-ok"), "{case}: {out}");
        if kernel_only {
            // The write lands for an instant; the guard moves it aside and stops the run.
            assert!(!out.contains("after"), "{case}: the run went on: {out}");
            assert!(out.contains("appeared during the run"), "{case}: {out}");
        } else {
            assert!(!out.contains("WROTE"), "{case}: {out}");
        }
        assert!(!later.exists(), "{case}: {out}");
        // The user's git still works, and includes nothing the sandbox wrote.
        let g = h
            .command("git")
            .args(["config", "core.fsmonitor"])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&g.stdout).contains("evil"),
            "{case}"
        );
    }
}

/// Project configs that are single files a tool reads whenever they exist and runs
/// commands from later, outside the sandbox (`.pre-commit-config.yaml` and lefthook's
/// hooks on the next commit, `opencode.json`'s MCP servers, aider's `test-cmd`,
/// mise's tasks, `.gitmodules`): present, they are read-only; missing, no placeholder
/// stands in their name (a directory there would break the tool), the interposer
/// refuses creating them, and past it the mount guard moves one aside and stops the
/// run. git keeps working; the rest of the workspace stays writable.
#[test]
fn single_file_project_configs_are_held_present_or_missing() {
    const NAMES: &[&str] = &[
        ".gitmodules",
        ".pre-commit-config.yaml",
        "lefthook.yml",
        "opencode.json",
        ".aider.conf.yml",
        "mise.toml",
    ];
    // Present: read-only.
    let h = repo();
    for n in NAMES {
        h.write(&h.workspace().join(n), "# the user's\n");
    }
    let mut script = String::new();
    for n in NAMES {
        script += &format!("(echo evil >> {n}) 2>/dev/null && echo \"WROTE {n}\"\n");
    }
    script += "echo ok > ok.txt && git status --short >/dev/null && echo control-ok\n";
    for kernel_only in [false, true] {
        held(&h, kernel_only, &script);
        for n in NAMES {
            assert_eq!(
                std::fs::read_to_string(h.workspace().join(n)).unwrap(),
                "# the user's\n",
                "{n}"
            );
        }
    }
    // Missing: refused by the interposer, and no placeholder in the way of git.
    let h = repo();
    let out = held(&h, false, &script);
    for n in NAMES {
        assert!(!h.workspace().join(n).exists(), "{n}: {out}");
    }
    // Past the interposer: moved aside at once and the run stopped.
    stopped_when_made(&h, "echo '[submodule]' > .gitmodules", ".gitmodules");
}

/// An `includeIf "onbranch:…"` whose condition does not hold at the start still
/// counts: the sandbox could switch branches (`.git/HEAD` is writable), and then the
/// user's next commit would run the hooks that file names.
#[test]
fn a_conditional_include_counts_whatever_the_branch() {
    let h = repo();
    let git = |args: &[&str]| {
        let o = h.command("git").args(args).output().unwrap();
        assert!(o.status.success(), "git {args:?}: {}", text(&o));
    };
    git(&[
        "config",
        "includeIf.onbranch:other.path",
        "../branch.gitconfig",
    ]);
    h.write(
        &h.workspace().join("branch.gitconfig"),
        "[core]\n\thooksPath = .githooks\n",
    );
    h.write(&h.workspace().join(".githooks/pre-commit"), "npm test\n");
    let o = h
        .sandpit_run(false)
        .args([
            "sh",
            "-c",
            "(echo evil > .githooks/pre-commit) 2>/dev/null && echo WROTE; \
             (echo evil > branch.gitconfig) 2>/dev/null && echo WROTE; echo ran",
        ])
        .output()
        .unwrap();
    let out = text(&o);
    assert!(out.contains("ran") && !out.contains("WROTE"), "{out}");
    assert_eq!(
        std::fs::read_to_string(h.workspace().join(".githooks/pre-commit")).unwrap(),
        "npm test\n"
    );
}

/// The other version-control systems' directories: Mercurial's `hgrc` hooks (run on
/// any `hg` command), jj's repository config, darcs's defaults (posthooks),
/// fossil's versioned settings. Present, their command files are read-only and the
/// rest keeps working; absent, none can be made, so the workspace cannot become a
/// repository whose hooks the user's tool runs — past the interposer the run stops.
#[test]
fn other_version_control_directories_are_held_present_or_missing() {
    // (directory, its command file, a file the tool writes as it works)
    const VCS: &[(&str, &str, &str)] = &[
        (".hg", ".hg/hgrc", ".hg/store/data"),
        (".hg", ".hg/hgrc-not-shared", ""),
        (".jj", ".jj/repo/config.toml", ".jj/repo/op_heads"),
        ("_darcs", "_darcs/prefs/defaults", "_darcs/patches/p"),
        (".fossil-settings", ".fossil-settings/ignore-glob", ""),
    ];
    let mut attack = String::new();
    for (_, cmd_file, _) in VCS {
        attack += &format!(
            "(mkdir -p $(dirname {cmd_file}) && echo '[hooks] evil' >> {cmd_file}) 2>/dev/null \
             && echo \"WROTE {cmd_file}\"\n"
        );
    }
    attack += "echo ok > ok.txt && echo control-ok\n";

    // Control: without sandpit each command file is planted.
    let h = repo();
    let out = text(&h.command("sh").args(["-c", &attack]).output().unwrap());
    for (_, cmd_file, _) in VCS {
        assert!(out.contains(&format!("WROTE {cmd_file}")), "bare: {out}");
    }

    // Missing: none can be made, by the interposer's refusal.
    let h = repo();
    let out = held(&h, false, &attack);
    for (dir, ..) in VCS {
        assert!(!h.workspace().join(dir).exists(), "{dir}: {out}");
    }
    // Past the interposer: moved aside at once and the run stopped.
    stopped_when_made(&h, "mkdir .hg && echo '[hooks]' > .hg/hgrc", ".hg");

    // Present: the command files are read-only, the tools' other files writable.
    let h = repo();
    for (_, cmd_file, work) in VCS {
        h.write(&h.workspace().join(cmd_file), "# the user's\n");
        if !work.is_empty() {
            h.write(&h.workspace().join(work), "");
        }
    }
    let mut script = attack.clone();
    for (_, _, work) in VCS.iter().filter(|v| !v.2.is_empty()) {
        script += &format!("echo more >> {work} && echo \"WORKS {work}\"\n");
    }
    for kernel_only in [false, true] {
        let out = held(&h, kernel_only, &script);
        for (_, cmd_file, work) in VCS {
            let now = std::fs::read_to_string(h.workspace().join(cmd_file)).unwrap();
            assert_eq!(now, "# the user's\n", "{cmd_file}: {out}");
            assert!(
                work.is_empty() || out.contains(&format!("WORKS {work}")),
                "{work}: {out}"
            );
        }
    }
    // explain names the rule.
    let said = h
        .sandpit()
        .args(["explain", "write", ".hg/hgrc"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&said.stdout);
    assert!(
        said.starts_with("DENY") && said.contains("other version control"),
        "{said}"
    );
}

/// The git sandpit asks for the configuration runs on the host, before the
/// sandbox: a `git` planted in a directory the sandbox can write (an `allow_write`
/// root, the workspace) and put on PATH, as an absolute or a relative entry, is
/// never the one that runs (issue 41). The plant runs bare with that PATH (the
/// control); under sandpit the configuration is still read (`explain` names the
/// key) and the plant does not run.
#[test]
fn a_git_planted_in_a_writable_root_on_path_is_not_the_one_asked() {
    let h = repo();
    let canary = h.home().join("planted-git-ran");
    let plant = format!(
        "#!/bin/sh\ntouch {:?}\nexec /usr/local/bin/git \"$@\"\n",
        canary.to_str().unwrap()
    );
    // Outside the home: a directory of the home on PATH cannot be a writable root
    // at all (the run-later registry refuses it, tests/runlater.rs).
    let tools = h.home().parent().unwrap().join("tools");
    for dir in [tools.clone(), h.workspace().join("bin")] {
        h.write(&dir.join("git"), &plant);
        std::fs::set_permissions(
            dir.join("git"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
    }
    h.user_config(&format!("[files]\nallow_write = [{:?}]\n", tools));
    let system = "/usr/local/bin:/usr/bin:/bin";
    for path in [
        format!("{}:{system}", tools.display()),
        format!("{}:{system}", h.workspace().join("bin").display()),
        format!("bin:{system}"),
    ] {
        let o = h
            .command("git")
            .env("PATH", &path)
            .arg("--version")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert!(canary.exists(), "{path}: the plant did not run bare");
        std::fs::remove_file(&canary).unwrap();
        let o = h
            .sandpit()
            .env("PATH", &path)
            .args(["explain", "write", ".husky/pre-commit"])
            .output()
            .unwrap();
        let out = text(&o);
        // Answered (its exit status is the verdict's), not refused as usage.
        assert!(matches!(o.status.code(), Some(0 | 1)), "{path}: {out}");
        let verdict = common::stdout(&o);
        assert!(
            verdict.starts_with("DENY") && verdict.contains("core.hookspath = .husky/_"),
            "{path}: {out}"
        );
        assert!(
            !canary.exists(),
            "{path}: the planted git ran on the host: {out}"
        );
    }
}
