//! The user's terminal while a command runs on a pty the launcher relays
//! (`sandbox::linux::supervise`'s relay), shared with whoever asks the user a
//! question (`network.ask_on_blocked_host`, `control::Asker`).
//!
//! The command never holds the user's terminal: it has a pty of its own, whose
//! master only the launcher reads and writes. While a question is up the relay
//! holds the command's output (its writes wait in the pty, then block) and hands
//! the user's keystrokes to the question instead of the pty, so nothing the
//! sandboxed program writes (to its `/dev/tty`, or pushes into its own input with
//! `TIOCSTI`) can answer it or draw over it.
//!
//! Nor can the user answer by accident. Keys typed in the first [`GRACE`] after the
//! question shows were meant for the command and are dropped, and an answer is a
//! line of exactly one offered letter ended by Enter: text typed or pasted on (a
//! sentence the agent prompted for, "please add…") answers nothing. Ctrl-C, Ctrl-D
//! and Escape deny at once. Before the question, the terminal gets CAN, ST and an
//! attribute reset, so an escape sequence or string the command left open (hidden
//! text, a title string swallowing what follows) cannot hide or fake it.
#![forbid(unsafe_code)]
use std::io::Write;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The relayed terminal: see the module's comment.
#[derive(Default)]
pub struct Console {
    state: Mutex<State>,
    changed: Condvar,
    /// Held for a whole question: one at a time.
    turn: Mutex<()>,
}

#[derive(Default)]
struct State {
    /// A relay copies the command's pty to the user's terminal.
    attached: bool,
    /// A question is up: keystrokes are its answer, the command's output waits.
    asking: bool,
    /// The keys that answer the question up.
    keys: Vec<u8>,
    /// The answer, once typed.
    answer: Option<u8>,
    /// When the question up was shown: keys before `shown + GRACE` are dropped.
    shown: Option<Instant>,
    /// The line typed since: one offered letter so far, or `Garbled` (anything
    /// else, until Enter or a backspace starts it again).
    line: Line,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Line {
    #[default]
    Empty,
    Letter(u8),
    Garbled,
}

/// Keys typed this soon after a question shows were meant for the command.
pub const GRACE: Duration = Duration::from_millis(400);

/// Ends any escape sequence (CAN) or string (ST) the command left open and resets
/// colours and attributes, so the question shows as written.
const RESET: &str = "\x18\x1b\\\x1b[0m";

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Console(..)")
    }
}

/// What a question ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// One of the keys offered (lower case).
    Key(u8),
    /// No answer in time.
    Timeout,
    /// No terminal to ask on (no relay, or it ended).
    NoTerminal,
}

