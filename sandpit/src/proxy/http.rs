//! HTTP/1 request head parsing for deciding (pure). Strict on purpose: anything a
//! lenient server might read differently (folded lines, two Host headers, control
//! characters, userinfo) is an error, and an error is a denial.

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
pub fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, HttpError> {
    let Some(end) = find_head_end(buf) else {
        if buf.len() > MAX_HEAD {
            return Err(HttpError::TooLarge);
        }
        // Reject early what can never become a request line.
        if !buf.is_empty() && !looks_like_http(&buf[..buf.len().min(17)]) {
            return Err(HttpError::RequestLine);
        }
        return Ok(None);
    };
    if end > MAX_HEAD {
        return Err(HttpError::TooLarge);
    }
    let text = &buf[..end];
    let mut lines = split_lines(text);
    let first = lines.next().ok_or(HttpError::RequestLine)?;
    let (method, target, minor) = parse_request_line(first)?;
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        if headers.len() >= MAX_HEADERS {
            return Err(HttpError::TooManyHeaders);
        }
        headers.push(parse_header_line(line)?);
    }
    let head = Head {
        method,
        target,
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

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn parse_request_line(line: &[u8]) -> Result<(String, String, u8), HttpError> {
    let s = std::str::from_utf8(line).map_err(|_| HttpError::RequestLine)?;
    let mut parts = s.split(' ');
    let (Some(m), Some(t), Some(v), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::RequestLine);
    };
    if m.is_empty() || !m.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(HttpError::RequestLine);
    }
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(HttpError::RequestLine);
    }
    let minor = match v {
        "HTTP/1.1" => 1,
        "HTTP/1.0" => 0,
        _ => return Err(HttpError::RequestLine),
    };
    Ok((m.to_string(), t.to_string(), minor))
}

fn parse_header_line(line: &[u8]) -> Result<(String, String), HttpError> {
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or(HttpError::HeaderLine)?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return Err(HttpError::HeaderLine);
    }
    if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(HttpError::HeaderLine);
    }
    let value = std::str::from_utf8(value).map_err(|_| HttpError::HeaderLine)?;
    let name = std::str::from_utf8(name).map_err(|_| HttpError::HeaderLine)?;
    Ok((
        name.to_ascii_lowercase(),
        value.trim_matches([' ', '\t']).to_string(),
    ))
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
#[derive(Debug, Default)]
pub struct RequestStream {
    state: StreamState,
    head: Vec<u8>,
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
    /// After a protocol switch (`Upgrade`, `CONNECT`): no longer HTTP.
    Opaque,
}

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

    /// True once the stream switched protocols and is no longer checked.
    pub fn is_opaque(&self) -> bool {
        matches!(self.state, StreamState::Opaque)
    }

    /// Feed client bytes. Bytes that may be forwarded are appended to `out`; each
    /// completed head is passed to `check` first. Bytes of an incomplete head are
    /// held back until it is complete.
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
                            check(&h).map_err(StreamError::Refused)?;
                            out.extend_from_slice(&self.head);
                            self.head.clear();
                            let upgrade = h.method == "CONNECT" || h.get("upgrade").is_some();
                            self.state = match h.body_len()? {
                                _ if upgrade => StreamState::Opaque,
                                Some(0) => StreamState::Head,
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
                        self.state = StreamState::Head;
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
                            _ if text.is_empty() => StreamState::Head,
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
                ["a.test", "b.test", "c.test", "d.test"],
                "split {split}"
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
}
