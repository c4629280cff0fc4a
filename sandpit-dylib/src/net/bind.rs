//! `bind`: TCP servers only with `network.allow_local_binding = true`, and then only
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
        if st.decider.net_mode() == crate::decide::NetMode::Unrestricted {
            // SAFETY: the caller's arguments, forwarded.
            return Ok(unsafe { real(fd, addr, len) });
        }
        let (allowed, origin) = st.decider.local_binding();
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
