// Linux only: the layer that hides the files is Landlock's (macOS: not held, and the
// run says so).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `files.agent_read`: the agent's own login file is read by the agent and by no
//! command it spawns, by any route. The agent is the command sandpit starts (here
//! `sh -c SCRIPT` under `--profile codex`, whose `~/.codex/auth.json` holds the
//! canary); every attack runs in a process the agent spawned. Each case runs bare
//! first (the attack must reach the canary or change the file: the control) and then
//! under sandpit, where the agent itself still reads the file (the positive control:
//! `AGENT-OK`) and the attack gets nothing and changes nothing.
mod common;
mod kernel_support;

use std::path::PathBuf;
use std::process::Output;

use common::{text, TestHome};
use kernel_support::build_probe;

const CANARY: &str = "CANARY-login-7c1e44";
const AUTH: &str = ".codex/auth.json";

struct Stage {
    h: TestHome,
}

impl Stage {
    fn new() -> Stage {
        let h = TestHome::new();
        h.write(
            &h.home().join(AUTH),
            &format!("{{\"OPENAI_API_KEY\": \"{CANARY}\"}}\n"),
        );
        h.write(&h.home().join(".codex/history.jsonl"), "SIBLING-OK\n");
        h.write(&h.home().join(".codex/sessions/old.jsonl"), "");
        build_probe(&h, "static_read", true);
        build_probe(&h, "static_write", true);
        let probe = |n: &str| {
            let to = h.workspace().join(n);
            std::fs::copy(
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../tests/kernel_support")
                    .join(n),
                &to,
            )
            .unwrap();
            h.give_to_test_user(&to);
        };
        probe("rawread.py");
        Stage { h }
    }

    fn auth(&self) -> PathBuf {
        self.h.home().join(AUTH)
    }

    fn auth_intact(&self) -> bool {
        std::fs::read_to_string(self.auth()).is_ok_and(|s| s.contains(CANARY))
    }

    /// `python3 -c script` as the agent, bare or under `--profile codex`.
    fn python_agent(&self, sandboxed: bool, script: &str) -> Output {
        self.launch(sandboxed, &["python3", "-c", script], &[])
    }

    /// The agent (`sh`) reads its file itself, then runs `attack` in a child.
    fn run(&self, sandboxed: bool, attack: &str, extra: &[&str]) -> Output {
        let script = format!(
            "F={f}; read -r l < \"$F\"; case $l in *{CANARY}*) echo AGENT-OK;; esac; sh -c '{attack}'",
            f = self.auth().display()
        );
        self.agent(sandboxed, &script, extra)
    }

    /// The agent `sh -c script`, `$F` naming its login, bare or under sandpit.
    fn agent(&self, sandboxed: bool, script: &str, extra: &[&str]) -> Output {
        self.launch(sandboxed, &["sh", "-c", script], extra)
    }

    /// `argv` as the agent, `$F` naming its login: bare, or under `sandpit run
    /// --profile codex EXTRA…`.
    fn launch(&self, sandboxed: bool, argv: &[&str], extra: &[&str]) -> Output {
        let mut c = if sandboxed {
            let mut c = self.h.sandpit();
            c.args(["run", "--profile", "codex"]).args(extra).arg("--");
            c
        } else {
            self.h.command("env")
        };
        c.args(argv).env("F", self.auth());
        c.output().unwrap()
    }
}

/// Reads by a spawned command: each leaks bare, none under sandpit.
const READS: &[(&str, &str)] = &[
    ("cat", "cat $F"),
    ("raw system calls", "python3 rawread.py $F"),
    ("static binary", "./static_read $F"),
    ("static grandchild", "sh -c \"./static_read $F\""),
    ("through /proc/PID/root", "./static_read /proc/$$/root$F"),
    ("symlink", "ln -s $F sl && ./static_read sl"),
    ("copy", "cp $F copied; cat copied"),
    ("hard link", "ln $F hl; ./static_read hl"),
    (
        "hard link by raw system call",
        "python3 -c \"import ctypes,os; ctypes.CDLL(None).syscall(265, -100, os.environ[\\\"F\\\"].encode(), -100, b\\\"hl2\\\", 0)\"; ./static_read hl2",
    ),
    ("rename into the workspace", "mv $F moved; ./static_read moved"),
    (
        "a spawned shell execs the agent program",
        "exec /usr/bin/head -c 200 $F",
    ),
];

