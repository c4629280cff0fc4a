//! What the command prints reaches the user's terminal through this filter
//! ([`Filter::feed`]): a streaming parser of the terminal's own grammar (ECMA-48 as
//! xterm reads it) that lets text and harmless controls through and drops the
//! sequences that act outside the command's screen.
//!
//! Dropped: every DCS, SOS, PM and APC string (DECRQSS, XTGETTCAP, sixel, kitty
//! graphics, tmux passthrough…); every OSC but titles (0, 1, 2), hyperlinks (8),
//! colour *queries* (4, 10, 11, 12 whose every value is `?`) and colour resets
//! (104, 110, 111, 112, 117, 119) — so no clipboard write or read (OSC 52), no
//! colour change, no notification; window operations other than the reports whose
//! answers are numbers (`CSI 20 t` and `CSI 21 t` answer with the title the
//! command set, typed back as if by the user; `CSI 1..9 t` move, resize and
//! iconify the window); DECRQCRA (`CSI … * y`, a checksum of text the command
//! chose); S8C1T (`ESC SP G`: answers in 8-bit form); ENQ (the answerback) and
//! NUL. Passed: text, the other C0 controls, the
//! other escape and control sequences (cursor motion, SGR, modes, the cursor
//! position and device attribute reports, whose answers hold no byte the command
//! chose).
//!
//! 8-bit controls count as their 7-bit forms and leave as them: a raw byte
//! 0x80–0x9F that is not part of a UTF-8 character, and the code points
//! U+0080–U+009F written in UTF-8 (which xterm-like terminals in UTF-8 mode treat
//! as C1 controls). Other text is decoded as UTF-8 and passed byte for byte when
//! well formed; an ill-formed sequence leaves as U+FFFD, so what reaches the
//! terminal is always UTF-8 without C1 controls.
//!
//! A sequence or string leaves whole or not at all: it is held until it ends (so a
//! read that ends inside one leaves the terminal outside it), and one longer than
//! [`MAX_SEQ`] or [`MAX_STRING`] bytes is dropped whole. The terminal is thus never
//! inside a sequence the command opened when the launcher writes to it.
//!
//! The filter also tracks the modes the command set ([`Modes`]): a question
//! resets them before it is drawn and restores them after (`crate::console`).
#![forbid(unsafe_code)]

/// Longest control sequence (ESC or CSI, parameters included) passed on.
pub const MAX_SEQ: usize = 96;
/// Longest OSC string passed on (a title or a hyperlink).
pub const MAX_STRING: usize = 4096;

/// The parser's state between reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Ground,
    /// After ESC (and intermediates, held in `seq`).
    Escape,
    /// Inside `ESC [` (held in `seq`).
    Csi,
    /// A CSI too long, or malformed: dropped up to its final byte.
    CsiIgnore,
    /// Inside an OSC string (payload held in `string`).
    Osc,
    /// An ESC inside an OSC string: `\` ends it, anything else aborts it.
    OscEsc,
    /// An OSC string too long: dropped up to its terminator.
    OscIgnore,
    OscIgnoreEsc,
    /// Inside a DCS, SOS, PM or APC string: dropped up to ST.
    Drop,
    DropEsc,
}

/// One unit of input once UTF-8 is decoded.
#[derive(Clone, Copy)]
enum Unit {
    /// A 7-bit byte.
    Ascii(u8),
    /// A C1 control (0x80–0x9F), raw or UTF-8.
    C1(u8),
    /// A well-formed UTF-8 character, U+00A0 or above (its bytes in `Utf8`).
    Char,
    /// An ill-formed UTF-8 sequence.
    Invalid,
}

/// An incremental UTF-8 decoder (the well-formed ranges of Unicode's table 3-7).
#[derive(Debug, Clone, Default)]
struct Utf8 {
    bytes: [u8; 4],
    len: u8,
    need: u8,
    /// Bounds of the next byte (only the second byte's differ from 80..=BF).
    lo: u8,
    hi: u8,
}

