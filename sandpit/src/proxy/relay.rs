//! Moving bytes both ways once a tunnel is decided and its first bytes checked.
//!
//! Each direction starts with a small user-space buffer that doubles (up to
//! [`COPY_BUF_MAX`]) whenever a read fills it. With `splice` on (the default), once it
//! has carried [`SPLICE_AFTER`] bytes (a bulk transfer), on Linux it switches to
//! `splice(2)` through a pipe, so the data no longer crosses into the proxy's memory.
//! Short connections never pay for a pipe (two descriptors), and at most [`crate::splice::PIPES`]
//! directions hold one at a time; the others go on copying.
use std::any::Any;
use std::io;

use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

use super::io::Io;
use crate::budget::Budget;
#[cfg(target_os = "linux")]
use crate::splice::{Leased, PIPES};

/// User-space buffer per direction to start with: enough for interactive traffic.
const COPY_BUF: usize = 32 * 1024;
/// What it grows to, doubling each time a read fills it: a bulk transfer then moves
/// more per system call and per wake-up. On this project's 2-core machine 100–500 MB
/// through CONNECT went from 0.58–0.64× direct with 256 KiB to 0.81–0.85× with 1 MiB
/// and 0.83–0.87× with 4 MiB, the proxy's CPU per 500 MB from ~240 to ~155 ms
/// (bench/proxy.sh, interleaved in one session).
const COPY_BUF_MAX: usize = 4 * 1024 * 1024;
/// Growth up to this size is free (as before there was more); beyond it each
/// direction draws on [`BIG_BUFFERS`], so the larger buffers add at most that much
/// to the launcher's memory however many bulk tunnels there are.
const COPY_BUF_UNMETERED: usize = 256 * 1024;
/// The bytes all directions together may hold beyond [`COPY_BUF_UNMETERED`] each:
/// seventeen directions at the full size.
static BIG_BUFFERS: Budget = Budget::new(64 * 1024 * 1024);

/// One direction's buffer: doubles while reads fill it, up to [`COPY_BUF_MAX`],
/// the part beyond [`COPY_BUF_UNMETERED`] drawn on `budget` (and given back when the
/// direction ends); with the budget spent it stays as it is.
struct Buffer<'b> {
    bytes: Vec<u8>,
    budget: &'b Budget,
}

impl<'b> Buffer<'b> {
    fn new(budget: &'b Budget) -> Buffer<'b> {
        Buffer {
            bytes: vec![0; COPY_BUF],
            budget,
        }
    }
    /// The bytes this buffer holds from the budget.
    fn metered(&self) -> usize {
        self.bytes.len().saturating_sub(COPY_BUF_UNMETERED)
    }
    fn grow(&mut self) {
        let next = self.bytes.len() * 2;
        if next > COPY_BUF_MAX {
            return;
        }
        let need = next.saturating_sub(COPY_BUF_UNMETERED) - self.metered();
        if need == 0 || self.budget.take(need) {
            self.bytes.resize(next, 0);
        }
    }
}

impl Drop for Buffer<'_> {
    fn drop(&mut self) {
        self.budget.give(self.metered());
    }
}
/// Bytes a direction carries before it switches to splice.
#[cfg(target_os = "linux")]
const SPLICE_AFTER: u64 = 256 * 1024;

/// One end of a tunnel the relay drives directly (readiness + non-blocking calls).
#[derive(Clone, Copy)]
pub(crate) enum Side<'a> {
    Tcp(&'a TcpStream),
    Unix(&'a UnixStream),
}

impl<'a> Side<'a> {
    async fn ready(self, i: Interest) -> io::Result<()> {
        match self {
            Side::Tcp(s) => s.ready(i).await.map(|_| ()),
            Side::Unix(s) => s.ready(i).await.map(|_| ()),
        }
    }
    fn try_read(self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Side::Tcp(s) => s.try_read(buf),
            Side::Unix(s) => s.try_read(buf),
        }
    }
    fn try_write(self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Side::Tcp(s) => s.try_write(buf),
            Side::Unix(s) => s.try_write(buf),
        }
    }
    #[cfg(target_os = "linux")]
    fn try_io<R>(self, i: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        match self {
            Side::Tcp(s) => s.try_io(i, f),
            Side::Unix(s) => s.try_io(i, f),
        }
    }
    #[cfg(target_os = "linux")]
    fn fd(self) -> std::os::fd::BorrowedFd<'a> {
        use std::os::fd::AsFd;
        match self {
            Side::Tcp(s) => s.as_fd(),
            Side::Unix(s) => s.as_fd(),
        }
    }
    pub(crate) fn shutdown_write(self) {
        let _ = match self {
            Side::Tcp(s) => socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write),
            Side::Unix(s) => socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write),
        };
    }
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// Read what is there (waiting for some); `Ok(0)` is end of stream.
pub(crate) async fn read(src: Side<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        src.ready(Interest::READABLE).await?;
        match src.try_read(buf) {
            Err(e) if would_block(&e) => {}
            r => return r,
        }
    }
}

