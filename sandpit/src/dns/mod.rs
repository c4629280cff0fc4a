//! sandpit's resolver: the sandbox's nameserver (UDP and TCP) and the resolver the
//! proxy dials with. `[network.resolve]` answers first; other names go to the
//! upstream (the system resolver by default) only when the policy allows them, so a
//! query name can never carry data out. Everything else is REFUSED.
pub mod message;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::audit::event::{AuditEvent, AuditSink, Way};
use crate::service::decide::{Decide, Verdict};
use crate::service::Running;
use message::{
    Query, CLASS_IN, RCODE_NOERROR, RCODE_NXDOMAIN, RCODE_REFUSED, RCODE_SERVFAIL, TYPE_A,
    TYPE_AAAA,
};
use sandpit_policy::host::{canonical_host, Host};

#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("{}", .0.reason)]
    Refused(Verdict),
    #[error("{0} does not exist")]
    NxDomain(String),
    #[error("resolving {name} failed: {source}")]
    Upstream {
        name: String,
        source: std::io::Error,
    },
    #[error("resolving {0} timed out")]
    Timeout(String),
    #[error("binding the DNS responder to {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Where allowed names not in `[network.resolve]` are looked up.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// The launcher's own resolver (`getaddrinfo`).
    System,
    /// A DNS server reached over UDP.
    Udp(SocketAddr),
    /// Only `[network.resolve]` answers.
    Nothing,
}

/// The one resolver both the proxy and the DNS responder use.
#[derive(Debug, Clone)]
pub struct Resolver {
    pub upstream: Upstream,
    pub timeout: Duration,
}

impl Resolver {
    pub fn new(upstream: Upstream) -> Resolver {
        Resolver {
            upstream,
            timeout: Duration::from_secs(5),
        }
    }

    /// Addresses of `name` (canonical): the policy must allow looking it up; static
    /// answers first, then the upstream.
    pub async fn lookup(&self, decide: &dyn Decide, name: &str) -> Result<Vec<IpAddr>, DnsError> {
        let v = decide.lookup(name);
        if !v.allow {
            return Err(DnsError::Refused(v));
        }
        if let Some(a) = decide.static_answers(name) {
            return Ok(a);
        }
        let fut = async {
            match &self.upstream {
                Upstream::Nothing => Err(DnsError::NxDomain(name.to_string())),
                Upstream::System => match tokio::net::lookup_host((name, 0)).await {
                    Ok(it) => Ok(it.map(|sa| sa.ip()).collect()),
                    Err(source) => Err(DnsError::Upstream {
                        name: name.to_string(),
                        source,
                    }),
                },
                Upstream::Udp(server) => {
                    let mut all = Vec::new();
                    let mut nx = false;
                    for qtype in [TYPE_A, TYPE_AAAA] {
                        let (rcode, addrs) = udp_query(*server, name, qtype).await?;
                        nx |= rcode == RCODE_NXDOMAIN;
                        all.extend(addrs);
                    }
                    if all.is_empty() && nx {
                        return Err(DnsError::NxDomain(name.to_string()));
                    }
                    Ok(all)
                }
            }
        };
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(DnsError::Timeout(name.to_string())),
        }
    }
}

fn random_u16() -> u16 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() & 0xffff) as u16
}

async fn udp_query(
    server: SocketAddr,
    name: &str,
    qtype: u16,
) -> Result<(u8, Vec<IpAddr>), DnsError> {
    let io = |source| DnsError::Upstream {
        name: name.to_string(),
        source,
    };
    let bind: SocketAddr = if server.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let sock = UdpSocket::bind(bind).await.map_err(io)?;
    sock.connect(server).await.map_err(io)?;
    let id = random_u16();
    let q = message::build_query(id, name, qtype)
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    sock.send(&q).await.map_err(io)?;
    let mut buf = vec![0u8; 4096];
    loop {
        let n = sock.recv(&mut buf).await.map_err(io)?;
        if let Ok(r) = message::parse_answer(&buf[..n], id) {
            return Ok(r);
        }
    }
}

/// The sandbox's nameserver.
pub struct DnsServer {
    pub decide: Arc<dyn Decide>,
    pub resolver: Arc<Resolver>,
    pub audit: Arc<dyn AuditSink>,
    pub ttl: u32,
    pub max_inflight: usize,
}

impl DnsServer {
    pub fn new(
        decide: Arc<dyn Decide>,
        resolver: Arc<Resolver>,
        audit: Arc<dyn AuditSink>,
    ) -> Arc<DnsServer> {
        Arc::new(DnsServer {
            decide,
            resolver,
            audit,
            ttl: 30,
            max_inflight: 256,
        })
    }

    fn audit(&self, host: &str, v: &Verdict) {
        self.audit.record(AuditEvent {
            time: SystemTime::now(),
            way: Way::Dns,
            host: host.to_string(),
            port: 0,
            addr: None,
            allow: v.allow,
            rule: v.rule.clone(),
            reason: v.reason.clone(),
            program: None,
        });
    }

    /// Answer one DNS message (None: not even an id to answer to).
    pub async fn handle(&self, packet: &[u8]) -> Option<Vec<u8>> {
        let q = match message::parse_query(packet) {
            Ok(q) => q,
            Err(_) => return message::message_id(packet).map(message::format_error),
        };
        Some(self.answer(&q).await)
    }

