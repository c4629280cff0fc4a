//! `Content-Encoding` of a response from a host whose TLS sandpit terminates
//! (docs/credentials.md): the proxy asks those hosts for `identity`, and a server
//! that compresses all the same has its body decoded here — gzip, deflate (zlib or
//! raw), br, zstd, in any chain — so that the mask sees the bytes the client would.
//! Any other coding is refused (the mask could not read it). All decoders are pure
//! Rust (flate2's miniz_oxide, brotli-decompressor, ruzstd): nothing to link on macOS.
//!
//! Decoding runs on a blocking thread, reading the body frame by frame and handing
//! back chunks of at most [`CHUNK`] bytes through a channel of two: memory stays
//! bounded whatever the compression ratio.
use std::io::{BufRead, BufReader, Read};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};

/// Largest decoded chunk handed on.
pub const CHUNK: usize = 16 * 1024;

/// Largest zstd window accepted (RFC 9659: 8 MiB for HTTP).
const ZSTD_WINDOW: u64 = 8 * 1024 * 1024;

/// The boxed error of a decoded body.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    Deflate,
    Br,
    Zstd,
}

/// The codings of a `Content-Encoding` value, in the order the server applied them
/// (`identity` left out); `Err`: the first one sandpit cannot decode.
pub fn codings(value: &[u8]) -> Result<Vec<Coding>, String> {
    let text =
        std::str::from_utf8(value).map_err(|_| String::from_utf8_lossy(value).into_owned())?;
    let mut out = vec![];
    for c in text.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        out.push(match c.to_ascii_lowercase().as_str() {
            "identity" => continue,
            "gzip" | "x-gzip" => Coding::Gzip,
            "deflate" => Coding::Deflate,
            "br" => Coding::Br,
            "zstd" => Coding::Zstd,
            _ => return Err(c.to_string()),
        });
    }
    Ok(out)
}

/// The body's frames as a reader (on a blocking thread: it waits on the runtime).
struct Feed {
    body: Incoming,
    rt: tokio::runtime::Handle,
    pending: Bytes,
    done: bool,
}

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.is_empty() {
            if self.done {
                return Ok(0);
            }
            match self.rt.block_on(self.body.frame()) {
                None => self.done = true,
                Some(Ok(f)) => {
                    if let Ok(d) = f.into_data() {
                        self.pending = d;
                    }
                }
                Some(Err(e)) => return Err(std::io::Error::other(e)),
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.advance(n);
        Ok(n)
    }
}

type Reader = Box<dyn Read + Send>;

/// zstd, frame after frame (a stream may hold several).
enum Zstd {
    Frame(
        Box<ruzstd::decoding::StreamingDecoder<BufReader<Reader>, ruzstd::decoding::FrameDecoder>>,
    ),
    Between(BufReader<Reader>),
    Gone,
}

impl Read for Zstd {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match std::mem::replace(self, Zstd::Gone) {
                Zstd::Frame(mut d) => {
                    let n = d.read(buf)?;
                    if n > 0 {
                        *self = Zstd::Frame(d);
                        return Ok(n);
                    }
                    *self = Zstd::Between(d.into_inner());
                }
                Zstd::Between(mut r) => {
                    if r.fill_buf()?.is_empty() {
                        return Ok(0);
                    }
                    let d = ruzstd::decoding::StreamingDecoder::new_with_max_window_size(
                        r,
                        ZSTD_WINDOW,
                    )
                    .map_err(std::io::Error::other)?;
                    *self = Zstd::Frame(Box::new(d));
                }
                Zstd::Gone => return Ok(0),
            }
        }
    }
}

/// `r` with `c` undone.
fn undo(c: Coding, r: Reader) -> std::io::Result<Reader> {
    Ok(match c {
        Coding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(r)),
        Coding::Deflate => {
            // HTTP's deflate is zlib (RFC 9110); some servers send raw deflate.
            let mut b = BufReader::new(r);
            let head = b.fill_buf()?;
            let zlib = head.len() >= 2
                && head[0] & 0x0f == 8
                && (u16::from(head[0]) << 8 | u16::from(head[1])) % 31 == 0;
            if zlib {
                Box::new(flate2::bufread::ZlibDecoder::new(b))
            } else {
                Box::new(flate2::bufread::DeflateDecoder::new(b))
            }
        }
        Coding::Br => Box::new(brotli_decompressor::Decompressor::new(r, CHUNK)),
        Coding::Zstd => Box::new(Zstd::Between(BufReader::new(r))),
    })
}

/// `body` decoded (`codings` in the order applied) and passed through `then` chunk by
/// chunk (`true`: the end); a body that does not decode ends in an error, which
/// cuts the client's response short.
pub fn decoded(
    body: Incoming,
    codings: Vec<Coding>,
    mut then: impl FnMut(Bytes, bool) -> Bytes + Send + 'static,
) -> Decoded {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Error>>(2);
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let feed: Reader = Box::new(Feed {
            body,
            rt,
            pending: Bytes::new(),
            done: false,
        });
        let mut r = feed;
        for c in codings.iter().rev() {
            r = match undo(*c, r) {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.blocking_send(Err(format!("decoding the response: {e}").into()));
                    return;
                }
            };
        }
        let mut buf = vec![0u8; CHUNK];
        loop {
            match r.read(&mut buf) {
                Ok(0) => {
                    let tail = then(Bytes::new(), true);
                    if !tail.is_empty() {
                        let _ = tx.blocking_send(Ok(tail));
                    }
                    return;
                }
                Ok(n) => {
                    let out = then(Bytes::copy_from_slice(&buf[..n]), false);
                    if !out.is_empty() && tx.blocking_send(Ok(out)).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = tx.blocking_send(Err(format!("decoding the response: {e}").into()));
                    return;
                }
            }
        }
    });
    Decoded(rx)
}

/// The decoded body: what the decoding thread hands on.
pub struct Decoded(tokio::sync::mpsc::Receiver<Result<Bytes, Error>>);

impl hyper::body::Body for Decoded {
    type Data = Bytes;
    type Error = Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        self.0.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codings_are_read_in_order_and_unknown_ones_named() {
        assert_eq!(
            codings(b"gzip, br").unwrap(),
            vec![Coding::Gzip, Coding::Br]
        );
        assert_eq!(codings(b"identity").unwrap(), vec![]);
        assert_eq!(codings(b"X-GZIP").unwrap(), vec![Coding::Gzip]);
        assert_eq!(codings(b"gzip, compress").unwrap_err(), "compress");
    }
}
