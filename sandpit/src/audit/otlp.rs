//! Export of every audit record as an OpenTelemetry log record, over OTLP/HTTP with
//! JSON encoding (`POST <endpoint>/v1/logs`, `content-type: application/json`), when
//! the user's config sets `[telemetry] otlp_endpoint`.
//!
//! Hand-built on what sandpit already links (serde_json, reqwest, tokio) rather
//! than on the `opentelemetry` SDK crates: those add an SDK, a batch processor and,
//! for OTLP, prost/tonic or their own HTTP stack — dozens of crates for one JSON
//! POST whose shape is fixed by the OTLP specification.
//!
//! The exporter lives in the launcher, outside the sandbox: the sandbox neither
//! reaches the collector through it nor hands it records (records come from the
//! launcher's own log, after the launcher has judged them). It never holds up the
//! run: records go into a bounded queue ([`QUEUE`]); when the queue is full a record
//! is counted, not queued; a thread of its own sends batches ([`BATCH`]) with a
//! bounded time per request; at the run's end it gets [`FLUSH_WAIT`] to send what is
//! left, then is left behind. What was not exported is counted, said once at the end
//! and recorded in the local log. Every exported string goes through the masker
//! the launcher sets ([`Exporter::set_masker`]: secrets the run knows, as in review
//! requests); without one, nothing is exported.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{Decision, Record};

/// Records waiting to be sent, at most.
pub const QUEUE: usize = 8192;
/// Records in one request, at most.
pub const BATCH: usize = 512;
/// How long a batch waits to fill once it has its first record.
const LINGER: Duration = Duration::from_millis(200);
/// One request's whole time, at most (connecting included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Strings whose masked form is remembered, at most.
const REDACT_CACHE: usize = 4096;
/// How long the run's end waits for the last batches.
pub const FLUSH_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{at}: telemetry.otlp_endpoint {url:?} is not a URL sandpit can send to: {why}")]
    Url {
        at: String,
        url: String,
        why: String,
    },
    #[error("{at}: telemetry.headers: {why}")]
    Header { at: String, why: String },
}

/// Masks secrets in one exported string.
pub type Masker = Box<dyn Fn(&str) -> String + Send>;
/// Builds the masker on the exporter's own thread (it may read files).
pub type MaskerFactory = Box<dyn FnOnce() -> Masker + Send>;

/// Where and how to send.
pub struct Target {
    url: reqwest::Url,
    headers: reqwest::header::HeaderMap,
    /// The endpoint as configured, for messages.
    shown: String,
}

impl Target {
    /// From the policy's `[telemetry]`; `None` when no endpoint is set.
    pub fn from_policy(p: &sandpit_policy::Policy) -> Result<Option<Target>, ExportError> {
        let Some(e) = &p.telemetry.otlp_endpoint else {
            return Ok(None);
        };
        let at = e.origin.location();
        let base = e.value.trim_end_matches('/');
        let full = if base.ends_with("/v1/logs") {
            base.to_string()
        } else {
            format!("{base}/v1/logs")
        };
        let bad = |why: String| ExportError::Url {
            at: at.clone(),
            url: e.value.clone(),
            why,
        };
        let url = reqwest::Url::parse(&full).map_err(|x| bad(x.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(bad("not an http(s) URL with a host".into()));
        }
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &p.telemetry.headers {
            let n = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|x| {
                ExportError::Header {
                    at: at.clone(),
                    why: format!("{name:?}: {x}"),
                }
            })?;
            let mut v =
                reqwest::header::HeaderValue::from_str(value).map_err(|x| ExportError::Header {
                    at: at.clone(),
                    why: format!("the value of {name:?}: {x}"),
                })?;
            v.set_sensitive(true);
            headers.insert(n, v);
        }
        Ok(Some(Target {
            url,
            headers,
            shown: e.value.clone(),
        }))
    }
}

/// Counts shared by the queue's producers, the sending thread and the run's end.
#[derive(Default)]
struct Counts {
    queued: AtomicU64,
    full: AtomicU64,
    exported: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
    done: AtomicBool,
}

/// The run's exporter: [`Exporter::send`] from any thread, [`Exporter::start`] once
/// the sandbox's processes are forked, [`Exporter::finish`] at the end.
pub struct Exporter {
    tx: Mutex<Option<SyncSender<Record>>>,
    /// What the thread needs, until it starts.
    pending: Mutex<Option<(Receiver<Record>, Target)>>,
    counts: Arc<Counts>,
    /// Told by the thread when it has sent everything.
    done_rx: Mutex<Option<Receiver<()>>>,
    run: String,
    shown: String,
    /// How secrets are masked, built on the thread (it may read files).
    masker: Mutex<Option<MaskerFactory>>,
}

