//! Loopback fixtures for the proxy tests: recording sinks standing in for
//! `allowed.test` (127.0.0.2) and `blocked.test` (127.0.0.1), a fake upstream DNS
//! server that records every question, a proxy under a test policy, and raw clients
//! for each way in.
#![allow(dead_code)]
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use sandpit::dns::{message, Resolver, Upstream};
use sandpit::proxy::decide::policy_from_toml;
use sandpit::proxy::{MemorySink, Proxy, ProxyConfig, Running};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

pub const TOKEN: &str = "t0k3n-for-this-run";

/// A listener that records every connection and byte, and answers an HTTP request
/// with `sink:<label>`.
pub struct Sink {
    pub addr: SocketAddr,
    /// The peer of every connection accepted, in order (the sink's own
    /// [`barrier`](Sink::barrier) connections included).
    pub peers: Arc<Mutex<Vec<SocketAddr>>>,
    /// The barrier connections' ports, which [`Sink::connection_count`] leaves out.
    barriers: Mutex<Vec<SocketAddr>>,
    pub bytes: Arc<Mutex<Vec<u8>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Sink {
    pub async fn start(ip: &str, label: &'static str) -> Sink {
        let listener = TcpListener::bind((ip.parse::<IpAddr>().unwrap(), 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let peers = Arc::new(Mutex::new(Vec::new()));
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (c, b) = (peers.clone(), bytes.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut s, peer)) = listener.accept().await else {
                    return;
                };
                c.lock().unwrap().push(peer);
                let b = b.clone();
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 65536];
                    loop {
                        let n = match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        b.lock().unwrap().extend_from_slice(&buf[..n]);
                        seen.extend_from_slice(&buf[..n]);
                        while let Some(end) = find(&seen, b"\r\n\r\n") {
                            let head: Vec<u8> = seen.drain(..end + 4).collect();
                            let close = String::from_utf8_lossy(&head)
                                .to_ascii_lowercase()
                                .contains("connection: close");
                            let body = format!("sink:{label}");
                            let resp = format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            if s.write_all(resp.as_bytes()).await.is_err() || close {
                                return;
                            }
                        }
                    }
                });
            }
        });
        Sink {
            addr,
            peers,
            barriers: Mutex::new(Vec::new()),
            bytes,
            _task: task,
        }
    }

    /// Returns once every connection that reached the sink before the call is
    /// counted: connects to the sink itself and waits until the accept loop, which
    /// takes connections in the order they completed, has taken this one.
    pub async fn barrier(&self) {
        // Only entries from here on can be ours (an earlier peer may have had the
        // same port); the stream stays open until ours is found.
        let start = self.peers.lock().unwrap().len();
        let s = TcpStream::connect(self.addr).await.unwrap();
        let me = s.local_addr().unwrap();
        self.barriers.lock().unwrap().push(me);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !self.peers.lock().unwrap()[start..].contains(&me) {
            assert!(
                std::time::Instant::now() < deadline,
                "sink {} never accepted its barrier",
                self.addr
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        drop(s);
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }
    pub fn received(&self) -> Vec<u8> {
        self.bytes.lock().unwrap().clone()
    }
    /// Connections accepted, the barriers left out.
    pub fn connection_count(&self) -> usize {
        self.peers.lock().unwrap().len() - self.barriers.lock().unwrap().len()
    }
    /// The sink got nothing at all: no connection, no byte.
    pub fn assert_untouched(&self, what: &str) {
        assert_eq!(self.connection_count(), 0, "{what}: sink was connected to");
        assert!(
            self.received().is_empty(),
            "{what}: sink received {:?}",
            String::from_utf8_lossy(&self.received())
        );
    }
}

pub fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// A DNS server on loopback that records every question and answers A queries:
/// `public.test` → 93.184.216.34, anything else → 127.0.0.1.
pub struct FakeUpstream {
    pub addr: SocketAddr,
    pub questions: Arc<Mutex<Vec<String>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl FakeUpstream {
    pub async fn start() -> FakeUpstream {
        let sock = UdpSocket::bind("127.0.0.3:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        let questions = Arc::new(Mutex::new(Vec::new()));
        let q2 = questions.clone();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            loop {
                let Ok((n, peer)) = sock.recv_from(&mut buf).await else {
                    return;
                };
                let Ok(q) = message::parse_query(&buf[..n]) else {
                    q2.lock().unwrap().push(format!("<unparsed {n} bytes>"));
                    continue;
                };
                q2.lock().unwrap().push(q.name.clone());
                let a: IpAddr = if q.name == "public.test" {
                    "93.184.216.34"
                } else {
                    "127.0.0.1"
                }
                .parse()
                .unwrap();
                let out = message::answer(&q, message::RCODE_NOERROR, &[a], 60);
                let _ = sock.send_to(&out, peer).await;
            }
        });
        FakeUpstream {
            addr,
            questions,
            _task: task,
        }
    }
    pub fn questions(&self) -> Vec<String> {
        self.questions.lock().unwrap().clone()
    }
}

pub const POLICY: &str = r#"
[network]
allow = ["allowed.test", "sneaky.test", "public.test"]
[network.resolve]
"allowed.test" = "127.0.0.2"
"blocked.test" = "127.0.0.1"
"#;

pub struct World {
    pub allowed: Sink,
    pub blocked: Sink,
    pub upstream: FakeUpstream,
    pub audit: Arc<MemorySink>,
    pub proxy: Arc<Proxy>,
    pub running: Running,
    pub addr: SocketAddr,
}

impl World {
    pub async fn new() -> World {
        World::with_policy(POLICY).await
    }

    pub async fn with_policy(policy: &str) -> World {
        World::with_policy_for(|_| policy.to_string()).await
    }

    /// A world whose policy text may name the allowed sink's port.
    pub async fn with_policy_for(policy: impl FnOnce(u16) -> String) -> World {
        let allowed = Sink::start("127.0.0.2", "allowed").await;
        let blocked = Sink::start("127.0.0.1", "blocked").await;
        let upstream = FakeUpstream::start().await;
        let audit = Arc::new(MemorySink::default());
        let policy = policy_from_toml(&policy(allowed.port())).unwrap();
        let resolver = Arc::new(Resolver::new(Upstream::Udp(upstream.addr)));
        let cfg = ProxyConfig {
            token: Some(TOKEN.into()),
            first_data_wait: Duration::from_millis(300),
            ..ProxyConfig::default()
        };
        let proxy = Proxy::new(Arc::new(policy), resolver, audit.clone(), cfg);
        let running = proxy
            .serve_tcp("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = running.local_addr().unwrap();
        World {
            allowed,
            blocked,
            upstream,
            audit,
            proxy,
            running,
            addr,
        }
    }

    /// Before asserting on the sinks: every connection the proxy completed to
    /// either one so far is counted (see [`Sink::barrier`]). Bytes the proxy relays
    /// on a connection already open have no such signal (the relay runs in this
    /// test's own runtime and ends when the client lets go): for them, a grace.
    pub async fn settle(&self) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.allowed.barrier().await;
        self.blocked.barrier().await;
    }
}

pub fn basic_auth(token: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("sandpit:{token}"))
    )
}

