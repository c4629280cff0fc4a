//! The audit log: one JSONL file per run under `~/.sandpit/logs/<run>.jsonl`,
//! written only by the launcher. `~/.sandpit` is read-only inside the sandbox (the
//! kernel layer binds it so), so nothing the agent runs can change what was logged.
//!
//! Events reach it from the proxy and DNS responder ([`AuditLog`] is a
//! [`event::AuditSink`]), from the interposer over a unix datagram socket
//! ([`socket`], protocol in docs/audit.md), and from the launcher itself (start and
//! exit). Records from the interposer are claims made inside the sandbox: the
//! launcher re-judges each one against its own policy to name the rule, and keeps
//! the claim's own decision.
#![forbid(unsafe_code)]
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

pub mod event;
pub mod learn;
pub mod ocsf;
pub mod otlp;
pub mod session;
pub mod socket;
pub mod summary;

pub use session::{RunOptions, Session};

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{0} is not a private directory owned by this user; refusing to keep audit logs there"
    )]
    Unsafe(PathBuf),
    #[error("{path}:{line}: not an audit record: {source}")]
    Parse {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("no run {0:?} in the audit logs")]
    NoRun(String),
    #[error("no runs logged yet in {0}")]
    NoRuns(PathBuf),
    #[error("the audit socket path {0} is too long for a unix socket")]
    SocketPath(PathBuf),
}

pub type Result<T> = std::result::Result<T, AuditError>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AuditError + '_ {
    move |source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Which part of sandpit made the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Launcher,
    Kernel,
    Interposer,
    Proxy,
    Dns,
    Shims,
    /// The LLM reviewer's verdicts (`[adversary]`), allowed and denied.
    Reviewer,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Launcher => "launcher",
            Layer::Kernel => "kernel",
            Layer::Interposer => "interposer",
            Layer::Proxy => "proxy",
            Layer::Dns => "dns",
            Layer::Shims => "shims",
            Layer::Reviewer => "reviewer",
        }
    }
}

/// `learn`: would have been denied, recorded and allowed (`sandpit run --learn`).
/// `info`: not a decision (run start and exit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
    Learn,
    Info,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Learn => "learn",
            Decision::Info => "info",
        }
    }
    /// Denied, or would have been.
    pub fn is_denial(self) -> bool {
        matches!(self, Decision::Deny | Decision::Learn)
    }
}

/// The policy entry that decided: where it is written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RuleRef {
    pub file: String,
    pub key: String,
    pub entry: String,
    pub line: u32,
    pub col: u32,
}

impl From<&sandpit_policy::Origin> for RuleRef {
    fn from(o: &sandpit_policy::Origin) -> RuleRef {
        RuleRef {
            file: o.file.clone(),
            key: o.key.clone(),
            entry: o.entry.clone(),
            line: o.line,
            col: o.column,
        }
    }
}

impl std::fmt::Display for RuleRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?} in {}", self.key, self.entry, self.file)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.col)?;
        }
        Ok(())
    }
}

/// How the reason of a denial begins when the policy allowed the operation and the
/// world refused it (a name that does not resolve, a port where nothing listens):
/// no config line would change it, and the summary says so instead of offering one.
pub const ALLOWED_BUT: &str = "allowed, but ";

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// UTC, RFC 3339 with milliseconds.
    pub time: String,
    pub run: String,
    pub layer: Layer,
    /// `read`, `write`, `exec`, `connect`, `resolve`, `start`, `setup`, `exit`, `other`.
    pub action: String,
    /// The path, `host:port`, or command line.
    pub subject: String,
    pub decision: Decision,
    #[serde(default)]
    pub rule: Option<RuleRef>,
    pub reason: String,
    /// The command's arguments, for `exec` and `start`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// The program that made the request (its executable's path), where the layer
    /// knows it: the kernel's word for the sender of a report, never the report's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// That process's id, as the launcher sees it (outside the sandbox's pid
    /// namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The OCSF classification (`class_uid`, `activity_id`, `category_uid`, …), at
    /// the top level of the line as OCSF names them.
    #[serde(flatten)]
    pub ocsf: ocsf::Ocsf,
}

