//! Policy changes during a run: `sandpit allow HOST` / `sandpit deny HOST` reach
//! the running launcher over its control socket and change the network rules the
//! proxy and the DNS responder read per request ([`Live`]).
//!
//! The socket is `~/.sandpit/run/control/<run>.sock`: under `~/.sandpit/run`, which
//! the kernel layer hides from the sandbox (only the run's own directory shows
//! through), and each peer is checked on its own as well ([`peer_outside`]): a
//! process with `no_new_privs` (every process in a sandbox has it, irrevocably) or
//! in another pid namespace is refused and the attempt recorded. The protocol is
//! one line each way: `allow HOST` or `deny HOST`, answered by `ok MESSAGE` or
//! `refused MESSAGE`.
#![forbid(unsafe_code)]
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use sandpit_policy::host::Host;
use sandpit_policy::{HostPattern, Layer, NetMode, Origin, Policy, Rule};

use crate::audit::{AuditLog, Decision, Layer as AuditLayer, Record};
use crate::proxy::{Decide, Verdict};

pub mod ask;
pub use ask::Asker;

/// `allow` or `deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Allow,
    Deny,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Allow => "allow",
            Op::Deny => "deny",
        }
    }
    fn parse(s: &str) -> Option<Op> {
        match s {
            "allow" => Some(Op::Allow),
            "deny" => Some(Op::Deny),
            _ => None,
        }
    }
}

/// The run's network rules as they are now: the policy it started with, plus what
/// `sandpit allow`/`deny` changed since. What the proxy and the DNS responder ask.
pub struct Live {
    policy: RwLock<Arc<Policy>>,
    run: String,
    /// The interposer's snapshot, rewritten with each change for the programs
    /// started afterwards.
    snapshot: Option<PathBuf>,
}

/// The `file` of a rule a change made, so a later change can take it back.
const CONTROL_FILE: &str = "sandpit allow/deny (during the run)";

impl Live {
    pub fn new(policy: &Policy, run: &str, snapshot: Option<PathBuf>) -> Live {
        Live {
            policy: RwLock::new(Arc::new(policy.clone())),
            run: run.to_string(),
            snapshot,
        }
    }

    fn current(&self) -> Arc<Policy> {
        match self.policy.read() {
            Ok(p) => p.clone(),
            Err(e) => e.into_inner().clone(),
        }
    }

