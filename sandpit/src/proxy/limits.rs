//! What one run may hold of the proxy: `limits.connections` (open at once) and
//! `limits.connections_per_second` (new ones to any one host), and room for new
//! clients while slow ones hold their handshakes (slow-loris).
//!
//! Every client connection runs in a task that carries a [`Slot`] (a task-local set
//! by the accept loop). A connection is *pending* until it reaches a decision
//! ([`Limits::admit`]): when every handshake place is taken, the accept loop closes
//! the oldest pending one to make room ([`Pending::make_room`]), so clients that
//! never finish their request head cannot keep a prompt one waiting.
//! An allowed connection takes one of `limits.connections` places for as long as
//! its client stays connected; past either limit it is refused with a reason naming
//! the limit and how to raise it.
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::AbortHandle;

use super::decide::Verdict;

/// One limit's value and where it was set (for the refusal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub value: u64,
    /// `file:line`, or `built-in default`.
    pub origin: String,
}

impl Limit {
    /// `limit` from the policy; `None` when 0 (no limit).
    pub fn from_rule(r: &sandpit_policy::Rule<u64>) -> Option<Limit> {
        (r.value != 0).then(|| Limit {
            value: r.value,
            origin: r.origin.location(),
        })
    }
}

/// A client connection's place, carried by its task.
#[derive(Default)]
pub(crate) struct Slot {
    /// Reached a decision: no longer a candidate for eviction.
    decided: AtomicBool,
    /// Its place among `limits.connections`, held while the client is connected.
    open: Mutex<Option<OwnedSemaphorePermit>>,
}

tokio::task_local! {
    pub(crate) static SLOT: Arc<Slot>;
}

/// The connections still in their handshake, oldest first.
#[derive(Default)]
pub(crate) struct Pending {
    queue: VecDeque<(Weak<Slot>, AbortHandle)>,
}

impl Pending {
    pub(crate) fn push(&mut self, slot: &Arc<Slot>, task: AbortHandle, max: usize) {
        if self.queue.len() >= max.saturating_mul(2) {
            self.queue.retain(|(s, _)| live_and_pending(s));
        }
        self.queue.push_back((Arc::downgrade(slot), task));
    }

    /// Close the oldest connection still in its handshake; false if there is none.
    pub(crate) fn make_room(&mut self) -> bool {
        while let Some((s, task)) = self.queue.pop_front() {
            if live_and_pending(&s) {
                task.abort();
                return true;
            }
        }
        false
    }
}

fn live_and_pending(s: &Weak<Slot>) -> bool {
    s.upgrade()
        .is_some_and(|s| !s.decided.load(Ordering::Relaxed))
}

/// A token bucket per host: `rate` a second, bursts of `rate`.
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Hosts remembered at most; past it the full buckets are forgotten.
const MAX_BUCKETS: usize = 4096;

