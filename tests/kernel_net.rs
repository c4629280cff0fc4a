//! Kernel layer, network: inside the sandbox nothing outside is reachable directly
//! (TCP, UDP, IPv6, TCP Fast Open to loopback listeners on the host receive nothing);
//! the only way out is the bridge to sandpit's proxy socket. Fallback mode (no
//! namespaces) gets the same effect from Landlock TCP rules and seccomp.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod kernel_support;

use common::{free_port, TestHome};
use kernel_support::*;
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Duration;

const NET_PY: &str = r#"
import socket, sys
p, u, p6, u6 = map(int, sys.argv[1:5])
def t(name, f):
    try:
        f(); print(name + ":ok")
    except OSError as e:
        print(name + ":" + (e.strerror or type(e).__name__))
def tcp():
    s = socket.create_connection(("127.0.0.1", p), timeout=3); s.sendall(b"LEAK-TCP"); s.close()
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"LEAK-UDP", ("127.0.0.1", u))
def tcp6():
    s = socket.create_connection(("::1", p6), timeout=3); s.sendall(b"LEAK-TCP6"); s.close()
def udp6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.sendto(b"LEAK-UDP6", ("::1", u6))
def tfo():
    s = socket.socket(); s.settimeout(3); s.sendto(b"LEAK-TFO", socket.MSG_FASTOPEN, ("127.0.0.1", p)); s.close()
def raw():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
for n, f in [("tcp", tcp), ("udp", udp), ("tcp6", tcp6), ("udp6", udp6), ("tfo", tfo), ("packet", raw)]:
    t(n, f)
"#;

struct Listeners {
    tcp: TcpListener,
    udp: UdpSocket,
    tcp6: TcpListener,
    udp6: UdpSocket,
}

impl Listeners {
    fn new() -> Listeners {
        let l = Listeners {
            tcp: TcpListener::bind("127.0.0.1:0").unwrap(),
            udp: UdpSocket::bind("127.0.0.1:0").unwrap(),
            tcp6: TcpListener::bind("[::1]:0").unwrap(),
            udp6: UdpSocket::bind("[::1]:0").unwrap(),
        };
        for s in [&l.tcp, &l.tcp6] {
            s.set_nonblocking(true).unwrap();
        }
        for s in [&l.udp, &l.udp6] {
            s.set_nonblocking(true).unwrap();
        }
        l
    }
    fn args(&self) -> String {
        format!(
            "{} {} {} {}",
            self.tcp.local_addr().unwrap().port(),
            self.udp.local_addr().unwrap().port(),
            self.tcp6.local_addr().unwrap().port(),
            self.udp6.local_addr().unwrap().port()
        )
    }
    /// Everything the listeners received (connections drained, datagrams read).
    /// Call it once the run has exited: loopback delivers as it sends, so whatever
    /// the sandbox sent is in these sockets' queues by then.
    fn received(&self) -> Vec<String> {
        let mut got = vec![];
        for l in [&self.tcp, &self.tcp6] {
            while let Ok((mut c, _)) = l.accept() {
                c.set_nonblocking(false).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut s = String::new();
                let _ = c.read_to_string(&mut s);
                got.push(format!("conn:{s}"));
            }
        }
        for u in [&self.udp, &self.udp6] {
            let mut b = [0u8; 100];
            while let Ok(n) = u.recv(&mut b) {
                got.push(format!("dgram:{}", String::from_utf8_lossy(&b[..n])));
            }
        }
        got
    }
}

fn probe_home() -> TestHome {
    let h = TestHome::new();
    h.write(&h.workspace().join("net.py"), NET_PY);
    h
}