/// Changes by a spawned command: each changes the file bare, none under sandpit.
const WRITES: &[(&str, &str)] = &[
    ("shell redirect", "echo evil > $F"),
    ("static binary", "./static_write $F"),
    ("truncate", "truncate -s 0 $F"),
    ("remove", "rm -f $F"),
];

#[test]
fn no_command_the_agent_spawns_reads_its_login() {
    // `head` is an agent program here (as codex's native binary is): started by the
    // agent it reads the file; exec'd by a command the agent spawned it does not.
    let agent_programs =
        "[env]\nagent = [\"OPENAI_API_KEY\"]\nagent_programs = [\"/usr/bin/head\"]\n";
    let mut failures = vec![];
    for (name, attack) in READS {
        let s = Stage::new();
        s.h.user_config(agent_programs);
        let bare = text(&s.run(false, attack, &[]));
        assert!(
            bare.contains(CANARY),
            "control {name}: the attack does not reach the file without sandpit: {bare}"
        );
        let s = Stage::new();
        s.h.user_config(agent_programs);
        let o = s.run(true, attack, &[]);
        let t = text(&o);
        if !t.contains("AGENT-OK") || t.contains(CANARY) || !s.auth_intact() {
            failures.push(format!("{name}: {t}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn no_command_the_agent_spawns_changes_its_login() {
    let mut failures = vec![];
    for (name, attack) in WRITES {
        let s = Stage::new();
        let bare = text(&s.run(false, attack, &[]));
        assert!(
            !s.auth_intact(),
            "control {name}: the file is unchanged without sandpit: {bare}"
        );
        let s = Stage::new();
        let t = text(&s.run(true, attack, &[]));
        if !t.contains("AGENT-OK") || !s.auth_intact() {
            failures.push(format!("{name}: {t}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// What the spawned commands keep: the rest of the agent's directory, their own
/// renames across directories, the agent program started by the agent itself. (Not
/// a file made directly beside the login after the command started: docs/agents.md.)
#[test]
fn spawned_commands_keep_everything_else() {
    let s = Stage::new();
    s.h.user_config("[env]\nagent = [\"OPENAI_API_KEY\"]\nagent_programs = [\"/usr/bin/head\"]\n");
    let o = s.run(
        true,
        "./static_read ~/.codex/history.jsonl; echo made > ~/.codex/sessions/new.jsonl && cat ~/.codex/sessions/new.jsonl; \
         mkdir -p a b && echo moved-ok > a/f && mv a/f b/f && cat b/f",
        &[],
    );
    let t = text(&o);
    assert!(t.contains("AGENT-OK"), "{t}");
    assert!(t.contains("SIBLING-OK"), "a sibling of the login file: {t}");
    assert!(
        t.contains("made"),
        "a new file in the agent's sessions: {t}"
    );
    assert!(t.contains("moved-ok"), "a rename across directories: {t}");
    // The agent program, started by the agent itself (not through a spawned shell).
    let script = format!(
        "/usr/bin/head -c 200 {} | grep -c {CANARY}",
        s.auth().display()
    );
    let o =
        s.h.sandpit()
            .args(["run", "--profile", "codex", "--", "sh", "-c", &script])
            .output()
            .unwrap();
    assert_eq!(common::stdout(&o).trim(), "1", "{}", text(&o));
}

/// The refusal is in the summary with its rule, `explain` says the same for the agent
/// and for a spawned command, and the run's start line says who reads the file.
#[test]
fn explain_and_the_summary_say_what_the_run_does() {
    let s = Stage::new();
    let o = s.run(true, "cat $F", &[]);
    let err = common::stderr(&o);
    assert!(
        err.contains("sandpit: blocked read of ~/.codex/auth.json (files.agent_read"),
        "the spawned command's message: {err}"
    );
    let summary = err.split("denials").nth(1).unwrap_or_default();
    assert!(
        summary.contains("deny read ~/.codex/auth.json")
            && summary
                .contains("rule: files.agent_read \"~/.codex/auth.json\" in profiles/codex.toml"),
        "the summary: {err}"
    );
    assert!(
        err.contains("~/.codex/auth.json for the agent only (files.agent_read)"),
        "the layers line: {err}"
    );
    let explain = |spawned: bool| {
        let mut c = s.h.sandpit();
        c.args(["explain", "--profile", "codex", "read"])
            .arg(s.auth());
        if spawned {
            c.arg("--spawned");
        }
        text(&c.output().unwrap())
    };
    let agent = explain(false);
    assert!(
        agent.contains("ALLOW") && agent.contains("a command it spawns: blocked read"),
        "{agent}"
    );
    let spawned = explain(true);
    assert!(
        spawned.contains("DENY") && spawned.contains("files.agent_read"),
        "{spawned}"
    );
    // `sandpit config` lists it with where it was set.
    let config = text(
        &s.h.sandpit()
            .args(["config", "--profile", "codex"])
            .output()
            .unwrap(),
    );
    let listed = config
        .lines()
        .skip_while(|l| !l.starts_with("agent_read"))
        .nth(1);
    assert!(
        listed
            .is_some_and(|l| l.contains("~/.codex/auth.json") && l.contains("profiles/codex.toml")),
        "{config}"
    );
    // Without the interposer nothing tells the agent apart: the run says so.
    let o = s.run(true, "true", &["--kernel-only"]);
    let err = common::stderr(&o);
    assert!(
        err.contains("weaker: ~/.codex/auth.json (files.agent_read) readable by every process of the run: without the interposer (--kernel-only)"),
        "{err}"
    );
}

/// Where the kernel layer's refusals are reported (a static agent program, as
/// codex's; here forced with `SANDPIT_KERNEL_REPORTS=1`), a static program the
/// agent spawns that reads the login is reported with `files.agent_read`'s rule: the
/// launcher judges it as a spawned command, not as the agent. The agent's own read
/// (the shell's `read`, before) is no refusal, and none is reported.
#[test]
fn a_static_commands_refused_read_of_the_login_is_reported_with_its_rule() {
    let s = Stage::new();
    for fallback in [false, true] {
        let mut c = s.h.sandpit();
        c.args(["run", "--profile", "codex"]);
        if fallback {
            c.arg("--allow-degraded").env("SANDPIT_FORCE_FALLBACK", "1");
        }
        c.args(["--", "sh", "-c"])
            .arg(format!(
                "F={f}; read -r l < \"$F\"; case $l in *{CANARY}*) echo AGENT-OK;; esac; ./static_read $F",
                f = s.auth().display()
            ))
            .env("SANDPIT_KERNEL_REPORTS", "1");
        let o = c.output().unwrap();
        let t = text(&o);
        assert!(
            t.contains("AGENT-OK"),
            "fallback={fallback}: the agent reads its login: {t}"
        );
        assert!(
            !t.contains(CANARY),
            "fallback={fallback}: the static program read it: {t}"
        );
        let summary = t.split("denials").nth(1).unwrap_or_default();
        let line = summary
            .lines()
            .position(|l| l.contains("deny read ~/.codex/auth.json [kernel]"))
            .unwrap_or_else(|| {
                panic!("fallback={fallback}: no kernel report of the hidden read: {t}")
            });
        let rule = summary.lines().nth(line + 1).unwrap_or_default();
        assert!(
            rule.contains("files.agent_read") && rule.contains("profiles/codex.toml"),
            "fallback={fallback}: {t}"
        );
        // The positive control: the shell's own read was never refused, so the
        // log holds one kernel refusal of the file, the static program's.
        assert_eq!(
            summary.matches("auth.json [kernel]").count(),
            1,
            "fallback={fallback}: {t}"
        );
    }
}

/// No refusal is reported that did not happen: where nothing hides the login
/// (`--kernel-only`: every process reads it, as the layers line says) or the
/// reader is the agent (a static agent reading from a worker thread, whose id the
/// kernel reports, not its process's), the read succeeds and no `[kernel]` denial
/// of the file is recorded.
#[test]
fn a_read_that_succeeds_is_never_reported_as_refused() {
    let s = Stage::new();
    build_probe(&s.h, "static_thread_read", true);
    let f = s.auth().display().to_string();
    let runs: [(&str, Vec<&str>); 3] = [
        (
            "--kernel-only, a spawned cat",
            vec!["--kernel-only", "--", "sh", "-c", "cat $F"],
        ),
        (
            "--kernel-only, a spawned static program",
            vec!["--kernel-only", "--", "sh", "-c", "./static_read $F"],
        ),
        (
            "a static agent's worker thread",
            vec!["--", "./static_thread_read", &f],
        ),
    ];
    for (what, args) in runs {
        let o =
            s.h.sandpit()
                .args(["run", "--profile", "codex"])
                .args(&args)
                .env("F", s.auth())
                .env("SANDPIT_KERNEL_REPORTS", "1")
                .output()
                .unwrap();
        let t = text(&o);
        assert!(t.contains(CANARY), "{what}: the read succeeds: {t}");
        assert!(
            !t.contains("auth.json [kernel]"),
            "{what}: a refusal reported: {t}"
        );
    }
}

/// An agent in Python: its subprocess module closes every descriptor in the child
/// before `exec` (the layer's ruleset among them), and starts a static program the
/// library never loads into. The layer is taken all the same.
#[test]
fn a_python_agent_hides_them_from_the_static_programs_it_starts() {
    let script = "import os, subprocess\n\
        f = os.environ['F']\n\
        if 'CANARY' in open(f).read(): print('AGENT-OK', flush=True)\n\
        subprocess.run(['./static_read', f])\n\
        subprocess.run(['./static_read', f], close_fds=True, pass_fds=())\n\
        subprocess.run(['cat', f])\n";
    for sandboxed in [false, true] {
        let s = Stage::new();
        let t = text(&s.python_agent(sandboxed, script));
        assert!(t.contains("AGENT-OK"), "{t}");
        assert_eq!(
            t.contains(CANARY),
            !sandboxed,
            "sandboxed: {sandboxed}: {t}"
        );
        // The static program ran (the layer did not stop the exec): refused by the
        // kernel, both times.
        let refused = format!("static-open {}: Permission denied", s.auth().display());
        assert_eq!(
            t.matches(&refused).count(),
            if sandboxed { 2 } else { 0 },
            "{t}"
        );
    }
}

/// The mark that says "hidden already" is no pass: a command the agent starts with
/// its own system calls (no hook of the library composes its environment), the mark
/// forged in it, still takes the layer.
#[test]
fn a_forged_mark_does_not_spare_the_layer() {
    let script = "import ctypes, os\n\
        f = os.environ['F']\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        def arr(xs):\n    return (ctypes.c_char_p * (len(xs) + 1))(*[x.encode() for x in xs], None)\n\
        env = [k + '=' + v for k, v in os.environ.items()] + ['SANDPIT_AGENT_FILES_HIDDEN=1']\n\
        pid = os.fork()\n\
        if pid == 0:\n    libc.syscall(59, b'/usr/bin/python3', arr(['python3', 'rawread.py', f]), arr(env))\n    os._exit(127)\n\
        os.waitpid(pid, 0)\n";
    for sandboxed in [false, true] {
        let s = Stage::new();
        let t = text(&s.python_agent(sandboxed, script));
        assert_eq!(
            t.contains(CANARY),
            !sandboxed,
            "sandboxed: {sandboxed}: {t}"
        );
        let refused = format!("raw-abs {}: Permission denied", s.auth().display());
        assert_eq!(t.contains(&refused), sandboxed, "{t}");
    }
}

/// The login is yet to be written (the agent signs in during the run): a spawned
/// command cannot put a symbolic link at its name, which the agent's write would
/// follow into the workspace, where every command reads it.
#[test]
fn a_login_yet_to_be_written_cannot_be_redirected() {
    let script = format!(
        "sh -c './static_fs symlink \"$PWD/leak\" \"$F\"'; \
         echo '{{\"token\": \"{CANARY}\"}}' > \"$F\" && echo AGENT-WROTE; \
         sh -c 'cat leak'"
    );
    for sandboxed in [false, true] {
        let s = Stage::new();
        std::fs::remove_file(s.auth()).unwrap();
        build_probe(&s.h, "static_fs", true);
        let o = s.agent(sandboxed, &script, &[]);
        let t = text(&o);
        assert!(t.contains("AGENT-WROTE"), "the agent writes its login: {t}");
        let leaked = std::fs::read_to_string(s.h.workspace().join("leak"));
        if !sandboxed {
            assert!(
                t.contains(CANARY) && leaked.is_ok_and(|l| l.contains(CANARY)),
                "control: the link does not lead the login into the workspace bare: {t}"
            );
            continue;
        }
        assert!(!t.contains(CANARY), "a spawned command read the login: {t}");
        assert!(leaked.is_err(), "the login went into the workspace: {t}");
        let kind = std::fs::symlink_metadata(s.auth()).unwrap().file_type();
        assert!(kind.is_file() && s.auth_intact(), "the login: {t}");
        assert!(
            t.contains("static-fs symlink") && t.contains("Permission denied"),
            "the link is refused by the kernel: {t}"
        );
    }
}

/// A directory on the way to the login (`~/.pi/agent` for pi's `auth.json`) may not
/// be renamed or exchanged by a spawned command: a layer listed later (a program the
/// agent starts by `posix_spawn` takes its own in its constructor) and the next run
/// would grant it under its new name. Where sandpit's mounts make that directory a
/// mount point the kernel refuses the rename anyway (EBUSY); the fallback mode has no
/// mounts, so the layer alone holds it there.
#[test]
fn a_directory_on_the_way_to_the_login_stays_in_place() {
    const PI_AUTH: &str = ".pi/agent/auth.json";
    let agent = format!(
        "import os, subprocess\n\
         f = os.path.expanduser('~/{PI_AUTH}')\n\
         if '{CANARY}' in open(f).read(): print('AGENT-OK', flush=True)\n\
         subprocess.run(['sh', '-c', './static_fs rename ~/.pi/agent ~/.pi/moved; \
         ./static_fs exchange ~/.pi/agent ~/.pi/cache'])\n\
         subprocess.run(['/bin/sh', '-c', 'cat ~/.pi/moved/auth.json ~/.pi/cache/auth.json'], \
         close_fds=False)\n"
    );
    let next_run = "sh -c 'cat ~/.pi/moved/auth.json ~/.pi/cache/auth.json'";
    for (sandboxed, fallback) in [(false, false), (true, false), (true, true)] {
        let h = TestHome::new();
        h.write(
            &h.home().join(PI_AUTH),
            &format!("{{\"anthropic\": {{\"refresh\": \"{CANARY}\"}}}}\n"),
        );
        h.write(&h.home().join(".pi/agent/sessions/old.jsonl"), "");
        h.write(&h.home().join(".pi/cache/x"), "");
        build_probe(&h, "static_fs", true);
        let run = |args: &[&str]| {
            let mut c = if sandboxed {
                let mut c = h.sandpit();
                c.args(["run", "--profile", "pi", "--allow-degraded", "--"]);
                if fallback {
                    c.env("SANDPIT_FORCE_FALLBACK", "1");
                }
                c
            } else {
                h.command("env")
            };
            text(&c.args(args).output().unwrap())
        };
        let first = run(&["python3", "-c", &agent]);
        let second = run(&["sh", "-c", next_run]);
        assert!(first.contains("AGENT-OK"), "{first}");
        if !sandboxed {
            assert!(
                first.contains(CANARY) && second.contains(CANARY),
                "control: the renamed directory is not read bare: {first}\n{second}"
            );
            continue;
        }
        let intact =
            std::fs::read_to_string(h.home().join(PI_AUTH)).is_ok_and(|s| s.contains(CANARY));
        assert!(
            !first.contains(CANARY) && !second.contains(CANARY) && intact,
            "fallback: {fallback}: the login left its name: {first}\n{second}"
        );
    }
}

/// What a Python agent starts by `posix_spawn` (`subprocess` with `close_fds=False`):
/// no hook runs between its `fork` and `exec`. A static program started so, and a
/// dynamic one after a spawned command made the interposer unloadable (in the
/// fallback mode nothing keeps a command from changing the library's mode: the
/// loader then starts the program without it, and without the layer it would take),
/// read nothing all the same.
#[test]
fn what_the_agent_starts_by_posix_spawn_is_hidden_from_too() {
    let script = "import os, subprocess\n\
        f = os.environ['F']\n\
        if 'CANARY' in open(f).read(): print('AGENT-OK', flush=True)\n\
        subprocess.run(['./static_read', f], close_fds=False)\n\
        subprocess.run(['sh', '-c', './static_fs chmod ~/.sandpit/lib/*/libsandpit.so 0'])\n\
        subprocess.run(['/bin/cat', f], close_fds=False)\n\
        subprocess.run(['/bin/sh', '-c', 'echo SPAWNED-RAN'], close_fds=False)\n";
    for (sandboxed, fallback) in [(false, false), (true, false), (true, true)] {
        let s = Stage::new();
        build_probe(&s.h, "static_fs", true);
        let mut c = if sandboxed {
            let mut c = s.h.sandpit();
            c.args(["run", "--profile", "codex", "--allow-degraded", "--"]);
            if fallback {
                c.env("SANDPIT_FORCE_FALLBACK", "1");
            }
            c
        } else {
            s.h.command("env")
        };
        let o = c
            .args(["python3", "-c", script])
            .env("F", s.auth())
            .output()
            .unwrap();
        let t = text(&o);
        assert!(t.contains("AGENT-OK") && t.contains("SPAWNED-RAN"), "{t}");
        let leaks = t.matches(CANARY).count();
        if !sandboxed {
            assert_eq!(leaks, 2, "control: both programs read the login bare: {t}");
            continue;
        }
        assert_eq!(
            leaks, 0,
            "fallback: {fallback}: a spawned program read it: {t}"
        );
        let refused = format!("static-open {}: Permission denied", s.auth().display());
        assert!(t.contains(&refused), "the static program ran: {t}");
    }
}

/// A spawned command cannot change another process's resource limits. A static agent
/// (codex's) starts its commands with no hook before their `exec`: they take the
/// layer in the interposer's constructor, and the loader only warns when it cannot
/// map the library. A command that lowered the next one's address-space limit while
/// the loader ran, and raised it again after, had that one start bare and read the
/// login (done by hand: `prlimit64` on the next pid as soon as it exists). Here the
/// limit changed is the agent's own (its core size), read back from the agent; the
/// command still sets its own limits.
#[test]
fn a_spawned_command_changes_no_other_process_limits() {
    let script = "sh -c 'prlimit --pid $PPID --core=12345 && echo OTHER-SET; \
                  ulimit -c 0 && echo OWN-SET'; \
                  grep 'Max core file size' /proc/$$/limits";
    for sandboxed in [false, true] {
        let s = Stage::new();
        let t = text(&s.agent(sandboxed, script, &[]));
        assert!(t.contains("OWN-SET"), "a command sets its own limits: {t}");
        assert_eq!(
            t.contains("OTHER-SET") && t.contains("12345"),
            !sandboxed,
            "sandboxed: {sandboxed}: the agent's limit: {t}"
        );
    }
}

/// A program tried on every directory of a long `PATH` (Python's subprocess calls
/// `execve` once a directory): the child takes the layer once, not once a try
/// (Landlock allows 16), and the program starts, held.
#[test]
fn a_long_path_search_takes_one_layer() {
    let script = "import os, subprocess\n\
        f = os.environ['F']\n\
        path = ':'.join('/nonexistent-%d' % i for i in range(24)) + ':/usr/bin:/bin'\n\
        r = subprocess.run(['cat', f], env=dict(os.environ, PATH=path), capture_output=True, text=True)\n\
        print('RC', r.returncode, r.stdout, r.stderr)\n";
    for sandboxed in [false, true] {
        let s = Stage::new();
        let t = text(&s.python_agent(sandboxed, script));
        assert!(
            !t.contains("Argument list too long") && t.contains("RC "),
            "{t}"
        );
        assert_eq!(
            t.contains(CANARY),
            !sandboxed,
            "sandboxed: {sandboxed}: {t}"
        );
        if sandboxed {
            assert!(
                t.contains("RC 1 ") && t.contains("blocked read of ~/.codex/auth.json"),
                "{t}"
            );
        }
    }
}