/// Read until EOF (or a 5 s safety limit) and return everything.
pub async fn read_all<S: AsyncReadExt + Unpin>(s: &mut S) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    out
}

/// Send raw bytes to the proxy and return the whole answer.
pub async fn raw_exchange(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(bytes).await.unwrap();
    String::from_utf8_lossy(&read_all(&mut s).await).into_owned()
}

/// An absolute-form GET through the HTTP proxy.
pub async fn http_get(proxy: SocketAddr, url: &str, host: &str) -> String {
    http_get_as(proxy, Some(TOKEN), url, host).await
}

/// [`http_get`] with `token` as the proxy credential, or none at all.
pub async fn http_get_as(proxy: SocketAddr, token: Option<&str>, url: &str, host: &str) -> String {
    let req = format!(
        "GET {url} HTTP/1.1\r\nHost: {host}\r\n{}Connection: close\r\n\r\n",
        proxy_authorization(token)
    );
    raw_exchange(proxy, req.as_bytes()).await
}

/// The `Proxy-Authorization` header line for `token`, or nothing.
fn proxy_authorization(token: Option<&str>) -> String {
    token
        .map(|t| format!("Proxy-Authorization: {}\r\n", basic_auth(t)))
        .unwrap_or_default()
}

/// CONNECT; returns the response head and the stream.
pub async fn connect(proxy: SocketAddr, authority: &str) -> (String, TcpStream) {
    connect_as(proxy, Some(TOKEN), authority).await
}

/// [`connect`] with `token` as the proxy credential, or none at all.
pub async fn connect_as(
    proxy: SocketAddr,
    token: Option<&str>,
    authority: &str,
) -> (String, TcpStream) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    let req = format!(
        "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{}\r\n",
        proxy_authorization(token)
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while find(&head, b"\r\n\r\n").is_none() {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut b)).await {
            Ok(Ok(1)) => head.push(b[0]),
            _ => break,
        }
    }
    (String::from_utf8_lossy(&head).into_owned(), s)
}

