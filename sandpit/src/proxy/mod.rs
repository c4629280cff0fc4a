//! The domain-filtering proxy: the sandbox's only way out. It runs in the launcher
//! and decides every TCP connection by name.
//!
//! Ways in (all on one listener, told apart by their first bytes):
//! - transparent: a connection the interposer redirected, opened by the
//!   [`transparent`] handshake line (original `ip:port`, resolved name);
//! - HTTP proxy requests in absolute form (served by hyper, each request decided);
//! - HTTP `CONNECT`;
//! - SOCKS5 with domain names or addresses.
//!
//! Each host is canonicalized once (`sandpit_policy::canonical_host`), decided ([`Decide`]), resolved with
//! sandpit's own [`Resolver`](crate::dns::Resolver), each answer checked against the
//! non-public ranges, and exactly that address dialled. In tunnels the client's first
//! bytes are read before any of them are forwarded: a TLS server name or HTTP Host
//! that disagrees with the decided host closes the connection.
pub mod encoding;
pub mod http;
pub mod limits;
pub mod mitm;
pub mod sni;
pub mod socks5;
pub mod transparent;

mod conn;
mod forward;
mod io;
pub(crate) mod relay;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

// The decision and the audit events the proxy shares with the DNS responder.
pub use crate::audit::event::{AuditEvent, AuditSink, ChannelSink, MemorySink, NullSink, Way};
pub use crate::service::decide::{self, Ask, Asking, Decide, Review, Reviewing, Verdict};
pub use crate::service::Running;
pub use sandpit_policy::host::{canonical_host, canonical_ip, parse_authority, Host, HostError};

use crate::dns::Resolver;
use crate::service::peer::{Program, Run};

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("binding the proxy to {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("a proxy on a TCP port needs a per-run token, so no other run can use it")]
    TokenRequired,
    #[error("setting permissions on {path}: {source}")]
    Permissions {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Limits and the per-run token.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Required on TCP listeners (as the Proxy-Authorization / SOCKS5 password / the
    /// transparent line's token); checked on unix sockets too when set.
    pub token: Option<String>,
    /// Clients handled at once, handshakes included; when all are taken the oldest
    /// client still in its handshake is closed to make room (slow-loris), else the
    /// next one waits in the listen backlog.
    pub max_connections: usize,
    /// `limits.connections`: allowed connections open at once (`None`: no limit).
    pub connections: Option<limits::Limit>,
    /// `limits.connections_per_second`: new allowed connections a second to one host.
    pub connections_per_second: Option<limits::Limit>,
    /// Time for a client to finish its proxy handshake (request head, SOCKS
    /// negotiation, ClientHello).
    pub handshake_timeout: Duration,
    /// Time to connect upstream.
    pub dial_timeout: Duration,
    /// How long a transparent connection without a known name waits for the client's
    /// first bytes (SNI / Host) before deciding on the address alone.
    pub first_data_wait: Duration,
    /// How long a tunnel waits for either side to speak first.
    pub idle_timeout: Duration,
    /// Move bulk tunnel traffic with splice(2) (Linux). On by default: it halves the
    /// proxy's CPU per byte, and on 2026-12-01 it also moved more data per second
    /// (bench/proxy.sh, three runs: 0.62–0.81× direct against 0.50–0.60× for
    /// user-space copies; bench/relay_floor.sh agrees). Off, every tunnel copies
    /// through the relay's growing buffer.
    pub splice: bool,
    /// A reviewer for connections the policy allowed (`adversary.review`).
    pub review: Option<decide::Reviewing>,
    /// Who asks the user about a host the policy denied only for not being in
    /// `network.allow` (`network.ask_on_blocked_host`); `None`: such a denial stands.
    pub ask: Option<decide::Asking>,
    /// The run's credentials and CA (`[credentials]`): TLS to their hosts is
    /// terminated and their sentinels replaced; a sentinel bound anywhere else is
    /// denied.
    pub inject: Option<Arc<mitm::Inject>>,
    /// The run whose processes connect: each TCP client is attributed to the
    /// process holding its socket ([`crate::service::peer`]), for the decision
    /// (`[[network.program]]`) and the record. `None`: no client is attributed, and
    /// a host a program entry names is denied to all.
    pub run: Option<crate::service::peer::Run>,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            token: None,
            max_connections: 4096,
            connections: None,
            connections_per_second: None,
            handshake_timeout: Duration::from_secs(10),
            dial_timeout: Duration::from_secs(10),
            first_data_wait: Duration::from_millis(500),
            idle_timeout: Duration::from_secs(300),
            splice: true,
            review: None,
            ask: None,
            inject: None,
            run: None,
        }
    }
}

