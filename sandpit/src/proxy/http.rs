//! HTTP/1 request head parsing for deciding (the syntax is `httparse`'s, hyper's
//! parser), and the status that answers a request to switch protocols (pure). Strict
//! on purpose: anything a lenient server might read differently (folded lines, two
//! Host headers, control characters, userinfo) is an error, and an error is a denial.

/// Largest request head accepted.
pub const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub target: String,
    /// Minor version of HTTP/1.x.
    pub minor: u8,
    pub headers: Vec<(String, String)>,
}

/// The request target, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<'a> {
    /// `CONNECT host:port`.
    Authority(&'a str),
    /// `http://authority/path…` (absolute-form), with the scheme lowercased.
    Absolute {
        scheme: String,
        authority: &'a str,
        path: &'a str,
    },
    /// `/path…`
    Origin(&'a str),
    /// `*` (OPTIONS).
    Asterisk,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("request head larger than {MAX_HEAD} bytes")]
    TooLarge,
    #[error("malformed request line")]
    RequestLine,
    #[error("malformed header line")]
    HeaderLine,
    #[error("too many headers")]
    TooManyHeaders,
    #[error("more than one Host header")]
    DuplicateHost,
    #[error("malformed request target")]
    Target,
    #[error("unreadable message framing (Content-Length / Transfer-Encoding)")]
    Framing,
}

/// True when `buf` could be the start of an HTTP/1 request (a token then a space).
pub fn looks_like_http(buf: &[u8]) -> bool {
    let n = buf.iter().take_while(|b| b.is_ascii_uppercase()).count();
    n > 0 && n <= 16 && (buf.len() == n || buf.get(n) == Some(&b' '))
}

/// Parse the head at the start of `buf`: `Ok(None)` = need more bytes; `Ok(Some((head,
/// len)))` where `len` is the number of bytes the head takes.
///
/// The syntax is `httparse`'s (the parser hyper uses), with sandpit's stricter rules
/// on top: an upper-case method, a visible-ASCII target, HTTP/1.0 or 1.1 only, no
/// control character in a value, at most one Host header. httparse already refuses
/// folded lines, a space before the colon and more than one space between the
/// request line's parts.
pub fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, HttpError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    let end = match req.parse(buf) {
        Ok(httparse::Status::Complete(end)) => end,
        Ok(httparse::Status::Partial) => {
            if buf.len() > MAX_HEAD {
                return Err(HttpError::TooLarge);
            }
            // Reject early what can never become a request line.
            if !buf.is_empty() && !looks_like_http(&buf[..buf.len().min(17)]) {
                return Err(HttpError::RequestLine);
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::TooManyHeaders),
        Err(
            httparse::Error::HeaderName | httparse::Error::HeaderValue | httparse::Error::NewLine,
        ) if request_line_done(buf) => return Err(HttpError::HeaderLine),
        Err(_) => return Err(HttpError::RequestLine),
    };
    if end > MAX_HEAD {
        return Err(HttpError::TooLarge);
    }
    let (Some(m), Some(t), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(HttpError::RequestLine);
    };
    if !m.bytes().all(|b| b.is_ascii_uppercase())
        || !t.bytes().all(|b| b.is_ascii_graphic())
        || minor > 1
    {
        return Err(HttpError::RequestLine);
    }
    let mut headers = Vec::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        if h.value
            .iter()
            .any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f)
        {
            return Err(HttpError::HeaderLine);
        }
        let value = std::str::from_utf8(h.value).map_err(|_| HttpError::HeaderLine)?;
        headers.push((
            h.name.to_ascii_lowercase(),
            value.trim_matches([' ', '\t']).to_string(),
        ));
    }
    let head = Head {
        method: m.to_string(),
        target: t.to_string(),
        minor,
        headers,
    };
    if head.all("host").count() > 1 {
        return Err(HttpError::DuplicateHost);
    }
    Ok(Some((head, end)))
}

/// Byte offset just past the blank line ending the head (CRLF or bare LF lines).
fn find_head_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(off) = buf[i..].iter().position(|&b| b == b'\n') {
        let nl = i + off;
        let next = nl + 1;
        match buf.get(next) {
            Some(b'\n') => return Some(next + 1),
            Some(b'\r') if buf.get(next + 1) == Some(&b'\n') => return Some(next + 2),
            _ => {}
        }
        i = next;
    }
    None
}

