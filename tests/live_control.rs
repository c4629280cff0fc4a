#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `sandpit allow HOST` / `sandpit deny HOST` change a running run's network rules
//! at once, through the launcher's control socket; a process inside the sandbox
//! cannot reach that socket (hidden in namespace mode, refused by its peer check in
//! the Landlock-only fallback). Real runs as the unprivileged test user, hosts
//! mapped to loopback sinks by sandpit's own resolver.
mod common;

use common::sink::Sink;
use common::TestHome;
use std::path::PathBuf;
use std::process::Stdio;

fn config(h: &TestHome) {
    h.user_config(
        "[network]\nallow = [\"allowed.test\"]\n\
         [network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n\"blocked.test\" = \"127.0.0.1\"\n",
    );
}

/// A step of the script: wait until the test creates `file` in the workspace.
fn wait_for(file: &str) -> String {
    format!("while [ ! -e {file} ]; do sleep 0.05; done\n")
}

/// A direct connection by name (no proxy variables): the interposer decides it in
/// the process, from the snapshot it read when it started.
const DIRECT_PY: &str = r#"
import socket, sys
label, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    print(label + ":", s.recv(4096).decode(errors="replace").replace("\r\n", " "), flush=True)
except OSError as e:
    print(label + ": error", e, flush=True)
"#;

fn direct(label: &str, host: &str, port: u16) -> String {
    format!("python3 direct.py {label} {host} {port}\n")
}

fn curl(label: &str, host: &str, port: u16) -> String {
    format!("printf '{label}:'; curl -sS --max-time 10 http://{host}:{port}/ 2>&1 | head -c 300 | tr '\\n' ' '; echo\n")
}

/// The next line of the run's output that starts with `prefix`.
fn next_line(
    lines: &mut std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    prefix: &str,
) -> String {
    for l in lines.by_ref() {
        let l = l.unwrap();
        if l.starts_with(prefix) {
            return l;
        }
    }
    panic!("the run ended before a line starting {prefix:?}");
}