pub(crate) async fn write_all(dst: Side<'_>, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        dst.ready(Interest::WRITABLE).await?;
        match dst.try_write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if would_block(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Copy `src` to `dst` until end of stream (then half-close `dst`).
pub(crate) async fn one_way(src: Side<'_>, dst: Side<'_>, splice: bool) -> io::Result<()> {
    #[cfg(not(target_os = "linux"))]
    let _ = splice;
    #[cfg(target_os = "linux")]
    let mut splice = splice;
    let mut buf = Buffer::new(&BIG_BUFFERS);
    #[cfg(target_os = "linux")]
    let mut moved: u64 = 0;
    loop {
        let n = read(src, &mut buf.bytes).await?;
        if n == 0 {
            dst.shutdown_write();
            return Ok(());
        }
        write_all(dst, &buf.bytes[..n]).await?;
        if n == buf.bytes.len() {
            buf.grow();
        }
        #[cfg(target_os = "linux")]
        {
            moved += n as u64;
            if splice && moved >= SPLICE_AFTER {
                if let Some(pipe) = Leased::new(&PIPES, true) {
                    // The grown buffer goes back while the pipe carries the bytes.
                    buf = Buffer::new(&BIG_BUFFERS);
                    if splice_way(src, dst, pipe).await? == Spliced::ToTheEnd {
                        return Ok(());
                    }
                    splice = false;
                }
                moved = 0;
            }
        }
    }
}

/// How a spliced direction ended.
#[cfg(target_os = "linux")]
#[derive(PartialEq, Eq)]
enum Spliced {
    /// At the end of the stream, passed on.
    ToTheEnd,
    /// At TCP urgent data, with the pipe empty: the rest must be copied.
    ToUrgentMark,
}

#[cfg(target_os = "linux")]
async fn splice_way(src: Side<'_>, dst: Side<'_>, pipe: Leased<'_>) -> io::Result<Spliced> {
    use crate::splice::{at_urgent_mark, splice, PIPE_SIZE};
    use std::os::fd::AsFd;
    let (pr, pw) = (pipe.pipe.read.as_fd(), pipe.pipe.write.as_fd());
    let mut in_pipe = 0usize;
    loop {
        if in_pipe == 0 {
            src.ready(Interest::READABLE).await?;
            // At the urgent mark splice moves nothing, ever: it says "would block"
            // (or, once the peer has closed, end of stream) with bytes queued. That
            // is answered `None` here, not as "would block", so the socket stays
            // marked readable for the copying that takes over.
            let fd = src.fd();
            match src.try_io(Interest::READABLE, || match splice(fd, pw, PIPE_SIZE) {
                Ok(0) if at_urgent_mark(fd) => Ok(None),
                Err(e) if would_block(&e) && at_urgent_mark(fd) => Ok(None),
                r => r.map(Some),
            }) {
                Ok(None) => return Ok(Spliced::ToUrgentMark),
                Ok(Some(0)) => {
                    dst.shutdown_write();
                    return Ok(Spliced::ToTheEnd);
                }
                Ok(Some(n)) => in_pipe = n,
                Err(e) if would_block(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        dst.ready(Interest::WRITABLE).await?;
        match dst.try_io(Interest::WRITABLE, || splice(pr, dst.fd(), in_pipe)) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => in_pipe -= n.min(in_pipe),
            Err(e) if would_block(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

/// `client` as a [`Side`] when it is a plain TCP or unix stream.
pub(crate) fn side<S: Io>(client: &S) -> Option<Side<'_>> {
    let any: &dyn Any = client;
    if let Some(c) = any.downcast_ref::<TcpStream>() {
        Some(Side::Tcp(c))
    } else {
        any.downcast_ref::<UnixStream>().map(Side::Unix)
    }
}

/// Relay until both directions have ended (half-closes are passed on).
pub(crate) async fn relay<S: Io>(mut client: S, mut upstream: TcpStream, splice: bool) {
    match side(&client) {
        Some(c) => {
            let u = Side::Tcp(&upstream);
            let _ = tokio::try_join!(one_way(c, u, splice), one_way(u, c, splice));
        }
        None => {
            let _ = tokio::io::copy_bidirectional_with_sizes(
                &mut client,
                &mut upstream,
                COPY_BUF,
                COPY_BUF,
            )
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_os = "linux")]
    use crate::splice::PIPES_WATCHED;

    /// A buffer doubles freely up to the unmetered size and beyond it only while the
    /// shared budget lasts; an ended direction gives its share back.
    #[test]
    fn grown_buffers_draw_on_one_shared_budget() {
        let full = COPY_BUF_MAX - COPY_BUF_UNMETERED;
        let budget = Budget::new(2 * full);
        let grown = |b: &mut Buffer| {
            for _ in 0..20 {
                b.grow();
            }
            b.bytes.len()
        };
        let mut a = Buffer::new(&budget);
        let mut b = Buffer::new(&budget);
        assert_eq!((grown(&mut a), grown(&mut b)), (COPY_BUF_MAX, COPY_BUF_MAX));
        let mut c = Buffer::new(&budget);
        assert_eq!(grown(&mut c), COPY_BUF_UNMETERED, "the budget is spent");
        assert_eq!(budget.used(), 2 * full);
        drop(a);
        assert_eq!(grown(&mut c), COPY_BUF_MAX, "a's share went back");
        drop((b, c));
        assert_eq!(budget.used(), 0);
    }

    /// A connected pair of sockets of one kind: (the end a peer writes to or reads
    /// from, the end the relay holds).
    #[cfg(target_os = "linux")]
    async fn pair(tcp: bool) -> (Stream, Stream) {
        if tcp {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let (a, b) = tokio::join!(TcpStream::connect(l.local_addr().unwrap()), l.accept());
            (Stream::Tcp(a.unwrap()), Stream::Tcp(b.unwrap().0))
        } else {
            let (a, b) = UnixStream::pair().unwrap();
            (Stream::Unix(a), Stream::Unix(b))
        }
    }

    /// A direction relayed by [`one_way`] with splice on, between sockets of the
    /// kinds given: (the client's end, the server's end, the relay's task).
    #[cfg(target_os = "linux")]
    async fn relayed(
        from_tcp: bool,
        to_tcp: bool,
    ) -> (Stream, Stream, tokio::task::JoinHandle<io::Result<()>>) {
        let (client, near) = pair(from_tcp).await;
        let (far, server) = pair(to_tcp).await;
        let way = tokio::spawn(async move { one_way(near.side(), far.side(), true).await });
        (client, server, way)
    }

    /// `len` bytes in which a byte lost, added or moved shows.
    #[cfg(target_os = "linux")]
    fn pattern(len: u32) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    #[cfg(target_os = "linux")]
    enum Stream {
        Tcp(TcpStream),
        Unix(UnixStream),
    }

    #[cfg(target_os = "linux")]
    impl Stream {
        fn side(&self) -> Side<'_> {
            match self {
                Stream::Tcp(s) => Side::Tcp(s),
                Stream::Unix(s) => Side::Unix(s),
            }
        }
        fn io(&mut self) -> &mut (dyn Io + Unpin) {
            match self {
                Stream::Tcp(s) => s,
                Stream::Unix(s) => s,
            }
        }
    }

    /// A bulk direction switches to a pipe part-way, carries every byte intact in
    /// order, and gives its pipe back when it ends: between the kinds of socket the
    /// proxy joins (unix from the sandbox's bridge, TCP from a client or upstream).
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bulk_direction_moves_through_a_pipe_and_gives_it_back() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let _watch = PIPES_WATCHED.lock().await;
        for (from_tcp, to_tcp) in [(false, false), (false, true), (true, false), (true, true)] {
            let kinds = format!("tcp {from_tcp} -> tcp {to_tcp}");
            let (mut client, mut server, way) = relayed(from_tcp, to_tcp).await;
            let data = pattern(4 << 20);
            let half = data.len() / 2;
            let mut got = vec![0u8; data.len()];
            let (w, r) = tokio::join!(client.io().write_all(&data[..half]), async {
                server.io().read_exact(&mut got[..half]).await
            });
            w.unwrap();
            r.unwrap();
            assert_eq!(PIPES.used(), 1, "{kinds}: 2 MiB in, the direction splices");
            let (w, r) = tokio::join!(
                async {
                    client.io().write_all(&data[half..]).await?;
                    client.io().shutdown().await
                },
                server.io().read_exact(&mut got[half..])
            );
            w.unwrap();
            r.unwrap();
            assert!(
                got == data,
                "{kinds}: bytes changed or reordered in transit"
            );
            way.await.unwrap().unwrap();
            let end = server.io().read(&mut [0u8; 1]).await.unwrap();
            assert_eq!(end, 0, "{kinds}: end passed on");
            assert_eq!(PIPES.used(), 0, "{kinds}: the pipe went back");
        }
    }

    /// With every splice pipe taken (sixteen bulk tunnels already splicing), a bulk
    /// direction goes on copying: every byte in order, the end passed on, no pipe
    /// taken past the budget.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_the_pipes_all_taken_a_bulk_direction_copies() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let _watch = PIPES_WATCHED.lock().await;
        assert!(PIPES.take(16), "the budget is sixteen pipes");
        let (mut client, mut server, way) = relayed(true, true).await;
        let data = pattern(4 << 20);
        let mut got = Vec::new();
        let (w, r) = tokio::join!(
            async {
                client.io().write_all(&data).await?;
                assert_eq!(PIPES.used(), 16, "no pipe past the budget");
                client.io().shutdown().await
            },
            server.io().read_to_end(&mut got)
        );
        PIPES.give(16);
        w.unwrap();
        r.unwrap();
        assert!(got == data, "bytes changed or reordered in transit");
        way.await.unwrap().unwrap();
    }

    /// TCP urgent data in the middle of a spliced direction: splice stops at the
    /// urgent mark for good, where a read steps over it (the urgent byte itself is
    /// not part of the stream, and no relay passes it on). The direction goes on
    /// copying: every other byte arrives in order and the end is passed on.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn urgent_data_in_a_spliced_direction_neither_wedges_it_nor_cuts_it_short() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let _watch = PIPES_WATCHED.lock().await;
        for peer_closes_first in [false, true] {
            let (mut client, mut server, way) = relayed(true, true).await;
            let data = pattern(2 << 20);
            let half = data.len() / 2;
            // The first half, through the relay: the direction is splicing.
            let mut got = vec![0u8; half];
            let (w, r) = tokio::join!(
                client.io().write_all(&data[..half]),
                server.io().read_exact(&mut got)
            );
            w.unwrap();
            r.unwrap();
            assert_eq!(PIPES.used(), 1, "the direction splices");
            // An urgent byte, the second half, and (in one round) the end, all queued
            // before the relay reaches the mark.
            let Stream::Tcp(c) = &client else {
                unreachable!()
            };
            socket2::SockRef::from(c).send_out_of_band(b"!").unwrap();
            client.io().write_all(&data[half..]).await.unwrap();
            if peer_closes_first {
                client.io().shutdown().await.unwrap();
            }
            let mut rest = vec![0u8; data.len() - half];
            let read = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                server.io().read_exact(&mut rest),
            )
            .await;
            assert!(
                matches!(read, Ok(Ok(_))),
                "closed first: {peer_closes_first}: the bytes after the urgent mark never came: {read:?}"
            );
            assert!(
                rest == data[half..],
                "closed first: {peer_closes_first}: bytes after the mark changed"
            );
            if !peer_closes_first {
                client.io().shutdown().await.unwrap();
            }
            way.await.unwrap().unwrap();
            let end = server.io().read(&mut [0u8; 1]).await.unwrap();
            assert_eq!(end, 0, "end passed on");
            assert_eq!(PIPES.used(), 0, "the pipe went back");
        }
    }

    /// Pipes are leased up to the budget, and a closed one makes room for the next.
    #[cfg(target_os = "linux")]
    #[test]
    fn splice_pipes_are_leased_within_their_budget() {
        let budget = Budget::new(2);
        let a = Leased::new(&budget, true).expect("first pipe");
        let b = Leased::new(&budget, true).expect("second pipe");
        assert!(Leased::new(&budget, true).is_none(), "the budget is spent");
        drop(a);
        let c = Leased::new(&budget, true).expect("a's place");
        assert_eq!(budget.used(), 2);
        drop((b, c));
        assert_eq!(budget.used(), 0);
    }
}
