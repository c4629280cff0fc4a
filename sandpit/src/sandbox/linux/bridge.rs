//! The sandbox's only way out in namespace mode: a TCP listener on 127.0.0.1:<port>
//! created *inside* the network namespace and handed to the launcher, which relays
//! every accepted connection to a unix socket on the host (where sandpit's proxy
//! listens). The relay runs in the unconfined launcher, outside the sandbox's reach.
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::budget::Budget;
use crate::splice::{Leased, Pipe, PIPES};

/// Accept on `listener` forever (in a thread), relaying each connection to `to`.
pub fn serve(listener: TcpListener, to: PathBuf) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let to = to.clone();
            thread::spawn(move || {
                let _ = relay(conn, &to);
            });
        }
    })
}

/// DNS relays in flight at once. Each holds a thread that waits up to 5 s for the
/// responder; a datagram beyond them is dropped (DNS clients retry), so a flood
/// cannot grow the launcher's threads without bound.
const DNS_IN_FLIGHT: usize = 64;

/// Relay DNS: every datagram to 127.0.0.1:53 inside the sandbox goes to sandpit's
/// responder on the unix datagram socket `to`; its one reply goes back to the sender.
/// At most [`DNS_IN_FLIGHT`] at once.
pub fn serve_dns(sock: UdpSocket, to: PathBuf) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let in_flight = Arc::new(Budget::new(DNS_IN_FLIGHT));
        let mut buf = [0u8; 4096];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let Some(slot) = Slot::take(&in_flight) else {
                continue;
            };
            let (Ok(out), query) = (sock.try_clone(), buf[..n].to_vec()) else {
                continue;
            };
            let to = to.clone();
            // A thread that cannot start drops its closure, and the slot with it.
            let _ = thread::Builder::new()
                .name("sandpit-dns-relay".into())
                .spawn(move || {
                    let _slot = slot;
                    let _ = relay_dns(&out, from, &query, &to);
                });
        }
    })
}

/// One of the relays in flight; given back when dropped.
struct Slot(Arc<Budget>);

