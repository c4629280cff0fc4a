#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The audit log, the end-of-run summary, `sandpit log`, `explain --run` and learn
//! mode, end to end: real `sandpit run`s as the unprivileged test user.
mod common;

use common::TestHome;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

const CANARY: &str = "CANARY-audit-7f3a9";

fn setup() -> TestHome {
    let h = TestHome::new();
    h.write(&h.home().join(".ssh/id_rsa"), CANARY);
    h.write(&h.home().join("notes/old.txt"), "old\n");
    h
}

fn run(h: &TestHome, args: &[&str]) -> Output {
    h.sandpit().args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn logs(h: &TestHome) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(h.home().join(".sandpit/logs"))
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn records(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn run_with_denials_logs_rules_and_prints_a_summary() {
    let h = setup();
    let o = run(
        &h,
        &[
            "run",
            "--",
            "sh",
            "-c",
            "cat ~/.ssh/id_rsa; echo x > ~/outside.txt; echo ok > inside.txt",
        ],
    );
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    // The effects: the secret stayed secret, nothing was written outside, and the
    // positive control inside the workspace worked.
    assert!(!out.contains(CANARY) && !err.contains(CANARY), "{out}{err}");
    assert!(!h.home().join("outside.txt").exists());
    assert_eq!(
        std::fs::read_to_string(h.workspace().join("inside.txt")).unwrap(),
        "ok\n",
        "{err}"
    );

    let logs = logs(&h);
    assert_eq!(logs.len(), 1, "{logs:?}");
    let recs = records(&logs[0]);
    let run_id = recs[0]["run"].as_str().unwrap().to_string();
    assert_eq!(recs[0]["action"], "start");
    assert_eq!(
        (recs[1]["layer"].as_str(), recs[1]["action"].as_str()),
        (Some("kernel"), Some("setup"))
    );
    assert!(
        recs[1]["reason"]
            .as_str()
            .unwrap()
            .contains("kernel layer: namespaces"),
        "{recs:#?}"
    );
    assert_eq!(recs.last().unwrap()["action"], "exit");
    let ssh = h.home().join(".ssh/id_rsa");
    let read = recs
        .iter()
        .find(|r| r["action"] == "read" && r["subject"] == ssh.to_str().unwrap())
        .unwrap_or_else(|| panic!("no read record: {recs:#?}"));
    assert_eq!(read["decision"], "deny");
    assert_eq!(read["layer"], "interposer");
    assert_eq!(read["rule"]["key"], "files.block_read");
    assert_eq!(read["rule"]["entry"], "~/.ssh");
    assert!(read["rule"]["line"].as_u64().unwrap() > 0, "{read}");
    assert!(
        read["rule"]["file"].as_str().unwrap().contains("default"),
        "{read}"
    );
    let write = recs
        .iter()
        .find(|r| r["action"] == "write")
        .unwrap_or_else(|| panic!("no write record: {recs:#?}"));
    assert_eq!(
        write["subject"],
        h.home().join("outside.txt").to_str().unwrap()
    );
    for r in &recs {
        assert_eq!(r["run"], run_id.as_str());
    }

    // The summary names each denial, its rule, and the exact line that would allow it.
    assert!(
        err.contains(&format!("sandpit: run {run_id}: 2 denials")),
        "{err}"
    );
    assert!(err.contains("deny read ~/.ssh/id_rsa"), "{err}");
    assert!(err.contains("rule: files.block_read \"~/.ssh\""), "{err}");
    assert!(err.contains("allow_read = [\"~/.ssh/id_rsa\"]"), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
    // ...and nothing was applied.
    assert!(!h.user_config_path().exists());

    // `sandpit log` (latest run by default), `--denied --json`.
    let o = run(&h, &["log", "--denied", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines: Vec<Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(lines.iter().all(|r| r["decision"] == "deny"));
    let o = run(&h, &["log", &run_id]);
    let human = text(&o.stdout);
    assert!(human.contains("start") && human.contains("exit"), "{human}");
    assert!(
        human.contains("rule:   files.block_read \"~/.ssh\""),
        "{human}"
    );
    let o = run(&h, &["log", "--list"]);
    let list = text(&o.stdout);
    assert!(
        list.contains(&format!("{run_id}  2 denied  sh -c cat ~/.ssh/id_rsa")),
        "{list}"
    );
    let o = run(&h, &["log", "no-such-run"]);
    assert_eq!(o.status.code(), Some(2));

    // `explain --run`: why was it denied in that run.
    let o = run(
        &h,
        &["explain", "--run", &run_id, "read", ssh.to_str().unwrap()],
    );
    let ex = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{ex}{}", text(&o.stderr));
    assert!(ex.contains("1 matching denial"), "{ex}");
    assert!(ex.contains("files.block_read \"~/.ssh\""), "{ex}");
    assert!(ex.contains("allow_read = [\"~/.ssh/id_rsa\"]"), "{ex}");
    let ok = h.workspace().join("inside.txt");
    let o = run(
        &h,
        &["explain", "--run", &run_id, "write", ok.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
}

#[test]
fn the_log_is_not_writable_from_inside_the_sandbox() {
    let forge = "for f in ~/.sandpit/logs/*; do echo forged >> \"$f\" && echo WROTE; done; \
                 rm -f ~/.sandpit/logs/* && echo REMOVED; \
                 mv ~/.sandpit/logs ~/.sandpit/l2 && echo MOVED; \
                 echo ok > inside.txt";
    // The probe works without the sandbox: as the same user, on a log of the same shape.
    let bare = TestHome::new();
    bare.write(&bare.home().join(".sandpit/logs/x.jsonl"), "{}\n");
    let o = bare.command("sh").args(["-c", forge]).output().unwrap();
    assert!(text(&o.stdout).contains("WROTE"), "{}", text(&o.stderr));

    let h = setup();
    let o = run(&h, &["run", "--", "sh", "-c", forge]);
    let out = text(&o.stdout);
    assert!(
        !out.contains("WROTE") && !out.contains("REMOVED") && !out.contains("MOVED"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(h.workspace().join("inside.txt")).unwrap(),
        "ok\n",
        "{}",
        text(&o.stderr)
    );
    let logs = logs(&h);
    assert_eq!(logs.len(), 1);
    // Every line is still a record (a forged line would not parse), none appended.
    let body = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(!body.lines().any(|l| l == "forged"), "{body}");
    let recs = records(&logs[0]);
    // start, setup, the interposer's denials of the attempts, exit: nothing else.
    assert_eq!(recs.first().unwrap()["action"], "start", "{body}");
    assert_eq!(recs.last().unwrap()["action"], "exit", "{body}");
    for r in &recs[1..recs.len() - 1] {
        assert!(
            r["action"] == "setup" || (r["layer"] == "interposer" && r["decision"] == "deny"),
            "{body}"
        );
    }
}

#[test]
fn the_audit_socket_cannot_be_removed_or_moved_from_inside() {
    let attack = "rm -f ~/.sandpit/run/*/audit.sock && echo RM; \
                  mv ~/.sandpit/run ~/.sandpit/r2 && echo MV; \
                  cat ~/.ssh/id_rsa; echo ok > inside.txt";
    // The probe works without the sandbox.
    let bare = TestHome::new();
    bare.write(&bare.home().join(".sandpit/run/x/audit.sock"), "");
    let o = bare.command("sh").args(["-c", attack]).output().unwrap();
    assert!(text(&o.stdout).contains("RM"), "{}", text(&o.stderr));

    let h = setup();
    // Through the kernel layer alone, and with the interposer (which reports).
    let o = run(&h, &["run", "--", "sh", "-c", attack]);
    assert!(!text(&o.stdout).contains("RM") && !text(&o.stdout).contains("MV"));
    let o = run(&h, &["run", "--", "sh", "-c", attack]);
    let out = text(&o.stdout);
    assert!(
        !out.contains("RM") && !out.contains("MV") && !out.contains(CANARY),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(h.workspace().join("inside.txt")).unwrap(),
        "ok\n"
    );
    // The read denial after the attempts still reached the log: the socket survived.
    let recs = records(&logs(&h)[1]);
    let ssh = h.home().join(".ssh/id_rsa");
    assert!(
        recs.iter()
            .any(|r| r["action"] == "read" && r["subject"] == ssh.to_str().unwrap()),
        "{recs:#?}"
    );
}

#[test]
fn learn_mode_drafts_a_policy_that_lets_the_same_run_pass() {
    let h = setup();
    let needs = "cat ~/.ssh/id_rsa && echo new > ~/notes/today.txt && echo PASSED";
    // Without the draft the run fails (the positive control for the second run below).
    let o = run(&h, &["run", "--", "sh", "-c", needs]);
    assert_ne!(o.status.code(), Some(0));
    assert!(!text(&o.stdout).contains(CANARY));

    // Learn: every step is attempted (`;`), the kernel layer still denies them.
    let learn = "cat ~/.ssh/id_rsa; echo new > ~/notes/today.txt; echo done";
    let o = run(&h, &["run", "--learn", "--", "sh", "-c", learn]);
    let err = text(&o.stderr);
    assert!(
        !text(&o.stdout).contains(CANARY),
        "kernel layer must still deny in learn mode"
    );
    assert!(!h.home().join("notes/today.txt").exists());
    assert!(
        err.contains("would-be denials recorded (learn mode)"),
        "{err}"
    );
    let learned = h.home().join(".sandpit/learned");
    let drafts: Vec<PathBuf> = std::fs::read_dir(&learned)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(drafts.len(), 1);
    let draft = &drafts[0];
    assert!(
        err.contains(&format!("learned draft policy: {}", draft.display())),
        "{err}"
    );
    let t: toml::Table = toml::from_str(&std::fs::read_to_string(draft).unwrap()).unwrap();
    assert_eq!(
        t["files"]["allow_read"][0].as_str(),
        Some("~/.ssh/id_rsa"),
        "{t:#?}"
    );
    // A new file: its directory (only existing paths can be made writable).
    assert_eq!(
        t["files"]["allow_write"][0].as_str(),
        Some("~/notes"),
        "{t:#?}"
    );
    let recs = records(&logs(&h)[1]);
    assert!(
        recs.iter()
            .any(|r| r["decision"] == "learn" && r["action"] == "read"),
        "{recs:#?}"
    );

    // Fed back, the same run passes.
    let o = run(
        &h,
        &[
            "run",
            "--config",
            draft.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            needs,
        ],
    );
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains(CANARY) && out.contains("PASSED"), "{out}");
    assert_eq!(
        std::fs::read_to_string(h.home().join("notes/today.txt")).unwrap(),
        "new\n"
    );
}

#[test]
fn exec_denials_name_the_users_rule_and_where_to_remove_it() {
    let h = setup();
    let cfg = h.home().join("my-sandpit.toml");
    h.write(&cfg, "# mine\n[exec]\nblock = [\"echo forbidden-word\"]\n");
    // The probe works unsandboxed.
    let o = h
        .command("/bin/echo")
        .arg("forbidden-word")
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout), "forbidden-word\n");
    let o = run(
        &h,
        &[
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "/bin/echo forbidden-word; /bin/echo allowed-word",
        ],
    );
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(!out.contains("forbidden-word"), "{out}");
    assert!(out.contains("allowed-word"), "positive control: {out}{err}");
    let recs = records(&logs(&h)[0]);
    let ex = recs
        .iter()
        .find(|r| r["action"] == "exec")
        .unwrap_or_else(|| panic!("{recs:#?}"));
    assert_eq!(ex["decision"], "deny");
    assert_eq!(ex["argv"][1], "forbidden-word");
    assert_eq!(ex["rule"]["key"], "exec.block");
    assert_eq!(ex["rule"]["file"], cfg.to_str().unwrap());
    assert_eq!(
        (ex["rule"]["line"].as_u64(), ex["rule"]["col"].as_u64()),
        (Some(3), Some(10))
    );
    let at = format!("{}:3:10", cfg.display());
    assert!(
        err.contains(&format!(
            "remove exec.block entry \"echo forbidden-word\" at {at}"
        )),
        "{err}"
    );
    // explain --run finds it by its command line.
    let run_id = recs[0]["run"].as_str().unwrap().to_string();
    let o = run(
        &h,
        &[
            "explain",
            "--run",
            &run_id,
            "exec",
            "--",
            "/bin/echo",
            "forbidden-word",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains(&at), "{}", text(&o.stdout));
}

#[test]
fn shim_denials_reach_the_log_with_the_users_rule() {
    let h = setup();
    h.user_config("[network]\nblock = [\"blocked.test\"]\n");
    let o = run(
        &h,
        &[
            "run",
            "--shims",
            "--",
            "sh",
            "-c",
            "curl -s http://blocked.test:9/secret",
        ],
    );
    assert_eq!(o.status.code(), Some(126), "{}", text(&o.stderr));
    let logs = logs(&h);
    assert_eq!(logs.len(), 1);
    let recs = records(&logs[0]);
    let shim = recs
        .iter()
        .find(|r| r["layer"] == "shims")
        .unwrap_or_else(|| panic!("no shims record: {recs:?}"));
    assert_eq!(shim["decision"], "deny");
    assert!(
        shim["subject"].as_str().unwrap().contains("blocked.test"),
        "{shim}"
    );
}

#[test]
fn learn_mode_is_the_launchers_switch_not_the_sandboxs_environment() {
    let h = setup();
    h.user_config("[exec]\nblock = [\"touch forbidden-marker\"]\n");
    let marker = h.workspace().join("forbidden-marker");
    // Each spelling hides the blocked line from the exec that starts the process
    // which sets the variable; that process's own exec of `touch` is the one judged.
    let hidden = "T=touch; $T forbidden-marker";
    let attempts = [
        // The variable in the environment of a new process (its interposer loads
        // with it).
        format!("SANDPIT_LEARN=1 sh -c '{hidden}'"),
        format!("export SANDPIT_LEARN=1; sh -c '{hidden}'"),
        // setenv in a running process, then glibc's wordexp, whose shell is started
        // by glibc's internal execve with the changed environment.
        format!(
            "python3 -c 'import ctypes; c = ctypes.CDLL(None); \
             c.setenv(b\"SANDPIT_LEARN\", b\"1\", 1); \
             c.wordexp(b\"$({hidden})\", ctypes.create_string_buffer(64), 0)'"
        ),
    ];
    for a in &attempts {
        let o = run(&h, &["run", "--", "sh", "-c", a]);
        let err = text(&o.stderr);
        assert!(!marker.exists(), "{a}: the blocked command ran: {err}");
        // The judge saw the exec and refused it (wordexp hides the shell's stderr,
        // so the run's summary says it).
        assert!(
            err.contains("deny exec touch forbidden-marker"),
            "{a}: {err}"
        );
        let recs = records(logs(&h).last().unwrap());
        assert!(
            !recs.iter().any(|r| r["decision"] == "learn"),
            "{a}: {recs:#?}"
        );
    }

    // Positive control: the real switch records the same exec instead of refusing it.
    let o = run(&h, &["run", "--learn", "--", "sh", "-c", hidden]);
    let err = text(&o.stderr);
    assert!(marker.exists(), "--learn must let it run: {err}");
    assert!(
        err.contains("would-be denials recorded (learn mode)"),
        "{err}"
    );
    let recs = records(logs(&h).last().unwrap());
    assert!(
        recs.iter()
            .any(|r| r["action"] == "exec" && r["decision"] == "learn"),
        "{recs:#?}"
    );
}

/// A run's audit log is bounded by `limits.audit_bytes`: a flood of denials past it
/// is counted by kind, not written, and the log ends with the counts, which the run
/// says it wrote. The same flood without the limit logs every denial (the control).
#[test]
fn a_denial_flood_is_counted_past_the_audit_limit_never_dropped_unsaid() {
    const FLOOD: usize = 300;
    let script =
        format!("for i in $(seq {FLOOD}); do cat ~/.ssh/id_rsa 2>/dev/null; done; echo done");
    let count = |recs: &[Value]| {
        recs.iter()
            .filter(|r| r["action"] == "read" && r["decision"] == "deny")
            .count()
    };
    let h = setup();
    let o = run(&h, &["run", "--", "sh", "-c", &script]);
    assert!(text(&o.stdout).contains("done"), "{}", text(&o.stderr));
    let all = records(&logs(&h)[0]);
    assert!(
        count(&all) >= FLOOD,
        "the control logs every denial: {}",
        count(&all)
    );

    let h = setup();
    h.user_config("[limits]\naudit_bytes = 16384\n");
    let o = run(&h, &["run", "--", "sh", "-c", &script]);
    let err = text(&o.stderr);
    assert!(text(&o.stdout).contains("done"), "{err}");
    let log = &logs(&h)[0];
    let size = std::fs::metadata(log).unwrap().len();
    assert!(size < 16384 + 4096, "{size} bytes");
    let recs = records(log);
    let written = count(&recs);
    let counted: usize = recs
        .iter()
        .filter(|r| r["action"] == "summarised")
        .map(|r| {
            let reason = r["reason"].as_str().unwrap();
            assert!(reason.contains("limits.audit_bytes = 16384"), "{reason}");
            reason.split(' ').next().unwrap().parse::<usize>().unwrap()
        })
        .sum();
    assert!(written > 0 && written < FLOOD, "{written}");
    assert!(
        written + counted >= FLOOD,
        "written {written} + counted {counted}"
    );
    assert_eq!(
        recs.last().unwrap()["action"],
        "exit",
        "the exit record is written"
    );
    assert!(err.contains("reached limits.audit_bytes = 16384"), "{err}");
    // A project file may lower the limit, never raise it.
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[limits]\naudit_bytes = 0\n",
    );
    let o = run(&h, &["run", "--", "true"]);
    assert!(!o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("a project file may only lower it"),
        "{}",
        text(&o.stderr)
    );
}

/// `~/.sandpit/logs` keeps runs' logs for `limits.logs_days` and within
/// `limits.logs_bytes` (the oldest go first), never the running one; the logs are
/// looked through at most once an hour; a project file cannot set either.
#[test]
fn old_logs_go_by_age_and_total_size() {
    use std::time::{Duration, SystemTime};
    let h = setup();
    let dir = h.home().join(".sandpit/logs");
    let day = Duration::from_secs(86_400);
    let plant = |name: &str, age: Duration, size: usize| {
        let p = dir.join(name);
        h.write(&p, &"x".repeat(size));
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
        p
    };
    let old = plant("20250101T000000Z-old.jsonl", 40 * day, 100);
    let older_big = plant("20261130T000000Z-a.jsonl", 2 * day, 10_000);
    let newer_big = plant("20261201T000000Z-b.jsonl", day, 10_000);
    let other = plant("notes.txt", 90 * day, 10);
    h.user_config("[limits]\nlogs_days = 30\nlogs_bytes = 16384\n");
    let o = run(&h, &["run", "--", "true"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!old.exists(), "older than 30 days");
    assert!(!older_big.exists(), "the oldest past 16 KiB");
    assert!(newer_big.exists() && other.exists());
    let now: Vec<PathBuf> = logs(&h)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(now.len(), 2, "the one kept and this run's: {now:?}");
    // Within the hour, no second look.
    let again = plant("20250102T000000Z-old.jsonl", 40 * day, 100);
    let o = run(&h, &["run", "--", "true"]);
    assert!(o.status.success());
    assert!(again.exists());
    // Not a project's to set.
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[limits]\nlogs_days = 1\n",
    );
    let o = run(&h, &["run", "--", "true"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("cannot be set by a project file"),
        "{}",
        text(&o.stderr)
    );
}

/// The end-of-run summary's suggested config lines hold what the sandbox chose: a
/// connection's host, here sent to the audit socket (anything inside may send
/// there) with a quote, a bracket, newlines and a line of its own, and escape
/// sequences. It stays one TOML value on one line, and reaches the terminal as
/// text.
#[test]
fn a_chosen_host_cannot_break_out_of_its_suggested_config_line() {
    let h = setup();
    let host = "evil.test\"]\n[files]\nallow_write = [\"~\"]\n#\u{1b}]52;c;Q0FOQVJZ\u{7}\u{9b}2J";
    let py = r#"
import glob, os, socket
host = 'evil.test"]\n[files]\nallow_write = ["~"]\n#\x1b]52;c;Q0FOQVJZ\x07\u009b2J'.encode()
msg = b"sandpit: denied\n\0SANDPIT-AUDIT/1\0deny\0connect\0" + host + b"\0" + b"443"
path = os.environ.get("SANDPIT_AUDIT") or glob.glob(os.path.expanduser("~/.sandpit/run/*/audit.sock"))[0]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(msg, path)
print("sent")
"#;
    h.write(&h.workspace().join("forge.py"), py);
    let o = run(&h, &["run", "--", "python3", "forge.py"]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(out.contains("sent"), "{out}\n{err}");
    // The suggestion: `[network]`, then the one line that allows the host.
    let lines: Vec<&str> = err.lines().map(str::trim).collect();
    let at = lines
        .iter()
        .position(|l| *l == "[network]")
        .unwrap_or_else(|| panic!("no suggestion in the summary:\n{err}"));
    let suggested = format!("{}\n{}\n", lines[at], lines[at + 1]);
    let t: toml::Table = toml::from_str(&suggested).unwrap();
    assert_eq!(t.len(), 1, "{suggested}");
    assert_eq!(
        t["network"]["allow"][0].as_str(),
        Some(format!("{host}:443").as_str()),
        "{suggested}"
    );
    assert!(
        !lines.contains(&"[files]"),
        "the host broke out of its line:\n{err}"
    );
    for c in ['\u{1b}', '\u{7}', '\u{9b}'] {
        assert!(!err.contains(c), "{c:?} reached the terminal: {err:?}");
    }
}