fn split_lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

/// Whether `buf` holds a whole request line (so a parse error lies in the headers).
fn request_line_done(buf: &[u8]) -> bool {
    buf.contains(&b'\n')
}

impl Head {
    /// Every value of header `name` (lowercase).
    pub fn all<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.headers
            .iter()
            .filter(move |(n, _)| n.as_str() == name)
            .map(|(_, v)| v.as_str())
    }

    /// The single value of header `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.all(name).next()
    }

    /// The Host header (parse_head already rejected duplicates).
    pub fn host(&self) -> Option<&str> {
        self.get("host")
    }

    pub fn target(&self) -> Result<Target<'_>, HttpError> {
        let t = self.target.as_str();
        if self.method == "CONNECT" {
            return if t.contains('/') || t.contains('@') {
                Err(HttpError::Target)
            } else {
                Ok(Target::Authority(t))
            };
        }
        if t == "*" {
            return Ok(Target::Asterisk);
        }
        if t.starts_with('/') {
            return Ok(Target::Origin(t));
        }
        let (scheme, rest) = t.split_once("://").ok_or(HttpError::Target)?;
        if scheme.is_empty()
            || !scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
        {
            return Err(HttpError::Target);
        }
        let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(cut);
        if authority.is_empty() || authority.contains('@') || path.starts_with('#') {
            return Err(HttpError::Target);
        }
        Ok(Target::Absolute {
            scheme: scheme.to_ascii_lowercase(),
            authority,
            path,
        })
    }

    /// Length of the body that follows this head, when it can be known from the head
    /// alone: `Ok(Some(n))` for none or Content-Length, `Ok(None)` for chunked.
    pub fn body_len(&self) -> Result<Option<u64>, HttpError> {
        let te: Vec<&str> = self.all("transfer-encoding").collect();
        let cl: Vec<&str> = self.all("content-length").collect();
        if !te.is_empty() {
            if !cl.is_empty() || te.len() > 1 || !te[0].eq_ignore_ascii_case("chunked") {
                return Err(HttpError::Framing);
            }
            return Ok(None);
        }
        match cl.as_slice() {
            [] => Ok(Some(0)),
            [v] if !v.is_empty() && v.len() <= 18 && v.bytes().all(|b| b.is_ascii_digit()) => {
                v.parse().map(Some).map_err(|_| HttpError::Framing)
            }
            _ => Err(HttpError::Framing),
        }
    }
}

/// Follows a client's request stream (heads, Content-Length and chunked bodies) so
/// that every request head on a connection is checked before any of its bytes are
/// forwarded — not only the first one.
///
/// A protocol switch is followed only when the server agrees to it: when the first
/// request on the stream carries `Upgrade`, the client's bytes after that request are
/// held back until the caller reports the server's answer ([`RequestStream::answer`],
/// read with [`ResponseStart`]); on `101` they and the rest of the stream pass
/// unchecked, on anything else they are checked as requests. Only the first request's
/// answer can be told apart without following every response, so an `Upgrade` on a
/// later request is an ordinary request: the stream stays checked. A `CONNECT` is
/// refused: it would turn the stream into a tunnel to its own authority.
#[derive(Debug, Default)]
pub struct RequestStream {
    state: StreamState,
    head: Vec<u8>,
    /// A request head has been forwarded.
    seen_head: bool,
    switch: Switch,
    /// Client bytes after a request that asked to switch protocols, until the answer.
    held: Vec<u8>,
}

#[derive(Debug, Default)]
enum StreamState {
    #[default]
    Head,
    Body(u64),
    ChunkSize(Vec<u8>),
    ChunkData(u64),
    ChunkEnd(Vec<u8>),
    Trailer(Vec<u8>),
    /// The request that asked to switch protocols is forwarded whole; what follows is
    /// held until the server's answer is known.
    Await,
    /// The server switched protocols (`101`): no longer HTTP.
    Opaque,
}

/// Where the first request's `Upgrade` stands.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Switch {
    /// Not asked, or answered with anything but `101`.
    #[default]
    No,
    /// Asked; the server's answer is not known yet.
    Asked,
    /// Answered with `101`.
    Yes,
}

