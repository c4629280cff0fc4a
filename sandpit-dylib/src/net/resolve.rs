//! `getaddrinfo`, `gethostbyname`, `gethostbyname2`, `gethostbyname_r`,
//! `gethostbyname2_r`: the real lookup, then each answer is remembered with the
//! name asked for (see [`super::names`]).
//!
//! macOS: the profile leaves libSystem's resolver (mDNSResponder) unreachable, so
//! with `SANDPIT_DNS` set a host name is asked of sandpit's DNS responder instead
//! ([`super::ask`]), which answers by the policy; numeric hosts, a missing host and
//! service names still go to libSystem, which needs no network for them.
//! `freeaddrinfo` frees the lists made here and hands every other to libSystem.
use super::names;
use libc::{addrinfo, c_char, c_int, hostent};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// # Safety
/// `res` is a list returned by getaddrinfo; `node` NUL-terminated.
unsafe fn record_ai(node: *const c_char, mut res: *const addrinfo) {
    // SAFETY: per the contract.
    let Some(name) = (unsafe { crate::sys::cstr(node) }) else {
        return;
    };
    while !res.is_null() {
        // SAFETY: a node of the list.
        let ai = unsafe { &*res };
        // SAFETY: ai_addr/ai_addrlen describe the node's address.
        if let Some(a) = unsafe { super::decode(ai.ai_addr, ai.ai_addrlen) } {
            names::record(a.ip(), name);
        }
        res = ai.ai_next;
    }
}

/// # Safety
/// `h` is NULL or a hostent filled by the resolver.
unsafe fn record_he(name: *const c_char, h: *const hostent) {
    // SAFETY: per the contract.
    let Some(name) = (unsafe { crate::sys::cstr(name) }) else {
        return;
    };
    if h.is_null() {
        return;
    }
    // SAFETY: per the contract.
    let h = unsafe { &*h };
    let mut list = h.h_addr_list;
    if list.is_null() {
        return;
    }
    loop {
        // SAFETY: NULL-terminated list of h_length-byte addresses.
        let a = unsafe { *list };
        if a.is_null() {
            return;
        }
        let ip = match (h.h_addrtype, h.h_length) {
            // SAFETY: 4 readable bytes.
            (libc::AF_INET, 4) => IpAddr::V4(Ipv4Addr::from(unsafe {
                std::ptr::read_unaligned(a.cast::<[u8; 4]>())
            })),
            // SAFETY: 16 readable bytes.
            (libc::AF_INET6, 16) => IpAddr::V6(Ipv6Addr::from(unsafe {
                std::ptr::read_unaligned(a.cast::<[u8; 16]>())
            })),
            _ => return,
        };
        names::record(ip, name);
        // SAFETY: still within the NULL-terminated list.
        list = unsafe { list.add(1) };
    }
}

/// macOS: answer `getaddrinfo` through sandpit's responder at `dns`; `None` when
/// the question is libSystem's to answer (no host, or a numeric one).
///
/// # Safety
/// The caller's `getaddrinfo` arguments; `real` is libSystem's.
#[cfg(target_os = "macos")]
unsafe fn via_sandpit(
    dns: std::net::SocketAddr,
    node: *const c_char,
    service: *const c_char,
    hints: *const addrinfo,
    res: *mut *mut addrinfo,
    real: getaddrinfo::Sig,
) -> Result<Option<c_int>, c_int> {
    use super::ask;
    // SAFETY: per the contract.
    let Some(name) = (unsafe { crate::sys::cstr(node) }) else {
        return Ok(None);
    };
    let h = if hints.is_null() {
        ask::Hints::default()
    } else {
        // SAFETY: the caller's hints.
        let h = unsafe { &*hints };
        ask::Hints {
            family: h.ai_family,
            socktype: h.ai_socktype,
            protocol: h.ai_protocol,
            flags: h.ai_flags,
        }
    };
    let numeric = std::str::from_utf8(name)
        .map(|n| n.parse::<IpAddr>().is_ok() || n.contains('%'))
        .unwrap_or(false);
    if numeric || h.flags & libc::AI_NUMERICHOST != 0 || res.is_null() {
        return Ok(None);
    }
    let real_free = freeaddrinfo::real()?;
    // SAFETY: the caller's service string; libSystem's functions.
    let port = match unsafe { ask::port_of(service, h, real, real_free) } {
        Ok(p) => p,
        Err(e) => return Ok(Some(e)),
    };
    let addrs = match ask::resolve(dns, name, h.family) {
        Ok(a) => a,
        Err(e) => return Ok(Some(e)),
    };
    // SAFETY: a fresh list handed to the caller, freed by `freeaddrinfo` below.
    match unsafe { ask::build(&addrs, port, h, Some(name)) } {
        Ok(list) => {
            // SAFETY: the caller's out-pointer, checked non-NULL above.
            unsafe { *res = list };
            Ok(Some(0))
        }
        Err(e) => Ok(Some(e)),
    }
}

