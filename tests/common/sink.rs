//! A loopback listener that records every connection and byte it receives and
//! answers the first read with a small HTTP response naming its label: stands in for
//! `blocked.test` (must receive nothing) and `allowed.test` (the positive control).
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub struct Sink {
    pub port: u16,
    addr: SocketAddr,
    /// The peer of every connection accepted, in order (the barriers' included).
    peers: Arc<Mutex<Vec<SocketAddr>>>,
    /// [`Sink::barrier`]'s own connections, which [`Sink::seen`] leaves out.
    barriers: Mutex<Vec<SocketAddr>>,
    pub bytes: Arc<Mutex<Vec<u8>>>,
    /// What it answers with.
    pub body: String,
}

impl Sink {
    /// Answers `sink:LABEL`.
    pub fn start(ip: &str, label: &'static str) -> Sink {
        Sink::answering(ip, format!("sink:{label}"))
    }

    pub fn answering(ip: &str, body: String) -> Sink {
        let l = TcpListener::bind((ip, 0)).unwrap();
        let addr = l.local_addr().unwrap();
        let peers = Arc::new(Mutex::new(Vec::new()));
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (c, b, answer) = (peers.clone(), bytes.clone(), body.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let Ok(peer) = s.peer_addr() else { continue };
                c.lock().unwrap().push(peer);
                let (b, body) = (b.clone(), answer.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    let n = s.read(&mut buf).unwrap_or(0);
                    b.lock().unwrap().extend_from_slice(&buf[..n]);
                    if n == 0 {
                        return;
                    }
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(resp.as_bytes());
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        b.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
        Sink {
            port: addr.port(),
            addr,
            peers,
            barriers: Mutex::new(Vec::new()),
            bytes,
            body,
        }
    }

    /// Returns once every connection that reached the sink before the call is
    /// counted: connects to the sink itself and waits until the accept loop, which
    /// takes connections in the order they completed, has taken this one. Call it
    /// before asserting that nothing arrived, once whatever could have sent has
    /// finished (the sandboxed run has exited): it replaces a fixed wait.
    pub fn barrier(&self) {
        // Only entries from here on can be ours (an earlier peer may have had the
        // same port); the stream stays open until ours is found.
        let start = self.peers.lock().unwrap().len();
        let s = TcpStream::connect(self.addr).unwrap();
        let me = s.local_addr().unwrap();
        self.barriers.lock().unwrap().push(me);
        let accepted = super::wait_for(10, || self.peers.lock().unwrap()[start..].contains(&me));
        assert!(accepted, "sink {} never accepted its barrier", self.addr);
        drop(s);
    }

    /// (connections, bytes) received so far, the barriers left out: after a
    /// [`barrier`](Sink::barrier), so every connection completed before the call
    /// is in the count.
    pub fn seen(&self) -> (usize, usize) {
        self.barrier();
        (
            self.peers.lock().unwrap().len() - self.barriers.lock().unwrap().len(),
            self.bytes.lock().unwrap().len(),
        )
    }
    pub fn received(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().unwrap()).into_owned()
    }
}
