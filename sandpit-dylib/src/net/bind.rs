//! `bind` and `listen`: TCP servers only with `network.allow_local_binding = true`, and then only
//! on loopback addresses. The kernel layer refuses the bind as well (Landlock's TCP
//! bind right); this hook says which key decides, so the agent can tell the user.
use super::decode;
use libc::{c_int, sockaddr, socklen_t};

hook! {
    fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's buffer of `len` bytes.
        let dest = unsafe { decode(addr, len) };
        let stream = super::sockopt_int(fd, libc::SOL_SOCKET, libc::SO_TYPE) == Ok(libc::SOCK_STREAM);
        let Some(dest) = dest.filter(|_| stream) else {
            // Unix sockets, UDP, netlink: not a TCP server.
            // SAFETY: the caller's arguments, forwarded.
            return Ok(unsafe { real(fd, addr, len) });
        };
        if dest.port() == 0 {
            // An ephemeral port: a client binding before it connects, or a runtime
            // probing for IPv6 (Go). A server on it is refused at listen().
            // SAFETY: the caller's arguments, forwarded.
            return Ok(unsafe { real(fd, addr, len) });
        }
        let v = st.decider.listen(dest);
        if v.is_denied() {
            crate::report::other(format_args!("sandpit: {}", v.reason));
            return Err(libc::EACCES);
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(fd, addr, len) })
    }
}

/// The socket's local address, if it is an IPv4/IPv6 one.
fn local_addr(fd: c_int) -> Option<std::net::SocketAddr> {
    // SAFETY: zeroed storage is a valid out-parameter.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
    // SAFETY: `ss`/`len` describe a buffer of the right size.
    let r = unsafe { libc::getsockname(fd, (&raw mut ss).cast(), &mut len) };
    if r != 0 {
        return None;
    }
    // SAFETY: the kernel filled `len` bytes of `ss`.
    unsafe { decode((&raw const ss).cast(), len) }
}

hook! {
    fn listen(fd: c_int, backlog: c_int) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        let stream = super::sockopt_int(fd, libc::SOL_SOCKET, libc::SO_TYPE) == Ok(libc::SOCK_STREAM);
        let local = local_addr(fd).filter(|_| stream);
        let Some(a) = local else {
            // SAFETY: the caller's arguments, forwarded.
            return Ok(unsafe { real(fd, backlog) });
        };
        // A TCP socket never bound gets an ephemeral port on every address at
        // listen(), without passing through bind (nor Landlock's bind rule): its
        // port 0 here is refused as such.
        let v = st.decider.listen(a);
        if v.is_denied() {
            crate::report::other(format_args!("sandpit: {}", v.reason));
            return Err(libc::EACCES);
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(fd, backlog) })
    }
}
