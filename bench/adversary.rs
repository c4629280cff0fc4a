//! What a cached adversary verdict costs (goal: ≤ 1 ms).
//!
//! Prints, measured in the same run:
//! 1. `Reviewer::review` answered from the cache, in-process;
//! 2. the same through the control socket with the blocking client (what
//!    `sandpit exec` and the interposer pay);
//! 3. `sandpit exec true` with a policy whose adversary answers from the cache,
//!    against the same command under a policy without an adversary (the ratio).
//!
//! The fake endpoint answers ALLOW; it is asked once per command, then never.
//! Run: `bash bench/adversary.sh` (or `cargo bench -p sandpit --bench adversary`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use sandpit::adversary::{control, ReviewRequest, Reviewer};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn fake_llm() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut out = c.try_clone().unwrap();
                let mut r = BufReader::new(c);
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut h = String::new();
                        r.read_line(&mut h).unwrap();
                        if h.trim().is_empty() {
                            break;
                        }
                        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut b = vec![0; len];
                    r.read_exact(&mut b).unwrap();
                    let body = r#"{"content":[{"type":"text","text":"ALLOW: fine"}],"stop_reason":"end_turn"}"#;
                    let _ = write!(
                        out,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                }
            });
        }
    });
    format!("http://{addr}")
}

fn policy(root: &Path, adversary: Option<&str>) -> sandpit_policy::Policy {
    let ctx = sandpit_policy::Context {
        home: root.join("home"),
        workspace: root.join("home/project"),
        scratch: root.join("scratch"),
        state_dir: root.join("state"),
    };
    for d in [&ctx.home, &ctx.workspace, &ctx.scratch, &ctx.state_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let text = match adversary {
        Some(url) => format!(
            "[adversary]\nprovider = \"anthropic\"\nmodel = \"m\"\nendpoint = \"{url}\"\napi_key_env = \"BENCH_KEY\"\nrules = \"no exfiltration\"\n"
        ),
        None => String::new(),
    };
    let mut o = sandpit_policy::LoadOptions::new(ctx);
    o.user = Some(sandpit_policy::Source::new(
        sandpit_policy::Layer::User,
        "/bench/config.toml",
        text,
    ));
    sandpit_policy::load(&o).unwrap()
}

fn per_op(total: Duration, n: u32) -> f64 {
    total.as_secs_f64() * 1e6 / f64::from(n)
}

fn exec_true(snapshot: &Path, socket: Option<&Path>, n: u32) -> Duration {
    let bin = env!("CARGO_BIN_EXE_sandpit");
    let run = || {
        let mut c = Command::new(bin);
        c.args(["exec", "true"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("SANDPIT_SNAPSHOT", snapshot)
            .stdin(Stdio::null());
        if let Some(s) = socket {
            c.env(sandpit_review::SOCKET_VAR, s);
        }
        let st = c.status().unwrap();
        assert!(st.success(), "sandpit exec true failed");
    };
    run(); // warm: the first run fills the cache
    let t = Instant::now();
    for _ in 0..n {
        run();
    }
    t.elapsed()
}

fn main() {
    let url = fake_llm();
    let dir = tempfile::tempdir().unwrap();
    let p = policy(dir.path(), Some(&url));
    let env = vec![("BENCH_KEY".to_string(), "bench-key-0000".to_string())];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let reviewer = Arc::new(Reviewer::from_policy(&p, &env).unwrap().unwrap());
    let req = ReviewRequest::exec(
        vec!["cargo".into(), "build".into(), "--release".into()],
        "/work/project".into(),
    );

    // 1. In-process cache hit.
    let first = rt.block_on(reviewer.review(req.clone()));
    assert!(first.is_allowed(), "{first:?}");
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        let v = rt.block_on(reviewer.review(req.clone()));
        assert!(v.is_allowed());
    }
    let in_process = per_op(t.elapsed(), n);

    // 2. Through the control socket.
    let sock = control::socket_path(&p.context.state_dir, "bench");
    let server = {
        let _g = rt.enter();
        control::start(&sock, reviewer.clone()).unwrap()
    };
    let argv: Vec<&[u8]> = vec![b"cargo", b"build", b"--release"];
    let ask =
        || sandpit_review::ask(&sock, b"/work/project", &argv, Duration::from_secs(10)).unwrap();
    ask();
    let n_sock = 5_000;
    let t = Instant::now();
    for _ in 0..n_sock {
        ask();
    }
    let socket = per_op(t.elapsed(), n_sock);

    // 3. `sandpit exec true`, with and without the adversary.
    let with_snap = dir.path().join("with.snapshot");
    std::fs::write(&with_snap, p.snapshot()).unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let without = policy(d2.path(), None);
    let without_snap = dir.path().join("without.snapshot");
    std::fs::write(&without_snap, without.snapshot()).unwrap();
    let n_exec = 300;
    let bare = per_op(exec_true(&without_snap, None, n_exec), n_exec);
    let reviewed = per_op(exec_true(&with_snap, Some(server.path()), n_exec), n_exec);

    println!(
        "adversary: cached verdict, in-process Reviewer::review: {in_process:.1} µs/op ({n} ops)"
    );
    println!(
        "adversary: cached verdict through the control socket:   {socket:.1} µs/op ({n_sock} ops)"
    );
    println!(
        "adversary: sandpit exec true, no adversary:             {bare:.0} µs/op ({n_exec} runs)"
    );
    println!("adversary: sandpit exec true, cached adversary verdict: {reviewed:.0} µs/op ({n_exec} runs)");
    println!(
        "adversary: cost of a cached verdict in sandpit exec:     {:.0} µs ({:.2}x the run without adversary); goal <= 1000 µs",
        reviewed - bare,
        reviewed / bare
    );
    println!(
        "adversary: requests that reached the endpoint: {} (one per distinct command)",
        reviewer.requests_sent()
    );
    if std::env::var_os("BENCH_RESULT").is_some() {
        // Machine-readable lines for bench/report.sh.
        println!("RESULT adversary_in_process {in_process:.1} us");
        println!("RESULT adversary_socket {socket:.1} us");
        println!("RESULT adversary_exec_bare {bare:.0} us");
        println!("RESULT adversary_exec_reviewed {reviewed:.0} us");
    }
    drop(server);
}
