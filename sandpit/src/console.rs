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
}

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
    /// command, false when a question is up and took them (a key it offers, in
    /// either case, answers it; Ctrl-C, Ctrl-D and Escape answer "deny" when the
    /// question offers `d`; anything else is dropped).
    pub fn keystrokes(&self, bytes: &[u8]) -> bool {
        let mut s = self.lock();
        if !s.asking {
            return true;
        }
        if s.answer.is_none() {
            for &b in bytes {
                let k = b.to_ascii_lowercase();
                let k = match k {
                    0x03 | 0x04 | 0x1b if s.keys.contains(&b'd') => b'd',
                    k => k,
                };
                if s.keys.contains(&k) {
                    s.answer = Some(k);
                    self.changed.notify_all();
                    break;
                }
            }
        }
        false
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
        s.keys = keys.iter().map(u8::to_ascii_lowercase).collect();
        // The terminal is in raw mode: "\r\n" ends a line. A line of its own, past
        // whatever the command left on the current one.
        write_out(&format!("\r\n{question} "));
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
        // The question takes the keys once it is up; "x" is no answer.
        while c.keystrokes(b"") {
            std::thread::yield_now();
        }
        assert!(!c.keystrokes(b"xR"));
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
