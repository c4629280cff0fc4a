//! `connect`, `sendto`, `sendmsg`, `sendmmsg` (Linux), `connectx` (macOS).
use super::{decode, names, redirect, same, sockopt_int};
use crate::decide::NetMode;
use crate::state::State;
use libc::{c_int, msghdr, sockaddr, socklen_t, ssize_t};
use std::net::SocketAddr;

fn refuse(what: &str, dest: SocketAddr, why: &str, errno: c_int) -> Result<(), c_int> {
    crate::report::other(format_args!("sandpit: blocked {what} to {dest} ({why})"));
    Err(errno)
}

/// UDP goes to sandpit's DNS responder in every network mode; anywhere else only
/// where the policy allows it (`network.mode = "unrestricted"`: public addresses,
/// which the kernel layer relays), refused with the rule named otherwise.
fn udp_allowed(st: &State, dest: SocketAddr) -> Result<(), c_int> {
    if st.dns.is_some_and(|d| same(d, dest)) {
        return Ok(());
    }
    st.decider.datagram(dest).map_err(|d| {
        crate::report::denied(&d);
        libc::EPERM
    })
}

/// A pathname Unix socket address, judged by the policy; an abstract or unnamed
/// one passes (Landlock's scope and the network namespace hold abstract sockets).
///
/// # Safety
/// `addr` is NULL or `len` readable bytes.
unsafe fn judge_unix(st: &State, addr: *const sockaddr, len: socklen_t) -> Result<(), c_int> {
    let start = std::mem::offset_of!(libc::sockaddr_un, sun_path);
    let len = (len as usize).min(std::mem::size_of::<libc::sockaddr_un>());
    if addr.is_null() || len <= start {
        return Ok(());
    }
    // SAFETY: the caller's `len` readable bytes (capped at a sockaddr_un).
    if c_int::from(unsafe { (*addr).sa_family }) != libc::AF_UNIX {
        return Ok(());
    }
    // SAFETY: as above; `start..len` lies inside them.
    let raw = unsafe { std::slice::from_raw_parts(addr.cast::<u8>().add(start), len - start) };
    let name = raw.split(|&b| b == 0).next().unwrap_or_default();
    if name.is_empty() {
        return Ok(());
    }
    let mut abs = crate::path::PBuf::new();
    crate::files::absolute_from_cwd(name, &mut abs, true)?;
    let mut resolved = crate::path::PBuf::new();
    crate::path::resolve(abs.as_bytes(), true, &mut resolved)?;
    if crate::files::absent(resolved.as_bytes()) {
        // No socket there (syslog's /dev/log in the sandbox's own /dev): the
        // kernel's own answer, and no denial to report.
        return Ok(());
    }
    st.decider.unix(resolved.as_bytes()).map_err(|d| {
        crate::report::denied(&d);
        libc::EACCES
    })
}

fn sock_type(fd: c_int) -> Result<c_int, c_int> {
    sockopt_int(fd, libc::SOL_SOCKET, libc::SO_TYPE)
}

hook! {
    fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    fail = -1;
    macos = ["connect", "connect$NOCANCEL"];
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's buffer of `len` bytes.
        let Some(dest) = (unsafe { decode(addr, len) }) else {
            // A host program's Unix socket is refused; netlink and AF_UNSPEC
            // (disconnect) are not network egress.
            // SAFETY: the caller's buffer of `len` bytes.
            unsafe { judge_unix(st, addr, len) }?;
            // SAFETY: the caller's arguments, forwarded.
            return Ok(unsafe { real(fd, addr, len) });
        };
        match sock_type(fd)? {
            libc::SOCK_STREAM => {
                // The proxy itself, and sandpit's DNS responder (DNS over TCP for
                // large answers), are reached directly.
                if st.proxy.is_some_and(|p| same(p, dest)) || st.dns.is_some_and(|d| same(d, dest)) {
                    // SAFETY: the caller's arguments, forwarded.
                    return Ok(unsafe { real(fd, addr, len) });
                }
                match st.decider.net_mode() {
                    NetMode::Offline => {
                        // The policy words the reason (it names the mode's origin).
                        let ip = super::canonical_ip(dest.ip()).to_string();
                        match st.decider.connect(&ip, dest.port()) {
                            Err(d) => crate::report::denied(&d),
                            Ok(()) => crate::report::other(format_args!(
                                "sandpit: blocked connection to {dest} (network.mode = \"offline\")"
                            )),
                        }
                        Err(libc::ECONNREFUSED)
                    }
                    // An allowed loopback service of the host: the kernel layer
                    // relays it (namespace mode) or Landlock allows its port
                    // (fallback), at the address the program asked for.
                    // SAFETY: the caller's arguments, forwarded.
                    NetMode::Filtered if st.decider.loopback_service(dest.ip(), dest.port()) => Ok(unsafe { real(fd, addr, len) }),
                    NetMode::Filtered => {
                        let mut host = [0u8; names::HOST_MAX];
                        let n = names::lookup(dest.ip(), &mut host);
                        let name = n.map(|n| &host[..n]);
                        match redirect::redirect(st, fd, dest, name, real) {
                            Ok(r) => Ok(r),
                            // A second connect() on a socket we already redirected
                            // (some programs poll that way), or a bad fd: the
                            // kernel's own answer.
                            Err(e @ (libc::EISCONN | libc::EALREADY | libc::EBADF | libc::ENOTSOCK)) => Err(e),
                            Err(_) => {
                                refuse("connection", dest, "sandpit's proxy is not reachable", libc::ECONNREFUSED)?;
                                Ok(-1)
                            }
                        }
                    }
                }
            }
            libc::SOCK_DGRAM => {
                udp_allowed(st, dest)?;
                // SAFETY: the caller's arguments, forwarded.
                Ok(unsafe { real(fd, addr, len) })
            }
            _ => {
                refuse("raw socket connection", dest, "raw sockets are not allowed", libc::EPERM)?;
                Ok(-1)
            }
        }
    }
}

