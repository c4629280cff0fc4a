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

/// Startup files of bash, zsh and fish that set withheld variables every way a
/// user writes them: `export`, `declare -x`, `typeset -x`, an assignment exported
/// later, a file sourced under `set -a`, `~/.bashrc.d/*`, fish's `set -gx` and
/// `conf.d`. Beside each, a variable that is no secret (the positive control).
fn home_with_rc_files() -> TestHome {
    let h = TestHome::new();
    let home = h.home();
    let w = |rel: &str, text: &str| h.write(&home.join(rel), text);
    w(
        ".bashrc",
        "export GH_TOKEN=CANARY-rc-export\nexport EDITOR=vim\nDEPLOY_TOKEN=CANARY-rc-later\nexport DEPLOY_TOKEN\nfor f in ~/.bashrc.d/*; do . \"$f\"; done\nset -a; . ~/.secrets.sh; set +a\n",
    );
    w(
        ".bashrc.d/10-tokens.sh",
        "declare -x NPM_TOKEN=\"CANARY-rc-declare\"\nexport RCD_SETTING=kept\n",
    );
    w(
        ".secrets.sh",
        "STRIPE_API_KEY=CANARY-rc-allexport\nALLEXPORT_SETTING=kept\n",
    );
    w(
        ".bash_profile",
        ". ~/.bashrc\nexport AWS_SECRET_ACCESS_KEY=CANARY-rc-login\nexport LOGIN_SETTING=kept\n",
    );
    w(".zshenv", "export GITLAB_TOKEN=CANARY-rc-zshenv\n");
    w(
        ".zshrc",
        "typeset -x ZSH_TOKEN=CANARY-rc-typeset\nexport ZSH_SETTING=kept\n",
    );
    w(
        ".config/fish/config.fish",
        "set -gx FISH_TOKEN CANARY-rc-fish\nset -gx FISH_SETTING kept\n",
    );
    w(
        ".config/fish/conf.d/tokens.fish",
        "set -x CONFD_TOKEN CANARY-rc-confd\n",
    );
    h
}

/// (shell command, the non-secret variables its startup files set)
const RC_SHELLS: &[(&[&str], &[&str])] = &[
    (
        &["bash", "-ic", "env"],
        &["EDITOR=vim", "RCD_SETTING=kept", "ALLEXPORT_SETTING=kept"],
    ),
    (
        &["bash", "-lc", "env"],
        &["LOGIN_SETTING=kept", "EDITOR=vim"],
    ),
    (&["zsh", "-ic", "env"], &["ZSH_SETTING=kept"]),
    (&["fish", "-c", "env"], &["FISH_SETTING=kept"]),
];

