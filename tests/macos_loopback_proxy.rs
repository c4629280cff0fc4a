//! The network path of `sandpit run` on macOS, exercised on this machine: the proxy
//! served on a loopback TCP listener bound *before* the fork (`serve_tcp_std`, as
//! the macOS launcher binds it so the Seatbelt profile can name the port). Clients
//! reach it the two ways a macOS run does: proxy variables (HTTP proxy with the
//! run's token) and the interposer's transparent redirect line. Each denial is
//! judged by its effect — the `blocked.test` sink received nothing — beside a
//! positive control. (Seatbelt itself is not run here.)
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