#[test]
fn allow_and_deny_change_a_running_runs_network_at_once() {
    let h = TestHome::new();
    config(&h);
    let allowed = Sink::start("127.0.0.2", "allowed");
    let blocked = Sink::start("127.0.0.1", "blocked");
    let script = format!(
        "echo ready\n{}{}{}echo step1\n{}{}{}{}echo step2\n{}{}echo end\n",
        curl("blocked-before", "blocked.test", blocked.port),
        direct("direct-before", "blocked.test", blocked.port),
        curl("allowed-before", "allowed.test", allowed.port),
        wait_for("go1"),
        curl("blocked-after-allow", "blocked.test", blocked.port),
        direct("direct-after-allow", "blocked.test", blocked.port),
        curl("allowed-still", "allowed.test", allowed.port),
        wait_for("go2"),
        curl("allowed-after-deny", "allowed.test", allowed.port),
    );
    h.write(&h.workspace().join("work.sh"), &script);
    h.write(&h.workspace().join("direct.py"), DIRECT_PY);
    let mut cmd = h.sandpit_run(false);
    cmd.args(["sh", "work.sh"]);
    let (mut child, mut lines) = common::spawn_ready(cmd, Stdio::piped());

    let before = next_line(&mut lines, "blocked-before:");
    assert!(!before.contains("sink:blocked"), "{before}");
    let direct_before = next_line(&mut lines, "direct-before:");
    assert!(!direct_before.contains("sink:blocked"), "{direct_before}");
    let ok = next_line(&mut lines, "allowed-before:");
    assert!(ok.contains("sink:allowed"), "the positive control: {ok}");
    next_line(&mut lines, "step1");
    assert_eq!(
        blocked.seen(),
        (0, 0),
        "blocked.test was reached before the allow"
    );

    // A change the run refuses exits 1 and says why (README's exit codes).
    let o = h.sandpit().args(["allow", "127.0.0.1"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    assert!(
        common::stderr(&o).contains("nothing changed: 127.0.0.1 is on this machine"),
        "{}",
        common::text(&o)
    );

    // Allow the blocked host while the run waits.
    let o = h
        .sandpit()
        .args(["allow", "blocked.test"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(said.contains("allowed blocked.test in run"), "{said}");
    assert!(
        said.contains("the proxy and DNS responder take it"),
        "{said}"
    );
    h.write(&h.workspace().join("go1"), "");
    let after = next_line(&mut lines, "blocked-after-allow:");
    assert!(
        after.contains("sink:blocked"),
        "the allow took no effect: {after}"
    );
    assert!(blocked.seen().0 > 0);
    // A program started after the change connects by name itself, past the
    // interposer's rewritten snapshot.
    let direct_after = next_line(&mut lines, "direct-after-allow:");
    assert!(direct_after.contains("sink:blocked"), "{direct_after}");
    let still = next_line(&mut lines, "allowed-still:");
    assert!(still.contains("sink:allowed"), "{still}");
    next_line(&mut lines, "step2");

    // Deny the allowed host (named by the run's id prefix this time).
    let runs = h.home().join(".sandpit/run/control");
    let id = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find_map(|n| n.strip_suffix(".sock").map(str::to_string))
        .unwrap();
    let seen = allowed.seen().0;
    let o = h
        .sandpit()
        .args(["deny", "allowed.test", "--run", &id[..20]])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("denied allowed.test in run"),
        "{}",
        common::text(&o)
    );
    h.write(&h.workspace().join("go2"), "");
    let denied = next_line(&mut lines, "allowed-after-deny:");
    assert!(
        !denied.contains("sink:allowed"),
        "the deny took no effect: {denied}"
    );
    assert_eq!(
        allowed.seen().0,
        seen,
        "allowed.test was reached after the deny"
    );
    next_line(&mut lines, "end");
    assert!(child.wait().unwrap().success());

    // Both changes are in the run's log, with what took effect; the socket is gone.
    let logs: Vec<PathBuf> = std::fs::read_dir(h.home().join(".sandpit/logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(
        log.contains("\"action\":\"policy\",\"subject\":\"allow blocked.test\""),
        "{log}"
    );
    assert!(
        log.contains("\"action\":\"policy\",\"subject\":\"deny allowed.test\""),
        "{log}"
    );
    assert!(!runs.join(format!("{id}.sock")).exists());
    // No run left: the command says so, as a usage error.
    let o = h
        .sandpit()
        .args(["allow", "blocked.test"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
}

/// The probe a sandboxed process runs: connect to every control socket it can name
/// (the path the test found outside, and any under ~/.sandpit/run/control) and ask
/// to allow blocked.test.
const PROBE_PY: &str = r#"
import glob, os, socket, sys
paths = [open("sockpath").read().strip()] + glob.glob(os.path.expanduser("~/.sandpit/run/control/*.sock"))
for p in paths:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(p)
        try:
            s.sendall(b"allow blocked.test\n")
        except OSError:
            pass  # a refusal may close the socket before the request is read
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        print("probe:", p, answer.decode().strip(), flush=True)
    except OSError as e:
        print("probe:", p, "error", e, flush=True)
"#;

fn probe_run(fallback: bool) {
    let h = TestHome::new();
    config(&h);
    let blocked = Sink::start("127.0.0.1", "blocked");
    h.write(&h.workspace().join("probe.py"), PROBE_PY);
    h.write(
        &h.workspace().join("work.sh"),
        &format!(
            "echo ready\n{}python3 probe.py\n{}echo end\n",
            wait_for("sockpath"),
            curl("blocked-after-probe", "blocked.test", blocked.port),
        ),
    );
    let mut cmd = h.sandpit();
    cmd.arg("run");
    if fallback {
        cmd.arg("--allow-degraded")
            .env("SANDPIT_FORCE_FALLBACK", "1");
    }
    cmd.args(["--", "sh", "work.sh"]);
    let (mut child, mut lines) = common::spawn_ready(cmd, Stdio::piped());
    let dir = h.home().join(".sandpit/run/control");
    let sock = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .unwrap();
    // The same probe outside the sandbox, as the test user the sandbox's processes
    // run as, reaches the socket (a harmless change).
    let as_user = h
        .command("python3")
        .arg("-c")
        .arg(format!(
            "import socket; s=socket.socket(socket.AF_UNIX); s.connect({:?}); s.sendall(b'deny other.test\\n'); print(s.recv(4096).decode())",
            sock.to_str().unwrap()
        ))
        .output()
        .unwrap();
    h.write(&h.workspace().join("sockpath"), sock.to_str().unwrap());
    let mut probes = vec![];
    let after = loop {
        let l = lines.next().unwrap().unwrap();
        if l.starts_with("probe:") {
            probes.push(l);
        } else if l.starts_with("blocked-after-probe:") {
            break l;
        }
    };
    next_line(&mut lines, "end");
    let status = child.wait().unwrap();
    assert!(
        String::from_utf8_lossy(&as_user.stdout).starts_with("ok denied other.test"),
        "the test user outside the sandbox: {}",
        common::text(&as_user)
    );
    assert!(status.success());
    assert!(!probes.is_empty());
    for p in &probes {
        assert!(
            !p.contains(" ok "),
            "the sandbox changed the run's rules: {probes:?}"
        );
    }
    assert!(!after.contains("sink:blocked"), "{after} {probes:?}");
    assert_eq!(
        blocked.seen(),
        (0, 0),
        "blocked.test was reached: {probes:?}"
    );
    let logs: Vec<PathBuf> = std::fs::read_dir(h.home().join(".sandpit/logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(
        !log.contains("\"subject\":\"allow blocked.test\",\"decision\":\"info\""),
        "{log}"
    );
    if fallback {
        // Here the path is there to connect to: the peer check refuses and records.
        assert!(
            probes.iter().any(|p| p.contains("refused pid")),
            "{probes:?}"
        );
        assert!(
            log.contains("control socket: refused a request from pid"),
            "{log}"
        );
    } else {
        // Hidden: the path does not exist inside.
        assert!(probes.iter().all(|p| p.contains("error")), "{probes:?}");
    }
}

#[test]
fn a_sandboxed_process_cannot_reach_the_control_socket() {
    probe_run(false);
}

#[test]
fn a_sandboxed_process_is_refused_by_the_control_socket_in_fallback_mode() {
    probe_run(true);
}
