//! A loopback listener that records every connection and byte it receives and
//! answers the first read with a small HTTP response naming its label: stands in for
//! `blocked.test` (must receive nothing) and `allowed.test` (the positive control).
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub struct Sink {
    pub port: u16,
    pub connections: Arc<AtomicUsize>,
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
        let port = l.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (c, b, answer) = (connections.clone(), bytes.clone(), body.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                c.fetch_add(1, Ordering::SeqCst);
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
            port,
            connections,
            bytes,
            body,
        }
    }
    /// (connections, bytes) received so far.
    pub fn seen(&self) -> (usize, usize) {
        (
            self.connections.load(Ordering::SeqCst),
            self.bytes.lock().unwrap().len(),
        )
    }
    pub fn received(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().unwrap()).into_owned()
    }
}
