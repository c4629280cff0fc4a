//! Ask on a blocked host (`network.ask_on_blocked_host`): a connection the rules
//! deny only because `network.allow` does not name its host waits while the
//! launcher asks the user on the terminal it relays ([`crate::console`]):
//!
//! `sandpit: PROGRAM (pid N) wants HOST:PORT (not in network.allow). [o]nce, this [r]un, [d]eny, or type HOST for always? (denied in 30s) Then Enter:`
//!
//! once lets this connection through; this run changes the [`Live`] rules, as
//! `sandpit allow` does; always (the host name typed, not a key the sandbox could
//! get the user to press without reading: a forged question cannot get it) does
//! that and adds the host to `[network] allow` of the user's config, with a
//! comment; deny, or no answer in time, denies. One
//! question at a time, and connections to the same `HOST:PORT` that arrive while
//! it is up wait for its answer. Explicit `block` entries, offline mode, addresses
//! (loopback, private, metadata) are never asked about. Every answer is a record.
#![forbid(unsafe_code)]
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandpit_policy::host::Host;

use super::{Live, Op};
use crate::audit::{AuditLog, Decision, Layer as AuditLayer, Record};
use crate::console::{Console, Reply};
use crate::proxy::{Ask, Verdict};

/// Asks the user about blocked hosts, for the proxy ([`Ask`]).
pub struct Asker {
    inner: Arc<Inner>,
}

struct Inner {
    live: Arc<Live>,
    console: Arc<Console>,
    log: Arc<AuditLog>,
    timeout: Duration,
    /// `network.ask_on_blocked_host` as loaded, with where (for the rule of each answer).
    rule: String,
    /// The user's config file, where "always" adds the host.
    user_config: PathBuf,
    /// The connections waiting for the question about each `host:port` from each
    /// program (a "once" answers the program named in the question, no other).
    waiting: Mutex<HashMap<String, Vec<tokio::sync::oneshot::Sender<Verdict>>>>,
    /// Questions that went unanswered in this run: at [`MAX_UNANSWERED`] asking
    /// stops for the rest of the run.
    unanswered: AtomicU32,
}

/// Most questions waiting at once: a sandbox that tries host after host cannot
/// queue the user a question per host (each holding the terminal for a timeout).
const MAX_WAITING: usize = 8;
/// After this many questions without an answer, the run asks no more: nobody is
/// there, or the questions come faster than a person answers them.
const MAX_UNANSWERED: u32 = 3;

impl Asker {
    pub fn new(
        live: Arc<Live>,
        console: Arc<Console>,
        log: Arc<AuditLog>,
        user_config: PathBuf,
    ) -> Asker {
        let p = live.current();
        let timeout = Duration::from_secs(u64::from(p.network.ask_timeout.value));
        let rule = p.network.ask_on_blocked_host.origin.to_string();
        Asker {
            inner: Arc::new(Inner {
                live,
                console,
                log,
                timeout,
                rule,
                user_config,
                waiting: Mutex::default(),
                unanswered: AtomicU32::new(0),
            }),
        }
    }
}

/// Whether `denied` (the rules' verdict on `host:port`) is a denial to ask about:
/// a name (no address, no loopback name) that `network.allow` does not name, in
/// filtered mode, with no rule behind the denial (a `block` entry, the offline mode
/// or a leaked credential name theirs).
pub fn askable(live: &Live, host: &Host, port: u16, denied: &Verdict) -> bool {
    !denied.allow && denied.rule.is_none() && sandpit_policy::askable(&live.current(), host, port)
}

impl Ask for Asker {
    fn ask<'a>(
        &'a self,
        host: &'a Host,
        port: u16,
        denied: &'a Verdict,
        who: crate::service::decide::Who<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Verdict> + Send + 'a>> {
        Box::pin(async move {
            if !askable(&self.inner.live, host, port, denied) {
                return denied.clone();
            }
            if !self.inner.console.attached() {
                return denied.clone();
            }
            if self.inner.unanswered.load(Ordering::Relaxed) >= MAX_UNANSWERED {
                return Verdict::deny(
                    denied.rule.clone(),
                    format!(
                        "{}; not asked: {MAX_UNANSWERED} questions of this run went unanswered, so it asks no more",
                        denied.reason
                    ),
                );
            }
            let who = who();
            let key = format!("{host}:{port} {}", who.as_deref().unwrap_or(""));
            let (tx, rx) = tokio::sync::oneshot::channel();
            let first = {
                let mut w = match self.inner.waiting.lock() {
                    Ok(w) => w,
                    Err(e) => e.into_inner(),
                };
                if !w.contains_key(&key) && w.len() >= MAX_WAITING {
                    return Verdict::deny(
                        denied.rule.clone(),
                        format!(
                            "{}; not asked: {MAX_WAITING} questions already wait for an answer",
                            denied.reason
                        ),
                    );
                }
                let list = w.entry(key.clone()).or_default();
                list.push(tx);
                list.len() == 1
            };
            if first {
                // On a thread of its own: the question outlives a connection that
                // gives up waiting, and its answer reaches every one still waiting.
                let inner = self.inner.clone();
                let (host, denied) = (host.clone(), denied.clone());
                tokio::task::spawn_blocking(move || {
                    let v = inner.question(&host, port, &denied, who.as_deref());
                    let list = match inner.waiting.lock() {
                        Ok(mut w) => w.remove(&key).unwrap_or_default(),
                        Err(e) => e.into_inner().remove(&key).unwrap_or_default(),
                    };
                    for tx in list {
                        let _ = tx.send(v.clone());
                    }
                });
            }
            rx.await.unwrap_or_else(|_| denied.clone())
        })
    }
}