pub struct Proxy {
    pub(crate) decide: Arc<dyn Decide>,
    pub(crate) resolver: Arc<Resolver>,
    pub(crate) audit: Arc<dyn AuditSink>,
    pub(crate) cfg: ProxyConfig,
    pub(crate) limits: limits::Limits,
}

impl Proxy {
    pub fn new(
        decide: Arc<dyn Decide>,
        resolver: Arc<Resolver>,
        audit: Arc<dyn AuditSink>,
        cfg: ProxyConfig,
    ) -> Arc<Proxy> {
        let limits =
            limits::Limits::new(cfg.connections.clone(), cfg.connections_per_second.clone());
        Arc::new(Proxy {
            decide,
            resolver,
            audit,
            cfg,
            limits,
        })
    }

    /// Listen on loopback TCP; every client must present the per-run token.
    pub async fn serve_tcp(self: &Arc<Self>, addr: SocketAddr) -> Result<Running, ProxyError> {
        if self.cfg.token.as_deref().is_none_or(str::is_empty) {
            return Err(ProxyError::TokenRequired);
        }
        let bind_err = |source| ProxyError::Bind {
            addr: addr.to_string(),
            source,
        };
        let listener = crate::sys::tcp_listener(addr)
            .and_then(|l| {
                l.set_nonblocking(true)?;
                TcpListener::from_std(l)
            })
            .map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        Ok(Running::new(local, self.accept_loop(listener, true)))
    }

    /// Serve on a loopback TCP listener bound earlier (`sandpit run` on macOS binds
    /// before it forks, so the Seatbelt profile can name the port, and serves once
    /// the command runs). Every client must present the per-run token.
    pub fn serve_tcp_std(
        self: &Arc<Self>,
        listener: std::net::TcpListener,
    ) -> Result<Running, ProxyError> {
        if self.cfg.token.as_deref().is_none_or(str::is_empty) {
            return Err(ProxyError::TokenRequired);
        }
        let err = |source| ProxyError::Bind {
            addr: "a TCP listener".into(),
            source,
        };
        let local = listener.local_addr().map_err(err)?;
        listener.set_nonblocking(true).map_err(err)?;
        let listener = TcpListener::from_std(listener).map_err(err)?;
        Ok(Running::new(local, self.accept_loop(listener, true)))
    }

    /// Listen on a unix socket at `path` (created 0600; must not exist). The kernel
    /// layer bridges the sandbox's proxy address to it.
    pub async fn serve_unix(self: &Arc<Self>, path: &Path) -> Result<Running, ProxyError> {
        let bind_err = |source| ProxyError::Bind {
            addr: path.display().to_string(),
            source,
        };
        let listener = UnixListener::bind(path).map_err(bind_err)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(
                |source| ProxyError::Permissions {
                    path: path.to_path_buf(),
                    source,
                },
            )?;
        }
        Ok(self.serve_unix_listener(listener))
    }

    /// Serve on a unix listener bound earlier: `sandpit run` binds before it forks
    /// (the launcher must be single-threaded then) and serves once the command runs;
    /// connections made in between wait in the backlog.
    pub fn serve_unix_std(
        self: &Arc<Self>,
        listener: std::os::unix::net::UnixListener,
    ) -> Result<Running, ProxyError> {
        let err = |source| ProxyError::Bind {
            addr: "a unix listener".into(),
            source,
        };
        listener.set_nonblocking(true).map_err(err)?;
        let listener = UnixListener::from_std(listener).map_err(err)?;
        Ok(self.serve_unix_listener(listener))
    }

    fn serve_unix_listener(self: &Arc<Self>, listener: UnixListener) -> Running {
        let need_token = self.cfg.token.is_some();
        Running {
            local: None,
            task: self.accept_loop(listener, need_token),
        }
    }

    /// Accept forever, at most `max_connections` handled at once, each connection its
    /// own task. When all are taken, the oldest client still in its handshake is
    /// closed to make room; only when none is does the next wait in the backlog.
    fn accept_loop<L: Accept>(self: &Arc<Self>, listener: L, need_token: bool) -> JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let max = me.cfg.max_connections.max(1);
            let limit = Arc::new(Semaphore::new(max));
            let mut pending = limits::Pending::default();
            let mut tasks = JoinSet::new();
            loop {
                if limit.available_permits() == 0 {
                    while tasks.try_join_next().is_some() {}
                    if limit.available_permits() == 0 {
                        pending.make_room();
                    }
                }
                let Ok(permit) = limit.clone().acquire_owned().await else {
                    return;
                };
                let Ok(stream) = listener.accept_one().await else {
                    // EMFILE and friends: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                while tasks.try_join_next().is_some() {}
                let me = me.clone();
                let slot = Arc::new(limits::Slot::default());
                let peer = Arc::new(Peer::new(L::peer(&stream, me.cfg.run)));
                let task = tasks.spawn(limits::SLOT.scope(
                    slot.clone(),
                    PEER.scope(peer, async move {
                        conn::handle(me, stream, need_token).await;
                        drop(permit);
                    }),
                ));
                pending.push(&slot, task, max);
            }
        })
    }
}

