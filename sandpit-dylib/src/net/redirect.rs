//! Transparent redirection of a TCP connect to sandpit's proxy.
//!
//! Handover (until docs/proxy.md fixes the proxy's side, this is the contract):
//! 1. the socket is bound to an ephemeral port (wildcard address) if it is not
//!    bound yet, and its local port read back;
//! 2. one line goes to the proxy's control socket (`SANDPIT_PROXY_CONTROL`, unix
//!    stream): `sandpit-redirect v1 <local-port> <orig-ip:port> <name|->\n`; the
//!    proxy answers `ok\n` once it has recorded it;
//! 3. the socket is connected to the proxy listener (`SANDPIT_PROXY`) with the
//!    caller's own blocking mode, so non-blocking sockets and programs that poll
//!    for completion work unchanged. The proxy matches the accepted connection by
//!    its peer port.
//!
//! Nothing is written on the caller's socket, so the hook never has to wait for it.
use super::{encode, sockopt_int};
use crate::state::State;
use libc::{c_int, socklen_t};
use std::fmt::Write;
use std::net::SocketAddr;

fn local_port(fd: c_int) -> Result<u16, c_int> {
    // SAFETY: zeroed storage is a valid out-parameter.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
    // SAFETY: `ss`/`len` describe a buffer of the right size.
    crate::sys::check(unsafe { libc::getsockname(fd, (&raw mut ss).cast(), &mut len) })?;
    // SAFETY: getsockname filled `len` bytes.
    let a = unsafe { super::decode((&raw const ss).cast(), len) }.ok_or(libc::EAFNOSUPPORT)?;
    Ok(a.port())
}

/// Hand `orig` over to the proxy for `fd`; returns the address to connect to.
pub fn handover(st: &State, fd: c_int, orig: SocketAddr, name: Option<&[u8]>) -> Result<SocketAddr, c_int> {
    let proxy = st.proxy.ok_or(libc::ECONNREFUSED)?;
    let control = st.control.as_ref().ok_or(libc::ECONNREFUSED)?;
    let family = sockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)?;
    if family == libc::AF_INET6 && proxy.is_ipv4() {
        // Reach an IPv4 proxy through a v4-mapped address (may fail once bound: then
        // the connect below fails and the caller sees the error).
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
    let mut port = local_port(fd)?;
    if port == 0 {
        let any: SocketAddr = if family == libc::AF_INET6 {
            SocketAddr::from(([0u16; 8], 0))
        } else {
            SocketAddr::from(([0u8; 4], 0))
        };
        let (sa, len) = encode(any, family);
        // SAFETY: `sa` holds a valid address of `len` bytes.
        crate::sys::check(unsafe { libc::bind(fd, (&raw const sa).cast(), len) })?;
        port = local_port(fd)?;
    }
    let mut line = crate::report::Line::new();
    let _ = write!(line, "sandpit-redirect v1 {port} {orig} ");
    match name {
        Some(n) if !n.is_empty() => line.shown(n),
        _ => line.bytes(b"-"),
    }
    line.bytes(b"\n");
    tell_proxy(control.as_bytes(), line.as_bytes())?;
    Ok(proxy)
}

/// One request line to the control socket, one `ok` back (2 s timeout).
fn tell_proxy(path: &[u8], msg: &[u8]) -> Result<(), c_int> {
    // SAFETY: zeroed sockaddr_un is valid.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if path.len() >= sa.sun_path.len() {
        return Err(libc::ENAMETOOLONG);
    }
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in sa.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket calls on an fd we own and always close.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(crate::sys::errno());
        }
        let tv = libc::timeval { tv_sec: 2, tv_usec: 0 };
        for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&raw const tv).cast(),
                std::mem::size_of::<libc::timeval>() as socklen_t,
            );
        }
        let r = (|| {
            crate::sys::check(libc::connect(
                fd,
                (&raw const sa).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as socklen_t,
            ))
            .map_err(|_| libc::ECONNREFUSED)?;
            if libc::send(fd, msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) != msg.len() as isize {
                return Err(libc::ECONNREFUSED);
            }
            let mut buf = [0u8; 16];
            let n = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
            if n >= 3 && &buf[..3] == b"ok\n" {
                Ok(())
            } else {
                Err(libc::ECONNREFUSED)
            }
        })();
        libc::close(fd);
        r
    }
}
