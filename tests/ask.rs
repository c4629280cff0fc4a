#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `network.ask_on_blocked_host`: a connection to a host missing from
//! `network.allow` waits while the launcher asks on the user's terminal, here a
//! real pty the test holds the master of (the launcher's stdin and stdout are its
//! slave, as in a terminal window). The sandboxed command runs as the unprivileged
//! test user; `ask.test` maps to a loopback listener through sandpit's own
//! resolver. Also `sandpit log --follow`.
mod common;

use common::sink::Sink;
use common::TestHome;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};

/// The user's config: ask.test is on loopback, not in network.allow; `extra` goes
/// into `[network]`.
fn config(h: &TestHome, extra: &str) -> PathBuf {
    let path = h.user_config_path();
    h.write(
        &path,
        &format!(
            "# the test's own config\n[network]\nallow = [\"other.test\"]\n{extra}\
             [network.resolve]\n\"ask.test\" = \"127.0.0.1\"\n"
        ),
    );
    path
}

/// The set-up every test here shares: a home whose config is [`config`] with
/// `extra`, a listener standing in for ask.test, and the command the run gets,
/// `work.sh`.
struct Ask {
    h: TestHome,
    sink: Sink,
    /// The user's config file.
    config: PathBuf,
}

impl Ask {
    /// `work.sh` is `script` given the listener's port.
    fn new(extra: &str, script: impl FnOnce(u16) -> String) -> Ask {
        let h = TestHome::new();
        let config = config(&h, extra);
        let sink = Sink::start("127.0.0.1", "ask");
        h.write(&h.workspace().join("work.sh"), &script(sink.port));
        Ask { h, sink, config }
    }
    /// `work.sh` prints `ready`, fetches ask.test once per label, prints `end`.
    fn curls(extra: &str, labels: &[&str]) -> Ask {
        Ask::new(extra, |port| {
            let fetches: String = labels.iter().map(|l| curl(l, port)).collect();
            format!("echo ready\n{fetches}echo end\n")
        })
    }
    /// The run, on a terminal of its own.
    fn run(&self) -> Terminal {
        Terminal::run(&self.h)
    }
    /// The run, its question answered with `key` (the terminal then showing
    /// `echo`) or left unanswered (None), to its end: the terminal's text.
    fn run_answering(&self, key: Option<(u8, &str)>) -> String {
        let mut t = self.run();
        t.must_show(&self.question(), 60);
        if let Some((k, echo)) = key {
            t.answer(k, echo);
        }
        t.must_show("end", 60);
        t.finish()
    }
    /// The question about the listener.
    fn question(&self) -> String {
        question(self.sink.port)
    }
    fn log(&self) -> String {
        log(&self.h)
    }
}

fn curl(label: &str, port: u16) -> String {
    format!(
        "printf '{label}:'; curl -sS --max-time 60 http://ask.test:{port}/ 2>&1 | head -c 300 | tr '\\n' ' '; echo '<'\n"
    )
}

/// The launcher on a pty: everything it writes to the terminal, as it arrives.
struct Terminal {
    master: std::fs::File,
    seen: Arc<Mutex<Vec<u8>>>,
    child: Child,
}

