//! The network path of `sandpit run` on macOS, exercised on this machine: the proxy
//! served on a loopback TCP listener bound *before* the fork (`serve_tcp_std`, as
//! the macOS launcher binds it so the Seatbelt profile can name the port). Clients
//! reach it the two ways a macOS run does: proxy variables (HTTP proxy with the
//! run's token) and the interposer's transparent redirect line. Each denial is
//! judged by its effect — the `blocked.test` sink received nothing — beside a
//! positive control. (Seatbelt itself is not run here.) The DNS responder the
//! macOS interposer's resolver hooks ask is served the same way: DNS over TCP on a
//! loopback listener bound before the fork (`DnsServer::serve_tcp_std`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod proxy_support;

use std::sync::Arc;
use std::time::Duration;

use proxy_support::*;
use sandpit::dns::{Resolver, Upstream};
use sandpit::proxy::decide::policy_from_toml;
use sandpit::proxy::{MemorySink, Proxy, ProxyConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Loopback {
    allowed: Sink,
    blocked: Sink,
    _upstream: FakeUpstream,
    _running: sandpit::proxy::Running,
    addr: std::net::SocketAddr,
}

/// Bind with std first (single-threaded launcher), serve later from the runtime.
async fn loopback(token: Option<&str>) -> Result<Loopback, sandpit::proxy::ProxyError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let allowed = Sink::start("127.0.0.2", "allowed").await;
    let blocked = Sink::start("127.0.0.1", "blocked").await;
    let upstream = FakeUpstream::start().await;
    let policy = policy_from_toml(POLICY).unwrap();
    let resolver = Arc::new(Resolver::new(Upstream::Udp(upstream.addr)));
    let cfg = ProxyConfig {
        token: token.map(str::to_string),
        first_data_wait: Duration::from_millis(300),
        ..ProxyConfig::default()
    };
    let audit = Arc::new(MemorySink::default());
    let proxy = Proxy::new(Arc::new(policy), resolver, audit, cfg);
    let running = proxy.serve_tcp_std(listener)?;
    assert_eq!(running.local_addr(), Some(addr));
    Ok(Loopback {
        allowed,
        blocked,
        _upstream: upstream,
        _running: running,
        addr,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_variables_reach_the_loopback_proxy() {
    let w = loopback(Some(TOKEN)).await.unwrap();
    let a = format!("allowed.test:{}", w.allowed.port());
    let ok = http_get(w.addr, &format!("http://{a}/x"), &a).await;
    assert!(ok.contains("sink:allowed"), "positive control: {ok}");
    let b = format!("blocked.test:{}", w.blocked.port());
    let denied = http_get(w.addr, &format!("http://{b}/x"), &b).await;
    assert!(denied.starts_with("HTTP/1.1 403"), "{denied}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    w.blocked
        .assert_untouched("http proxy on the loopback listener");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_token_gets_nothing_through() {
    let w = loopback(Some(TOKEN)).await.unwrap();
    // Positive control with the token first.
    let a = format!("allowed.test:{}", w.allowed.port());
    assert!(http_get(w.addr, &format!("http://{a}/x"), &a)
        .await
        .contains("sink:allowed"));
    // Another local process (no token) asks for the allowed host.
    let req = format!("GET http://{a}/x HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\n\r\n");
    let reply = raw_exchange(w.addr, req.as_bytes()).await;
    assert!(
        !reply.contains("sink:allowed"),
        "served without the token: {reply}"
    );
    assert!(reply.starts_with("HTTP/1.1 407"), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interposers_redirect_line_is_judged_by_name() {
    let w = loopback(Some(TOKEN)).await.unwrap();
    let mut s = transparent(w.addr, TOKEN, w.allowed.addr, Some("allowed.test")).await;
    s.write_all(&origin_get("allowed.test")).await.unwrap();
    let mut body = vec![];
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut body)).await;
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("sink:allowed"), "positive control: {body}");

    let mut s = transparent(w.addr, TOKEN, w.blocked.addr, Some("blocked.test")).await;
    let _ = s.write_all(&origin_get("blocked.test")).await;
    let mut rest = vec![];
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    w.blocked
        .assert_untouched("transparent redirect on the loopback listener");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_proxy_without_a_token_is_refused() {
    // Any local process can reach 127.0.0.1: serving there without a per-run token
    // would be an open proxy.
    assert!(matches!(
        loopback(None).await,
        Err(sandpit::proxy::ProxyError::TokenRequired)
    ));
}

/// Ask the DNS-over-TCP responder at `addr` as the macOS interposer does: one
/// connection, several questions.
async fn ask_tcp(
    s: &mut tokio::net::TcpStream,
    id: u16,
    name: &str,
    qtype: u16,
) -> (u8, Vec<std::net::IpAddr>) {
    use sandpit::dns::message;
    let q = message::build_query(id, name, qtype).unwrap();
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).await.unwrap();
    let mut len = [0u8; 2];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut len))
        .await
        .unwrap()
        .unwrap();
    let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut m).await.unwrap();
    message::parse_answer(&m, id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loopback_dns_responder_answers_by_the_policy_and_names_the_rule() {
    use sandpit::dns::message::{RCODE_NOERROR, RCODE_REFUSED, TYPE_A, TYPE_AAAA};
    let upstream = FakeUpstream::start().await;
    let audit = Arc::new(MemorySink::default());
    let policy = POLICY.replace(
        "allow = [\"allowed.test\", \"sneaky.test\", \"public.test\"]",
        "allow = [\"allowed.test\", \"sneaky.test\", \"public.test\"]\nblock = [\"exfil.public.test\"]",
    );
    assert_ne!(policy, POLICY);
    let server = sandpit::dns::DnsServer::new(
        Arc::new(policy_from_toml(&policy).unwrap()),
        Arc::new(Resolver::new(Upstream::Udp(upstream.addr))),
        audit.clone(),
    );
    // Bound first with std, as the launcher does before the fork.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let running = server.serve_tcp_std(listener).unwrap();
    assert_eq!(running.local_addr(), Some(addr));

    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    // Positive control: an allowed name is answered (A, then AAAA on the same
    // connection, as getaddrinfo asks).
    assert_eq!(
        ask_tcp(&mut s, 1, "public.test", TYPE_A).await,
        (RCODE_NOERROR, vec!["93.184.216.34".parse().unwrap()])
    );
    assert_eq!(
        ask_tcp(&mut s, 2, "public.test", TYPE_AAAA).await.0,
        RCODE_NOERROR
    );
    // A blocked name and a name no rule allows: refused, never asked upstream.
    assert_eq!(
        ask_tcp(&mut s, 3, "exfil.public.test", TYPE_A).await,
        (RCODE_REFUSED, vec![])
    );
    assert_eq!(
        ask_tcp(&mut s, 4, "c2VjcmV0.attacker.test", TYPE_A).await,
        (RCODE_REFUSED, vec![])
    );
    let asked = upstream.questions();
    assert!(asked.iter().all(|q| q == "public.test"), "{asked:?}");
    // The audit record of the refusal names the rule that decided it.
    let events = audit.events();
    let blocked = events
        .iter()
        .find(|e| e.host == "exfil.public.test")
        .expect("the blocked name is audited");
    assert!(!blocked.allow);
    let rule = blocked.rule.as_deref().unwrap_or_default();
    assert!(rule.contains("block"), "rule {rule:?}: {blocked:?}");
    eprintln!("refusal audited with rule {rule:?}");
    assert!(events
        .iter()
        .any(|e| !e.allow && e.host.contains("attacker")));
}
