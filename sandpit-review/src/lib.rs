//! The adversary's control-socket protocol and its blocking client: what the
//! reviewer in the launcher, the PATH shims (`sandpit exec`) and the injected
//! library share, in a crate of its own so that none of them depends on another.
//!
//! The launcher reviews commands with an LLM ([the adversary]); the sandboxed side
//! asks it over a unix socket and waits. This module is std-only (no async, no
//! network crates) so that `sandpit exec` and the injected library can both use it.
//!
//! Module-level dependencies: std and `sandpit-policy` (for [`review_exec`], which
//! reads the state directory and timeout from the policy snapshot).
//!
//! The protocol, one request per connection, one line each way:
//!
//! ```text
//! client → launcher:  EXEC <cwd> <arg0> <arg1> …\n     (a command about to run)
//!               or:   WRITE <cwd> <path>\n             (a write outside the workspace)
//! launcher → client:  ALLOW <reason>\n    or    DENY <reason>\n
//! ```
//!
//! Every request field is percent-encoded (any byte outside `A–Z a–z 0–9 - . _ ~ / : , = + @`
//! becomes `%XX`), so fields never contain a space or a newline and any byte survives.
//! The reason is UTF-8 text with control characters replaced by spaces. Anything
//! else on the wire is an error, and every error means the command does not run.
//!
//! [the adversary]: ../../sandpit/adversary/index.html
use sandpit_policy::{Policy, ReviewEvent};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Component, Path};
use std::time::Duration;

/// The variable `sandpit run` sets to the control socket's path. It is only a
/// pointer: when the policy says an adversary reviews commands and this is missing,
/// or names a socket outside sandpit's state directory, the command is denied.
pub const SOCKET_VAR: &str = "SANDPIT_ADVERSARY_SOCKET";

/// Longest request line the launcher accepts (bytes, newline included).
pub const MAX_REQUEST: usize = 256 * 1024;
/// Longest answer line a client accepts.
pub const MAX_ANSWER: usize = 8 * 1024;

/// How much longer than `adversary.timeout_ms` a client waits for the launcher, which
/// itself answers within `timeout_ms`.
pub const CLIENT_SLACK: Duration = Duration::from_secs(2);

/// The launcher's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allow(String),
    Deny(String),
}

/// Why asking failed. Every variant means: do not run the command.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("{SOCKET_VAR} is not set, but the policy says an adversary reviews commands")]
    NoSocket,
    #[error("the adversary's control socket {0} is not inside sandpit's state directory")]
    Untrusted(String),
    #[error("cannot reach the adversary's control socket {path}: {source}")]
    Connect {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("talking to the adversary's control socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("the adversary's control socket sent a malformed answer")]
    Malformed,
    #[error("the request is too long for the adversary's control socket")]
    TooLong,
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// `Exec` (`argv` is the command) or `Write` (`argv` is the one path).
    pub event: ReviewEvent,
    pub cwd: Vec<u8>,
    pub argv: Vec<Vec<u8>>,
}

fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~/:,=+@".contains(&b)
}