impl Slot {
    fn take(in_flight: &Arc<Budget>) -> Option<Slot> {
        in_flight.take(1).then(|| Slot(in_flight.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.give(1);
    }
}

fn relay_dns(out: &UdpSocket, from: SocketAddr, query: &[u8], to: &PathBuf) -> io::Result<()> {
    // The responder needs an address to answer to: a unique abstract name.
    use std::os::linux::net::SocketAddrExt;
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "sandpit-dns-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let u = UnixDatagram::bind_addr(&std::os::unix::net::SocketAddr::from_abstract_name(name)?)?;
    u.connect(to)?;
    u.set_read_timeout(Some(Duration::from_secs(5)))?;
    u.send(query)?;
    let mut buf = [0u8; 4096];
    let n = u.recv(&mut buf)?;
    out.send_to(&buf[..n], from)?;
    Ok(())
}

fn relay(tcp: TcpStream, to: &PathBuf) -> io::Result<()> {
    let unix = UnixStream::connect(to)?;
    let (mut tr, mut tw) = (tcp.try_clone()?, tcp);
    let (mut ur, mut uw) = (unix.try_clone()?, unix);
    let up = thread::spawn(move || {
        let _ = pump(&mut tr, &mut uw);
        let _ = uw.shutdown(Shutdown::Write);
    });
    let _ = pump(&mut ur, &mut tw);
    let _ = tw.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

/// Bytes a relay thread moves per read/write pair. `io::copy` between two sockets
/// uses 8 KiB, which costs a bulk download a system call pair per 8 KiB.
const PUMP_BUF: usize = 256 * 1024;

/// Bytes a direction carries through the buffer before it switches to splice(2).
const SPLICE_AFTER: usize = 256 * 1024;

/// Copy until end of stream. Short connections go through a small buffer; a bulk
/// transfer switches to splice(2) through a pipe, so its bytes stay in the kernel
/// (the buffer, grown to [`PUMP_BUF`], remains the fallback if no pipe can be made,
/// and takes the rest of the stream over at TCP urgent data).
fn pump<F, T>(from: &mut F, to: &mut T) -> io::Result<()>
where
    F: Read + AsFd,
    T: Write + AsFd,
{
    let mut buf = vec![0u8; 16 * 1024];
    let mut moved = 0;
    let mut splice = true;
    loop {
        if splice && moved >= SPLICE_AFTER {
            if let Some(pipe) = Leased::new(&PIPES, false) {
                if splice_all(from.as_fd(), to.as_fd(), &pipe.pipe)? {
                    return Ok(());
                }
                splice = false;
            }
            moved = 0;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        moved += n;
        if n == buf.len() && buf.len() < PUMP_BUF {
            buf.resize(PUMP_BUF, 0);
        }
    }
}

/// Relay `from` → pipe → `to` until end of stream (`true`), or until TCP urgent
/// data is next, the pipe empty (`false`: copy the rest). splice(2) stops at the
/// urgent mark for good (a blocking one waits there, or once the peer has closed
/// reports the end of stream) where a read steps over it; so each splice starts
/// only once `from` has bytes to read and they do not start at the mark.
fn splice_all(from: BorrowedFd<'_>, to: BorrowedFd<'_>, pipe: &Pipe) -> io::Result<bool> {
    let (pr, pw) = (pipe.read.as_fd(), pipe.write.as_fd());
    loop {
        if !crate::sys::readable(from, -1)? {
            continue; // interrupted
        }
        if crate::splice::at_urgent_mark(from.as_fd()) {
            return Ok(false);
        }
        let mut n = match crate::splice::splice_blocking(from, pw, 1 << 20) {
            Ok(0) => return Ok(true),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        while n > 0 {
            match crate::splice::splice_blocking(pr, to, n) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => n -= m.min(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::sync::mpsc;

    /// TCP urgent data in a bulk upload through the bridge, which splices by then:
    /// splice stops at the urgent mark for good, where a read steps over it (the
    /// urgent byte is not part of the stream, and no relay passes it on). Every
    /// other byte reaches the proxy in order and the end is passed on, whether the
    /// client closes only after the proxy has everything or at once.
    #[test]
    fn urgent_data_in_a_spliced_upload_neither_wedges_it_nor_cuts_it_short() {
        let _watch = crate::splice::PIPES_WATCHED.blocking_lock();
        for close_at_once in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("proxy.sock");
            let l = UnixListener::bind(&path).unwrap();
            let data: Vec<u8> = (0..2u32 << 20).map(|i| (i % 251) as u8).collect();
            let (len, half) = (data.len(), data.len() / 2);
            let (got_tx, got_rx) = mpsc::channel();
            let (end_tx, end_rx) = mpsc::channel();
            thread::spawn(move || {
                let (mut c, _) = l.accept().unwrap();
                let mut got = vec![0u8; len];
                let r = c.read_exact(&mut got).map(|()| got);
                got_tx.send(r).unwrap();
                end_tx.send(c.read(&mut [0u8; 1])).unwrap();
            });
            let tl = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut client = TcpStream::connect(tl.local_addr().unwrap()).unwrap();
            let (tcp, _) = tl.accept().unwrap();
            thread::spawn(move || relay(tcp, &path));
            client.write_all(&data[..half]).unwrap();
            socket2::SockRef::from(&client)
                .send_out_of_band(b"!")
                .unwrap();
            client.write_all(&data[half..]).unwrap();
            if close_at_once {
                client.shutdown(Shutdown::Write).unwrap();
            }
            let got = got_rx.recv_timeout(Duration::from_secs(10));
            assert!(
                matches!(&got, Ok(Ok(g)) if *g == data),
                "closed at once: {close_at_once}: the proxy did not get every byte in order"
            );
            if !close_at_once {
                client.shutdown(Shutdown::Write).unwrap();
            }
            let end = end_rx.recv_timeout(Duration::from_secs(10));
            assert!(
                matches!(end, Ok(Ok(0))),
                "closed at once: {close_at_once}: the end was not passed on: {end:?}"
            );
        }
    }
}