impl Record {
    pub fn new(
        run: &str,
        layer: Layer,
        action: &str,
        subject: String,
        decision: Decision,
    ) -> Record {
        Record {
            time: rfc3339(SystemTime::now()),
            run: run.to_string(),
            layer,
            action: action.to_string(),
            subject,
            decision,
            rule: None,
            reason: String::new(),
            argv: vec![],
            program: None,
            pid: None,
            ocsf: ocsf::Ocsf::of(action, decision),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, m, day) = civil(secs / 86_400);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil(days: u64) -> (i64, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A fresh run id: `YYYYMMDDTHHMMSS.mmmZ-<random>-<pid>` (ids sort by start time).
/// The random part keeps the run's directory (and its sockets) unguessable from the
/// start time and pid, which another sandbox may see; the pid lets a later run tell
/// a directory left by a dead launcher.
pub fn new_run_id() -> std::io::Result<String> {
    let t = rfc3339(SystemTime::now());
    let compact: String = t
        .chars()
        .take(23)
        .filter(|c| c.is_ascii_digit() || *c == 'T' || *c == '.')
        .collect();
    let random = crate::sys::random_hex(4)?;
    Ok(format!("{compact}Z-{random}-{}", std::process::id()))
}

/// The directory of the run `run`: `~/.sandpit/run/<run>/` (made by [`Session::start_as`]).
pub fn run_dir(state_dir: &Path, run: &str) -> PathBuf {
    state_dir.join("run").join(run)
}

/// `~/.sandpit/logs`.
pub fn logs_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("logs")
}

/// Create `dir` 0700 if missing; it must be ours and private.
pub(crate) fn private_dir(dir: &Path) -> Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(dir)(e)),
    }
    let md = std::fs::symlink_metadata(dir).map_err(io(dir))?;
    let me = rustix::process::geteuid().as_raw();
    if !md.is_dir() || md.uid() != me || md.mode() & 0o022 != 0 {
        return Err(AuditError::Unsafe(dir.to_path_buf()));
    }
    Ok(())
}

/// Records kept in memory for the summary and the learned draft.
const KEEP: usize = 10_000;

/// The open log of one run.
pub struct AuditLog {
    run: String,
    path: PathBuf,
    file: Mutex<File>,
    kept: Mutex<Vec<Record>>,
    dropped: AtomicU64,
    /// Bytes written so far, against `limits.audit_bytes`.
    written: AtomicU64,
    /// Records past the limit, counted by (layer, action, decision): never
    /// dropped unsaid ([`AuditLog::close_summarised`]).
    summarised: Mutex<std::collections::BTreeMap<(String, String, String), u64>>,
    /// The policy the run uses, to name the rule of proxy events.
    policy: Option<sandpit_policy::Policy>,
    /// Where every record is also exported (`[telemetry] otlp_endpoint`).
    exporter: Option<otlp::Exporter>,
}