impl Utf8 {
    fn char(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Feed one byte; up to two units out (an ill-formed prefix, then the byte).
    fn push(&mut self, b: u8, emit: &mut impl FnMut(Unit, &Utf8)) {
        if self.need > 0 {
            if (self.lo..=self.hi).contains(&b) {
                self.bytes[usize::from(self.len)] = b;
                self.len += 1;
                self.need -= 1;
                self.lo = 0x80;
                self.hi = 0xbf;
                if self.need == 0 {
                    let c1 = self.len == 2 && self.bytes[0] == 0xc2 && self.bytes[1] < 0xa0;
                    let u = if c1 {
                        Unit::C1(self.bytes[1])
                    } else {
                        Unit::Char
                    };
                    emit(u, self);
                    self.len = 0;
                }
                return;
            }
            self.need = 0;
            self.len = 0;
            emit(Unit::Invalid, self);
        }
        let (need, lo, hi) = match b {
            0x00..=0x7f => return emit(Unit::Ascii(b), self),
            0x80..=0x9f => return emit(Unit::C1(b), self),
            0xc2..=0xdf => (1, 0x80, 0xbf),
            0xe0 => (2, 0xa0, 0xbf),
            0xe1..=0xec | 0xee..=0xef => (2, 0x80, 0xbf),
            0xed => (2, 0x80, 0x9f),
            0xf0 => (3, 0x90, 0xbf),
            0xf1..=0xf3 => (3, 0x80, 0xbf),
            0xf4 => (3, 0x80, 0x8f),
            _ => return emit(Unit::Invalid, self),
        };
        self.bytes[0] = b;
        self.len = 1;
        self.need = need;
        self.lo = lo;
        self.hi = hi;
    }
}

/// The private modes (`CSI ? N h`/`l`) tracked, with their power-on values.
const PRIVATE: &[(u16, bool)] = &[
    (1, false),    // application cursor keys
    (5, false),    // reverse video
    (6, false),    // origin mode
    (7, true),     // autowrap
    (25, true),    // cursor visible
    (47, false),   // alternate screen
    (66, false),   // application keypad
    (69, false),   // left and right margins
    (1000, false), // mouse reporting…
    (1001, false),
    (1002, false),
    (1003, false),
    (1004, false), // focus events
    (1005, false),
    (1006, false),
    (1015, false),
    (1016, false),
    (1047, false), // alternate screen
    (1049, false), // alternate screen, cursor saved
    (2004, false), // bracketed paste
];

/// What the command set of the terminal's state that a question must undo and
/// then give back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modes {
    /// One bit per entry of `PRIVATE`: on.
    private: u32,
    /// IRM (`CSI 4 h`).
    insert: bool,
    /// DECKPAM (`ESC =`).
    keypad: bool,
    /// DECSTBM (`CSI T ; B r`), when not the whole screen.
    scroll: Option<(u16, u16)>,
    /// The last designations of G0 and G1 (`ESC ( F`, `ESC ) F`), intermediates
    /// and final; empty for the default.
    g0: [u8; 3],
    g1: [u8; 3],
    /// SO (G1 in use) or a locking shift.
    shifted: bool,
    /// The kitty keyboard protocol's flags (the top of its stack).
    kitty: u16,
    kitty_depth: u8,
    /// xterm's modifyOtherKeys (`CSI > 4 ; N m`).
    other_keys: u8,
}

impl Default for Modes {
    fn default() -> Modes {
        let mut private = 0;
        for (i, (_, on)) in PRIVATE.iter().enumerate() {
            if *on {
                private |= 1 << i;
            }
        }
        Modes {
            private,
            insert: false,
            keypad: false,
            scroll: None,
            g0: [0; 3],
            g1: [0; 3],
            shifted: false,
            kitty: 0,
            kitty_depth: 0,
            other_keys: 0,
        }
    }
}

/// Resets every state a command can leave the terminal in that could change how
/// text shows or what keys send (the question's own text and its answer), short
/// of the alternate screen, left first: see [`Modes::reset`].
const RESET: &[u8] = b"\x18\x1b\\\
\x1b]8;;\x1b\\\
\x1b[?1049l\x1b[?1047l\x1b[?47l\
\x1b[0m\x1b(B\x1b)B\x1b*B\x1b+B\x0f\
\x1b[4l\x1b[20l\x1b[?5l\x1b[?6l\x1b[?7h\x1b[?25h\x1b[?69l\x1b[r\x1b[?2026l\
\x1b[?1l\x1b>\x1b[?66l\x1b[?2004l\
\x1b[?1000l\x1b[?1001l\x1b[?1002l\x1b[?1003l\x1b[?1004l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1016l\
\x1b[=0;1u\x1b[>4;0m\x1b[0 q\
\x1b]104\x1b\\\x1b]110\x1b\\\x1b]111\x1b\\\x1b]112\x1b\\\
\x1b[9999;1H";

impl Modes {
    fn index(mode: u16) -> Option<usize> {
        PRIVATE.iter().position(|(m, _)| *m == mode)
    }

    /// Whether private mode `mode` is on (false for one not tracked).
    pub fn private(&self, mode: u16) -> bool {
        Modes::index(mode).is_some_and(|i| self.private & (1 << i) != 0)
    }

    fn set_private(&mut self, mode: u16, on: bool) {
        if let Some(i) = Modes::index(mode) {
            if on {
                self.private |= 1 << i;
            } else {
                self.private &= !(1 << i);
            }
        }
    }

    /// The command drew on the alternate screen (a full-screen program).
    pub fn alternate(&self) -> bool {
        [47, 1047, 1049].iter().any(|m| self.private(*m))
    }

    /// Bytes that put the terminal back to its defaults, whatever the command set,
    /// with the cursor at the start of the bottom line of the normal screen: a
    /// question drawn next shows as written, and keys typed at it arrive as typed.
    /// Ends with CAN and ST first, though the filter never leaves a sequence open.
    pub fn reset(out: &mut Vec<u8>) {
        out.extend_from_slice(RESET);
    }