pub enum SocksDest<'a> {
    Domain(&'a str),
    Ip(IpAddr),
}

/// SOCKS5 with username/password; returns the reply code (None: closed) and stream.
pub async fn socks(
    proxy: SocketAddr,
    password: &str,
    dest: SocksDest<'_>,
    port: u16,
) -> (Option<u8>, TcpStream) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(&[5, 1, 2]).await.unwrap();
    let mut m = [0u8; 2];
    if s.read_exact(&mut m).await.is_err() || m[1] != 2 {
        return (None, s);
    }
    let mut auth = vec![1, 7];
    auth.extend_from_slice(b"sandpit");
    auth.push(password.len() as u8);
    auth.extend_from_slice(password.as_bytes());
    s.write_all(&auth).await.unwrap();
    let mut a = [0u8; 2];
    if s.read_exact(&mut a).await.is_err() || a[1] != 0 {
        return (None, s);
    }
    let mut req = vec![5, 1, 0];
    match dest {
        SocksDest::Domain(d) => {
            req.push(3);
            req.push(d.len() as u8);
            req.extend_from_slice(d.as_bytes());
        }
        SocksDest::Ip(IpAddr::V4(v4)) => {
            req.push(1);
            req.extend_from_slice(&v4.octets());
        }
        SocksDest::Ip(IpAddr::V6(v6)) => {
            req.push(4);
            req.extend_from_slice(&v6.octets());
        }
    }
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut rep = [0u8; 10];
    match tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut rep)).await {
        Ok(Ok(_)) => (Some(rep[1]), s),
        _ => (None, s),
    }
}

/// A transparent connection: the interposer's line, then the stream.
pub async fn transparent(
    proxy: SocketAddr,
    token: &str,
    original: SocketAddr,
    name: Option<&str>,
) -> TcpStream {
    transparent_as(proxy, Some(token), original, name).await
}

/// [`transparent`] with `token` on the interposer's line, or none at all.
pub async fn transparent_as(
    proxy: SocketAddr,
    token: Option<&str>,
    original: SocketAddr,
    name: Option<&str>,
) -> TcpStream {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    let line = sandpit::proxy::transparent::render(token, original, name);
    s.write_all(line.as_bytes()).await.unwrap();
    s
}

/// A plain origin-form GET for `host`, closing the connection after the response.
pub fn origin_get(host: &str) -> Vec<u8> {
    format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").into_bytes()
}

/// A way into the proxy. The tables of the proxy tests name one per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// An absolute-form request to the HTTP proxy.
    Http,
    /// HTTP CONNECT, then the request inside the tunnel.
    Connect,
    /// SOCKS5 with the token as password, then the request inside.
    Socks5,
    /// A transparently redirected connection: the interposer's line, then the request.
    Transparent,
}

/// Every way into the proxy.
pub const EVERY_WAY: [Way; 4] = [Way::Http, Way::Connect, Way::Socks5, Way::Transparent];

/// The ways that leave the client a byte stream to the destination.
pub const TUNNELS: [Way; 3] = [Way::Connect, Way::Socks5, Way::Transparent];

/// One attempt through the proxy: where the client asks to go, with which credential.
pub struct Try<'a> {
    pub way: Way,
    /// The host as the client names it (an IPv6 address in brackets).
    pub host: &'a str,
    pub port: u16,
    /// The address a transparent connection says it was bound for.
    pub original: IpAddr,
    pub token: Option<&'a str>,
    /// Sent once the way is open (not for [`Way::Http`], which asks for `/x` itself).
    pub request: Vec<u8>,
}

/// What the client saw of an attempt: the proxy's own answer for its way, then
/// whatever came back.
#[derive(Debug)]
pub struct Seen {
    pub way: Way,
    /// The HTTP head of CONNECT's answer; the whole answer for [`Way::Http`].
    pub head: String,
    /// The SOCKS5 reply code (None: the proxy closed first).
    pub socks: Option<u8>,
    /// What came back after the way was open.
    pub body: String,
}

impl Seen {
    /// The proxy let the client through to the destination (the way's own success,
    /// not yet the destination's answer).
    pub fn admitted(&self) -> bool {
        match self.way {
            Way::Connect => self.head.starts_with("HTTP/1.1 200"),
            Way::Socks5 => self.socks == Some(0),
            Way::Http | Way::Transparent => false,
        }
    }
    /// A sink answered.
    pub fn through(&self) -> bool {
        self.head.contains("sink:") || self.body.contains("sink:")
    }
}