    /// Apply `op` to `host`: what took effect, or why nothing did.
    pub fn change(&self, op: Op, host: &str) -> Result<String, String> {
        let pattern = HostPattern::parse(host).map_err(|e| {
            format!("{host:?} is not a host: {e}; write a name (\"api.example.com\"), \"*.example.com\" or an address, with \":PORT\" to name one port")
        })?;
        let shown = pattern.to_string();
        let mut w = match self.policy.write() {
            Ok(w) => w,
            Err(e) => e.into_inner(),
        };
        let mut p = (**w).clone();
        let net = &mut p.network;
        let ours = |r: &Rule<HostPattern>| r.origin.file == CONTROL_FILE && r.value == pattern;
        let origin = |key: &str| Origin {
            layer: Layer::Flags,
            file: CONTROL_FILE.into(),
            key: key.into(),
            entry: shown.clone(),
            line: 0,
            column: 0,
        };
        match op {
            Op::Allow => {
                if net.mode.value == NetMode::Offline {
                    return Err(format!(
                        "nothing changed: network.mode = \"offline\" ({}) refuses every connection, and a running run keeps its mode; run again with another mode",
                        net.mode.origin.location()
                    ));
                }
                if pattern.is_loopback() || pattern_ip(&pattern).is_some_and(is_local) {
                    return Err(format!(
                        "nothing changed: {shown} is on this machine; loopback services are set up when a run starts (network.allow with its port), so this one takes a restart"
                    ));
                }
                net.block.retain(|r| !ours(r));
                if let Some(b) = net
                    .block
                    .iter()
                    .find(|b| pattern.is_covered_by(&b.value) || b.value == pattern)
                {
                    let msg = format!(
                        "nothing changed: {shown} stays blocked by {} (block wins over allow); remove that entry and run again",
                        b.origin
                    );
                    return Err(msg);
                }
                if net.mode.value != NetMode::Unrestricted
                    && !net.allow.iter().any(|r| r.value == pattern)
                {
                    net.allow.push(Rule {
                        value: pattern.clone(),
                        origin: origin("network.allow"),
                    });
                }
            }
            Op::Deny => {
                net.allow.retain(|r| !ours(r));
                if !net.block.iter().any(|r| r.value == pattern) {
                    net.block.push(Rule {
                        value: pattern.clone(),
                        origin: origin("network.block"),
                    });
                }
            }
        }
        let snapshot_note = match self.rewrite_snapshot(&p) {
            Ok(()) => String::new(),
            Err(e) => format!(" (the interposer's snapshot could not be rewritten: {e}; programs started later keep the old rules there)"),
        };
        let unrestricted = p.network.mode.value == NetMode::Unrestricted;
        *w = Arc::new(p);
        drop(w);
        Ok(match op {
            Op::Allow if unrestricted => format!(
                "{shown} is allowed in run {} by network.mode = \"unrestricted\" already; an earlier \
                 `sandpit deny` of it, if any, is taken back for every new connection now{snapshot_note}",
                self.run
            ),
            Op::Allow => format!(
                "allowed {shown} in run {}: the proxy and DNS responder take it for every new connection now; \
                 programs started from now on get it in the interposer too, programs already running keep \
                 the interposer rules they started with (their own connects by name to {shown} stay refused). \
                 Until the run ends only; add it to [network] allow in ~/.sandpit/config.toml to keep it{snapshot_note}",
                self.run
            ),
            Op::Deny => format!(
                "denied {shown} in run {}: every new connection and lookup is refused from now on, for every \
                 program; connections already open stay open until they close. Until the run ends only; add \
                 it to [network] block in ~/.sandpit/config.toml to keep it{snapshot_note}",
                self.run
            ),
        })
    }

    /// The interposer's snapshot with `p`'s network rules, written atomically: the
    /// programs that start after it read it; those running keep what they read.
    fn rewrite_snapshot(&self, p: &Policy) -> std::io::Result<()> {
        let Some(path) = &self.snapshot else {
            return Ok(());
        };
        let bytes = std::fs::read(path)?;
        let mut snap =
            Policy::decode_snapshot(&bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
        snap.network.allow = p.network.allow.clone();
        snap.network.block = p.network.block.clone();
        let tmp = path.with_extension("control.tmp");
        let _ = std::fs::remove_file(&tmp);
        {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&snap.snapshot())?;
        }
        std::fs::rename(&tmp, path)
    }
}

fn pattern_ip(p: &HostPattern) -> Option<IpAddr> {
    match p.host {
        sandpit_policy::host::HostMatch::Ip(ip) | sandpit_policy::host::HostMatch::Cidr(ip, _) => {
            Some(ip)
        }
        _ => None,
    }
}

fn is_local(ip: IpAddr) -> bool {
    sandpit_policy::host::is_loopback(ip) || ip.is_unspecified()
}

impl Decide for Live {
    fn connect(&self, host: &Host, port: u16) -> Verdict {
        self.current().connect(host, port)
    }
    fn connect_from(
        &self,
        host: &Host,
        port: u16,
        program: Option<&sandpit_policy::Program>,
    ) -> Verdict {
        self.current().connect_from(host, port, program)
    }
    fn lookup(&self, name: &str) -> Verdict {
        self.current().lookup(name)
    }
    fn static_answers(&self, name: &str) -> Option<Vec<IpAddr>> {
        self.current().static_answers(name)
    }
    fn names_address(&self, addr: IpAddr) -> bool {
        self.current().names_address(addr)
    }
    fn resolved(&self, host: &Host, port: u16, addr: IpAddr) -> Verdict {
        self.current().resolved(host, port, addr)
    }
    fn http(&self, method: &str, scheme: &str, host: &Host, port: u16, target: &str) -> Verdict {
        self.current().http(method, scheme, host, port, target)
    }
}

