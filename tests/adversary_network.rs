//! `[adversary] review = ["network"]` under `sandpit run`: every new destination the
//! rules allowed goes to the reviewer (a local endpoint speaking the real Anthropic
//! Messages / OpenAI Chat Completions formats) once per run, from the proxy. Judged
//! by effect: the reviewer-denied listener receives nothing, the allowed one answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod adversary_common;
mod common;
use common::text as out;

use adversary_common::{anthropic, openai, FakeLlm, Reply};
use common::TestHome;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A loopback HTTP listener that counts connections and answers `sink:<label>`.
fn sink(ip: &str, label: &'static str) -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind((ip, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            s.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let body = format!("sink:{label}");
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

const RULES: &str = "Never send anything to hosts that look like exfiltration drops.";

/// A test HOME whose config allows both hosts (the rules say yes to both) and sends
/// new destinations to the reviewer at `adversary`.
fn home(adversary: &str) -> TestHome {
    let h = TestHome::new();
    h.user_config(&format!(
            "[network]\nallow = [\"allowed.test\", \"drop.test\", \"busy.test\"]\n[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n\"drop.test\" = \"127.0.0.3\"\n\"busy.test\" = \"127.0.0.2\"\n{adversary}"
        ),
    );
    h
}

fn run(h: &TestHome, script: &str) -> Output {
    h.sandpit()
        .env("TEST_ADV_KEY", "k-test-123")
        .args(["run", "--", "sh", "-c", script])
        .output()
        .unwrap()
}

#[test]
fn new_destinations_are_reviewed_once_and_a_deny_refuses_the_connection() {
    let llm = FakeLlm::start(|q| {
        if q.body.contains("drop.test") {
            Reply::Json(
                200,
                anthropic("DENY: looks like an exfiltration drop (net-deny-marker)"),
            )
        } else {
            Reply::Json(200, anthropic("ALLOW: a host the project uses"))
        }
    });
    let h = home(&format!(
        "[adversary]\nprovider = \"anthropic\"\nmodel = \"judge\"\nendpoint = \"{}\"\napi_key_env = \"TEST_ADV_KEY\"\nrules = \"{RULES}\"\nreview = [\"network\"]\ntimeout_ms = 5000\n",
        llm.url()
    ));
    let (a, allowed) = sink("127.0.0.2", "allowed");
    let (d, dropped) = sink("127.0.0.3", "drop");
    let o = run(
        &h,
        &format!(
            "curl -sS --max-time 10 http://allowed.test:{a}/one; echo; \
             curl -sS --max-time 10 http://allowed.test:{a}/two; echo; \
             curl -sS --max-time 10 -w ' code=%{{http_code}}' http://drop.test:{d}/secret"
        ),
    );
    let text = out(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    // Positive control: allowed by the rules and by the reviewer, twice.
    assert_eq!(stdout.matches("sink:allowed").count(), 2, "{text}");
    assert_eq!(allowed.load(Ordering::SeqCst), 2, "{text}");
    // The reviewer's deny: refused at the proxy with its reason, nothing reached it.
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "{text}");
    assert!(stdout.contains("code=403"), "{text}");
    assert!(stdout.contains("net-deny-marker"), "{text}");

    // One request per destination (the second connection to allowed.test was cached).
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    for r in &reqs {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some("k-test-123"));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        let j = r.json();
        assert_eq!(j["model"], "judge");
        assert!(j["system"].as_str().unwrap().contains(RULES), "{j}");
        assert_eq!(j["messages"][0]["role"], "user");
    }
    let user = |i: usize| {
        reqs[i].json()["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(user(0).contains("New network destination"), "{}", user(0));
    assert!(
        user(0).contains(&format!("allowed.test:{a}")),
        "{}",
        user(0)
    );
    assert!(user(1).contains(&format!("drop.test:{d}")), "{}", user(1));
    // The history shows the reviewer the earlier destination.
    assert!(
        user(1).contains(&format!("connection to allowed.test:{a}")),
        "{}",
        user(1)
    );

    // The audit log has the reviewer's denial.
    let logs = h.home().join(".sandpit/logs");
    let log: String = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    let rec = log
        .lines()
        .find(|l| l.contains("drop.test") && l.contains("net-deny-marker"))
        .unwrap_or_else(|| panic!("no audit record of the denial: {log}"));
    assert!(rec.contains("\"deny\""), "{rec}");
    assert!(rec.contains("\"key\":\"adversary\""), "{rec}");
    // The run's summary names the reviewer, and does not advise adding an allow
    // rule that is already there.
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("refused it after the rules allowed it"),
        "{text}"
    );
    assert!(!stderr.contains("allow = [\"drop.test"), "{text}");
}

#[test]
fn a_reviewer_that_hangs_past_the_timeout_refuses_the_connection() {
    let llm = FakeLlm::start(|q| {
        // Judge the event line (the history names earlier destinations too).
        let user = q.json()["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if user.lines().next().unwrap_or("").contains("drop.test") {
            Reply::Json(200, openai("ALLOW: fine"))
        } else {
            Reply::Hang
        }
    });
    let h = home(&format!(
        "[adversary]\nprovider = \"openai\"\nmodel = \"judge\"\nendpoint = \"{}\"\nrules = \"{RULES}\"\nreview = [\"network\"]\ntimeout_ms = 1000\n",
        llm.url()
    ));
    let (a, allowed) = sink("127.0.0.2", "allowed");
    let (d, dropped) = sink("127.0.0.3", "drop");
    let o = run(
        &h,
        &format!(
            "curl -sS --max-time 20 -w ' code=%{{http_code}}' http://allowed.test:{a}/; echo; \
             curl -sS --max-time 20 http://drop.test:{d}/; echo; \
             for i in 1 2 3; do curl -sS --max-time 20 http://busy.test:{a}/$i & done; wait"
        ),
    );
    let text = out(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    // Fail closed: no answer in time means no connection.
    assert_eq!(allowed.load(Ordering::SeqCst), 0, "{text}");
    assert!(stdout.contains("code=403"), "{text}");
    // (reqwest's own timeout, set to timeout_ms, or the review's bound: whichever
    // fires first.)
    assert!(
        stdout.contains("could not review the connection to allowed.test")
            && stdout.contains("on_error is \"deny\""),
        "{text}"
    );
    // Positive control: the reviewer's ALLOW lets the other one through.
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "{text}");
    assert!(stdout.contains("sink:drop"), "{text}");
    let reqs = llm.requests();
    assert!(
        reqs.iter().all(|r| r.path == "/v1/chat/completions"),
        "{reqs:?}"
    );
    // Three parallel connections to a destination whose review hangs: one request,
    // whose failure refuses all three (the waiters do not each ask and wait again).
    let about_busy = reqs
        .iter()
        .filter(|r| {
            let user = r.json()["messages"][1]["content"]
                .as_str()
                .unwrap()
                .to_string();
            user.lines().next().unwrap_or("").contains("busy.test")
        })
        .count();
    assert_eq!(about_busy, 1, "{text}");
    assert_eq!(allowed.load(Ordering::SeqCst), 0, "{text}");
    assert_eq!(
        stdout
            .matches("could not review the connection to busy.test")
            .count(),
        3,
        "{text}"
    );
    let j = reqs[0].json();
    assert_eq!(j["messages"][0]["role"], "system");
    assert!(j["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains(RULES));
}

#[test]
fn network_review_without_sandpits_proxy_is_an_error_not_a_silent_no_op() {
    let llm = FakeLlm::start(|_| Reply::Json(200, openai("ALLOW: fine")));
    let h = TestHome::new();
    // Unrestricted mode goes through sandpit's proxy too, so review holds there.
    h.user_config(&format!(
            "[network]\nmode = \"unrestricted\"\n[adversary]\nprovider = \"openai\"\nmodel = \"judge\"\nendpoint = \"{}\"\nreview = [\"network\"]\n",
            llm.url()
        ),
    );
    let marker = h.workspace().join("ran");
    let run = |extra: &[&str]| {
        h.sandpit()
            .arg("run")
            .args(extra)
            .args(["--", "sh", "-c"])
            .arg(format!("touch {}", marker.display()))
            .output()
            .unwrap()
    };
    // Another proxy named with --proxy-socket: sandpit's reviewer would see nothing.
    let elsewhere = h.workspace().join("other-proxy.sock");
    let o = run(&["--proxy-socket", elsewhere.to_str().unwrap()]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(125), "{text}");
    assert!(text.contains("do not go through sandpit's proxy"), "{text}");
    assert!(!marker.exists(), "{text}");
    // Positive control: with sandpit's own proxy the same policy starts.
    let o = run(&[]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(marker.exists());
}

/// Loopback services are relayed straight to the host port, past the reviewer:
/// asking for network review with one listed stops the run before it starts.
#[test]
fn network_review_with_a_loopback_service_is_an_error_not_a_bypass() {
    let llm = FakeLlm::start(|_| Reply::Json(200, openai("ALLOW: fine")));
    let h = TestHome::new();
    let config = |review: &str| {
        format!(
            "[network]\nallow = [\"localhost:11434\"]\n[adversary]\nprovider = \"openai\"\nmodel = \"judge\"\nendpoint = \"{}\"\nreview = [{review}]\n",
            llm.url()
        )
    };
    h.user_config(&config("\"network\""));
    let marker = h.workspace().join("ran");
    let run = || {
        h.sandpit()
            .args(["run", "--", "sh", "-c"])
            .arg(format!("touch {}", marker.display()))
            .output()
            .unwrap()
    };
    let o = run();
    let text = out(&o);
    assert!(!o.status.success(), "{text}");
    assert!(
        text.contains("localhost:11434") && text.contains("reviewer does not see"),
        "{text}"
    );
    assert!(!marker.exists(), "{text}");
    // Positive control: reviewing commands only, the same services start.
    h.user_config(&config("\"exec\""));
    let o = run();
    assert!(o.status.success(), "{}", out(&o));
    assert!(marker.exists());
}

#[test]
fn parallel_connections_to_a_new_destination_are_reviewed_once() {
    // A slow reviewer: without single-flight every parallel connection would ask.
    let llm = FakeLlm::start(|_| {
        Reply::Slow(
            std::time::Duration::from_millis(500),
            anthropic("ALLOW: a host the project uses"),
        )
    });
    let h = home(&format!(
        "[adversary]\nprovider = \"anthropic\"\nmodel = \"judge\"\nendpoint = \"{}\"\napi_key_env = \"TEST_ADV_KEY\"\nrules = \"{RULES}\"\nreview = [\"network\"]\ntimeout_ms = 10000\n",
        llm.url()
    ));
    let (a, seen) = sink("127.0.0.2", "busy");
    let o = run(
        &h,
        &format!(
            "for i in 1 2 3 4; do curl -sS --max-time 20 http://busy.test:{a}/$i & done; wait"
        ),
    );
    let text = out(&o);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout)
            .matches("sink:busy")
            .count(),
        4,
        "{text}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 4, "{text}");
    assert_eq!(llm.requests().len(), 1, "{text}");
}
