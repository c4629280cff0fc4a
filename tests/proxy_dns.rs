//! sandpit's DNS responder: allowed names are answered (static entries first, then
//! the upstream), everything else is REFUSED and never reaches the upstream — a fake
//! upstream on loopback records every question it gets.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod proxy_support;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use proxy_support::FakeUpstream;
use sandpit::dns::message::{self, RCODE_NOERROR, RCODE_REFUSED, TYPE_A, TYPE_AAAA};
use sandpit::dns::{DnsServer, Resolver, Upstream};
use sandpit::proxy::decide::policy_from_toml;
use sandpit::proxy::MemorySink;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

struct Dns {
    upstream: FakeUpstream,
    udp: SocketAddr,
    tcp: SocketAddr,
    audit: Arc<MemorySink>,
    _running: Vec<sandpit::proxy::Running>,
}

async fn start(policy: &str) -> Dns {
    let upstream = FakeUpstream::start().await;
    let audit = Arc::new(MemorySink::default());
    let server = DnsServer::new(
        Arc::new(policy_from_toml(policy).unwrap()),
        Arc::new(Resolver::new(Upstream::Udp(upstream.addr))),
        audit.clone(),
    );
    let u = server
        .serve_udp("127.0.0.4:0".parse().unwrap())
        .await
        .unwrap();
    let t = server
        .serve_tcp("127.0.0.4:0".parse().unwrap())
        .await
        .unwrap();
    Dns {
        udp: u.local_addr().unwrap(),
        tcp: t.local_addr().unwrap(),
        upstream,
        audit,
        _running: vec![u, t],
    }
}

async fn udp_ask(server: SocketAddr, name: &str, qtype: u16) -> (u8, Vec<IpAddr>) {
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let q = message::build_query(0x4242, name, qtype).unwrap();
    s.send_to(&q, server).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.recv(&mut buf))
        .await
        .unwrap()
        .unwrap();
    message::parse_answer(&buf[..n], 0x4242).unwrap()
}

async fn tcp_ask(server: SocketAddr, name: &str, qtype: u16) -> (u8, Vec<IpAddr>) {
    let mut s = TcpStream::connect(server).await.unwrap();
    let q = message::build_query(0x4343, name, qtype).unwrap();
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).await.unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).await.unwrap();
    let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut msg).await.unwrap();
    message::parse_answer(&msg, 0x4343).unwrap()
}

const POLICY: &str = proxy_support::POLICY;

use Forwarded::{Asked, Never};
use Via::{Tcp, Udp};

/// How a question reaches the responder.
#[derive(Clone, Copy, Debug)]
enum Via {
    Udp,
    Tcp,
}

/// Whether the upstream may hear of a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Forwarded {
    /// Never: refused, answered from a static entry, or a type not forwarded.
    Never,
    /// Asked (an allowed name without a static entry).
    Asked,
}

/// TXT, a record type sandpit answers empty for an allowed name.
const TYPE_TXT: u16 = 16;

/// A question (transport, name, type) and the answer it must get: the rcode, the
/// addresses, and whether the upstream heard of it.
type Question = (
    Via,
    &'static str,
    u16,
    u8,
    &'static [&'static str],
    Forwarded,
);