/// Set up live changes for a run about to start: a [`Live`] copy of `policy` for
/// the proxy and DNS responder to ask (the caller hands it to them), and the
/// control socket, bound (before the fork; [`serve`] after it). `snapshot` is the
/// interposer's policy snapshot, rewritten with each change. A socket that cannot
/// be bound leaves the run without live changes, said on stderr: the rules stay as
/// they started.
pub fn prepare(
    policy: &Policy,
    session: &crate::audit::Session,
    snapshot: &Path,
) -> (Arc<Live>, Option<Server>) {
    let live = Arc::new(Live::new(
        policy,
        session.run(),
        Some(snapshot.to_path_buf()),
    ));
    let server = match Server::bind(&policy.context.state_dir, live.clone(), session.sink()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("sandpit: warning: `sandpit allow`/`deny` cannot reach this run: {e}");
            None
        }
    };
    (live, server)
}

/// Serve the control socket `server` (after the fork); the guard removes it.
pub fn serve(server: Option<Server>) -> Option<Running> {
    match server?.start() {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("sandpit: warning: `sandpit allow`/`deny` cannot reach this run: {e}");
            None
        }
    }
}

/// `<state>/run/control`: where the runs' control sockets are.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("run").join("control")
}

/// The control socket of a run, bound; [`Server::start`] serves it.
pub struct Server {
    path: PathBuf,
    listener: UnixListener,
    live: Arc<Live>,
    log: Arc<AuditLog>,
    /// Peers refused so far (a flood from inside must not grow the log).
    refused: std::sync::atomic::AtomicU64,
}

/// Refused requests recorded per run; the launcher's records are not bounded by
/// `limits.audit_bytes`, so these are.
const MAX_REFUSALS_RECORDED: u64 = 100;

