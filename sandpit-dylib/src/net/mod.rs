//! Network hooks: TCP connects go to sandpit's proxy with the original destination
//! handed over, UDP only to sandpit's DNS responder, TCP Fast Open refused, and the
//! names the process resolved remembered so the proxy learns which name a raw IP
//! connection was meant for.
use libc::{c_int, sockaddr, socklen_t};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

#[cfg(any(target_os = "macos", test))]
pub mod ask;
pub mod audit;
pub mod bind;
pub mod connect;
pub mod names;
pub mod redirect;
pub mod resolve;

/// An IPv4/IPv6 socket address, or `None` for other families.
///
/// # Safety
/// `addr` is NULL or points to `len` readable bytes.
pub unsafe fn decode(addr: *const sockaddr, len: socklen_t) -> Option<SocketAddr> {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: at least the family field is readable.
    let family = c_int::from(unsafe { (*addr).sa_family });
    match family {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: length checked; read unaligned as callers may pass any buffer.
            let a = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>()) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: length checked.
            let a = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>()) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Encode `a` for a socket of `family` (an IPv4 address becomes v4-mapped for an
/// IPv6 socket).
pub fn encode(a: SocketAddr, family: c_int) -> (libc::sockaddr_storage, socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let a = match (a, family) {
        (SocketAddr::V4(v4), libc::AF_INET6) => {
            SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0))
        }
        (a, _) => a,
    };
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: all-zero is a valid sockaddr_in (and sets BSD's sin_len to 0,
            // which the kernel ignores).
            let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&raw mut ss).cast::<libc::sockaddr_in>(), sin) };
            (ss, std::mem::size_of::<libc::sockaddr_in>() as socklen_t)
        }
        SocketAddr::V6(v6) => {
            // SAFETY: all-zero is a valid sockaddr_in6.
            let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_scope_id = v6.scope_id();
            // SAFETY: as above for sockaddr_in6.
            unsafe { std::ptr::write((&raw mut ss).cast::<libc::sockaddr_in6>(), sin6) };
            (ss, std::mem::size_of::<libc::sockaddr_in6>() as socklen_t)
        }
    }
}

/// Fold v4-mapped IPv6 onto IPv4 so one address has one spelling.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

pub fn same(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && canonical_ip(a.ip()) == canonical_ip(b.ip())
}

/// The address family of a socket (getsockname; portable where `SO_DOMAIN` is not).
pub fn sock_family(fd: c_int) -> Result<c_int, c_int> {
    // SAFETY: zeroed storage is a valid out-parameter.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
    // SAFETY: `ss`/`len` describe a buffer of the right size.
    crate::sys::check(unsafe { libc::getsockname(fd, (&raw mut ss).cast(), &mut len) })?;
    Ok(c_int::from(ss.ss_family))
}

pub fn sockopt_int(fd: c_int, level: c_int, name: c_int) -> Result<c_int, c_int> {
    let mut v: c_int = 0;
    let mut l = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: `v`/`l` are valid out-parameters of the right size.
    let r = unsafe { libc::getsockopt(fd, level, name, (&raw mut v).cast(), &mut l) };
    crate::sys::check(r).map(|_| v)
}
