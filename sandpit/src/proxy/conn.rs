//! One client connection: tell the way in apart, decide, dial, inspect, relay.
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine;
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

use super::decide::Verdict;
use super::http::{self, Target};
use super::io::{Io, Prefixed};
use super::sni::{self, Sni};
use super::{socks5, transparent, Proxy};
use super::{AuditEvent, Way};
use sandpit_policy::host::{canonical_host, canonical_ip, parse_authority, Host};

/// Relay buffer per direction.
const RELAY_BUF: usize = 64 * 1024;
/// Most bytes read while deciding (head, ClientHello, pipelined requests).
const MAX_PENDING: usize = 80 * 1024;

/// The rules, with the lookup of the one name the user allowed (answering a
/// question, possibly for this connection only) allowed as well.
struct AskedName {
    inner: Arc<dyn super::Decide>,
    name: Option<String>,
}

impl AskedName {
    fn new(inner: &Arc<dyn super::Decide>, name: Option<&String>) -> AskedName {
        AskedName {
            inner: inner.clone(),
            name: name.cloned(),
        }
    }
}

impl super::Decide for AskedName {
    fn connect(&self, host: &Host, port: u16) -> Verdict {
        self.inner.connect(host, port)
    }
    fn connect_from(
        &self,
        host: &Host,
        port: u16,
        program: Option<&sandpit_policy::Program>,
    ) -> Verdict {
        self.inner.connect_from(host, port, program)
    }
    fn lookup(&self, name: &str) -> Verdict {
        match &self.name {
            Some(n) if n == name => Verdict::allow(
                None,
                format!("lookup of {name}: the user allowed a connection to it"),
            ),
            _ => self.inner.lookup(name),
        }
    }
    fn static_answers(&self, name: &str) -> Option<Vec<std::net::IpAddr>> {
        self.inner.static_answers(name)
    }
    fn names_address(&self, addr: std::net::IpAddr) -> bool {
        self.inner.names_address(addr)
    }
    fn resolved(&self, host: &Host, port: u16, addr: std::net::IpAddr) -> Verdict {
        self.inner.resolved(host, port, addr)
    }
    fn http(&self, method: &str, scheme: &str, host: &Host, port: u16, target: &str) -> Verdict {
        self.inner.http(method, scheme, host, port, target)
    }
}

/// Why a connection did not go through.
pub(crate) enum Refusal {
    /// The policy said no.
    Policy(Verdict),
    /// Allowed, but no connection could be made.
    Unreachable(String),
    /// Allowed, but a `[limits]` limit was reached (`limits.connections…`).
    Limit(Verdict),
}

impl Refusal {
    pub(crate) fn reason(&self) -> &str {
        match self {
            Refusal::Policy(v) => &v.reason,
            Refusal::Unreachable(r) => r,
            Refusal::Limit(v) => &v.reason,
        }
    }
}

impl Proxy {
    pub(crate) fn record(
        &self,
        way: Way,
        host: &str,
        port: u16,
        addr: Option<SocketAddr>,
        v: &Verdict,
    ) {
        self.audit.record(AuditEvent {
            time: SystemTime::now(),
            way,
            host: host.to_string(),
            port,
            addr,
            allow: v.allow,
            rule: v.rule.clone(),
            reason: v.reason.clone(),
            program: super::known_programs().into_iter().next(),
        });
    }

    pub(crate) fn deny(
        &self,
        way: Way,
        host: &str,
        port: u16,
        reason: impl Into<String>,
    ) -> Refusal {
        let v = Verdict::deny(None, reason);
        self.record(way, host, port, None, &v);
        Refusal::Policy(v)
    }

    /// Decide `host:port` for the program behind this connection: for every process
    /// holding its socket, the first denial; none known, for no program. The process
    /// is looked up only when a `[[network.program]]` entry limits the host (what
    /// an unknown program is refused for): the lookup costs milliseconds.
    pub(crate) fn decide_from(&self, host: &Host, port: u16) -> Verdict {
        let unknown = self.decide.connect_from(host, port, None);
        if unknown.allow || !self.decide.connect(host, port).allow {
            return unknown;
        }
        let programs = super::peer_programs();
        let mut allowed = None;
        for p in &programs {
            let v = self.decide.connect_from(host, port, Some(p));
            if !v.allow {
                return v;
            }
            allowed.get_or_insert(v);
        }
        allowed.unwrap_or_else(|| self.decide.connect_from(host, port, None))
    }