impl AuditLog {
    /// Create `<state_dir>/logs/<run>.jsonl` (0600, must not exist).
    pub fn create(state_dir: &Path, run: &str) -> Result<AuditLog> {
        private_dir(state_dir)?;
        let dir = logs_dir(state_dir);
        private_dir(&dir)?;
        let path = dir.join(format!("{run}.jsonl"));
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io(&path))?;
        Ok(AuditLog {
            run: run.to_string(),
            path,
            file: Mutex::new(file),
            kept: Mutex::new(vec![]),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
            summarised: Mutex::new(Default::default()),
            policy: None,
            exporter: None,
        })
    }

    /// Judge proxy events against `policy` to name their rule.
    pub fn with_policy(mut self, policy: sandpit_policy::Policy) -> AuditLog {
        self.policy = Some(policy);
        self
    }

    /// Export every record also to `exporter`.
    pub fn with_exporter(mut self, exporter: otlp::Exporter) -> AuditLog {
        self.exporter = Some(exporter);
        self
    }

    pub fn exporter(&self) -> Option<&otlp::Exporter> {
        self.exporter.as_ref()
    }

    pub fn run(&self) -> &str {
        &self.run
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn policy(&self) -> Option<&sandpit_policy::Policy> {
        self.policy.as_ref()
    }

    /// Append one record (one line, one write). Denials are also kept in memory.
    pub fn record(&self, mut r: Record) {
        // Classified as it is now (a caller may have changed its action or decision).
        r.ocsf = ocsf::Ocsf::of(&r.action, r.decision);
        let mut line = match serde_json::to_vec(&r) {
            Ok(l) => l,
            Err(_) => return,
        };
        line.push(b'\n');
        if let Some(x) = &self.exporter {
            x.send(&r);
        }
        let cap = self
            .policy
            .as_ref()
            .map_or(0, |p| p.limits.audit_bytes.value);
        let len = line.len() as u64;
        // The launcher's own records (start, exit, notes) are always written.
        let over = cap != 0
            && r.layer != Layer::Launcher
            && self.written.fetch_add(len, Ordering::Relaxed) + len > cap;
        if over {
            self.written.fetch_sub(len, Ordering::Relaxed);
            if let Ok(mut m) = self.summarised.lock() {
                let key = (
                    r.layer.as_str().to_string(),
                    r.action.clone(),
                    r.decision.as_str().to_string(),
                );
                *m.entry(key).or_insert(0) += 1;
            }
        } else if let Ok(mut f) = self.file.lock() {
            if f.write_all(&line).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        // The reviewer's verdicts are enforced, and their denials recorded, by the
        // layer that asked (interposer, shims, proxy): the summary shows those.
        if r.decision.is_denial() && r.layer != Layer::Reviewer {
            if let Ok(mut k) = self.kept.lock() {
                if k.len() < KEEP {
                    k.push(r);
                } else {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Denials (and learned would-be denials) so far, in order.
    pub fn denials(&self) -> Vec<Record> {
        self.kept.lock().map(|k| k.clone()).unwrap_or_default()
    }

    /// Write one record per count of records past `limits.audit_bytes`, and say so:
    /// the line for the user, if any were counted.
    pub fn close_summarised(&self) -> Option<String> {
        let counts = std::mem::take(&mut *self.summarised.lock().ok()?);
        if counts.is_empty() {
            return None;
        }
        let limit = self.policy.as_ref().map(|p| &p.limits.audit_bytes)?;
        let total: u64 = counts.values().sum();
        for ((layer, action, decision), n) in &counts {
            let mut r = Record::new(
                &self.run,
                Layer::Launcher,
                "summarised",
                format!("{layer} {action} {decision}"),
                Decision::Info,
            );
            r.reason = format!(
                "{n} {layer} {action} records ({decision}) past limits.audit_bytes = {} ({}): counted, not written",
                limit.value,
                limit.origin.location()
            );
            self.record(r);
        }
        Some(format!(
            "sandpit: the audit log reached limits.audit_bytes = {} ({}): {total} more records were counted, not written (the log ends with the counts); raise it under [limits] in ~/.sandpit/config.toml to keep them",
            limit.value,
            limit.origin.location()
        ))
    }

    /// Records that could not be written or kept.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Proxy and DNS decisions, with the rule named by re-judging the host against the
/// run's policy when its verdict agrees.
impl event::AuditSink for AuditLog {
    fn record(&self, e: event::AuditEvent) {
        self.record(proxy_record(&self.run, self.policy.as_ref(), &e));
    }
    fn lost(&self, n: u64) {
        if n == 0 {
            return;
        }
        let mut r = Record::new(
            &self.run,
            Layer::Launcher,
            "other",
            String::new(),
            Decision::Info,
        );
        r.reason = format!(
            "{n} records of the proxy and DNS responder were not logged: the logger fell behind"
        );
        self.record(r);
    }
}

pub(crate) fn proxy_record(
    run: &str,
    policy: Option<&sandpit_policy::Policy>,
    e: &event::AuditEvent,
) -> Record {
    use event::Way;
    let (layer, action) = match e.way {
        Way::Dns => (Layer::Dns, "resolve"),
        // The kernel layer's relay of a static program's datagrams as well.
        Way::Udp => (Layer::Kernel, "udp"),
        _ => (Layer::Proxy, "connect"),
    };
    let subject = if e.way == Way::Dns {
        e.host.clone()
    } else if e.host.contains(':') && !e.host.starts_with('[') {
        format!("[{}]:{}", e.host, e.port)
    } else {
        format!("{}:{}", e.host, e.port)
    };
    let decision = if e.allow {
        Decision::Allow
    } else {
        Decision::Deny
    };
    let mut r = Record::new(run, layer, action, subject, decision);
    r.time = rfc3339(e.time);
    r.reason = format!("{} ({})", e.reason, e.way.as_str());
    if let Some(p) = &e.program {
        r.program = Some(p.path.display().to_string());
        r.pid = p.pid;
    }
    if let Some(p) = policy {
        let v = match (e.way, e.host.parse::<std::net::IpAddr>()) {
            (Way::Udp, Ok(ip)) => {
                let own = crate::service::own::addrs().unwrap_or_default();
                sandpit_policy::decide_datagram(p, std::net::SocketAddr::new(ip, e.port), &own)
            }
            _ => sandpit_policy::decide(
                p,
                &sandpit_policy::Request::ConnectFrom {
                    host: &e.host,
                    port: e.port,
                    program: e.program.as_ref(),
                },
            ),
        };
        let limit = e
            .rule
            .as_deref()
            .and_then(|x| x.split(' ').next())
            .and_then(|k| match k {
                "limits.connections" => Some(&p.limits.connections),
                "limits.connections_per_second" => Some(&p.limits.connections_per_second),
                _ => None,
            });
        let leaked = e
            .rule
            .as_deref()
            .and_then(|x| x.strip_prefix("credentials."))
            .or_else(|| e.reason.strip_prefix("sentinel for credential "))
            .and_then(|x| x.split([' ', '.']).next())
            .and_then(|name| p.credentials.iter().find(|c| c.name == name));
        // A [network.http] entry that refused a request (named in the rule or,
        // for a checked tunnel, in the reason).
        let http = p
            .network
            .http
            .allow
            .iter()
            .chain(&p.network.http.block)
            .map(|x| &x.origin)
            .find(|o| {
                let o = o.to_string();
                e.rule.as_deref() == Some(o.as_str()) || e.reason.contains(&o)
            });
        let asked = e
            .rule
            .as_deref()
            .is_some_and(|x| x.starts_with("network.ask_on_blocked_host "));
        if asked {
            // The user answered a question about this host: the key that asked.
            r.rule = Some(RuleRef::from(&p.network.ask_on_blocked_host.origin));
        } else if let (false, Some(c)) = (e.allow, leaked) {
            // A credential's sentinel bound elsewhere: the credential is the rule.
            r.rule = Some(RuleRef::from(&c.origin));
        } else if let (false, Some(o)) = (e.allow, http) {
            r.rule = Some(RuleRef::from(o));
        } else if let (false, Some(l)) = (e.allow, limit) {
            // The rules allowed it; a limit of the run refused it.
            r.rule = Some(RuleRef::from(&l.origin));
        } else if v.is_allowed() == e.allow {
            r.rule = v.rule.as_ref().map(RuleRef::from);
        } else if !e.allow
            && e.rule
                .as_deref()
                .is_some_and(|x| x.starts_with("adversary "))
        {
            // The rules allowed it; the reviewer (adversary.review) refused it.
            r.rule = p.adversary.as_ref().map(|a| RuleRef::from(&a.origin));
        }
    }
    r
}

/// What the reviewer reports with each verdict (`Reviewer::on_verdict`, adapted by
/// the launcher): the action judged (`exec`, `connect`, `write`), its subject (the
/// argument vector; `["host:port"]`; `["path"]`) and the verdict.
pub type VerdictRecorder = dyn Fn(&str, &[String], &sandpit_policy::Verdict) + Send + Sync;

/// A reviewer's verdict as a record: the command, the destination or the path it
/// judged, and `adversary` as the rule.
pub fn reviewer_record(
    run: &str,
    action: &str,
    subject: &[String],
    v: &sandpit_policy::Verdict,
) -> Record {
    let decision = match v.decision {
        sandpit_policy::Decision::Allow => Decision::Allow,
        _ => Decision::Deny,
    };
    let mut r = Record::new(run, Layer::Reviewer, action, subject.join(" "), decision);
    if action == "exec" {
        r.argv = subject.to_vec();
    }
    r.rule = v.rule.as_ref().map(RuleRef::from);
    r.reason = v.reason.clone();
    r
}

/// Read every record of a log file.
pub fn read_log(path: &Path) -> Result<Vec<Record>> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let mut r: Record = serde_json::from_str(l).map_err(|source| AuditError::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                source,
            })?;
            // A record from before the classification: it follows from the record.
            if r.ocsf.class_name.is_empty() {
                r.ocsf = ocsf::Ocsf::of(&r.action, r.decision);
            }
            Ok(r)
        })
        .collect()
}

/// Read the records of a log a launcher may have left mid-write (killed with
/// SIGKILL, the disk full): every complete line must be a record, and a last line
/// without its newline that is none is left out. Returns the records and whether
/// such a torn line was there.
pub fn read_log_after_crash(path: &Path) -> Result<(Vec<Record>, bool)> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let (whole, tail) = match text.rfind('\n') {
        Some(i) => text.split_at(i + 1),
        None => ("", text.as_str()),
    };
    let mut recs = Vec::new();
    for (i, l) in whole.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        recs.push(serde_json::from_str(l).map_err(|source| AuditError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            source,
        })?);
    }
    let mut torn = false;
    if !tail.trim().is_empty() {
        match serde_json::from_str(tail) {
            Ok(r) => recs.push(r),
            Err(_) => torn = true,
        }
    }
    Ok((recs, torn))
}

