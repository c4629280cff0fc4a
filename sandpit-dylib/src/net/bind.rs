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
        let (allowed, origin) = st.decider.local_binding();
        if !allowed && dest.port() == 0 {
            // An ephemeral port: a client binding before it connects, or a runtime
            // probing for IPv6 (Go). A server on it is refused at listen().
            // SAFETY: the caller's arguments, forwarded.
            return Ok(unsafe { real(fd, addr, len) });
        }
        if !allowed {
            crate::report::other(format_args!(
                "sandpit: blocked listening on {dest}: network.allow_local_binding = false ({}); set allow_local_binding = true under [network] in ~/.sandpit/config.toml (or pass --allow-local-binding) to let a server in the sandbox be reached from this machine",
                origin.location()
            ));
            return Err(libc::EACCES);
        }
        if !super::canonical_ip(dest.ip()).is_loopback() {
            crate::report::other(format_args!(
                "sandpit: blocked listening on {dest}: allow_local_binding allows loopback addresses only (127.0.0.1 or ::1), never other interfaces; bind to 127.0.0.1"
            ));
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
        // listen(), without passing through bind (nor Landlock's bind rule).
        let unbound = if a.port() == 0 {
            " (an unbound socket listens on every address)"
        } else {
            ""
        };
        let (allowed, origin) = st.decider.local_binding();
        if !allowed {
            crate::report::other(format_args!(
                "sandpit: blocked listening on {a}{unbound}: network.allow_local_binding = false ({}); set allow_local_binding = true under [network] in ~/.sandpit/config.toml (or pass --allow-local-binding) to let a server in the sandbox be reached from this machine",
                origin.location()
            ));
            return Err(libc::EACCES);
        }
        if a.port() == 0 || !super::canonical_ip(a.ip()).is_loopback() {
            crate::report::other(format_args!(
                "sandpit: blocked listening on {a}{unbound}: allow_local_binding allows loopback addresses only; bind to 127.0.0.1 first"
            ));
            return Err(libc::EACCES);
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(fd, backlog) })
    }
}