#[test]
fn direct_tcp_udp_ipv6_and_fast_open_reach_nothing_outside() {
    // Control: without sandpit the probe reaches every listener.
    let l = Listeners::new();
    let c = probe_home();
    let t = text(&bare(&c, &format!("python3 net.py {}", l.args())));
    assert!(
        t.contains("tcp:ok") && t.contains("udp:ok") && t.contains("tcp6:ok"),
        "bare: {t}"
    );
    // Until every leak has landed (`received` takes what arrived so far).
    let leaks = ["LEAK-TCP", "LEAK-UDP", "LEAK-TCP6", "LEAK-UDP6"];
    let mut got = vec![];
    common::wait_for(5, || {
        got.extend(l.received());
        leaks
            .iter()
            .all(|leak| got.iter().any(|g| g.ends_with(&format!(":{leak}"))))
    });
    got.extend(l.received());
    for leak in leaks {
        assert!(
            got.iter().any(|g| g.ends_with(&format!(":{leak}"))),
            "bare {leak}: {got:?}"
        );
    }
    // Fast Open reaches the listener too (a third connection; the payload may only
    // follow the handshake after the client has gone).
    if !common::machine_lacks("tcp_fastopen") {
        assert_eq!(
            got.iter().filter(|g| g.starts_with("conn:")).count(),
            3,
            "bare TFO: {got:?}"
        );
    }

    let l = Listeners::new();
    let h = probe_home();
    let out = sandboxed(&h, &format!("python3 net.py {}", l.args()));
    let t = text(&out);
    assert!(t.contains("tcp:Connection refused"), "{t}");
    assert!(
        !t.contains("tcp6:ok") && !t.contains("tfo:ok") && !t.contains("packet:ok"),
        "{t}"
    );
    assert!(t.contains("packet:Operation not permitted"), "{t}");
    let got = l.received();
    assert!(got.is_empty(), "listeners outside received: {got:?} ({t})");
}

/// A recording echo server on a unix socket: the stand-in for sandpit's proxy.
fn echo_server(path: &Path) -> std::thread::JoinHandle<Vec<String>> {
    let l = UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::thread::spawn(move || {
        let mut seen = vec![];
        if let Ok((mut c, _)) = l.accept() {
            let mut buf = [0u8; 64];
            let n = c.read(&mut buf).unwrap_or(0);
            let line = String::from_utf8_lossy(&buf[..n]).trim().to_string();
            let _ = c.write_all(format!("ECHO:{line}\n").as_bytes());
            seen.push(line);
        }
        seen
    })
}

const BRIDGE_PY: &str = r#"
import os, socket, sys
port, outside = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"PING-THROUGH-BRIDGE\n")
print("reply:" + s.recv(100).decode().strip())
print("proxy-env:" + os.environ.get("HTTPS_PROXY", ""))
try:
    socket.create_connection(("127.0.0.1", outside), timeout=3); print("outside:ok")
except OSError as e:
    print("outside:" + e.strerror)
"#;

#[test]
fn the_bridge_relays_to_the_proxy_socket_and_nothing_else() {
    let h = TestHome::new();
    h.write(&h.workspace().join("b.py"), BRIDGE_PY);
    let sock = h.dir.path().join("proxy.sock");
    let server = echo_server(&sock);
    let outside = TcpListener::bind("127.0.0.1:0").unwrap();
    outside.set_nonblocking(true).unwrap();
    let port = outside.local_addr().unwrap().port();
    let out = sandpit_cmd(
        &h,
        &[
            "--proxy-socket",
            sock.to_str().unwrap(),
            "--proxy-port",
            "3128",
        ],
        &format!("python3 b.py 3128 {port}"),
    )
    .output()
    .unwrap();
    let t = text(&out);
    assert!(t.contains("reply:ECHO:PING-THROUGH-BRIDGE"), "{t}");
    assert_eq!(
        server.join().unwrap(),
        vec!["PING-THROUGH-BRIDGE".to_string()]
    );
    assert!(t.contains("proxy-env:http://127.0.0.1:3128"), "{t}");
    assert!(t.contains("outside:Connection refused"), "{t}");
    assert!(outside.accept().is_err(), "direct connection got through");
    assert!(t.contains("network: proxy only"), "{t}");
}

