//! The user's terminal while a command runs on a pty the launcher relays
//! (`sandbox::linux::supervise`'s relay), shared with whoever asks the user a
//! question (`network.ask_on_blocked_host`, `control::Asker`).
//!
//! The command never holds the user's terminal: it has a pty of its own, whose
//! master only the launcher reads and writes. What it prints reaches the terminal
//! through [`filter::Filter`] ([`Console::relay`]): no clipboard access, no string
//! the terminal would answer with bytes the command chose, no DCS/APC/PM/SOS. While
//! a question is up the relay holds the command's output (its writes wait in the
//! pty, then block) and hands the user's keystrokes to the question instead of the
//! pty, so nothing the sandboxed program writes (to its `/dev/tty`, or pushes into
//! its own input with `TIOCSTI`) can answer it or draw over it.
//!
//! Nor can the user answer by accident. Keys typed in the first [`GRACE`] after the
//! question shows were meant for the command and are dropped, and an answer is a
//! line ended by Enter that is exactly one offered answer: a letter, or a word
//! (the host name, for the answer that lasts): text typed or pasted on (a sentence
//! the agent prompted for, "please add…") answers nothing. Ctrl-C, Ctrl-D and
//! Escape deny at once. Before the question, the terminal gets CAN, ST and a reset
//! of every mode, colour and character set ([`filter::Modes::reset`]), so nothing
//! the command set (hidden text, line-drawing characters, another screen) can hide
//! or fake it; after it, the command's modes come back and the command is made
//! to redraw (the redraw hook the relay sets, [`Console::attach`]).
#![forbid(unsafe_code)]
pub mod filter;

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use filter::{Filter, Modes};

/// What the relay calls after every question: it
/// makes the command redraw (supervise.rs changes the pty's size and back).
pub type Redraw = Arc<dyn Fn() + Send + Sync>;

/// The relayed terminal: see the module's comment.
#[derive(Default)]
pub struct Console {
    state: Mutex<State>,
    changed: Condvar,
    /// Held for a whole question: one at a time.
    turn: Mutex<()>,
    /// Bytes written to the terminal for the command so far.
    relayed: AtomicU64,
}

#[derive(Default)]
struct State {
    /// A relay copies the command's pty to the user's terminal.
    attached: bool,
    /// Makes the command redraw its screen (set by the relay).
    redraw: Option<Redraw>,
    /// A question is up: keystrokes are its answer, the command's output waits.
    asking: bool,
    /// The lines that answer the question up (lower case), each with its answer.
    answers: Vec<(Vec<u8>, u8)>,
    /// The answer, once typed.
    answer: Option<u8>,
    /// When the question up was shown: keys before `shown + GRACE` are dropped.
    shown: Option<Instant>,
    /// The line typed since (lower case), or `None` once it can answer nothing
    /// (until Enter or a backspace starts it again).
    line: Option<Vec<u8>>,
    /// The command's output on its way to the terminal.
    filter: Filter,
    /// The filter's output (kept to reuse its allocation).
    out: Vec<u8>,
}

/// Keys typed this soon after a question shows were meant for the command.
pub const GRACE: Duration = Duration::from_millis(400);

/// Longest line a question reads: longer is no answer.
const MAX_LINE: usize = 300;

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Console(..)")
    }
}

/// What a question ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// One of the answers offered: its key.
    Key(u8),
    /// No answer in time.
    Timeout,
    /// No terminal to ask on (no relay, or it ended).
    NoTerminal,
}