/// How a logged run ended, when not by its `exit` record: `None` if it logged its
/// end; else one line saying it still runs, or that it ended abnormally (its
/// launcher gone without logging the end: killed, or the machine went down).
pub fn abnormal_end(run: &str, recs: &[Record], torn: bool) -> Option<String> {
    let exited = recs
        .iter()
        .any(|r| r.layer == Layer::Launcher && r.action == "exit");
    if exited && !torn {
        return None;
    }
    let torn_note = if torn {
        "; its last line was cut short and is left out"
    } else {
        ""
    };
    if exited {
        return Some(format!(
            "sandpit: run {run}: the log's last line was cut short and is left out"
        ));
    }
    let launcher = run
        .rsplit('-')
        .next()
        .and_then(|p| p.parse::<i32>().ok())
        .and_then(rustix::process::Pid::from_raw);
    let alive = launcher.is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
    let last = recs.last().map_or("its start", |r| r.time.as_str());
    Some(if alive {
        format!(
            "sandpit: run {run} is still running (launcher pid {}): no exit record yet{torn_note}",
            launcher.map_or(0, |p| p.as_raw_nonzero().get())
        )
    } else {
        format!(
            "sandpit: run {run} ended abnormally: its launcher is gone without logging the end \
             (killed, or the machine went down); the last record is from {last}, and every \
             record written before it is here{torn_note}"
        )
    })
}