/// What the run's end says about the export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub endpoint: String,
    pub exported: u64,
    /// Not exported: the queue was full, a request failed, or the end came first.
    pub lost: u64,
    pub full: u64,
    pub failed: u64,
    pub first_error: Option<String>,
}

impl Outcome {
    /// The one line the user is told, when records were not exported.
    pub fn line(&self, log: &std::path::Path) -> Option<String> {
        if self.lost == 0 {
            return None;
        }
        let mut why = vec![];
        if self.full > 0 {
            why.push(format!("{} dropped with the queue full", self.full));
        }
        if self.failed > 0 {
            why.push(format!(
                "{} in requests that failed ({})",
                self.failed,
                self.first_error.as_deref().unwrap_or("unknown error")
            ));
        }
        let late = self.lost - self.full - self.failed;
        if late > 0 {
            why.push(format!("{late} not sent by the run's end"));
            if self.failed == 0 {
                if let Some(e) = &self.first_error {
                    why.push(e.clone());
                }
            }
        }
        Some(format!(
            "sandpit: telemetry: {} of {} records were not exported to {} ({}); every record is in {}",
            self.lost,
            self.lost + self.exported,
            self.endpoint,
            why.join(", "),
            log.display()
        ))
    }
}

impl Exporter {
    pub fn new(target: Target, run: &str) -> Exporter {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        Exporter {
            tx: Mutex::new(Some(tx)),
            shown: target.shown.clone(),
            pending: Mutex::new(Some((rx, target))),
            counts: Arc::default(),
            done_rx: Mutex::new(None),
            run: run.to_string(),
            masker: Mutex::new(None),
        }
    }

    /// How every exported string is masked; set before [`Exporter::start`].
    pub fn set_masker(&self, m: MaskerFactory) {
        if let Ok(mut slot) = self.masker.lock() {
            *slot = Some(m);
        }
    }