    /// Decide `host:port`, resolve it with sandpit's resolver, check every answer and
    /// dial the first allowed one.
    pub(crate) async fn decide_and_dial(
        &self,
        way: Way,
        host: &Host,
        port: u16,
    ) -> Result<TcpStream, Refusal> {
        let hs = host.to_string();
        super::limits::Limits::decided();
        if let Some(leak) = self.leak_in(hs.as_bytes()) {
            let v = Verdict::deny(Some(leak.rule.clone()), leak.reason(&hs));
            self.record(way, &hs, port, None, &v);
            return Err(Refusal::Policy(v));
        }
        let mut v = self.decide_from(host, port);
        // Denied only for not being in network.allow: the user may say otherwise
        // (the connection waits for the answer).
        let mut asked = false;
        if !v.allow {
            if let Some(a) = &self.cfg.ask {
                // Looked up only if a question is asked: a person reads it, and
                // the lookup's milliseconds are nothing beside that.
                let who: super::decide::Who = Box::new(|| {
                    super::peer_programs().first().map(|p| match p.pid {
                        Some(pid) => format!("{} (pid {pid})", p.path.display()),
                        None => p.path.display().to_string(),
                    })
                });
                v = a.0.ask(host, port, &v, who).await;
                asked = v.allow;
            }
        }
        if v.allow {
            if let Some(r) = &self.cfg.review {
                v = r.0.review(host, port).await;
            }
        }
        if !v.allow {
            self.record(way, &hs, port, None, &v);
            return Err(Refusal::Policy(v));
        }
        if let Err(l) = self.limits.admit(&hs, port) {
            self.record(way, &hs, port, None, &l);
            return Err(Refusal::Limit(l));
        }
        let addrs = match host {
            Host::Ip(ip) => vec![*ip],
            Host::Name(n) => match self
                .resolver
                .lookup(&AskedName::new(&self.decide, asked.then_some(n)), n)
                .await
            {
                Ok(a) => a,
                Err(crate::dns::DnsError::Refused(v)) => {
                    self.record(way, &hs, port, None, &v);
                    return Err(Refusal::Policy(v));
                }
                Err(e) => {
                    let v =
                        Verdict::deny(v.rule.clone(), format!("{}{e}", crate::audit::ALLOWED_BUT));
                    self.record(way, &hs, port, None, &v);
                    return Err(Refusal::Unreachable(v.reason));
                }
            },
        };
        let mut last_denial = None;
        let mut last_error = None;
        for addr in addrs {
            let addr = canonical_ip(addr);
            let rv = self.decide.resolved(host, port, addr);
            if !rv.allow {
                last_denial = Some(rv);
                continue;
            }
            let sa = SocketAddr::new(addr, port);
            match tokio::time::timeout(self.cfg.dial_timeout, TcpStream::connect(sa)).await {
                Ok(Ok(s)) => {
                    let _ = s.set_nodelay(true);
                    self.record(way, &hs, port, Some(sa), &v);
                    return Ok(s);
                }
                Ok(Err(e)) => last_error = Some(format!("connecting to {sa}: {e}")),
                Err(_) => last_error = Some(format!("connecting to {sa} timed out")),
            }
        }
        if let Some(e) = last_error {
            let v = Verdict::deny(v.rule.clone(), format!("{}{e}", crate::audit::ALLOWED_BUT));
            self.record(way, &hs, port, None, &v);
            return Err(Refusal::Unreachable(v.reason));
        }
        let rv =
            last_denial.unwrap_or_else(|| Verdict::deny(None, format!("{hs} has no addresses")));
        self.record(way, &hs, port, None, &rv);
        Err(Refusal::Policy(rv))
    }

    /// A sentinel of this run's credentials in `data`, which is not going to a
    /// terminated connection (a host name, a plain-HTTP request head).
    pub(crate) fn leak_in(&self, data: &[u8]) -> Option<crate::credentials::Leak> {
        self.cfg.inject.as_ref()?.secrets.any_sentinel(data)
    }

    /// A sentinel in a request head that is not going to a terminated connection.
    pub(crate) fn leak_in_head(&self, h: &http::Head) -> Option<crate::credentials::Leak> {
        let inject = self.cfg.inject.as_ref()?;
        std::iter::once(h.target.as_bytes())
            .chain(h.headers.iter().map(|(_, v)| v.as_bytes()))
            .find_map(|d| inject.secrets.any_sentinel(d))
    }

    fn token_ok(&self, presented: Option<&[u8]>) -> bool {
        match (&self.cfg.token, presented) {
            (None, _) => true,
            (Some(t), Some(p)) => ct_eq(t.as_bytes(), p),
            (Some(_), None) => false,
        }
    }