/// What a [`RequestStream`] needs to hear about the server's first response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The first request head is not complete yet.
    Unknown,
    /// The first request asked to switch protocols: report whether the server's answer
    /// to it is `101` ([`RequestStream::answer`]).
    Answer,
    /// Nothing.
    Nothing,
}

/// Most client bytes held while waiting for the answer to an `Upgrade`.
const MAX_HELD: usize = 128 * 1024;
const MAX_LINE: usize = 4096;

/// Why a request stream was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("unreadable HTTP request: {0}")]
    Http(#[from] HttpError),
    #[error("{0}")]
    Refused(String),
}

impl RequestStream {
    pub fn new() -> RequestStream {
        RequestStream::default()
    }

    /// True once the server switched protocols and the stream is no longer checked.
    pub fn is_opaque(&self) -> bool {
        matches!(self.state, StreamState::Opaque)
    }

    /// True while client bytes are held for the server's answer to an `Upgrade`: feed
    /// nothing more until [`RequestStream::answer`].
    pub fn is_waiting(&self) -> bool {
        matches!(self.state, StreamState::Await)
    }

    pub fn want(&self) -> Want {
        match (self.seen_head, self.switch) {
            (false, _) => Want::Unknown,
            (true, Switch::Asked) => Want::Answer,
            _ => Want::Nothing,
        }
    }

    /// The server's answer to the first request's `Upgrade`: `switched` when it is
    /// `101`. Held bytes are released to `out` — unchecked after a switch, otherwise
    /// checked as requests. Called with `false` before the request is sent whole, it
    /// means the answer cannot be told apart: the stream stays checked.
    pub fn answer(
        &mut self,
        switched: bool,
        out: &mut Vec<u8>,
        check: &mut dyn FnMut(&Head) -> Result<(), String>,
    ) -> Result<(), StreamError> {
        if self.switch != Switch::Asked {
            return Ok(());
        }
        self.switch = if switched { Switch::Yes } else { Switch::No };
        if !self.is_waiting() {
            return Ok(());
        }
        self.state = self.after_request();
        let held = std::mem::take(&mut self.held);
        self.feed(&held, out, check)
    }

    /// The state once a request (head and body) is forwarded whole.
    fn after_request(&self) -> StreamState {
        match self.switch {
            Switch::No => StreamState::Head,
            Switch::Asked => StreamState::Await,
            Switch::Yes => StreamState::Opaque,
        }
    }

