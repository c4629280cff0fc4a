//! The interposer's channel to the audit log: a unix datagram socket the launcher
//! binds in the run's directory under `~/.sandpit/run/` (read-only inside the
//! sandbox, so it cannot be replaced) and names in `SANDPIT_AUDIT`.
//!
//! A datagram starts with the line the program saw. A plain one is only that (a
//! denial no single rule made); a structured one continues with NUL-separated
//! fields: `SANDPIT-AUDIT/1`, kind (`deny` or `learn`, optionally `@layer`),
//! action (`read`, `write`, `exec`, `connect`), then the subject (one path; the
//! argv; host and port). Anything inside the
//! sandbox can send here, so each record is re-judged: the rule comes from the
//! launcher's own policy, and a run can add at most [`MAX_RECORDS`]. The reading
//! thread paces itself on `limits.launcher_cpu` ([`crate::cpu`]): past the share it
//! reads later, the socket's queue stays full and the senders wait (the interposer
//! waits up to a second per record, longer than one pause), so a flood slows
//! instead of losing records.
use std::os::fd::AsFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{AuditError, AuditLog, Decision, Layer, Record, Result, RuleRef};

pub const MAGIC: &[u8] = b"SANDPIT-AUDIT/1";
/// Records one run may send; past it, one `info` record says how many were dropped.
pub const MAX_RECORDS: usize = 100_000;
/// Bytes of datagrams one run may send (a flood cannot fill the disk).
pub const MAX_BYTES: usize = 32 << 20;

/// Parse one datagram into a record, naming the rule from `policy`.
pub fn parse(run: &str, policy: Option<&sandpit_policy::Policy>, msg: &[u8]) -> Record {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let fields: Vec<&[u8]> = msg.split(|&b| b == 0).collect();
    if fields.len() < 4 || fields[1] != MAGIC {
        let line = text(msg.strip_suffix(b"\n").unwrap_or(msg));
        let mut r = Record::new(
            run,
            Layer::Interposer,
            "other",
            String::new(),
            Decision::Deny,
        );
        r.reason = line;
        return r;
    }
    // `kind` may name the reporting layer: `deny@shims`.
    let (kind, layer) = match fields[2].iter().position(|&b| b == b'@') {
        Some(i) => (&fields[2][..i], &fields[2][i + 1..]),
        None => (fields[2], &b"interposer"[..]),
    };
    let layer = match layer {
        b"shims" => Layer::Shims,
        _ => Layer::Interposer,
    };
    let decision = match kind {
        b"learn" => Decision::Learn,
        // A count of records the library could not deliver (docs/audit.md).
        b"lost" => Decision::Info,
        _ => Decision::Deny,
    };
    let action = match fields[3] {
        b"read" => "read",
        b"write" => "write",
        b"exec" => "exec",
        b"connect" => "connect",
        b"udp" => "udp",
        _ if kind == b"lost" => "lost",
        _ => "other",
    };
    let subject: Vec<String> = fields[4..].iter().map(|f| text(f)).collect();
    let shown = match action {
        "exec" => subject.join(" "),
        "connect" | "udp" => match subject.as_slice() {
            [h, p, ..] if h.contains(':') => format!("[{h}]:{p}"),
            [h, p, ..] => format!("{h}:{p}"),
            _ => subject.join(" "),
        },
        _ => subject.first().cloned().unwrap_or_default(),
    };
    let mut r = Record::new(run, layer, action, shown, decision);
    r.reason = text(fields[0]);
    if action == "exec" {
        r.argv = subject.clone();
    }
    if let Some(p) = policy {
        r.rule = rejudge_repeated(p, action, &subject);
    }
    r
}

/// A re-judged request: the policy (by address), action and subject, and the answer.
type Judged = (usize, String, Vec<String>, Option<RuleRef>);

std::thread_local! {
    /// The last request re-judged on this thread and its answer: a flood of denials
    /// repeats one request, and judging it again each time would make the launcher
    /// the flood's bottleneck.
    static LAST: std::cell::RefCell<Option<Judged>> = const { std::cell::RefCell::new(None) };
}

/// [`rejudge`], answered from [`LAST`] when the same policy judges the same request.
fn rejudge_repeated(
    p: &sandpit_policy::Policy,
    action: &str,
    subject: &[String],
) -> Option<RuleRef> {
    let key = std::ptr::from_ref(p) as usize;
    let hit = LAST.with(|l| {
        l.borrow()
            .as_ref()
            .filter(|(k, a, s, _)| *k == key && a == action && s == subject)
            .map(|x| x.3.clone())
    });
    if let Some(hit) = hit {
        return hit;
    }
    let r = rejudge(p, action, subject);
    LAST.with(|l| *l.borrow_mut() = Some((key, action.to_string(), subject.to_vec(), r.clone())));
    r
}