    /// Check `Proxy-Authorization: Basic base64(user:token)`.
    pub(crate) fn proxy_auth_ok(&self, header: Option<&str>) -> bool {
        if self.cfg.token.is_none() {
            return true;
        }
        let Some(h) = header else { return false };
        let Some((scheme, b64)) = h.trim().split_once(' ') else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("basic") {
            return false;
        }
        let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else {
            return false;
        };
        let Some(colon) = raw.iter().position(|&b| b == b':') else {
            return false;
        };
        self.token_ok(Some(&raw[colon + 1..]))
    }
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Read more bytes into `buf` before `deadline`; false on EOF, error, timeout or
/// when `buf` is full.
async fn read_more<S: Io>(s: &mut S, buf: &mut BytesMut, deadline: Instant) -> bool {
    if buf.len() >= MAX_PENDING {
        return false;
    }
    buf.reserve(4096);
    matches!(timeout_at(deadline, s.read_buf(buf)).await, Ok(Ok(n)) if n > 0)
}

pub(crate) fn forbidden(host: &str, port: u16, v: &Verdict) -> Vec<u8> {
    simple_response(403, "Forbidden", &forbidden_body(host, port, v))
}

/// The 403 body: which rule, why, and how to allow it.
pub(crate) fn forbidden_body(host: &str, port: u16, v: &Verdict) -> String {
    let rule = v
        .rule
        .clone()
        .unwrap_or_else(|| "no rule in [network] allow matches".to_string());
    if rule.starts_with("adversary ") {
        // The rules allowed it; the reviewer (adversary.review) had the last word.
        return format!(
            "sandpit: connection to {host}:{port} denied by the reviewer.\nrule: {rule}\nreason: {}\n",
            v.reason
        );
    }
    format!(
        "sandpit: connection to {host}:{port} denied.\nrule: {rule}\nreason: {}\n\
         to allow it: add \"{host}\" to [network] allow in ~/.sandpit/config.toml (a project's \
         .sandpit.toml can only tighten), then start the run again.\n",
        v.reason
    )
}

pub(crate) fn simple_response(code: u16, text: &str, body: &str) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {code} {text}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Sandpit-Denied: 1\r\n",
        body.len()
    );
    if code == 407 {
        r.push_str("Proxy-Authenticate: Basic realm=\"sandpit\"\r\n");
    }
    r.push_str("\r\n");
    r.push_str(body);
    r.into_bytes()
}

fn refusal_response(host: &str, port: u16, r: &Refusal) -> Vec<u8> {
    match r {
        Refusal::Policy(v) => forbidden(host, port, v),
        Refusal::Unreachable(why) => {
            simple_response(502, "Bad Gateway", &format!("sandpit: {why}\n"))
        }
        Refusal::Limit(v) => simple_response(
            503,
            "Service Unavailable",
            &format!("sandpit: {}\n", v.reason),
        ),
    }
}

/// Entry point for every accepted client.
pub(crate) async fn handle<S: Io>(proxy: Arc<Proxy>, mut client: S, need_token: bool) {
    let deadline = Instant::now() + proxy.cfg.handshake_timeout;
    let mut buf = BytesMut::with_capacity(4096);
    if !read_more(&mut client, &mut buf, deadline).await {
        return;
    }
    if buf[0] == socks5::VERSION {
        socks(proxy, client, buf, deadline, need_token).await;
    } else if transparent::looks_like_header(&buf) {
        transparent_conn(proxy, client, buf, deadline).await;
    } else {
        http_entry(proxy, client, buf, deadline, need_token).await;
    }
}