/// Make the attempt `t` and report what came back.
pub async fn attempt(proxy: SocketAddr, t: &Try<'_>) -> Seen {
    let authority = format!("{}:{}", t.host, t.port);
    let mut seen = Seen {
        way: t.way,
        head: String::new(),
        socks: None,
        body: String::new(),
    };
    let mut stream = match t.way {
        Way::Http => {
            let url = format!("http://{authority}/x");
            seen.head = http_get_as(proxy, t.token, &url, &authority).await;
            return seen;
        }
        Way::Connect => {
            let (head, s) = connect_as(proxy, t.token, &authority).await;
            seen.head = head;
            if !seen.admitted() {
                // The request goes after the refusal all the same: nothing of it
                // may come through.
                let mut s = s;
                let _ = s.write_all(&t.request).await;
                return seen;
            }
            s
        }
        Way::Socks5 => {
            let host = t.host.trim_start_matches('[').trim_end_matches(']');
            let dest = match host.parse::<IpAddr>() {
                Ok(ip) => SocksDest::Ip(ip),
                Err(_) => SocksDest::Domain(t.host),
            };
            let (rep, s) = socks(proxy, t.token.unwrap_or(""), dest, t.port).await;
            seen.socks = rep;
            if !seen.admitted() {
                return seen;
            }
            s
        }
        Way::Transparent => {
            let original = SocketAddr::new(t.original, t.port);
            transparent_as(proxy, t.token, original, Some(t.host)).await
        }
    };
    let _ = stream.write_all(&t.request).await;
    seen.body = String::from_utf8_lossy(&read_all(&mut stream).await).into_owned();
    seen
}

/// What a row of a table expects of its attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Through to the sink of this label, which answered: a positive control.
    Reach(&'static str),
    /// Refused by the policy: a 403, SOCKS5 reply 2 (connection not allowed by
    /// ruleset), a transparent connection that got no answer from a sink.
    Deny,
    /// Refused for the credential: a 407, a SOCKS5 authentication that fails, a
    /// transparent connection that got no answer from a sink.
    Unauthorized,
    /// Never through, however refused (an odd spelling may not even parse).
    NotThrough,
}

/// Assert that `seen` is what `expect` says, naming `row` if not.
pub fn check(row: &str, seen: &Seen, expect: Expect) {
    match expect {
        Expect::Reach(label) => {
            let answer = format!("sink:{label}");
            if matches!(seen.way, Way::Connect | Way::Socks5) {
                assert!(seen.admitted(), "{row}: positive control refused: {seen:?}");
            }
            assert!(
                seen.head.contains(&answer) || seen.body.contains(&answer),
                "{row}: positive control, no {answer:?}: {seen:?}"
            );
        }
        Expect::Deny | Expect::Unauthorized => {
            let status = if expect == Expect::Deny { "403" } else { "407" };
            match seen.way {
                Way::Http | Way::Connect => assert!(
                    seen.head.starts_with(&format!("HTTP/1.1 {status}")),
                    "{row}: expected {status}: {seen:?}"
                ),
                Way::Socks5 => assert_eq!(
                    seen.socks,
                    (expect == Expect::Deny).then_some(2),
                    "{row}: SOCKS5 reply: {seen:?}"
                ),
                Way::Transparent => {}
            }
            assert!(!seen.through(), "{row}: a sink answered: {seen:?}");
        }
        Expect::NotThrough => {
            assert!(!seen.admitted(), "{row}: admitted: {seen:?}");
            assert!(!seen.through(), "{row}: a sink answered: {seen:?}");
        }
    }
}

/// A tunnel to allowed.test:`port` (127.0.0.2) by `way` (one of [`TUNNELS`]), open.
pub async fn tunnel(w: &World, way: Way, port: u16) -> TcpStream {
    match way {
        Way::Connect => {
            let (head, s) = connect(w.addr, &format!("allowed.test:{port}")).await;
            assert!(head.starts_with("HTTP/1.1 200"), "{way:?}: {head}");
            s
        }
        Way::Socks5 => {
            let (rep, s) = socks(w.addr, TOKEN, SocksDest::Domain("allowed.test"), port).await;
            assert_eq!(rep, Some(0), "{way:?}");
            s
        }
        Way::Transparent => {
            let orig = SocketAddr::new("127.0.0.2".parse().unwrap(), port);
            transparent(w.addr, TOKEN, orig, Some("allowed.test")).await
        }
        Way::Http => panic!("plain HTTP to the proxy is no tunnel"),
    }
}