    /// Bytes that give back the modes the command had set (after [`Modes::reset`]
    /// and a question). The screen's content is the command's to redraw.
    pub fn restore(&self, out: &mut Vec<u8>) {
        let default = Modes::default();
        // The alternate screen first: the others apply to it.
        for m in [1049u16, 1047, 47] {
            if self.private(m) {
                push_private(out, m, true);
                break;
            }
        }
        for (m, _) in PRIVATE {
            if [47, 1047, 1049].contains(m) {
                continue;
            }
            if self.private(*m) != default.private(*m) {
                push_private(out, *m, self.private(*m));
            }
        }
        if self.insert {
            out.extend_from_slice(b"\x1b[4h");
        }
        if self.keypad {
            out.extend_from_slice(b"\x1b=");
        }
        if let Some((t, b)) = self.scroll {
            push_num(out, b"\x1b[", t);
            push_num(out, b";", b);
            out.push(b'r');
        }
        for (lead, g) in [(b'(', self.g0), (b')', self.g1)] {
            if g[0] != 0 {
                out.extend_from_slice(&[0x1b, lead]);
                out.extend(g.iter().copied().filter(|b| *b != 0));
            }
        }
        if self.shifted {
            out.push(0x0e);
        }
        if self.kitty != 0 {
            push_num(out, b"\x1b[=", self.kitty);
            out.extend_from_slice(b";1u");
        }
        if self.other_keys != 0 {
            push_num(out, b"\x1b[>4;", u16::from(self.other_keys));
            out.push(b'm');
        }
    }
}

fn push_private(out: &mut Vec<u8>, mode: u16, on: bool) {
    push_num(out, b"\x1b[?", mode);
    out.push(if on { b'h' } else { b'l' });
}

