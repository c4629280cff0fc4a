//! The adversary under `sandpit run`: the interposer's exec hook asks the launcher's
//! reviewer (a local OpenAI-compatible endpoint here) and obeys its verdict.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::TestHome;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A Chat Completions endpoint that denies any request mentioning `made-by-touch`.
fn reviewer() -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            // Read the head, then the body by Content-Length.
            loop {
                let n = c.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(i) = text.find("\r\n\r\n") {
                    let len = text[..i]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if buf.len() >= i + 4 + len {
                        break;
                    }
                }
            }
            let req = String::from_utf8_lossy(&buf).to_string();
            let body = req.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
            s.lock().unwrap().push(body.clone());
            let answer = if body.contains("made-by-touch") {
                "DENY: the rules forbid touching files"
            } else {
                "ALLOW: harmless"
            };
            let json = format!(
                "{{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{answer}\"}},\"finish_reason\":\"stop\"}}]}}"
            );
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
                json.len()
            );
        }
    });
    (port, seen)
}

#[test]
fn the_adversary_decides_execs_inside_the_run() {
    let (port, seen) = reviewer();
    let h = TestHome::new();
    h.user_config(&format!(
            "[adversary]\nprovider = \"openai\"\nmodel = \"test\"\nendpoint = \"http://127.0.0.1:{port}/v1\"\nrules = \"Never modify files with touch.\"\ntimeout_ms = 5000\n"
        ),
    );
    let o = h
        .sandpit()
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "ls >/dev/null && echo listed; touch made-by-touch; echo done",
        ])
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    // Positive control: an allowed command ran after review.
    assert!(out.contains("listed") && out.contains("done"), "{out}{err}");
    // The denied one did not, and the agent saw the reviewer's reason.
    assert!(!h.workspace().join("made-by-touch").exists(), "{out}{err}");
    assert!(err.contains("the rules forbid touching files"), "{err}");
    let seen = seen.lock().unwrap();
    assert!(seen.iter().any(|b| b.contains("ls")), "{seen:?}");
    assert!(
        seen.iter()
            .any(|b| b.contains("Never modify files with touch.")),
        "{seen:?}"
    );
}
