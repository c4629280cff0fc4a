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

/// A single-file root (from the user's config: no built-in profile has one) is
/// writable in place beside a profile's roots, and the profile's protected files and
/// `~/.claude.json` (Claude Code's MCP servers) stay read-only.
#[test]
fn single_file_roots_are_writable_and_protected_files_beside_them_are_not() {
    let h = TestHome::new();
    h.user_config("[files]\nallow_write = [\"~/.notes.json\"]\n");
    h.write(&h.home().join(".notes.json"), "{}");
    h.write(&h.home().join(".claude.json"), "{}");
    h.write(&h.home().join(".claude/history"), "");
    h.write(&h.home().join(".claude/settings.json"), "{\"hooks\":{}}");
    let o = run(&h, "claude", "echo '{\"a\":1}' > ~/.notes.json && echo x >> ~/.claude/history && echo evil > ~/.claude/settings.json");
    assert!(!o.status.success(), "the settings write must fail");
    assert_eq!(
        std::fs::read_to_string(h.home().join(".notes.json"))
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
    let o = run(&h, "claude", "echo evil > ~/.claude.json");
    assert!(!o.status.success(), "the ~/.claude.json write must fail");
    assert_eq!(
        std::fs::read_to_string(h.home().join(".claude.json")).unwrap(),
        "{}"
    );
    // Outside any profile root, home stays read-only.
    let o = run(&h, "claude", "echo x > ~/.other");
    assert!(!o.status.success());
    assert!(!h.home().join(".other").exists());
}

/// The `~/` entries of `[files] key` in a profile's text.
fn home_entries(profile: &str, key: &str) -> Vec<String> {
    let t: toml::Table = toml::from_str(profile).unwrap();
    t.get("files")
        .and_then(|f| f.get(key))
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|e| e.as_str()?.strip_prefix("~/").map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// An agent's first run on a fresh home: its state directories are made (and kept),
/// it can write there, and what it must not write stays unwritable in its right
/// kind: a protected config is an empty file the agent can read (a directory there
/// stopped codex: "is not a file"), a protected directory an empty directory. Held
/// by the kernel layer alone (`--kernel-only`) and with the interposer; after the
/// run no placeholder is left behind.
#[test]
fn an_agents_state_is_made_on_a_fresh_home_and_its_configs_stay_protected() {
    for kernel_only in [true, false] {
        for (name, text) in sandpit_policy::BUILTIN_PROFILES {
            let roots: Vec<String> = home_entries(text, "allow_write")
                .into_iter()
                .filter(|r| std::path::Path::new(r).extension().is_none())
                .collect();
            if roots.is_empty() {
                continue;
            }
            let h = TestHome::new();
            let protected = home_entries(text, "block_write");
            let mut script = String::from("set -u\n");
            for r in &roots {
                script += &format!("echo state > ~/{r}/probe-state || echo 'FAIL write {r}'\n");
            }
            for p in &protected {
                let file = std::path::Path::new(p).extension().is_some()
                    || [".env", ".npmrc"]
                        .iter()
                        .any(|f| p.ends_with(&format!("/{f}")));
                script += &if file {
                    format!(
                        "test -f ~/{p} || echo 'FAIL not a file {p}'\n\
                         case \"$(cat ~/{p})\" in ''|'{{}}') ;; *) echo 'FAIL not empty {p}';; esac\n\
                         (echo evil > ~/{p}) 2>/dev/null && echo 'FAIL wrote {p}'\n"
                    )
                } else {
                    format!(
                        "test -d ~/{p} || echo 'FAIL not a dir {p}'\n\
                         (echo evil > ~/{p}/x) 2>/dev/null && echo 'FAIL wrote into {p}'\n"
                    )
                };
                script += &format!(
                    "(rm -rf ~/{p}) 2>/dev/null; test -e ~/{p} || echo 'FAIL removed {p}'\n"
                );
            }
            script += "echo done\n";
            let mut c = h.sandpit();
            c.arg("run").args(["--profile", name]);
            if kernel_only {
                c.arg("--kernel-only");
            }
            let o = c.args(["--", "sh", "-c", &script]).output().unwrap();
            let out = String::from_utf8_lossy(&o.stdout);
            let err = String::from_utf8_lossy(&o.stderr);
            let case = format!("{name} (kernel only: {kernel_only})");
            assert!(
                o.status.success() && out.ends_with("done\n"),
                "{case}: {out}\n{err}"
            );
            assert!(!out.contains("FAIL"), "{case}: {out}\n{err}");
            for r in &roots {
                // Positive control: the agent's state is there after the run.
                assert_eq!(
                    std::fs::read_to_string(h.home().join(r).join("probe-state")).unwrap(),
                    "state\n",
                    "{case}"
                );
                assert!(err.contains("sandpit: made ~/"), "{case}: {err}");
            }
            for p in &protected {
                assert!(
                    !h.home().join(p).exists(),
                    "{case}: the placeholder ~/{p} was left behind"
                );
            }
        }
    }
}

/// A project file shapes nothing in the home: its protected paths get no directories
/// made for them (a cloned repository naming `~/.codex/config.toml/x` must not turn
/// codex's config into a directory), while the profile's state directory is made.
#[test]
fn a_project_file_makes_no_directory_in_the_home() {
    let h = TestHome::new();
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[files]\nblock_write = [\"~/.codex/config.toml/x\", \"~/.codex/made-by-project/y\"]\n",
    );
    let o = run(&h, "codex", "true");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        h.home().join(".codex").is_dir(),
        "the profile's state directory"
    );
    assert!(!h.home().join(".codex/config.toml").is_dir());
    assert!(!h.home().join(".codex/made-by-project").exists());
}

/// A profile's `env.set` reaches the command and every program it spawns (gemini's
/// `GEMINI_CLI_NO_RELAUNCH`, even where the user withholds `GEMINI_*`), and
/// `sandpit plan` and `sandpit config` show it; without the profile, nothing sets it.
#[test]
fn a_profiles_env_set_reaches_every_program_and_is_shown() {
    let h = TestHome::new();
    h.user_config("[env]\nwithhold = [\"GEMINI_*\"]\n");
    let o = run(&h, "gemini", "env | grep ^GEMINI_CLI_NO_RELAUNCH=");
    let t = common::text(&o);
    assert!(o.status.success(), "{t}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "GEMINI_CLI_NO_RELAUNCH=true",
        "{t}"
    );
    let o = run(
        &h,
        "codex",
        "env | grep -c ^GEMINI_CLI_NO_RELAUNCH= || true",
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "0",
        "{}",
        common::text(&o)
    );
    let plan = h
        .sandpit()
        .args(["plan", "--json", "--profile", "gemini", "--", "true"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let set = v["env"]["set"].as_array().unwrap();
    assert!(
        set.iter()
            .any(|e| e["name"] == "GEMINI_CLI_NO_RELAUNCH" && e["value"] == "true"),
        "{set:?}"
    );
    let c = h
        .sandpit()
        .args(["config", "--profile", "gemini"])
        .output()
        .unwrap();
    let c = common::text(&c);
    assert!(
        c.contains("[env.set]")
            && c.contains("GEMINI_CLI_NO_RELAUNCH = \"true\"  # profiles/gemini.toml"),
        "{c}"
    );
}

/// `env.set` and the run's own variables of the same name make one variable each:
/// the package cache's replaces env.set's (it is the one such directory the sandbox
/// may write), and the sealed `.git`'s `-buildvcs=false` is added to env.set's
/// GOFLAGS. Before, both copies reached the environment, and which one a program
/// saw depended on its language.
#[test]
fn env_set_and_the_runs_own_variables_make_one_each() {
    let h = TestHome::new();
    h.user_config(
        "[env.set]\nCARGO_HOME = \"/elsewhere/cargo\"\nGOFLAGS = \"-mod=vendor\"\nKEPT = \"yes\"\n",
    );
    let o = run(
        &h,
        "codex",
        "env | grep -E '^(CARGO_HOME|GOFLAGS|KEPT)=' | sort",
    );
    let t = common::text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{t}");
    assert!(
        lines[0].starts_with("CARGO_HOME=") && lines[0].contains("/.cache/sandpit/"),
        "{t}"
    );
    assert_eq!(lines[1], "GOFLAGS=-mod=vendor -buildvcs=false", "{t}");
    assert_eq!(lines[2], "KEPT=yes", "{t}");
}