/// How often the logs are looked through for ones to remove: a run start in between
/// costs one `stat` (of the stamp), not one per log.
const PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// Remove the logs in `<state_dir>/logs` older than `days` days, then the oldest
/// until all take at most `bytes` (0: no limit for either), never `keep` (the
/// running log). At most once per [`PRUNE_EVERY`], by the stamp `<state_dir>/.logs-pruned`.
/// Returns how many were removed.
pub fn prune_logs(state_dir: &Path, days: u64, bytes: u64, keep: &Path) -> usize {
    let dir = logs_dir(state_dir);
    let stamp = state_dir.join(".logs-pruned");
    let now = std::time::SystemTime::now();
    if std::fs::metadata(&stamp)
        .and_then(|m| m.modified())
        .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age < PRUNE_EVERY))
    {
        return 0;
    }
    // The stamp first: runs starting meanwhile do not walk the logs again.
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&stamp);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return 0;
    };
    // (modified, size, path) of every run's log, oldest first.
    let mut logs: Vec<(std::time::SystemTime, u64, PathBuf)> = rd
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(".jsonl"))
        })
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            let path = e.path();
            (m.is_file() && path != keep).then_some((m.modified().ok()?, m.len(), path))
        })
        .collect();
    logs.sort();
    let max_age = std::time::Duration::from_secs(days.saturating_mul(86_400));
    let mut total: u64 = logs.iter().map(|l| l.1).sum();
    let mut removed = 0;
    for (modified, size, path) in logs {
        let old = days != 0 && now.duration_since(modified).is_ok_and(|age| age > max_age);
        let over = bytes != 0 && total > bytes;
        if (old || over) && std::fs::remove_file(&path).is_ok() {
            total -= size;
            removed += 1;
        }
    }
    removed
}