async fn http_entry<S: Io>(
    proxy: Arc<Proxy>,
    mut client: S,
    mut buf: BytesMut,
    deadline: Instant,
    need_token: bool,
) {
    let head = loop {
        match http::parse_head(&buf) {
            Ok(Some((h, len))) => break (h, len),
            Ok(None) => {
                if !read_more(&mut client, &mut buf, deadline).await {
                    return;
                }
            }
            Err(e) => {
                let _ = client
                    .write_all(&simple_response(
                        400,
                        "Bad Request",
                        &format!("sandpit: {e}\n"),
                    ))
                    .await;
                return;
            }
        }
    };
    let (head, len) = head;
    if head.method != "CONNECT" {
        // Absolute-form requests: hyper serves the connection, deciding each request.
        let io = Prefixed::new(buf.freeze(), client);
        super::forward::serve(proxy, io, need_token).await;
        return;
    }
    if need_token && !proxy.proxy_auth_ok(head.get("proxy-authorization")) {
        let _ = client
            .write_all(&simple_response(
                407,
                "Proxy Authentication Required",
                "sandpit: this proxy belongs to another run\n",
            ))
            .await;
        return;
    }
    let authority = match head.target() {
        Ok(Target::Authority(a)) => a.to_string(),
        _ => {
            let _ = client
                .write_all(&simple_response(
                    400,
                    "Bad Request",
                    "sandpit: bad CONNECT target\n",
                ))
                .await;
            return;
        }
    };
    let parsed = match parse_authority(&authority) {
        Ok((h, Some(p))) => Ok((h, p)),
        Ok((_, None)) => Err("CONNECT needs a port".to_string()),
        Err(e) => Err(e.to_string()),
    };
    let (host, port) = match parsed {
        Ok(hp) => hp,
        Err(why) => {
            let r = proxy.deny(Way::Connect, &authority, 0, why);
            let _ = client.write_all(&refusal_response(&authority, 0, &r)).await;
            return;
        }
    };
    let upstream = match proxy.decide_and_dial(Way::Connect, &host, port).await {
        Ok(u) => u,
        Err(r) => {
            let _ = client
                .write_all(&refusal_response(&host.to_string(), port, &r))
                .await;
            return;
        }
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_err()
    {
        return;
    }
    let pending = buf.split_off(len);
    inspect_then_relay(&proxy, Way::Connect, client, pending, upstream, &host, port).await;
}

async fn socks<S: Io>(
    proxy: Arc<Proxy>,
    mut client: S,
    mut buf: BytesMut,
    deadline: Instant,
    need_token: bool,
) {
    let methods = loop {
        match socks5::parse_greeting(&buf) {
            Ok(Some((m, n))) => {
                let _ = buf.split_to(n);
                break m;
            }
            Ok(None) if read_more(&mut client, &mut buf, deadline).await => {}
            _ => return,
        }
    };
    let userpass = methods.contains(&socks5::METHOD_USERPASS);
    let method = if need_token || (userpass && !methods.contains(&socks5::METHOD_NONE)) {
        if userpass {
            socks5::METHOD_USERPASS
        } else {
            socks5::METHOD_UNACCEPTABLE
        }
    } else if methods.contains(&socks5::METHOD_NONE) {
        socks5::METHOD_NONE
    } else {
        socks5::METHOD_UNACCEPTABLE
    };
    if client.write_all(&[socks5::VERSION, method]).await.is_err()
        || method == socks5::METHOD_UNACCEPTABLE
    {
        return;
    }
    if method == socks5::METHOD_USERPASS {
        let socks5::UserPass { pass, .. } = loop {
            match socks5::parse_userpass(&buf) {
                Ok(Some((up, n))) => {
                    let _ = buf.split_to(n);
                    break up;
                }
                Ok(None) if read_more(&mut client, &mut buf, deadline).await => {}
                _ => return,
            }
        };
        let ok = !need_token || proxy.token_ok(Some(&pass));
        if client
            .write_all(&[1, if ok { 0 } else { 1 }])
            .await
            .is_err()
            || !ok
        {
            return;
        }
    }
    let req = loop {
        match socks5::parse_request(&buf) {
            Ok(Some((r, n))) => {
                let _ = buf.split_to(n);
                break r;
            }
            Ok(None) if read_more(&mut client, &mut buf, deadline).await => {}
            Ok(None) => return,
            Err(socks5::SocksError::AddressType(_)) => {
                let _ = client
                    .write_all(&socks5::reply(socks5::REP_ATYP_UNSUPPORTED))
                    .await;
                return;
            }
            Err(_) => {
                let _ = client.write_all(&socks5::reply(socks5::REP_FAILURE)).await;
                return;
            }
        }
    };
    if req.cmd != socks5::CMD_CONNECT {
        let _ = client
            .write_all(&socks5::reply(socks5::REP_CMD_UNSUPPORTED))
            .await;
        return;
    }
    let host = match &req.dest {
        socks5::Dest::Ip(ip) => Host::Ip(canonical_ip(*ip)),
        socks5::Dest::Domain(d) => match canonical_host(d) {
            Ok(h) => h,
            Err(e) => {
                proxy.deny(Way::Socks5, d, req.port, e.to_string());
                let _ = client
                    .write_all(&socks5::reply(socks5::REP_NOT_ALLOWED))
                    .await;
                return;
            }
        },
    };
    let upstream = match proxy.decide_and_dial(Way::Socks5, &host, req.port).await {
        Ok(u) => u,
        Err(r) => {
            let code = match r {
                Refusal::Policy(_) => socks5::REP_NOT_ALLOWED,
                Refusal::Unreachable(_) => socks5::REP_HOST_UNREACHABLE,
                Refusal::Limit(_) => socks5::REP_FAILURE,
            };
            let _ = client.write_all(&socks5::reply(code)).await;
            return;
        }
    };
    if client
        .write_all(&socks5::reply(socks5::REP_OK))
        .await
        .is_err()
    {
        return;
    }
    inspect_then_relay(&proxy, Way::Socks5, client, buf, upstream, &host, req.port).await;
}

async fn transparent_conn<S: Io>(
    proxy: Arc<Proxy>,
    mut client: S,
    mut buf: BytesMut,
    deadline: Instant,
) {
    let header = loop {
        match transparent::parse(&buf) {
            Ok(Some((h, n))) => {
                let _ = buf.split_to(n);
                break h;
            }
            Ok(None) if read_more(&mut client, &mut buf, deadline).await => {}
            _ => return,
        }
    };
    if proxy.cfg.token.is_some() && !proxy.token_ok(header.token.as_deref().map(str::as_bytes)) {
        return;
    }
    let port = header.original.port();
    let orig = Host::Ip(canonical_ip(header.original.ip()));
    let host = match &header.name {
        Some(n) => match canonical_host(n) {
            Ok(h) => h,
            Err(e) => {
                proxy.deny(Way::Transparent, n, port, e.to_string());
                return;
            }
        },
        None => {
            // No name from the interposer: take it from the client's first bytes.
            let wait = Instant::now() + proxy.cfg.first_data_wait;
            if buf.is_empty() {
                // A silent client (or a server-speaks-first protocol): the address decides.
                let _ = read_more(&mut client, &mut buf, wait.min(deadline)).await;
            }
            match first_name(&mut client, &mut buf, deadline).await {
                Named::Name(h) => h,
                Named::Unnamed => orig.clone(),
                Named::Bad(why) => {
                    proxy.deny(Way::Transparent, &orig.to_string(), port, why);
                    return;
                }
            }
        }
    };
    let upstream = match proxy.decide_and_dial(Way::Transparent, &host, port).await {
        Ok(u) => u,
        Err(r) => {
            if http::looks_like_http(&buf) {
                let _ = client
                    .write_all(&refusal_response(&host.to_string(), port, &r))
                    .await;
            }
            return;
        }
    };
    inspect_then_relay(&proxy, Way::Transparent, client, buf, upstream, &host, port).await;
}

enum Named {
    Name(Host),
    Unnamed,
    Bad(String),
}

/// The name the client's first bytes carry (TLS SNI or HTTP Host), reading until it
/// can be told.
async fn first_name<S: Io>(client: &mut S, buf: &mut BytesMut, deadline: Instant) -> Named {
    loop {
        if buf.is_empty() {
            return Named::Unnamed;
        }
        if sni::looks_like_tls(buf) {
            match sni::parse(buf) {
                Sni::Incomplete => {}
                Sni::Name(n) => {
                    return match canonical_host(&n) {
                        Ok(h) => Named::Name(h),
                        Err(e) => Named::Bad(format!("TLS server name {n:?}: {e}")),
                    }
                }
                // Unreadable: only an IP rule can allow it.
                Sni::Missing | Sni::Ech | Sni::Malformed(_) => return Named::Unnamed,
            }
        } else if http::looks_like_http(&buf[..buf.len().min(17)]) {
            match http::parse_head(buf) {
                Ok(None) => {}
                Ok(Some((h, _))) => {
                    return match request_host(&h) {
                        Ok(Some(host)) => Named::Name(host),
                        Ok(None) => Named::Unnamed,
                        Err(e) => Named::Bad(e),
                    }
                }
                Err(e) => return Named::Bad(format!("unreadable HTTP request: {e}")),
            }
        } else {
            return Named::Unnamed;
        }
        if !read_more(client, buf, deadline).await {
            return Named::Bad("client stopped before its first message was complete".into());
        }
    }
}

/// The host an HTTP request names (absolute-form authority and Host must agree). A
/// `CONNECT` inside a connection is refused: a tunnel is opened only by a CONNECT to
/// sandpit's proxy itself, decided by its authority (as hyper's way in answers a
/// CONNECT that is not the first request with 400).
fn request_host(h: &http::Head) -> Result<Option<Host>, String> {
    if h.method == "CONNECT" {
        return Err(format!(
            "CONNECT {} inside a connection: a tunnel is opened only by a CONNECT to the proxy itself",
            h.target
        ));
    }
    let host_hdr = match h.host() {
        Some(v) => Some(
            parse_authority(v)
                .map_err(|e| format!("Host header: {e}"))?
                .0,
        ),
        None => None,
    };
    let target = match h.target().map_err(|e| e.to_string())? {
        Target::Absolute { authority, .. } => Some(
            parse_authority(authority)
                .map_err(|e| format!("request URI: {e}"))?
                .0,
        ),
        _ => None,
    };
    match (target, host_hdr) {
        (Some(t), Some(hh)) if t != hh => Err(format!(
            "request URI host {t} and Host header {hh} disagree"
        )),
        (Some(t), _) => Ok(Some(t)),
        (None, Some(hh)) => Ok(Some(hh)),
        (None, None) if h.minor == 0 => Ok(None),
        (None, None) => Err("HTTP/1.1 request without Host".into()),
    }
}

/// Does a TLS ClientHello agree with the decided `host`? `Ok(false)`: need more.
fn check_tls(proxy: &Proxy, buf: &[u8], host: &Host, port: u16) -> Result<bool, String> {
    match sni::parse(buf) {
        Sni::Incomplete => Ok(false),
        Sni::Name(n) => {
            let sni_host = canonical_host(&n).map_err(|e| format!("TLS server name: {e}"))?;
            match host {
                Host::Name(_) if sni_host == *host => Ok(true),
                Host::Name(_) => Err(format!(
                    "TLS server name {sni_host} differs from the decided host {host} (domain fronting)"
                )),
                Host::Ip(_) => {
                    let v = proxy.decide_from(&sni_host, port);
                    if v.allow {
                        Ok(true)
                    } else {
                        Err(format!("TLS server name {sni_host} is not allowed: {}", v.reason))
                    }
                }
            }
        }
        Sni::Missing | Sni::Ech | Sni::Malformed(_) if matches!(host, Host::Ip(_)) => Ok(true),
        Sni::Missing => Err(format!("TLS to {host} without a server name")),
        Sni::Ech => Err(format!(
            "TLS to {host} with Encrypted Client Hello hides the server name"
        )),
        Sni::Malformed(why) => Err(format!("unreadable TLS ClientHello: {why}")),
    }
}

/// [`check_request`], no sentinel of this run's credentials in the head (plain HTTP
/// never carries a real value, and a sentinel in it is an attempt to send one), and
/// `[network.http]` on the method and path.
fn checked_request(proxy: &Proxy, h: &http::Head, host: &Host, port: u16) -> Result<(), String> {
    check_request(h, host)?;
    if let Some(leak) = proxy.leak_in_head(h) {
        return Err(format!(
            "{} ({})",
            leak.reason(&host.to_string()),
            leak.rule
        ));
    }
    // [network.http]: method and path.
    let target = match h.target() {
        Ok(Target::Absolute { path, .. }) if path.starts_with('/') => path.to_string(),
        Ok(Target::Absolute { path, .. }) => format!("/{path}"),
        Ok(Target::Origin(p)) => p.to_string(),
        _ => "/".to_string(),
    };
    let v = proxy.decide.http(&h.method, "http", host, port, &target);
    if v.allow {
        return Ok(());
    }
    Err(match v.rule {
        Some(r) => format!("{} ({r})", v.reason),
        None => v.reason,
    })
}

/// Every HTTP request on a tunnel must name the decided host.
fn check_request(h: &http::Head, host: &Host) -> Result<(), String> {
    match request_host(h)? {
        Some(c) if c != *host => Err(format!(
            "HTTP request for {c} inside a connection decided for {host}"
        )),
        _ => Ok(()),
    }
}

/// Read the client's first bytes (unless the server speaks first), check they agree
/// with the decided host, then relay both ways. Plain HTTP keeps being checked,
/// request by request.
async fn inspect_then_relay<S: Io>(
    proxy: &Proxy,
    way: Way,
    mut client: S,
    mut pending: BytesMut,
    mut upstream: TcpStream,
    host: &Host,
    port: u16,
) {
    if pending.is_empty() {
        let idle = Instant::now() + proxy.cfg.idle_timeout;
        pending.reserve(4096);
        tokio::select! {
            r = timeout_at(idle, client.read_buf(&mut pending)) => {
                if !matches!(r, Ok(Ok(n)) if n > 0) {
                    return;
                }
            }
            r = upstream.readable() => {
                if r.is_err() {
                    return;
                }
            }
        }
    }
    if sni::looks_like_tls(&pending) {
        let deadline = Instant::now() + proxy.cfg.handshake_timeout;
        loop {
            match check_tls(proxy, &pending, host, port) {
                Ok(true) => break,
                Ok(false) => {
                    if !read_more(&mut client, &mut pending, deadline).await {
                        proxy.deny(
                            way,
                            &host.to_string(),
                            port,
                            "TLS ClientHello incomplete or too large",
                        );
                        return;
                    }
                }
                Err(why) => {
                    proxy.deny(way, &host.to_string(), port, why);
                    return;
                }
            }
        }
        if let Some(inject) = proxy.cfg.inject.as_ref().filter(|i| i.terminates(host)) {
            super::mitm::serve(proxy, inject, way, client, pending, upstream, host, port).await;
            return;
        }
    } else if http::looks_like_http(&pending[..pending.len().min(17)]) {
        http_tunnel(proxy, way, client, pending, upstream, host, port).await;
        return;
    }
    if upstream.write_all(&pending).await.is_err() {
        return;
    }
    drop(pending);
    super::relay::relay(client, upstream, proxy.cfg.splice).await;
}

/// Whether the response direction reads the server's first response head: only when
/// the first request asked to switch protocols (`Upgrade`), so an ordinary stream's
/// responses are relayed as before, untouched.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Watch {
    /// The first request head is not complete yet.
    Undecided,
    Yes,
    No,
}

