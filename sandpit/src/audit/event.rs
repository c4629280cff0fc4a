//! Every network decision leaves an [`AuditEvent`]. The audit log (another layer)
//! plugs in as an [`AuditSink`]; a full or closed sink never blocks a connection.
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// How the connection or query reached sandpit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    Transparent,
    HttpProxy,
    Connect,
    Socks5,
    Dns,
    /// Not the proxy: the kernel layer's relay to a listed host loopback service.
    Loopback,
    /// Not the proxy: the kernel layer's UDP relay (`network.mode = "unrestricted"`).
    Udp,
}

impl Way {
    pub fn as_str(self) -> &'static str {
        match self {
            Way::Transparent => "transparent",
            Way::HttpProxy => "http",
            Way::Connect => "connect",
            Way::Socks5 => "socks5",
            Way::Dns => "dns",
            Way::Loopback => "loopback relay",
            Way::Udp => "udp relay",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    pub time: SystemTime,
    pub way: Way,
    /// The host as decided (canonical when it could be canonicalized, else as sent).
    pub host: String,
    pub port: u16,
    /// The address dialled, when it got that far.
    pub addr: Option<SocketAddr>,
    pub allow: bool,
    pub rule: Option<String>,
    pub reason: String,
    /// The process that opened the connection and its program, as the kernel names
    /// them (`service::peer`), when known.
    pub program: Option<sandpit_policy::Program>,
}

pub trait AuditSink: Send + Sync + 'static {
    fn record(&self, event: AuditEvent);
    /// `n` events never reached this sink (a channel in front of it was full, or the
    /// run ended before they were handled): a sink that keeps records says so.
    fn lost(&self, _n: u64) {}
}

/// Discards events.
pub struct NullSink;

impl AuditSink for NullSink {
    fn record(&self, _: AuditEvent) {}
}

/// Keeps events in memory (tests, `sandpit run`'s end-of-run summary).
#[derive(Default)]
pub struct MemorySink {
    events: Mutex<Vec<AuditEvent>>,
}

impl MemorySink {
    pub fn events(&self) -> Vec<AuditEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl AuditSink for MemorySink {
    fn record(&self, event: AuditEvent) {
        if let Ok(mut e) = self.events.lock() {
            e.push(event);
        }
    }
}

/// Sends events to a bounded channel; counts what it had to drop.
pub struct ChannelSink {
    tx: tokio::sync::mpsc::Sender<AuditEvent>,
    dropped: AtomicU64,
    sent: Arc<AtomicU64>,
}

impl ChannelSink {
    pub fn new(capacity: usize) -> (ChannelSink, tokio::sync::mpsc::Receiver<AuditEvent>) {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
        (
            ChannelSink {
                tx,
                dropped: AtomicU64::new(0),
                sent: Arc::default(),
            },
            rx,
        )
    }
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
    /// How many events went into the channel so far: a receiver that counts what it
    /// handled knows when it has caught up.
    pub fn sent(&self) -> Arc<AtomicU64> {
        self.sent.clone()
    }
}

impl AuditSink for ChannelSink {
    fn record(&self, event: AuditEvent) {
        match self.tx.try_send(event) {
            Ok(()) => self.sent.fetch_add(1, Ordering::Release),
            Err(_) => self.dropped.fetch_add(1, Ordering::Relaxed),
        };
    }
}