/// Every logged run id, oldest first.
pub fn runs(state_dir: &Path) -> Result<Vec<String>> {
    let dir = logs_dir(state_dir);
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io(&dir)(e)),
    };
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".jsonl"))
                .map(str::to_string)
        })
        .collect();
    v.sort();
    Ok(v)
}

/// The log file of `run` (`None` or `latest`: the most recent run). A unique prefix
/// of a run id is accepted.
pub fn find_run(state_dir: &Path, run: Option<&str>) -> Result<(String, PathBuf)> {
    let all = runs(state_dir)?;
    let pick = match run {
        None | Some("latest") => all
            .last()
            .cloned()
            .ok_or_else(|| AuditError::NoRuns(logs_dir(state_dir)))?,
        Some(r) => {
            if all.iter().any(|a| a == r) {
                r.to_string()
            } else {
                let m: Vec<&String> = all.iter().filter(|a| a.starts_with(r)).collect();
                match m.as_slice() {
                    [one] => (*one).clone(),
                    _ => return Err(AuditError::NoRun(r.to_string())),
                }
            }
        }
    };
    let path = logs_dir(state_dir).join(format!("{pick}.jsonl"));
    Ok((pick, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn time_format() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_780_000_000_123);
        assert_eq!(rfc3339(t), "2026-05-28T20:26:40.123Z");
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn run_id_shape() {
        let id = new_run_id().unwrap();
        let (ts, rest) = id.split_once("Z-").unwrap();
        assert_eq!(ts.len(), 19, "{id}");
        assert_eq!((&ts[8..9], &ts[15..16]), ("T", "."), "{id}");
        let (random, pid) = rest.split_once('-').unwrap();
        assert_eq!(random.len(), 8, "{id}");
        assert_ne!(random, new_run_id().unwrap().split('-').nth(1).unwrap());
        assert_eq!(pid, std::process::id().to_string());
    }

    #[test]
    fn writes_lines_and_finds_runs() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join(".sandpit");
        let log = AuditLog::create(&state, "20260101T000000Z-1").unwrap();
        let mut r = Record::new(
            log.run(),
            Layer::Interposer,
            "read",
            "/x".into(),
            Decision::Deny,
        );
        r.reason = "blocked".into();
        log.record(r.clone());
        log.record(Record::new(
            log.run(),
            Layer::Launcher,
            "exit",
            "0".into(),
            Decision::Info,
        ));
        assert_eq!(log.denials(), vec![r.clone()]);
        let back = read_log(log.path()).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], r);
        // Never overwrites an existing run's log.
        assert!(AuditLog::create(&state, "20260101T000000Z-1").is_err());
        AuditLog::create(&state, "20260102T000000Z-1").unwrap();
        assert_eq!(find_run(&state, None).unwrap().0, "20260102T000000Z-1");
        assert_eq!(
            find_run(&state, Some("20260101")).unwrap().0,
            "20260101T000000Z-1"
        );
        assert!(find_run(&state, Some("2026")).is_err());
        let md = std::fs::metadata(log.path()).unwrap();
        assert_eq!(md.mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(logs_dir(&state)).unwrap().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn a_torn_last_line_is_left_out_and_the_end_is_told() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join(".sandpit");
        // The pid of no process.
        let run = "20260101T000000Z-ab-2147483646";
        let log = AuditLog::create(&state, run).unwrap();
        let r = Record::new(run, Layer::Interposer, "read", "/x".into(), Decision::Deny);
        log.record(r.clone());
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .unwrap();
        f.write_all(b"{\"time\":\"2026-").unwrap();
        assert!(read_log(log.path()).is_err());
        let (recs, torn) = read_log_after_crash(log.path()).unwrap();
        assert_eq!((recs, torn), (vec![r.clone()], true));
        let line = abnormal_end(run, std::slice::from_ref(&r), false).unwrap();
        assert!(line.contains("ended abnormally"), "{line}");
        // A live launcher: still running.
        let live = format!("20260101T000000Z-ab-{}", std::process::id());
        let line = abnormal_end(&live, std::slice::from_ref(&r), false).unwrap();
        assert!(line.contains("still running"), "{line}");
        let exit = Record::new(run, Layer::Launcher, "exit", "0".into(), Decision::Info);
        assert_eq!(abnormal_end(run, &[r, exit], false), None);
    }

    #[test]
    fn records_written_before_the_event_schema_still_read() {
        let old = r#"{"time":"2026-11-29T22:41:16.876Z","run":"r","layer":"interposer","action":"read","subject":"/h/.ssh/id_rsa","decision":"deny","rule":{"file":"f","key":"files.block_read","entry":"~/.ssh","line":9,"col":3},"reason":"x"}"#;
        let r: Record = serde_json::from_str(old).unwrap();
        assert_eq!((r.pid, r.program.as_deref()), (None, None));
        assert_eq!(r.ocsf, ocsf::Ocsf::default());
        // Reading a log fills it in.
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("old.jsonl");
        std::fs::write(&path, format!("{old}\n")).unwrap();
        let back = read_log(&path).unwrap();
        assert_eq!(back[0].ocsf.class_uid, 1001);
        // A record written now carries the fields at the top level, and reads back.
        let mut now = Record::new("r", Layer::Interposer, "read", "/x".into(), Decision::Deny);
        now.pid = Some(42);
        let line = serde_json::to_string(&now).unwrap();
        assert!(line.contains(r#""pid":42,"class_uid":1001,"#), "{line}");
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), now);
    }

    #[test]
    fn proxy_events_name_their_rule() {
        let d = tempfile::tempdir().unwrap();
        let policy = session::tests::policy(d.path(), "[network]\nallow = [\"api.example.com\"]\n");
        let e = event::AuditEvent {
            time: SystemTime::now(),
            way: event::Way::Connect,
            host: "api.example.com".into(),
            port: 443,
            addr: None,
            allow: true,
            rule: None,
            reason: "allowed".into(),
            program: None,
        };
        let r = proxy_record("r", Some(&policy), &e);
        assert_eq!(r.subject, "api.example.com:443");
        assert_eq!(r.decision, Decision::Allow);
        let rule = r.rule.unwrap();
        assert_eq!(
            (rule.key.as_str(), rule.entry.as_str()),
            ("network.allow", "api.example.com")
        );
        assert_eq!(rule.line, 2);
        let denied = event::AuditEvent {
            host: "evil.example".into(),
            allow: false,
            ..e
        };
        let r = proxy_record("r", Some(&policy), &denied);
        assert_eq!(r.decision, Decision::Deny);
        assert_eq!(r.rule, None);
    }
}
