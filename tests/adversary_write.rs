//! `[adversary] review = ["write"]` under `sandpit run`: a write outside the workspace
//! that the rules allowed (an extra `allow_write` root) is put to the reviewer (a local
//! endpoint speaking the real Anthropic Messages format) by the interposer's file
//! hooks, over the launcher's control socket. Judged by effect: the denied file does
//! not exist, the allowed one does.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod adversary_common;
mod common;
use common::text as out;

use adversary_common::{anthropic, FakeLlm, Reply};
use common::TestHome;
use std::process::Output;

const RULES: &str = "Nothing may write files named like forbidden-target.";

fn home(llm: &FakeLlm, timeout_ms: u32) -> TestHome {
    let h = TestHome::new();
    h.write(&h.home().join("extra/.keep"), "");
    h.user_config(&format!(
            "[files]\nallow_write = [\"~/extra\"]\n[adversary]\nprovider = \"anthropic\"\nmodel = \"judge\"\nendpoint = \"{}\"\napi_key_env = \"TEST_ADV_KEY\"\nrules = \"{RULES}\"\nreview = [\"write\"]\ntimeout_ms = {timeout_ms}\n",
            llm.url()
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
fn writes_outside_the_workspace_are_reviewed_and_a_deny_is_eacces() {
    let llm = FakeLlm::start(|q| {
        let user = q.json()["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .to_string();
        // Judge the event itself (the history may name other paths).
        let event = user.lines().next().unwrap_or("").to_string();
        if event.contains("forbidden-target") {
            Reply::Json(
                200,
                anthropic("DENY: the rules forbid that file (write-deny-marker)"),
            )
        } else {
            Reply::Json(200, anthropic("ALLOW: a cache file"))
        }
    });
    let h = home(&llm, 5000);
    let extra = h.home().join("extra");
    // A relative write after a raw chdir the interposer cannot see: it must be
    // judged (and reviewed) where it lands, not against the cwd the interposer
    // remembers from the relative read before it.
    h.write(
        &h.workspace().join("stale.py"),
        "import ctypes, os\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         open('stale.py').close()\n\
         nr = {'x86_64': 80, 'aarch64': 49}[os.uname().machine]\n\
         assert libc.syscall(nr, (os.environ['HOME'] + '/extra').encode()) == 0\n\
         try:\n    open('forbidden-target-2.txt', 'w').write('e')\n    print('wrote-stale')\n\
         except OSError:\n    print('refused-stale')\n",
    );
    let o = run(
        &h,
        "echo a > ~/extra/ok.txt && echo wrote-ok; \
         echo b > ~/extra/forbidden-target.txt || echo refused; \
         echo c >> ~/extra/ok.txt; \
         echo d > inside.txt && echo wrote-inside; \
         python3 stale.py",
    );
    let bodies: Vec<String> = llm.requests().into_iter().map(|r| r.body).collect();
    let text = format!("{}\nreviewer requests: {bodies:#?}", out(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // Positive controls: the reviewer's ALLOW, and a write inside the workspace
    // (never reviewed).
    assert!(
        stdout.contains("wrote-ok") && stdout.contains("wrote-inside"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(extra.join("ok.txt")).unwrap(),
        "a\nc\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.workspace().join("inside.txt")).unwrap(),
        "d\n"
    );
    // The deny: the file was never created, the shell got an error, the reason is on
    // stderr.
    assert!(!extra.join("forbidden-target.txt").exists(), "{text}");
    assert!(stdout.contains("refused"), "{text}");
    assert!(!extra.join("forbidden-target-2.txt").exists(), "{text}");
    assert!(stdout.contains("refused-stale"), "{text}");
    assert!(stderr.contains("write-deny-marker"), "{text}");
    assert!(stderr.contains("Permission denied"), "{text}");

    // Requests: one per path (the second write to ok.txt was cached), none for the
    // workspace; the real Messages shape.
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 3, "{reqs:?}");
    for r in &reqs {
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some("k-test-123"));
        let j = r.json();
        assert_eq!(j["model"], "judge");
        assert!(j["system"].as_str().unwrap().contains(RULES), "{j}");
        let user = j["messages"][0]["content"].as_str().unwrap();
        assert!(
            user.starts_with("Write to a file outside the project"),
            "{user}"
        );
        assert!(!user.contains("inside.txt"), "{user}");
    }
    let first = reqs[0].json()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        first.contains(&extra.join("ok.txt").display().to_string()),
        "{first}"
    );
}

#[test]
fn a_reviewer_that_hangs_means_the_write_is_refused() {
    let llm = FakeLlm::start(|_| Reply::Hang);
    let h = home(&llm, 1000);
    let extra = h.home().join("extra");
    let o = run(
        &h,
        "echo a > ~/extra/late.txt || echo refused; echo d > inside.txt && echo wrote-inside",
    );
    let text = out(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!extra.join("late.txt").exists(), "{text}");
    assert!(stdout.contains("refused"), "{text}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("on_error is \"deny\""),
        "{text}"
    );
    // Positive control: the workspace is not reviewed.
    assert!(stdout.contains("wrote-inside"), "{text}");
    assert_eq!(llm.requests().len(), 1);
}