    async fn answer(&self, q: &Query) -> Vec<u8> {
        let refuse = |why: Verdict| {
            self.audit(&q.name, &why);
            message::answer(q, RCODE_REFUSED, &[], 0)
        };
        if q.qclass != CLASS_IN {
            return refuse(Verdict::deny(None, "only class IN is answered"));
        }
        let (host, name) = match canonical_host(&q.name) {
            Ok(Host::Name(n)) => (Host::Name(n.clone()), n),
            Ok(Host::Ip(_)) | Err(_) => {
                return refuse(Verdict::deny(
                    None,
                    format!("{:?} is not a host name sandpit resolves", q.name),
                ))
            }
        };
        let name = name.as_str();
        let v = self.decide.lookup(name);
        if !v.allow {
            return refuse(v);
        }
        if q.qtype != TYPE_A && q.qtype != TYPE_AAAA {
            // Allowed name, other record type: an empty answer, never forwarded.
            self.audit(
                name,
                &Verdict::allow(
                    v.rule.clone(),
                    format!("{name}: record type {} answered empty", q.qtype),
                ),
            );
            return message::answer(q, RCODE_NOERROR, &[], self.ttl);
        }
        match self.resolver.lookup(self.decide.as_ref(), name).await {
            Ok(addrs) => {
                let ok: Vec<IpAddr> = addrs
                    .into_iter()
                    .filter(|a| self.decide.resolved(&host, 0, *a).allow)
                    .collect();
                self.audit(name, &v);
                message::answer(q, RCODE_NOERROR, &ok, self.ttl)
            }
            Err(DnsError::Refused(v)) => refuse(v),
            Err(DnsError::NxDomain(_)) => message::answer(q, RCODE_NXDOMAIN, &[], self.ttl),
            Err(_) => message::answer(q, RCODE_SERVFAIL, &[], 0),
        }
    }

    /// Serve UDP on `addr`.
    pub async fn serve_udp(self: &Arc<Self>, addr: SocketAddr) -> Result<Running, DnsError> {
        let sock = Arc::new(
            UdpSocket::bind(addr)
                .await
                .map_err(|source| DnsError::Bind { addr, source })?,
        );
        let local = sock
            .local_addr()
            .map_err(|source| DnsError::Bind { addr, source })?;
        let me = self.clone();
        let task = tokio::spawn(async move {
            let limit = Arc::new(Semaphore::new(me.max_inflight));
            let mut tasks = JoinSet::new();
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok((n, peer)) = sock.recv_from(&mut buf).await else {
                    continue;
                };
                while tasks.try_join_next().is_some() {}
                let Ok(permit) = limit.clone().try_acquire_owned() else {
                    continue;
                };
                let packet = buf[..n].to_vec();
                let (me, sock) = (me.clone(), sock.clone());
                tasks.spawn(async move {
                    if let Some(out) = me.handle(&packet).await {
                        let _ = sock.send_to(&out, peer).await;
                    }
                    drop(permit);
                });
            }
        });
        Ok(Running::new(local, task))
    }

    /// Serve TCP (2-byte length prefix) on `addr`.
    pub async fn serve_tcp(self: &Arc<Self>, addr: SocketAddr) -> Result<Running, DnsError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| DnsError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| DnsError::Bind { addr, source })?;
        Ok(self.serve_tcp_listener(local, listener))
    }

    /// Serve TCP on a listener bound before (the macOS launcher binds it on
    /// 127.0.0.1 before the fork, so the Seatbelt profile can name its port).
    /// Called from inside the runtime.
    pub fn serve_tcp_std(
        self: &Arc<Self>,
        listener: std::net::TcpListener,
    ) -> Result<Running, DnsError> {
        let local = listener.local_addr().map_err(|source| DnsError::Bind {
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            source,
        })?;
        let err = |source| DnsError::Bind {
            addr: local,
            source,
        };
        listener.set_nonblocking(true).map_err(err)?;
        let listener = TcpListener::from_std(listener).map_err(err)?;
        Ok(self.serve_tcp_listener(local, listener))
    }

    fn serve_tcp_listener(self: &Arc<Self>, local: SocketAddr, listener: TcpListener) -> Running {
        let me = self.clone();
        let task = tokio::spawn(async move {
            let limit = Arc::new(Semaphore::new(me.max_inflight));
            let mut tasks = JoinSet::new();
            loop {
                let Ok(permit) = limit.clone().acquire_owned().await else {
                    return;
                };
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                while tasks.try_join_next().is_some() {}
                let me = me.clone();
                tasks.spawn(async move {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(30), me.serve_tcp_conn(stream))
                            .await;
                    drop(permit);
                });
            }
        });
        Running::new(local, task)
    }

    async fn serve_tcp_conn(&self, mut s: TcpStream) -> std::io::Result<()> {
        loop {
            let mut len = [0u8; 2];
            if s.read_exact(&mut len).await.is_err() {
                return Ok(());
            }
            let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut msg).await?;
            let Some(out) = self.handle(&msg).await else {
                return Ok(());
            };
            let mut framed = (out.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&out);
            s.write_all(&framed).await?;
        }
    }
}
