//! The handshake line the interposer sends first on a redirected connection (pure).
//!
//! ```text
//! SANDPIT/1 <token|-> <original-ip:port> <resolved-name|->\n
//! ```
//! One line of at most [`MAX_LINE`] bytes, single spaces, LF (optionally CRLF). The
//! proxy answers nothing: the client's own bytes follow immediately, and a denial is
//! a close. The name is the one the process resolved to that address, if the
//! interposer knows it; the proxy treats it as a claim and dials its own resolution.
use std::net::SocketAddr;

pub const MAGIC: &[u8] = b"SANDPIT/1 ";
pub const MAX_LINE: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub token: Option<String>,
    pub original: SocketAddr,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("transparent handshake line is malformed")]
    Malformed,
    #[error("transparent handshake line is too long")]
    TooLong,
}

/// True when `buf` (possibly a prefix) starts like the handshake line.
pub fn looks_like_header(buf: &[u8]) -> bool {
    let n = buf.len().min(MAGIC.len());
    n > 0 && buf[..n] == MAGIC[..n]
}

/// Parse the line at the start of `buf`: `Ok(None)` = need more.
pub fn parse(buf: &[u8]) -> Result<Option<(Header, usize)>, HeaderError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_LINE {
            Err(HeaderError::TooLong)
        } else if looks_like_header(buf) {
            Ok(None)
        } else {
            Err(HeaderError::Malformed)
        };
    };
    if nl >= MAX_LINE {
        return Err(HeaderError::TooLong);
    }
    let line = &buf[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let rest = line.strip_prefix(MAGIC).ok_or(HeaderError::Malformed)?;
    let text = std::str::from_utf8(rest).map_err(|_| HeaderError::Malformed)?;
    let mut parts = text.split(' ');
    let (Some(token), Some(addr), Some(name), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeaderError::Malformed);
    };
    let field = |s: &str| -> Result<Option<String>, HeaderError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(HeaderError::Malformed);
        }
        Ok((s != "-").then(|| s.to_string()))
    };
    let original: SocketAddr = addr.parse().map_err(|_| HeaderError::Malformed)?;
    Ok(Some((
        Header {
            token: field(token)?,
            original,
            name: field(name)?,
        },
        nl + 1,
    )))
}

/// The line a client sends (what the interposer implements).
pub fn render(token: Option<&str>, original: SocketAddr, name: Option<&str>) -> String {
    format!(
        "SANDPIT/1 {} {} {}\n",
        token.unwrap_or("-"),
        original,
        name.unwrap_or("-")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let line = render(Some("t0k"), "[::1]:443".parse().unwrap(), Some("a.test"));
        let (h, n) = parse(format!("{line}rest").as_bytes()).unwrap().unwrap();
        assert_eq!(n, line.len());
        assert_eq!(h.token.as_deref(), Some("t0k"));
        assert_eq!(h.name.as_deref(), Some("a.test"));
        assert_eq!(h.original, "[::1]:443".parse().unwrap());
        assert_eq!(parse(b"SANDPIT/1 - 1.2.3.4:5").unwrap(), None);
        assert!(parse(b"SANDPIT/1 - 1.2.3.4:5 -\n")
            .unwrap()
            .unwrap()
            .0
            .name
            .is_none());
        assert!(parse(b"SANDPIT/1 -  1.2.3.4:5 -\n").is_err());
        assert!(parse(b"SANDPIT/1 - nothost:5 -\n").is_err());
    }
}