hook! {
    fn getaddrinfo(node: *const c_char, service: *const c_char, hints: *const addrinfo, res: *mut *mut addrinfo) -> c_int;
    fail = libc::EAI_SYSTEM;
    |real| {
        let st = crate::state::get()?;
        #[cfg(target_os = "macos")]
        if let Some(dns) = st.dns {
            // SAFETY: the caller's arguments; `real` is libSystem's getaddrinfo.
            if let Some(r) = unsafe { via_sandpit(dns, node, service, hints, res, real) }? {
                return Ok(r);
            }
        }
        // SAFETY: the caller's arguments, forwarded.
        let r = unsafe { real(node, service, hints, res) };
        if r == 0 && !res.is_null() {
            // SAFETY: on success *res is the result list.
            unsafe { record_ai(node, *res) };
        } else if r != 0 {
            // SAFETY: the caller's strings.
            unsafe { say_refused(st, node, service) };
        }
        Ok(r)
    }
}

/// After a failed lookup: where the policy refuses the name (offline mode, a host
/// missing from `network.allow`), one line naming the rule; a name the policy allows
/// failed for its own reasons and is left to the program.
///
/// # Safety
/// `node` and `service` are NULL or NUL-terminated.
unsafe fn say_refused(st: &crate::state::State, node: *const c_char, service: *const c_char) {
    // SAFETY: per the contract.
    let Some(name) = (unsafe { crate::sys::cstr(node) }) else {
        return;
    };
    let Ok(name) = std::str::from_utf8(name) else {
        return;
    };
    if name.is_empty() || name.parse::<IpAddr>().is_ok() {
        return;
    }
    // The port only picks port-bound allow entries; a service by name is https's.
    // SAFETY: per the contract.
    let port = unsafe { crate::sys::cstr(service) }
        .and_then(|s| std::str::from_utf8(s).ok()?.parse::<u16>().ok())
        .unwrap_or(443);
    if let Some(d) = st.decider.lookup(name, port) {
        crate::report::lookup_refused(name.as_bytes(), &d);
    }
}

#[cfg(target_os = "macos")]
hook! {
    fn freeaddrinfo(ai: *mut addrinfo) -> ();
    fail = ();
    |real| {
        if super::ask::forget(ai) {
            // SAFETY: a list `via_sandpit` made, handed back once.
            unsafe { super::ask::free_list(ai) };
        } else {
            // SAFETY: libSystem's own list, to libSystem.
            unsafe { real(ai) };
        }
        Ok(())
    }
}

/// macOS: a `hostent` in thread-local storage, as libSystem's `gethostbyname`
/// returns one (valid until the thread's next call).
#[cfg(target_os = "macos")]
mod host_buf {
    use libc::{c_char, hostent};
    use std::cell::UnsafeCell;
    use std::net::IpAddr;

    const MAX: usize = 16;

    pub struct Buf {
        name: [c_char; 256],
        aliases: [*mut c_char; 1],
        addrs: [[u8; 16]; MAX],
        list: [*mut c_char; MAX + 1],
        h: hostent,
    }

    thread_local! {
        static BUF: UnsafeCell<Buf> = const { UnsafeCell::new(Buf {
            name: [0; 256],
            aliases: [std::ptr::null_mut(); 1],
            addrs: [[0; 16]; MAX],
            list: [std::ptr::null_mut(); MAX + 1],
            h: hostent {
                h_name: std::ptr::null_mut(),
                h_aliases: std::ptr::null_mut(),
                h_addrtype: 0,
                h_length: 0,
                h_addr_list: std::ptr::null_mut(),
            },
        }) };
    }

