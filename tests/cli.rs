//! The policy commands as a user runs them: `config`, `explain`, `init`, `log`, and the
//! exit codes (0 success, 2 usage or policy error; `explain`: 1 for a DENY).
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::TestHome;
use std::process::Output;

fn run(h: &TestHome, args: &[&str]) -> Output {
    h.sandpit().args(args).output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn help_exits_zero_and_unknown_subcommand_is_usage_error() {
    let out = std::process::Command::new(common::sandpit_bin())
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = std::process::Command::new(common::sandpit_bin())
        .arg("frobnicate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn test_user_is_unprivileged() {
    let h = TestHome::new();
    let out = h.command("id").output().unwrap();
    let id = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{id}");
    if common::is_root() {
        assert!(id.starts_with("uid=65534"), "{id}");
        assert!(!id.contains("(root)"), "supplementary groups kept: {id}");
    }
}

#[test]
fn explain_names_the_rule_and_the_layers() {
    let h = TestHome::new();
    let o = run(
        &h,
        &[
            "explain",
            "read",
            "~/.ssh/id_rsa"
                .replace('~', h.home().to_str().unwrap())
                .as_str(),
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(out.starts_with("DENY"), "{out}");
    assert!(
        out.contains("files.block_read \"~/.ssh\" in profiles/default.toml (built-in):"),
        "{out}"
    );
    assert!(out.contains("kernel:"), "{out}");
    // Relative paths are judged from the current directory, as the kernel would.
    let o = run(&h, &["explain", "write", "src/main.rs"]);
    assert!(text(&o).0.starts_with("ALLOW"), "{:?}", text(&o));
    let o = run(&h, &["explain", "write", ".git/hooks/pre-commit"]);
    assert!(text(&o).0.starts_with("DENY"), "{:?}", text(&o));
    let o = run(&h, &["explain", "write", "../outside"]);
    assert!(text(&o).0.starts_with("DENY"), "{:?}", text(&o));
}

#[test]
fn explain_connect_follows_profiles_flags_and_resolve() {
    let h = TestHome::new();
    let o = run(&h, &["explain", "connect", "api.anthropic.com"]);
    assert!(text(&o).0.starts_with("DENY"), "{:?}", text(&o));
    let o = run(
        &h,
        &[
            "explain",
            "connect",
            "api.anthropic.com:443",
            "--profile",
            "claude",
        ],
    );
    let (out, _) = text(&o);
    assert!(
        out.starts_with("ALLOW") && out.contains("profiles/claude.toml"),
        "{out}"
    );
    let o = run(
        &h,
        &[
            "explain",
            "--json",
            "connect",
            "127.1:8080",
            "--allow-host",
            "127.0.0.1:8080",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["verdicts"][0]["rule"]["file"], "command line");
    // localhost is 127.0.0.1 and ::1, not the rest of 127.0.0.0/8.
    for (dest, verdict) in [
        ("127.0.0.1:9999", "ALLOW"),
        ("[::1]:9999", "ALLOW"),
        ("127.0.0.3:9999", "DENY"),
        ("127.1.2.3:9999", "DENY"),
    ] {
        let o = run(
            &h,
            &["explain", "connect", dest, "--allow-host", "localhost:9999"],
        );
        assert!(text(&o).0.starts_with(verdict), "{dest}: {:?}", text(&o));
    }
    let o = run(
        &h,
        &[
            "explain",
            "connect",
            "127.0.0.3:9999",
            "--allow-host",
            "localhost:9999",
        ],
    );
    assert!(
        text(&o).0.contains("e.g. \"127.0.0.3:9999\""),
        "the advice names the address: {:?}",
        text(&o)
    );
    // A name sandpit resolves to loopback is judged on its address too.
    h.user_config("[network]\nallow = [\"allowed.test\", \"bad.test\"]\n[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n");
    let o = run(&h, &["explain", "connect", "allowed.test:80"]);
    assert!(text(&o).0.starts_with("ALLOW"), "{:?}", text(&o));
    let o = run(
        &h,
        &[
            "explain",
            "connect",
            "169.254.169.254:80",
            "--network",
            "unrestricted",
        ],
    );
    assert!(text(&o).0.starts_with("DENY"), "{:?}", text(&o));
}

#[test]
fn explain_exec_matches_patterns() {
    let h = TestHome::new();
    h.user_config("[exec]\nblock = ['re:\\bbase64\\s+-d']\n");
    let o = run(&h, &["explain", "exec", "--", "BASE64", "-d", "x"]);
    let (out, _) = text(&o);
    assert!(
        out.starts_with("DENY") && out.contains("config.toml:2:"),
        "{out}"
    );
    let o = run(&h, &["explain", "exec", "--", "ls", "-la"]);
    assert!(text(&o).0.starts_with("ALLOW"));
}

#[test]
fn config_shows_each_entry_with_its_origin() {
    let h = TestHome::new();
    h.user_config("[network]\nallow = [\"github.com:443\"]\n");
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[network]\nblock = [\"pastebin.com\"]\n",
    );
    let o = run(&h, &["config", "--json"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let allow = &v["policy"]["network"]["allow"][0];
    assert_eq!(
        allow["origin"]["file"],
        h.user_config_path().to_str().unwrap()
    );
    assert_eq!(allow["origin"]["line"], 2);
    let block = &v["policy"]["network"]["block"][0];
    assert!(block["origin"]["file"]
        .as_str()
        .unwrap()
        .ends_with(".sandpit.toml"));
    let o = run(&h, &["config"]);
    let (out, _) = text(&o);
    assert!(
        out.contains("\"github.com:443\",") && out.contains("config.toml:2:10"),
        "{out}"
    );
}

#[test]
fn config_shows_the_launcher_cpu_share_with_its_origin() {
    let h = TestHome::new();
    let o = run(&h, &["config"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.lines()
            .any(|l| l == "launcher_cpu = 50  # built-in default"),
        "{out}"
    );
    // The user's share, lowered by the project.
    h.write(
        &h.home().join(".sandpit/config.toml"),
        "[limits]\nlauncher_cpu = 20\n",
    );
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[limits]\nlauncher_cpu = 10\n",
    );
    let o = run(&h, &["config"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("launcher_cpu = "))
        .unwrap();
    assert!(
        line.starts_with("launcher_cpu = 10  # ") && line.ends_with(".sandpit.toml:2:16"),
        "{line}"
    );
    // A project may not raise it.
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[limits]\nlauncher_cpu = 40\n",
    );
    let o = run(&h, &["config"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("may only lower it"), "{:?}", text(&o));
}

#[test]
fn policy_errors_exit_2_with_file_line_and_hint() {
    let h = TestHome::new();
    h.user_config("[network]\nallow = [\"*.example.com\"]\n");
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[network]\nallow = [\"evil.test\"]\n",
    );
    let o = run(&h, &["config"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(".sandpit.toml:2:10: network.allow entry \"evil.test\" widens"),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");
    let o = run(&h, &["config", "--profile", "nosuch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("built-in profiles: aider, claude"),
        "{:?}",
        text(&o)
    );
    let o = run(&h, &["config", "--config", "/nonexistent/x.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("hint: give the path"), "{:?}", text(&o));
    let o = run(&h, &["allow", "--run", "nonexist", "example.com"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("no running run") && text(&o).1.contains("hint: `sandpit log --list`"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn init_writes_a_valid_starter_and_never_overwrites() {
    let h = TestHome::new();
    let o = run(&h, &["init"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let cfg = h.user_config_path();
    let written = std::fs::read_to_string(&cfg).unwrap();
    assert!(written.contains("[network]"));
    // The starter loads cleanly as the user layer.
    assert!(run(&h, &["config"]).status.success());
    std::fs::write(&cfg, "# mine\n").unwrap();
    let o = run(&h, &["init"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("never overwrites"));
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), "# mine\n");
    // The project starter loads as a project file over the user starter.
    std::fs::remove_file(&cfg).unwrap();
    assert!(run(&h, &["init"]).status.success());
    assert!(run(&h, &["init", "--project"]).status.success());
    let o = run(&h, &["config"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(text(&o).0.contains("pastebin.com"));
}

#[test]
fn every_profile_loads_allows_its_api_host_and_denies_ssh() {
    let h = TestHome::new();
    for (name, host) in [
        ("claude", "api.anthropic.com"),
        ("codex", "api.openai.com"),
        ("goose", "api.anthropic.com"),
        ("pi", "api.anthropic.com"),
        ("aider", "api.openai.com"),
        ("opencode", "api.anthropic.com"),
        ("gemini", "generativelanguage.googleapis.com"),
        ("mini", "api.openai.com"),
    ] {
        let o = run(&h, &["explain", "connect", host, "--profile", name]);
        assert!(text(&o).0.starts_with("ALLOW"), "{name}: {:?}", text(&o));
        let key = h.home().join(".ssh/id_rsa");
        let o = run(
            &h,
            &["explain", "read", key.to_str().unwrap(), "--profile", name],
        );
        assert!(text(&o).0.starts_with("DENY"), "{name}: {:?}", text(&o));
    }
}

#[test]
fn completions_are_generated_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef sandpit"),
        ("fish", "complete -c sandpit"),
    ] {
        let o = std::process::Command::new(common::sandpit_bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(o.status.success(), "{shell}");
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(
            s.contains(marker) && s.contains("explain"),
            "{shell}: {}",
            &s[..s.len().min(200)]
        );
    }
}

/// An agent that is not installed (goose is in no registry this project builds from)
/// stops before anything is made or started, with the shell's 127 and what to do;
/// the same agent's profile with a program that is there runs (the control).
#[test]
fn a_program_that_is_not_installed_stops_before_the_run() {
    let h = TestHome::new();
    for cmd in ["sandpit-test-absent-agent", "./absent-agent"] {
        let o = run(&h, &["run", "--profile", "goose", "--", cmd]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(127), "{cmd}: {err}");
        assert!(err.contains(&format!("{cmd} was not found")), "{err}");
        assert!(err.contains("the command was not started"), "{err}");
        assert!(!err.contains("sandpit: layers:"), "started anyway: {err}");
        // Nothing of the agent's was made in the home.
        assert!(!h.home().join(".config/goose").exists(), "{cmd}");
    }
    let o = run(&h, &["run", "--profile", "goose", "--", "true"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(h.home().join(".config/goose").exists());
}

/// `sandpit run` started in the home (the README's first command has no `cd`)
/// would make every file there writable, `~/.gitconfig` (an alias the user's next
/// `git st` runs), `~/bin`, the shell's startup files: refused with why and what to
/// do, before anything else is printed, exit 2, nothing run (issue 41). So is a
/// directory holding the home, and `--workspace ~`. The user may name it
/// (`--allow-home-workspace`, or `files.allow_home_workspace` in their own
/// config: the controls, which run); a project file may not. `/` is refused even
/// when named. `plan`, `explain` and `check` say the same.
#[test]
fn the_home_is_the_workspace_only_when_the_user_names_it() {
    let h = TestHome::new_in("/var/tmp");
    let home = h.home();
    let gitconfig = home.join(".gitconfig");
    let attack = "printf '[alias]\\n\\tst = !touch ~/pwned\\n' >> ~/.gitconfig; touch ~/ran";
    // Bare, the probe writes the user's git config.
    let o = h
        .command("sh")
        .args(["-c", attack])
        .current_dir(&home)
        .output()
        .unwrap();
    assert!(o.status.success() && gitconfig.exists(), "{:?}", text(&o));
    std::fs::remove_file(&gitconfig).unwrap();
    std::fs::remove_file(home.join("ran")).unwrap();

    let refused = |dir: &std::path::Path, args: &[&str], what: &str| {
        let o = h.sandpit().args(args).current_dir(dir).output().unwrap();
        let (out, err) = text(&o);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?} in {}: {err}",
            dir.display()
        );
        assert!(
            err.starts_with(&format!("sandpit: error: the workspace would be {what}")),
            "{args:?}: not the first thing printed: {err}"
        );
        assert!(err.contains("cd into the project"), "{err}");
        assert!(!err.contains("layers:") && out.is_empty(), "{out}{err}");
        assert!(!gitconfig.exists() && !home.join("ran").exists(), "{err}");
        err
    };
    let run_attack = ["run", "--", "sh", "-c", attack];
    let err = refused(&home, &run_attack, "your home directory");
    assert!(err.contains("--allow-home-workspace"), "{err}");
    let holder = h.dir.path().to_path_buf();
    let err = refused(&holder, &run_attack, &holder.display().to_string());
    assert!(err.contains("which holds your home directory"), "{err}");
    let named = [
        "run",
        "--workspace",
        home.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        attack,
    ];
    refused(&h.workspace(), &named, "your home directory");
    // `/`, with and without the flag, and with the user's key.
    let root = std::path::Path::new("/");
    for args in [
        &run_attack[..],
        &["run", "--allow-home-workspace", "--", "sh", "-c", attack],
    ] {
        let err = refused(root, args, "/,");
        assert!(err.contains("/ is refused even with"), "{err}");
        assert!(!err.contains("placeholder"), "{err}");
    }
    // The inspecting commands say the same.
    refused(&home, &["plan", "--", "sh"], "your home directory");
    refused(
        &home,
        &["explain", "write", "~/.gitconfig"],
        "your home directory",
    );
    let o = h
        .sandpit()
        .args(["check", "sh"])
        .current_dir(&home)
        .output()
        .unwrap();
    assert!(
        text(&o)
            .1
            .contains("the workspace would be your home directory")
            || text(&o)
                .0
                .contains("the workspace would be your home directory"),
        "{:?}",
        text(&o)
    );

    // The controls: named by the user, the home is the workspace.
    let o = h
        .sandpit()
        .args(["run", "--allow-home-workspace", "--", "touch", "ran"])
        .current_dir(&home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(home.join("ran").exists());
    std::fs::remove_file(home.join("ran")).unwrap();
    h.user_config("[files]\nallow_home_workspace = true\n");
    let o = h
        .sandpit()
        .args(["run", "--", "touch", "ran"])
        .current_dir(&home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(home.join("ran").exists());
    // `sandpit config` names the rule that accepted it.
    let o = h
        .sandpit()
        .arg("config")
        .current_dir(&home)
        .output()
        .unwrap();
    let (out, _) = text(&o);
    assert!(
        out.contains("allow_home_workspace = true  # ") && out.contains("config.toml:2"),
        "{out}"
    );
    std::fs::remove_file(home.join("ran")).unwrap();
    refused(root, &run_attack, "/,");

    // A project file may not name it, in a project or in the home.
    h.user_config("");
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[files]\nallow_home_workspace = true\n",
    );
    let o = h
        .sandpit()
        .args(["run", "--", "touch", "ran"])
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(".sandpit.toml:2") && err.contains("cannot be set by a project file"),
        "{err}"
    );
    assert!(!h.workspace().join("ran").exists());
    h.write(
        &home.join(".sandpit.toml"),
        "[files]\nallow_home_workspace = true\n",
    );
    refused(&home, &run_attack, "your home directory");
}

/// A command that fails with no refusal recorded where the interposer is off (a
/// static program meets the same) is not left in silence: sandpit says that no
/// layer recorded a refusal and why that can be. Not when the command succeeds, and
/// not when the refusal was recorded (the summary names it: the kernel layer's own
/// refusals of paths too).
#[test]
fn a_failure_with_no_recorded_refusal_says_where_it_may_come_from() {
    let h = TestHome::new();
    let hint = "no layer recorded a refusal; the interposer is off (--kernel-only)";
    let o = run(&h, &["run", "--kernel-only", "--", "sh", "-c", "exit 3"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3));
    assert!(err.contains(hint), "{err}");
    // A path the kernel layer refuses alone is recorded (its notifier) and named.
    let o = run(
        &h,
        &["run", "--kernel-only", "--", "sh", "-c", "echo x > ~/f"],
    );
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("deny write ~/f [kernel]"), "{err}");
    assert!(!err.contains("no layer recorded"), "{err}");
    let o = run(&h, &["run", "--kernel-only", "--", "true"]);
    assert!(o.status.success());
    assert!(!text(&o).1.contains("no layer recorded"), "{:?}", text(&o));
    // With the interposer the refusal is recorded and the summary names it.
    let o = run(&h, &["run", "--", "sh", "-c", "echo x > ~/f"]);
    let (_, err) = text(&o);
    assert!(err.contains("deny write ~/f"), "{err}");
    assert!(!err.contains("no layer recorded"), "{err}");
}

/// A reader that stops early (`| head`) ends a printing command quietly: no panic,
/// no backtrace, as with other tools.
#[test]
fn printing_commands_end_quietly_when_the_reader_goes() {
    let h = TestHome::new();
    for args in ["config", "plan -- true", "explain read /etc/passwd"] {
        let o = h
            .command("sh")
            .arg("-c")
            .arg(format!(
                "for i in 1 2 3 4 5 6 7 8; do '{}' {args}; done | head -c 1 >/dev/null",
                common::sandpit_bin().display()
            ))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args}: {err}"
        );
    }
    // The positive control: the same command whole.
    let o = h.sandpit().arg("config").output().unwrap();
    assert!(o.status.success() && !o.stdout.is_empty());
}

/// `explain` answers like `test`: 0 for ALLOW, 1 for DENY (text and --json alike), 2
/// for a request it cannot read; and a `~` the shell did not expand (quoted) is the
/// home, as it is in every rule.
#[test]
fn explain_exits_by_its_verdict_and_reads_a_quoted_tilde() {
    let h = TestHome::new();
    let home = std::fs::canonicalize(h.home()).unwrap();
    let o = run(&h, &["explain", "read", "~/.ssh/id_rsa"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        out.starts_with(&format!("DENY  read {}/.ssh/id_rsa", home.display())),
        "{out}"
    );
    let o = run(&h, &["explain", "read", "~"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(
        text(&o)
            .0
            .starts_with(&format!("ALLOW  read {}\n", home.display())),
        "{:?}",
        text(&o)
    );
    // A `~` inside a name is a name.
    let o = run(&h, &["explain", "read", "a~/.ssh"]);
    assert!(text(&o).0.contains("/a~/.ssh"), "{:?}", text(&o));
    let o = run(&h, &["explain", "write", "src/main.rs"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(text(&o).0.starts_with("ALLOW"), "{:?}", text(&o));
    for (args, code, decision) in [
        (
            &["explain", "--json", "connect", "example.com"][..],
            1,
            "deny",
        ),
        (&["explain", "--json", "exec", "--", "true"][..], 0, "allow"),
    ] {
        let o = run(&h, args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {:?}", text(&o));
        let v: serde_json::Value = serde_json::from_str(&text(&o).0).unwrap();
        assert_eq!(v["decision"], decision, "{args:?}: {v}");
    }
    let o = run(&h, &["explain", "listen", "nowhere"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    assert!(
        text(&o).1.contains("no listening address"),
        "{:?}",
        text(&o)
    );
}

/// `log --denied` after a run with nothing refused says so, rather than nothing; after
/// a refusal it lists it and says no such thing.
#[test]
fn log_denied_says_when_a_run_had_no_denials() {
    let h = TestHome::new();
    let o = h.sandpit_run(false).arg("true").output().unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    let o = run(&h, &["log", "--denied"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(out.starts_with("no denials in run "), "{out}");
    let key = h.home().join(".ssh/id_rsa");
    h.write(&key, "canary-key");
    let o = h.sandpit_run(false).arg("cat").arg(&key).output().unwrap();
    assert!(
        !common::text(&o).contains("canary-key"),
        "{}",
        common::text(&o)
    );
    let o = run(&h, &["log", "--denied"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(out.contains("deny") && out.contains(".ssh/id_rsa"), "{out}");
    assert!(!out.contains("no denials"), "{out}");
}

/// A lookup the policy refuses (offline mode; a host missing from `network.allow`) has
/// a sandpit line naming the rule, not only the program's "could not resolve"; a name
/// the policy allows resolves with no line. No packet leaves: offline runs have no
/// network, and sandpit's responder refuses the name without asking anyone.
#[test]
fn a_refused_lookup_names_the_rule() {
    let h = TestHome::new();
    h.user_config(
        "[network]\nallow = [\"allowed.test\"]\n[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n",
    );
    let py = "import socket, sys\nfor n in sys.argv[1:]:\n    try:\n        print(n, socket.getaddrinfo(n, 443)[0][4][0])\n    except OSError as e:\n        print(n, 'failed', e)\n";
    for (mode, rule) in [
        ("offline", "network.mode = \"offline\""),
        ("filtered", "not in network.allow"),
    ] {
        let o = h
            .sandpit()
            .args(["run", "--network", mode, "--", "python3", "-c", py])
            .args(["blocked.example", "allowed.test"])
            .output()
            .unwrap();
        let (out, err) = (common::stdout(&o), common::stderr(&o));
        assert!(out.contains("blocked.example failed"), "{mode}: {out}{err}");
        assert!(
            err.lines().any(
                |l| l.starts_with("sandpit: no address for blocked.example: ") && l.contains(rule)
            ),
            "{mode}: {err}"
        );
        // Offline refuses every name; filtered answers the allowed one, and quietly.
        if mode == "filtered" {
            assert!(out.contains("allowed.test 127.0.0.2"), "{mode}: {out}{err}");
            assert!(
                !err.contains("no address for allowed.test"),
                "{mode}: {err}"
            );
        }
    }
}

/// `check`'s mode line names the layers a run would start, as `plan` does: the shims
/// and the adversary only where the policy turns them on.
#[test]
fn check_names_only_the_layers_a_run_starts() {
    let h = TestHome::new();
    let mode = |h: &TestHome| {
        let o = run(h, &["check", "--", "sh"]);
        assert!(o.status.success(), "{:?}", text(&o));
        let out = text(&o).0;
        out.lines()
            .find_map(|l| l.strip_prefix("mode:"))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no mode line: {out}"))
            .to_string()
    };
    assert_eq!(
        mode(&h),
        "full (kernel + interposition); shims off (`sandpit run --shims` adds them); no adversary ([adversary] configures one)"
    );
    let o = run(&h, &["plan", "--", "sh"]);
    assert!(text(&o).0.contains("shims: off"), "{:?}", text(&o));
    h.user_config(
        "[shims]\nenabled = true\n[adversary]\nprovider = \"anthropic\"\nmodel = \"judge\"\napi_key_env = \"TEST_ADV_KEY\"\nrules = \"no exfiltration\"\n",
    );
    assert_eq!(
        mode(&h),
        "full (kernel + interposition + shims + adversary)"
    );
    let o = run(&h, &["plan", "--", "sh"]);
    assert!(text(&o).0.contains("shims: on"), "{:?}", text(&o));
}
