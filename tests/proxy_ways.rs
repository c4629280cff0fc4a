//! Every way into the proxy × allowed/blocked, every host spelling, fronting,
//! pipelining, protocol switches and CONNECT inside a tunnel, allowed names resolving
//! to loopback, an empty allowlist and per-run tokens. Each denial is judged by its
//! effect — the sink it was aimed at received nothing from it — next to a positive
//! control that reaches `allowed.test` on 127.0.0.2. What differs between attempts
//! (the way in, the host, the credential, the verdict) is a row of a table; a row's
//! failure names the row.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod proxy_support;

use std::net::{IpAddr, SocketAddr};

use proxy_support::Expect::{Deny, NotThrough, Reach, Unauthorized};
use proxy_support::Way::{Connect, Http, Socks5, Transparent};
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

/// Where a row's client asks to go: the port it names, and the address a
/// transparent connection says it was bound for.
#[derive(Clone, Copy, Debug)]
enum To {
    /// allowed.test's sink, 127.0.0.2.
    Allowed,
    /// blocked.test's sink, 127.0.0.1.
    Blocked,
    /// A third sink on 127.0.0.2, on another port than the allowed one.
    Other,
    /// A port and address where the test listens on nothing.
    Fixed(u16, [u8; 4]),
}

/// One attempt of a table: `way` to `host` at the port of `to`, with `token` as the
/// credential (None: none sent), expecting `expect`, the answer saying each of
/// `says`.
#[derive(Debug)]
struct Row {
    way: Way,
    host: &'static str,
    to: To,
    token: Option<&'static str>,
    expect: Expect,
    says: &'static [&'static str],
}

const fn row(way: Way, host: &'static str, to: To, expect: Expect) -> Row {
    Row {
        way,
        host,
        to,
        token: Some(TOKEN),
        expect,
        says: &[],
    }
}

impl Row {
    const fn says(self, says: &'static [&'static str]) -> Row {
        Row { says, ..self }
    }
    const fn token(self, token: Option<&'static str>) -> Row {
        Row { token, ..self }
    }
}

/// Make each attempt of `rows` in `w` and check what the client saw, then the
/// effect: a row that must not get through left its sink untouched (`other` is the
/// sink of [`To::Other`]).
async fn run_rows(w: &World, other: Option<&Sink>, rows: &[Row]) {
    for r in rows {
        let name = format!("row {r:?}");
        let (port, ip, sink) = match r.to {
            To::Allowed => (w.allowed.port(), [127, 0, 0, 2], Some(&w.allowed)),
            To::Blocked => (w.blocked.port(), [127, 0, 0, 1], Some(&w.blocked)),
            To::Other => {
                let o = other.expect("a table with To::Other is run with that sink");
                (o.port(), [127, 0, 0, 2], Some(o))
            }
            To::Fixed(port, ip) => (port, ip, None),
        };
        let before = sink.map(|s| (s.connection_count(), s.received().len()));
        let t = Try {
            way: r.way,
            host: r.host,
            port,
            original: IpAddr::from(ip),
            token: r.token,
            request: origin_get(r.host),
        };
        let seen = attempt(w.addr, &t).await;
        check(&name, &seen, r.expect);
        for s in r.says {
            assert!(
                seen.head.contains(s) || seen.body.contains(s),
                "{name}: the answer does not say {s:?}: {seen:?}"
            );
        }
        if let (Some(s), false) = (sink, matches!(r.expect, Reach(_))) {
            w.settle().await;
            s.barrier().await;
            assert_eq!(
                (s.connection_count(), s.received().len()),
                before.unwrap(),
                "{name}: the sink on {} was reached",
                s.addr
            );
        }
    }
}

