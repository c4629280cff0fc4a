//! Every way into the proxy × allowed/blocked, every host spelling, fronting,
//! pipelining, protocol switches and CONNECT inside a tunnel, allowed names resolving
//! to loopback, an empty allowlist and per-run tokens. Each denial is judged by its effect — the `blocked.test` sink on 127.0.0.1
//! received nothing — next to a positive control that reaches `allowed.test` on
//! 127.0.0.2.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod proxy_support;

use std::net::{IpAddr, SocketAddr};

use proxy_support::*;
use sandpit::proxy::sni::build_client_hello;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BLOCKED_SPELLINGS: &[&str] = &[
    "blocked.test",
    "BLOCKED.TEST",
    "blocked.test.",
    "Blocked.Test.",
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "017700000001",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::127.0.0.1]",
    "[64:ff9b::127.0.0.1]",
    "[64:ff9b::7f00:1]",
    "127.0.0.1.",
    "ｂｌｏｃｋｅｄ.test",
];

fn authority(host: &str, port: u16) -> String {
    format!("{host}:{port}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_proxy_allowed_and_blocked() {
    let w = World::new().await;
    let a = authority("allowed.test", w.allowed.port());
    let ok = http_get(w.addr, &format!("http://{a}/x"), &a).await;
    assert!(ok.contains("sink:allowed"), "positive control: {ok}");
    let b = authority("blocked.test", w.blocked.port());
    let denied = http_get(w.addr, &format!("http://{b}/x"), &b).await;
    assert!(denied.starts_with("HTTP/1.1 403"), "{denied}");
    assert!(
        denied.contains("blocked.test") && denied.contains("[network] allow"),
        "403 body names the host and how to allow it: {denied}"
    );
    w.settle().await;
    w.blocked.assert_untouched("http proxy");
    let ev = w.audit.events();
    assert!(ev.iter().any(|e| e.allow && e.host == "allowed.test"));
    assert!(ev.iter().any(|e| !e.allow && e.host == "blocked.test"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_allowed_and_blocked() {
    let w = World::new().await;
    let (head, mut s) = connect(w.addr, &authority("allowed.test", w.allowed.port())).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s.write_all(&origin_get("allowed.test")).await.unwrap();
    let body = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(body.contains("sink:allowed"), "positive control: {body}");
    let (head, mut s) = connect(w.addr, &authority("blocked.test", w.blocked.port())).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let _ = s.write_all(&origin_get("blocked.test")).await;
    w.settle().await;
    w.blocked.assert_untouched("CONNECT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_allowed_and_blocked() {
    let w = World::new().await;
    let (rep, mut s) = socks(
        w.addr,
        TOKEN,
        SocksDest::Domain("allowed.test"),
        w.allowed.port(),
    )
    .await;
    assert_eq!(rep, Some(0));
    s.write_all(&origin_get("allowed.test")).await.unwrap();
    let body = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(body.contains("sink:allowed"), "positive control: {body}");
    let (rep, _) = socks(
        w.addr,
        TOKEN,
        SocksDest::Domain("blocked.test"),
        w.blocked.port(),
    )
    .await;
    assert_eq!(rep, Some(2), "connection not allowed by ruleset");
    let (rep, _) = socks(
        w.addr,
        TOKEN,
        SocksDest::Ip("127.0.0.1".parse().unwrap()),
        w.blocked.port(),
    )
    .await;
    assert_eq!(rep, Some(2));
    let (rep, _) = socks(
        w.addr,
        TOKEN,
        SocksDest::Ip("::ffff:127.0.0.1".parse().unwrap()),
        w.blocked.port(),
    )
    .await;
    assert_eq!(rep, Some(2));
    w.settle().await;
    w.blocked.assert_untouched("SOCKS5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transparent_allowed_and_blocked() {
    let w = World::new().await;
    let allowed_orig = SocketAddr::new("127.0.0.2".parse().unwrap(), w.allowed.port());
    let blocked_orig = SocketAddr::new("127.0.0.1".parse().unwrap(), w.blocked.port());

    // Name known from the interposer.
    let mut s = transparent(w.addr, TOKEN, allowed_orig, Some("allowed.test")).await;
    s.write_all(&origin_get("allowed.test")).await.unwrap();
    let body = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(body.contains("sink:allowed"), "positive control: {body}");

    let mut s = transparent(w.addr, TOKEN, blocked_orig, Some("blocked.test")).await;
    let _ = s.write_all(&origin_get("blocked.test")).await;
    let out = read_all(&mut s).await;
    assert!(!String::from_utf8_lossy(&out).contains("sink:"), "denied");

    // No name: the TLS server name decides.
    let mut s = transparent(w.addr, TOKEN, allowed_orig, None).await;
    let hello = build_client_hello(Some("allowed.test"), false);
    s.write_all(&hello).await.unwrap();
    w.settle().await;
    assert!(
        find(&w.allowed.received(), &hello).is_some(),
        "positive control: SNI allowed.test reached the sink"
    );
    drop(s);

    let mut s = transparent(w.addr, TOKEN, blocked_orig, None).await;
    let _ = s
        .write_all(&build_client_hello(Some("blocked.test"), false))
        .await;
    let _ = read_all(&mut s).await;

    // No name, raw bytes: the address decides (127.0.0.1 is not allowed).
    let mut s = transparent(w.addr, TOKEN, blocked_orig, None).await;
    let _ = s.write_all(b"SSH-2.0-probe\r\n").await;
    let _ = read_all(&mut s).await;

    // A lying interposer line: claims allowed.test for the blocked address. The proxy
    // dials its own resolution of the name, never the claimed address.
    let mut s = transparent(w.addr, TOKEN, blocked_orig, Some("allowed.test")).await;
    let _ = s.write_all(&origin_get("allowed.test")).await;
    let _ = read_all(&mut s).await;

    // No name, HTTP Host names the blocked host.
    let mut s = transparent(w.addr, TOKEN, blocked_orig, None).await;
    let _ = s.write_all(&origin_get("blocked.test")).await;
    let out = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");

    w.settle().await;
    w.blocked.assert_untouched("transparent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_the_blocked_host_is_denied_every_way() {
    let w = World::new().await;
    let port = w.blocked.port();
    for spelling in BLOCKED_SPELLINGS {
        let a = authority(spelling, port);
        let r = http_get(w.addr, &format!("http://{a}/"), &a).await;
        assert!(!r.contains("sink:"), "http {spelling}: {r}");
        let (head, _) = connect(w.addr, &a).await;
        assert!(
            !head.starts_with("HTTP/1.1 200"),
            "CONNECT {spelling}: {head}"
        );
        let host = spelling.trim_start_matches('[').trim_end_matches(']');
        let dest = match host.parse::<IpAddr>() {
            Ok(ip) => SocksDest::Ip(ip),
            Err(_) => SocksDest::Domain(spelling),
        };
        let (rep, _) = socks(w.addr, TOKEN, dest, port).await;
        assert_ne!(rep, Some(0), "SOCKS5 {spelling}");
        let mut s = transparent(
            w.addr,
            TOKEN,
            SocketAddr::new("127.0.0.2".parse().unwrap(), port),
            Some(spelling),
        )
        .await;
        let _ = s.write_all(b"GET / HTTP/1.1\r\n\r\n").await;
        let out = read_all(&mut s).await;
        assert!(
            !String::from_utf8_lossy(&out).contains("sink:"),
            "transparent {spelling}"
        );
    }
    // Userinfo that names the allowed host in front of the blocked one.
    for url in [
        format!("http://allowed.test@blocked.test:{port}/"),
        format!(
            "http://allowed.test:{}@blocked.test:{port}/",
            w.allowed.port()
        ),
    ] {
        let r = http_get(w.addr, &url, &format!("blocked.test:{port}")).await;
        assert!(!r.contains("sink:"), "{url}: {r}");
        let (head, _) = connect(
            w.addr,
            url.trim_start_matches("http://").trim_end_matches('/'),
        )
        .await;
        assert!(!head.starts_with("HTTP/1.1 200"), "CONNECT {url}: {head}");
    }
    // Positive controls: odd spellings of the allowed name still work.
    for spelling in ["ALLOWED.TEST", "allowed.test.", "Allowed.Test."] {
        let a = authority(spelling, w.allowed.port());
        let r = http_get(w.addr, &format!("http://{a}/"), &a).await;
        assert!(r.contains("sink:allowed"), "{spelling}: {r}");
    }
    w.settle().await;
    w.blocked.assert_untouched("spellings");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fronting_is_denied() {
    let w = World::new().await;
    let a = authority("allowed.test", w.allowed.port());

    // CONNECT allowed.test, then a ClientHello for blocked.test.
    let (head, mut s) = connect(w.addr, &a).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let evil = build_client_hello(Some("blocked.test"), false);
    s.write_all(&evil).await.unwrap();
    let _ = read_all(&mut s).await;
    // ECH and missing SNI under a name are unreadable: denied too.
    for hello in [
        build_client_hello(Some("allowed.test"), true),
        build_client_hello(None, false),
    ] {
        let (_, mut s) = connect(w.addr, &a).await;
        s.write_all(&hello).await.unwrap();
        let _ = read_all(&mut s).await;
    }
    // SOCKS5 to allowed.test with a blocked SNI.
    let (rep, mut s) = socks(
        w.addr,
        TOKEN,
        SocksDest::Domain("allowed.test"),
        w.allowed.port(),
    )
    .await;
    assert_eq!(rep, Some(0));
    s.write_all(&evil).await.unwrap();
    let _ = read_all(&mut s).await;
    // CONNECT allowed.test, then an HTTP request with Host: blocked.test.
    let (_, mut s) = connect(w.addr, &a).await;
    s.write_all(&origin_get("blocked.test")).await.unwrap();
    let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    // Absolute URI allowed.test with Host: blocked.test.
    let r = http_get(w.addr, &format!("http://{a}/"), "blocked.test").await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    w.settle().await;
    assert!(
        w.allowed.received().is_empty(),
        "nothing of the fronted traffic reached allowed.test: {:?}",
        String::from_utf8_lossy(&w.allowed.received())
    );

    // Positive control: the same tunnel with the matching server name goes through.
    let (_, mut s) = connect(w.addr, &a).await;
    let good = build_client_hello(Some("allowed.test"), false);
    s.write_all(&good).await.unwrap();
    w.settle().await;
    assert!(find(&w.allowed.received(), &good).is_some());
    w.blocked.assert_untouched("fronting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_request_to_another_host_is_denied() {
    let w = World::new().await;
    let a = authority("allowed.test", w.allowed.port());
    let b = authority("blocked.test", w.blocked.port());
    let auth = basic_auth(TOKEN);
    // Absolute form: each request is decided on its own.
    let two = format!(
        "GET http://{a}/1 HTTP/1.1\r\nHost: {a}\r\nProxy-Authorization: {auth}\r\n\r\n\
         GET http://{b}/2 HTTP/1.1\r\nHost: {b}\r\nProxy-Authorization: {auth}\r\nConnection: close\r\n\r\n"
    );
    let r = raw_exchange(w.addr, two.as_bytes()).await;
    assert!(
        r.contains("sink:allowed"),
        "positive control: first request served: {r}"
    );
    assert!(r.contains("403 Forbidden"), "second request denied: {r}");
    // Inside a tunnel: a second request in the same write to another host.
    let (_, mut s) = connect(w.addr, &a).await;
    let both = "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n\
                GET / HTTP/1.1\r\nHost: blocked.test\r\nConnection: close\r\n\r\n";
    s.write_all(both.as_bytes()).await.unwrap();
    let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    w.settle().await;
    assert!(!String::from_utf8_lossy(&w.allowed.received()).contains("blocked.test"));
    w.blocked.assert_untouched("pipelining");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_name_resolving_to_loopback_is_denied() {
    let w = World::new().await;
    // sneaky.test is allowed, and the upstream resolver answers 127.0.0.1 for it.
    let s = authority("sneaky.test", w.blocked.port());
    let r = http_get(w.addr, &format!("http://{s}/"), &s).await;
    assert!(
        r.starts_with("HTTP/1.1 403") && r.contains("127.0.0.1"),
        "{r}"
    );
    let (head, _) = connect(w.addr, &s).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let (rep, _) = socks(
        w.addr,
        TOKEN,
        SocksDest::Domain("sneaky.test"),
        w.blocked.port(),
    )
    .await;
    assert_eq!(rep, Some(2));
    // The name was asked upstream (it is allowed) — the answer is what was refused.
    assert!(w.upstream.questions().iter().any(|q| q == "sneaky.test"));
    // Metadata by address is denied too.
    let m = "169.254.169.254:80";
    let r = http_get(w.addr, &format!("http://{m}/latest/meta-data/"), m).await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    w.settle().await;
    w.blocked.assert_untouched("loopback answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_allowlist_means_no_network() {
    let w = World::with_policy("[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n").await;
    let a = authority("allowed.test", w.allowed.port());
    let r = http_get(w.addr, &format!("http://{a}/"), &a).await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    let (head, _) = connect(w.addr, &a).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let (rep, _) = socks(
        w.addr,
        TOKEN,
        SocksDest::Domain("allowed.test"),
        w.allowed.port(),
    )
    .await;
    assert_eq!(rep, Some(2));
    w.settle().await;
    w.allowed.assert_untouched("empty allowlist");
    assert!(w.upstream.questions().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_runs_token_is_refused() {
    let w = World::new().await;
    let a = authority("allowed.test", w.allowed.port());
    let req = format!("GET http://{a}/ HTTP/1.1\r\nHost: {a}\r\nProxy-Authorization: {}\r\nConnection: close\r\n\r\n", basic_auth("other-run"));
    let r = raw_exchange(w.addr, req.as_bytes()).await;
    assert!(r.starts_with("HTTP/1.1 407"), "{r}");
    let req = format!("CONNECT {a} HTTP/1.1\r\n\r\n");
    let r = raw_exchange(w.addr, req.as_bytes()).await;
    assert!(r.starts_with("HTTP/1.1 407"), "{r}");
    let (rep, _) = socks(
        w.addr,
        "other-run",
        SocksDest::Domain("allowed.test"),
        w.allowed.port(),
    )
    .await;
    assert_eq!(rep, None);
    let mut s = transparent(
        w.addr,
        "other-run",
        SocketAddr::new("127.0.0.2".parse().unwrap(), w.allowed.port()),
        Some("allowed.test"),
    )
    .await;
    let _ = s.write_all(&origin_get("allowed.test")).await;
    let _ = read_all(&mut s).await;
    w.settle().await;
    w.allowed.assert_untouched("foreign token");
    // Positive control: the right token works.
    let r = http_get(w.addr, &format!("http://{a}/"), &a).await;
    assert!(r.contains("sink:allowed"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_socket_listener() {
    let w = World::new().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.sock");
    let _running = w.proxy.serve_unix(&path).await.unwrap();
    let mode = std::fs::metadata(&path)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
        .unwrap();
    assert_eq!(mode, 0o600);
    let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
    let req = format!(
        "CONNECT allowed.test:{} HTTP/1.1\r\nProxy-Authorization: {}\r\n\r\n",
        w.allowed.port(),
        basic_auth(TOKEN)
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut b = [0u8; 39];
    s.read_exact(&mut b).await.unwrap();
    assert!(b.starts_with(b"HTTP/1.1 200"));
    s.write_all(&origin_get("allowed.test")).await.unwrap();
    let body = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(body.contains("sink:allowed"), "{body}");
    let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
    let req = format!(
        "CONNECT blocked.test:{} HTTP/1.1\r\nProxy-Authorization: {}\r\n\r\n",
        w.blocked.port(),
        basic_auth(TOKEN)
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    w.settle().await;
    w.blocked.assert_untouched("unix socket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_listener_requires_a_token() {
    let policy = sandpit::proxy::decide::policy_from_toml("").unwrap();
    let proxy = sandpit::proxy::Proxy::new(
        std::sync::Arc::new(policy),
        std::sync::Arc::new(sandpit::dns::Resolver::new(sandpit::dns::Upstream::Nothing)),
        std::sync::Arc::new(sandpit::proxy::NullSink),
        sandpit::proxy::ProxyConfig::default(),
    );
    assert!(proxy
        .serve_tcp("127.0.0.1:0".parse().unwrap())
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_rules_are_enforced() {
    // allowed.test is allowed on the allowed sink's port only; another sink listens on
    // the same address (127.0.0.2) on another port.
    let w = World::with_policy_for(|port| {
        format!("[network]\nallow = [\"allowed.test:{port}\"]\n[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n")
    })
    .await;
    let other = Sink::start("127.0.0.2", "other-port").await;
    let o = authority("allowed.test", other.port());
    let r = http_get(w.addr, &format!("http://{o}/"), &o).await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    let (head, _) = connect(w.addr, &o).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let (rep, _) = socks(
        w.addr,
        TOKEN,
        SocksDest::Domain("allowed.test"),
        other.port(),
    )
    .await;
    assert_eq!(rep, Some(2));
    let mut s = transparent(w.addr, TOKEN, other.addr, Some("allowed.test")).await;
    let _ = s.write_all(&origin_get("allowed.test")).await;
    let _ = read_all(&mut s).await;
    // Positive control: the allowed port goes through.
    let a = authority("allowed.test", w.allowed.port());
    let r = http_get(w.addr, &format!("http://{a}/"), &a).await;
    assert!(r.contains("sink:allowed"), "{r}");
    w.settle().await;
    other.assert_untouched("port rule");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_keep_alive_request_to_another_host_is_denied() {
    let w = World::new().await;
    let a = authority("allowed.test", w.allowed.port());
    for tunnel in ["connect", "socks"] {
        let mut s = if tunnel == "connect" {
            connect(w.addr, &a).await.1
        } else {
            socks(
                w.addr,
                TOKEN,
                SocksDest::Domain("allowed.test"),
                w.allowed.port(),
            )
            .await
            .1
        };
        // First request: allowed, answered (positive control), connection kept open.
        s.write_all(b"GET /1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 256];
        while find(&got, b"sink:allowed").is_none() {
            let n = s.read(&mut b).await.unwrap();
            assert!(n > 0, "{tunnel}: closed before the first answer");
            got.extend_from_slice(&b[..n]);
        }
        // Then, on the same connection, a request for another host, with a body to
        // make sure framing is followed.
        s.write_all(b"POST /2 HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\n\r\nhello")
            .await
            .unwrap();
        s.write_all(b"GET /3 HTTP/1.1\r\nHost: blocked.test\r\n\r\n")
            .await
            .unwrap();
        let _ = read_all(&mut s).await;
    }
    w.settle().await;
    let seen = String::from_utf8_lossy(&w.allowed.received()).into_owned();
    assert!(
        seen.contains("GET /1") && seen.contains("POST /2"),
        "positive control: {seen}"
    );
    assert!(
        !seen.contains("blocked.test") && !seen.contains("GET /3"),
        "{seen}"
    );
    w.blocked.assert_untouched("keep-alive");
}

/// An echo server on 127.0.0.2 (allowed.test): whatever arrives goes back.
async fn echo_server() -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            tokio::spawn(async move {
                let (mut r, mut w) = s.into_split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    addr
}

async fn bulk_round_trip(mut s: tokio::net::TcpStream, len: usize) {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let (mut r, mut w) = s.split();
    let send = async {
        w.write_all(&data).await.unwrap();
        w.shutdown().await.unwrap();
    };
    let recv = async {
        let mut got = Vec::with_capacity(len);
        r.read_to_end(&mut got).await.unwrap();
        got
    };
    let ((), got) = tokio::join!(send, recv);
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes changed in transit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_transfer_through_tunnels_is_intact() {
    let w = World::new().await;
    let echo = echo_server().await;
    let len = 5 * 1024 * 1024 + 123;
    let (head, s) = connect(w.addr, &authority("allowed.test", echo.port())).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    bulk_round_trip(s, len).await;
    let (rep, s) = socks(
        w.addr,
        TOKEN,
        SocksDest::Domain("allowed.test"),
        echo.port(),
    )
    .await;
    assert_eq!(rep, Some(0));
    bulk_round_trip(s, len).await;
    let s = transparent(w.addr, TOKEN, echo, Some("allowed.test")).await;
    bulk_round_trip(s, len).await;
}

/// A tunnel to allowed.test:`port` (127.0.0.2) by `way`: CONNECT, SOCKS5, or
/// transparent with the interposer's name.
async fn tunnel(w: &World, way: &str, port: u16) -> tokio::net::TcpStream {
    match way {
        "connect" => {
            let (head, s) = connect(w.addr, &authority("allowed.test", port)).await;
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            s
        }
        "socks" => {
            let (rep, s) = socks(w.addr, TOKEN, SocksDest::Domain("allowed.test"), port).await;
            assert_eq!(rep, Some(0));
            s
        }
        _ => {
            let orig = SocketAddr::new("127.0.0.2".parse().unwrap(), port);
            transparent(w.addr, TOKEN, orig, Some("allowed.test")).await
        }
    }
}

const WAYS: [&str; 3] = ["connect", "socks", "transparent"];

/// Read from `s` until `n` answers from a sink arrived (or the connection ends).
async fn answers(s: &mut tokio::net::TcpStream, n: usize) -> String {
    let mut got = Vec::new();
    let mut b = [0u8; 1024];
    while got.windows(12).filter(|w| w == b"sink:allowed").count() < n {
        match tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut b)).await {
            Ok(Ok(k)) if k > 0 => got.extend_from_slice(&b[..k]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_not_answered_101_leaves_the_stream_checked() {
    let w = World::new().await;
    let port = w.allowed.port();
    for way in WAYS {
        // The smuggled request in the same write as the Upgrade request…
        let mut s = tunnel(&w, way, port).await;
        s.write_all(
            b"GET /u1 HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\n\r\n\
              GET /SMUGGLED1 HTTP/1.1\r\nHost: blocked.test\r\n\r\n",
        )
        .await
        .unwrap();
        let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
        assert!(
            r.contains("sink:allowed"),
            "{way}: the Upgrade request is answered: {r}"
        );
        // …and after the server answered it 200.
        let mut s = tunnel(&w, way, port).await;
        s.write_all(b"GET /u2 HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\n\r\n")
            .await
            .unwrap();
        assert!(answers(&mut s, 1).await.contains("sink:allowed"), "{way}");
        s.write_all(b"GET /SMUGGLED2 HTTP/1.1\r\nHost: blocked.test\r\n\r\n")
            .await
            .unwrap();
        let _ = read_all(&mut s).await;
        // Positive controls: allowed requests pipelined behind an Upgrade request or
        // an ordinary one reach the server, all answered.
        for first in ["Upgrade: websocket\r\n", ""] {
            let mut s = tunnel(&w, way, port).await;
            let two = format!(
                "GET /p1 HTTP/1.1\r\nHost: allowed.test\r\n{first}\r\n\
                 GET /p2 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"
            );
            s.write_all(two.as_bytes()).await.unwrap();
            let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
            assert_eq!(r.matches("sink:allowed").count(), 2, "{way} {first:?}: {r}");
        }
    }
    w.settle().await;
    let seen = String::from_utf8_lossy(&w.allowed.received()).into_owned();
    assert_eq!(
        seen.matches("GET /p2").count(),
        6,
        "positive control: {seen}"
    );
    assert_eq!(seen.matches("GET /u1").count(), 3, "{seen}");
    assert!(
        !seen.contains("SMUGGLED") && !seen.contains("blocked.test"),
        "{seen}"
    );
    w.blocked.assert_untouched("upgrade without 101");
    let denials = w.audit.events().iter().filter(|e| !e.allow).count();
    assert_eq!(denials, 6, "each smuggled request is a denial");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_inside_a_tunnel_is_refused() {
    let w = World::new().await;
    let port = w.allowed.port();
    let b = authority("blocked.test", w.blocked.port());
    let evil = format!(
        "CONNECT {b} HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /SMUGGLED HTTP/1.1\r\nHost: blocked.test\r\n\r\n"
    );
    for way in WAYS {
        // As the first request: refused with a 403 before any byte is forwarded.
        let mut s = tunnel(&w, way, port).await;
        s.write_all(evil.as_bytes()).await.unwrap();
        let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
        assert!(r.starts_with("HTTP/1.1 403"), "{way}: {r}");
        // After an allowed request (the positive control, answered).
        let mut s = tunnel(&w, way, port).await;
        s.write_all(b"GET /ok HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
            .await
            .unwrap();
        assert!(answers(&mut s, 1).await.contains("sink:allowed"), "{way}");
        s.write_all(evil.as_bytes()).await.unwrap();
        let _ = read_all(&mut s).await;
    }
    // A transparent connection without a name, whose first bytes are that CONNECT:
    // it is not named by its Host header.
    let orig = SocketAddr::new("127.0.0.2".parse().unwrap(), port);
    let mut s = transparent(w.addr, TOKEN, orig, None).await;
    s.write_all(evil.as_bytes()).await.unwrap();
    let _ = read_all(&mut s).await;
    w.settle().await;
    let seen = String::from_utf8_lossy(&w.allowed.received()).into_owned();
    assert_eq!(
        seen.matches("GET /ok").count(),
        3,
        "positive control: {seen}"
    );
    assert!(
        !seen.contains("CONNECT") && !seen.contains("SMUGGLED"),
        "{seen}"
    );
    w.blocked.assert_untouched("CONNECT inside a tunnel");
}

/// A server on 127.0.0.2 (allowed.test) that answers the first request head with
/// `101` after 200 ms, then echoes. Records, per connection, the bytes that arrived
/// after the head before it answered.
async fn switching_server() -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    let l = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let early = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let e = early.clone();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            let e = e.clone();
            tokio::spawn(async move {
                let (mut r, mut w) = s.into_split();
                let mut seen = Vec::new();
                let mut b = [0u8; 4096];
                let end = loop {
                    if let Some(i) = find(&seen, b"\r\n\r\n") {
                        break i + 4;
                    }
                    match r.read(&mut b).await {
                        Ok(n) if n > 0 => seen.extend_from_slice(&b[..n]),
                        _ => return,
                    }
                };
                let mut extra = seen.split_off(end);
                let wait = tokio::time::Instant::now() + std::time::Duration::from_millis(200);
                while let Ok(Ok(n)) = tokio::time::timeout_at(wait, r.read(&mut b)).await {
                    if n == 0 {
                        break;
                    }
                    extra.extend_from_slice(&b[..n]);
                }
                e.lock().unwrap().push(extra.clone());
                let head = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
                if w.write_all(head).await.is_err() || w.write_all(&extra).await.is_err() {
                    return;
                }
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    (addr, early)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_answered_101_carries_anything_both_ways() {
    let w = World::new().await;
    let (server, early) = switching_server().await;
    // Pipelined behind the Upgrade request: what no checked stream would pass.
    let pipelined: &[u8] = b"GET /x HTTP/1.1\r\nHost: blocked.test\r\n\r\n\x00\xff\x81\x05hello";
    for way in WAYS {
        let mut s = tunnel(&w, way, server.port()).await;
        let req = b"GET /chat HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
        s.write_all(&[&req[..], pipelined].concat()).await.unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 4096];
        loop {
            if let Some(i) = find(&got, b"\r\n\r\n") {
                if got.len() >= i + 4 + pipelined.len() {
                    break;
                }
            }
            let n = tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut b))
                .await
                .expect("answer in time")
                .unwrap();
            assert!(n > 0, "{way}: closed: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&b[..n]);
        }
        assert!(got.starts_with(b"HTTP/1.1 101 "), "{way}");
        let i = find(&got, b"\r\n\r\n").unwrap() + 4;
        assert_eq!(&got[i..], pipelined, "{way}: the held bytes, echoed");
        // Then bulk both ways, past the splice threshold.
        bulk_round_trip(s, 600 * 1024 + 7).await;
    }
    let early = early.lock().unwrap().clone();
    assert_eq!(early.len(), 3);
    assert!(
        early.iter().all(Vec::is_empty),
        "nothing after the Upgrade request reached the server before its 101: {early:?}"
    );
    w.blocked.assert_untouched("101");
}