/// The rule the launcher's policy names for a denial, if it denies it too.
fn rejudge(p: &sandpit_policy::Policy, action: &str, subject: &[String]) -> Option<RuleRef> {
    use sandpit_policy::{decide, Decision as D, Request};
    let v = match (action, subject) {
        // What the agent may read or write and a command denies came from a command
        // the agent spawned (`files.agent_read`).
        (op @ ("read" | "write"), [path, ..]) => {
            let (path, write) = (Path::new(path), op == "write");
            Some(decide(p, &Request::path(path, write, false)))
                .filter(|v| !v.is_allowed())
                .unwrap_or_else(|| decide(p, &Request::path(path, write, true)))
        }
        ("exec", argv) if !argv.is_empty() => decide(p, &Request::Exec(argv)),
        ("connect", [host, port, ..]) => decide(
            p,
            &Request::Connect {
                host,
                port: port.parse().ok()?,
            },
        ),
        // The interposer's refusals (it cannot see the machine's addresses).
        ("udp", [ip, port, ..]) => sandpit_policy::decide_datagram(
            p,
            std::net::SocketAddr::new(ip.parse().ok()?, port.parse().ok()?),
            &[],
        ),
        _ => return None,
    };
    match v.decision {
        D::Deny | D::Review => v.rule.as_ref().map(RuleRef::from),
        D::Allow => None,
    }
}

/// Report a denial from a layer inside the sandbox (`sandpit exec` as a shim) to
/// the socket at `path` (normally `$SANDPIT_AUDIT`). Best effort: never blocks,
/// errors are ignored.
pub fn send(path: &Path, layer: &str, action: &str, message: &str, subject: &[&str]) {
    let mut msg: Vec<u8> = message.bytes().filter(|&b| b != 0).collect();
    let kind = format!("deny@{layer}");
    let magic = String::from_utf8_lossy(MAGIC);
    for f in [&*magic, kind.as_str(), action].iter().chain(subject) {
        msg.push(0);
        msg.extend(f.bytes().filter(|&b| b != 0));
    }
    if let Ok(s) = UnixDatagram::unbound() {
        let _ = s.set_nonblocking(true);
        let _ = s.send_to(&msg, path);
    }
}

/// A bound socket and the thread writing what arrives to the log.
///
/// The thread ([`Listener::read`], started once the sandbox's processes are forked:
/// the launcher forks while single-threaded) waits for datagrams and records them
/// under a lock; `finish` takes the lock, records what is still queued itself and
/// ends the thread's part, so a run's end waits for no other thread (two cross-CPU
/// wake-ups, ~0.25 ms here). What arrives before the thread starts waits queued.
pub struct Listener {
    path: PathBuf,
    shared: Arc<Shared>,
    /// `limits.launcher_cpu`, which the reading thread paces itself on.
    share: Option<Arc<crate::cpu::Share>>,
}

/// What the listener's thread and `finish` share.
struct Shared {
    sock: UnixDatagram,
    log: Arc<AuditLog>,
    /// The reading state; `None` once `finish` has taken over.
    reader: Mutex<Option<Reader>>,
}

/// Datagrams read so far, against the run's limits.
struct Reader {
    buf: Vec<u8>,
    count: usize,
    bytes: usize,
    dropped: u64,
}

