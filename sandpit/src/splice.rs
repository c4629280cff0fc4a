//! Linux `splice(2)` through a pipe, so bulk tunnel traffic moves socket → pipe →
//! socket inside the kernel without copies through user space: the pipes, their
//! budget and the calls the proxy's relay (`proxy/relay.rs`) and the kernel
//! layer's bridge (`sandbox/linux/bridge.rs`) share, through rustix (one `ioctl`
//! aside). The proxy's own code is safe.
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use crate::budget::Budget;

/// A pipe used as the splice buffer of one direction of a relay.
pub(crate) struct Pipe {
    pub(crate) read: OwnedFd,
    pub(crate) write: OwnedFd,
}

impl Pipe {
    /// A pipe of at least 64 KiB, grown to [`PIPE_SIZE`] where the system allows;
    /// non-blocking for the proxy's relay, blocking for the bridge's threads.
    pub(crate) fn new(nonblocking: bool) -> io::Result<Pipe> {
        use rustix::pipe::{fcntl_getpipe_size, fcntl_setpipe_size, pipe_with, PipeFlags};
        let mut flags = PipeFlags::CLOEXEC;
        if nonblocking {
            flags |= PipeFlags::NONBLOCK;
        }
        let (read, write) = pipe_with(flags)?;
        // A larger pipe means fewer splice calls. Past the user's pipe allowance the
        // kernel refuses to grow it and makes new pipes two pages small; through
        // those, splice would lose to copying, so that is an error for the caller.
        let size = match fcntl_setpipe_size(&write, PIPE_SIZE) {
            Ok(n) => n,
            Err(_) => fcntl_getpipe_size(&write)?,
        };
        if size < PIPE_SIZE_MIN {
            return Err(io::Error::other(format!("splice pipe holds {size} bytes")));
        }
        Ok(Pipe { read, write })
    }
}

pub(crate) const PIPE_SIZE: usize = 1 << 20;
/// Smaller than this (a pipe's usual size), a pipe is not worth splicing through.
const PIPE_SIZE_MIN: usize = 64 * 1024;

/// `SIOCATMARK` (asm-generic/sockios.h; not in the libc crate for Linux).
const SIOCATMARK: libc::Ioctl = 0x8905;

/// Whether the next byte to read from socket `fd` is TCP urgent data. splice(2)
/// stops there for good, where a read steps over it. `false` when the socket cannot
/// tell. (rustix has no `SIOCATMARK`: the one libc call left here.)
pub(crate) fn at_urgent_mark(fd: BorrowedFd<'_>) -> bool {
    let mut at: libc::c_int = 0;
    // SAFETY: SIOCATMARK writes one int through the pointer, which points at one; the
    // descriptor is borrowed, so open for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCATMARK, &mut at) };
    r == 0 && at != 0
}

/// Move up to `len` bytes from `from` to `to` without blocking; one of them must be a
/// pipe. `Ok(0)` from a socket means end of stream.
pub(crate) fn splice(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    splice_with(from, to, len, rustix::pipe::SpliceFlags::NONBLOCK)
}

/// [`splice`] blocking as the descriptors do (the bridge's threads).
pub(crate) fn splice_blocking(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    len: usize,
) -> io::Result<usize> {
    splice_with(from, to, len, rustix::pipe::SpliceFlags::empty())
}

fn splice_with(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    len: usize,
    flags: rustix::pipe::SpliceFlags,
) -> io::Result<usize> {
    let flags = flags | rustix::pipe::SpliceFlags::MOVE;
    Ok(rustix::pipe::splice(from, None, to, None, len, flags)?)
}

/// Splice pipes open at once in the launcher, across every tunnel of the proxy and
/// the bridge. Each 1 MiB pipe counts 256 pages against the user's pipe allowance
/// (`fs.pipe-user-pages-soft`, 16,384 pages by default), which every other program
/// the user runs shares: past it, the kernel gives new pipes two pages. Sixteen
/// pipes stay within a quarter of it.
pub(crate) static PIPES: Budget = Budget::new(16);

/// Held by the tests that watch [`PIPES`] or draw on it, so they run one at a time.
#[cfg(all(test, target_os = "linux"))]
pub(crate) static PIPES_WATCHED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A splice pipe counted against `budget` while it is open.
pub(crate) struct Leased<'b> {
    pub(crate) pipe: Pipe,
    budget: &'b Budget,
}

impl<'b> Leased<'b> {
    /// A new pipe ([`Pipe::new`]), or `None` when the budget is spent
    /// or no pipe of a useful size can be made.
    pub(crate) fn new(budget: &'b Budget, nonblocking: bool) -> Option<Leased<'b>> {
        if !budget.take(1) {
            return None;
        }
        match Pipe::new(nonblocking) {
            Ok(pipe) => Some(Leased { pipe, budget }),
            Err(_) => {
                budget.give(1);
                None
            }
        }
    }
}

impl Drop for Leased<'_> {
    fn drop(&mut self) {
        self.budget.give(1);
    }
}