pub(crate) struct Limits {
    open: Option<(Limit, Arc<Semaphore>)>,
    rate: Option<Limit>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Limits {
    pub(crate) fn new(open: Option<Limit>, rate: Option<Limit>) -> Limits {
        Limits {
            open: open.map(|l| {
                let n = usize::try_from(l.value)
                    .unwrap_or(usize::MAX)
                    .min(Semaphore::MAX_PERMITS);
                (l, Arc::new(Semaphore::new(n)))
            }),
            rate,
            buckets: Mutex::default(),
        }
    }

    /// The connection reached its decision: it is no longer pending.
    pub(crate) fn decided() {
        let _ = SLOT.try_with(|s| s.decided.store(true, Ordering::Relaxed));
    }

    /// Admit an allowed connection to `host:port` under both limits: a refusal
    /// names the limit that was reached and how to raise it.
    pub(crate) fn admit(&self, host: &str, port: u16) -> Result<(), Verdict> {
        if let Some(l) = &self.rate {
            if !self.take_token(host, l.value) {
                return Err(refusal(
                    "limits.connections_per_second",
                    l,
                    &format!("more than {} new connections a second to {host}", l.value),
                    host,
                    port,
                ));
            }
        }
        if let Some((l, sem)) = &self.open {
            let held = SLOT
                .try_with(|s| s.open.lock().map(|o| o.is_some()).unwrap_or(false))
                .unwrap_or(false);
            if !held {
                let Ok(permit) = sem.clone().try_acquire_owned() else {
                    return Err(refusal(
                        "limits.connections",
                        l,
                        &format!("{} connections are open through the proxy", l.value),
                        host,
                        port,
                    ));
                };
                // Held with the client's task; outside one (tests), released at once.
                let _ = SLOT.try_with(|s| {
                    if let Ok(mut o) = s.open.lock() {
                        *o = Some(permit);
                    }
                });
            }
        }
        Ok(())
    }

    fn take_token(&self, host: &str, rate: u64) -> bool {
        let Ok(mut b) = self.buckets.lock() else {
            return false;
        };
        let now = Instant::now();
        let cap = rate as f64;
        if b.len() >= MAX_BUCKETS && !b.contains_key(host) {
            b.retain(|_, v| v.tokens + now.duration_since(v.at).as_secs_f64() * cap < cap);
        }
        let e = b.entry(host.to_string()).or_insert(Bucket {
            tokens: cap,
            at: now,
        });
        e.tokens = (e.tokens + now.duration_since(e.at).as_secs_f64() * cap).min(cap);
        e.at = now;
        if e.tokens >= 1.0 {
            e.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The refusal for `key` reached: its rule names the limit, its reason says what to
/// do about it.
fn refusal(key: &str, l: &Limit, what: &str, host: &str, port: u16) -> Verdict {
    Verdict::deny(
        Some(format!("{key} = {} ({})", l.value, l.origin)),
        format!(
            "{key} = {} ({}) reached: {what}; the connection to {host}:{port} was refused. \
             Raise {key} under [limits] in ~/.sandpit/config.toml (0: no limit) if the \
             command needs more",
            l.value, l.origin
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(v: u64) -> Option<Limit> {
        Some(Limit {
            value: v,
            origin: "t.toml:3".into(),
        })
    }

    #[tokio::test]
    async fn open_connections_are_counted_per_client_until_it_goes() {
        let l = Arc::new(Limits::new(limit(2), None));
        let mut held = vec![];
        for _ in 0..2 {
            let slot = Arc::new(Slot::default());
            let l = l.clone();
            SLOT.scope(slot.clone(), async move { l.admit("a.test", 1) })
                .await
                .unwrap();
            held.push(slot);
        }
        // The same client again: no new place.
        let l2 = l.clone();
        SLOT.scope(held[0].clone(), async move { l2.admit("a.test", 1) })
            .await
            .unwrap();
        let third = Arc::new(Slot::default());
        let l3 = l.clone();
        let v = SLOT
            .scope(third.clone(), async move { l3.admit("a.test", 1) })
            .await
            .unwrap_err();
        assert!(
            v.reason
                .starts_with("limits.connections = 2 (t.toml:3) reached"),
            "{}",
            v.reason
        );
        assert!(v.reason.contains("~/.sandpit/config.toml"), "{}", v.reason);
        held.remove(0);
        let l4 = l.clone();
        SLOT.scope(third, async move { l4.admit("a.test", 1) })
            .await
            .unwrap();
    }

    #[test]
    fn new_connections_per_host_are_rate_limited_with_a_burst() {
        let l = Limits::new(None, limit(10));
        for _ in 0..10 {
            l.admit("a.test", 1).unwrap();
        }
        let v = l.admit("a.test", 1).unwrap_err();
        assert_eq!(
            v.rule.as_deref(),
            Some("limits.connections_per_second = 10 (t.toml:3)")
        );
        // Another host has its own bucket.
        l.admit("b.test", 1).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(250));
        l.admit("a.test", 1).unwrap();
    }

    #[tokio::test]
    async fn the_oldest_pending_handshake_makes_room() {
        let mut p = Pending::default();
        let (a, b) = (Arc::new(Slot::default()), Arc::new(Slot::default()));
        let ta = tokio::spawn(std::future::pending::<()>());
        let tb = tokio::spawn(std::future::pending::<()>());
        p.push(&a, ta.abort_handle(), 8);
        p.push(&b, tb.abort_handle(), 8);
        // `a` decided: it is no candidate; `b` is closed.
        a.decided.store(true, Ordering::Relaxed);
        assert!(p.make_room());
        assert!(tb.await.unwrap_err().is_cancelled());
        assert!(!ta.is_finished());
        assert!(!p.make_room());
        ta.abort();
    }
}
