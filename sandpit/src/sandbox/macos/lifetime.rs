//! Every process a run starts is gone when the run ends (macOS): a thread lists
//! the processes while the command runs ([`reap::Tracker`]), and at the end the
//! run's processes — tracked, or carrying the run's marker — are stopped, looked
//! for again until no new one appears, and killed. See [`super::reap`] for what
//! escapes. Cross-built, not run.
#![forbid(unsafe_code)]
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::reap::{self, ProcId, Tracker};
use super::sys;

/// The watch over a run's processes, from just after the command started.
pub struct Watch {
    tracker: Arc<Mutex<Tracker>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    marker: String,
}

/// What the end of a run found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// Processes still alive after the command exited, now killed.
    pub killed: usize,
    /// Processes that could not be signalled (gone meanwhile, or another user's).
    pub unreachable: usize,
}

impl Watch {
    /// Watch the command `root` of run `run_id` (whose processes carry
    /// [`reap::marker_entry`]).
    pub fn start(root: u32, run_id: &str) -> std::io::Result<Watch> {
        let root = i32::try_from(root)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let tracker = Arc::new(Mutex::new(Tracker::new(root)));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, s) = (tracker.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("sandpit-lifetime".into())
            .spawn(move || {
                while !s.load(Ordering::Acquire) {
                    if let Ok(listing) = sys::list_processes() {
                        if let Ok(mut t) = t.lock() {
                            t.observe(&listing);
                        }
                    }
                    std::thread::sleep(reap::POLL);
                }
            })?;
        Ok(Watch {
            tracker,
            stop,
            thread: Some(thread),
            marker: reap::marker_entry(run_id),
        })
    }

    /// After the command exited: stop every process of the run (a stopped one
    /// cannot fork), look again until no new one turns up, then kill them all and
    /// wait until none is listed any more.
    pub fn end(mut self) -> std::io::Result<Reaped> {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut tracker = match Arc::try_unwrap(self.tracker) {
            Ok(m) => m
                .into_inner()
                .map_err(|_| std::io::Error::other("lifetime tracker poisoned"))?,
            Err(_) => return Err(std::io::Error::other("lifetime tracker still shared")),
        };
        let (me, uid) = sys::me();
        let marker = self.marker.clone();
        let mut stopped: Vec<ProcId> = vec![];
        let mut unreachable = 0;
        // Bounded: each round stops what it finds, and stopped processes make no
        // new ones; a round that finds nothing new ends it.
        for _ in 0..64 {
            let listing = sys::list_processes()?;
            let found = reap::members(&mut tracker, &listing, uid, me, |pid| {
                sys::procargs(pid).is_some_and(|b| reap::carries(&b, &marker))
            });
            let new: Vec<ProcId> = found
                .into_iter()
                .filter(|id| !stopped.contains(id))
                .collect();
            if new.is_empty() {
                break;
            }
            for id in new {
                if !sys::signal(id.pid, libc::SIGSTOP) {
                    unreachable += 1;
                }
                stopped.push(id);
            }
        }
        let mut killed = 0;
        for id in &stopped {
            if sys::signal(id.pid, libc::SIGKILL) {
                killed += 1;
            }
        }
        // Gone: none of them is listed any more (with its start time).
        for _ in 0..500 {
            let listing = sys::list_processes()?;
            if !listing.iter().any(|p| stopped.contains(&p.id)) {
                break;
            }
            std::thread::sleep(reap::POLL);
        }
        Ok(Reaped {
            killed,
            unreachable,
        })
    }
}