/// A tunnel's [`Watch`], shared by its two directions; decided once.
struct WatchCell(AtomicU8);

impl WatchCell {
    fn new(w: Watch) -> WatchCell {
        WatchCell(AtomicU8::new(w as u8))
    }
    /// Decide `w` unless already decided; the decided value.
    fn decide(&self, w: Watch) -> Watch {
        match self.0.compare_exchange(
            Watch::Undecided as u8,
            w as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => w,
            Err(x) if x == Watch::Yes as u8 => Watch::Yes,
            Err(_) => Watch::No,
        }
    }
    fn is(&self, w: Watch) -> bool {
        self.0.load(Ordering::Acquire) == w as u8
    }
}

/// After client bytes were fed: settle what the response direction watches for.
fn settle(
    stream: &mut http::RequestStream,
    watch: &WatchCell,
    out: &mut Vec<u8>,
    check: &mut dyn FnMut(&http::Head) -> Result<(), String>,
) -> Result<(), http::StreamError> {
    let w = match stream.want() {
        http::Want::Unknown => return Ok(()),
        http::Want::Answer => Watch::Yes,
        http::Want::Nothing => Watch::No,
    };
    if watch.decide(w) == Watch::No && w == Watch::Yes {
        // The server spoke before the first request was complete: its answer to the
        // request cannot be told apart, so the stream stays checked.
        stream.answer(false, out, check)?;
    }
    Ok(())
}