#[test]
fn fallback_mode_limits_tcp_to_the_proxy_port_and_refuses_udp_and_fast_open() {
    let l = Listeners::new();
    let h = probe_home();
    h.write(&h.workspace().join("b.py"), BRIDGE_PY);
    let sock = h.dir.path().join("proxy.sock");
    let server = echo_server(&sock);
    let bridge_port = free_port().to_string();
    let out = sandpit_cmd(
        &h,
        &[
            "--allow-degraded",
            "--proxy-socket",
            sock.to_str().unwrap(),
            "--proxy-port",
            &bridge_port,
        ],
        &format!(
            "python3 net.py {}; python3 b.py {bridge_port} {}; \
             python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 0)); print(\"bind:ok\")'",
            l.args(),
            l.tcp.local_addr().unwrap().port()
        ),
    )
    .env("SANDPIT_FORCE_FALLBACK", "1")
    .output()
    .unwrap();
    let t = text(&out);
    assert!(t.contains("DEGRADED"), "{t}");
    for p in ["tcp", "tcp6", "tfo"] {
        assert!(
            t.contains(&format!("{p}:Permission denied"))
                || t.contains(&format!("{p}:Operation not permitted")),
            "{p}: {t}"
        );
    }
    assert!(
        t.contains("udp:Operation not permitted") && t.contains("udp6:Operation not permitted"),
        "{t}"
    );
    assert!(
        t.contains("reply:ECHO:PING-THROUGH-BRIDGE"),
        "positive control: {t}"
    );
    assert_eq!(
        server.join().unwrap(),
        vec!["PING-THROUGH-BRIDGE".to_string()]
    );
    let got = l.received();
    assert!(got.is_empty(), "listeners received: {got:?} ({t})");
}

const MPTCP_PY: &str = r#"
import socket, sys
p, p6 = map(int, sys.argv[1:3])
def t(name, f):
    try:
        f(); print(name + ":ok")
    except OSError as e:
        print(name + ":" + (e.strerror or type(e).__name__))
def mptcp(fam, host, port, tag):
    s = socket.socket(fam, socket.SOCK_STREAM, 262)  # IPPROTO_MPTCP
    s.settimeout(3); s.connect((host, port)); s.sendall(tag); s.close()
t("mptcp", lambda: mptcp(socket.AF_INET, "127.0.0.1", p, b"LEAK-MPTCP"))
t("mptcp6", lambda: mptcp(socket.AF_INET6, "::1", p6, b"LEAK-MPTCP6"))
t("tcp-proto", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP).close())
"#;

/// Landlock's TCP rules cover IPPROTO_TCP sockets only: an MPTCP (or SCTP) stream
/// socket would connect anywhere in fallback mode, so seccomp refuses inet stream
/// sockets of any protocol but TCP.
#[test]
fn fallback_mode_refuses_mptcp() {
    let h = probe_home();
    h.write(&h.workspace().join("m.py"), MPTCP_PY);
    let ports = |l: &Listeners| {
        format!(
            "{} {}",
            l.tcp.local_addr().unwrap().port(),
            l.tcp6.local_addr().unwrap().port()
        )
    };
    // Control: without sandpit the probe's MPTCP connects reach both listeners.
    let l = Listeners::new();
    let bare_out = text(&bare(&h, &format!("python3 m.py {}", ports(&l))));
    let got = l.received();
    if !common::machine_lacks("mptcp") {
        assert!(
            bare_out.contains("mptcp:ok") && bare_out.contains("mptcp6:ok"),
            "bare (net.mptcp.enabled must be 1, or SANDPIT_MACHINE_LACKS=mptcp): {bare_out}"
        );
        for leak in ["LEAK-MPTCP", "LEAK-MPTCP6"] {
            assert!(got.contains(&format!("conn:{leak}")), "bare: {got:?}");
        }
    }

    let l = Listeners::new();
    let out = sandpit_cmd(
        &h,
        &["--allow-degraded"],
        &format!("python3 m.py {}", ports(&l)),
    )
    .env("SANDPIT_FORCE_FALLBACK", "1")
    .output()
    .unwrap();
    let t = text(&out);
    assert!(t.contains("DEGRADED"), "{t}");
    for p in ["mptcp", "mptcp6"] {
        assert!(
            t.contains(&format!("{p}:Operation not permitted")),
            "{p}: {t}"
        );
    }
    assert!(
        t.contains("tcp-proto:ok"),
        "plain TCP sockets still open: {t}"
    );
    let got = l.received();
    assert!(got.is_empty(), "listeners received: {got:?} ({t})");
}

/// Fallback mode's bridge is a port of this machine: each run takes a free one, so
/// runs at once (or a local squid on 3128) do not collide.
#[test]
fn fallback_runs_at_once_each_get_their_own_bridge_port() {
    let h = probe_home();
    let held = TcpListener::bind("127.0.0.1:3128").ok(); // taken, if we can
    let spawn = || {
        sandpit_cmd(
            &h,
            &["--allow-degraded"],
            "echo \"port=${HTTP_PROXY##*:}\"; sleep 1",
        )
        .env("SANDPIT_FORCE_FALLBACK", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let (ta, tb) = (text(&a), text(&b));
    assert!(a.status.success() && b.status.success(), "{ta}\n{tb}");
    let port = |t: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix("port="))
            .unwrap_or_else(|| panic!("no port in {t}"))
            .to_string()
    };
    assert_ne!(port(&ta), port(&tb), "{ta}\n{tb}");
    if held.is_some() {
        assert_ne!(port(&ta), "3128", "{ta}");
    }
}

