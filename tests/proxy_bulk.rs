#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Bulk transfers: a large HTTP response inside a checked plain-HTTP tunnel (the
//! requests stay checked after it), carried by the relay as its buffer grows from
//! 32 KiB to megabytes, and the launcher's bridge relay inside `sandpit run`. Every
//! byte must arrive unchanged.
mod common;
mod kernel_support;
mod proxy_support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::sync::{Arc, Mutex};

use common::TestHome;
use proxy_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BODY: usize = 3 * 1024 * 1024 + 77;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// An HTTP server on 127.0.0.2 (allowed.test) answering every request head with
/// [`BODY`] patterned bytes, recording everything it receives.
async fn big_server() -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
    let l = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let rec = rec.clone();
            tokio::spawn(async move {
                let mut pending = Vec::new();
                let mut b = [0u8; 4096];
                loop {
                    let Ok(n) = s.read(&mut b).await else { return };
                    if n == 0 {
                        return;
                    }
                    rec.lock().unwrap().extend_from_slice(&b[..n]);
                    pending.extend_from_slice(&b[..n]);
                    while let Some(end) = find(&pending, b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n");
                        if s.write_all(head.as_bytes()).await.is_err()
                            || s.write_all(&pattern(BODY)).await.is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// Read one response head and its [`BODY`]-byte body.
async fn read_response(s: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut b = vec![0u8; 64 * 1024];
    let start = loop {
        if let Some(end) = find(&got, b"\r\n\r\n") {
            break end + 4;
        }
        let n = s.read(&mut b).await.unwrap();
        assert!(n > 0, "closed before the response head");
        got.extend_from_slice(&b[..n]);
    };
    while got.len() < start + BODY {
        let n = s.read(&mut b).await.unwrap();
        assert!(n > 0, "closed after {} body bytes", got.len() - start);
        got.extend_from_slice(&b[..n]);
    }
    got.split_off(start)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_http_response_in_a_tunnel_is_intact_and_requests_stay_checked() {
    let w = World::new().await;
    let (server, seen) = big_server().await;
    for way in [Way::Connect, Way::Transparent] {
        let mut s = tunnel(&w, way, server.port()).await;
        // Two large responses on one connection (the second through the grown
        // buffer), each byte as sent: the positive control.
        for i in 0..2 {
            let req = format!("GET /{way:?}{i} HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
            s.write_all(req.as_bytes()).await.unwrap();
            let body = read_response(&mut s).await;
            assert!(
                body == pattern(BODY),
                "{way:?}: response {i} changed in transit"
            );
        }
        // Then a request for another host on the same tunnel: denied, never forwarded.
        s.write_all(
            format!("GET /{way:?}-other HTTP/1.1\r\nHost: blocked.test\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let rest = read_all(&mut s).await;
        assert!(
            find(&rest, b"200 OK").is_none(),
            "{way:?}: answered after the denial"
        );
    }
    w.settle().await;
    let seen = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    for way in [Way::Connect, Way::Transparent] {
        assert!(
            seen.contains(&format!("GET /{way:?}1 ")),
            "{way:?}: positive control: {seen}"
        );
        assert!(
            !seen.contains(&format!("/{way:?}-other")),
            "{way:?}: {seen}"
        );
    }
    assert!(!seen.contains("blocked.test"), "{seen}");
    w.blocked.assert_untouched("bulk tunnel");
}

const BULK_PY: &str = r#"
import hashlib, socket, sys, threading
n = int(sys.argv[2])
data = bytes(i % 251 for i in range(n))
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
def send():
    s.sendall(data); s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send); t.start()
got = bytearray()
while True:
    b = s.recv(1 << 16)
    if not b: break
    got += b
t.join()
print("sent", hashlib.sha256(data).hexdigest())
print("back", hashlib.sha256(bytes(got)).hexdigest(), len(got))
"#;

#[test]
fn the_bridge_relays_bulk_data_both_ways_intact() {
    let h = TestHome::new();
    h.write(&h.workspace().join("bulk.py"), BULK_PY);
    let sock = h.dir.path().join("proxy.sock");
    let l = UnixListener::bind(&sock).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    // The stand-in for the proxy: echoes everything, counting the bytes.
    let server = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        loop {
            let n = c.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            c.write_all(&buf[..n]).unwrap();
            total += n;
        }
        c.shutdown(std::net::Shutdown::Write).unwrap();
        total
    });
    let len = 8 * 1024 * 1024 + 5;
    let out = kernel_support::sandpit_cmd(
        &h,
        &[
            "--proxy-socket",
            sock.to_str().unwrap(),
            "--proxy-port",
            "3128",
        ],
        &format!("python3 bulk.py 3128 {len}"),
    )
    .output()
    .unwrap();
    let t = kernel_support::text(&out);
    assert_eq!(server.join().unwrap(), len, "{t}");
    let sent = t
        .lines()
        .find_map(|l| l.strip_prefix("sent "))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(t.contains(&format!("back {sent} {len}")), "{t}");
}