impl Terminal {
    /// `sandpit run -- sh work.sh` with stdin, stdout and stderr on a new pty.
    fn run(h: &TestHome) -> Terminal {
        let (master, slave, _) = common::user_terminal();
        let mut cmd = h.sandpit_run(false);
        cmd.args(["sh", "work.sh"])
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        let child = cmd.spawn().unwrap();
        drop(cmd);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (mut r, s) = (master.try_clone().unwrap(), seen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the launcher and its command are gone.
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Terminal {
            master,
            seen,
            child,
        }
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }
    /// Wait (up to `secs`) until the terminal shows `what`.
    fn wait_for(&self, what: &str, secs: u64) -> bool {
        common::wait_for(secs, || self.text().contains(what))
    }
    fn must_show(&self, what: &str, secs: u64) {
        assert!(
            self.wait_for(what, secs),
            "the terminal never showed {what:?}:\n{}",
            self.text()
        );
    }
    /// Type `keys` on the terminal.
    fn keys(&mut self, keys: &[u8]) {
        self.master.write_all(keys).unwrap();
    }
    /// Answer the question up with `key` and Enter, until the terminal shows
    /// `echo` after it: the question drops keys typed in its first moments
    /// (meant for the command), so the first try may be one of those.
    fn answer(&mut self, key: u8, echo: &str) {
        const END: &str = "A letter, then Enter:";
        let at = self.text().rfind(END).expect("no question up") + END.len();
        for _ in 0..60 {
            self.keys(&[key, b'\r']);
            if common::wait_for(1, || self.text()[at..].contains(echo)) {
                return;
            }
        }
        panic!(
            "the question never took {:?}:\n{}",
            key as char,
            self.text()
        );
    }
    fn finish(mut self) -> String {
        assert!(
            common::wait_for(120, || self.child.try_wait().unwrap().is_some()),
            "the run did not end:\n{}",
            self.text()
        );
        let st = self.child.wait().unwrap();
        assert!(st.success(), "{st:?}\n{}", self.text());
        self.text()
    }
}

fn question(port: u16) -> String {
    format!("wants ask.test:{port} (not in network.allow)")
}

fn log(h: &TestHome) -> String {
    let dir = h.home().join(".sandpit/logs");
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap() {
        out.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap());
    }
    out
}

#[test]
fn this_run_lets_the_second_connection_through_without_asking() {
    let a = Ask::curls("", &["first", "second"]);
    let mut t = a.run();
    t.must_show(&a.question(), 60);
    assert!(t
        .text()
        .contains("[o]nce, this [r]un, [a]lways, [d]eny? (denied in 30s)"));
    // The question names the program behind the connection, by the kernel's word.
    let t0 = t.text();
    let named = t0.lines().find(|l| l.contains(&a.question())).unwrap_or("");
    assert!(
        named.contains("sandpit: /usr/bin/curl (pid ") && named.contains(") wants ask.test"),
        "{named}"
    );
    // The connection waits for the answer.
    assert_eq!(
        a.sink.seen().0,
        0,
        "the connection went through before the answer"
    );
    t.answer(b'r', "this run");
    t.must_show("end", 60);
    let out = t.finish();
    assert!(t_result(&out, "first").contains("sink:ask"), "{out}");
    assert!(t_result(&out, "second").contains("sink:ask"), "{out}");
    assert_eq!(out.matches(&a.question()).count(), 1, "asked twice:\n{out}");
    assert_eq!(a.sink.seen().0, 2, "{out}");
    let log = a.log();
    assert!(
        log.contains(&format!("\"subject\":\"ask ask.test:{}\"", a.sink.port)),
        "{log}"
    );
    assert!(log.contains("decided by the user"), "{log}");
}

fn t_result(out: &str, label: &str) -> String {
    let at = out.find(&format!("{label}:")).unwrap();
    let rest = &out[at..];
    rest[..rest.find('<').unwrap_or(rest.len())].to_string()
}

#[test]
fn deny_and_no_answer_deny_with_the_reason_logged() {
    for (answer, secs, reason) in [
        (Some(b'd'), 20, "asked, denied by the user"),
        (None, 2, "asked, no answer in 2s"),
    ] {
        let a = Ask::curls(&format!("ask_timeout = {secs}\n"), &["first"]);
        let out = a.run_answering(answer.map(|k| (k, "denied")));
        assert!(!t_result(&out, "first").contains("sink:ask"), "{out}");
        assert_eq!(a.sink.seen(), (0, 0), "the listener was reached: {out}");
        let log = a.log();
        assert!(log.contains(reason), "{reason:?} not in the log:\n{log}");
        assert!(log.contains("network.ask_on_blocked_host"), "{log}");
    }
}