/// `s` safe to print on a terminal: control characters (C0, DEL, C1) written as
/// `\xNN`, and the characters that reorder text (bidirectional overrides and
/// isolates) as `\u{NNNN}`, so a string the sandbox chose (a path, a host name, a
/// command) cannot move the cursor, restyle, or fake what follows. The one function
/// for this wherever sandpit prints such a string.
pub fn printable(s: &str) -> String {
    if !s.chars().any(hidden) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else if hidden(c) {
            out.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// A character [`printable`] escapes.
pub fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
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

    /// A relay now copies the command's pty to the user's terminal; `redraw`
    /// makes the command redraw its screen.
    pub fn attach(&self, redraw: Option<Redraw>) {
        let mut s = self.lock();
        s.attached = true;
        s.redraw = redraw;
        drop(s);
        self.changed.notify_all();
    }

    /// The relay stopped: a question up ends unanswered.
    pub fn detach(&self) {
        let mut s = self.lock();
        s.attached = false;
        s.redraw = None;
        drop(s);
        self.changed.notify_all();
    }

    pub fn attached(&self) -> bool {
        self.lock().attached
    }

    /// Bytes of the command's output written to the terminal so far.
    pub fn relayed(&self) -> u64 {
        self.relayed.load(Ordering::Relaxed)
    }

    /// The relay read `bytes` from the user's terminal: true when they go on to the
    /// command, false when a question is up and took them. A line that is one of
    /// the offered answers, ended by Enter, answers it; Ctrl-C, Ctrl-D and Escape
    /// answer "deny" when the question offers `d`; keys in the first [`GRACE`] and
    /// any other line are dropped (see the module's comment).
    pub fn keystrokes(&self, bytes: &[u8]) -> bool {
        let mut s = self.lock();
        if !s.asking {
            return true;
        }
        if s.answer.is_some() {
            return false;
        }
        let deny = s.answers.iter().any(|(_, k)| *k == b'd');
        if deny && bytes.iter().any(|b| matches!(b, 0x03 | 0x04 | 0x1b)) {
            s.answer = Some(b'd');
            self.changed.notify_all();
            return false;
        }
        if s.shown.is_some_and(|t| t.elapsed() < GRACE) {
            return false;
        }
        for &b in bytes {
            match b {
                b'\r' | b'\n' => {
                    let line = s.line.replace(Vec::new());
                    if let Some(line) = line.filter(|l| !l.is_empty()) {
                        if let Some((_, k)) = s.answers.iter().find(|(a, _)| *a == line) {
                            s.answer = Some(*k);
                            break;
                        }
                    }
                }
                0x7f | 0x08 => s.line = Some(Vec::new()),
                b => {
                    if let Some(l) = &mut s.line {
                        if l.len() < MAX_LINE && (0x21..0x7f).contains(&b) {
                            l.push(b.to_ascii_lowercase());
                        } else {
                            s.line = None;
                        }
                    }
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

    /// The relay read `bytes` from the command's pty: once no question is up,
    /// filter them ([`filter::Filter`]) and hand what may reach the terminal to
    /// `write` (questions wait for it to return); `write`'s verdict, true when
    /// nothing was left to write.
    pub fn relay(&self, bytes: &[u8], write: impl FnOnce(&[u8]) -> bool) -> bool {
        let mut s = self.lock();
        while s.asking {
            s = match self.changed.wait(s) {
                Ok(g) => g,
                Err(e) => e.into_inner(),
            };
        }
        let mut out = std::mem::take(&mut s.out);
        out.clear();
        s.filter.feed(bytes, &mut out);
        let ok = out.is_empty() || write(&out);
        self.relayed.fetch_add(out.len() as u64, Ordering::Relaxed);
        s.out = out;
        ok
    }

    /// Ask `question` on the user's terminal (its own line) and wait up to `timeout`
    /// for a line that is one of `answers` (each with the key it answers);
    /// `echo` says what the answer was, on the same line. One question at a time:
    /// a second waits for the first to end, and its timeout starts when it is
    /// shown. `before` runs once this question's turn has come and may answer it
    /// without asking (an earlier answer covers it).
    pub fn ask<T>(
        &self,
        before: impl FnOnce() -> Option<T>,
        question: &str,
        answers: &[(&str, u8)],
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
        s.line = Some(Vec::new());
        s.answers = answers
            .iter()
            .map(|(a, k)| (a.to_ascii_lowercase().into_bytes(), *k))
            .collect();
        // The terminal is in raw mode: "\r\n" ends a line. A line of its own at
        // the bottom of the normal screen, every mode the command set undone, in
        // plain text.
        let mut text = Vec::new();
        Modes::reset(&mut text);
        text.extend_from_slice(b"\r\n");
        text.extend_from_slice(question.as_bytes());
        text.push(b' ');
        write_out(&text);
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
        // The answer, then the command's modes back.
        let mut text = format!("{}\r\n", echo(reply)).into_bytes();
        s.filter.modes().restore(&mut text);
        write_out(&text);
        // Every command is told to redraw: a full-screen one (on the alternate
        // screen) has lost its screen, one drawing in place on the normal screen
        // (an inline interface) has lines of the question below what it drew.
        let redraw = s.redraw.clone();
        s.asking = false;
        s.answer = None;
        s.shown = None;
        s.line = None;
        s.answers.clear();
        drop(s);
        self.changed.notify_all();
        if let Some(r) = redraw {
            // On a thread of its own: the redraw waits for the command to draw.
            std::thread::spawn(move || r());
        }
        Ok(reply)
    }
}

fn write_out(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORD: &[(&str, u8)] = &[("o", b'o'), ("r", b'r'), ("d", b'd'), ("host.test", b'a')];

    #[test]
    fn keystrokes_answer_only_while_asking() {
        let c = Arc::new(Console::new());
        assert!(c.keystrokes(b"r"), "no question: keys go to the command");
        let none = c.ask(
            || None::<()>,
            "q?",
            ORD,
            Duration::from_secs(5),
            |_| String::new(),
        );
        assert_eq!(none, Ok(Reply::NoTerminal));
        c.attach(None);
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            c2.ask(
                || None::<()>,
                "q?",
                ORD,
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
        assert!(!c.keystrokes(b"host.test.\r"));
        assert!(!c.keystrokes(b"host.tes\r"));
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
            ORD,
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
                ORD,
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
                &[("d", b'd')],
                Duration::from_secs(1),
                |_| String::new()
            ),
            Err(7)
        );
        // The word answers as its key: typed whole, any case, then Enter.
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            c2.ask(
                || None::<()>,
                "q?",
                ORD,
                Duration::from_secs(20),
                |_| String::new(),
            )
        });
        while c.keystrokes(b"") {
            std::thread::yield_now();
        }
        std::thread::sleep(GRACE);
        assert!(!c.keystrokes(b"a\r"));
        assert_eq!(c.answered(), None, "a letter answered for the word");
        assert!(!c.keystrokes(b"Host.Te"));
        assert!(!c.keystrokes(b"st\r"));
        assert_eq!(t.join().unwrap(), Ok(Reply::Key(b'a')));
    }

    #[test]
    fn printable_escapes_what_moves_or_restyles() {
        assert_eq!(printable("plain été"), "plain été");
        assert_eq!(printable("a\u{1b}[31mb\n"), "a\\x1b[31mb\\x0a");
        assert_eq!(printable("\u{9b}1m\u{7f}"), "\\x9b1m\\x7f");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
    }

    #[test]
    fn relay_filters_and_holds_across_reads() {
        let c = Console::new();
        let mut seen = vec![];
        for part in [&b"a\x1b]52;c;"[..], b"Y3VybA==\x07b\x1b]0;t", b"\x07c"] {
            assert!(c.relay(part, |b| {
                seen.extend_from_slice(b);
                true
            }));
        }
        assert_eq!(seen, b"ab\x1b]0;t\x07c");
        assert_eq!(c.relayed(), seen.len() as u64);
    }
}