    /// Feed client bytes. Bytes that may be forwarded are appended to `out`; each
    /// completed head is passed to `check` first. Bytes of an incomplete head are
    /// held back until it is complete, and bytes after a request that asked to switch
    /// protocols until [`RequestStream::answer`].
    pub fn feed(
        &mut self,
        data: &[u8],
        out: &mut Vec<u8>,
        check: &mut dyn FnMut(&Head) -> Result<(), String>,
    ) -> Result<(), StreamError> {
        let mut pos = 0;
        while pos < data.len() {
            let rest = &data[pos..];
            match &mut self.state {
                StreamState::Opaque => {
                    out.extend_from_slice(rest);
                    pos = data.len();
                }
                StreamState::Await => {
                    if self.held.len() + rest.len() > MAX_HELD {
                        return Err(StreamError::Refused(format!(
                            "more than {MAX_HELD} bytes sent before the server answered an Upgrade"
                        )));
                    }
                    self.held.extend_from_slice(rest);
                    pos = data.len();
                }
                StreamState::Head => {
                    let old = self.head.len();
                    let take = rest.len().min(MAX_HEAD + 4 - old.min(MAX_HEAD));
                    self.head.extend_from_slice(&rest[..take]);
                    match find_head_end(&self.head) {
                        None => {
                            pos += take;
                            if self.head.len() > MAX_HEAD {
                                return Err(HttpError::TooLarge.into());
                            }
                            // Reject what can never become a request early.
                            parse_head(&self.head)?;
                        }
                        Some(end) => {
                            pos += end - old;
                            self.head.truncate(end);
                            let (h, _) = parse_head(&self.head)?.ok_or(HttpError::RequestLine)?;
                            if h.method == "CONNECT" {
                                return Err(StreamError::Refused(format!(
                                    "CONNECT {} inside a connection: a tunnel is opened only by a CONNECT to the proxy itself",
                                    h.target
                                )));
                            }
                            check(&h).map_err(StreamError::Refused)?;
                            let body = h.body_len()?;
                            out.extend_from_slice(&self.head);
                            self.head.clear();
                            if !self.seen_head
                                && h.get("upgrade").is_some()
                                && h.all("upgrade").all(websocket_only)
                            {
                                self.switch = Switch::Asked;
                            }
                            self.seen_head = true;
                            self.state = match body {
                                Some(0) => self.after_request(),
                                Some(n) => StreamState::Body(n),
                                None => StreamState::ChunkSize(Vec::new()),
                            };
                        }
                    }
                }
                StreamState::Body(n) => {
                    let take = rest.len().min(usize::try_from(*n).unwrap_or(usize::MAX));
                    out.extend_from_slice(&rest[..take]);
                    pos += take;
                    *n -= take as u64;
                    if *n == 0 {
                        self.state = self.after_request();
                    }
                }
                StreamState::ChunkData(n) => {
                    let take = rest.len().min(usize::try_from(*n).unwrap_or(usize::MAX));
                    out.extend_from_slice(&rest[..take]);
                    pos += take;
                    *n -= take as u64;
                    if *n == 0 {
                        self.state = StreamState::ChunkEnd(Vec::new());
                    }
                }
                StreamState::ChunkSize(line)
                | StreamState::ChunkEnd(line)
                | StreamState::Trailer(line) => {
                    let nl = rest.iter().position(|&b| b == b'\n');
                    let take = nl.map_or(rest.len(), |i| i + 1);
                    line.extend_from_slice(&rest[..take]);
                    out.extend_from_slice(&rest[..take]);
                    pos += take;
                    if line.len() > MAX_LINE {
                        return Err(HttpError::Framing.into());
                    }
                    if nl.is_some() {
                        let text = line.strip_suffix(b"\n").unwrap_or(line);
                        let text = text.strip_suffix(b"\r").unwrap_or(text).to_vec();
                        self.state = match &self.state {
                            StreamState::ChunkSize(_) => match chunk_size(&text)? {
                                0 => StreamState::Trailer(Vec::new()),
                                n => StreamState::ChunkData(n),
                            },
                            StreamState::ChunkEnd(_) if text.is_empty() => {
                                StreamState::ChunkSize(Vec::new())
                            }
                            StreamState::ChunkEnd(_) => return Err(HttpError::Framing.into()),
                            _ if text.is_empty() => self.after_request(),
                            _ => StreamState::Trailer(Vec::new()),
                        };
                    }
                }
            }
        }
        Ok(())
    }
}

fn chunk_size(line: &[u8]) -> Result<u64, HttpError> {
    let hex = line.split(|&b| b == b';').next().unwrap_or(line);
    let hex = std::str::from_utf8(hex)
        .map_err(|_| HttpError::Framing)?
        .trim_matches([' ', '\t']);
    if hex.is_empty() || hex.len() > 15 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HttpError::Framing);
    }
    u64::from_str_radix(hex, 16).map_err(|_| HttpError::Framing)
}

/// Reads the start of a server's response stream for its answer to a request that
/// asked to switch protocols: interim `1xx` heads (`100 Continue`, `103 Early Hints`)
/// are skipped and the first other status decides. Only the heads are looked at; the
/// caller forwards the bytes as they come.
#[derive(Debug, Default)]
pub struct ResponseStart {
    buf: Vec<u8>,
}

impl ResponseStart {
    pub fn new() -> ResponseStart {
        ResponseStart::default()
    }

    /// Feed server bytes: `Some(true)` once the answer is `101 Switching Protocols`,
    /// `Some(false)` once it is another status or the bytes are not an HTTP/1 response,
    /// `None` while more are needed.
    pub fn feed(&mut self, data: &[u8]) -> Option<bool> {
        self.buf.extend_from_slice(data);
        loop {
            let Some(end) = find_head_end(&self.buf) else {
                let prefix = &self.buf[..self.buf.len().min(7)];
                let bad = self.buf.len() > MAX_HEAD || !b"HTTP/1.".starts_with(prefix);
                return bad.then_some(false);
            };
            match status_code(&self.buf[..end]) {
                Some(101) => return Some(true),
                Some(100..=199) => drop(self.buf.drain(..end)),
                _ => return Some(false),
            }
        }
    }
}