impl Inner {
    /// Put the question about `host:port` up (once its turn comes), act on the
    /// answer, record it; the verdict that stands.
    fn question(&self, host: &Host, port: u16, denied: &Verdict, who: Option<&str>) -> Verdict {
        let dest = format!("{host}:{port}");
        let secs = self.timeout.as_secs();
        // The program's path is the sandbox's choice of bytes (a file name may hold
        // escape sequences): shown with its control characters escaped.
        let who = who.map_or_else(|| "the command".to_string(), crate::console::printable);
        let name = host.to_string();
        let question = format!(
            "sandpit: {who} wants {} (not in network.allow). [o]nce, this [r]un, [d]eny, or type {} for always? (denied in {secs}s) Then Enter:",
            crate::console::printable(&dest),
            crate::console::printable(&name)
        );
        let answers = [("o", b'o'), ("r", b'r'), ("d", b'd'), (name.as_str(), b'a')];
        // An answer given while this one waited its turn ("this run", "always")
        // may cover it already.
        let before = || {
            let v = crate::proxy::Decide::connect(self.live.as_ref(), host, port);
            v.allow.then_some(v)
        };
        let reply = match self
            .console
            .ask(before, &question, &answers, self.timeout, echo)
        {
            Ok(r) => r,
            Err(v) => return v,
        };
        let rule = Some(self.rule.clone());
        let (verdict, said) = match reply {
            Reply::Key(b'o') => (
                Verdict::allow(
                    rule,
                    format!("connection to {dest} allowed once by the user (asked)"),
                ),
                "once".to_string(),
            ),
            Reply::Key(k @ (b'r' | b'a')) => match self.live.change(Op::Allow, &dest) {
                Ok(_) => {
                    let mut said = "this run".to_string();
                    if k == b'a' {
                        said = match add_to_config(&self.user_config, &dest, self.log.run()) {
                            Ok(()) => format!(
                                "always (added to [network] allow in {})",
                                self.user_config.display()
                            ),
                            Err(e) => {
                                eprintln!("sandpit: {} is allowed for this run, but could not be added to {}: {e}", crate::console::printable(&dest), self.user_config.display());
                                format!(
                                    "always, but {} could not be changed ({e}): this run only",
                                    self.user_config.display()
                                )
                            }
                        };
                    }
                    (
                        Verdict::allow(
                            rule,
                            format!("connection to {dest} allowed by the user (asked): {said}"),
                        ),
                        said,
                    )
                }
                Err(e) => (
                    Verdict::deny(denied.rule.clone(), format!("{}; asked, allowed by the user, but {e}", denied.reason)),
                    format!("allow, which did not take: {e}"),
                ),
            },
            Reply::Key(_) => (
                Verdict::deny(
                    rule,
                    format!(
                        "blocked connection to {dest}: the host is not in network.allow; asked, denied by the user"
                    ),
                ),
                "deny".to_string(),
            ),
            Reply::Timeout => (
                Verdict::deny(
                    rule,
                    format!(
                        "blocked connection to {dest}: the host is not in network.allow; asked, no answer in {secs}s"
                    ),
                ),
                {
                    self.unanswered.fetch_add(1, Ordering::Relaxed);
                    format!("no answer in {secs}s")
                },
            ),
            Reply::NoTerminal => return denied.clone(),
        };
        let mut r = Record::new(
            self.log.run(),
            AuditLayer::Launcher,
            "policy",
            format!("ask {dest}"),
            if verdict.allow {
                Decision::Allow
            } else {
                Decision::Deny
            },
        );
        r.reason = format!("decided by the user, asked on the terminal: {said}");
        self.log.record(r);
        verdict
    }
}

