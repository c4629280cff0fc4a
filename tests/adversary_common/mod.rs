#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A fake LLM endpoint on 127.0.0.1 that speaks HTTP/1.1 well enough for reqwest:
//! it records every request (method, path, headers, body) and answers with a
//! scripted response in the real Anthropic Messages or OpenAI Chat Completions
//! format. Plus a policy builder for tests.
#![allow(dead_code)]
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

pub enum Reply {
    /// Status and JSON body.
    Json(u16, String),
    /// Never answer (hold the connection).
    Hang,
    /// Answer after a delay.
    Slow(Duration, String),
}

type Responder = dyn Fn(&Recorded) -> Reply + Send + Sync;

pub struct FakeLlm {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    pub in_flight: Arc<AtomicUsize>,
    pub max_in_flight: Arc<AtomicUsize>,
}

impl FakeLlm {
    pub fn start(respond: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> FakeLlm {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let max_in_flight = Arc::new(AtomicUsize::new(0));
        let respond: Arc<Responder> = Arc::new(respond);
        let (rq, inf, mx) = (requests.clone(), in_flight.clone(), max_in_flight.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (rq, inf, mx, respond) = (rq.clone(), inf.clone(), mx.clone(), respond.clone());
                std::thread::spawn(move || serve_conn(conn, &rq, &inf, &mx, &*respond));
            }
        });
        FakeLlm {
            addr,
            requests,
            in_flight,
            max_in_flight,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve_conn(
    conn: TcpStream,
    rq: &Mutex<Vec<Recorded>>,
    inf: &AtomicUsize,
    mx: &AtomicUsize,
    respond: &Responder,
) {
    let mut out = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    while let Some(req) = crate::common::http1::read_request(&mut r) {
        let rec = Recorded {
            body: req.body_text(),
            method: req.method,
            path: req.target,
            headers: req.headers,
        };
        rq.lock().unwrap().push(rec.clone());
        let now = inf.fetch_add(1, Ordering::SeqCst) + 1;
        mx.fetch_max(now, Ordering::SeqCst);
        let (status, text) = match respond(&rec) {
            Reply::Json(s, t) => (s, t),
            Reply::Slow(d, t) => {
                std::thread::sleep(d);
                (200, t)
            }
            Reply::Hang => {
                std::thread::sleep(Duration::from_secs(60));
                inf.fetch_sub(1, Ordering::SeqCst);
                return;
            }
        };
        inf.fetch_sub(1, Ordering::SeqCst);
        let resp = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        );
        if out.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

/// An Anthropic Messages response whose text is `text`.
pub fn anthropic(text: &str) -> String {
    serde_json::json!({
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })
    .to_string()
}

/// An OpenAI Chat Completions response whose text is `text`.
pub fn openai(text: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
}

/// A Gemini `generateContent` response whose text is `text`.
pub fn gemini(text: &str) -> String {
    serde_json::json!({
        "candidates": [{
            "content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
    })
    .to_string()
}

/// A policy from `toml` (as the user's config) with home, workspace and state
/// under `root`.
pub fn policy(root: &Path, toml: &str) -> sandpit_policy::Policy {
    let ctx = sandpit_policy::Context {
        home: root.join("home"),
        workspace: root.join("home/project"),
        scratch: root.join("scratch"),
        state_dir: root.join("state"),
    };
    for d in [&ctx.home, &ctx.workspace, &ctx.scratch, &ctx.state_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut opts = sandpit_policy::LoadOptions::new(ctx);
    opts.user = Some(sandpit_policy::Source::new(
        sandpit_policy::Layer::User,
        "/test/config.toml",
        toml,
    ));
    sandpit_policy::load(&opts).unwrap()
}