const CONNECT_PY: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); s.sendall(b"RUN-THIS"); print("daemon:ok")
except OSError as e:
    print("daemon:" + e.strerror)
"#;

/// Host daemons run code on request outside the sandbox through sockets under /run:
/// the user's session bus and systemd user manager (/run/user/UID), a screen session
/// (`screen -X stuff` types into the user's shell), the system bus, container engines.
/// All of /run is masked, since a read-only mount does not stop `connect()`.
#[test]
fn host_daemon_sockets_under_run_are_unreachable() {
    use std::os::unix::fs::chown;
    let uid = if common::is_root() {
        common::TEST_UID
    } else {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    };
    let pid = std::process::id();
    let mut dirs = vec![std::path::PathBuf::from(format!("/run/user/{uid}"))];
    if common::is_root() {
        dirs.push(format!("/run/screen/S-sandpit-test-{pid}").into());
        dirs.push(format!("/run/sandpit-test-daemon-{pid}").into());
    }
    let h = TestHome::new();
    h.write(&h.workspace().join("c.py"), CONNECT_PY);
    for runtime in dirs {
        let created = !runtime.exists();
        std::fs::create_dir_all(&runtime).unwrap();
        if common::is_root() {
            chown(&runtime, Some(common::TEST_UID), Some(common::TEST_GID)).unwrap();
        }
        let sock = runtime.join(format!("sandpit-test-bus-{pid}"));
        let _ = std::fs::remove_file(&sock);
        let l = UnixListener::bind(&sock).unwrap();
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
        l.set_nonblocking(true).unwrap();
        let script = format!("python3 c.py {}", sock.display());
        let bare_out = text(&bare(&h, &script));
        let bare_conn = l.accept().is_ok();
        let t = text(&sandboxed(&h, &script));
        let sandbox_conn = l.accept().is_ok();
        let _ = std::fs::remove_file(&sock);
        if created {
            let _ = std::fs::remove_dir(&runtime);
        }
        assert!(
            bare_out.contains("daemon:ok") && bare_conn,
            "bare, {runtime:?}: {bare_out}"
        );
        assert!(
            !t.contains("daemon:ok") && !sandbox_conn,
            "{runtime:?}: {t}"
        );
    }
    // Positive control: programs kept under /run (NixOS's system profile, setuid
    // wrappers) stay runnable from PATH.
    if common::is_root() {
        let bin = std::path::PathBuf::from(format!("/run/sandpit-test-bin-{pid}"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("hello-from-run"), "#!/bin/sh\necho RUN-BIN-OK\n").unwrap();
        std::fs::set_permissions(
            bin.join("hello-from-run"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let o = sandpit_cmd(&h, &[], "hello-from-run")
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&bin);
        assert!(text(&o).contains("RUN-BIN-OK"), "{}", text(&o));
    }
}

/// Daemons in the user's home that hand out secrets to whoever connects: git's
/// credential cache (`git credential-cache get` prints the cached password) and the
/// SSH agent `SSH_AUTH_SOCK` names (the variable is withheld, the path is not secret).
#[test]
fn credential_daemons_in_home_are_unreachable() {
    let h = TestHome::new();
    let store = "printf 'protocol=https\\nhost=example.test\\nusername=u\\npassword=CACHED-PW-CANARY\\n\\n' \
                 | git credential-cache --timeout=60 store";
    let get = "printf 'protocol=https\\nhost=example.test\\n\\n' | git credential-cache get";
    let o = bare(&h, store);
    assert!(o.status.success(), "{}", text(&o));
    let bare_get = text(&bare(&h, get));
    let t = text(&sandboxed(&h, get));
    let _ = bare(&h, "git credential-cache exit");
    assert!(bare_get.contains("CACHED-PW-CANARY"), "bare: {bare_get}");
    assert!(!t.contains("CACHED-PW-CANARY"), "{t}");

    // Sockets where the user's environment puts them: (variable, its value, the
    // socket). A TMUX_TMPDIR of home itself masks only tmux's own directory there.
    let home = h.home();
    let uid = if common::is_root() {
        common::TEST_UID
    } else {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    };
    h.write(&h.workspace().join("c.py"), CONNECT_PY);
    h.write(&home.join("visible.txt"), "HOME-VISIBLE");
    for (var, value, sock) in [
        (
            "SSH_AUTH_SOCK",
            home.join(".agent-sock"),
            home.join(".agent-sock"),
        ),
        (
            "SCREENDIR",
            home.join(".myscreen"),
            home.join(".myscreen/123.victim"),
        ),
        (
            "TMUX_TMPDIR",
            home.clone(),
            home.join(format!("tmux-{uid}/default")),
        ),
        (
            "XDG_CACHE_HOME",
            home.join(".xdgcache"),
            home.join(".xdgcache/git/credential/socket"),
        ),
    ] {
        std::fs::create_dir_all(sock.parent().unwrap()).unwrap();
        h.give_to_test_user(sock.parent().unwrap());
        let l = UnixListener::bind(&sock).unwrap();
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
        l.set_nonblocking(true).unwrap();
        let script = format!("cat $HOME/visible.txt; python3 c.py {}", sock.display());
        let bare_out = text(&bare(&h, &script));
        let bare_conn = l.accept().is_ok();
        let t = text(
            &sandpit_cmd(&h, &[], &script)
                .env(var, &value)
                .output()
                .unwrap(),
        );
        let sandbox_conn = l.accept().is_ok();
        assert!(
            bare_out.contains("daemon:ok") && bare_conn,
            "bare {var}: {bare_out}"
        );
        assert!(!t.contains("daemon:ok") && !sandbox_conn, "{var}: {t}");
        assert!(
            t.contains("HOME-VISIBLE"),
            "{var}: home stays readable: {t}"
        );
    }
}

const DNS_PY: &str = r#"
import socket
print("resolv:" + open("/etc/resolv.conf").read().replace("\n", "|"))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
s.sendto(b"QUERY-example.test", ("127.0.0.1", 53))
print("answer:" + s.recv(100).decode())
"#;

/// A stand-in for sandpit's DNS responder at `dns.sock` (and a proxy socket nothing
/// answers on), for `--proxy-socket`/`--dns-socket`: it answers each datagram that
/// starts with `QUERY` with `ANSWER-FOR-<datagram>` and ignores the others;
/// `received` stops it and returns what it was sent.
struct FakeDns {
    proxy: std::path::PathBuf,
    dns: std::path::PathBuf,
    _keep: UnixListener,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    server: std::thread::JoinHandle<Vec<String>>,
}

impl FakeDns {
    fn start(h: &TestHome) -> FakeDns {
        use std::os::unix::net::UnixDatagram;
        use std::sync::atomic::Ordering;
        let proxy = h.dir.path().join("proxy.sock");
        let keep = UnixListener::bind(&proxy).unwrap();
        let dns = h.dir.path().join("dns.sock");
        let responder = UnixDatagram::bind(&dns).unwrap();
        std::fs::set_permissions(&dns, std::fs::Permissions::from_mode(0o777)).unwrap();
        responder
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = done.clone();
        let server = std::thread::spawn(move || {
            let mut seen = vec![];
            let mut b = [0u8; 100];
            loop {
                let Ok((n, from)) = responder.recv_from(&mut b) else {
                    if stop.load(Ordering::Acquire) {
                        return seen;
                    }
                    continue;
                };
                let q = String::from_utf8_lossy(&b[..n]).into_owned();
                if q.starts_with("QUERY") {
                    let _ = responder.send_to_addr(format!("ANSWER-FOR-{q}").as_bytes(), &from);
                }
                seen.push(q);
            }
        });
        FakeDns {
            proxy,
            dns,
            _keep: keep,
            done,
            server,
        }
    }
    fn command(&self, h: &TestHome, script: &str) -> std::process::Command {
        sandpit_cmd(
            h,
            &[
                "--proxy-socket",
                self.proxy.to_str().unwrap(),
                "--dns-socket",
                self.dns.to_str().unwrap(),
            ],
            script,
        )
    }
    fn received(self) -> Vec<String> {
        self.done.store(true, std::sync::atomic::Ordering::Release);
        self.server.join().unwrap()
    }
}

#[test]
fn dns_queries_go_only_to_sandpits_responder() {
    let h = TestHome::new();
    h.write(&h.workspace().join("d.py"), DNS_PY);
    let dns = FakeDns::start(&h);
    let out = dns.command(&h, "python3 d.py").output().unwrap();
    let t = text(&out);
    assert_eq!(dns.received(), vec!["QUERY-example.test".to_string()]);
    assert!(t.contains("answer:ANSWER-FOR-QUERY-example.test"), "{t}");
    assert!(
        t.contains("resolv:# written by sandpit|nameserver 127.0.0.1|"),
        "{t}"
    );
}

const DNS_FLOOD_PY: &str = r#"
import socket, sys, time
print("ready", flush=True)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for burst in range(40):
    for i in range(100):
        s.sendto(b"FLOOD-%d-%d" % (burst, i), ("127.0.0.1", 53))
    time.sleep(0.005)
print("flooded", flush=True)
# A client retries: the flood's relays hold their slots until the responder's
# silence times them out.
s.settimeout(1)
for attempt in range(15):
    s.sendto(b"QUERY-after-flood", ("127.0.0.1", 53))
    try:
        print("answer:" + s.recv(100).decode(), flush=True); break
    except socket.timeout:
        pass
"#;

/// The launcher relays each DNS datagram in a thread of its own that waits for the
/// responder: a flood must not grow those threads past the bound (64 relays in
/// flight; a datagram beyond them is dropped), and a query after it is answered.
#[test]
fn a_dns_flood_does_not_grow_the_launchers_threads_past_the_bound() {
    let h = TestHome::new();
    h.write(&h.workspace().join("f.py"), DNS_FLOOD_PY);
    // Silent to the flood: each relayed datagram holds its relay for the whole wait.
    let dns = FakeDns::start(&h);
    let (child, mut lines) = common::spawn_ready(
        dns.command(&h, "python3 f.py"),
        std::process::Stdio::piped(),
    );
    let tasks = format!("/proc/{}/task", child.id());
    let sampler = std::thread::spawn(move || {
        let mut most = 0;
        while let Ok(d) = std::fs::read_dir(&tasks) {
            most = most.max(d.count());
            // The sampling interval: counts threads while the run lasts.
            std::thread::sleep(Duration::from_millis(5));
        }
        most
    });
    let rest: Vec<String> = lines.by_ref().map_while(Result::ok).collect();
    let out = child.wait_with_output().unwrap();
    let most = sampler.join().unwrap();
    let t = format!("{}\n{}", rest.join("\n"), text(&out));
    let seen = dns.received();
    let floods = seen.iter().filter(|q| q.starts_with("FLOOD")).count();
    assert!(rest.iter().any(|l| l == "flooded"), "{t}");
    assert!(
        floods >= 64,
        "the flood reached the responder {floods} times: {t}"
    );
    // The launcher's own threads (bridge, DNS relay loop, terminal, signals) are
    // fewer than 20; unbounded, the flood made thousands.
    assert!(
        most <= 64 + 20,
        "launcher threads: {most} at most during the flood ({floods} relayed)"
    );
    assert!(
        rest.iter()
            .any(|l| l == "answer:ANSWER-FOR-QUERY-after-flood"),
        "a query after the flood: {t}"
    );
}

const DNS_ASK_PY: &str = r#"
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in sys.argv[2].split(".")) + b"\0"
q += struct.pack(">HH", 1, 1)
if sys.argv[1] == "udp":
    s, to = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), ("127.0.0.1", 53)
