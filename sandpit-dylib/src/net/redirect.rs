//! Transparent redirection of a TCP connect to sandpit's proxy.
//!
//! The handshake is the proxy's (`sandpit/src/proxy/transparent.rs` on the proxy
//! branch): the first bytes on the redirected connection are one line
//!
//! ```text
//! SANDPIT/1 <token|-> <original-ip:port> <resolved-name|->\n
//! ```
//!
//! and the proxy answers nothing; the client's own bytes follow. The hook therefore
//! completes the connect to the proxy itself — for a non-blocking socket it waits
//! (poll, bounded) for the loopback connect to finish — writes the line, and returns
//! success, so the caller sees a connected socket whether it blocks, polls or
//! selects. The proxy decides by name (the resolved name is a claim it checks
//! against SNI/Host and its own resolution) and closes the connection on denial.
use super::{encode, sockopt_int};
use crate::state::State;
use libc::{c_int, socklen_t};
use std::fmt::Write;
use std::net::SocketAddr;

/// How long a redirected connect may take to reach the proxy.
const CONNECT_TIMEOUT_MS: c_int = 10_000;

/// The handshake line. A name that is not printable ASCII is sent as `-`.
pub fn header(
    token: Option<&[u8]>,
    orig: SocketAddr,
    name: Option<&[u8]>,
    out: &mut crate::report::Line,
) {
    fn field(v: Option<&[u8]>) -> Option<&[u8]> {
        v.filter(|v| !v.is_empty() && v.len() <= 255 && v.iter().all(|b| b.is_ascii_graphic()))
    }
    out.bytes(b"SANDPIT/1 ");
    out.bytes(field(token).unwrap_or(b"-"));
    let _ = write!(out, " {orig} ");
    out.bytes(field(name).unwrap_or(b"-"));
    out.bytes(b"\n");
}

/// Connect `fd` to the proxy and send the handshake for `orig`. `real` is the next
/// `connect`. Returns 0 (connected) or the errno.
pub fn redirect(
    st: &State,
    fd: c_int,
    orig: SocketAddr,
    name: Option<&[u8]>,
    real: unsafe extern "C" fn(c_int, *const libc::sockaddr, socklen_t) -> c_int,
) -> Result<c_int, c_int> {
    let proxy = st.proxy.ok_or(libc::ECONNREFUSED)?;
    let family = sockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)?;
    if family == libc::AF_INET6 && proxy.is_ipv4() {
        // Reach an IPv4 proxy through a v4-mapped address.
        let zero: c_int = 0;
        // SAFETY: setsockopt with a valid int option.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&raw const zero).cast(),
                std::mem::size_of::<c_int>() as socklen_t,
            )
        };
    } else if family == libc::AF_INET && proxy.is_ipv6() {
        return Err(libc::ECONNREFUSED);
    }
    let (sa, len) = encode(proxy, family);
    // SAFETY: `sa` holds a valid address of `len` bytes; `real` is libc's connect.
    let r = unsafe { real(fd, (&raw const sa).cast(), len) };
    if r != 0 {
        match crate::sys::errno() {
            libc::EINPROGRESS | libc::EINTR | libc::EALREADY => wait_connected(fd)?,
            e => return Err(e),
        }
    }
    let mut line = crate::report::Line::new();
    header(st.proxy_token.as_deref(), orig, name, &mut line);
    let b = line.as_bytes();
    let mut off = 0;
    while off < b.len() {
        // SAFETY: sending from our own buffer on the caller's connected socket.
        let n = unsafe {
            libc::send(
                fd,
                b[off..].as_ptr().cast(),
                b.len() - off,
                libc::MSG_NOSIGNAL,
            )
        };
        if n > 0 {
            off += n as usize;
            continue;
        }
        match crate::sys::errno() {
            libc::EINTR => {}
            libc::EAGAIN => poll_out(fd)?,
            e => return Err(e),
        }
    }
    Ok(0)
}

fn poll_out(fd: c_int) -> Result<(), c_int> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, CONNECT_TIMEOUT_MS) };
        if r > 0 {
            return Ok(());
        }
        if r == 0 {
            return Err(libc::ETIMEDOUT);
        }
        if crate::sys::errno() != libc::EINTR {
            return Err(crate::sys::errno());
        }
    }
}

/// Wait for an in-progress connect to finish; its result is `SO_ERROR`.
fn wait_connected(fd: c_int) -> Result<(), c_int> {
    poll_out(fd)?;
    match sockopt_int(fd, libc::SOL_SOCKET, libc::SO_ERROR)? {
        0 => Ok(()),
        e => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_the_proxy_format() {
        let mut l = crate::report::Line::new();
        header(
            Some(b"t0k"),
            "[::1]:443".parse().unwrap(),
            Some(b"a.test"),
            &mut l,
        );
        assert_eq!(l.as_bytes(), b"SANDPIT/1 t0k [::1]:443 a.test\n");
        let mut l = crate::report::Line::new();
        header(
            None,
            "1.2.3.4:80".parse().unwrap(),
            Some(b"bad name"),
            &mut l,
        );
        assert_eq!(l.as_bytes(), b"SANDPIT/1 - 1.2.3.4:80 -\n");
    }
}
