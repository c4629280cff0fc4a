#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `network.ask_on_blocked_host`: a connection to a host missing from
//! `network.allow` waits while the launcher asks on the user's terminal, here a
//! real pty the test holds the master of (the launcher's stdin and stdout are its
//! slave, as in a terminal window). The sandboxed command runs as the unprivileged
//! test user; `ask.test` maps to a loopback listener through sandpit's own
//! resolver. Also `sandpit log --follow`, and what the relay lets reach the
//! terminal (src/console/filter.rs): no sequence that acts outside the command's
//! screen, however it is written or split, and a full-screen program's screen back
//! after a question (a vt100 model of the terminal).
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
    /// `sandpit run -- sh work.sh` with stdin, stdout and stderr on a new pty of
    /// 24 rows and 80 columns.
    fn run(h: &TestHome) -> Terminal {
        let (master, slave, _) = common::user_terminal();
        set_size(&master, ROWS, COLS);
        let mut cmd = h.sandpit_run(false);
        cmd.env("TERM", "xterm-256color")
            .args(["sh", "work.sh"])
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
    /// Every byte the terminal got so far.
    fn bytes(&self) -> Vec<u8> {
        self.seen.lock().unwrap().clone()
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
        self.answer_line(&[key], echo);
    }
    /// [`Terminal::answer`] with a line (the host name, for "always").
    fn answer_line(&mut self, line: &[u8], echo: &str) {
        let at = self.text().rfind(END).expect("no question up") + END.len();
        let typed = [line, b"\r"].concat();
        for _ in 0..60 {
            self.keys(&typed);
            if common::wait_for(1, || self.text()[at..].contains(echo)) {
                return;
            }
        }
        panic!(
            "the question never took {:?}:\n{}",
            String::from_utf8_lossy(line),
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

/// What a question ends with.
const END: &str = "Then Enter: ";
const ROWS: u16 = 24;
const COLS: u16 = 80;

/// Give the terminal `rows` and `cols`.
fn set_size(master: &std::fs::File, rows: u16, cols: u16) {
    use std::os::fd::AsRawFd;
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the pointer, which outlives the call.
    let r = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
    assert_eq!(r, 0, "TIOCSWINSZ");
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
        .contains("[o]nce, this [r]un, [d]eny, or type ask.test for always? (denied in 30s)"));
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
    let mut t = a.run();
    t.must_show(&a.question(), 60);
    t.answer_line(b"ask.test", "always");
    t.must_show("end", 60);
    let out = t.finish();
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

/// Inside the sandbox: every kind of sequence that acts outside the command's
/// screen, 7-bit, 8-bit (raw C1 bytes), as C1 code points in UTF-8, and split
/// across two writes; each holds `CANARY` where it has a payload. Then the
/// sequences that pass, each marked `ALLOWED`. `end` last.
const EMIT_PY: &str = r#"
import os, time
def out(b):
    os.write(1, b)
def split(b):
    h = len(b) // 2
    os.write(1, b[:h]); time.sleep(0.05); os.write(1, b[h:])
osc = [b"\x1b]", b"\x9d", b"\xc2\x9d"]
st = [b"\x07", b"\x1b\\", b"\x9c", b"\xc2\x9c"]
dcs = [b"\x1bP", b"\x90", b"\xc2\x90", b"\x1b_", b"\x9f", b"\x1b^", b"\x9e", b"\x1bX", b"\x98"]
csi = [b"\x1b[", b"\x9b", b"\xc2\x9b"]
bad = []
for o in osc:
    for t in st:
        for p in [b"52;c;Y3VybCBDQU5BUlk=CANARY", b"52;c;?", b"10;#CANARY", b"11;rgb:CANARY", b"4;1;CANARY", b"9;CANARY"]:
            bad.append(o + p + t)
for d in dcs:
    for t in [b"\x1b\\", b"\x9c", b"\xc2\x9c"]:
        bad.append(d + b"$qCANARY" + t)
for c in csi:
    bad += [c + b"21t", c + b"20t", c + b"3;1;1t"]
for b in bad:
    out(b)
    split(b)
out(b"\x1b]0;ALLOWED-TITLE\x07")
out(b"\x1b]8;;http://x.test/ALLOWED-LINK\x1b\\link\x1b]8;;\x1b\\")
out(b"\x1b]11;?\x1b\\")
out(b"\x1b[6n\x1b[c")
out("ALLOWED-TEXT \u00e9t\u00e9 \u20ac \U0001F600\r\n".encode())
out(b"end\r\n")
"#;

/// What the forbidden sequences of [`EMIT_PY`] would leave in the terminal's
/// bytes had they come through, in either form.
fn forbidden(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut found = vec![];
    for (what, needle) in [
        ("a payload", "CANARY"),
        ("OSC 52", "\x1b]52"),
        ("OSC 10", "\x1b]10;#"),
        ("DCS", "\x1bP"),
        ("APC", "\x1b_"),
        ("PM", "\x1b^"),
        ("SOS", "\x1bX"),
        ("a title report", "\x1b[21t"),
        ("an icon label report", "\x1b[20t"),
        ("a window move", "\x1b[3;1;1t"),
        ("a C1 control in UTF-8", "\u{9b}"),
        ("a C1 control in UTF-8", "\u{9d}"),
        ("a C1 control in UTF-8", "\u{90}"),
    ] {
        if text.contains(needle) {
            found.push(what.to_string());
        }
    }
    // Raw C1 bytes are ill-formed UTF-8 (the filter's output never is).
    if std::str::from_utf8(bytes).is_err() {
        found.push("ill-formed UTF-8".to_string());
    }
    for b in [0x90u8, 0x98, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f] {
        // A raw C1 byte: not in valid UTF-8, which has none of these as a lead.
        if bytes
            .windows(2)
            .any(|w| w[1] == b && !(0x80..0xf5).contains(&w[0]))
        {
            found.push(format!("a raw C1 byte {b:#x}"));
        }
    }
    found
}

#[test]
fn the_relay_lets_through_no_sequence_that_acts_outside_the_screen() {
    let h = TestHome::new();
    config(&h, "");
    h.write(&h.workspace().join("emit.py"), EMIT_PY);
    h.write(&h.workspace().join("work.sh"), "python3 emit.py\n");
    // Bare, the probe writes every one of them.
    let bare = std::process::Command::new("python3")
        .arg(h.workspace().join("emit.py"))
        .output()
        .unwrap();
    assert!(bare.status.success());
    let found = forbidden(&bare.stdout);
    assert!(
        found.contains(&"a payload".to_string())
            && found.contains(&"OSC 52".to_string())
            && found.contains(&"DCS".to_string())
            && found.contains(&"a title report".to_string())
            && found.iter().any(|f| f.starts_with("a raw C1 byte")),
        "the probe does not write what it should: {found:?}"
    );
    let t = Terminal::run(&h);
    t.must_show("end", 60);
    let bytes = t.bytes();
    let out = t.finish();
    let found = forbidden(&bytes);
    assert!(found.is_empty(), "reached the terminal: {found:?}\n{out:?}");
    // The positive control: what passes arrives unchanged.
    for allowed in [
        "\x1b]0;ALLOWED-TITLE\x07",
        "\x1b]8;;http://x.test/ALLOWED-LINK\x1b\\link\x1b]8;;\x1b\\",
        "\x1b]11;?\x1b\\",
        "\x1b[6n\x1b[c",
        "ALLOWED-TEXT \u{e9}t\u{e9} \u{20ac} \u{1F600}",
    ] {
        assert!(
            out.contains(allowed),
            "{allowed:?} did not arrive:\n{out:?}"
        );
    }
}

/// Inside the sandbox, just before its connection is asked about: default colours
/// changed, the line-drawing character set and hidden text on, a question of its
/// own that offers `[a]lways`, and a clipboard write left open; once the
/// connection is decided, the rest of the write.
fn forged_script(port: u16) -> String {
    format!(
        "echo ready\n\
         printf '\\033]10;#000000\\007\\033]11;#000000\\007\\033(0\\033[8m'\n\
         printf 'sandpit: /usr/bin/curl (pid 1) wants ask.test:{port} (not in network.allow). [o]nce, this [r]un, [a]lways, [d]eny? A letter, then Enter: '\n\
         printf '\\033]52;c;'\n\
         {}printf 'CANARY-OPEN\\007'\n\
         echo end\n",
        curl("first", port)
    )
}

fn forged_run(line: &[u8]) -> (Ask, String) {
    let a = Ask::new("ask_timeout = 5\n", forged_script);
    let mut t = a.run();
    // The forged question names the connection too: the real one offers the name.
    t.must_show("or type ask.test for always", 60);
    if line == b"ask.test" {
        t.answer_line(line, "always");
    } else {
        // Typed at the question up, once the keys count (past the first moments,
        // which drop them), again and again until it ends (its answer follows it).
        let at = t.text().rfind(END).expect("no question up") + END.len();
        while !t.text()[at..].contains('\n') {
            t.keys(&[line, b"\r"].concat());
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    t.must_show("end", 60);
    let bytes = t.bytes();
    t.finish();
    // The question as a terminal shows it: plain text on the screen's last line,
    // in the default colours, past every state the command set.
    let at = find(&bytes, b"\x18\x1b\\").expect("no reset before the question");
    let shown = find(&bytes[at..], END.as_bytes()).expect("no question") + at + END.len();
    let mut vt = vt100::Parser::new(ROWS.try_into().unwrap(), COLS.try_into().unwrap(), 0);
    vt.process(&bytes[..shown]);
    let screen = vt.screen();
    assert!(!screen.alternate_screen());
    let row = screen
        .rows(0, COLS)
        .position(|r| r.contains("or type ask.test"))
        .unwrap_or_else(|| panic!("the question is not on the screen:\n{}", screen.contents()));
    for col in 0..COLS {
        let c = screen.cell(row as u16, col).unwrap();
        assert_eq!(c.fgcolor(), vt100::Color::Default, "column {col}");
        assert_eq!(c.bgcolor(), vt100::Color::Default, "column {col}");
        assert!(!c.inverse(), "column {col}");
    }
    let before = &bytes[..shown];
    let text = String::from_utf8_lossy(before);
    // The character set the command chose is undone before the question's text.
    let g0 = text.rfind("\x1b(0").unwrap_or(0);
    assert!(text.rfind("\x1b(B").is_some_and(|b| b > g0), "{text:?}");
    let hidden = text.rfind("\x1b[8m").unwrap_or(0);
    assert!(
        text.rfind("\x1b[0m").is_some_and(|r| r > hidden),
        "{text:?}"
    );
    let found = forbidden(&bytes);
    assert!(found.is_empty(), "reached the terminal: {found:?}");
    assert!(!text.contains("\x1b]10;#"), "a colour change passed");
    (a, String::from_utf8_lossy(&bytes).into_owned())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn a_forged_question_answered_with_a_changes_no_config() {
    let (a, out) = forged_run(b"a");
    let cfg = std::fs::read_to_string(&a.config).unwrap();
    assert!(!cfg.contains("allowed when asked"), "{cfg}");
    assert!(!cfg.contains(&format!("ask.test:{}", a.sink.port)), "{cfg}");
    assert_eq!(a.sink.seen(), (0, 0), "{out:?}");
    assert!(a.log().contains("asked, no answer in 5s"));
}

#[test]
fn the_same_question_answered_with_the_host_name_writes_the_config() {
    let (a, out) = forged_run(b"ask.test");
    let cfg = std::fs::read_to_string(&a.config).unwrap();
    assert!(
        cfg.contains(&format!("\"ask.test:{}\"", a.sink.port)),
        "{cfg}"
    );
    // The connection's output went into the string the command left open.
    assert_eq!(a.sink.seen().0, 1, "{out:?}");
}

/// Inside the sandbox: a full-screen curses program on the alternate screen, which
/// redraws when its size changes (as agents' interfaces do), and starts a
/// connection that is asked about; it ends when the workspace holds `quit`.
fn tui_script(port: u16) -> String {
    format!(
        r#"
import curses, os, subprocess
def main(scr):
    curses.curs_set(0)
    curses.start_color()
    curses.init_pair(1, curses.COLOR_YELLOW, curses.COLOR_BLUE)
    def draw():
        scr.erase()
        h, w = scr.getmaxyx()
        scr.addstr(0, 0, "TUI top line", curses.color_pair(1) | curses.A_BOLD)
        scr.addstr(h // 2, 4, "the middle of the screen")
        scr.addstr(h - 1, 0, "TUI bottom line")
        scr.refresh()
    draw()
    p = subprocess.Popen(["curl", "-sS", "--max-time", "60", "http://ask.test:{port}/"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scr.timeout(50)
    while not (os.path.exists("quit") and p.poll() is not None):
        if scr.getch() == curses.KEY_RESIZE:
            curses.update_lines_cols()
            scr.clear()
            draw()
curses.wrapper(main)
print("end")
"#
    )
}

#[test]
fn a_full_screen_program_gets_its_screen_back_after_a_question() {
    let a = Ask::new("", |_| "python3 tui.py\n".to_string());
    a.h.write(&a.h.workspace().join("tui.py"), &tui_script(a.sink.port));
    let mut t = a.run();
    t.must_show(&a.question(), 60);
    let bytes = t.bytes();
    let at = find(&bytes, b"\x18\x1b\\").expect("no reset before the question");
    let model = |b: &[u8]| {
        let mut vt = vt100::Parser::new(ROWS.try_into().unwrap(), COLS.try_into().unwrap(), 0);
        vt.process(b);
        vt
    };
    let before = model(&bytes[..at]);
    assert!(
        before.screen().contents().contains("TUI top line") && before.screen().alternate_screen(),
        "the program had not drawn before the question:\n{}",
        before.screen().contents()
    );
    // While the question is up it shows on the normal screen.
    assert!(!model(&bytes).screen().alternate_screen());
    t.answer(b'r', "this run");
    let same = common::wait_for(30, || {
        let now = model(&t.bytes());
        now.screen().contents_formatted() == before.screen().contents_formatted()
            && now.screen().alternate_screen()
            && now.screen().hide_cursor() == before.screen().hide_cursor()
    });
    assert!(
        same,
        "the screen after the question is not the one before:\nbefore:\n{}\nafter:\n{}",
        before.screen().contents(),
        model(&t.bytes()).screen().contents()
    );
    a.h.write(&a.h.workspace().join("quit"), "");
    t.must_show("end", 60);
    t.finish();
    assert_eq!(a.sink.seen().0, 1, "the connection did not go through");
}