#[test]
fn always_writes_the_users_config_and_the_next_run_does_not_ask() {
    let a = Ask::curls("", &["first"]);
    let out = a.run_answering(Some((b'a', "always")));
    assert!(t_result(&out, "first").contains("sink:ask"), "{out}");
    let cfg = std::fs::read_to_string(&a.config).unwrap();
    assert!(cfg.starts_with("# the test's own config\n"), "{cfg}");
    assert!(cfg.contains("# allowed when asked on "), "{cfg}");
    assert!(
        cfg.contains(&format!("\"ask.test:{}\"", a.sink.port)),
        "{cfg}"
    );
    // The next run: no question, the connection goes through.
    let t = a.run();
    t.must_show("end", 60);
    let out = t.finish();
    assert!(t_result(&out, "first").contains("sink:ask"), "{out}");
    assert!(!out.contains(&a.question()), "asked again:\n{out}");
    assert_eq!(a.sink.seen().0, 2);
}

/// Inside the sandbox, while the question may be up: write answers to its own
/// terminal and push them into its input with TIOCSTI, again and again, until the
/// test says stop (`started` once it has tried: the connection waits for that).
const FORGE_PY: &str = r#"
import fcntl, os, termios, time
tries = {"write": 0, "tiocsti": 0, "tiocsti_ok": 0}
while not os.path.exists("stop"):
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(fd, b"r\na\n")
            tries["write"] += 1
        except OSError:
            pass
        for c in b"a\n":
            tries["tiocsti"] += 1
            try:
                fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
                tries["tiocsti_ok"] += 1
            except OSError:
                pass
        os.close(fd)
    except OSError:
        pass
    if not os.path.exists("started"):
        open("started", "w").close()
    time.sleep(0.02)
open("forged", "w").write(repr(tries))
"#;

fn forge_run(answer: bool) {
    let a = Ask::new("ask_timeout = 3\n", |port| {
        format!(
            "echo ready\npython3 forge.py &\nwhile [ ! -e started ]; do sleep 0.02; done\n{}touch stop\nwait\necho end\n",
            curl("first", port)
        )
    });
    let before = std::fs::read_to_string(&a.config).unwrap();
    a.h.write(&a.h.workspace().join("forge.py"), FORGE_PY);
    let out = a.run_answering(answer.then_some((b'r', "this run")));
    let forged = std::fs::read_to_string(a.h.workspace().join("forged")).unwrap();
    eprintln!("the forger's attempts: {forged}");
    assert!(
        !forged.contains("'write': 0"),
        "the forger never wrote: {forged}"
    );
    let log = a.log();
    if answer {
        // The positive control: the same run, the user answering, goes through.
        assert!(t_result(&out, "first").contains("sink:ask"), "{out}");
        assert_eq!(a.sink.seen().0, 1);
    } else {
        assert!(
            !t_result(&out, "first").contains("sink:ask"),
            "{out}\n{forged}"
        );
        assert_eq!(a.sink.seen(), (0, 0), "{forged}");
        assert!(log.contains("asked, no answer in 3s"), "{log}");
        assert_eq!(std::fs::read_to_string(&a.config).unwrap(), before);
    }
}

#[test]
fn the_sandboxed_process_cannot_answer_the_question() {
    forge_run(false);
}

#[test]
fn the_same_forger_with_the_user_answering_goes_through() {
    forge_run(true);
}

