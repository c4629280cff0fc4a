//! Removing what a run made once the run is over, without making the user wait for
//! the file system.
//!
//! The placeholders of a `sandpit run` and its directories (the run directory, the
//! scratch directory, the sockets' directory) are removed after the command has
//! exited. On a disk mounted with `discard` each `rmdir` waits for the device (0.1–0.3
//! ms here, ~1 ms per run), and nothing about the run's result depends on it. Once
//! [`defer`] is called, [`remove_tree`] and [`remove_placeholders`] only note the
//! work, and [`finish`] — the launcher's last step — hands it to a detached process
//! of its own (a new session, `/dev/null` for stdin/out/err, no other descriptor but
//! the placeholder lock), so the shell prompt, or a caller reading the launcher's
//! output to its end, comes back first.
//!
//! Nothing is lost or raced:
//! - the placeholders are removed while that process holds the workspace's lock
//!   exclusively (taken by the launcher, inherited): a run that starts meanwhile waits
//!   for it before it makes its own, as it waits for a run that is still going;
//! - a process that cannot be made means the work is done at once, as without `defer`;
//! - a launcher killed before its end leaves what it made to the next run, which
//!   removes stale run directories and every placeholder named in the lock file.
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

enum Job {
    /// Empty directories, innermost last in the list; the lock is held until they are
    /// gone and the list in its file is emptied.
    Placeholders { lock: File, dirs: Vec<PathBuf> },
    /// A directory and everything beneath it.
    Tree(PathBuf),
}

/// `Some` once [`defer`] has been called: the work noted so far.
static LATER: Mutex<Option<Vec<Job>>> = Mutex::new(None);

fn later(job: Job) -> Option<Job> {
    match LATER.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        Some(jobs) => {
            jobs.push(job);
            None
        }
        None => Some(job),
    }
}

/// From now on removals wait for [`finish`].
pub fn defer() {
    LATER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(Vec::new);
}

/// Remove `dir` and what it holds: now, or at [`finish`] after [`defer`].
pub fn remove_tree(dir: &Path) {
    if let Some(job) = later(Job::Tree(dir.to_path_buf())) {
        run(vec![job]);
    }
}

/// Remove the empty directories `dirs` (each with `rmdir`, so only while empty, and
/// never a file or a link), then empty `lock`'s file and let the lock go: now, or at
/// [`finish`] after [`defer`] unless `now`. A run that did not start and will try
/// again in another mode removes them now: the lock it would keep until its end is
/// exclusive.
pub fn remove_placeholders(lock: File, dirs: Vec<PathBuf>, now: bool) {
    let job = Job::Placeholders { lock, dirs };
    if let Some(job) = if now { Some(job) } else { later(job) } {
        run(vec![job]);
    }
}

fn run(jobs: Vec<Job>) {
    // Placeholders first: a run waiting for the lock can then go on.
    let (marks, trees): (Vec<Job>, Vec<Job>) = jobs
        .into_iter()
        .partition(|j| matches!(j, Job::Placeholders { .. }));
    for job in marks.into_iter().chain(trees) {
        match job {
            Job::Placeholders { lock, dirs } => {
                for d in dirs.iter().rev() {
                    let _ = std::fs::remove_dir(d);
                }
                let _ = lock.set_len(0);
                drop(lock);
            }
            Job::Tree(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

/// Do the work noted since [`defer`], in a detached process; the caller exits next.
pub fn finish() {
    let jobs = LATER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_default();
    if jobs.is_empty() {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut keep: Vec<libc::c_int> = jobs
            .iter()
            .filter_map(|j| match j {
                Job::Placeholders { lock, .. } => Some(lock.as_raw_fd()),
                Job::Tree(_) => None,
            })
            .collect();
        keep.sort_unstable();
        // SAFETY: fork has no memory-safety preconditions. The child only makes system
        // calls and frees and allocates memory (the C library's allocator is ready
        // for that after fork), then leaves with _exit; the parent goes on as before.
        match unsafe { libc::fork() } {
            0 => {
                retitle();
                detach(&keep);
                run(jobs);
                // SAFETY: leaving the child without running the parent's exit handlers.
                unsafe { libc::_exit(0) }
            }
            -1 => {}
            _ => return, // the parent's copies of the lock descriptors close at exit
        }
    }
    run(jobs);
}

/// Its command line (`ps`, `pgrep -f`, `/proc/PID/cmdline`) stops being the user's
/// command's, which it has from the launcher: the argument area is overwritten with
/// `sandpit tidy`, so nothing looking for the command's processes finds this one.
#[cfg(target_os = "linux")]
fn retitle() {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // The fields after the name in parentheses, from the third (state) on;
    // arg_start and arg_end are the 48th and 49th.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return;
    };
    let field = |n: usize| {
        rest.split_whitespace()
            .nth(n - 3)
            .and_then(|v| v.parse::<usize>().ok())
    };
    let (Some(start), Some(end)) = (field(48), field(49)) else {
        return;
    };
    let title = b"sandpit tidy";
    if end <= start + title.len() {
        return;
    }
    // SAFETY: [arg_start, arg_end) is this process's own argument area, writable
    // memory at the top of its stack that nothing here reads again (the argument
    // strings were copied at start-up).
    unsafe {
        let p = start as *mut u8;
        std::ptr::write_bytes(p, 0, end - start);
        std::ptr::copy_nonoverlapping(title.as_ptr(), p, title.len());
    }
}

/// A session of its own (no terminal's signals), `/dev/null` for 0, 1 and 2 and no
/// other descriptor but `keep` (sorted), so nobody reading the launcher's output
/// waits for this process.
#[cfg(target_os = "linux")]
fn detach(keep: &[libc::c_int]) {
    // SAFETY: plain system calls on integers, a static C string and a signal set of
    // our own; the descriptors closed belong to this (child) process alone.
    unsafe {
        libc::setsid();
        // The launcher blocks the signals it forwards: this process answers them.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            // A lock that is one of them (a launcher started with one closed) stays.
            for fd in (0..3).filter(|fd| !keep.contains(fd)) {
                libc::dup2(null, fd);
            }
        }
        // Failing (a kernel before 5.9), the descriptors stay open for the few
        // milliseconds this process lives.
        let mut from: libc::c_uint = 3;
        for &k in keep.iter().chain(std::iter::once(&libc::c_int::MAX)) {
            let k = k as libc::c_uint;
            if k > from {
                libc::syscall(libc::SYS_close_range, from, k - 1, 0 as libc::c_uint);
            }
            from = from.max(k.saturating_add(1));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn without_defer_the_work_is_done_at_once() {
        let d = tempfile::tempdir().unwrap();
        let tree = d.path().join("t");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::write(tree.join("a/f"), "x").unwrap();
        let (p1, p2) = (d.path().join("p"), d.path().join("p/q"));
        std::fs::create_dir_all(&p2).unwrap();
        let full = d.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("kept"), "x").unwrap();
        let lock_path = d.path().join("lock");
        std::fs::write(&lock_path, "/p\n/p/q\n").unwrap();
        remove_tree(&tree);
        let lock = File::options().write(true).open(&lock_path).unwrap();
        remove_placeholders(
            lock,
            vec![p1.clone(), p2, full.clone(), lock_path.clone()],
            false,
        );
        assert!(!tree.exists() && !p1.exists());
        // rmdir only: a directory with something in it and a file stay.
        assert!(full.join("kept").exists() && lock_path.exists());
        assert_eq!(std::fs::read(&lock_path).unwrap(), b"");
    }
}