/// Relay a plain-HTTP tunnel, checking every request head before it is forwarded.
/// Responses are not inspected, so that direction is an ordinary relay (splice on
/// Linux once it carries bulk data) — except the start of the response stream when the
/// first request asked to switch protocols: the client's later bytes pass unchecked
/// only once the server answered it `101`.
async fn http_tunnel<S: Io>(
    proxy: &Proxy,
    way: Way,
    mut client: S,
    first: BytesMut,
    upstream: TcpStream,
    host: &Host,
    port: u16,
) {
    let mut stream = http::RequestStream::new();
    let mut out = Vec::with_capacity(first.len());
    let mut check = |h: &http::Head| checked_request(proxy, h, host, port);
    let Some(c) = super::relay::side(&client) else {
        // No way in yields another kind of client; a switch is not followed here.
        let watch = WatchCell::new(Watch::No);
        if let Err(e) = stream
            .feed(&first, &mut out, &mut check)
            .and_then(|()| settle(&mut stream, &watch, &mut out, &mut check))
        {
            return refuse_first(proxy, way, &mut client, host, port, e).await;
        }
        return http_tunnel_generic(proxy, way, client, out, stream, upstream, host, port).await;
    };
    let watch = WatchCell::new(Watch::Undecided);
    if let Err(e) = stream
        .feed(&first, &mut out, &mut check)
        .and_then(|()| settle(&mut stream, &watch, &mut out, &mut check))
    {
        return refuse_first(proxy, way, &mut client, host, port, e).await;
    }
    let (answer_tx, answer_rx) = tokio::sync::oneshot::channel::<bool>();
    let u = super::relay::Side::Tcp(&upstream);
    let refused = |e: http::StreamError| proxy.deny(way, &host.to_string(), port, e.to_string());
    let c2u = async {
        let mut answer_rx = Some(answer_rx);
        let mut buf = vec![0u8; RELAY_BUF];
        loop {
            super::relay::write_all(u, &out).await.map_err(drop)?;
            out.clear();
            if stream.is_waiting() {
                let rx = answer_rx.take().ok_or(())?;
                let switched = rx.await.unwrap_or(false);
                stream
                    .answer(switched, &mut out, &mut check)
                    .map_err(|e| drop(refused(e)))?;
                continue;
            }
            if stream.is_opaque() {
                return super::relay::one_way(c, u, proxy.cfg.splice)
                    .await
                    .map_err(drop);
            }
            let n = super::relay::read(c, &mut buf).await.map_err(drop)?;
            if n == 0 {
                u.shutdown_write();
                return Ok(());
            }
            stream
                .feed(&buf[..n], &mut out, &mut check)
                .and_then(|()| settle(&mut stream, &watch, &mut out, &mut check))
                .map_err(|e| drop(refused(e)))?;
        }
    };
    let u2c = async {
        let answer = if watch.is(Watch::No) {
            None
        } else {
            first_answer(u, c, &watch).await.ok().flatten()
        };
        match answer {
            Some(switched) => drop(answer_tx.send(switched)),
            // No answer to wait for: the stream stays checked.
            None => drop(answer_tx),
        }
        let _ = super::relay::one_way(u, c, proxy.cfg.splice).await;
        c.shutdown_write();
        Ok::<(), ()>(())
    };
    let _ = tokio::try_join!(c2u, u2c);
}