else:
    s, to = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM), sys.argv[1]
    s.bind("")  # an abstract address of its own, for the reply
s.settimeout(3)
try:
    s.sendto(q, to); print("sent:ok", flush=True)
except OSError as e:
    print("sent:" + e.strerror, flush=True)
try:
    r = s.recv(512); print("answer:" + ".".join(str(b) for b in r[-4:]), flush=True)
except OSError as e:
    print("answer:none", flush=True)
"#;

/// A run's DNS responder answers its own bridge alone: in degraded mode another run's
/// sandbox can reach the socket's path, and a looser run's resolver would carry a
/// strict run's data out in query names.
#[test]
fn another_runs_sandbox_gets_nothing_from_a_runs_dns_socket() {
    let config = "[network]\nallow = [\"allowed.test\"]\n[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n";
    // Run A (namespaces, sandpit's own responder) resolves through its bridge: the
    // positive control, and the socket exists while it waits.
    let a = TestHome::new();
    a.write(&a.workspace().join("q.py"), DNS_ASK_PY);
    a.user_config(config);
    let (child, mut lines) = common::spawn_ready(
        sandpit_cmd(
            &a,
            &[],
            "echo ready; python3 q.py udp allowed.test; while [ ! -e stop ]; do sleep 0.05; done",
        ),
        std::process::Stdio::piped(),
    );
    let own: Vec<String> = lines.by_ref().take(2).map(|l| l.unwrap()).collect();
    let uid = if common::is_root() {
        common::TEST_UID
    } else {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    };
    let root = std::path::PathBuf::from(format!("/tmp/sandpit-{uid}"));
    let prefix = format!("run-{}-", child.id());
    let net = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with(&prefix) && n.ends_with(".net"))
        .unwrap_or_else(|| panic!("no {prefix}*.net in {}", root.display()));
    let sock = root.join(net).join("dns.sock");

    // Run B, degraded (the host's /tmp is its /tmp), asks A's responder directly.
    let b = TestHome::new();
    b.write(&b.workspace().join("q.py"), DNS_ASK_PY);
    let out = sandpit_cmd(
        &b,
        &["--allow-degraded"],
        &format!("python3 q.py {} allowed.test", sock.display()),
    )
    .env("SANDPIT_FORCE_FALLBACK", "1")
    .output()
    .unwrap();
    let t = text(&out);
    a.write(&a.workspace().join("stop"), "");
    let a_out = child.wait_with_output().unwrap();
    assert!(
        own == ["sent:ok", "answer:127.0.0.2"],
        "run A resolves through its bridge: {own:?} {}",
        text(&a_out)
    );
    assert!(t.contains("DEGRADED"), "{t}");
    assert!(t.contains("sent:ok"), "B's query reached A's socket: {t}");
    assert!(t.contains("answer:none"), "A's responder answered B: {t}");
}

