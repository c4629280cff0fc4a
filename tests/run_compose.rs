#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `sandpit run` with every layer composed: kernel layer, interposer, proxy, DNS and
//! shims, driven by real clients (curl, python3, cat, sh) as the unprivileged test
//! user. Test hosts come from `[network.resolve]` in the test HOME's config only:
//! `allowed.test` → 127.0.0.2 (a sink that answers), `blocked.test` → 127.0.0.1 (a
//! listener that records everything it receives and must receive nothing).
mod common;
use common::{stderr, stdout};

use std::process::{Command, Output};

use common::sink::Sink;
use common::{text as out, TestHome};

const CANARY: &str = "CANARY-run-91c2e7";

struct World {
    h: TestHome,
    allowed: Sink,
    blocked: Sink,
}

impl World {
    fn new(extra_config: &str) -> World {
        let h = TestHome::new();
        h.user_config(&format!(
                "[network]\nallow = [\"allowed.test\"]\n[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n\"blocked.test\" = \"127.0.0.1\"\n{extra_config}"
            ),
        );
        h.write(&h.home().join(".ssh/id_rsa"), &format!("{CANARY}\n"));
        World {
            h,
            allowed: Sink::start("127.0.0.2", "allowed"),
            blocked: Sink::start("127.0.0.1", "blocked"),
        }
    }
    fn run(&self, flags: &[&str], script: &str) -> Output {
        let mut c = self.h.sandpit();
        c.arg("run")
            .args(flags)
            .arg("--")
            .arg("sh")
            .arg("-c")
            .arg(script);
        c.output().unwrap()
    }
    fn bare(&self, script: &str) -> Output {
        let mut c: Command = self.h.command("sh");
        c.arg("-c").arg(script);
        c.output().unwrap()
    }
    /// The blocked listener must not have seen anything since `before`.
    fn assert_blocked_untouched(&self, before: (usize, usize), what: &str) {
        // The sandboxed command has exited: whatever it sent has reached the
        // listener, and `seen` counts it.
        assert_eq!(
            self.blocked.seen(),
            before,
            "{what}: the blocked listener received something: {:?}",
            String::from_utf8_lossy(&self.blocked.bytes.lock().unwrap())
        );
    }
}

#[test]
fn startup_line_names_every_layer() {
    let w = World::new("");
    // A run directory left by a launcher that no longer exists is removed.
    let stale =
        w.h.home()
            .join(".sandpit/run/20260101T000000.000Z-999999999");
    w.h.write(&stale.join("policy.snapshot"), "old");
    let o = w.run(&["--shims"], "true");
    assert!(!stale.exists(), "stale run directory left behind");
    assert!(o.status.success(), "{}", out(&o));
    let e = stderr(&o);
    let line = e
        .lines()
        .find(|l| l.starts_with("sandpit: layers:"))
        .unwrap_or("");
    for part in [
        "kernel (namespaces+Landlock ABI",
        "+seccomp)",
        "interposer",
        "proxy (filtered, 1 allowed host)",
        "dns",
        "shims (",
    ] {
        assert!(line.contains(part), "{part:?} missing from: {e}");
    }
    assert!(!line.contains("interposer OFF"), "{e}");
    // The run directory and the sockets are gone afterwards.
    let runs = w.h.home().join(".sandpit/run");
    assert_eq!(std::fs::read_dir(&runs).unwrap().count(), 0, "{runs:?}");

    let o = w.run(&["--kernel-only"], "true");
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        stderr(&o).contains("interposer OFF (--kernel-only)"),
        "{}",
        out(&o)
    );
}

#[test]
fn timing_lines_name_each_start_up_step_of_every_process() {
    let w = World::new("");
    let timing = |o: &Output| -> Vec<(f64, String)> {
        stderr(o)
            .lines()
            .filter_map(|l| l.strip_prefix("sandpit: timing "))
            .map(|l| {
                let (ms, step) = l.split_once(" ms ").expect("`N ms STEP`");
                (ms.parse().expect("milliseconds"), step.to_string())
            })
            .collect()
    };
    // Off unless asked for.
    let o = w.run(&[], "true");
    assert!(o.status.success(), "{}", out(&o));
    assert!(timing(&o).is_empty(), "{}", out(&o));

    let o =
        w.h.sandpit()
            .env("SANDPIT_TIMING", "1")
            .args(["run", "--", "true"])
            .output()
            .unwrap();
    assert!(o.status.success(), "{}", out(&o));
    let lines = timing(&o);
    let has = |step: &str| lines.iter().any(|(_, s)| s.starts_with(step));
    for step in [
        "arguments parsed",
        "policy loaded",
        "init cloned, ids mapped",
        "init: ids mapped",
        "helper: network namespace made",
        "init: mounts built",
        "guard: watching",
        "command's process: seccomp installed",
        "command exec'd",
        "command and its supervisors exited",
    ] {
        assert!(has(step), "{step:?} missing: {}", out(&o));
    }
    // Init is pid 1 and the command's process pid 2 of the new pid namespace.
    assert!(lines
        .iter()
        .any(|(_, s)| s.starts_with("init") && s.ends_with("(pid 1)")));
    assert!(lines
        .iter()
        .any(|(_, s)| s.starts_with("command's process") && s.ends_with("(pid 2)")));
    // The launcher's own steps come in order, and `exit` last.
    let own: Vec<f64> = lines
        .iter()
        .filter(|(_, s)| {
            !s.starts_with("C1")
                && !s.starts_with("init")
                && !s.starts_with("guard")
                && !s.starts_with("command's process")
        })
        .map(|(ms, _)| *ms)
        .collect();
    assert!(own.windows(2).all(|w| w[0] <= w[1]), "{}", out(&o));
    assert!(
        lines.last().is_some_and(|(_, s)| s.starts_with("exit")),
        "{}",
        out(&o)
    );
}