/// Deny a tunnel whose first request is refused, with a 403 to the client.
async fn refuse_first<S: Io>(
    proxy: &Proxy,
    way: Way,
    client: &mut S,
    host: &Host,
    port: u16,
    e: http::StreamError,
) {
    let why = e.to_string();
    proxy.deny(way, &host.to_string(), port, why.clone());
    let _ = client
        .write_all(&forbidden(
            &host.to_string(),
            port,
            &Verdict::deny(None, why),
        ))
        .await;
}

/// Relay the server's first bytes to the client and, when the first request asked to
/// switch protocols, read the start of the response for the answer to it
/// (`Some(true)`: `101`). Returns `None` at once when the server spoke before that
/// request was complete.
async fn first_answer(
    u: super::relay::Side<'_>,
    c: super::relay::Side<'_>,
    watch: &WatchCell,
) -> std::io::Result<Option<bool>> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut start = http::ResponseStart::new();
    loop {
        let n = super::relay::read(u, &mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        let w = watch.decide(Watch::No);
        super::relay::write_all(c, &buf[..n]).await?;
        if w == Watch::No {
            return Ok(None);
        }
        if let Some(switched) = start.feed(&buf[..n]) {
            return Ok(Some(switched));
        }
    }
}

/// [`http_tunnel`] for a client stream of another type, with user-space copies.
#[allow(clippy::too_many_arguments)]
async fn http_tunnel_generic<S: Io>(
    proxy: &Proxy,
    way: Way,
    client: S,
    mut out: Vec<u8>,
    mut stream: http::RequestStream,
    upstream: TcpStream,
    host: &Host,
    port: u16,
) {
    let mut check = |h: &http::Head| checked_request(proxy, h, host, port);
    let watch = WatchCell::new(Watch::No);
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut ur, mut uw) = upstream.into_split();
    let c2u = async {
        if uw.write_all(&out).await.is_err() {
            return Err(());
        }
        let mut buf = vec![0u8; RELAY_BUF];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) => {
                    let _ = uw.shutdown().await;
                    return Ok(());
                }
                Ok(n) => n,
                Err(_) => return Err(()),
            };
            out.clear();
            if let Err(e) = stream
                .feed(&buf[..n], &mut out, &mut check)
                .and_then(|()| settle(&mut stream, &watch, &mut out, &mut check))
            {
                proxy.deny(way, &host.to_string(), port, e.to_string());
                return Err(());
            }
            if uw.write_all(&out).await.is_err() {
                return Err(());
            }
        }
    };
    let u2c = async {
        let _ = tokio::io::copy(&mut ur, &mut cw).await;
        let _ = cw.shutdown().await;
    };
    tokio::pin!(c2u, u2c);
    let (mut c2u_done, mut u2c_done) = (false, false);
    while !(c2u_done && u2c_done) {
        tokio::select! {
            r = &mut c2u, if !c2u_done => {
                if r.is_err() {
                    return;
                }
                c2u_done = true;
            }
            _ = &mut u2c, if !u2c_done => u2c_done = true,
        }
    }
}