    /// Queue a record; never waits (a full queue counts it instead).
    pub fn send(&self, r: &Record) {
        let Ok(tx) = self.tx.lock() else { return };
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(r.clone()) {
            Ok(()) => {
                self.counts.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_)) => {
                self.counts.full.fetch_add(1, Ordering::Relaxed);
            }
            // The thread is not sending (it could not start): counted as unsent.
            Err(TrySendError::Disconnected(_)) => {
                self.counts.queued.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Start the sending thread (after the fork: the launcher forks single-threaded).
    pub fn start(&self) {
        let Some((rx, target)) = self.pending.lock().ok().and_then(|mut p| p.take()) else {
            return;
        };
        // Fail closed: unmasked records are not exported.
        let Some(masker) = self.masker.lock().ok().and_then(|mut m| m.take()) else {
            if let Ok(mut f) = self.counts.first_error.lock() {
                *f = Some("no masking of secrets was set up, so nothing was sent".into());
            }
            return;
        };
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        if let Ok(mut d) = self.done_rx.lock() {
            *d = Some(done_rx);
        }
        let counts = self.counts.clone();
        let run = self.run.clone();
        let spawned = std::thread::Builder::new()
            .name("sandpit-otlp".into())
            .spawn(move || {
                send_loop(rx, target, &run, masker, &counts);
                counts.done.store(true, Ordering::Release);
                let _ = done_tx.send(());
            });
        if let Err(e) = spawned {
            if let Ok(mut f) = self.counts.first_error.lock() {
                *f = Some(format!("the exporter's thread did not start: {e}"));
            }
        }
    }

    /// Close the queue, give the thread [`FLUSH_WAIT`] to send what is left, and
    /// count what was not exported.
    pub fn finish(&self) -> Outcome {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        // Never started (the run did not get that far): start it now, to send what
        // was queued within the same bound.
        self.start();
        if let Some(rx) = self.done_rx.lock().ok().and_then(|mut d| d.take()) {
            let _ = rx.recv_timeout(FLUSH_WAIT);
        }
        let c = &self.counts;
        let queued = c.queued.load(Ordering::Relaxed);
        let full = c.full.load(Ordering::Relaxed);
        let exported = c.exported.load(Ordering::Relaxed);
        let failed = c.failed.load(Ordering::Relaxed);
        Outcome {
            endpoint: self.shown.clone(),
            exported,
            lost: full + queued.saturating_sub(exported),
            full,
            failed,
            first_error: c.first_error.lock().ok().and_then(|f| f.clone()),
        }
    }
}

/// The thread: batches from the queue, one POST each, until the queue is closed
/// and empty.
fn send_loop(
    rx: Receiver<Record>,
    target: Target,
    run: &str,
    masker: MaskerFactory,
    counts: &Counts,
) {
    let fail_all = |why: String| {
        if let Ok(mut f) = counts.first_error.lock() {
            f.get_or_insert(why);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail_all(format!("no runtime for the exporter: {e}")),
    };
    let client = match reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .default_headers(target.headers.clone())
        .build()
    {
        Ok(c) => c,
        Err(e) => return fail_all(format!("no HTTP client for the exporter: {e}")),
    };
    let mask = masker();
    // Masking is most of an export's work, and a flood repeats its strings.
    let cache: std::cell::RefCell<std::collections::HashMap<String, String>> = Default::default();
    let redact = |s: &str| {
        if let Some(hit) = cache.borrow().get(s) {
            return hit.clone();
        }
        let masked = mask(s);
        let mut c = cache.borrow_mut();
        if c.len() >= REDACT_CACHE {
            c.clear();
        }
        c.insert(s.to_string(), masked.clone());
        masked
    };
    loop {
        let first = match rx.recv() {
            Ok(r) => r,
            Err(_) => return,
        };
        let mut batch = vec![first];
        let until = Instant::now() + LINGER;
        while batch.len() < BATCH {
            let left = until.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(r) => batch.push(r),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let n = batch.len() as u64;
        let body = request_body(run, &batch, &redact);
        let sent = rt.block_on(async {
            let resp = client
                .post(target.url.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| describe(&e))?;
            let status = resp.status();
            // The body is read (bounded by the request's time) so the connection
            // can be reused; a partial-success answer is still a success here.
            let _ = resp.bytes().await;
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("the collector answered HTTP {status}"))
            }
        });
        match sent {
            Ok(()) => {
                counts.exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(why) => {
                counts.failed.fetch_add(n, Ordering::Relaxed);
                fail_all(why);
            }
        }
    }
}

/// A transport error by kind and cause.
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "the request failed"
    };
    match std::error::Error::source(e) {
        Some(inner) => format!("{kind}: {inner}"),
        None => kind.to_string(),
    }
}

/// The OTLP/JSON `ExportLogsServiceRequest` for a batch of one run's records.
pub fn request_body(run: &str, batch: &[Record], redact: &dyn Fn(&str) -> String) -> Vec<u8> {
    let records: Vec<Value> = batch.iter().map(|r| log_record(r, redact)).collect();
    let body = json!({
        "resourceLogs": [{
            "resource": {"attributes": [
                kv("service.name", s("sandpit")),
                kv("service.version", s(env!("CARGO_PKG_VERSION"))),
                kv("sandpit.run.id", s(run)),
            ]},
            "scopeLogs": [{
                "scope": {"name": "sandpit.audit", "version": env!("CARGO_PKG_VERSION")},
                "logRecords": records,
            }],
        }],
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

fn kv(key: &str, value: Value) -> Value {
    json!({"key": key, "value": value})
}
fn s(v: &str) -> Value {
    json!({"stringValue": v})
}
/// OTLP/JSON writes 64-bit integers as strings.
fn int(v: u64) -> Value {
    json!({"intValue": v.to_string()})
}

/// One record as an OTLP `LogRecord`: the attributes carry the event's fields (OCSF
/// names for the classification, `sandpit.*` for the rest, OpenTelemetry's
/// semantic-convention names for the process), the body the human line.
fn log_record(r: &Record, redact: &dyn Fn(&str) -> String) -> Value {
    let o = &r.ocsf;
    let mut attrs = vec![
        kv("class_uid", int(o.class_uid.into())),
        kv("class_name", s(&o.class_name)),
        kv("category_uid", int(o.category_uid.into())),
        kv("category_name", s(&o.category_name)),
        kv("activity_id", int(o.activity_id.into())),
        kv("activity_name", s(&o.activity_name)),
        kv("type_uid", int(o.type_uid)),
        kv("action_id", int(o.action_id.into())),
        kv("disposition_id", int(o.disposition_id.into())),
        kv("severity_id", int(o.severity_id.into())),
        kv("sandpit.run.id", s(&r.run)),
        kv("sandpit.layer", s(r.layer.as_str())),
        kv("sandpit.operation", s(&r.action)),
        kv("sandpit.target", s(&redact(&r.subject))),
        kv("sandpit.decision", s(r.decision.as_str())),
        kv("sandpit.reason", s(&redact(&r.reason))),
    ];
    if let Some(rule) = &r.rule {
        attrs.extend([
            kv("sandpit.rule.key", s(&rule.key)),
            kv("sandpit.rule.entry", s(&redact(&rule.entry))),
            kv("sandpit.rule.file", s(&rule.file)),
            kv("sandpit.rule.line", int(rule.line.into())),
            kv("sandpit.rule.column", int(rule.col.into())),
        ]);
    }
    if let Some(p) = &r.program {
        attrs.push(kv("process.executable.path", s(&redact(p))));
    }
    if let Some(pid) = r.pid {
        attrs.push(kv("process.pid", int(pid.into())));
    }
    if !r.argv.is_empty() {
        let args: Vec<Value> = r.argv.iter().map(|a| s(&redact(a))).collect();
        attrs.push(kv(
            "process.command_args",
            json!({"arrayValue": {"values": args}}),
        ));
    }
    let (number, text) = match r.decision {
        Decision::Deny => (13, "WARN"),
        _ => (9, "INFO"),
    };
    let nanos = unix_nanos(&r.time).to_string();
    let mut line = format!(
        "{} {} {} [{}]",
        r.decision.as_str(),
        r.action,
        redact(&r.subject),
        r.layer.as_str()
    );
    if let Some(rule) = &r.rule {
        line.push_str(&format!(" rule: {rule}"));
    }
    json!({
        "timeUnixNano": nanos,
        "observedTimeUnixNano": nanos,
        "severityNumber": number,
        "severityText": text,
        "eventName": format!("sandpit.{}", r.action),
        "body": s(&line),
        "attributes": attrs,
    })
}

/// Nanoseconds since the epoch of a record's `YYYY-MM-DDTHH:MM:SS.mmmZ` (0 when
/// it is not that shape).
pub fn unix_nanos(t: &str) -> u64 {
    let num = |a: usize, b: usize| t.get(a..b).and_then(|x| x.parse::<i64>().ok());
    let (Some(y), Some(m), Some(d), Some(hh), Some(mm), Some(ss), Some(ms)) = (
        num(0, 4),
        num(5, 7),
        num(8, 10),
        num(11, 13),
        num(14, 16),
        num(17, 19),
        num(20, 23),
    ) else {
        return 0;
    };
    // Days from civil (the inverse of `audit::civil`).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs * 1_000_000_000 + ms * 1_000_000).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{rfc3339, Layer};

    #[test]
    fn record_times_round_trip() {
        for ms in [0u64, 951_782_400_000, 1_780_000_000_123] {
            let t = std::time::SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
            assert_eq!(unix_nanos(&rfc3339(t)), ms * 1_000_000);
        }
        assert_eq!(unix_nanos("nonsense"), 0);
    }

    #[test]
    fn without_a_masker_nothing_is_exported() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let d = tempfile::tempdir().unwrap();
        let p = crate::audit::session::tests::policy(
            d.path(),
            &format!("[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\n"),
        );
        let x = Exporter::new(Target::from_policy(&p).unwrap().unwrap(), "r");
        x.start();
        x.send(&Record::new(
            "r",
            Layer::Launcher,
            "start",
            "x".into(),
            Decision::Info,
        ));
        let out = x.finish();
        assert_eq!((out.exported, out.lost), (0, 1));
        let line = out.line(std::path::Path::new("/l")).unwrap();
        assert!(
            line.contains("1 not sent by the run's end, no masking"),
            "{line}"
        );
        assert!(l.accept().is_err(), "something was sent");
    }

    #[test]
    fn body_is_otlp_json_with_the_event() {
        let mut r = Record::new(
            "run1",
            Layer::Interposer,
            "read",
            "/h/.ssh/id".into(),
            Decision::Deny,
        );
        r.rule = Some(crate::audit::RuleRef {
            file: "u.toml".into(),
            key: "files.block_read".into(),
            entry: "~/.ssh".into(),
            line: 3,
            col: 5,
        });
        r.reason = "token sk-ant-abcdefghijklmnopqrstuvwxyz0123456789".into();
        let mask = |t: &str| t.replace("sk-ant-abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]");
        let body: Value = serde_json::from_slice(&request_body("run1", &[r], &mask)).unwrap();
        let rl = &body["resourceLogs"][0];
        assert_eq!(
            rl["resource"]["attributes"][0]["value"]["stringValue"],
            "sandpit"
        );
        let rec = &rl["scopeLogs"][0]["logRecords"][0];
        let attr = |k: &str| {
            rec["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == k)
                .map(|a| a["value"].clone())
                .unwrap_or(Value::Null)
        };
        assert_eq!(attr("class_uid")["intValue"], "1001");
        assert_eq!(attr("sandpit.rule.line")["intValue"], "3");
        assert_eq!(attr("sandpit.decision")["stringValue"], "deny");
        assert_eq!(rec["severityText"], "WARN");
        assert!(
            !attr("sandpit.reason").to_string().contains("sk-ant-"),
            "{rec}"
        );
    }
}