#[test]
fn curl_reaches_only_allowed_hosts() {
    let w = World::new("");
    let (a, b) = (w.allowed.port, w.blocked.port);

    // Bare controls: both listeners answer without sandpit.
    let o = w.bare(&format!(
        "curl -sS --max-time 5 --resolve allowed.test:{a}:127.0.0.2 http://allowed.test:{a}/; echo; curl -sS --max-time 5 http://127.0.0.1:{b}/"
    ));
    assert!(
        stdout(&o).contains("sink:allowed") && stdout(&o).contains("sink:blocked"),
        "bare control: {}",
        out(&o)
    );
    let before = w.blocked.seen();

    // Positive control: through the proxy variables.
    let o = w.run(
        &[],
        &format!("curl -sS --max-time 10 http://allowed.test:{a}/"),
    );
    assert!(stdout(&o).contains("sink:allowed"), "{}", out(&o));

    // Skipping the proxy variables: the interposer redirects curl's own connect.
    let o = w.run(
        &[],
        &format!("curl -sS --max-time 10 --noproxy '*' http://allowed.test:{a}/"),
    );
    assert!(stdout(&o).contains("sink:allowed"), "{}", out(&o));
    // HTTPS through CONNECT: curl's ClientHello (SNI allowed.test) reaches the sink,
    // which is no TLS server — the bytes arriving are the point.
    let got_before = w.allowed.seen().1;
    let _ = w.run(
        &[],
        &format!("curl -sk --max-time 5 https://allowed.test:{a}/"),
    );
    assert!(
        common::wait_for(5, || w.allowed.bytes.lock().unwrap()[got_before..]
            .windows(12)
            .any(|x| x == b"allowed.test")),
        "the ClientHello did not reach the allowed sink"
    );
    let o = w.run(
        &[],
        &format!("curl -sSk --max-time 10 https://blocked.test:{b}/"),
    );
    assert!(!o.status.success(), "{}", out(&o));

    // A blocked name, and a direct address that skips the proxy variables.
    let o = w.run(
        &[],
        &format!("curl -sS -f --max-time 10 http://blocked.test:{b}/"),
    );
    assert!(!o.status.success(), "{}", out(&o));
    assert!(!stdout(&o).contains("sink:blocked"), "{}", out(&o));
    let o = w.run(
        &[],
        &format!("curl -sS -f --max-time 10 --noproxy '*' http://127.0.0.1:{b}/"),
    );
    assert!(!o.status.success(), "{}", out(&o));
    assert!(!stdout(&o).contains("sink:blocked"), "{}", out(&o));
    let o = w.run(
        &[],
        &format!("curl -sS -f --max-time 10 --noproxy '*' http://blocked.test:{b}/"),
    );
    assert!(!o.status.success(), "{}", out(&o));
    w.assert_blocked_untouched(before, "curl");
    // One exit summary (the audit session's) names what the network layer denied.
    let e = stderr(&o);
    assert!(
        e.contains("denials") && e.contains("blocked.test"),
        "{}",
        out(&o)
    );
    assert!(!e.contains("the network layer refused"), "{}", out(&o));
}