impl Listener {
    /// Bind `path` (mode 0666 is not needed: the sandbox runs as this user).
    pub fn start(
        path: &Path,
        log: Arc<AuditLog>,
        share: Option<Arc<crate::cpu::Share>>,
    ) -> Result<Listener> {
        if path.as_os_str().len() >= 108 {
            return Err(AuditError::SocketPath(path.to_path_buf()));
        }
        let io = |source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        };
        let sock = UnixDatagram::bind(path).map_err(io)?;
        sock.set_nonblocking(true).map_err(io)?;
        // The kernel's word for each sender's pid (a record's `pid` and `program`).
        #[cfg(target_os = "linux")]
        crate::sys::pass_credentials(sock.as_fd()).map_err(io)?;
        let shared = Arc::new(Shared {
            sock,
            log,
            reader: Mutex::new(Some(Reader {
                buf: vec![0u8; 64 * 1024],
                count: 0,
                bytes: 0,
                dropped: 0,
            })),
        });
        Ok(Listener {
            path: path.to_path_buf(),
            shared,
            share,
        })
    }

    /// Start the thread that records what arrives while the command runs.
    pub fn read(&self) -> std::io::Result<()> {
        let theirs = self.shared.clone();
        let share = self.share.clone();
        std::thread::Builder::new()
            .name("sandpit-audit".into())
            .spawn(move || theirs.read_loop(share.map(|s| s.pacer())))
            .map(drop)
    }

    /// Record everything already queued, end the reading, remove the socket.
    pub fn finish(self) {}

    fn stop(&mut self) {
        let taken = self.shared.lock().take();
        if let Some(mut r) = taken {
            // Bounded: a sender that never stops cannot hold the run's end.
            r.drain(&self.shared.sock, &self.shared.log, MAX_RECORDS);
            r.report_dropped(&self.shared.log);
        }
        // Wakes the thread (its wait sees end of file); nothing here waits for it.
        let _ = self.shared.sock.shutdown(std::net::Shutdown::Both);
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Reader>> {
        self.reader.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for datagrams, record them; end once `finish` has taken the reading.
    /// Paced between batches, outside the lock (`finish` never waits for a pause).
    fn read_loop(&self, mut pacer: Option<crate::cpu::Pacer>) {
        loop {
            if crate::sys::readable(self.sock.as_fd(), -1).is_err() {
                return;
            }
            if let Some(p) = pacer.as_mut() {
                p.pace();
            }
            // A batch at a time, so that `finish` never waits long for the lock.
            match self.lock().as_mut() {
                Some(r) => r.drain(&self.sock, &self.log, 256),
                None => return,
            }
        }
    }
}

/// One datagram, and its sender's pid as the kernel gives it (in the launcher's
/// pid namespace), where the platform says.
#[cfg(target_os = "linux")]
fn recv(sock: &UnixDatagram, buf: &mut [u8]) -> std::io::Result<(usize, Option<u32>)> {
    crate::sys::recv_with_pid(sock.as_fd(), buf)
}

#[cfg(not(target_os = "linux"))]
fn recv(sock: &UnixDatagram, buf: &mut [u8]) -> std::io::Result<(usize, Option<u32>)> {
    sock.recv(buf).map(|n| (n, None))
}

/// The executable of process `pid`, while it still runs.
fn program(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

impl Reader {
    /// Record the datagrams queued now (at most `max`), up to the run's limits.
    fn drain(&mut self, sock: &UnixDatagram, log: &AuditLog, max: usize) {
        for _ in 0..max {
            match recv(sock, &mut self.buf) {
                // Empty: nothing worth logging.
                Ok((0, _)) => {}
                Ok((n, pid)) => {
                    if self.count < MAX_RECORDS && self.bytes + n <= MAX_BYTES {
                        self.count += 1;
                        self.bytes += n;
                        let mut r = parse(log.run(), log.policy(), &self.buf[..n]);
                        if let Some(pid) = pid {
                            r.pid = Some(pid);
                            r.program = program(pid);
                        }
                        log.record(r);
                    } else {
                        self.dropped += 1;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    fn report_dropped(&self, log: &AuditLog) {
        if self.dropped == 0 {
            return;
        }
        let mut r = Record::new(
            log.run(),
            Layer::Launcher,
            "other",
            String::new(),
            Decision::Info,
        );
        r.reason = format!(
            "{} records from inside the sandbox past the limit ({MAX_RECORDS} records, \
             {MAX_BYTES} bytes) were not logged",
            self.dropped
        );
        log.record(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_structured_and_plain() {
        let d = tempfile::tempdir().unwrap();
        let p = super::super::session::tests::policy(d.path(), "");
        let ssh = p.context.home.join(".ssh/id_rsa");
        let mut msg = b"sandpit: blocked read".to_vec();
        for f in [MAGIC, b"deny", b"read", ssh.to_str().unwrap().as_bytes()] {
            msg.push(0);
            msg.extend_from_slice(f);
        }
        let r = parse("run", Some(&p), &msg);
        assert_eq!(
            (r.layer, r.action.as_str(), r.decision),
            (Layer::Interposer, "read", Decision::Deny)
        );
        assert_eq!(r.subject, ssh.to_str().unwrap());
        let rule = r.rule.unwrap();
        assert_eq!(rule.key, "files.block_read");
        assert_eq!(rule.entry, "~/.ssh");
        assert_eq!(r.reason, "sandpit: blocked read");

        let r = parse("run", Some(&p), b"sandpit: blocked UDP to 1.2.3.4:53 (x)\n");
        assert_eq!(r.action, "other");
        assert_eq!(r.reason, "sandpit: blocked UDP to 1.2.3.4:53 (x)");

        // A claim the launcher's policy does not share names no rule.
        let ok = p.context.workspace.join("ok.txt");
        let mut msg = b"m".to_vec();
        for f in [MAGIC, b"learn", b"write", ok.to_str().unwrap().as_bytes()] {
            msg.push(0);
            msg.extend_from_slice(f);
        }
        let r = parse("run", Some(&p), &msg);
        assert_eq!(r.decision, Decision::Learn);
        assert_eq!(r.rule, None);
    }

    #[test]
    fn listener_logs_queued_datagrams() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let log = Arc::new(AuditLog::create(&state, "r1").unwrap());
        let sock = d.path().join("a.sock");
        let l = Listener::start(&sock, log.clone(), None).unwrap();
        // More than the socket queues (net.unix.max_dgram_qlen, 10 by default): the
        // thread reads while they are sent, `finish` what is left.
        l.read().unwrap();
        let c = UnixDatagram::unbound().unwrap();
        for i in 0..50 {
            c.send_to(format!("line {i}").as_bytes(), &sock).unwrap();
        }
        l.finish();
        assert!(!sock.exists());
        let recs = super::super::read_log(log.path()).unwrap();
        assert_eq!(recs.len(), 50);
        assert_eq!(recs[49].reason, "line 49");
    }
}