fn push_num(out: &mut Vec<u8>, before: &[u8], n: u16) {
    out.extend_from_slice(before);
    let mut digits = [0u8; 5];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The filter between the command's pty and the user's terminal: see the
/// module's comment. Its buffers are allocated once.
#[derive(Debug, Clone)]
pub struct Filter {
    st: St,
    utf8: Utf8,
    /// The control sequence held (`ESC …` or `ESC [ …`, 7-bit).
    seq: Vec<u8>,
    /// The OSC string held (its payload), and whether it ended with BEL.
    string: Vec<u8>,
    modes: Modes,
}

impl Default for Filter {
    fn default() -> Filter {
        Filter::new()
    }
}

impl Filter {
    pub fn new() -> Filter {
        Filter {
            st: St::Ground,
            utf8: Utf8::default(),
            seq: Vec::with_capacity(MAX_SEQ),
            string: Vec::with_capacity(256),
            modes: Modes::default(),
        }
    }

    /// The modes the command has set so far.
    pub fn modes(&self) -> &Modes {
        &self.modes
    }

    /// Filter `input` (the next bytes the command wrote), appending what may reach
    /// the terminal to `out`. A sequence `input` ends inside stays held for the
    /// next call.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut utf8 = std::mem::take(&mut self.utf8);
        for &b in input {
            utf8.push(b, &mut |u, d| self.unit(u, d.char(), out));
        }
        self.utf8 = utf8;
    }

    fn unit(&mut self, u: Unit, ch: &[u8], out: &mut Vec<u8>) {
        match self.st {
            St::Ground => self.ground(u, ch, out),
            St::Escape => self.escape(u, ch, out),
            St::Csi | St::CsiIgnore => self.csi(u, ch, out),
            St::Osc | St::OscIgnore => self.osc(u, ch, out),
            St::OscEsc | St::OscIgnoreEsc => self.osc_esc(u, ch, out),
            St::Drop => self.drop_string(u, ch, out),
            St::DropEsc => match u {
                Unit::Ascii(b'\\') => self.st = St::Ground,
                _ => {
                    // ESC not followed by `\` ends the string and starts anew.
                    self.st = St::Escape;
                    self.seq.clear();
                    self.seq.push(0x1b);
                    self.unit(u, ch, out);
                }
            },
        }
    }

    fn ground(&mut self, u: Unit, ch: &[u8], out: &mut Vec<u8>) {
        match u {
            Unit::Ascii(0x1b) => {
                self.st = St::Escape;
                self.seq.clear();
                self.seq.push(0x1b);
            }
            Unit::Ascii(b) => self.control_or_text(b, out),
            Unit::C1(c) => self.c1(c, out),
            Unit::Char => out.extend_from_slice(ch),
            Unit::Invalid => out.extend_from_slice("\u{fffd}".as_bytes()),
        }
    }

    /// A 7-bit byte other than ESC, in the ground state or inside a sequence
    /// (where the terminal acts on controls as it goes).
    fn control_or_text(&mut self, b: u8, out: &mut Vec<u8>) {
        match b {
            // NUL is padding; ENQ asks for the answerback.
            0x00 | 0x05 => {}
            0x0e => {
                self.modes.shifted = true;
                out.push(b);
            }
            0x0f => {
                self.modes.shifted = false;
                out.push(b);
            }
            _ => out.push(b),
        }
    }

    /// A C1 control: as ESC and its 7-bit final.
    fn c1(&mut self, c: u8, out: &mut Vec<u8>) {
        self.st = St::Escape;
        self.seq.clear();
        self.seq.push(0x1b);
        self.escape(Unit::Ascii(c - 0x40), &[], out);
    }

    fn escape(&mut self, u: Unit, ch: &[u8], out: &mut Vec<u8>) {
        let b = match u {
            Unit::Ascii(b) => b,
            Unit::C1(c) => return self.c1(c, out),
            // Not part of any sequence: the sequence is dropped, the text shows.
            Unit::Char | Unit::Invalid => {
                self.st = St::Ground;
                return self.ground(u, ch, out);
            }
        };
        let intermediates = self.seq.len() > 1;
        match b {
            0x1b => {
                self.seq.truncate(1);
            }
            0x18 | 0x1a => self.st = St::Ground,
            0x7f => {}
            0x00..=0x1f => self.control_or_text(b, out),
            0x20..=0x2f => {
                if self.seq.len() < 4 {
                    self.seq.push(b);
                } else {
                    // Too many intermediates: dropped up to the final byte.
                    self.seq.truncate(1);
                    self.seq.push(0x7f);
                }
            }
            b'[' if !intermediates => {
                self.st = St::Csi;
                self.seq.push(b);
            }
            b']' if !intermediates => {
                self.st = St::Osc;
                self.string.clear();
            }
            b'P' | b'X' | b'^' | b'_' if !intermediates => self.st = St::Drop,
            // A lone ST ends nothing the terminal has open.
            b'\\' if !intermediates => self.st = St::Ground,
            0x30..=0x7e => {
                self.st = St::Ground;
                if self.seq.contains(&0x7f) {
                    return;
                }
                self.seq.push(b);
                // S8C1T: the terminal's answers would lose their ESC.
                if self.seq[1..] == *b" G" {
                    return;
                }
                self.esc_dispatch();
                out.extend_from_slice(&self.seq);
            }
            _ => {}
        }
    }

    /// Track what an escape sequence (in `seq`) changes.
    fn esc_dispatch(&mut self) {
        match self.seq[1..] {
            [b'='] => self.modes.keypad = true,
            [b'>'] => self.modes.keypad = false,
            [b'c'] => self.modes = Modes::default(),
            [b'n'] | [b'o'] => self.modes.shifted = true,
            [lead @ (b'(' | b')'), ref rest @ ..] if rest.len() <= 3 => {
                let mut g = [0u8; 3];
                g[..rest.len()].copy_from_slice(rest);
                if rest == b"B" {
                    g = [0; 3];
                }
                if lead == b'(' {
                    self.modes.g0 = g;
                } else {
                    self.modes.g1 = g;
                }
            }
            _ => {}
        }
    }

    fn csi(&mut self, u: Unit, ch: &[u8], out: &mut Vec<u8>) {
        let b = match u {
            Unit::Ascii(b) => b,
            Unit::C1(c) => return self.c1(c, out),
            Unit::Char | Unit::Invalid => {
                self.st = St::Ground;
                return self.ground(u, ch, out);
            }
        };
        match b {
            0x1b => {
                self.st = St::Escape;
                self.seq.clear();
                self.seq.push(0x1b);
            }
            0x18 | 0x1a => self.st = St::Ground,
            0x7f => {}
            0x00..=0x1f => self.control_or_text(b, out),
            0x20..=0x3f => {
                // Parameters after intermediates make the sequence malformed.
                let after = self.seq.iter().skip(2).any(|c| (0x20..=0x2f).contains(c));
                if self.seq.len() >= MAX_SEQ || (after && b >= 0x30) {
                    self.st = St::CsiIgnore;
                } else {
                    self.seq.push(b);
                }
            }
            0x40..=0x7e => {
                let keep = self.st == St::Csi;
                self.st = St::Ground;
                if keep {
                    self.seq.push(b);
                    if self.csi_allowed() {
                        self.csi_dispatch();
                        out.extend_from_slice(&self.seq);
                    }
                }
            }
            _ => {}
        }
    }

    /// The held CSI's parts: private marker, numeric parameters (first up to 16),
    /// intermediates, final.
    fn csi_parts(seq: &[u8]) -> (u8, [u16; 16], usize, &[u8], u8) {
        let body = &seq[2..seq.len() - 1];
        let fin = seq[seq.len() - 1];
        let (marker, body) = match body.first() {
            Some(&m @ (b'<' | b'=' | b'>' | b'?')) => (m, &body[1..]),
            _ => (0, body),
        };
        let split = body
            .iter()
            .position(|c| (0x20..=0x2f).contains(c))
            .unwrap_or(body.len());
        let (params, inter) = body.split_at(split);
        let mut nums = [0u16; 16];
        let mut n = 0;
        for p in params.split(|c| *c == b';') {
            if n == nums.len() {
                break;
            }
            let mut v: u16 = 0;
            for d in p.iter().take_while(|d| d.is_ascii_digit()) {
                v = v.saturating_mul(10).saturating_add(u16::from(d - b'0'));
            }
            nums[n] = v;
            n += 1;
        }
        (marker, nums, n, inter, fin)
    }

    fn csi_allowed(&self) -> bool {
        let (marker, nums, _, inter, fin) = Filter::csi_parts(&self.seq);
        match (marker, inter, fin) {
            // Window operations: only the reports of numbers and the title stack.
            (0, [], b't') => matches!(nums[0], 11 | 13 | 14 | 15 | 16 | 18 | 19 | 22 | 23),
            // DECRQCRA: a checksum of text the command wrote.
            (_, [b'*'], b'y') => false,
            _ => true,
        }
    }

    /// Track what a CSI (in `seq`, allowed) changes.
    fn csi_dispatch(&mut self) {
        let (marker, nums, n, inter, fin) = Filter::csi_parts(&self.seq);
        let m = &mut self.modes;
        match (marker, inter, fin) {
            (b'?', [], b'h' | b'l') => {
                for &p in &nums[..n] {
                    m.set_private(p, fin == b'h');
                }
            }
            (0, [], b'h' | b'l') if nums[..n].contains(&4) => m.insert = fin == b'h',
            (0, [], b'r') => {
                let (t, b) = (nums[0], if n > 1 { nums[1] } else { 0 });
                m.scroll = (t > 1 || b > 0).then_some((t.max(1), b));
            }
            // DECSTR, a soft reset.
            (0, [b'!'], b'p') => {
                let alt = m.alternate();
                let saved = m.private;
                *m = Modes::default();
                if alt {
                    // The soft reset keeps the screen in use, and mouse modes.
                    let keep = [47u16, 1047, 1049, 1000, 1002, 1003, 1004, 1006, 2004];
                    for k in keep {
                        if let Some(i) = Modes::index(k) {
                            m.private = (m.private & !(1 << i)) | (saved & (1 << i));
                        }
                    }
                }
            }
            (b'>', [], b'u') => {
                m.kitty = nums[0];
                m.kitty_depth = m.kitty_depth.saturating_add(1);
            }
            (b'<', [], b'u') => {
                let pops = nums[0].max(1);
                m.kitty_depth = m.kitty_depth.saturating_sub(pops.min(255) as u8);
                // The entry below is not tracked: assume the default.
                m.kitty = 0;
            }
            (b'=', [], b'u') => {
                let mode = if n > 1 { nums[1] } else { 1 };
                m.kitty = match mode {
                    2 => m.kitty | nums[0],
                    3 => m.kitty & !nums[0],
                    _ => nums[0],
                };
            }
            (b'>', [], b'm') if nums[0] == 4 => {
                m.other_keys = if n > 1 { nums[1].min(255) as u8 } else { 0 };
            }
            _ => {}
        }
    }

    fn osc(&mut self, u: Unit, ch: &[u8], out: &mut Vec<u8>) {
        let ignoring = self.st == St::OscIgnore;
        match u {
            Unit::Ascii(0x07) => {
                self.st = St::Ground;
                if !ignoring {
                    self.osc_end(b"\x07", out);
                }
            }
            Unit::Ascii(0x1b) => {
                self.st = if ignoring {
                    St::OscIgnoreEsc
                } else {
                    St::OscEsc
                }
            }
            Unit::Ascii(0x18 | 0x1a) => self.st = St::Ground,
            // Other controls inside a string are ignored by the terminal.
            Unit::Ascii(0x00..=0x1f | 0x7f) => {}
            Unit::C1(0x9c) => {
                self.st = St::Ground;
                if !ignoring {
                    self.osc_end(b"\x1b\\", out);
                }
            }
            // Any other C1 ends the string unsent and acts.
            Unit::C1(c) => {
                self.st = St::Ground;
                self.c1(c, out);
            }
            Unit::Ascii(b) => self.osc_push(&[b]),
            Unit::Char => self.osc_push(ch),
            Unit::Invalid => self.osc_push("\u{fffd}".as_bytes()),
        }
    }

    fn osc_push(&mut self, bytes: &[u8]) {
        if self.st == St::OscIgnore {
            return;
        }
        if self.string.len() + bytes.len() > MAX_STRING {
            self.st = St::OscIgnore;
            self.string.clear();
        } else {
            self.string.extend_from_slice(bytes);
        }
    }

    fn osc_esc(&mut self, u: Unit, ch: &[u8], out: &mut Vec<u8>) {
        let ignoring = self.st == St::OscIgnoreEsc;
        self.st = St::Ground;
        match u {
            Unit::Ascii(b'\\') => {
                if !ignoring {
                    self.osc_end(b"\x1b\\", out);
                }
            }
            // ESC and anything else: the string is dropped, the sequence starts.
            _ => {
                self.st = St::Escape;
                self.seq.clear();
                self.seq.push(0x1b);
                self.escape(u, ch, out);
            }
        }
    }

    /// An OSC string ended with `end`: passed on when it is one the module's
    /// comment lists.
    fn osc_end(&mut self, end: &[u8], out: &mut Vec<u8>) {
        if osc_allowed(&self.string) {
            out.extend_from_slice(b"\x1b]");
            out.extend_from_slice(&self.string);
            out.extend_from_slice(end);
        }
        self.string.clear();
    }

    fn drop_string(&mut self, u: Unit, _ch: &[u8], _out: &mut Vec<u8>) {
        match u {
            Unit::Ascii(0x1b) => self.st = St::DropEsc,
            Unit::Ascii(0x18 | 0x1a) | Unit::C1(0x9c) => self.st = St::Ground,
            _ => {}
        }
    }
}