    /// Fill this thread's `hostent` with `name` and the addresses of family `af`.
    pub fn fill(name: &[u8], af: libc::c_int, addrs: &[IpAddr]) -> *mut hostent {
        BUF.with(|b| {
            // SAFETY: this thread's buffer; no reference to it outlives this call
            // but the pointers handed to the caller, as libSystem's own.
            let b = unsafe { &mut *b.get() };
            let n = name.len().min(b.name.len() - 1);
            for (d, s) in b.name.iter_mut().zip(&name[..n]) {
                *d = *s as c_char;
            }
            b.name[n] = 0;
            b.aliases[0] = std::ptr::null_mut();
            let mut k = 0;
            for a in addrs {
                let bytes: &[u8] = match (a, af) {
                    (IpAddr::V4(v4), libc::AF_INET) => &v4.octets()[..],
                    (IpAddr::V6(v6), libc::AF_INET6) => &v6.octets()[..],
                    _ => continue,
                };
                if k == MAX {
                    break;
                }
                b.addrs[k][..bytes.len()].copy_from_slice(bytes);
                k += 1;
            }
            for i in 0..=MAX {
                b.list[i] = if i < k {
                    b.addrs[i].as_mut_ptr().cast()
                } else {
                    std::ptr::null_mut()
                };
            }
            b.h = hostent {
                h_name: b.name.as_mut_ptr(),
                h_aliases: b.aliases.as_mut_ptr(),
                h_addrtype: af,
                h_length: if af == libc::AF_INET { 4 } else { 16 },
                h_addr_list: b.list.as_mut_ptr(),
            };
            if k == 0 {
                std::ptr::null_mut()
            } else {
                &mut b.h as *mut hostent
            }
        })
    }
}

/// macOS: `gethostbyname2` through sandpit's responder; `None` when the name is
/// numeric (libSystem's to answer).
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[cfg(target_os = "macos")]
unsafe fn host_via_sandpit(
    dns: std::net::SocketAddr,
    name: *const c_char,
    af: c_int,
) -> Result<Option<*mut hostent>, c_int> {
    // SAFETY: per the contract.
    let n = unsafe { crate::sys::cstr(name) }.ok_or(libc::EFAULT)?;
    if std::str::from_utf8(n).is_ok_and(|s| s.parse::<IpAddr>().is_ok()) {
        return Ok(None);
    }
    if af != libc::AF_INET && af != libc::AF_INET6 {
        return Err(libc::EAFNOSUPPORT);
    }
    match super::ask::resolve(dns, n, af) {
        Ok(addrs) => Ok(Some(host_buf::fill(n, af, &addrs))),
        Err(_) => Ok(Some(std::ptr::null_mut())),
    }
}

hook! {
    fn gethostbyname(name: *const c_char) -> *mut hostent;
    fail = std::ptr::null_mut();
    |real| {
        #[cfg_attr(not(target_os = "macos"), allow(unused_variables))]
        let st = crate::state::get()?;
        #[cfg(target_os = "macos")]
        if let Some(dns) = st.dns {
            // SAFETY: the caller's argument.
            if let Some(h) = unsafe { host_via_sandpit(dns, name, libc::AF_INET) }? {
                return Ok(h);
            }
        }
        // SAFETY: the caller's argument, forwarded.
        let h = unsafe { real(name) };
        // SAFETY: the resolver's answer.
        unsafe { record_he(name, h) };
        Ok(h)
    }
}

hook! {
    fn gethostbyname2(name: *const c_char, af: c_int) -> *mut hostent;
    fail = std::ptr::null_mut();
    |real| {
        #[cfg_attr(not(target_os = "macos"), allow(unused_variables))]
        let st = crate::state::get()?;
        #[cfg(target_os = "macos")]
        if let Some(dns) = st.dns {
            // SAFETY: the caller's arguments.
            if let Some(h) = unsafe { host_via_sandpit(dns, name, af) }? {
                return Ok(h);
            }
        }
        // SAFETY: the caller's arguments, forwarded.
        let h = unsafe { real(name, af) };
        // SAFETY: the resolver's answer.
        unsafe { record_he(name, h) };
        Ok(h)
    }
}

#[cfg(target_os = "linux")]
hook! {
    fn gethostbyname_r(name: *const c_char, ret: *mut hostent, buf: *mut c_char, len: libc::size_t, result: *mut *mut hostent, herr: *mut c_int) -> c_int;
    fail = libc::EPERM;
    |real| {
        crate::state::get()?;
        // SAFETY: the caller's arguments, forwarded.
        let r = unsafe { real(name, ret, buf, len, result, herr) };
        if r == 0 && !result.is_null() {
            // SAFETY: on success *result is NULL or `ret`.
            unsafe { record_he(name, *result) };
        }
        Ok(r)
    }
}

#[cfg(target_os = "linux")]
hook! {
    fn gethostbyname2_r(name: *const c_char, af: c_int, ret: *mut hostent, buf: *mut c_char, len: libc::size_t, result: *mut *mut hostent, herr: *mut c_int) -> c_int;
    fail = libc::EPERM;
    |real| {
        crate::state::get()?;
        // SAFETY: the caller's arguments, forwarded.
        let r = unsafe { real(name, af, ret, buf, len, result, herr) };
        if r == 0 && !result.is_null() {
            // SAFETY: on success *result is NULL or `ret`.
            unsafe { record_he(name, *result) };
        }
        Ok(r)
    }
}