/// A socket another user bound in a directory only that user may enter is out of
/// reach of a launcher run as root, inside its user namespace, as it is of the
/// command: the run leaves it unmasked instead of failing to start (before, any
/// local user could stop every namespace run of root's that way). The command still
/// cannot reach it; bare, root can (the listener is real).
#[test]
fn another_users_private_socket_stops_no_run_of_roots() {
    use std::os::unix::fs::{chown, DirBuilderExt};
    use std::process::{Command, Stdio};
    assert!(
        common::is_root(),
        "the test binds a socket as another user and runs sandpit as root"
    );
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = base.path().join("private");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .unwrap();
    chown(&private, Some(common::TEST_UID), Some(common::TEST_GID)).unwrap();
    let sock = private.join("s.sock");
    let connect = format!(
        "import socket; c = socket.socket(socket.AF_UNIX); c.connect({:?}); print('connected')",
        sock.display().to_string()
    );
    let mut l = Command::new("python3");
    l.args(["-c", "import socket, sys, time\ns = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1]); s.listen()\nprint('ready', flush=True)\ntime.sleep(60)"])
        .arg(&sock)
        .uid(common::TEST_UID)
        .gid(common::TEST_GID);
    use std::os::unix::process::CommandExt;
    let (mut listener, _) = common::spawn_ready(l, Stdio::inherit());
    // Root's own home and workspace: the launcher wants its state directory its own.
    let root_home = base.path().join("root");
    std::fs::create_dir_all(root_home.join("work")).unwrap();
    let bare = Command::new("python3")
        .args(["-c", &connect])
        .output()
        .unwrap();
    let o = Command::new(common::sandpit_bin())
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "echo ran; python3 -c \"{}\" || echo refused",
            connect.replace('"', "\\\"")
        ))
        .env_clear()
        .env("HOME", &root_home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir(root_home.join("work"))
        .output()
        .unwrap();
    let _ = listener.kill();
    let _ = listener.wait();
    let t = common::text(&o);
    assert!(
        String::from_utf8_lossy(&bare.stdout).contains("connected"),
        "bare: {}",
        common::text(&bare)
    );
    assert!(
        o.status.success() && t.contains("ran"),
        "the run did not start: {t}"
    );
    assert!(
        t.contains("refused") && !t.contains("connected"),
        "reached: {t}"
    );
}