#[test]
fn without_a_terminal_the_denial_is_at_once_and_said() {
    let a = Ask::new("", |port| format!("{}echo end\n", curl("first", port)));
    let start = std::time::Instant::now();
    let o =
        a.h.sandpit_run(false)
            .args(["sh", "work.sh"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
    let took = start.elapsed();
    let out = common::stdout(&o);
    let err = common::stderr(&o);
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(!t_result(&out, "first").contains("sink:ask"), "{out}");
    assert_eq!(a.sink.seen(), (0, 0));
    // Well inside the 30 s a question would wait.
    assert!(took.as_secs() < 20, "took {took:?}");
    assert!(
        err.contains("asking about blocked hosts: off (stdin or stdout is not a terminal"),
        "{err}"
    );
    assert!(!err.contains(&a.question()), "{err}");
}

#[test]
fn a_project_cannot_turn_asking_on() {
    let h = TestHome::new();
    config(&h, "ask_on_blocked_host = false\n");
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "# project\n[network]\nask_on_blocked_host = true\n",
    );
    let o = h.sandpit().args(["config"]).output().unwrap();
    let err = common::stderr(&o);
    assert!(!o.status.success(), "{}", common::text(&o));
    assert!(err.contains(".sandpit.toml:3"), "{err}");
    assert!(
        err.contains("may turn network.ask_on_blocked_host off, never on"),
        "{err}"
    );
    // Off from a project is fine, and `sandpit config` names where it came from.
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[network]\nask_on_blocked_host = false\n",
    );
    let o = h.sandpit().args(["config"]).output().unwrap();
    let out = common::stdout(&o);
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(out.contains("ask_on_blocked_host = false  # "), "{out}");
    assert!(out.contains(".sandpit.toml:2"), "{out}");
}

#[test]
fn log_follow_shows_a_denial_while_the_run_goes_on_and_ends_with_it() {
    let a = Ask::new("", |port| {
        format!(
            "echo ready\n{}while [ ! -e go ]; do sleep 0.05; done\necho end\n",
            curl("first", port)
        )
    });
    let h = &a.h;
    let mut cmd = h.sandpit_run(false);
    cmd.args(["sh", "work.sh"]).stdin(Stdio::null());
    let (mut run, mut lines) = common::spawn_ready(cmd, Stdio::null());
    let mut follow = h
        .sandpit()
        .args(["log", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    let (mut out, s) = (follow.stdout.take().unwrap(), seen.clone());
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            s.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let denial = format!("deny  connect ask.test:{}", a.sink.port);
    assert!(
        common::wait_for(60, || seen.lock().unwrap().contains(&denial)),
        "no denial followed: {}",
        seen.lock().unwrap()
    );
    // Still running (it waits for `go`), and the follower too.
    assert!(run.try_wait().unwrap().is_none());
    assert!(follow.try_wait().unwrap().is_none());
    // A live change of the run's rules is followed too.
    let o = h.sandpit().args(["allow", "later.test"]).output().unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(
        common::wait_for(60, || seen
            .lock()
            .unwrap()
            .contains("policy  allow later.test")),
        "no live change followed: {}",
        seen.lock().unwrap()
    );
    assert!(!seen.lock().unwrap().contains("\x1b["), "colour on a pipe");
    h.write(&h.workspace().join("go"), "");
    for l in lines.by_ref() {
        if l.unwrap() == "end" {
            break;
        }
    }
    assert!(run.wait().unwrap().success());
    assert!(
        common::wait_for(30, || follow.try_wait().unwrap().is_some()),
        "`sandpit log --follow` did not end with the run: {}",
        seen.lock().unwrap()
    );
    assert!(follow.wait().unwrap().success());
    assert!(seen.lock().unwrap().contains("ended (exit 0)"));
}

/// A run whose questions go unanswered stops asking: after three, a connection to a
/// host missing from network.allow is refused at once, and the log says why.
#[test]
fn three_unanswered_questions_end_the_asking() {
    let a = Ask::curls("ask_timeout = 1\n", &["try1", "try2", "try3", "try4"]);
    let t = a.run();
    t.must_show("end", 120);
    let out = t.finish();
    assert_eq!(
        out.matches(&a.question()).count(),
        3,
        "asked other than three times:\n{out}"
    );
    assert_eq!(a.sink.seen(), (0, 0), "the listener was reached: {out}");
    let log = a.log();
    assert!(
        log.contains("3 questions of this run went unanswered, so it asks no more"),
        "{log}"
    );
}
