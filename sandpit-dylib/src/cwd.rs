//! The working directory, remembered between relative opens (Linux).
//!
//! A relative `open` is judged as the absolute path the cwd makes of it, and asking
//! the kernel (`getcwd`) cost as much as the rest of the hook. The answer is kept
//! here and forgotten whenever the cwd changes through this library's sight (a
//! hooked `chdir`/`fchdir`). Only the process that owns this memory writes it: a
//! `vfork` child (Python's `subprocess` with `cwd=` changes directory in one) or any
//! other child sharing it reads the parent's answer until its own `chdir`, and from
//! then on asks the kernel every time.
//!
//! What it cannot see — a raw `chdir` system call, glibc's own internal one (`nftw`
//! with `FTW_CHDIR`, `fts`), a parent directory of the cwd renamed, a thread that
//! unshared its cwd — leaves it stale. So a remembered cwd is trusted only where a
//! stale one can do no more than a raw `open` could: to *allow* a read-only open on
//! the fast path, which opens the caller's relative path itself, so what is opened
//! is decided by the kernel layer, which refuses every blocked read (masks in
//! namespace mode, Landlock in fallback mode). Every denial, every slow-path
//! judgement and every write takes the cwd from the kernel: some write rules only
//! the interposer holds (protected paths in fallback mode, the adversary's review).
//!
//! A seqlock: a reader copies the path and keeps it only if no writer ran meanwhile,
//! a writer that finds another one (or a signal handler that interrupted one on its
//! own thread) gives up. Nobody waits, nothing allocates.
use crate::path::{PBuf, MAX};
use libc::c_int;
use std::sync::atomic::{fence, AtomicI32, AtomicU64, AtomicUsize, Ordering};

const WORDS: usize = MAX.div_ceil(8);

struct Slot {
    /// Odd while a writer fills the slot.
    seq: AtomicU64,
    /// [`GEN`] when the path was read from the kernel.
    gen: AtomicU64,
    /// 0: empty.
    len: AtomicUsize,
    words: [AtomicU64; WORDS],
}

static SLOT: Slot = Slot {
    seq: AtomicU64::new(0),
    gen: AtomicU64::new(0),
    len: AtomicUsize::new(0),
    words: [const { AtomicU64::new(0) }; WORDS],
};

/// Moves on every event that may change the cwd; a slot filled under an older value
/// is empty.
static GEN: AtomicU64 = AtomicU64::new(1);

/// The process that owns this memory (0: not known yet): set at load and in the
/// child of every `fork` (`pthread_atfork`; a `vfork` runs no handler).
static OWNER: AtomicI32 = AtomicI32::new(0);

/// Whether the calling process owns this memory (and so may write the slot).
fn owner() -> bool {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    match OWNER.compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => true,
        Err(owner) => owner == me,
    }
}

/// In the child of a `fork`: the memory is its own now, and a writer that was busy
/// in another thread of the parent will never finish.
extern "C" fn forked_child() {
    // SAFETY: getpid has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    let seq = SLOT.seq.load(Ordering::Relaxed);
    if seq & 1 == 1 {
        SLOT.seq.store(seq + 1, Ordering::Release);
    }
    forget();
}