impl Console {
    pub fn new() -> Console {
        Console::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(e) => e.into_inner(),
        }
    }

    /// A relay now copies the command's pty to the user's terminal.
    pub fn attach(&self) {
        self.lock().attached = true;
        self.changed.notify_all();
    }

    /// The relay stopped: a question up ends unanswered.
    pub fn detach(&self) {
        self.lock().attached = false;
        self.changed.notify_all();
    }

    pub fn attached(&self) -> bool {
        self.lock().attached
    }

    /// The relay read `bytes` from the user's terminal: true when they go on to the
    /// command, false when a question is up and took them. An offered letter alone
    /// on a line, ended by Enter, answers it; Ctrl-C, Ctrl-D and Escape answer
    /// "deny" when the question offers `d`; keys in the first [`GRACE`] and any
    /// other line are dropped (see the module's comment).
    pub fn keystrokes(&self, bytes: &[u8]) -> bool {
        let mut s = self.lock();
        if !s.asking {
            return true;
        }
        if s.answer.is_some() {
            return false;
        }
        if s.keys.contains(&b'd') && bytes.iter().any(|b| matches!(b, 0x03 | 0x04 | 0x1b)) {
            s.answer = Some(b'd');
            self.changed.notify_all();
            return false;
        }
        if s.shown.is_some_and(|t| t.elapsed() < GRACE) {
            return false;
        }
        for &b in bytes {
            match b {
                b'\r' | b'\n' => match std::mem::take(&mut s.line) {
                    Line::Letter(k) => {
                        s.answer = Some(k);
                        break;
                    }
                    _ => continue,
                },
                0x7f | 0x08 => s.line = Line::Empty,
                b => {
                    let k = b.to_ascii_lowercase();
                    s.line = match s.line {
                        Line::Empty if s.keys.contains(&k) => Line::Letter(k),
                        _ => Line::Garbled,
                    };
                }
            }
        }
        if s.answer.is_some() {
            self.changed.notify_all();
        }
        false
    }

    #[cfg(test)]
    fn answered(&self) -> Option<u8> {
        self.lock().answer
    }

    /// Run `f` (the relay writing the command's output to the terminal) once no
    /// question is up; questions wait for it to return.
    pub fn output<R>(&self, f: impl FnOnce() -> R) -> R {
        let mut s = self.lock();
        while s.asking {
            s = match self.changed.wait(s) {
                Ok(g) => g,
                Err(e) => e.into_inner(),
            };
        }
        let r = f();
        drop(s);
        r
    }

    /// Ask `question` on the user's terminal (its own line) and wait up to `timeout`
    /// for one of `keys`; `echo` says what the answer was, on the same line. One
    /// question at a time: a second waits for the first to end, and its timeout
    /// starts when it is shown. `before` runs once this question's turn has come
    /// and may answer it without asking (an earlier answer covers it).
    pub fn ask<T>(
        &self,
        before: impl FnOnce() -> Option<T>,
        question: &str,
        keys: &[u8],
        timeout: Duration,
        echo: impl Fn(Reply) -> String,
    ) -> Result<Reply, T> {
        let _turn = match self.turn.lock() {
            Ok(g) => g,
            Err(e) => e.into_inner(),
        };
        if let Some(t) = before() {
            return Err(t);
        }
        let mut s = self.lock();
        if !s.attached {
            return Ok(Reply::NoTerminal);
        }
        s.asking = true;
        s.answer = None;
        s.line = Line::Empty;
        s.keys = keys.iter().map(u8::to_ascii_lowercase).collect();
        // The terminal is in raw mode: "\r\n" ends a line. A line of its own, past
        // whatever the command left on the current one, in plain text.
        write_out(&format!("{RESET}\r\n{question} "));
        s.shown = Some(Instant::now());
        let end = Instant::now() + timeout;
        let reply = loop {
            if let Some(k) = s.answer {
                break Reply::Key(k);
            }
            if !s.attached {
                break Reply::NoTerminal;
            }
            let now = Instant::now();
            if now >= end {
                break Reply::Timeout;
            }
            s = match self.changed.wait_timeout(s, end - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        };
        write_out(&format!("{}\r\n", echo(reply)));
        s.asking = false;
        s.answer = None;
        s.shown = None;
        s.line = Line::Empty;
        s.keys.clear();
        drop(s);
        self.changed.notify_all();
        Ok(reply)
    }
}

fn write_out(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn keystrokes_answer_only_while_asking() {
        let c = Arc::new(Console::new());
        assert!(c.keystrokes(b"r"), "no question: keys go to the command");
        let none = c.ask(
            || None::<()>,
            "q?",
            b"ord",
            Duration::from_secs(5),
            |_| String::new(),
        );
        assert_eq!(none, Ok(Reply::NoTerminal));
        c.attach();
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            c2.ask(
                || None::<()>,
                "q?",
                b"ord",
                Duration::from_secs(20),
                |_| String::new(),
            )
        });
        // The question takes the keys once it is up. Keys in its first moments
        // were meant for the command: dropped, however they look.
        while c.keystrokes(b"") {
            std::thread::yield_now();
        }
        assert!(!c.keystrokes(b"d\r"));
        assert_eq!(c.answered(), None, "answered in the grace");
        // Waiting out the grace is the condition under test.
        std::thread::sleep(GRACE);
        // A line that is not one offered letter answers nothing: typed or pasted
        // text ("please add"), a letter among others, one not offered.
        assert!(!c.keystrokes(b"please add\r"));
        assert!(!c.keystrokes(b"xR\r"));
        assert!(!c.keystrokes(b"a\r"));
        assert!(!c.keystrokes(b"o"));
        assert!(!c.keystrokes(b"\x7f"));
        assert!(!c.keystrokes(b"R"));
        assert_eq!(
            c.answered(),
            None,
            "answered by a line that was not one letter"
        );
        assert!(!c.keystrokes(b"\r"));
        assert_eq!(t.join().unwrap(), Ok(Reply::Key(b'r')));
        assert!(c.keystrokes(b"r"));
        let r = c.ask(
            || None::<()>,
            "q?",
            b"ord",
            Duration::from_millis(50),
            |_| String::new(),
        );
        assert_eq!(r, Ok(Reply::Timeout));
        // Ctrl-C denies at once, grace or not.
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            c2.ask(
                || None::<()>,
                "q?",
                b"ord",
                Duration::from_secs(20),
                |_| String::new(),
            )
        });
        while c.keystrokes(b"") {
            std::thread::yield_now();
        }
        assert!(!c.keystrokes(b"\x03"));
        assert_eq!(t.join().unwrap(), Ok(Reply::Key(b'd')));
        assert_eq!(
            c.ask(
                || Some(7),
                "q?",
                b"d",
                Duration::from_secs(1),
                |_| String::new()
            ),
            Err(7)
        );
    }
}
