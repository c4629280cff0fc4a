#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Loopback services in, dev servers out (issue 11), end to end as the unprivileged
//! test user: `[network] allow = ["localhost:PORT"]` makes exactly that host loopback
//! port reachable inside at the same address, for a static client that ignores proxy
//! variables and hooks, for dynamic clients (python, curl) and for proxy-aware ones;
//! a second host loopback port that is not listed receives nothing. With
//! `allow_local_binding = true` a server started inside on 127.0.0.1 answers a request
//! made from outside; with it off the bind fails naming the key; binding a
//! non-loopback address is refused (or, for a static binary in the namespace,
//! unreachable) either way. All traffic stays on 127.0.0.0/8 and ::1.
mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::sink::Sink;
use common::{free_port, text, TestHome};

/// The static client/binder (`tests/loopback_support/tcp_get.c`), built into the
/// workspace with `-static`: no preload can load into it, no proxy variable is read.
fn build_static(h: &TestHome) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/loopback_support/tcp_get.c");
    let out = h.workspace().join("tcp_get");
    let r = Command::new("cc")
        .args(["-O1", "-static", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .expect("cc must be installed");
    assert!(r.status.success(), "building tcp_get: {}", text(&r));
    let file = Command::new("file").arg(&out).output();
    if let Ok(f) = file {
        let f = String::from_utf8_lossy(&f.stdout).to_string();
        assert!(f.contains("statically linked"), "{f}");
    }
    h.give_to_test_user(&out);
    out
}

const PY_CLIENT: &str = r#"
import socket, sys, urllib.request
a, b = int(sys.argv[1]), int(sys.argv[2])
def raw(host, p):
    try:
        s = socket.create_connection((host, p), timeout=10)
        s.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        data = b""
        while True:
            c = s.recv(4096)
            if not c:
                break
            data += c
        print(f"py-raw {host}:{p}:", data.decode(errors="replace").split("\r\n\r\n")[-1] or "EMPTY")
    except OSError as e:
        print(f"py-raw {host}:{p}: ERR {e}")
raw("127.0.0.1", a)
raw("localhost", a)
raw("127.0.0.1", b)
for p in (a, b):
    try:
        print(f"py-urllib {p}:", urllib.request.urlopen(f"http://localhost:{p}/", timeout=10).read().decode())
    except Exception as e:
        print(f"py-urllib {p}: ERR {e}")
"#;

fn home_with(allow: &str, extra: &str) -> TestHome {
    let h = TestHome::new();
    h.user_config(&format!("[network]\nallow = [{allow}]\n{extra}"));
    h.write(&h.workspace().join("client.py"), PY_CLIENT);
    h
}

fn sandpit_run(h: &TestHome, flags: &[&str], script: &str) -> Command {
    let mut c = h.sandpit();
    c.arg("run")
        .args(flags)
        .arg("--")
        .arg("sh")
        .arg("-c")
        .arg(script);
    c
}

fn clients_script(a: u16, b: u16) -> String {
    format!(
        "./tcp_get 127.0.0.1 {a} 127.0.0.1 {b} ::1 {a}; python3 client.py {a} {b}; \
         curl -sS -m 10 http://localhost:{a}/; echo; \
         curl -sS -m 10 --noproxy '*' http://127.0.0.1:{a}/; echo; \
         curl -sS -m 10 http://localhost:{b}/ || echo curl-b-failed; \
         curl -sS -m 10 --noproxy '*' http://127.0.0.1:{b}/ || echo curl-direct-b-failed"
    )
}

/// The probe works without sandpit: both host ports answer every client.
fn control(h: &TestHome, a: &Sink, b: &Sink) {
    let out = h
        .command("sh")
        .arg("-c")
        .arg(format!(
            "./tcp_get 127.0.0.1 {} 127.0.0.1 {}; python3 client.py {} {}",
            a.port, b.port, a.port, b.port
        ))
        .output()
        .unwrap();
    let t = text(&out);
    assert!(
        t.contains(&format!("static 127.0.0.1:{}:{}", b.port, b.body)),
        "{t}"
    );
    assert!(
        t.contains(&format!("py-raw 127.0.0.1:{}: {}", b.port, b.body)),
        "{t}"
    );
}

fn assert_reached(t: &str, a: &Sink) {
    let body = a.body.clone();
    for want in [
        format!("static 127.0.0.1:{}:{body}", a.port),
        format!("py-raw 127.0.0.1:{}: {body}", a.port),
        format!("py-raw localhost:{}: {body}", a.port),
        format!("py-urllib {}: {body}", a.port),
    ] {
        assert!(t.contains(&want), "missing {want:?}:\n{t}");
    }
}

fn assert_untouched(t: &str, b: &Sink, before: (usize, usize)) {
    assert_eq!(
        b.seen(),
        before,
        "the unlisted loopback port received something: {:?}\n{t}",
        String::from_utf8_lossy(&b.bytes.lock().unwrap())
    );
    assert!(!t.contains(&b.body), "{t}");
}

#[test]
fn static_and_dynamic_clients_reach_the_listed_loopback_port_and_nothing_else() {
    let (a, b) = (
        Sink::answering("127.0.0.1", "SERVICE-A-ANSWERED".into()),
        Sink::answering("127.0.0.1", "SERVICE-B-ANSWERED".into()),
    );
    let h = home_with(&format!("\"localhost:{}\"", a.port), "");
    build_static(&h);
    control(&h, &a, &b);
    let before = b.seen();
    let out = sandpit_run(&h, &[], &clients_script(a.port, b.port))
        .output()
        .unwrap();
    let t = text(&out);
    assert!(
        t.contains("network: proxy only") && t.contains("loopback services"),
        "{t}"
    );
    assert_reached(&t, &a);
    // curl through the proxy (HTTP_PROXY) and directly (the interposer).
    assert!(
        t.matches(&a.body).count() >= 6,
        "curl did not reach the service both ways:\n{t}"
    );
    // `localhost:PORT` is also [::1]:PORT inside; the host service listens on
    // 127.0.0.1 only, so the relay falls back to it.
    if !common::machine_lacks("ipv6") {
        assert!(
            t.contains(&format!("static ::1:{}:{}", a.port, a.body)),
            "{t}"
        );
    }
    // The static client finds nothing at the unlisted port inside the namespace.
    assert!(
        t.contains(&format!(
            "static 127.0.0.1:{}:ERR:Connection refused",
            b.port
        )),
        "{t}"
    );
    assert!(
        t.contains("curl-direct-b-failed") || t.contains("403"),
        "{t}"
    );
    assert_untouched(&t, &b, before);
    // The relayed connections are in the run's audit log, with the rule.
    let logs = h.home().join(".sandpit/logs");
    let log: String = std::fs::read_dir(&logs)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .collect();
    let relayed = log
        .lines()
        .find(|l| l.contains("loopback relay") && l.contains(&format!("127.0.0.1:{}", a.port)))
        .unwrap_or_else(|| panic!("no loopback relay record:\n{log}"));
    assert!(
        relayed.contains("\"allow\"") && relayed.contains(&format!("localhost:{}", a.port)),
        "{relayed}"
    );
}

#[test]
fn fallback_mode_allows_the_listed_port_by_landlock_rule_only() {
    let (a, b) = (
        Sink::answering("127.0.0.1", "SERVICE-A-ANSWERED".into()),
        Sink::answering("127.0.0.1", "SERVICE-B-ANSWERED".into()),
    );
    let h = home_with(&format!("\"localhost:{}\"", a.port), "");
    build_static(&h);
    control(&h, &a, &b);
    let before = b.seen();
    let out = sandpit_run(&h, &["--allow-degraded"], &clients_script(a.port, b.port))
        .env("SANDPIT_FORCE_FALLBACK", "1")
        .output()
        .unwrap();
    let t = text(&out);
    assert!(t.contains("DEGRADED"), "{t}");
    assert!(t.contains("loopback services are allowed by port"), "{t}");
    assert_reached(&t, &a);
    assert!(
        t.contains(&format!(
            "static 127.0.0.1:{}:ERR:Permission denied",
            b.port
        )),
        "{t}"
    );
    assert_untouched(&t, &b, before);
}

/// GET `path` from 127.0.0.1:port on the host; the body, or `None`.
fn host_get(port: u16, path: &str) -> Option<String> {
    host_get_at("127.0.0.1", port, path)
}

fn host_get_at(ip: &str, port: u16, path: &str) -> Option<String> {
    let ip: std::net::IpAddr = ip.parse().unwrap();
    let mut s = TcpStream::connect((ip, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    let mut v = vec![];
    s.read_to_end(&mut v).ok()?;
    Some(String::from_utf8_lossy(&v).into_owned())
}

#[test]
fn with_allow_local_binding_a_server_inside_answers_this_machine() {
    let h = home_with("\"api.example\"", "allow_local_binding = true\n");
    build_static(&h);
    h.write(&h.workspace().join("marker.txt"), "DEV-SERVER-INSIDE-7c1\n");
    let (port, any, stat) = (free_port(), free_port(), free_port());
    let ipv6 = !common::machine_lacks("ipv6");
    let port6 = TcpListener::bind("[::1]:0")
        .map(|l| l.local_addr().unwrap().port())
        .unwrap_or(0);
    let v6 = if ipv6 {
        format!("python3 -m http.server --bind ::1 {port6} & ")
    } else {
        String::new()
    };
    assert!(
        host_get(port, "/marker.txt").is_none(),
        "port {port} is taken"
    );
    let script = format!(
        "python3 -m http.server --bind 0.0.0.0 {any}; \
         ./tcp_get bindwait 0.0.0.0 {stat} > \"$TMPDIR/b.out\" & \
         while ! grep -q listening \"$TMPDIR/b.out\"; do sleep 0.1; done; \
         {v6} exec python3 -m http.server --bind 127.0.0.1 {port}"
    );
    let child = sandpit_run(&h, &[], &script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) for the mirror: the server starts inside, then sandpit opens the
    // same address on this machine.
    let start = Instant::now();
    let (mut got, mut got6) = (None, None);
    while start.elapsed() < Duration::from_secs(60) {
        if got.is_none() {
            got = host_get(port, "/marker.txt");
        }
        if ipv6 && got6.is_none() {
            got6 = host_get_at("::1", port6, "/marker.txt");
        }
        if got.is_some() && (got6.is_some() || !ipv6) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The other two listeners inside are on 0.0.0.0: refused (python, by the
    // interposer) or not mirrored (the static binary): nothing answers here.
    let any_reached = host_get(any, "/marker.txt");
    let static_reached = TcpStream::connect(("127.0.0.1", stat)).is_ok();
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let t = text(&out);
    let body = got.unwrap_or_else(|| panic!("the server inside never answered:\n{t}"));
    assert!(body.contains("DEV-SERVER-INSIDE-7c1"), "{body}\n{t}");
    if ipv6 {
        let body6 = got6.unwrap_or_else(|| panic!("the ::1 server never answered:\n{t}"));
        assert!(body6.contains("DEV-SERVER-INSIDE-7c1"), "{body6}\n{t}");
    }
    assert!(t.contains("reachable from this machine"), "{t}");
    assert!(any_reached.is_none(), "0.0.0.0 server reachable:\n{t}");
    assert!(!static_reached, "static 0.0.0.0 listener mirrored:\n{t}");
    assert!(
        t.contains(&format!("blocked listening on 0.0.0.0:{any}"))
            && t.contains("loopback addresses only"),
        "{t}"
    );
    assert!(
        host_get(port, "/marker.txt").is_none(),
        "mirror outlived the run"
    );
    // explain says what the run did: loopback allowed, every other address refused.
    for (addr, want) in [
        (format!("127.0.0.1:{port}"), "ALLOW"),
        (format!("[::1]:{}", port6.max(1)), "ALLOW"),
        (format!("0.0.0.0:{any}"), "DENY"),
    ] {
        let o = h
            .sandpit()
            .args(["explain", "listen", &addr])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            said.starts_with(&format!("{want}  listen")),
            "{addr}: {said}"
        );
    }
}

#[test]
fn without_allow_local_binding_a_bind_fails_naming_the_key() {
    let h = home_with("\"api.example\"", "");
    build_static(&h);
    let port = free_port();
    let script = format!(
        "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen(); print(\"py-bound\")'; \
         python3 -c 'import socket; s = socket.socket(); s.bind((\"0.0.0.0\", {port})); print(\"py-any-bound\")'; \
         python3 -c 'import socket; s = socket.socket(); s.listen(); print(\"py-autobind\", s.getsockname()[1])'; \
         ./tcp_get bind 127.0.0.1 {port}"
    );
    let bare = h.command("sh").arg("-c").arg(&script).output().unwrap();
    let tb = text(&bare);
    assert!(
        tb.contains("py-bound") && tb.contains("py-autobind") && tb.contains(":ok listening"),
        "{tb}"
    );
    for fallback in [false, true] {
        let mut c = sandpit_run(&h, &["--allow-degraded"], &script);
        if fallback {
            c.env("SANDPIT_FORCE_FALLBACK", "1");
        }
        let out = c.output().unwrap();
        let t = text(&out);
        assert!(
            !t.contains("py-bound") && !t.contains("py-any-bound") && !t.contains("py-autobind"),
            "{t}"
        );
        // listen() on a never-bound socket would take every address: refused too.
        assert!(
            t.contains("an unbound socket listens on every address"),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "blocked listening on 127.0.0.1:{port}: network.allow_local_binding = false"
            )),
            "{t}"
        );
        assert!(t.contains("PermissionError"), "{t}");
        // The static binary is refused by the kernel layer (Landlock).
        assert!(
            t.contains(&format!(
                "static bind 127.0.0.1:{port}:ERR:Permission denied"
            )),
            "fallback={fallback}: {t}"
        );
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}

#[test]
fn check_and_explain_say_how_a_loopback_service_is_reached() {
    let h = home_with("\"localhost:11434\"", "");
    let out = h
        .sandpit()
        .args(["explain", "connect", "localhost:11434"])
        .output()
        .unwrap();
    let t = text(&out);
    assert!(t.contains("ALLOW"), "{t}");
    assert!(
        t.contains("reached:") && t.contains("127.0.0.1:11434") && t.contains("relays"),
        "{t}"
    );
    let out = h
        .sandpit()
        .args(["explain", "connect", "127.0.0.1:11435"])
        .output()
        .unwrap();
    let t = text(&out);
    assert!(
        t.contains("DENY") && t.contains("\"127.0.0.1:11435\""),
        "{t}"
    );
    let out = h.sandpit().args(["check", "--", "sh"]).output().unwrap();
    let t = text(&out);
    assert!(
        t.contains("loopback service \"localhost:11434\"")
            && t.contains("allow_local_binding = false"),
        "{t}"
    );
    // A loopback entry without a port is a load error at its file:line, with a hint.
    let bad = home_with("\"localhost\"", "");
    let out = bad
        .sandpit()
        .args(["explain", "connect", "localhost:11434"])
        .output()
        .unwrap();
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("config.toml:2")
            && t.contains("every loopback port")
            && t.contains("localhost:11434"),
        "{t}"
    );
}

#[test]
fn a_project_file_turns_local_binding_off_and_never_on() {
    let h = home_with("\"api.example\"", "allow_local_binding = true\n");
    let port = free_port();
    let script = format!(
        "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", {port})); print(\"py-bound\")'"
    );
    // The user's own config allows it: the bind works (positive control).
    let t = text(&sandpit_run(&h, &[], &script).output().unwrap());
    assert!(t.contains("py-bound"), "{t}");
    // The project turns it off: refused, naming the key and the project file.
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[network]\nallow_local_binding = false\n",
    );
    let t = text(&sandpit_run(&h, &[], &script).output().unwrap());
    assert!(!t.contains("py-bound"), "{t}");
    assert!(
        t.contains("network.allow_local_binding = false") && t.contains(".sandpit.toml"),
        "{t}"
    );
    // A project file may not turn it on.
    let h = home_with("\"api.example\"", "");
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[network]\nallow_local_binding = true\n",
    );
    let out = sandpit_run(&h, &[], &script).output().unwrap();
    let t = text(&out);
    assert!(!out.status.success() && !t.contains("py-bound"), "{t}");
    assert!(
        t.contains("never on") && t.contains(".sandpit.toml:2"),
        "{t}"
    );
}

/// A bind to an ephemeral port (a client binding before it connects, Go's IPv6
/// probe) is no server: it works without noise; listen() on it is the refusal.
#[test]
fn an_ephemeral_bind_is_no_server_until_it_listens() {
    let h = home_with("\"api.example\"", "");
    let script = "python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind((\"::1\", 0)); print(\"probe-ok\")'; \
                  python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); print(\"listening\")'";
    let out = sandpit_run(&h, &[], script).output().unwrap();
    let t = text(&out);
    assert!(t.contains("probe-ok"), "{t}");
    assert!(!t.contains("blocked listening on [::1]"), "{t}");
    assert!(!t.contains("\nlistening"), "{t}");
    assert!(
        t.contains("blocked listening on 127.0.0.1:") && t.contains("allow_local_binding = false"),
        "{t}"
    );
}