extern "C" fn at_load() {
    owner();
    // SAFETY: registering a handler that only touches atomics and calls getpid
    // (async-signal-safe, as a fork child handler must be).
    unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = at_load;

/// The cwd may have changed (called after the change, so a path read from the
/// kernel before it carries the older generation).
#[inline]
pub fn forget() {
    GEN.fetch_add(1, Ordering::SeqCst);
}

/// The remembered cwd into `out`; false if there is none.
pub fn recall(out: &mut PBuf) -> bool {
    let gen = GEN.load(Ordering::SeqCst);
    let seq = SLOT.seq.load(Ordering::Acquire);
    if seq & 1 == 1 || SLOT.gen.load(Ordering::Relaxed) != gen {
        return false;
    }
    let len = SLOT.len.load(Ordering::Relaxed);
    if len == 0 || len > MAX {
        return false;
    }
    out.clear();
    for (i, w) in SLOT.words[..len.div_ceil(8)].iter().enumerate() {
        let bytes = w.load(Ordering::Relaxed).to_ne_bytes();
        let take = (len - i * 8).min(8);
        if out.append(&bytes[..take]).is_err() {
            return false;
        }
    }
    fence(Ordering::Acquire);
    SLOT.seq.load(Ordering::Relaxed) == seq
}

/// Remember `cwd`, read from the kernel while [`GEN`] was `gen`.
fn remember(cwd: &[u8], gen: u64) {
    // Already so (every relative write asks the kernel): no write, and no `getpid`.
    let mut held = PBuf::new();
    if gen == GEN.load(Ordering::SeqCst) && recall(&mut held) && held.as_bytes() == cwd {
        return;
    }
    if !owner() {
        return;
    }
    let seq = SLOT.seq.load(Ordering::Relaxed);
    if seq & 1 == 1
        || SLOT
            .seq
            .compare_exchange(seq, seq + 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    fence(Ordering::Release);
    SLOT.gen.store(gen, Ordering::Relaxed);
    SLOT.len.store(cwd.len(), Ordering::Relaxed);
    for (w, chunk) in SLOT.words.iter().zip(cwd.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        w.store(u64::from_ne_bytes(b), Ordering::Relaxed);
    }
    SLOT.seq.store(seq + 2, Ordering::Release);
}

/// The kernel's cwd into `out`, which is then remembered.
pub fn get(out: &mut PBuf) -> Result<(), c_int> {
    let gen = GEN.load(Ordering::SeqCst);
    out.getcwd()?;
    remember(out.as_bytes(), gen);
    Ok(())
}

hook! {
    fn chdir(path: *const libc::c_char) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's argument, forwarded.
        let r = unsafe { real(path) };
        forget();
        Ok(r)
    }
}

hook! {
    fn fchdir(fd: c_int) -> c_int;
    fail = -1;
    |real| {
        // SAFETY: the caller's argument, forwarded.
        let r = unsafe { real(fd) };
        forget();
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serialises the tests that share the one slot.
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn remembered_until_forgotten() {
        let _l = LOCK.lock().unwrap();
        let mut out = PBuf::new();
        let long = format!("/{}", "d/".repeat(700));
        for path in ["/", "/a", "/work/project-1234", long.trim_end_matches('/')] {
            let gen = GEN.load(Ordering::SeqCst);
            remember(path.as_bytes(), gen);
            assert!(recall(&mut out), "{path}");
            assert_eq!(out.as_bytes(), path.as_bytes());
            forget();
            assert!(!recall(&mut out), "{path}: forgotten");
        }
    }

    /// A path read before a `forget` (another thread's chdir) is never remembered as
    /// current.
    #[test]
    fn a_path_read_before_a_change_is_not_remembered() {
        let _l = LOCK.lock().unwrap();
        let mut out = PBuf::new();
        let gen = GEN.load(Ordering::SeqCst);
        forget();
        remember(b"/old", gen);
        assert!(!recall(&mut out));
    }

    /// A slot being written is a miss for readers, and a second writer gives up.
    #[test]
    fn a_slot_being_written_is_a_miss() {
        let _l = LOCK.lock().unwrap();
        let mut out = PBuf::new();
        let gen = GEN.load(Ordering::SeqCst);
        remember(b"/a", gen);
        let seq = SLOT.seq.fetch_add(1, Ordering::SeqCst);
        assert!(!recall(&mut out));
        remember(b"/b", gen);
        SLOT.seq.store(seq, Ordering::SeqCst);
        assert!(recall(&mut out));
        assert_eq!(out.as_bytes(), b"/a");
    }

    /// The child of a `fork` owns the slot, even when the fork caught a writer of
    /// another thread half-way (it will never finish there); the parent keeps it.
    #[test]
    fn a_fork_child_owns_the_slot() {
        let _l = LOCK.lock().unwrap();
        at_load();
        remember(b"/parent", GEN.load(Ordering::SeqCst));
        let seq = SLOT.seq.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the child only touches atomics and its stack, then _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let mut out = PBuf::new();
            remember(b"/child", GEN.load(Ordering::SeqCst));
            let ok = recall(&mut out) && out.as_bytes() == b"/child";
            // SAFETY: leaving the forked child without running the harness's code.
            unsafe { libc::_exit(i32::from(!ok)) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(status, 0, "the child could not remember its cwd");
        SLOT.seq.store(seq, Ordering::SeqCst);
        let mut out = PBuf::new();
        assert!(owner());
        assert!(recall(&mut out));
        assert_eq!(out.as_bytes(), b"/parent");
    }

    /// `get` answers with the process's cwd and remembers it until a `chdir` made
    /// through the hook's path (`forget`).
    #[test]
    fn get_follows_the_cwd() {
        let _l = LOCK.lock().unwrap();
        let here = std::env::current_dir().unwrap();
        let mut out = PBuf::new();
        get(&mut out).unwrap();
        assert_eq!(out.as_bytes(), here.as_os_str().as_encoded_bytes());
        assert!(recall(&mut out), "remembered");
        assert_eq!(out.as_bytes(), here.as_os_str().as_encoded_bytes());
        forget();
        assert!(!recall(&mut out), "forgotten");
    }
}
