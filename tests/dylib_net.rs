//! The interposer's network hooks against loopback listeners: TCP connects land on
//! (a stand-in for) sandpit's proxy with the original destination handed over,
//! never on the original listener; UDP reaches only the DNS responder; TCP Fast
//! Open is refused; offline mode refuses outright.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod dylib_common;

use dylib_common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A stand-in for the proxy: reads the transparent handshake line each redirected
/// connection starts with (the proxy's `SANDPIT/1 <token> <orig> <name>` format),
/// then answers with an HTTP response saying where the connection landed.
struct FakeProxy {
    addr: std::net::SocketAddr,
    handovers: Arc<Mutex<Vec<String>>>,
}

impl FakeProxy {
    fn start() -> FakeProxy {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        let handovers = Arc::new(Mutex::new(Vec::new()));
        let hs = handovers.clone();
        std::thread::spawn(move || {
            for s in tcp.incoming() {
                let Ok(mut s) = s else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                let _ = r.read_line(&mut line);
                hs.lock().unwrap().push(line.trim_end().to_string());
                // The client's own first bytes follow the line.
                let mut buf = [0u8; 1024];
                let _ = r.read(&mut buf);
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nvia-proxy\n",
                );
            }
        });
        FakeProxy { addr, handovers }
    }

    fn wire(&self, p: &mut Pit) {
        p.ends.proxy = Some(self.addr);
        p.ends.proxy_token = Some("run-token-42".into());
    }

    fn lines(&self) -> Vec<String> {
        self.handovers.lock().unwrap().clone()
    }
}

/// A listener that must never see a connection.
fn untouched() -> TcpListener {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

fn assert_nothing_reached(l: &TcpListener) {
    match l.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the original destination was reached: {other:?}"),
    }
}

#[test]
fn tcp_connects_are_redirected_to_the_proxy_with_the_original_destination() {
    let mut p = Pit::new("");
    let proxy = FakeProxy::start();
    proxy.wire(&mut p);
    let orig = untouched();
    let port = orig.local_addr().unwrap().port().to_string();
    // Bare: the probe reaches the original listener (shows the probe works).
    {
        let bare_target = TcpListener::bind("127.0.0.1:0").unwrap();
        let bp = bare_target.local_addr().unwrap().port().to_string();
        let t = std::thread::spawn(move || {
            let (mut s, _) = bare_target.accept().unwrap();
            let _ = s.write_all(b"direct\n");
        });
        let o = probe_bare(&p, &["connect", "127.0.0.1", &bp]);
        t.join().unwrap();
        assert!(o.stdout.contains("direct"), "{}", o.all());
    }
    for op in ["connect", "connect-nb"] {
        let o = probe_in(&p, &[op, "127.0.0.1", &port]);
        assert!(o.stdout.contains("via-proxy"), "{op}: {}", o.all());
    }
    // A second connect() on the redirected socket gets the kernel's EISCONN.
    let o = probe_in(&p, &["connect-again", "127.0.0.1", &port]);
    assert_eq!(errno_of(&o), Some(libc::EISCONN), "{}", o.all());
    assert!(!o.stderr.contains("blocked"), "{}", o.stderr);
    // IPv6 socket to an IPv6 destination: still the (IPv4) proxy.
    let o = probe_in(&p, &["connect", "::1", &port]);
    assert!(o.stdout.contains("via-proxy"), "v6: {}", o.all());
    // curl with no proxy settings at all.
    let o = run(p.cmd("curl").args([
        "-sS",
        "--noproxy",
        "*",
        &format!("http://127.0.0.1:{port}/"),
    ]));
    assert!(o.stdout.contains("via-proxy"), "curl: {}", o.all());
    // python resolving a name first: the handover carries the name.
    let py = format!(
        "import socket\nai = socket.getaddrinfo('localhost', {port}, socket.AF_INET, socket.SOCK_STREAM)[0]\n\
         s = socket.socket(ai[0], ai[1]); s.connect(ai[4]); s.sendall(b'x'); print(s.recv(100))"
    );
    let o = run(p.cmd("python3").args(["-c", &py]));
    assert!(o.stdout.contains("via-proxy"), "python: {}", o.all());
    assert_nothing_reached(&orig);
    let lines = proxy.lines();
    assert!(lines.len() >= 5, "{lines:?}");
    for l in &lines {
        assert!(l.starts_with("SANDPIT/1 run-token-42 "), "{l}");
        assert!(
            l.contains(&format!(" 127.0.0.1:{port} ")) || l.contains(&format!(" [::1]:{port} ")),
            "{l}"
        );
    }
    assert!(lines.iter().any(|l| l.ends_with(" localhost")), "{lines:?}");
    assert!(lines.iter().any(|l| l.ends_with(" -")), "{lines:?}");
}

