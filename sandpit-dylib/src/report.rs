//! Denial lines on stderr (one per distinct denial, rate-limited) and the audit
//! channel. Formatting happens in a stack buffer: no allocation, no locks.
use std::fmt::{self, Write};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A fixed-capacity `fmt::Write` sink; output past the end is cut.
pub struct Line {
    buf: [u8; 1024],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Self::new()
    }
}

impl Line {
    pub const fn new() -> Line {
        Line {
            buf: [0; 1024],
            len: 0,
        }
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    pub fn bytes(&mut self, b: &[u8]) {
        let n = b.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&b[..n]);
        self.len += n;
    }
    /// Bytes shown printable: control characters escaped so a hostile file name
    /// cannot forge terminal output.
    pub fn shown(&mut self, b: &[u8]) {
        for &c in b {
            if c.is_ascii_control() {
                let _ = write!(self, "\\x{c:02x}");
            } else {
                self.bytes(&[c]);
            }
        }
    }
    /// A path, with the home directory shown as `~`.
    pub fn path(&mut self, p: &[u8], home: &[u8]) {
        if home.len() > 1 && crate::decide::under(p, home) {
            self.bytes(b"~");
            self.shown(&p[home.len()..]);
        } else {
            self.shown(p);
        }
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.bytes(s.as_bytes());
        Ok(())
    }
}

/// Write straight to fd 2 with the raw `write` (never buffered, never hooked).
pub fn raw_stderr(b: &[u8]) {
    let mut off = 0;
    while off < b.len() {
        // SAFETY: the pointer/length pair is within `b`.
        let n = unsafe { libc::write(2, b[off..].as_ptr().cast(), b.len() - off) };
        if n <= 0 {
            return;
        }
        off += n as usize;
    }
}

const SLOTS: usize = 64;
static SEEN: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static PRINTED: AtomicU32 = AtomicU32::new(0);
/// After this many distinct lines a process prints no more (the audit log has all).
const MAX_LINES: u32 = 200;

fn fnv(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &c in b {
        h ^= u64::from(c);
        h = h.wrapping_mul(0x100000001b3);
    }
    h | 1
}

/// True the first time this exact line is seen in this process (best effort: a
/// small open-addressed table of hashes).
fn first_time(line: &[u8]) -> bool {
    let h = fnv(line);
    let start = (h as usize) % SLOTS;
    for i in 0..SLOTS {
        let slot = &SEEN[(start + i) % SLOTS];
        match slot.compare_exchange(0, h, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(v) if v == h => return false,
            Err(_) => {}
        }
    }
    // Table full: print only while under the global cap.
    true
}

/// Emit a finished denial line (adds the newline) to stderr and the audit channel.
pub fn emit(line: &mut Line) {
    crate::net::audit::send(line.as_bytes());
    to_stderr(line);
}

/// The stderr half of [`emit`] (policy denials reach the audit socket structured,
/// from `Engine`).
fn to_stderr(line: &mut Line) {
    if first_time(line.as_bytes()) && PRINTED.fetch_add(1, Ordering::Relaxed) < MAX_LINES {
        line.bytes(b"\n");
        raw_stderr(line.as_bytes());
    }
}

/// A policy denial: the verdict's line, as `decide` worded it.
pub fn denied(d: &crate::decide::Denied) {
    let mut l = Line::new();
    l.shown(d.0.as_bytes());
    to_stderr(&mut l);
}

/// A lookup of `name` that failed because the policy refuses the name: said once
/// per process and name, so the program's own "could not resolve" has a reason.
pub fn lookup_refused(name: &[u8], d: &crate::decide::Denied) {
    let mut l = Line::new();
    l.bytes(b"sandpit: no address for ");
    l.shown(name);
    l.bytes(b": ");
    l.shown(d.0.strip_prefix("sandpit: ").unwrap_or(&d.0).as_bytes());
    to_stderr(&mut l);
}

/// A denial that no single rule made (network mode, UDP, internal failure).
pub fn other(msg: fmt::Arguments<'_>) {
    let mut l = Line::new();
    let _ = l.write_fmt(msg);
    emit(&mut l);
}