#[test]
fn shell_startup_files_bring_no_withheld_variable_back() {
    let h = home_with_rc_files();
    let mut wrong = vec![];
    for (argv, kept) in RC_SHELLS {
        // Without sandpit each shell prints the startup files' secrets.
        let bare = h.command(argv[0]).args(&argv[1..]).output().unwrap();
        let b = text(&bare);
        assert!(b.contains("CANARY-rc-"), "bare {argv:?}: {b}");
        for k in *kept {
            assert!(b.contains(k), "bare {argv:?} lacks {k}: {b}");
        }
        for kernel_only in [false, true] {
            let o = h.sandpit_run(kernel_only).args(*argv).output().unwrap();
            let t = text(&o);
            if t.contains("CANARY-rc-") {
                wrong.push(format!(
                    "{argv:?} (kernel only: {kernel_only}) printed a secret: {t}"
                ));
            }
            for k in *kept {
                if !t.contains(k) {
                    wrong.push(format!(
                        "{argv:?} (kernel only: {kernel_only}) lost {k}: {t}"
                    ));
                }
            }
        }
    }
    // Read as files, by anything: the copies hold no secret either.
    let o = h
        .sandpit_run(true)
        .args(["sh", "-c", "cat ~/.bashrc ~/.bashrc.d/* ~/.secrets.sh ~/.zshrc ~/.config/fish/config.fish; echo CONTROL"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(
        t.contains("CONTROL") && t.contains("export EDITOR=vim"),
        "{t}"
    );
    assert!(!t.contains("CANARY-rc-"), "{t}");
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The host's files are untouched.
    let rc = std::fs::read_to_string(h.home().join(".bashrc")).unwrap();
    assert!(rc.contains("CANARY-rc-export"));
}

/// Shell and REPL histories, one row each: those the summary leaves out as
/// refusals nobody can act on, each of which the defaults' `files.block_read` holds.
const HISTORIES: &[&str] = sandpit::audit::summary::HISTORY_FILES;

#[test]
fn history_files_are_unreadable_and_a_shell_writing_one_is_quiet() {
    let h = TestHome::new();
    for (i, f) in HISTORIES.iter().enumerate() {
        h.write(
            &h.home().join(f),
            &format!("export GH_TOKEN=CANARY-hist-{i}\n"),
        );
    }
    h.write(&h.home().join("notes.txt"), "NORMAL");
    let script = HISTORIES
        .iter()
        .map(|f| format!("cat \"$HOME/{f}\"; "))
        .collect::<String>()
        + "echo CONTROL-$(cat $HOME/notes.txt)";
    let bare = text(&h.command("sh").args(["-c", &script]).output().unwrap());
    for i in 0..HISTORIES.len() {
        assert!(bare.contains(&format!("CANARY-hist-{i}\n")), "bare: {bare}");
    }
    for kernel_only in [false, true] {
        let o = h
            .sandpit_run(kernel_only)
            .args(["sh", "-c", &script])
            .output()
            .unwrap();
        let t = text(&o);
        assert!(t.contains("CONTROL-NORMAL"), "{t}");
        for (i, f) in HISTORIES.iter().enumerate() {
            assert!(
                !t.contains(&format!("CANARY-hist-{i}\n")),
                "{f} readable (kernel only: {kernel_only}): {t}"
            );
        }
    }
    // An interactive shell reads and writes its history: no summary of denials.
    let o = h
        .sandpit_run(false)
        .args(["bash", "-ic", "echo hi; history -a"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("denials"), "{err}");
    assert!(!err.contains(".bash_history"), "{err}");
}

const DOTENV: &str = "PORT=8080\nDEBUG=true\nOPENAI_API_KEY=sk-CANARYenv0000000000000000\nDB_PASSWORD='CANARY-env-password'\nDATABASE_URL=postgres://app:CANARY-env-url@db.internal:5432/app\nSESSION_ID=Zx9Kq2LmW8pT4vR7CANARYnY3bHs\n";

fn workspace_with_dotenv() -> TestHome {
    let h = TestHome::new();
    let ws = h.workspace();
    h.write(&ws.join(".env"), DOTENV);
    h.write(
        &ws.join("services/api/.env.local"),
        "SECRET_KEY=CANARY-env-nested\nHOST=0.0.0.0\n",
    );
    h.write(
        &ws.join(".env.example"),
        "API_KEY=example-placeholder-value\n",
    );
    h
}

const READ_DOTENV: &str = "cat .env services/api/.env.local .env.example";

#[test]
fn dotenv_files_show_sentinels_for_secrets_and_the_rest_as_it_is() {
    let h = workspace_with_dotenv();
    let bare = text(&h.command("sh").args(["-c", READ_DOTENV]).output().unwrap());
    assert!(
        bare.contains("CANARY-env-password") && bare.contains("CANARY-env-nested"),
        "{bare}"
    );
    // Every program, the interposer's or not (a static reader meets the same copy:
    // it is a mount).
    for kernel_only in [false, true] {
        let o = h
            .sandpit_run(kernel_only)
            .args(["sh", "-c", READ_DOTENV])
            .output()
            .unwrap();
        let t = text(&o);
        assert!(o.status.success(), "{t}");
        assert!(!t.contains("CANARY"), "kernel only {kernel_only}: {t}");
        for kept in [
            "PORT=8080\n",
            "DEBUG=true\n",
            "HOST=0.0.0.0\n",
            "DATABASE_URL=postgres://app:sandpit-sentinel-dotenv-",
            "@db.internal:5432/app\n",
            "DB_PASSWORD=sandpit-sentinel-dotenv-",
            "API_KEY=example-placeholder-value",
        ] {
            assert!(t.contains(kept), "{kept}: {t}");
        }
    }
    // The user's own one line gives the real files back.
    h.user_config("[files]\nreal_dotenv = true\n");
    let o = h
        .sandpit_run(true)
        .args(["sh", "-c", READ_DOTENV])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(
        t.contains("CANARY-env-password") && t.contains("CANARY-env-nested"),
        "{t}"
    );
    // A project file cannot.
    h.user_config("");
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[files]\nreal_dotenv = true\n",
    );
    let o = h
        .sandpit_run(false)
        .args(["sh", "-c", READ_DOTENV])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(!t.contains("CANARY"), "{t}");
    assert!(
        t.contains("files.real_dotenv cannot be turned on by a project file"),
        "{t}"
    );
}

#[test]
fn a_tree_of_100000_entries_does_not_stop_the_run() {
    let h = workspace_with_dotenv();
    let big = h.workspace().join("big");
    std::fs::create_dir(&big).unwrap();
    for i in 0..100_001 {
        std::fs::write(big.join(i.to_string()), "").unwrap();
    }
    h.write(&big.join("deeper/.env"), "LATE_TOKEN=CANARY-late\n");
    let o = h
        .sandpit_run(false)
        .args(["sh", "-c", "cat .env; echo RAN"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success() && t.contains("RAN"), "{t}");
    assert!(!t.contains("CANARY") && t.contains("PORT=8080"), "{t}");
    // What lies past the search's bound is said at the start, and refused to
    // every dynamic program (a static one reads it: docs/run.md).
    assert!(t.contains(".env search stopped after"), "{t}");
    let o = h
        .sandpit_run(false)
        .args(["sh", "-c", "cat big/deeper/.env; echo RAN"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(t.contains("RAN") && !t.contains("CANARY"), "{t}");
    let o = h
        .sandpit()
        .args(["explain", "read", "big/deeper/.env"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(
        t.contains("DENY") && t.contains("past the run's .env search"),
        "{t}"
    );
}

/// Without a mount namespace (the Landlock-only fallback) no copy can be shown:
/// the startup files and `.env` files holding secrets are unreadable instead (by
/// the interposer: a static program or a raw system call still reads them, the
/// fallback's documented limit), and the start-up line says so.
#[test]
fn without_a_mount_namespace_the_files_with_secrets_are_unreadable() {
    let h = home_with_rc_files();
    h.write(&h.workspace().join(".env"), DOTENV);
    h.write(&h.home().join("notes.txt"), "NORMAL");
    let run = |argv: &[&str]| {
        let o = h
            .sandpit()
            .args(["run", "--allow-degraded", "--"])
            .args(argv)
            .env("SANDPIT_FORCE_FALLBACK", "1")
            .output()
            .unwrap();
        text(&o)
    };
    for (argv, _) in RC_SHELLS {
        let t = run(argv);
        assert!(!t.contains("CANARY-rc-"), "{argv:?}: {t}");
        assert!(t.contains("PATH="), "{argv:?} ran: {t}");
    }
    let t = run(&[
        "sh",
        "-c",
        "cat ~/.bashrc .env; echo CONTROL-$(cat ~/notes.txt)",
    ]);
    assert!(t.contains("CONTROL-NORMAL"), "{t}");
    assert!(!t.contains("CANARY"), "{t}");
    assert!(t.contains("unreadable (no mount namespace"), "{t}");
}

/// A credential's variable set in a startup file or a `.env` file gets the
/// credential's own sentinel there (what the proxy swaps for the real value on
/// the credential's hosts: an agent that loads its key from `.env` still works),
/// never the file's value.
#[test]
fn a_credentials_variable_in_startup_and_env_files_holds_its_sentinel() {
    let h = TestHome::new();
    h.user_config(
        "[network]\nallow = [\"api.openai.com\"]\n[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:REAL_OPENAI_KEY\"\nhosts = [\"api.openai.com\"]\n",
    );
    h.write(
        &h.home().join(".bashrc"),
        "export OPENAI_API_KEY=sk-CANARY-rc-cred\n",
    );
    h.write(
        &h.workspace().join(".env"),
        "OPENAI_API_KEY=sk-CANARY-env-cred\nPORT=8080\n",
    );
    let o = h
        .sandpit_run(false)
        .args([
            "sh",
            "-c",
            "echo ENV=$OPENAI_API_KEY; bash -ic 'echo RC=$OPENAI_API_KEY'; cat .env",
        ])
        .env("REAL_OPENAI_KEY", "sk-CANARY-real-value")
        .output()
        .unwrap();
    let t = text(&o);
    assert!(!t.contains("CANARY"), "{t}");
    let sentinel = t
        .lines()
        .find_map(|l| l.strip_prefix("ENV="))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(sentinel.starts_with("sandpit-sentinel-openai-"), "{t}");
    assert!(t.contains(&format!("RC={sentinel}\n")), "{t}");
    assert!(
        t.contains(&format!("OPENAI_API_KEY={sentinel}\nPORT=8080\n")),
        "{t}"
    );
}

#[test]
fn explain_says_what_a_run_does_with_a_dotenv_file() {
    let h = workspace_with_dotenv();
    let explain = |verb: &str, fallback: bool| {
        let mut c = h.sandpit();
        c.args(["explain", verb, ".env"]);
        if fallback {
            c.env("SANDPIT_FORCE_FALLBACK", "1");
        }
        text(&c.output().unwrap())
    };
    let t = explain("read", false);
    assert!(
        t.contains("ALLOW") && t.contains("read-only copy without"),
        "{t}"
    );
    let t = explain("write", false);
    assert!(t.contains("DENY") && t.contains("read-only copy"), "{t}");
    let t = explain("read", true);
    assert!(t.contains("DENY") && t.contains("no scrubbed copy"), "{t}");
    // As a run does: writing the copy fails, the host's file is untouched.
    let o = h
        .sandpit_run(false)
        .args(["sh", "-c", "echo X=1 >> .env || echo REFUSED"])
        .output()
        .unwrap();
    assert!(text(&o).contains("REFUSED"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(h.workspace().join(".env")).unwrap(),
        DOTENV
    );
}

/// Files that export tokens beside the usual startup files (red-team review): direnv's
/// `.envrc` in the project, and zsh's files where `ZDOTDIR` puts them (the launcher's
/// `ZDOTDIR`, and the XDG place `~/.config/zsh`), and ksh's. Bare they show the
/// token; inside they show neither the token (the copy drops its export) nor lose
/// what else they set (the control), for a static reader too (the copy is a mount).
#[test]
fn envrc_zdotdir_and_ksh_files_bring_no_withheld_variable_back() {
    let h = TestHome::new();
    let zdot = h.home().join("zdot");
    let files = [
        h.workspace().join(".envrc"),
        h.home().join(".config/zsh/.zshrc"),
        zdot.join(".zshenv"),
        h.home().join(".kshrc"),
    ];
    for (i, f) in files.iter().enumerate() {
        h.write(
            f,
            &format!("export GH_TOKEN=ghp_CANARY{i}\nexport EDITOR=vim{i}\n"),
        );
    }
    let cat: String = files.iter().map(|f| format!("cat {f:?}; ")).collect();
    let bare = text(&h.command("sh").args(["-c", &cat]).output().unwrap());
    for i in 0..files.len() {
        assert!(bare.contains(&format!("ghp_CANARY{i}")), "{bare}");
    }
    for kernel_only in [false, true] {
        let o = h
            .sandpit_run(kernel_only)
            .args(["sh", "-c", &cat])
            .env("ZDOTDIR", &zdot)
            .output()
            .unwrap();
        let t = text(&o);
        assert!(o.status.success(), "{t}");
        assert!(!t.contains("ghp_CANARY"), "kernel only {kernel_only}: {t}");
        for i in 0..files.len() {
            assert!(t.contains(&format!("EDITOR=vim{i}")), "{i}: {t}");
        }
    }
}
