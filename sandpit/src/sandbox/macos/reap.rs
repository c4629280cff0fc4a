//! Lifetime of a run's processes on macOS, the pure part: which processes belong
//! to the run, from listings of the machine's processes (pid, parent, start time)
//! and the run's marker in their environment.
//!
//! macOS has no pid namespace and no cgroup: a daemon that calls `setsid()` and
//! double-forks is re-parented to launchd and leaves the command's process tree.
//! Two things keep hold of it:
//!
//! - **tracking**: the launcher lists the processes every [`POLL`] while the
//!   command runs; a process whose parent belongs to the run belongs to it, and
//!   stays known after it is re-parented (keyed by pid *and* start time, so a
//!   reused pid is not taken for it);
//! - **the marker**: every process of the run carries `SANDPIT_RUN=<run id>` in its
//!   environment (the interposer puts it back into every exec it sees, even one
//!   with an empty environment); at the end, every process of the user whose
//!   `KERN_PROCARGS2` environment carries it belongs to the run.
//!
//! At the end the run's processes are stopped (SIGSTOP: a stopped process cannot
//! fork), the listing is repeated until it finds no new one, and then all are
//! killed. What escapes: a process that drops the marker (started by a program the
//! interposer cannot see, with an environment of its own) *and* is re-parented
//! within one polling interval of being started. This module is compiled and
//! unit-tested everywhere; the listing itself is `sys` (macOS only).
#![forbid(unsafe_code)]
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How often the launcher lists the processes while the command runs.
pub const POLL: Duration = Duration::from_millis(20);

/// The environment variable that marks a run's processes.
pub const MARKER: &str = "SANDPIT_RUN";

/// A process, told apart from a later one with the same pid by its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcId {
    pub pid: i32,
    /// Start time in microseconds since the epoch.
    pub start: u64,
}

/// One row of a process listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    pub id: ProcId,
    pub ppid: i32,
    pub uid: u32,
}

/// The processes known to belong to a run.
#[derive(Debug)]
pub struct Tracker {
    root: i32,
    known: BTreeSet<ProcId>,
}

impl Tracker {
    /// A run whose command is the process `root` (the launcher's child: its pid
    /// cannot be reused before the launcher reaps it).
    pub fn new(root: i32) -> Tracker {
        Tracker {
            root,
            known: BTreeSet::new(),
        }
    }

    /// Take in one listing: the root and every process whose parent is known
    /// become known (whatever order the listing is in); a known process that is no
    /// longer listed is forgotten, so its pid reused later is a stranger.
    pub fn observe(&mut self, procs: &[ProcInfo]) {
        let listed: BTreeSet<ProcId> = procs.iter().map(|p| p.id).collect();
        self.known.retain(|id| listed.contains(id));
        if let Some(root) = procs.iter().find(|p| p.id.pid == self.root) {
            self.known.insert(root.id);
        }
        let mut changed = true;
        while changed {
            changed = false;
            let pids: BTreeSet<i32> = self.known.iter().map(|id| id.pid).collect();
            for p in procs {
                if !self.known.contains(&p.id) && pids.contains(&p.ppid) && p.ppid > 1 {
                    self.known.insert(p.id);
                    changed = true;
                }
            }
        }
    }

    /// Add a process found otherwise (by its marker).
    pub fn adopt(&mut self, id: ProcId) {
        self.known.insert(id);
    }

    pub fn contains(&self, id: &ProcId) -> bool {
        self.known.contains(id)
    }

    pub fn known(&self) -> impl Iterator<Item = &ProcId> {
        self.known.iter()
    }
}

/// The processes of `listing` to stop now: those the tracker knows and, among the
/// processes of user `uid`, those whose environment carries the marker
/// (`has_marker` reads it, and is asked only about processes not yet known).
/// Never `me` (the launcher) or the processes above it.
pub fn members(
    tracker: &mut Tracker,
    listing: &[ProcInfo],
    uid: u32,
    me: i32,
    mut has_marker: impl FnMut(i32) -> bool,
) -> Vec<ProcId> {
    tracker.observe(listing);
    let ancestors = ancestors_of(me, listing);
    let mut out = vec![];
    for p in listing {
        if p.id.pid == me || ancestors.contains(&p.id.pid) || p.id.pid <= 1 {
            continue;
        }
        if tracker.contains(&p.id) {
            out.push(p.id);
        } else if p.uid == uid && has_marker(p.id.pid) {
            tracker.adopt(p.id);
            out.push(p.id);
        }
    }
    // The marker's processes bring their descendants in too.
    tracker.observe(listing);
    for p in listing {
        if tracker.contains(&p.id)
            && !out.contains(&p.id)
            && p.id.pid != me
            && !ancestors.contains(&p.id.pid)
        {
            out.push(p.id);
        }
    }
    out
}

fn ancestors_of(me: i32, listing: &[ProcInfo]) -> BTreeSet<i32> {
    let parent: BTreeMap<i32, i32> = listing.iter().map(|p| (p.id.pid, p.ppid)).collect();
    let mut out = BTreeSet::new();
    let mut at = me;
    while let Some(&pp) = parent.get(&at) {
        if pp <= 0 || !out.insert(pp) {
            break;
        }
        at = pp;
    }
    out
}