/// A listener the proxy serves: TCP (streams get `TCP_NODELAY`) or unix.
trait Accept: Send + 'static {
    type Stream: io::Io;
    fn accept_one(&self)
        -> impl std::future::Future<Output = std::io::Result<Self::Stream>> + Send;
    /// Where to look for the process behind `stream`.
    fn peer(stream: &Self::Stream, run: Option<Run>) -> PeerAt;
}

impl Accept for TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept_one(&self) -> std::io::Result<Self::Stream> {
        let (s, _) = self.accept().await?;
        let _ = s.set_nodelay(true);
        Ok(s)
    }
    fn peer(s: &Self::Stream, run: Option<Run>) -> PeerAt {
        match (run, s.peer_addr(), s.local_addr()) {
            (Some(run), Ok(peer), Ok(local)) => PeerAt::Tcp(run, peer, local),
            _ => PeerAt::Unknown,
        }
    }
}

impl Accept for UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn accept_one(&self) -> std::io::Result<Self::Stream> {
        Ok(self.accept().await?.0)
    }
    /// The kernel's credentials of the connecting process; the launcher's own
    /// relays (pid of this process) carry no one's.
    fn peer(s: &Self::Stream, _: Option<Run>) -> PeerAt {
        match s.peer_cred().ok().and_then(|c| c.pid()) {
            Some(pid) if pid > 0 && pid as u32 != std::process::id() => PeerAt::Pid(pid as u32),
            _ => PeerAt::Unknown,
        }
    }
}

/// Where the process behind a client connection is found.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PeerAt {
    /// A TCP client of the run: the kernel's socket tables say who.
    Tcp(Run, SocketAddr, SocketAddr),
    /// A unix socket's peer, by its kernel credentials.
    Pid(u32),
    Unknown,
}

/// The process (processes, if the socket is shared) behind the connection a task
/// handles: looked up once, when a decision or a record first needs it.
pub(crate) struct Peer {
    from: PeerAt,
    found: std::sync::OnceLock<Vec<Program>>,
}

impl Peer {
    fn new(from: PeerAt) -> Peer {
        Peer {
            from,
            found: std::sync::OnceLock::new(),
        }
    }
    fn programs(&self) -> &[Program] {
        self.found.get_or_init(|| match self.from {
            // Milliseconds of /proc reads: let the runtime move other tasks off
            // this worker meanwhile (where it can: a multi-threaded runtime).
            PeerAt::Tcp(run, peer, local) => match tokio::runtime::Handle::try_current() {
                Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                    tokio::task::block_in_place(|| run.owners(peer, local))
                }
                _ => run.owners(peer, local),
            },
            PeerAt::Pid(pid) => crate::service::peer::program_of(pid).into_iter().collect(),
            PeerAt::Unknown => vec![],
        })
    }
}

tokio::task_local! {
    pub(crate) static PEER: Arc<Peer>;
}

/// The programs behind the connection this task handles (empty: not known).
pub(crate) fn peer_programs() -> Vec<Program> {
    PEER.try_with(|p| p.programs().to_vec()).unwrap_or_default()
}

/// [`peer_programs`] if already looked up (a decision needed them), or cheap to
/// know (a unix socket's peer); else empty: records do not pay for a lookup.
pub(crate) fn known_programs() -> Vec<Program> {
    PEER.try_with(|p| match (p.found.get(), p.from) {
        (Some(found), _) => found.clone(),
        (None, PeerAt::Pid(_)) => p.programs().to_vec(),
        (None, _) => vec![],
    })
    .unwrap_or_default()
}

/// The environment a sandboxed child gets for a proxy at `addr` with `token`:
/// HTTP_PROXY/HTTPS_PROXY/ALL_PROXY in both cases, and NO_PROXY emptied (it never
/// exempts anything: the kernel layer sends everything here anyway). ALL_PROXY is
/// the HTTP URL too: every client that reads it speaks HTTP CONNECT, while a
/// `socks5h://` value makes httpx (under the OpenAI and Anthropic Python SDKs)
/// refuse to start without the optional `socksio` package. The same port speaks
/// SOCKS5 (`socks5h://` with the same user and token) for clients told to use it.
pub fn child_env(addr: SocketAddr, token: &str) -> Vec<(String, String)> {
    let http = format!("http://sandpit:{token}@{addr}");
    let mut env = Vec::new();
    for (k, v) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &http),
        ("NO_PROXY", &String::new()),
    ] {
        env.push((k.to_string(), v.clone()));
        env.push((k.to_ascii_lowercase(), v.clone()));
    }
    env
}