/// Whether an OSC string with this payload may reach the terminal.
pub fn osc_allowed(payload: &[u8]) -> bool {
    let digits = payload.iter().take_while(|b| b.is_ascii_digit()).count();
    let (num, rest) = payload.split_at(digits);
    if !(rest.is_empty() || rest[0] == b';') {
        return false;
    }
    let values = || rest.split(|b| *b == b';').skip(1);
    match num {
        // Titles and hyperlinks.
        b"0" | b"1" | b"2" | b"8" => !rest.is_empty(),
        // Colour queries: every value `?` (OSC 10 may query 11 and 12 after it).
        b"10" | b"11" | b"12" => !rest.is_empty() && values().all(|v| v == b"?"),
        // Palette queries: pairs of index and `?`.
        b"4" => {
            let v: Vec<&[u8]> = values().collect();
            !v.is_empty()
                && v.len().is_multiple_of(2)
                && v.chunks(2).all(|p| {
                    !p[0].is_empty() && p[0].iter().all(u8::is_ascii_digit) && p[1] == b"?"
                })
        }
        // Colour resets.
        b"104" | b"110" | b"111" | b"112" | b"117" | b"119" => {
            values().all(|v| v.iter().all(u8::is_ascii_digit))
        }
        _ => false,
    }
}

