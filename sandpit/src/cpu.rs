//! `limits.launcher_cpu`: the share of one core the launcher may spend on work the
//! sandbox makes it do unasked — recording what arrives on the audit socket, and
//! reading the calls the kernel layer's reporting filter stops. A denial flood
//! from inside would otherwise keep a launcher thread busy for as long as the flood
//! lasts.
//!
//! Held by backpressure, never by dropping: each thread doing such work takes a
//! [`Pacer`] and calls [`Pacer::pace`] before each piece of it. The pacers of a run
//! draw on one bucket of CPU time that fills at the share (at most
//! [`BURST`] ahead); a thread whose work took the bucket below empty sleeps until
//! the share has paid it back. While it sleeps the workload's side waits: a call
//! the notifier has not answered stays stopped, a datagram not read leaves the
//! audit socket's queue full so the interposer's send blocks. So the workload
//! slows to the pace the launcher may afford, and every record still arrives.
//!
//! Only the paced threads' own CPU time counts (`CLOCK_THREAD_CPUTIME_ID`): the
//! proxy's work has its own limits (`limits.connections…`), and charging it here
//! would stall the notifier — every open of a `--kernel-only` build — behind a
//! download.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandpit_policy::Rule;

/// CPU time the bucket may hold ahead: a short burst of reports (a build's start)
/// runs unpaced.
pub const BURST: Duration = Duration::from_millis(100);

/// The shortest one wait: a thread owing less goes on. Waking a thread costs CPU
/// time too (charged to it like its work); waits of a call's cost each — tens of
/// microseconds — spent as much on waking as the share saved.
pub const MIN_WAIT: Duration = Duration::from_millis(20);

/// The longest one wait: well under the second an interposer's send waits for room
/// on the audit socket before it counts the record as lost, so pacing alone never
/// loses one.
pub const MAX_WAIT: Duration = Duration::from_millis(250);

/// One run's share, shared by its pacers.
#[derive(Debug)]
pub struct Share {
    /// The limit and where it was set (`value`: percent of one core; 0: none).
    limit: Rule<u64>,
    bucket: Mutex<Bucket>,
    /// Nanoseconds the paced threads slept, all together.
    waited: AtomicU64,
}

#[derive(Debug)]
struct Bucket {
    /// When the bucket was last filled.
    filled: Instant,
    /// CPU time the paced threads may still use, in nanoseconds (below 0: owed).
    balance: i128,
}

/// One thread's handle on a [`Share`]: it knows how much CPU time its thread had
/// used at its last call.
#[derive(Debug)]
pub struct Pacer {
    share: Arc<Share>,
    used: Duration,
}

impl Share {
    pub fn new(limit: &Rule<u64>) -> Arc<Share> {
        Arc::new(Share {
            limit: limit.clone(),
            bucket: Mutex::new(Bucket {
                filled: Instant::now(),
                balance: BURST.as_nanos() as i128,
            }),
            waited: AtomicU64::new(0),
        })
    }

    /// A pacer for the calling thread (call it on the thread that will pace).
    pub fn pacer(self: &Arc<Share>) -> Pacer {
        Pacer {
            share: self.clone(),
            used: thread_cpu(),
        }
    }

    /// How long the paced threads waited for the share, all together.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited.load(Ordering::Relaxed))
    }

    /// The line the run ends with when the limit slowed it (`None` when it did
    /// not): the limit, where it was set, how long the workload was held back, and
    /// how to raise it.
    pub fn reached_line(&self) -> Option<String> {
        let waited = self.waited();
        if waited.is_zero() {
            return None;
        }
        // A single short wait is said too, in milliseconds.
        let held = match waited.as_secs_f64() {
            s if s >= 1.0 => format!("{s:.1} s"),
            _ => format!("{} ms", waited.as_millis()),
        };
        Some(format!(
            "sandpit: the run reached limits.launcher_cpu = {} ({}): the launcher held back \
             the sandbox's refusal reports for {held} in all, so the processes making them \
             ran slower (pacing drops no record: the summary counts any lost otherwise); raise it under [limits] in \
             ~/.sandpit/config.toml (percent of one core; 0: no limit) if the run should go faster",
            self.limit.value,
            self.limit.origin.location(),
        ))
    }

    /// Take `used` of CPU time from the bucket, filled for the time since it last
    /// was; how long to wait for the share to pay back what is owed.
    fn take(&self, used: Duration, now: Instant) -> Duration {
        let percent = i128::from(self.limit.value);
        if percent == 0 {
            return Duration::ZERO;
        }
        let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(b.filled).as_nanos() as i128;
        b.filled = now;
        b.balance = (b.balance + elapsed * percent / 100).min(BURST.as_nanos() as i128);
        b.balance -= used.as_nanos() as i128;
        // Owed CPU time, paid back at the share.
        let wait = (-b.balance).max(0) * 100 / percent;
        let wait = Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX));
        if wait < MIN_WAIT {
            return Duration::ZERO;
        }
        wait.min(MAX_WAIT)
    }
}