#[test]
fn a_client_ignoring_proxy_variables_is_redirected_by_name() {
    let w = World::new("");
    let (a, b) = (w.allowed.port, w.blocked.port);
    let probe = |host: &str, port: u16| {
        format!(
            "python3 -c '\nimport socket, sys\ns = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)\ns.sendall(b\"GET / HTTP/1.1\\r\\nHost: \" + sys.argv[1].encode() + b\"\\r\\nConnection: close\\r\\n\\r\\n\")\ndata = b\"\"\nwhile True:\n    d = s.recv(4096)\n    if not d: break\n    data += d\nprint(data.decode(\"latin1\"))\n' {host} {port}"
        )
    };
    // Bare control: the same client reaches the listener directly.
    let o = w.bare(&probe("127.0.0.1", b));
    assert!(stdout(&o).contains("sink:blocked"), "bare: {}", out(&o));
    let before = w.blocked.seen();

    // Positive control: no proxy variables used; the interposer redirects the
    // connect to the proxy, which decides allowed.test by name.
    let o = w.run(&[], &probe("allowed.test", a));
    assert!(stdout(&o).contains("sink:allowed"), "{}", out(&o));

    // blocked.test: sandpit's resolver refuses the name.
    let o = w.run(&[], &probe("blocked.test", b));
    assert!(!o.status.success(), "{}", out(&o));
    assert!(!stdout(&o).contains("sink:blocked"), "{}", out(&o));
    // The blocked address itself: redirected too, and denied by the proxy.
    let o = w.run(&[], &probe("127.0.0.1", b));
    assert!(!stdout(&o).contains("sink:blocked"), "{}", out(&o));
    w.assert_blocked_untouched(before, "python3");

    // Without the interposer there is no redirect: the same client cannot leave
    // the network namespace at all (only proxy-aware clients get out).
    let o = w.run(&["--kernel-only"], &probe("allowed.test", a));
    assert!(!stdout(&o).contains("sink:allowed"), "{}", out(&o));
}

#[test]
fn secrets_stay_unread_and_workspace_writes_land() {
    let w = World::new("");
    let o = w.bare("cat ~/.ssh/id_rsa");
    assert!(stdout(&o).contains(CANARY), "bare control: {}", out(&o));

    let o = w.run(&[], "cat ~/.ssh/id_rsa; echo written > out.txt");
    assert!(!o.status.success() || !stdout(&o).contains(CANARY));
    assert!(!stdout(&o).contains(CANARY), "{}", out(&o));
    assert!(!stderr(&o).contains(CANARY), "{}", out(&o));
    // The interposer names the rule.
    assert!(
        stderr(&o).contains("blocked read of ~/.ssh/id_rsa")
            && stderr(&o).contains("files.block_read"),
        "{}",
        out(&o)
    );
    // The exit summary lists the interposer's denials (through SANDPIT_AUDIT).
    assert!(
        stderr(&o).contains("1 denials (1 distinct)")
            && stderr(&o).contains("deny read ~/.ssh/id_rsa [interposer]"),
        "{}",
        out(&o)
    );
    assert_eq!(
        std::fs::read_to_string(w.h.workspace().join("out.txt")).unwrap(),
        "written\n"
    );
}

#[test]
fn shims_refuse_blocked_destinations_before_running() {
    let w = World::new("");
    let (a, b) = (w.allowed.port, w.blocked.port);
    let before = w.blocked.seen();
    let o = w.run(
        &["--shims"],
        &format!("curl -sS --max-time 10 https://blocked.test:{b}/"),
    );
    assert_eq!(o.status.code(), Some(126), "{}", out(&o));
    assert!(
        stderr(&o).contains("blocked.test") && stderr(&o).contains("sandpit: curl"),
        "{}",
        out(&o)
    );
    w.assert_blocked_untouched(before, "shimmed curl");

    // Positive control: the shim runs the real curl for an allowed host.
    let o = w.run(
        &["--shims"],
        &format!("command -v curl; curl -sS --max-time 10 http://allowed.test:{a}/"),
    );
    assert!(stdout(&o).contains("sink:allowed"), "{}", out(&o));
    assert!(stdout(&o).contains("/shims/curl"), "{}", out(&o));

    // `shims.enabled = true` in the policy turns them on without the flag.
    let w = World::new("[shims]\nenabled = true\n");
    let o = w.run(&[], "command -v curl");
    assert!(stdout(&o).contains("/shims/curl"), "{}", out(&o));
}

#[test]
fn the_top_level_command_goes_through_its_shim() {
    let w = World::new("");
    let (a, b) = (w.allowed.port, w.blocked.port);
    let run = |args: &[&str]| {
        let mut c = w.h.sandpit();
        c.args(["run", "--shims", "--"]).args(args);
        c.output().unwrap()
    };
    let before = w.blocked.seen();
    let url = format!("http://blocked.test:{b}/");
    let o = run(&["curl", "-sS", "--max-time", "10", &url]);
    assert_eq!(o.status.code(), Some(126), "{}", out(&o));
    let err = stderr(&o);
    let refusal: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("sandpit: curl"))
        .collect();
    assert_eq!(refusal.len(), 1, "{}", out(&o));
    assert!(refusal[0].contains("blocked.test"), "{}", out(&o));
    assert!(stdout(&o).is_empty(), "{}", out(&o));
    w.assert_blocked_untouched(before, "top-level curl");

    // Positive control: the top-level curl to an allowed host runs the real curl.
    let url = format!("http://allowed.test:{a}/");
    let o = run(&["curl", "-sS", "--max-time", "10", &url]);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(stdout(&o), "sink:allowed");

    // Without --shims the top-level curl is not the shim's to refuse: curl runs and
    // the proxy answers it 403 (not 126, and no shim line).
    let mut c = w.h.sandpit();
    let url = format!("http://blocked.test:{b}/");
    c.args(["run", "--", "curl", "-sS", "--max-time", "10", &url]);
    let o = c.output().unwrap();
    assert_ne!(o.status.code(), Some(126), "{}", out(&o));
    assert!(!stderr(&o).contains("sandpit: curl"), "{}", out(&o));
    w.assert_blocked_untouched(before, "top-level curl without shims");
}