/// `input` filtered by a new [`Filter`] (for tests and one-shot uses).
pub fn filtered(input: &[u8]) -> Vec<u8> {
    let mut f = Filter::new();
    let mut out = Vec::with_capacity(input.len());
    f.feed(input, &mut out);
    out
}

/// Whether `out` holds a sequence the filter never lets through: an 8-bit
/// control (raw or as UTF-8), a DCS, SOS, PM or APC introducer, an OSC other than
/// those it passes. For the fuzz target and tests: true on any filter output.
pub fn clean(out: &[u8]) -> bool {
    // Every byte of 0x80–0x9F must sit inside well-formed UTF-8 that is no C1.
    let text = match std::str::from_utf8(out) {
        Ok(t) => t,
        Err(_) => return false,
    };
    if text.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)) {
        return false;
    }
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == 0x1b {
            match b.get(i + 1) {
                Some(b'P' | b'X' | b'^' | b'_') => return false,
                Some(b']') => {
                    let rest = &b[i + 2..];
                    let end = rest
                        .iter()
                        .position(|c| *c == 0x07 || *c == 0x1b)
                        .unwrap_or(rest.len());
                    if !osc_allowed(&rest[..end]) {
                        return false;
                    }
                }
                _ => {}
            }
        }
        if b[i] == 0x05 {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `input` fed in every split into two reads, and byte by byte: each gives
    /// the same output as one read.
    fn through(input: &[u8]) -> Vec<u8> {
        let whole = filtered(input);
        for at in 0..=input.len() {
            let mut f = Filter::new();
            let mut out = vec![];
            f.feed(&input[..at], &mut out);
            f.feed(&input[at..], &mut out);
            assert_eq!(out, whole, "split at {at} of {input:?}");
        }
        let mut f = Filter::new();
        let mut out = vec![];
        for b in input {
            f.feed(std::slice::from_ref(b), &mut out);
        }
        assert_eq!(out, whole, "byte by byte: {input:?}");
        assert!(clean(&whole), "{whole:?}");
        assert_eq!(filtered(&whole), whole, "not idempotent on {input:?}");
        whole
    }

    fn gone(input: &[u8], around: bool) {
        let mut s = b"before ".to_vec();
        s.extend_from_slice(input);
        s.extend_from_slice(b" after");
        let out = through(&s);
        assert_eq!(
            out,
            if around {
                b"before  after".to_vec()
            } else {
                vec![]
            },
            "{:?} -> {:?}",
            String::from_utf8_lossy(input),
            String::from_utf8_lossy(&out)
        );
    }

    fn kept(input: &[u8]) {
        assert_eq!(
            through(input),
            input,
            "{:?} changed",
            String::from_utf8_lossy(input)
        );
    }

    #[test]
    fn clipboard_and_colour_changes_are_dropped() {
        for t in [b"\x07" as &[u8], b"\x1b\\", b"\xc2\x9c", b"\x9c"] {
            for osc in [b"\x1b]" as &[u8], b"\x9d", b"\xc2\x9d"] {
                for payload in [
                    b"52;c;Y3VybCBldmlsIHwgc2gK" as &[u8],
                    b"52;c;?",
                    b"10;#ff0000",
                    b"11;rgb:0000/0000/0000",
                    b"4;1;#000000",
                    b"12;red",
                    b"7;file:///etc",
                    b"9;notify",
                    b"777;notify;a;b",
                    b"1337;File=inline=1:AAAA",
                    b"l title report",
                    b"",
                    b";",
                ] {
                    let mut s = osc.to_vec();
                    s.extend_from_slice(payload);
                    s.extend_from_slice(t);
                    gone(&s, true);
                }
            }
        }
    }

    #[test]
    fn strings_and_reports_of_chosen_bytes_are_dropped() {
        for s in [
            b"\x1bP$qm\x1b\\" as &[u8],       // DECRQSS
            b"\x1bP+q544e\x1b\\",             // XTGETTCAP
            b"\x90$q\"p\x9c",                 // DECRQSS, 8-bit
            b"\xc2\x90$q r\xc2\x9c",          // DECRQSS, C1 in UTF-8
            b"\x1bPq#0;2;0;0;0#0!10~-\x1b\\", // sixel
            b"\x1b_Gf=24;AAAA\x1b\\",         // kitty graphics (APC)
            b"\x9f APC \x9c",
            b"\x1b^ PM \x1b\\",
            b"\x9e PM \x9c",
            b"\x1bX SOS \x1b\\",
            b"\x98 SOS \x9c",
            b"\x1b[21t",
            b"\x1b[20t",
            b"\x9b21t",
            b"\xc2\x9b20t",
            b"\x1b[3;0;0t",
            b"\x1b[8;100;100t",
            b"\x1b[9;1t",
            b"\x1b[1;1;1;1;1*y",
            b"\x05",
            b"\x00",
            b"\x1b G",
        ] {
            gone(s, true);
        }
    }

    #[test]
    fn allowed_sequences_pass_unchanged() {
        for s in [
            b"\x1b]0;my title\x07" as &[u8],
            b"\x1b]2;t\xc3\xa9tre\x1b\\",
            b"\x1b]8;;https://example.com/\x1b\\link\x1b]8;;\x1b\\",
            b"\x1b]10;?\x1b\\",
            b"\x1b]11;?\x07",
            b"\x1b]10;?;?\x07",
            b"\x1b]4;1;?\x07",
            b"\x1b]110\x07",
            b"\x1b]104;1\x1b\\",
            b"\x1b[6n",
            b"\x1b[c",
            b"\x1b[>c",
            b"\x1b[?u",
            b"\x1b[18t",
            b"\x1b[22;0t\x1b[23;0t",
            b"\x1b[1;31mred\x1b[0m",
            b"\x1b[?1049h\x1b[2J\x1b[H",
            b"\x1b(0lqk\x1b(B",
            b"\x1b7\x1b8\x1bM\x1b=",
            b"\x1b[?2004h\x1b[?1000;1006h",
            b"plain \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xd0\xa0\xd1\x81 text\r\n\t\x07\x08",
        ] {
            kept(s);
        }
    }

    #[test]
    fn eight_bit_controls_leave_as_seven_bit() {
        assert_eq!(through(b"\x9b1m"), b"\x1b[1m");
        assert_eq!(through(b"\xc2\x9b1m"), b"\x1b[1m");
        assert_eq!(through(b"\x9d0;t\x9c"), b"\x1b]0;t\x1b\\");
        assert_eq!(through(b"\xc2\x9d0;t\xc2\x9c"), b"\x1b]0;t\x1b\\");
        assert_eq!(through(b"\x84"), b"\x1bD");
        // A lone ST, raw or in UTF-8, ends nothing and is dropped.
        assert_eq!(through(b"a\x9cb\xc2\x9cc"), b"abc");
    }

    #[test]
    fn ill_formed_utf8_becomes_replacement_characters() {
        let r = "\u{fffd}".as_bytes();
        assert_eq!(through(b"\xff"), r);
        assert_eq!(through(b"\xc3("), [r, b"("].concat());
        assert_eq!(through(b"\xe2\x82"), b"", "held: the next read may end it");
        assert_eq!(through(b"\xe2\x82\x1b[1m"), [r, b"\x1b[1m"].concat());
        // Overlong and surrogate forms.
        assert_eq!(through(b"\xc0\x9b1m"), [r, b"\x1b[1m"].concat());
        assert_eq!(through(b"\xed\xa0\xbf"), [r, r, r].concat());
    }

    #[test]
    fn a_string_open_at_the_end_of_a_read_leaves_nothing() {
        let mut f = Filter::new();
        let mut out = vec![];
        f.feed(b"text\x1b]0;swallow", &mut out);
        assert_eq!(out, b"text");
        f.feed(b"ed\x07more", &mut out);
        assert_eq!(out, b"text\x1b]0;swallowed\x07more");
        let mut out = vec![];
        f.feed(b"\x1b]52;c;", &mut out);
        f.feed(b"YQ==\x07after", &mut out);
        assert_eq!(out, b"after");
        let mut out = vec![];
        f.feed(b"\x1bP$q", &mut out);
        f.feed(b"m\x1b\\after", &mut out);
        assert_eq!(out, b"after");
    }

    #[test]
    fn long_strings_are_dropped_whole() {
        let mut s = b"\x1b]0;".to_vec();
        s.extend(std::iter::repeat_n(b'x', MAX_STRING + 10));
        s.extend_from_slice(b"\x07after");
        assert_eq!(through(&s), b"after");
        let mut s = b"\x1b]0;".to_vec();
        s.extend(std::iter::repeat_n(b'x', MAX_STRING - 2));
        s.extend_from_slice(b"\x07");
        assert_eq!(filtered(&s), s, "at the bound");
        let mut s = b"\x1b[".to_vec();
        s.extend(std::iter::repeat_n(b'1', MAX_SEQ + 10));
        s.extend_from_slice(b"mafter");
        assert_eq!(through(&s), b"after");
    }

    #[test]
    fn an_escape_inside_a_string_ends_it_unsent() {
        assert_eq!(through(b"\x1b]0;t\x1b[1mx"), b"\x1b[1mx");
        assert_eq!(through(b"\x1bPq\x1b[1mx"), b"\x1b[1mx");
        assert_eq!(through(b"\x1b]52;c;\x18x"), b"x");
        // Controls inside a CSI act at once, as the terminal does.
        assert_eq!(through(b"\x1b[1\r\nm"), b"\r\n\x1b[1m");
    }

    #[test]
    fn modes_are_tracked_and_restored() {
        let mut f = Filter::new();
        let mut out = vec![];
        f.feed(
            b"\x1b[?1049h\x1b[?25l\x1b[?2004h\x1b[?1000;1006h\x1b[4h\x1b=\x1b[2;20r\x1b(0\x0e\x1b[>1u\x1b[?7l",
            &mut out,
        );
        let m = f.modes();
        assert!(m.alternate());
        let mut r = vec![];
        m.restore(&mut r);
        let r = String::from_utf8(r).unwrap();
        for want in [
            "\x1b[?1049h",
            "\x1b[?25l",
            "\x1b[?2004h",
            "\x1b[?1000h",
            "\x1b[?1006h",
            "\x1b[4h",
            "\x1b=",
            "\x1b[2;20r",
            "\x1b(0",
            "\x0e",
            "\x1b[=1;1u",
            "\x1b[?7l",
        ] {
            assert!(r.contains(want), "{want:?} not in {r:?}");
        }
        assert!(r.starts_with("\x1b[?1049h"), "{r:?}");
        f.feed(
            b"\x1b[?1049l\x1b[?25h\x1b[?2004l\x1b[r\x1b(B\x0f\x1bc",
            &mut out,
        );
        let mut r = vec![];
        f.modes().restore(&mut r);
        assert_eq!(r, b"", "{:?}", String::from_utf8_lossy(&r));
        assert_eq!(f.modes(), &Modes::default());
    }

    #[test]
    fn the_reset_is_clean_and_leaves_the_alternate_screen() {
        let mut r = vec![];
        Modes::reset(&mut r);
        let s = String::from_utf8(r.clone()).unwrap();
        for want in [
            "\x1b[?1049l",
            "\x1b[0m",
            "\x1b(B",
            "\x0f",
            "\x1b[?25h",
            "\x1b[r",
            "\x1b]111\x1b\\",
            // A hyperlink the command left open would make the question a link.
            "\x1b]8;;\x1b\\",
        ] {
            assert!(s.contains(want), "{want:?}");
        }
        // Past the CAN and ST it begins with, the filter passes it unchanged.
        assert_eq!(filtered(&r[3..]), r[3..].to_vec());
    }

    /// The fuzz target's invariants (fuzz/fuzz_targets/console_filter.rs) on
    /// inputs drawn from the bytes that matter, with a fixed seed.
    #[test]
    fn drawn_inputs_keep_the_invariants() {
        const PARTS: &[&[u8]] = &[
            b"\x1b",
            b"[",
            b"]",
            b"P",
            b"_",
            b"^",
            b"X",
            b"\\",
            b"\x07",
            b"\x18",
            b"\x9b",
            b"\x9c",
            b"\x9d",
            b"\x90",
            b"\xc2",
            b"\xc2\x9b",
            b"\xc2\x9c",
            b"\xe2\x82",
            b"\xac",
            b"52;c;",
            b"0;",
            b"8;;",
            b"10;?",
            b"11;#000",
            b"?",
            b";",
            b"1",
            b"21t",
            b"$q",
            b"h",
            b"l",
            b"?1049h",
            b"a",
            b"\xff",
            b"\x05",
            b"\x0e",
            b"\x0f",
            b"(0",
        ];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..3000 {
            let n = (next() % 24) as usize;
            let input: Vec<u8> = (0..n)
                .flat_map(|_| {
                    PARTS[(next() % PARTS.len() as u64) as usize]
                        .iter()
                        .copied()
                })
                .collect();
            through(&input);
        }
    }
}