/// The questions under [`POLICY`].
#[rustfmt::skip]
const ANSWERS: &[Question] = &[
    // Names outside the policy, however spelled or nested: exfiltration by query.
    (Udp, "blocked.test",                     TYPE_A,    RCODE_REFUSED, &[],                Never),
    (Tcp, "blocked.test",                     TYPE_AAAA, RCODE_REFUSED, &[],                Never),
    (Udp, "c2VjcmV0LWtleQ.blocked.test",      TYPE_A,    RCODE_REFUSED, &[],                Never),
    (Tcp, "c2VjcmV0LWtleQ.blocked.test",      TYPE_AAAA, RCODE_REFUSED, &[],                Never),
    (Udp, "c2VjcmV0LWtleQ.attacker.example",  TYPE_A,    RCODE_REFUSED, &[],                Never),
    (Tcp, "c2VjcmV0LWtleQ.attacker.example",  TYPE_AAAA, RCODE_REFUSED, &[],                Never),
    (Udp, "aws-secret-1234.evil.test",        TYPE_A,    RCODE_REFUSED, &[],                Never),
    (Tcp, "aws-secret-1234.evil.test",        TYPE_AAAA, RCODE_REFUSED, &[],                Never),
    (Udp, "allowed.test.evil.test",           TYPE_A,    RCODE_REFUSED, &[],                Never),
    (Tcp, "allowed.test.evil.test",           TYPE_AAAA, RCODE_REFUSED, &[],                Never),
    (Udp, "sub.allowed.test",                 TYPE_A,    RCODE_REFUSED, &[],                Never),
    (Tcp, "sub.allowed.test",                 TYPE_AAAA, RCODE_REFUSED, &[],                Never),
    // An allowed name, a record type sandpit does not forward (TXT): empty.
    (Udp, "public.test",                      TYPE_TXT,  RCODE_NOERROR, &[],                Never),
    // Static entries answer first, by either transport, in any case.
    (Udp, "allowed.test",                     TYPE_A,    RCODE_NOERROR, &["127.0.0.2"],     Never),
    (Tcp, "ALLOWED.test",                     TYPE_A,    RCODE_NOERROR, &["127.0.0.2"],     Never),
    (Udp, "allowed.test",                     TYPE_AAAA, RCODE_NOERROR, &[],                Never),
    // The upstream answers 127.0.0.1 for sneaky.test, which the policy does not
    // name: no address.
    (Udp, "sneaky.test",                      TYPE_A,    RCODE_NOERROR, &[],                Asked),
    // The positive control: an allowed name without a static entry goes upstream.
    (Udp, "public.test",                      TYPE_A,    RCODE_NOERROR, &["93.184.216.34"], Asked),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_name_gets_its_answer_and_only_allowed_ones_go_upstream() {
    let d = start(POLICY).await;
    for &(via, name, qtype, rcode, addrs, upstream) in ANSWERS {
        let row = format!("{via:?} {name} type {qtype}");
        let before = d.upstream.questions().len();
        let got = match via {
            Udp => udp_ask(d.udp, name, qtype).await,
            Tcp => tcp_ask(d.tcp, name, qtype).await,
        };
        let want: Vec<IpAddr> = addrs.iter().map(|a| a.parse().unwrap()).collect();
        assert_eq!(got, (rcode, want), "{row}");
        let asked = d.upstream.questions()[before..].to_vec();
        match upstream {
            Never => assert!(asked.is_empty(), "{row}: upstream saw {asked:?}"),
            Asked => assert!(
                !asked.is_empty() && asked.iter().all(|q| q == name),
                "{row}: upstream saw {asked:?}"
            ),
        }
    }
    assert_eq!(
        d.upstream
            .questions()
            .iter()
            .filter(|q| *q == "public.test")
            .count(),
        2,
        "A and AAAA asked"
    );
    assert!(d
        .audit
        .events()
        .iter()
        .any(|e| !e.allow && e.host.contains("attacker")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_allowlist_and_offline_refuse_everything() {
    for policy in [
        "",
        "[network]\nmode = \"offline\"\nallow = [\"public.test\"]\n",
    ] {
        let d = start(policy).await;
        for name in ["public.test", "allowed.test", "blocked.test"] {
            assert_eq!(
                udp_ask(d.udp, name, TYPE_A).await.0,
                RCODE_REFUSED,
                "{policy:?} {name}"
            );
        }
        assert!(d.upstream.questions().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_gets_formerr_or_nothing() {
    let d = start(POLICY).await;
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    s.send_to(&[0x12, 0x34, 0x80, 0, 0, 1], d.udp)
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(5), s.recv(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf[..2], &[0x12, 0x34]);
    assert_eq!(buf[3] & 0x0f, message::RCODE_FORMERR);
    assert!(n >= 12);
    // Positive control: the server still answers afterwards.
    assert_eq!(
        udp_ask(d.udp, "allowed.test", TYPE_A).await.0,
        RCODE_NOERROR
    );
    assert!(d.upstream.questions().is_empty());
}