/// What the question's line ends with once it is answered.
fn echo(r: Reply) -> String {
    match r {
        Reply::Key(b'o') => "once".into(),
        Reply::Key(b'r') => "this run".into(),
        Reply::Key(b'a') => "always".into(),
        Reply::Key(_) => "denied".into(),
        Reply::Timeout => "no answer: denied".into(),
        Reply::NoTerminal => "denied".into(),
    }
}

/// Add `entry` to `[network] allow` of the TOML file at `path` (made when missing),
/// with a comment naming the date and the run; the file's other text, comments
/// included, stays as it was. Written to a temporary file and renamed over it.
pub fn add_to_config(path: &std::path::Path, entry: &str, run: &str) -> Result<(), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e.to_string()),
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    let net = doc
        .entry("network")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
    let net = net.as_table_like_mut().ok_or("[network] is not a table")?;
    let allow = net
        .entry("allow")
        .or_insert(toml_edit::Item::Value(toml_edit::Value::Array(
            toml_edit::Array::new(),
        )));
    let arr = allow
        .as_array_mut()
        .ok_or("network.allow is not an array")?;
    if arr.iter().any(|v| v.as_str() == Some(entry)) {
        return Ok(());
    }
    let date = crate::audit::rfc3339(std::time::SystemTime::now());
    let date = date.get(..10).unwrap_or(&date);
    let mut v = toml_edit::Value::from(entry);
    v.decor_mut().set_prefix(format!(
        "\n    # allowed when asked on {date}, run {run}\n    "
    ));
    arr.push_formatted(v);
    arr.set_trailing("\n");
    arr.set_trailing_comma(true);
    let out = doc.to_string();
    let tmp = path.with_extension("toml.sandpit-ask");
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::write(&tmp, out).map_err(|e| e.to_string())?;
    if let Ok(m) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, m.permissions());
    }
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_keeps_the_file_and_its_comments() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("config.toml");
        std::fs::write(
            &p,
            "# mine\n[network]\n# hosts\nallow = [\"a.test\"] # end\nmode = \"filtered\"\n",
        )
        .unwrap();
        add_to_config(&p, "b.test:8080", "r1").unwrap();
        add_to_config(&p, "b.test:8080", "r1").unwrap();
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.starts_with("# mine\n[network]\n# hosts\n"), "{t}");
        assert!(t.contains("# allowed when asked on "), "{t}");
        assert!(t.contains("run r1"), "{t}");
        assert!(t.contains("# end"), "{t}");
        assert_eq!(t.matches("b.test:8080").count(), 1, "{t}");
        let p2 = crate::proxy::decide::policy_from_toml(&t).unwrap();
        assert_eq!(p2.network.allow.len(), 2);
        // A missing file is made.
        let q = d.path().join("new/config.toml");
        add_to_config(&q, "c.test:443", "r2").unwrap();
        let t = std::fs::read_to_string(&q).unwrap();
        let p3 = crate::proxy::decide::policy_from_toml(&t).unwrap();
        assert_eq!(p3.network.allow.len(), 1, "{t}");
    }

    #[test]
    fn only_names_missing_from_allow_are_asked_about() {
        let live = Live::new(
            &crate::proxy::decide::policy_from_toml(
                "[network]\nblock = [\"bad.test\"]\n[[network.program]]\nname = \"git only\"\nprograms = [\"git\"]\nhosts = [\"lim.test\"]\n",
            )
            .unwrap(),
            "r1",
            None,
        );
        let n = |s: &str| Host::Name(s.into());
        let d = |h: &Host| crate::proxy::Decide::connect(&live, h, 443);
        assert!(askable(&live, &n("x.test"), 443, &d(&n("x.test"))));
        assert!(!askable(&live, &n("bad.test"), 443, &d(&n("bad.test"))));
        // A host a program entry limits: the answer would bypass the entry.
        assert!(!askable(&live, &n("lim.test"), 443, &d(&n("lim.test"))));
        assert!(!askable(&live, &n("localhost"), 443, &d(&n("localhost"))));
        assert!(!askable(
            &live,
            &n("a.localhost"),
            443,
            &d(&n("a.localhost"))
        ));
        let ip = Host::Ip("169.254.169.254".parse().unwrap());
        assert!(!askable(&live, &ip, 443, &d(&ip)));
        let ip = Host::Ip("1.1.1.1".parse().unwrap());
        assert!(!askable(&live, &ip, 443, &d(&ip)));
        let off = Live::new(
            &crate::proxy::decide::policy_from_toml("[network]\nmode = \"offline\"\n").unwrap(),
            "r1",
            None,
        );
        let v = crate::proxy::Decide::connect(&off, &n("x.test"), 443);
        assert!(!askable(&off, &n("x.test"), 443, &v));
    }
}