impl Pacer {
    /// Charge the CPU time this thread used since its last call; if the run's
    /// share is spent, sleep until it is paid back (at most [`MAX_WAIT`]). Call it
    /// before each piece of work the sandbox asked for, while the asker waits.
    pub fn pace(&mut self) {
        let now = thread_cpu();
        let used = now.saturating_sub(self.used);
        self.used = now;
        let wait = self.share.take(used, Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
            self.share
                .waited
                .fetch_add(wait.as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// CPU time the calling thread has used.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sandpit_policy::Origin;

    fn share(percent: u64) -> Arc<Share> {
        Share::new(&Rule {
            value: percent,
            origin: Origin::builtin("limits.launcher_cpu", &percent.to_string()),
        })
    }

    #[test]
    fn work_past_the_burst_waits_for_the_share_to_pay_it_back() {
        let s = share(10);
        let t = s.bucket.lock().unwrap().filled;
        // Within the burst: no wait.
        assert_eq!(s.take(Duration::from_millis(100), t), Duration::ZERO);
        // 1 ms owed at 10% of a core is 10 ms, less than a wait is worth; 5 ms
        // owed in all: 50 ms.
        assert_eq!(s.take(Duration::from_millis(1), t), Duration::ZERO);
        assert_eq!(
            s.take(Duration::from_millis(4), t),
            Duration::from_millis(50)
        );
        // 50 ms later the debt is paid; 3 ms more is owed again: 30 ms.
        let t = t + Duration::from_millis(50);
        assert_eq!(
            s.take(Duration::from_millis(3), t),
            Duration::from_millis(30)
        );
        // A long idle time fills the bucket only up to the burst.
        let t = t + Duration::from_secs(60);
        assert_eq!(s.take(Duration::from_millis(100), t), Duration::ZERO);
        assert_eq!(
            s.take(Duration::from_millis(2), t),
            Duration::from_millis(20)
        );
        // One wait never reaches the interposer's send timeout.
        assert_eq!(s.take(Duration::from_secs(10), t), MAX_WAIT);
    }

    #[test]
    fn no_limit_never_waits_and_says_nothing() {
        let s = share(0);
        let t = Instant::now();
        assert_eq!(s.take(Duration::from_secs(10), t), Duration::ZERO);
        let mut p = s.pacer();
        p.pace();
        assert_eq!(s.reached_line(), None);
    }

    #[test]
    fn a_busy_thread_is_held_near_its_share_and_the_line_says_so() {
        // A share small enough that a test thread on a loaded machine still outruns
        // it; the work goes on until the pacer has held it back (not for a fixed
        // time, which a loaded machine may fill with other work).
        let s = share(5);
        let mut p = s.pacer();
        let (wall, cpu) = (Instant::now(), thread_cpu());
        while s.waited().is_zero() || wall.elapsed() < Duration::from_millis(600) {
            assert!(wall.elapsed() < Duration::from_secs(60), "never held back");
            p.pace();
            // A piece of work of about a millisecond.
            let t = thread_cpu();
            while thread_cpu() - t < Duration::from_millis(1) {}
        }
        let ratio = (thread_cpu() - cpu).as_secs_f64() / wall.elapsed().as_secs_f64();
        // 5% plus the burst over at least 0.6 s (17%) and a piece's overshoot;
        // unpaced it would be near 100%.
        assert!(ratio < 0.5, "{ratio}");
        let line = s.reached_line().unwrap();
        assert!(
            line.contains(" ms in all") || line.contains(" s in all"),
            "{line}"
        );
        assert!(
            line.contains("limits.launcher_cpu = 5 (built-in default)")
                && line.contains("pacing drops no record")
                && line.contains("[limits] in ~/.sandpit/config.toml"),
            "{line}"
        );
    }
}