fn encode_field(out: &mut Vec<u8>, field: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    if field.is_empty() {
        // An empty field must still be a field.
        out.extend_from_slice(b"%");
        return;
    }
    for &b in field {
        if plain(b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

fn decode_field(f: &[u8]) -> Option<Vec<u8>> {
    if f == b"%" {
        return Some(Vec::new());
    }
    let mut out = Vec::with_capacity(f.len());
    let mut i = 0;
    while i < f.len() {
        match f[i] {
            b'%' => {
                let hi = hex(*f.get(i + 1)?)?;
                let lo = hex(*f.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b if plain(b) => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The request line for `argv` run in `cwd` (newline included).
pub fn encode_request(cwd: &[u8], argv: &[&[u8]]) -> Vec<u8> {
    encode_event_request(ReviewEvent::Exec, cwd, argv)
}

/// The request line for an event: `Exec` with the command, `Write` with the path
/// (`Network` is reviewed inside the launcher and has no line: it is sent as EXEC).
pub fn encode_event_request(event: ReviewEvent, cwd: &[u8], argv: &[&[u8]]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(16 + cwd.len() + argv.iter().map(|a| a.len() + 1).sum::<usize>());
    out.extend_from_slice(match event {
        ReviewEvent::Write => b"WRITE ",
        ReviewEvent::Exec | ReviewEvent::Network => b"EXEC ",
    });
    encode_field(&mut out, cwd);
    for a in argv {
        out.push(b' ');
        encode_field(&mut out, a);
    }
    out.push(b'\n');
    out
}

/// Parse a request line (with or without its newline). `None`: malformed.
pub fn decode_request(line: &[u8]) -> Option<ExecRequest> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut fields = line.split(|b| *b == b' ');
    let event = match fields.next()? {
        b"EXEC" => ReviewEvent::Exec,
        b"WRITE" => ReviewEvent::Write,
        _ => return None,
    };
    let cwd = decode_field(fields.next()?)?;
    let argv = fields.map(decode_field).collect::<Option<Vec<_>>>()?;
    if argv.is_empty() || (event == ReviewEvent::Write && argv.len() != 1) {
        return None;
    }
    Some(ExecRequest { event, cwd, argv })
}

/// Text made safe for one line of a terminal: control characters become spaces.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The answer line (newline included).
pub fn encode_answer(a: &Answer) -> Vec<u8> {
    let (word, reason) = match a {
        Answer::Allow(r) => ("ALLOW", r),
        Answer::Deny(r) => ("DENY", r),
    };
    let mut reason = one_line(reason);
    if reason.len() > MAX_ANSWER - 16 {
        let mut cut = MAX_ANSWER - 16;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
    }
    format!("{word} {reason}\n").into_bytes()
}

/// Parse an answer line. `None`: malformed.
pub fn decode_answer(line: &[u8]) -> Option<Answer> {
    let line = line.strip_suffix(b"\n")?;
    let text = std::str::from_utf8(line).ok()?;
    if text.chars().any(char::is_control) {
        return None;
    }
    let (word, reason) = text.split_once(' ')?;
    match word {
        "ALLOW" => Some(Answer::Allow(reason.to_string())),
        "DENY" => Some(Answer::Deny(reason.to_string())),
        _ => None,
    }
}

/// Whether `socket` names a path inside `state_dir` (lexically: absolute, no `..`).
/// The state directory is written only by the launcher, so a socket there is the
/// launcher's; a path anywhere else could be a stand-in the sandboxed side made.
pub fn socket_trusted(socket: &Path, state_dir: &Path) -> bool {
    socket.is_absolute()
        && state_dir.is_absolute()
        && !socket
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        && socket.starts_with(state_dir)
        && socket != state_dir
}

/// Ask the launcher about `argv` in `cwd` and wait at most `wait` for the answer.
/// Blocking, std-only. Any failure is an error: the caller must not run the command.
pub fn ask(socket: &Path, cwd: &[u8], argv: &[&[u8]], wait: Duration) -> Result<Answer, AskError> {
    ask_event(socket, ReviewEvent::Exec, cwd, argv, wait)
}

/// [`ask`] for any event with a request line (exec, write).
pub fn ask_event(
    socket: &Path,
    event: ReviewEvent,
    cwd: &[u8],
    argv: &[&[u8]],
    wait: Duration,
) -> Result<Answer, AskError> {
    let req = encode_event_request(event, cwd, argv);
    if req.len() > MAX_REQUEST {
        return Err(AskError::TooLong);
    }
    let mut s = UnixStream::connect(socket).map_err(|source| AskError::Connect {
        path: socket.display().to_string(),
        source,
    })?;
    s.set_write_timeout(Some(wait))?;
    s.set_read_timeout(Some(wait))?;
    s.write_all(&req)?;
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    let deadline = std::time::Instant::now() + wait;
    while !buf.ends_with(b"\n") {
        if buf.len() > MAX_ANSWER {
            return Err(AskError::Malformed);
        }
        if std::time::Instant::now() >= deadline {
            return Err(AskError::Io(std::io::ErrorKind::TimedOut.into()));
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err(AskError::Malformed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(AskError::Io(e)),
        }
    }
    decode_answer(&buf).ok_or(AskError::Malformed)
}

/// Whether the policy sends commands to the adversary.
pub fn reviews_exec(policy: &Policy) -> bool {
    policy
        .adversary
        .as_ref()
        .is_some_and(|a| a.review.contains(&ReviewEvent::Exec))
}

/// The whole client side of an exec review, for `sandpit exec` and the interposer:
/// find the socket named by `socket` (the value of [`SOCKET_VAR`]), check it is
/// inside the policy's state directory, ask, and wait at most `timeout_ms` +
/// [`CLIENT_SLACK`]. `Ok(reason)`: the adversary allowed it. `Err(line)`: do not
/// run; `line` is the `sandpit: …` line for stderr. There is no path to `Ok` that
/// skips the launcher: a missing or untrusted socket, a dead launcher or a garbled
/// answer all deny, whatever `on_error` says (that covers the reviewer's failures,
/// which the launcher decides).
pub fn review_exec(
    policy: &Policy,
    socket: Option<&std::ffi::OsStr>,
    cwd: &[u8],
    argv: &[&[u8]],
) -> Result<String, String> {
    review_event(policy, socket, ReviewEvent::Exec, cwd, argv)
}

/// [`review_exec`] for a write to `path` outside the workspace that the rules
/// allowed (`adversary.review = ["write"]`; the interposer's file hooks ask). Same
/// guarantees: every failure to get an ALLOW from the launcher is `Err`.
pub fn review_write(
    policy: &Policy,
    socket: Option<&std::ffi::OsStr>,
    cwd: &[u8],
    path: &[u8],
) -> Result<String, String> {
    review_event(policy, socket, ReviewEvent::Write, cwd, &[path])
}

fn review_event(
    policy: &Policy,
    socket: Option<&std::ffi::OsStr>,
    event: ReviewEvent,
    cwd: &[u8],
    argv: &[&[u8]],
) -> Result<String, String> {
    let wait = policy
        .adversary
        .as_ref()
        .map_or(Duration::ZERO, |a| Duration::from_millis(a.timeout_ms))
        + CLIENT_SLACK;
    let shown = argv
        .iter()
        .map(|a| String::from_utf8_lossy(a))
        .collect::<Vec<_>>()
        .join(" ");
    let fail = |e: AskError| {
        match event {
        ReviewEvent::Write => format!(
            "sandpit: the write to {shown} needs the adversary's review and {e}; not written (fail closed)"
        ),
        _ => format!(
            "sandpit: `{shown}` needs the adversary's review and {e}; not run (fail closed)"
        ),
    }
    };
    let socket = socket
        .filter(|s| !s.is_empty())
        .ok_or(AskError::NoSocket)
        .map_err(fail)?;
    let socket = Path::new(socket);
    if !socket_trusted(socket, &policy.context.state_dir) {
        return Err(fail(AskError::Untrusted(socket.display().to_string())));
    }
    match ask_event(socket, event, cwd, argv, wait).map_err(fail)? {
        Answer::Allow(r) => Ok(r),
        Answer::Deny(r) => Err(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trip_keeps_every_byte() {
        let argv: Vec<&[u8]> = vec![b"sh", b"-c", b"echo 'a  b'\n%41\t", b"", b"\xff\x00"];
        let line = encode_request(b"/work/my dir", &argv);
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        let r = decode_request(&line).unwrap();
        assert_eq!(r.event, ReviewEvent::Exec);
        assert_eq!(r.cwd, b"/work/my dir");
        assert_eq!(r.argv, argv.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
    }

    #[test]
    fn write_requests_carry_one_path() {
        let line = encode_event_request(ReviewEvent::Write, b"/w", &[b"/home/u/.cache/x y"]);
        assert!(line.starts_with(b"WRITE "));
        let r = decode_request(&line).unwrap();
        assert_eq!(r.event, ReviewEvent::Write);
        assert_eq!(r.argv, vec![b"/home/u/.cache/x y".to_vec()]);
        assert!(decode_request(b"WRITE /w /a /b\n").is_none());
        assert!(decode_request(b"WRITE /w\n").is_none());
    }

    #[test]
    fn malformed_requests_are_rejected() {
        for bad in [
            &b"EXEC /tmp\n"[..],
            b"ALLOW /tmp ls\n",
            b"EXEC /tmp l s%\n",
            b"EXEC /tmp l%G0\n",
            b"EXEC /tmp a\tb\n",
            b"",
        ] {
            assert!(
                decode_request(bad).is_none(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn answers_are_strict_and_one_line() {
        let a = Answer::Deny("no\nexfiltration\x1b[31m".into());
        let line = encode_answer(&a);
        assert_eq!(line, b"DENY no exfiltration [31m\n");
        assert_eq!(
            decode_answer(&line),
            Some(Answer::Deny("no exfiltration [31m".into()))
        );
        assert_eq!(
            decode_answer(b"ALLOW ok\n"),
            Some(Answer::Allow("ok".into()))
        );
        for bad in [
            &b"ALLOW ok"[..],
            b"allow ok\n",
            b"ALLOWok\n",
            b"MAYBE x\n",
            b"DENY a\rb\n",
        ] {
            assert!(decode_answer(bad).is_none());
        }
    }

    #[test]
    fn only_sockets_inside_the_state_dir_are_trusted() {
        let st = Path::new("/home/u/.sandpit");
        assert!(socket_trusted(
            Path::new("/home/u/.sandpit/run/1/adversary.sock"),
            st
        ));
        assert!(!socket_trusted(Path::new("/tmp/evil.sock"), st));
        assert!(!socket_trusted(Path::new("/home/u/.sandpit/../x.sock"), st));
        assert!(!socket_trusted(Path::new("/home/u/.sandpitx/a.sock"), st));
        assert!(!socket_trusted(Path::new("run/a.sock"), st));
        assert!(!socket_trusted(st, st));
    }

    #[test]
    fn a_missing_socket_is_an_error() {
        let e = ask(
            Path::new("/nonexistent/sandpit.sock"),
            b"/",
            &[b"ls"],
            Duration::from_millis(100),
        );
        assert!(matches!(e, Err(AskError::Connect { .. })));
    }
}