/// The status code of a response head (`HTTP/1.x NNN reason`).
fn status_code(head: &[u8]) -> Option<u16> {
    let line = split_lines(head).next()?;
    let rest = line.strip_prefix(b"HTTP/1.")?;
    let (minor, rest) = rest.split_first()?;
    let code = rest.strip_prefix(b" ")?;
    let (digits, reason) = code.split_at_checked(3)?;
    if !minor.is_ascii_digit()
        || !digits.iter().all(u8::is_ascii_digit)
        || !(reason.is_empty() || reason.starts_with(b" "))
    {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// An `Upgrade:` value asking for WebSocket alone. Any other protocol is not
/// followed, and the stream stays checked after it: h2c would carry HTTP/2 streams,
/// each naming its own authority, past the request check (an upstream serving many
/// hosts would route them).
fn websocket_only(v: &str) -> bool {
    v.split(',').all(|t| {
        let name = t.split('/').next().unwrap_or("");
        name.trim().eq_ignore_ascii_case("websocket")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_absolute_form_and_host() {
        let req = b"GET http://Allowed.test:8080/x?y HTTP/1.1\r\nHost: allowed.test:8080\r\nX: 1\r\n\r\nrest";
        let (h, len) = parse_head(req).unwrap().unwrap();
        assert_eq!(&req[len..], b"rest");
        assert_eq!(h.host(), Some("allowed.test:8080"));
        assert_eq!(
            h.target().unwrap(),
            Target::Absolute {
                scheme: "http".into(),
                authority: "Allowed.test:8080",
                path: "/x?y"
            }
        );
    }

    #[test]
    fn parses_connect_authority() {
        let (h, _) = parse_head(b"CONNECT a.test:443 HTTP/1.1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.target().unwrap(), Target::Authority("a.test:443"));
    }

    #[test]
    fn incomplete_then_complete() {
        let req = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        for cut in 0..req.len() {
            assert_eq!(parse_head(&req[..cut]), Ok(None), "cut {cut}");
        }
        assert!(parse_head(req).unwrap().is_some());
    }

    #[test]
    fn rejects_ambiguous_heads() {
        for req in [
            &b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
            b"GET / HTTP/1.1\r\nHo st: a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n",
            b"GET  / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/2\r\n\r\n",
            b"\x16\x03\x01",
        ] {
            assert!(
                parse_head(req).is_err(),
                "{:?}",
                String::from_utf8_lossy(req)
            );
        }
        let (h, _) = parse_head(b"GET http://u@a/ HTTP/1.1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.target().is_err());
    }

    fn hosts_seen(stream: &[u8], split: usize) -> (Vec<String>, Vec<u8>, Result<(), StreamError>) {
        let mut rs = RequestStream::new();
        let mut out = Vec::new();
        let mut hosts = Vec::new();
        let mut check = |h: &Head| {
            hosts.push(h.host().unwrap_or("").to_string());
            Ok(())
        };
        let mut r = Ok(());
        for chunk in stream.chunks(split.max(1)) {
            r = rs.feed(chunk, &mut out, &mut check);
            if r.is_err() {
                break;
            }
        }
        (hosts, out, r)
    }

    #[test]
    fn follows_every_request_on_the_stream() {
        let s = b"POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\nabc\
GET / HTTP/1.1\r\nHost: b.test\r\n\r\n\
POST /c HTTP/1.1\r\nHost: c.test\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nGET\r\n0\r\nT: 1\r\n\r\n\
GET / HTTP/1.1\r\nHost: d.test\r\nUpgrade: websocket\r\n\r\n\
GET / HTTP/1.1\r\nHost: e.test\r\n\r\n";
        for split in [1, 2, 3, 7, 64, s.len()] {
            let (hosts, out, r) = hosts_seen(s, split);
            assert_eq!(r, Ok(()));
            assert_eq!(
                hosts,
                ["a.test", "b.test", "c.test", "d.test", "e.test"],
                "split {split}: an Upgrade on a later request leaves the stream checked"
            );
            assert_eq!(out, s.to_vec(), "split {split}");
        }
    }

    #[test]
    fn holds_back_a_refused_head() {
        let s = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\nGET / HTTP/1.1\r\nHost: b.test\r\n\r\n";
        let mut rs = RequestStream::new();
        let mut out = Vec::new();
        let mut check = |h: &Head| match h.host() {
            Some("a.test") => Ok(()),
            _ => Err("no".to_string()),
        };
        assert!(rs.feed(s, &mut out, &mut check).is_err());
        assert!(!String::from_utf8_lossy(&out).contains("b.test"));
        let mut rs = RequestStream::new();
        let mut out = Vec::new();
        assert!(rs
            .feed(b"GET / HTTP/1.1\r\nHost: b.te", &mut out, &mut check)
            .is_ok());
        assert!(out.is_empty(), "an incomplete head is never forwarded");
        let bad_chunk =
            b"POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(RequestStream::new()
            .feed(bad_chunk, &mut Vec::new(), &mut check)
            .is_err());
    }

    /// Only `a.test` is allowed.
    fn only_a(h: &Head) -> Result<(), String> {
        match h.host() {
            Some("a.test") => Ok(()),
            _ => Err("no".to_string()),
        }
    }

    /// Whether `rs` refuses a request to b.test next.
    fn refuses_b(rs: &mut RequestStream) -> bool {
        rs.feed(
            b"GET / HTTP/1.1\r\nHost: b.test\r\n\r\n",
            &mut Vec::new(),
            &mut only_a,
        )
        .is_err()
    }

    const UPGRADE_THEN_B: &[u8] = b"GET /u1 HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\n\r\n\
GET /SMUGGLED HTTP/1.1\r\nHost: b.test\r\n\r\n";

    /// What follows a first request that asks to switch protocols is neither checked
    /// nor forwarded before the server's answer, at any split.
    #[test]
    fn upgrade_holds_what_follows_until_answered() {
        let first = UPGRADE_THEN_B.len() - b"GET /SMUGGLED HTTP/1.1\r\nHost: b.test\r\n\r\n".len();
        for split in [1, 2, 5, 64, UPGRADE_THEN_B.len()] {
            let (hosts, out, r) = hosts_seen(UPGRADE_THEN_B, split);
            assert_eq!(r, Ok(()), "split {split}");
            assert_eq!(hosts, ["a.test"], "split {split}");
            assert_eq!(out, UPGRADE_THEN_B[..first].to_vec(), "split {split}");
        }
    }

    #[test]
    fn the_answer_decides_whether_the_stream_stays_checked() {
        let first = UPGRADE_THEN_B.len() - b"GET /SMUGGLED HTTP/1.1\r\nHost: b.test\r\n\r\n".len();
        // Not 101: the held request is checked, and refused.
        let mut rs = RequestStream::new();
        let mut out = Vec::new();
        assert_eq!(rs.want(), Want::Unknown);
        rs.feed(UPGRADE_THEN_B, &mut out, &mut only_a).unwrap();
        assert!(rs.is_waiting());
        assert_eq!(rs.want(), Want::Answer);
        assert!(rs.answer(false, &mut out, &mut only_a).is_err());
        assert_eq!(out, UPGRADE_THEN_B[..first].to_vec());
        // Not 101, an allowed request held: checked, forwarded, and later ones too.
        let mut rs = RequestStream::new();
        let mut out = Vec::new();
        let s = b"GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\n\r\nGET /2 HTTP/1.1\r\nHost: a.test\r\n\r\n";
        rs.feed(s, &mut out, &mut only_a).unwrap();
        rs.answer(false, &mut out, &mut only_a).unwrap();
        assert_eq!(out, s.to_vec());
        assert_eq!(rs.want(), Want::Nothing);
        assert!(refuses_b(&mut rs));
        // 101: the held bytes and everything after pass as they are.
        let mut rs = RequestStream::new();
        let mut out = Vec::new();
        rs.feed(UPGRADE_THEN_B, &mut out, &mut only_a).unwrap();
        rs.answer(true, &mut out, &mut only_a).unwrap();
        assert!(rs.is_opaque());
        rs.feed(b"\x00\xffanything", &mut out, &mut only_a).unwrap();
        assert_eq!(out, [UPGRADE_THEN_B, b"\x00\xffanything"].concat());
    }

    /// An Upgrade request's body is forwarded (it is part of the request); the wait
    /// starts after it. An answer that cannot be told apart, given early, leaves the
    /// stream checked.
    #[test]
    fn upgrade_with_a_body_then_an_early_answer() {
        let head =
            b"POST / HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\r\n";
        let mut rs = RequestStream::new();
        let mut out = Vec::new();
        rs.feed(&[&head[..], b"hel"].concat(), &mut out, &mut only_a)
            .unwrap();
        assert!(!rs.is_waiting());
        let mut waiting = RequestStream::new();
        let mut o2 = Vec::new();
        waiting
            .feed(
                &[&head[..], b"hello", b"GET"].concat(),
                &mut o2,
                &mut only_a,
            )
            .unwrap();
        assert!(waiting.is_waiting());
        assert_eq!(o2, [&head[..], b"hello"].concat());
        rs.answer(false, &mut out, &mut only_a).unwrap();
        rs.feed(
            b"loGET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
            &mut out,
            &mut only_a,
        )
        .unwrap();
        assert!(!rs.is_waiting() && !rs.is_opaque());
        assert!(refuses_b(&mut rs));
    }

    /// Only WebSocket is followed: after an h2c (or any other) upgrade, even one the
    /// server accepts, the stream stays checked.
    #[test]
    fn only_websocket_upgrades_switch() {
        for up in ["h2c", "websocket, h2c", "TLS/1.2", ""] {
            let mut rs = RequestStream::new();
            let mut out = Vec::new();
            let s = format!("GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: {up}\r\n\r\n");
            rs.feed(s.as_bytes(), &mut out, &mut only_a).unwrap();
            assert!(!rs.is_waiting(), "{up:?}");
            assert!(refuses_b(&mut rs), "{up:?}");
        }
        for up in ["websocket", "WebSocket", "websocket/13"] {
            let mut rs = RequestStream::new();
            let mut out = Vec::new();
            let s = format!("GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: {up}\r\n\r\nx");
            rs.feed(s.as_bytes(), &mut out, &mut only_a).unwrap();
            assert!(rs.is_waiting(), "{up:?}");
        }
    }

    /// A CONNECT inside the stream is refused whatever its Host, first or later.
    #[test]
    fn connect_inside_the_stream_is_refused() {
        for s in [
            &b"CONNECT b.test:80 HTTP/1.1\r\nHost: a.test\r\n\r\nGET / HTTP/1.1\r\nHost: b.test\r\n\r\n"[..],
            b"CONNECT a.test:80 HTTP/1.1\r\nHost: a.test\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\nCONNECT b.test:80 HTTP/1.1\r\nHost: a.test\r\n\r\nx",
        ] {
            let mut rs = RequestStream::new();
            let mut out = Vec::new();
            let mut all = |_: &Head| Ok(());
            assert!(
                rs.feed(s, &mut out, &mut all).is_err(),
                "{:?}",
                String::from_utf8_lossy(s)
            );
            assert!(!String::from_utf8_lossy(&out).contains("CONNECT"));
        }
    }

    #[test]
    fn response_start_finds_the_answer() {
        let cases: &[(&[u8], bool)] = &[
            (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x05", true),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 101 \r\n\r\n", true),
            (b"HTTP/1.0 101\n\n", true),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n\r\n", false),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 Bad Request\r\n\r\n", false),
            (b"HTTP/1.1 1010 x\r\n\r\n", false),
            (b"HTTP/2 101\r\n\r\n", false),
            (b"SSH-2.0-OpenSSH\r\n", false),
        ];
        for (resp, want) in cases {
            for split in [1, 3, resp.len()] {
                let mut rs = ResponseStart::new();
                let got = resp.chunks(split).find_map(|c| rs.feed(c));
                assert_eq!(
                    got,
                    Some(*want),
                    "{:?} split {split}",
                    String::from_utf8_lossy(resp)
                );
            }
        }
        let mut rs = ResponseStart::new();
        assert_eq!(rs.feed(b"HTTP/1.1 101 Switching"), None);
        let mut big = b"HTTP/1.1 101 x\r\nX: ".to_vec();
        big.resize(MAX_HEAD + 1, b'a');
        assert_eq!(ResponseStart::new().feed(&big), Some(false));
    }
}