impl Server {
    /// Bind `<state>/run/control/<run>.sock` (the directory 0700, the socket 0600),
    /// removing sockets of runs whose launcher is gone.
    pub fn bind(
        state_dir: &Path,
        live: Arc<Live>,
        log: Arc<AuditLog>,
    ) -> Result<Server, crate::audit::AuditError> {
        let dir = dir(state_dir);
        let path = dir.join(format!("{}.sock", live.run));
        let io = |source| crate::audit::AuditError::Io {
            path: path.clone(),
            source,
        };
        if path.as_os_str().len() >= 108 {
            return Err(crate::audit::AuditError::SocketPath(path));
        }
        // Another run's end may remove the directory between its creation and the
        // bind (it removes it when empty): once more, then.
        let mut tries = 0;
        let listener = loop {
            crate::audit::private_dir(&dir)?;
            remove_stale(&dir);
            match UnixListener::bind(&path) {
                Ok(l) => break l,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => tries += 1,
                Err(e) => return Err(io(e)),
            }
        };
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        }
        Ok(Server {
            path,
            listener,
            live,
            log,
            refused: Default::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serve requests on a thread of its own (after the fork), one at a time. The
    /// returned guard removes the socket when dropped.
    pub fn start(self) -> std::io::Result<Running> {
        let path = self.path.clone();
        let listener = self.listener.try_clone()?;
        std::thread::Builder::new()
            .name("sandpit-control".into())
            .spawn(move || {
                for s in listener.incoming() {
                    let Ok(s) = s else { continue };
                    self.serve(s);
                }
            })?;
        Ok(Running { path })
    }

    fn serve(&self, s: UnixStream) {
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
        let Ok(mut w) = s.try_clone() else { return };
        // Who asks, before anything is read: a refused peer cannot hold the socket.
        if let Err(who) = peer_outside(&s) {
            let n = self
                .refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n < MAX_REFUSALS_RECORDED {
                let mut r = Record::new(
                    self.log.run(),
                    AuditLayer::Launcher,
                    "policy",
                    "control socket".into(),
                    Decision::Deny,
                );
                r.reason = format!(
                    "control socket: refused a request from {who}: only the launching user, \
                     outside the sandbox, may change a run's rules{}",
                    if n + 1 == MAX_REFUSALS_RECORDED {
                        "; further refusals of this run are not recorded"
                    } else {
                        ""
                    }
                );
                r.pid = peer_pid(&s);
                self.log.record(r);
            }
            let _ =
                w.write_all(format!("refused {who} may not change this run's rules\n").as_bytes());
            // Take what it sent (briefly): closing over unread bytes would reset the
            // connection before the peer reads its answer.
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let mut sink = [0u8; 4096];
            let _ = std::io::Read::read(&mut &s, &mut sink);
            return;
        }
        let mut line = String::new();
        // One line, of at most 4 KiB.
        if BufReader::new(std::io::Read::take(&s, 4096))
            .read_line(&mut line)
            .is_err()
        {
            return;
        }
        let mut words = line.split_whitespace();
        let (op, host) = match (words.next().and_then(Op::parse), words.next(), words.next()) {
            (Some(op), Some(host), None) => (op, host.to_string()),
            _ => {
                let _ =
                    w.write_all(b"refused not a request: write \"allow HOST\" or \"deny HOST\"\n");
                return;
            }
        };
        let answer = match self.live.change(op, &host) {
            Ok(m) => format!("ok {m}"),
            Err(m) => format!("refused {m}"),
        };
        let mut r = Record::new(
            self.log.run(),
            AuditLayer::Launcher,
            "policy",
            format!("{} {host}", op.as_str()),
            Decision::Info,
        );
        r.reason = answer.clone();
        r.pid = peer_pid(&s);
        self.log.record(r);
        let _ = w.write_all(format!("{}\n", answer.replace('\n', " ")).as_bytes());
    }
}

/// The control socket while the run lasts: removed when dropped.
pub struct Running {
    path: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        // The directory too, when no other run's socket is in it: a run leaves
        // nothing in ~/.sandpit/run.
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn peer_pid(s: &UnixStream) -> Option<u32> {
    crate::sys::peer_credentials(s).ok().map(|(pid, _)| pid)
}

/// Whether the peer of `s` is the launching user outside any sandbox: the same
/// uid, no `no_new_privs` (set in every sandboxed process before its program
/// starts, and never cleared), in the launcher's own pid namespace. `Err` names
/// who it is otherwise.
pub fn peer_outside(s: &UnixStream) -> Result<(), String> {
    let (pid, uid) =
        crate::sys::peer_credentials(s).map_err(|e| format!("an unknown peer ({e})"))?;
    if uid != crate::sys::uid() {
        return Err(format!("user {uid} (pid {pid})"));
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|_| format!("pid {pid}, which could not be looked at"))?;
    let nnp = status
        .lines()
        .find_map(|l| l.strip_prefix("NoNewPrivs:"))
        .map(str::trim);
    if nnp != Some("0") {
        return Err(format!(
            "pid {pid}, a process with no_new_privs (inside a sandbox)"
        ));
    }
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    match (ns(&pid.to_string()), ns("self")) {
        (Some(a), Some(b)) if a == b => Ok(()),
        _ => Err(format!("pid {pid}, in another pid namespace")),
    }
}

/// Remove sockets whose launcher (the pid ending the run id) is gone.
fn remove_stale(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".sock"))
            .and_then(|n| n.rsplit_once('-'))
            .and_then(|(_, p)| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The client side (`sandpit allow|deny`): ask the run's launcher, return its
/// answer (`Ok`: it took effect; `Err`: it was refused, or no run answered).
pub fn request(state_dir: &Path, run: Option<&str>, op: Op, host: &str) -> Result<String, String> {
    let dir = dir(state_dir);
    let mut socks: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".sock"))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    socks.sort();
    let candidates: Vec<String> = match run {
        Some(r) => {
            let m: Vec<String> = socks.iter().filter(|s| s.starts_with(r)).cloned().collect();
            match m.len() {
                1 => m,
                0 => {
                    return Err(format!(
                        "no running run {r:?} (its control socket is not in {})",
                        dir.display()
                    ))
                }
                _ => {
                    return Err(format!(
                        "{r:?} names more than one running run: {}",
                        m.join(", ")
                    ))
                }
            }
        }
        None => socks.into_iter().rev().collect(),
    };
    for id in candidates {
        let path = dir.join(format!("{id}.sock"));
        let Ok(mut s) = UnixStream::connect(&path) else {
            continue;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        writeln!(s, "{} {host}", op.as_str()).map_err(|e| format!("run {id}: {e}"))?;
        let mut answer = String::new();
        BufReader::new(&s)
            .read_line(&mut answer)
            .map_err(|e| format!("run {id}: no answer: {e}"))?;
        let answer = answer.trim_end();
        return match answer.split_once(' ') {
            Some(("ok", m)) => Ok(m.to_string()),
            Some(("refused", m)) => Err(m.to_string()),
            _ => Err(format!(
                "run {id}: an answer sandpit does not know: {answer:?}"
            )),
        };
    }
    Err(format!(
        "no running run to change (no control socket answered in {})",
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(text: &str) -> Live {
        Live::new(
            &crate::proxy::decide::policy_from_toml(text).unwrap(),
            "r1",
            None,
        )
    }

    #[test]
    fn allow_and_deny_change_what_the_proxy_decides() {
        let l = live("[network]\nallow = [\"a.test\"]\nblock = [\"bad.test\"]\n");
        let n = |s: &str| Host::Name(s.into());
        assert!(!l.connect(&n("b.test"), 443).allow);
        assert!(!l.lookup("b.test").allow);
        let m = l.change(Op::Allow, "B.test").unwrap();
        assert!(m.starts_with("allowed b.test in run r1"), "{m}");
        assert!(l.connect(&n("b.test"), 443).allow);
        assert!(l.lookup("b.test").allow);
        // deny takes back our allow, and beats the config's allow.
        l.change(Op::Deny, "b.test").unwrap();
        assert!(!l.connect(&n("b.test"), 443).allow);
        l.change(Op::Deny, "a.test").unwrap();
        let v = l.connect(&n("a.test"), 443);
        assert!(!v.allow && v.rule.unwrap().contains("network.block"));
        // allow takes back our deny.
        l.change(Op::Allow, "a.test").unwrap();
        assert!(l.connect(&n("a.test"), 443).allow);
        // The config's block wins; loopback takes a restart; nonsense is refused.
        let e = l.change(Op::Allow, "bad.test").unwrap_err();
        assert!(e.contains("stays blocked by network.block"), "{e}");
        assert!(!l.connect(&n("bad.test"), 443).allow);
        assert!(l.change(Op::Allow, "127.0.0.1:22").is_err());
        assert!(l.change(Op::Allow, "localhost:22").is_err());
        assert!(l.change(Op::Allow, "http://x.test/").is_err());
        let open = live("[network]\nmode = \"unrestricted\"\n");
        open.change(Op::Deny, "x.test").unwrap();
        assert!(!open.connect(&n("x.test"), 443).allow);
        let m = open.change(Op::Allow, "x.test").unwrap();
        assert!(m.contains("already"), "{m}");
        assert!(open.connect(&n("x.test"), 443).allow);
        let off = live("[network]\nmode = \"offline\"\n");
        assert!(off
            .change(Op::Allow, "a.test")
            .unwrap_err()
            .contains("offline"));
    }
}