/// The environment entries of a `KERN_PROCARGS2` buffer: `argc` (native-endian
/// `i32`), the executable path, NUL padding, `argc` arguments, then the
/// environment, each NUL-terminated, up to an empty string or the end.
pub fn procargs_env(buf: &[u8]) -> Vec<&[u8]> {
    let Some(argc) = buf.get(..4) else {
        return vec![];
    };
    let argc = i32::from_ne_bytes([argc[0], argc[1], argc[2], argc[3]]);
    let Ok(argc) = usize::try_from(argc) else {
        return vec![];
    };
    let rest = &buf[4..];
    // The executable path, then NUL padding.
    let Some(end) = rest.iter().position(|&b| b == 0) else {
        return vec![];
    };
    let mut i = end;
    while rest.get(i) == Some(&0) {
        i += 1;
    }
    let mut strings = rest[i..].split(|&b| b == 0);
    for _ in 0..argc {
        if strings.next().is_none() {
            return vec![];
        }
    }
    strings.take_while(|s| !s.is_empty()).collect()
}

/// The marker entry of run `run_id` (`SANDPIT_RUN=<id>`).
pub fn marker_entry(run_id: &str) -> String {
    format!("{MARKER}={run_id}")
}

/// Whether a `KERN_PROCARGS2` buffer's environment holds exactly `entry`.
pub fn carries(buf: &[u8], entry: &str) -> bool {
    procargs_env(buf).contains(&entry.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, start: u64, ppid: i32) -> ProcInfo {
        ProcInfo {
            id: ProcId { pid, start },
            ppid,
            uid: 501,
        }
    }

    #[test]
    fn a_double_forked_daemon_stays_known_after_it_is_reparented() {
        let mut t = Tracker::new(100);
        // Listed child before parent: still found.
        t.observe(&[p(101, 2, 100), p(100, 1, 50), p(50, 0, 1), p(7, 0, 1)]);
        assert!(t.contains(&ProcId { pid: 101, start: 2 }));
        assert!(!t.contains(&ProcId { pid: 7, start: 0 }));
        assert!(!t.contains(&ProcId { pid: 50, start: 0 }));
        // 101 forks 102 and exits; 102 calls setsid and is re-parented to launchd.
        t.observe(&[p(100, 1, 50), p(101, 2, 100), p(102, 3, 101)]);
        t.observe(&[p(100, 1, 50), p(102, 3, 1)]);
        assert!(t.contains(&ProcId { pid: 102, start: 3 }));
        assert!(!t.contains(&ProcId { pid: 101, start: 2 }));
        // The command exits; the daemon is still the run's.
        t.observe(&[p(102, 3, 1), p(103, 4, 102)]);
        assert!(t.contains(&ProcId { pid: 103, start: 4 }));
        // 102 exits and its pid is reused by a stranger: not the run's.
        t.observe(&[p(103, 4, 1)]);
        t.observe(&[p(103, 4, 1), p(102, 9, 1)]);
        assert!(!t.contains(&ProcId { pid: 102, start: 9 }));
        assert!(t.contains(&ProcId { pid: 103, start: 4 }));
    }

    #[test]
    fn a_process_reparented_between_two_listings_is_missed_unless_marked() {
        let mut t = Tracker::new(100);
        t.observe(&[p(100, 1, 50)]);
        // 101 and 102 were born and 101 died between two listings.
        let listing = [p(50, 0, 1), p(100, 1, 50), p(102, 3, 1), p(200, 5, 1)];
        t.observe(&listing);
        assert!(!t.contains(&ProcId { pid: 102, start: 3 }));
        // The end: 102 carries the marker, 200 does not; the launcher (50) and
        // its parent are never members.
        let got = members(&mut t, &listing, 501, 50, |pid| pid == 102 || pid == 50);
        assert!(got.contains(&ProcId { pid: 102, start: 3 }));
        assert!(got.contains(&ProcId { pid: 100, start: 1 }));
        assert!(!got.iter().any(|id| id.pid == 200 || id.pid == 50));
        // Another user's process with the marker is not taken.
        let other = ProcInfo {
            uid: 0,
            ..p(300, 6, 1)
        };
        let got = members(&mut t, &[other], 501, 50, |_| true);
        assert!(got.is_empty());
    }

    #[test]
    fn children_of_a_marked_process_are_members_too() {
        let mut t = Tracker::new(100);
        let listing = [p(400, 1, 1), p(401, 2, 400)];
        let got = members(&mut t, &listing, 501, 50, |pid| pid == 400);
        assert_eq!(got.len(), 2, "{got:?}");
    }

    fn procargs(argv: &[&str], env: &[&str]) -> Vec<u8> {
        let mut b = (argv.len() as i32).to_ne_bytes().to_vec();
        b.extend_from_slice(b"/usr/local/bin/tool\0\0\0\0");
        for a in argv.iter().chain(env) {
            b.extend_from_slice(a.as_bytes());
            b.push(0);
        }
        b.extend_from_slice(b"\0\0ptr_munge=x\0");
        b
    }

    #[test]
    fn the_marker_is_read_from_the_environment_only() {
        let entry = marker_entry("r1");
        assert_eq!(entry, "SANDPIT_RUN=r1");
        let b = procargs(&["tool", "SANDPIT_RUN=r1"], &["HOME=/Users/me"]);
        // In an argument it does not count.
        assert!(!carries(&b, &entry));
        let b = procargs(&["tool"], &["HOME=/Users/me", "SANDPIT_RUN=r1"]);
        assert!(carries(&b, &entry));
        assert_eq!(
            procargs_env(&b),
            vec![&b"HOME=/Users/me"[..], b"SANDPIT_RUN=r1"]
        );
        assert!(!carries(&b, "SANDPIT_RUN=r"));
        assert!(!carries(&b, &marker_entry("r2")));
        // What the kernel appends after the environment (apple strings) is not in it.
        assert!(!carries(&b, "ptr_munge=x"));
        // Truncated or garbage buffers: no environment, no panic.
        for cut in 0..b.len() {
            let _ = procargs_env(&b[..cut]);
        }
        assert!(procargs_env(&[0xff, 0xff, 0xff, 0xff, b'a']).is_empty());
        assert!(procargs_env(&[]).is_empty());
    }
}
