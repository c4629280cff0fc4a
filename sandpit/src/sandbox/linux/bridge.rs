//! The sandbox's only way out in namespace mode: a TCP listener on 127.0.0.1:<port>
//! created *inside* the network namespace and handed to the launcher, which relays
//! every accepted connection to a unix socket on the host (where sandpit's proxy
//! listens). The relay runs in the unconfined launcher, outside the sandbox's reach.
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::thread;

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

fn relay(tcp: TcpStream, to: &PathBuf) -> io::Result<()> {
    let unix = UnixStream::connect(to)?;
    let (mut tr, mut tw) = (tcp.try_clone()?, tcp);
    let (mut ur, mut uw) = (unix.try_clone()?, unix);
    let up = thread::spawn(move || {
        let _ = io::copy(&mut tr, &mut uw);
        let _ = uw.shutdown(Shutdown::Write);
    });
    let _ = io::copy(&mut ur, &mut tw);
    let _ = tw.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}