/// Judge one outgoing datagram/segment.
///
/// # Safety
/// `addr` is NULL or `len` readable bytes.
unsafe fn judge_send(
    st: &State,
    fd: c_int,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> Result<(), c_int> {
    let fastopen = crate::sys::MSG_FASTOPEN;
    if fastopen != 0 && flags & fastopen != 0 {
        // SAFETY: per the contract.
        let dest = unsafe { decode(addr, len) }.unwrap_or(SocketAddr::from(([0u8; 4], 0)));
        return refuse(
            "TCP Fast Open",
            dest,
            "TCP Fast Open would bypass the proxy; use connect()",
            libc::EPERM,
        );
    }
    // SAFETY: per the contract.
    match unsafe { decode(addr, len) } {
        Some(dest) if sock_type(fd)? == libc::SOCK_DGRAM => udp_allowed(st, dest),
        Some(_) => Ok(()),
        // A datagram to a host program's Unix socket, like a connect to it.
        // SAFETY: per the contract.
        None => unsafe { judge_unix(st, addr, len) },
    }
}

hook! {
    fn sendto(fd: c_int, buf: *const libc::c_void, n: libc::size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t;
    fail = -1;
    macos = ["sendto", "sendto$NOCANCEL"];
    |real| {
        let st = crate::state::get()?;
        // SAFETY: the caller's address buffer.
        unsafe { judge_send(st, fd, flags, addr, len) }?;
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(fd, buf, n, flags, addr, len) })
    }
}

hook! {
    fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
    fail = -1;
    macos = ["sendmsg", "sendmsg$NOCANCEL"];
    |real| {
        let st = crate::state::get()?;
        if !msg.is_null() {
            // SAFETY: the caller's msghdr.
            let m = unsafe { &*msg };
            // SAFETY: msg_name/msg_namelen describe the caller's buffer.
            unsafe { judge_send(st, fd, flags, m.msg_name.cast(), m.msg_namelen) }?;
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(fd, msg, flags) })
    }
}

#[cfg(target_os = "linux")]
hook! {
    fn sendmmsg(fd: c_int, vec: *mut libc::mmsghdr, vlen: libc::c_uint, flags: c_int) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        if !vec.is_null() {
            for i in 0..vlen as usize {
                // SAFETY: the caller's array of `vlen` entries.
                let m = unsafe { &(*vec.add(i)).msg_hdr };
                // SAFETY: msg_name/msg_namelen describe the caller's buffer.
                unsafe { judge_send(st, fd, flags, m.msg_name.cast(), m.msg_namelen) }?;
            }
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(fd, vec, vlen, flags) })
    }
}

// macOS `connectx`: a connect that can carry data and pick interfaces. It is not
// redirected: stream connections go only to sandpit's proxy or DNS responder (or
// anywhere when unrestricted), datagram ones as for `sendto`; anything else is
// refused with a pointer to `connect()`, which is redirected. Seatbelt's
// network-outbound rule gives the same answer in the kernel.
#[cfg(target_os = "macos")]
hook! {
    fn connectx(
        fd: c_int,
        endpoints: *const libc::sa_endpoints_t,
        associd: libc::sae_associd_t,
        flags: libc::c_uint,
        iov: *const libc::iovec,
        iovcnt: libc::c_uint,
        len: *mut libc::size_t,
        connid: *mut libc::sae_connid_t
    ) -> c_int;
    fail = -1;
    |real| {
        let st = crate::state::get()?;
        if endpoints.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's endpoints structure.
        let ep = unsafe { &*endpoints };
        // SAFETY: sae_dstaddr/sae_dstaddrlen describe the caller's buffer.
        if let Some(dest) = unsafe { decode(ep.sae_dstaddr, ep.sae_dstaddrlen) } {
            let ours = st.proxy.is_some_and(|p| same(p, dest)) || st.dns.is_some_and(|d| same(d, dest));
            match sock_type(fd)? {
                _ if ours => {}
                libc::SOCK_DGRAM => udp_allowed(st, dest)?,
                _ => refuse(
                    "connectx",
                    dest,
                    "connectx is not redirected to sandpit's proxy; use connect()",
                    libc::EPERM,
                )?,
            }
        }
        // SAFETY: the caller's arguments, forwarded.
        Ok(unsafe { real(fd, endpoints, associd, flags, iov, iovcnt, len, connid) })
    }
}