#[test]
fn without_a_reachable_proxy_connects_fail_closed() {
    let p = Pit::new("");
    let orig = untouched();
    let port = orig.local_addr().unwrap().port().to_string();
    let o = probe_in(&p, &["connect", "127.0.0.1", &port]);
    assert_eq!(errno_of(&o), Some(libc::ECONNREFUSED), "{}", o.all());
    assert!(o.stderr.contains("proxy"), "{}", o.stderr);
    assert_nothing_reached(&orig);
    // A configured proxy that is not listening: refused, not connected directly.
    let mut p = p;
    let gone = TcpListener::bind("127.0.0.1:0").unwrap();
    p.ends.proxy = Some(gone.local_addr().unwrap());
    drop(gone);
    let o = probe_in(&p, &["connect-nb", "127.0.0.1", &port]);
    assert_eq!(errno_of(&o), Some(libc::ECONNREFUSED), "{}", o.all());
    assert_nothing_reached(&orig);
}

#[test]
fn offline_mode_refuses_and_unrestricted_still_goes_through_the_proxy() {
    let p = Pit::new("[network]\nmode = \"offline\"\n");
    let orig = untouched();
    let port = orig.local_addr().unwrap().port().to_string();
    let o = probe_in(&p, &["connect", "127.0.0.1", &port]);
    assert_eq!(errno_of(&o), Some(libc::ECONNREFUSED), "{}", o.all());
    assert!(o.stderr.contains("offline"), "{}", o.stderr);
    let o = run(p.cmd("curl").args([
        "-sS",
        "--noproxy",
        "*",
        &format!("http://127.0.0.1:{port}/"),
    ]));
    assert_ne!(o.code, Some(0), "{}", o.all());
    assert_nothing_reached(&orig);

    // Unrestricted lifts host filtering in the proxy, and in the hooks opens UDP to
    // public addresses only: a TCP connect still lands on the proxy (which keeps
    // loopback and other non-public addresses closed), never on the destination;
    // UDP to loopback and listening stay refused (tests/modes.rs: UDP to public
    // addresses, through the kernel layer's relay).
    let mut p = Pit::new("[network]\nmode = \"unrestricted\"\n");
    let proxy = FakeProxy::start();
    proxy.wire(&mut p);
    for op in ["connect", "connect-nb"] {
        let o = probe_in(&p, &[op, "127.0.0.1", &port]);
        assert!(o.stdout.contains("via-proxy"), "{op}: {}", o.all());
    }
    assert_nothing_reached(&orig);
    assert!(
        proxy
            .lines()
            .iter()
            .all(|l| l.contains(&format!(" 127.0.0.1:{port} "))),
        "{:?}",
        proxy.lines()
    );
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    let o = probe_in(
        &p,
        &[
            "udp",
            "127.0.0.1",
            &other.local_addr().unwrap().port().to_string(),
        ],
    );
    assert_eq!(errno_of(&o), Some(libc::EPERM), "{}", o.all());
    // A grace, not a wait: what must not happen has no event to wait for.
    std::thread::sleep(Duration::from_millis(50));
    assert!(other.recv(&mut [0u8; 64]).is_err(), "a datagram arrived");
}

#[test]
fn udp_only_reaches_the_dns_responder_and_fast_open_is_refused() {
    let mut p = Pit::new("");
    let dns = UdpSocket::bind("127.0.0.1:0").unwrap();
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    dns.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    p.ends.dns = Some(dns.local_addr().unwrap());
    let dport = dns.local_addr().unwrap().port().to_string();
    let oport = other.local_addr().unwrap().port().to_string();
    // Bare: the probe's datagram does arrive.
    let o = probe_bare(&p, &["udp", "127.0.0.1", &oport]);
    assert!(o.stdout.starts_with("ok"), "{}", o.all());
    let mut buf = [0u8; 64];
    assert!(
        common::wait_for(5, || other.recv(&mut buf).is_ok()),
        "bare datagram must arrive"
    );

    for op in ["udp", "udp-connect"] {
        let o = probe_in(&p, &[op, "127.0.0.1", &oport]);
        assert_eq!(errno_of(&o), Some(libc::EPERM), "{op}: {}", o.all());
    }
    let o = run(p.cmd("python3").args([
        "-c",
        &format!("import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {oport}))"),
    ]));
    assert_ne!(o.code, Some(0), "{}", o.all());
    // A grace, not a wait: what must not happen has no event to wait for.
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        other.recv(&mut buf).is_err(),
        "a datagram reached the non-DNS listener"
    );

    // Positive control: the DNS responder is reachable.
    let o = probe_in(&p, &["udp", "127.0.0.1", &dport]);
    assert!(o.stdout.starts_with("ok"), "{}", o.all());
    let n = dns.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"dgram");

    let orig = untouched();
    let port = orig.local_addr().unwrap().port().to_string();
    let o = probe_in(&p, &["tfo", "127.0.0.1", &port]);
    assert_eq!(errno_of(&o), Some(libc::EPERM), "{}", o.all());
    assert!(o.stderr.contains("Fast Open"), "{}", o.stderr);
    assert_nothing_reached(&orig);
}
