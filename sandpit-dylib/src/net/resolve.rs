//! `getaddrinfo`, `gethostbyname`, `gethostbyname2`, `gethostbyname_r`,
//! `gethostbyname2_r`: the real lookup, then each answer is remembered with the
//! name asked for (see [`super::names`]).
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

hook! {
    fn getaddrinfo(node: *const c_char, service: *const c_char, hints: *const addrinfo, res: *mut *mut addrinfo) -> c_int;
    fail = libc::EAI_SYSTEM;
    |real| {
        crate::state::get()?;
        // SAFETY: the caller's arguments, forwarded.
        let r = unsafe { real(node, service, hints, res) };
        if r == 0 && !res.is_null() {
            // SAFETY: on success *res is the result list.
            unsafe { record_ai(node, *res) };
        }
        Ok(r)
    }
}

hook! {
    fn gethostbyname(name: *const c_char) -> *mut hostent;
    fail = std::ptr::null_mut();
    |real| {
        crate::state::get()?;
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
        crate::state::get()?;
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