#[test]
fn a_static_program_runs_in_kernel_mode_and_the_kernel_still_holds() {
    let w = World::new("");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/kernel_support/static_read.c");
    let bin = w.h.workspace().join("static_read");
    let r = Command::new("cc")
        .args(["-O1", "-static", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("cc must be installed");
    assert!(
        r.status.success(),
        "static build (needs libc6-dev): {}",
        out(&r)
    );
    w.h.give_to_test_user(&bin);
    let key = w.h.home().join(".ssh/id_rsa");
    let notes = w.h.workspace().join("notes.txt");
    w.h.write(&notes, "WORKSPACE-OK\n");
    // Bare control: the probe reads the canary.
    let o = w.h.command(&bin).arg(&key).output().unwrap();
    assert!(stdout(&o).contains(CANARY), "bare: {}", out(&o));

    // Under sandpit the program itself is inspected: no loader, so no preload, and
    // the start-up line says why; the kernel layer still masks the key.
    let o =
        w.h.sandpit()
            .arg("run")
            .arg("--")
            .arg(&bin)
            .arg(&key)
            .arg(&notes)
            .output()
            .unwrap();
    let e = stderr(&o);
    // Positive control in the same run: the probe ran and reads the workspace.
    assert!(stdout(&o).contains("WORKSPACE-OK"), "{}", out(&o));
    assert!(
        e.contains("interposer OFF (statically linked"),
        "{}",
        out(&o)
    );
    assert!(
        !stdout(&o).contains(CANARY) && !e.contains(CANARY),
        "{}",
        out(&o)
    );
}

#[test]
fn an_interposer_that_cannot_be_installed_stops_the_run() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new("");
    // Someone else could write the library directory: extraction must refuse it.
    let lib = w.h.home().join(".sandpit/lib");
    std::fs::create_dir_all(&lib).unwrap();
    w.h.give_to_test_user(&lib);
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = w.run(&[], "echo RAN > ran.txt");
    assert_eq!(o.status.code(), Some(125), "{}", out(&o));
    assert!(
        stderr(&o).contains("interposition library") && stderr(&o).contains("--kernel-only"),
        "{}",
        out(&o)
    );
    assert!(!w.h.workspace().join("ran.txt").exists(), "the command ran");
    // Positive control: choosing kernel-only mode runs it.
    let o = w.run(&["--kernel-only"], "echo RAN > ran.txt");
    assert!(o.status.success(), "{}", out(&o));
    assert!(w.h.workspace().join("ran.txt").exists(), "{}", out(&o));
}

#[test]
fn other_runs_and_logs_are_out_of_reach() {
    let w = World::new("");
    // Another run (still "alive": our own pid) with a log and a socket-like file.
    let other = format!("20260101T000000.000Z-{}", std::process::id());
    let dir = w.h.home().join(".sandpit/run").join(&other);
    w.h.write(&dir.join("audit.sock"), CANARY);
    w.h.write(
        &w.h.home().join(format!(".sandpit/logs/{other}.jsonl")),
        CANARY,
    );
    let probe = format!(
        "cat ~/.sandpit/run/{other}/audit.sock ~/.sandpit/logs/{other}.jsonl; ls ~/.sandpit/run ~/.sandpit/logs; \
         head -c 17 \"$SANDPIT_SNAPSHOT\"; echo; test -S \"$SANDPIT_AUDIT\" && echo own-socket-ok"
    );
    let bare = w.bare(&probe);
    assert!(
        stdout(&bare).contains(CANARY),
        "probe must work bare: {}",
        out(&bare)
    );
    let o = w.run(&[], &probe);
    let all = out(&o);
    assert!(!all.contains(CANARY), "{all}");
    assert!(!stdout(&o).contains(&other), "listed: {all}");
    // Positive control: this run's own directory shows through.
    assert!(stdout(&o).contains("sandpit-policy-v5"), "{all}");
    assert!(stdout(&o).contains("own-socket-ok"), "{all}");
}