/// allowed.test by every way (the positive controls), blocked.test by every way,
/// and SOCKS5's address forms of the blocked host.
const ALLOWED_AND_BLOCKED: &[Row] = &[
    row(Http, "allowed.test", To::Allowed, Reach("allowed")),
    row(Http, "blocked.test", To::Blocked, Deny).says(&["blocked.test", "[network] allow"]),
    row(Connect, "allowed.test", To::Allowed, Reach("allowed")),
    row(Connect, "blocked.test", To::Blocked, Deny),
    row(Socks5, "allowed.test", To::Allowed, Reach("allowed")),
    row(Socks5, "blocked.test", To::Blocked, Deny),
    row(Socks5, "127.0.0.1", To::Blocked, Deny),
    row(Socks5, "[::ffff:127.0.0.1]", To::Blocked, Deny),
    row(Transparent, "allowed.test", To::Allowed, Reach("allowed")),
    row(Transparent, "blocked.test", To::Blocked, Deny),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_reaches_the_allowed_host_and_not_the_blocked_one() {
    let w = World::new().await;
    run_rows(&w, None, ALLOWED_AND_BLOCKED).await;
    w.settle().await;
    w.blocked.assert_untouched("allowed and blocked");
    let ev = w.audit.events();
    assert!(ev.iter().any(|e| e.allow && e.host == "allowed.test"));
    assert!(ev.iter().any(|e| !e.allow && e.host == "blocked.test"));
}

/// What a transparent connection sends first.
#[derive(Clone, Copy, Debug)]
enum First {
    /// A plain GET with this Host.
    Get(&'static str),
    /// A TLS ClientHello with this server name.
    Hello(&'static str),
    /// Bytes of no protocol the proxy reads.
    Raw(&'static [u8]),
}

/// What the client of a transparent row must see; in every row but the positive
/// control, the blocked sink must also receive nothing from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sees {
    /// The first bytes arrive at the allowed sink as sent.
    Arrives,
    /// The proxy's own 403.
    Forbidden,
    /// Whatever it sees: the sink's silence is the point.
    Anything,
}

/// Transparent connections whose interposer line has no name, or a false one: the
/// TLS server name, the HTTP Host or the address decides, never the claim.
#[rustfmt::skip]
const TRANSPARENT_UNNAMED: &[(&str, To, Option<&str>, First, Sees)] = &[
    ("no name, SNI allowed.test", To::Allowed, None,
        First::Hello("allowed.test"), Sees::Arrives),
    ("no name, SNI blocked.test", To::Blocked, None,
        First::Hello("blocked.test"), Sees::Anything),
    ("no name, raw bytes to the blocked address", To::Blocked, None,
        First::Raw(b"SSH-2.0-probe\r\n"), Sees::Anything),
    // The proxy dials its own resolution of the name, never the claimed address.
    ("the blocked address claimed as allowed.test", To::Blocked, Some("allowed.test"),
        First::Get("allowed.test"), Sees::Anything),
    ("no name, Host blocked.test", To::Blocked, None,
        First::Get("blocked.test"), Sees::Forbidden),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transparent_without_a_true_name_is_decided_by_what_it_sends() {
    let w = World::new().await;
    for &(row, to, name, first, sees) in TRANSPARENT_UNNAMED {
        let (ip, port) = match to {
            To::Allowed => ("127.0.0.2", w.allowed.port()),
            _ => ("127.0.0.1", w.blocked.port()),
        };
        let bytes = match first {
            First::Get(host) => origin_get(host),
            First::Hello(sni) => build_client_hello(Some(sni), false),
            First::Raw(b) => b.to_vec(),
        };
        let before = w.blocked.connection_count();
        let original = SocketAddr::new(ip.parse().unwrap(), port);
        let mut s = transparent(w.addr, TOKEN, original, name).await;
        let _ = s.write_all(&bytes).await;
        if sees == Sees::Arrives {
            // A ClientHello gets no answer from the sink: its arrival is the proof.
            w.settle().await;
            assert!(
                find(&w.allowed.received(), &bytes).is_some(),
                "{row}: positive control, the bytes did not reach the allowed sink"
            );
            continue;
        }
        let out = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
        if sees == Sees::Forbidden {
            assert!(out.starts_with("HTTP/1.1 403"), "{row}: {out}");
        }
        w.settle().await;
        assert_eq!(
            w.blocked.connection_count(),
            before,
            "{row}: the blocked sink was reached"
        );
    }
    w.blocked.assert_untouched("transparent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_the_blocked_host_is_denied_every_way() {
    let w = World::new().await;
    let port = w.blocked.port();
    for spelling in BLOCKED_SPELLINGS {
        for way in EVERY_WAY {
            // A transparent connection claims the allowed address under the blocked
            // name, and sends no Host: the name alone must decide.
            let t = Try {
                way,
                host: spelling,
                port,
                original: "127.0.0.2".parse().unwrap(),
                token: Some(TOKEN),
                request: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            };
            let seen = attempt(w.addr, &t).await;
            check(&format!("{way:?} {spelling}"), &seen, NotThrough);
        }
        w.settle().await;
        assert_eq!(
            w.blocked.connection_count(),
            0,
            "{spelling}: the blocked sink was reached"
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

/// What goes inside a tunnel opened to allowed.test, or as the Host of an
/// absolute-form request for it.
#[derive(Clone, Copy, Debug)]
enum Front {
    /// A ClientHello with this server name (None: none) and ECH or not.
    Hello(Option<&'static str>, bool),
    /// An HTTP request whose Host names another host.
    Host(&'static str),
}

/// Traffic for another host under allowed.test's name: none of it may reach
/// allowed.test. The tunnel itself is admitted (it names an allowed host).
const FRONTED: &[(Way, Front)] = &[
    (Connect, Front::Hello(Some("blocked.test"), false)),
    // ECH and missing SNI under a name are unreadable: denied too.
    (Connect, Front::Hello(Some("allowed.test"), true)),
    (Connect, Front::Hello(None, false)),
    (Socks5, Front::Hello(Some("blocked.test"), false)),
    (Connect, Front::Host("blocked.test")),
    (Http, Front::Host("blocked.test")),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fronting_is_denied() {
    let w = World::new().await;
    let a = authority("allowed.test", w.allowed.port());
    for &(way, front) in FRONTED {
        let row = format!("{way:?} to allowed.test, then {front:?}");
        let before = w.allowed.received().len();
        match (way, front) {
            (Http, Front::Host(host)) => {
                let r = http_get(w.addr, &format!("http://{a}/"), host).await;
                assert!(r.starts_with("HTTP/1.1 403"), "{row}: {r}");
            }
            (_, Front::Host(host)) => {
                let mut s = tunnel(&w, way, w.allowed.port()).await;
                s.write_all(&origin_get(host)).await.unwrap();
                let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
                assert!(r.starts_with("HTTP/1.1 403"), "{row}: {r}");
            }
            (_, Front::Hello(sni, ech)) => {
                let mut s = tunnel(&w, way, w.allowed.port()).await;
                s.write_all(&build_client_hello(sni, ech)).await.unwrap();
                let _ = read_all(&mut s).await;
            }
        }
        w.settle().await;
        let got = w.allowed.received();
        assert_eq!(
            got.len(),
            before,
            "{row}: reached allowed.test: {:?}",
            String::from_utf8_lossy(&got[before..])
        );
    }

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

/// sneaky.test is allowed, and the upstream resolver answers 127.0.0.1 for it; the
/// cloud metadata address is denied by address.
const LOOPBACK_ANSWER: &[Row] = &[
    row(Http, "sneaky.test", To::Blocked, Deny).says(&["127.0.0.1"]),
    row(Connect, "sneaky.test", To::Blocked, Deny),
    row(Socks5, "sneaky.test", To::Blocked, Deny),
    row(Transparent, "sneaky.test", To::Blocked, Deny),
    row(
        Http,
        "169.254.169.254",
        To::Fixed(80, [169, 254, 169, 254]),
        Deny,
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_name_resolving_to_loopback_is_denied() {
    let w = World::new().await;
    run_rows(&w, None, LOOPBACK_ANSWER).await;
    // The name was asked upstream (it is allowed) — the answer is what was refused.
    assert!(w.upstream.questions().iter().any(|q| q == "sneaky.test"));
    w.settle().await;
    w.blocked.assert_untouched("loopback answer");
}

/// With no `network.allow`, allowed.test is no more allowed than any other host.
const NO_ALLOWLIST: &[Row] = &[
    row(Http, "allowed.test", To::Allowed, Deny),
    row(Connect, "allowed.test", To::Allowed, Deny),
    row(Socks5, "allowed.test", To::Allowed, Deny),
    row(Transparent, "allowed.test", To::Allowed, Deny),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_allowlist_means_no_network() {
    let w = World::with_policy("[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n").await;
    run_rows(&w, None, NO_ALLOWLIST).await;
    w.settle().await;
    w.allowed.assert_untouched("empty allowlist");
    assert!(w.upstream.questions().is_empty());
}

/// Another run's token, or none, by every way; then this run's (the positive
/// control).
const FOREIGN_TOKENS: &[Row] = &[
    row(Http, "allowed.test", To::Allowed, Unauthorized).token(Some("other-run")),
    row(Connect, "allowed.test", To::Allowed, Unauthorized).token(None),
    row(Socks5, "allowed.test", To::Allowed, Unauthorized).token(Some("other-run")),
    row(Transparent, "allowed.test", To::Allowed, Unauthorized).token(Some("other-run")),
    row(Http, "allowed.test", To::Allowed, Reach("allowed")),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_runs_token_is_refused() {
    let w = World::new().await;
    run_rows(&w, None, FOREIGN_TOKENS).await;
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

/// allowed.test on another port than the one its rule names, by every way; then on
/// that port (the positive control).
const OTHER_PORT: &[Row] = &[
    row(Http, "allowed.test", To::Other, Deny),
    row(Connect, "allowed.test", To::Other, Deny),
    row(Socks5, "allowed.test", To::Other, Deny),
    row(Transparent, "allowed.test", To::Other, Deny),
    row(Http, "allowed.test", To::Allowed, Reach("allowed")),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_rules_are_enforced() {
    // allowed.test is allowed on the allowed sink's port only; another sink listens on
    // the same address (127.0.0.2) on another port.
    let w = World::with_policy_for(|port| {
        format!("[network]\nallow = [\"allowed.test:{port}\"]\n[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n")
    })
    .await;
    let other = Sink::start("127.0.0.2", "other-port").await;
    run_rows(&w, Some(&other), OTHER_PORT).await;
    w.settle().await;
    other.barrier().await;
    other.assert_untouched("port rule");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_keep_alive_request_to_another_host_is_denied() {
    let w = World::new().await;
    for way in [Connect, Socks5] {
        let mut s = tunnel(&w, way, w.allowed.port()).await;
        // First request: allowed, answered (positive control), connection kept open.
        s.write_all(b"GET /1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 256];
        while find(&got, b"sink:allowed").is_none() {
            let n = s.read(&mut b).await.unwrap();
            assert!(n > 0, "{way:?}: closed before the first answer");
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

async fn bulk_round_trip(mut s: tokio::net::TcpStream, len: usize, way: Way) {
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
    assert_eq!(got.len(), data.len(), "{way:?}");
    assert!(got == data, "{way:?}: bytes changed in transit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_transfer_through_tunnels_is_intact() {
    let w = World::new().await;
    let echo = echo_server().await;
    let len = 5 * 1024 * 1024 + 123;
    for way in TUNNELS {
        bulk_round_trip(tunnel(&w, way, echo.port()).await, len, way).await;
    }
}

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
    for way in TUNNELS {
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
            "{way:?}: the Upgrade request is answered: {r}"
        );
        // …and after the server answered it 200.
        let mut s = tunnel(&w, way, port).await;
        s.write_all(b"GET /u2 HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\n\r\n")
            .await
            .unwrap();
        assert!(answers(&mut s, 1).await.contains("sink:allowed"), "{way:?}");
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
            assert_eq!(
                r.matches("sink:allowed").count(),
                2,
                "{way:?} {first:?}: {r}"
            );
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
    for way in TUNNELS {
        // As the first request: refused with a 403 before any byte is forwarded.
        let mut s = tunnel(&w, way, port).await;
        s.write_all(evil.as_bytes()).await.unwrap();
        let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
        assert!(r.starts_with("HTTP/1.1 403"), "{way:?}: {r}");
        // After an allowed request (the positive control, answered).
        let mut s = tunnel(&w, way, port).await;
        s.write_all(b"GET /ok HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
            .await
            .unwrap();
        assert!(answers(&mut s, 1).await.contains("sink:allowed"), "{way:?}");
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
    for way in TUNNELS {
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
            assert!(
                n > 0,
                "{way:?}: closed: {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&b[..n]);
        }
        assert!(got.starts_with(b"HTTP/1.1 101 "), "{way:?}");
        let i = find(&got, b"\r\n\r\n").unwrap() + 4;
        assert_eq!(&got[i..], pipelined, "{way:?}: the held bytes, echoed");
        // Then bulk both ways, past the splice threshold.
        bulk_round_trip(s, 600 * 1024 + 7, way).await;
    }
    let early = early.lock().unwrap().clone();
    assert_eq!(early.len(), 3);
    assert!(
        early.iter().all(Vec::is_empty),
        "nothing after the Upgrade request reached the server before its 101: {early:?}"
    );
    w.blocked.assert_untouched("101");
}
