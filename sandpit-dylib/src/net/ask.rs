//! Name resolution through sandpit's DNS responder, for macOS, where the profile
//! leaves libSystem's resolver (mDNSResponder) unreachable: the resolver hooks send
//! the question over TCP (two-byte length, then the message) to the responder's
//! loopback address the launcher passed (`SANDPIT_DNS`), which answers by the
//! policy and audits each refusal with the rule that decided it. Allowed names get
//! their addresses (remembered with the name, so the proxy learns which name a
//! connection to them was meant for); refused and unknown names fail as
//! `EAI_NONAME`.
//!
//! Compiled into the macOS library and into this crate's tests on Linux, where the
//! wire format, the exchange with a responder and the `addrinfo` lists are
//! unit-tested (the Linux library resolves through the resolver of the network
//! namespace instead).
use libc::{addrinfo, c_char, c_int};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::Duration;

pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
pub const RCODE_NOERROR: u8 = 0;
pub const RCODE_NXDOMAIN: u8 = 3;
pub const RCODE_REFUSED: u8 = 5;

/// How long one question may take (the responder itself asks upstream with its
/// own timeout, shorter than this).
const TIMEOUT: Duration = Duration::from_secs(10);

/// A query for `name` (dots between labels, an optional trailing dot) of type
/// `qtype`, recursion desired. `None` for a name DNS cannot carry.
pub fn query(id: u16, name: &[u8], qtype: u16) -> Option<Vec<u8>> {
    let name = name.strip_suffix(b".").unwrap_or(name);
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    let mut q = Vec::with_capacity(18 + name.len());
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split(|&b| b == b'.') {
        if label.is_empty() || label.len() > 63 {
            return None;
        }
        q.push(label.len() as u8);
        q.extend_from_slice(label);
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    Some(q)
}

/// Skip a (possibly compressed) name at `at`; the offset after it.
fn skip_name(m: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *m.get(at)?;
        if len & 0xC0 == 0xC0 {
            return Some(at + 2);
        }
        if len == 0 {
            return Some(at + 1);
        }
        at += 1 + usize::from(len);
    }
}

fn u16_at(m: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*m.get(at)?, *m.get(at + 1)?]))
}

/// The rcode and the A/AAAA addresses of an answer to query `id`. `None` for a
/// message that is no answer to it.
pub fn parse(m: &[u8], id: u16) -> Option<(u8, Vec<IpAddr>)> {
    if u16_at(m, 0)? != id || m.get(2)? & 0x80 == 0 {
        return None;
    }
    let rcode = m.get(3)? & 0x0F;
    let qd = u16_at(m, 4)?;
    let an = u16_at(m, 6)?;
    let mut at = 12;
    for _ in 0..qd {
        at = skip_name(m, at)? + 4;
    }
    let mut addrs = vec![];
    for _ in 0..an {
        at = skip_name(m, at)?;
        let rtype = u16_at(m, at)?;
        let rdlen = usize::from(u16_at(m, at + 8)?);
        let data = m.get(at + 10..at + 10 + rdlen)?;
        match (rtype, rdlen) {
            (TYPE_A, 4) => addrs.push(IpAddr::V4(Ipv4Addr::new(
                data[0], data[1], data[2], data[3],
            ))),
            (TYPE_AAAA, 16) => {
                let mut b = [0u8; 16];
                b.copy_from_slice(data);
                addrs.push(IpAddr::V6(Ipv6Addr::from(b)));
            }
            _ => {}
        }
        at += 10 + rdlen;
    }
    Some((rcode, addrs))
}

static NEXT_ID: AtomicU16 = AtomicU16::new(0x5a17);

/// Ask the responder at `dns` one question. `Err(EAI_AGAIN)` when it cannot be
/// reached or gives no answer to the question.
pub fn ask(dns: SocketAddr, name: &[u8], qtype: u16) -> Result<(u8, Vec<IpAddr>), c_int> {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let q = query(id, name, qtype).ok_or(libc::EAI_NONAME)?;
    let again = |_| libc::EAI_AGAIN;
    let mut s = std::net::TcpStream::connect_timeout(&dns, TIMEOUT).map_err(again)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(again)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(again)?;
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).map_err(again)?;
    let mut len = [0u8; 2];
    s.read_exact(&mut len).map_err(again)?;
    let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut m).map_err(again)?;
    parse(&m, id).ok_or(libc::EAI_AGAIN)
}

/// The addresses of `name` for `family` (`AF_INET`, `AF_INET6` or `AF_UNSPEC`:
/// IPv4 first), each remembered with the name. A refused name (the responder
/// audits it with its rule), an unknown one, or one without addresses is
/// `EAI_NONAME`; `localhost` is loopback without asking.
pub fn resolve(dns: SocketAddr, name: &[u8], family: c_int) -> Result<Vec<IpAddr>, c_int> {
    let want: &[u16] = match family {
        libc::AF_INET => &[TYPE_A],
        libc::AF_INET6 => &[TYPE_AAAA],
        libc::AF_UNSPEC => &[TYPE_A, TYPE_AAAA],
        _ => return Err(libc::EAI_FAMILY),
    };
    let bare = name.strip_suffix(b".").unwrap_or(name);
    let mut out = vec![];
    if bare.eq_ignore_ascii_case(b"localhost") {
        for t in want {
            out.push(match *t {
                TYPE_A => IpAddr::V4(Ipv4Addr::LOCALHOST),
                _ => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        return Ok(out);
    }
    for t in want {
        let (rcode, addrs) = ask(dns, name, *t)?;
        match rcode {
            RCODE_NOERROR => out.extend(addrs),
            RCODE_REFUSED | RCODE_NXDOMAIN => return Err(libc::EAI_NONAME),
            _ => return Err(libc::EAI_AGAIN),
        }
    }
    if out.is_empty() {
        return Err(libc::EAI_NONAME);
    }
    for a in &out {
        super::names::record(*a, bare);
    }
    Ok(out)
}

/// Lists this library made, recognised by `freeaddrinfo` (heads; 0 is free).
static OURS: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];

fn remember(head: *mut addrinfo) {
    for slot in &OURS {
        if slot
            .compare_exchange(0, head as usize, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
    // Full: the list is still freed correctly by libSystem's freeaddrinfo, whose
    // layout (node, address and canonical name each their own malloc) it follows.
}

/// Take `head` out of the table: true when this library made it.
pub fn forget(head: *mut addrinfo) -> bool {
    if head.is_null() {
        return false;
    }
    OURS.iter().any(|slot| {
        slot.compare_exchange(head as usize, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })
}

/// What the caller asked for in `hints` (all zero without hints).
#[derive(Clone, Copy, Default)]
pub struct Hints {
    pub family: c_int,
    pub socktype: c_int,
    pub protocol: c_int,
    pub flags: c_int,
}

/// A list of `addrinfo` for `addrs` with `port`: one node per address and socket
/// type (stream and datagram when the hints name none), each node, its address and
/// the canonical name (first node, with `AI_CANONNAME`) allocated with `malloc`,
/// as libSystem's `freeaddrinfo` frees them. `Err(EAI_MEMORY)` when allocation fails.
///
/// # Safety
/// The result is freed with [`free_list`] (or `freeaddrinfo`).
pub unsafe fn build(
    addrs: &[IpAddr],
    port: u16,
    hints: Hints,
    canon: Option<&[u8]>,
) -> Result<*mut addrinfo, c_int> {
    let kinds: &[(c_int, c_int)] = match (hints.socktype, hints.protocol) {
        (0, 0) => &[
            (libc::SOCK_STREAM, libc::IPPROTO_TCP),
            (libc::SOCK_DGRAM, libc::IPPROTO_UDP),
        ],
        (0, libc::IPPROTO_TCP) | (libc::SOCK_STREAM, _) => {
            &[(libc::SOCK_STREAM, libc::IPPROTO_TCP)]
        }
        (0, libc::IPPROTO_UDP) | (libc::SOCK_DGRAM, _) => &[(libc::SOCK_DGRAM, libc::IPPROTO_UDP)],
        _ => return Err(libc::EAI_SOCKTYPE),
    };
    let mut head: *mut addrinfo = std::ptr::null_mut();
    let mut tail: *mut *mut addrinfo = &mut head;
    for ip in addrs {
        for &(socktype, protocol) in kinds {
            let (ss, len) = super::encode(
                SocketAddr::new(*ip, port),
                if ip.is_ipv4() {
                    libc::AF_INET
                } else {
                    libc::AF_INET6
                },
            );
            // SAFETY: malloc of the sizes written below; checked for NULL.
            let (node, addr) = unsafe {
                (
                    libc::malloc(std::mem::size_of::<addrinfo>()).cast::<addrinfo>(),
                    libc::malloc(len as usize).cast::<libc::sockaddr>(),
                )
            };
            if node.is_null() || addr.is_null() {
                // SAFETY: NULL or our own allocations; the list so far is ours.
                unsafe {
                    libc::free(node.cast());
                    libc::free(addr.cast());
                    free_list(head);
                }
                return Err(libc::EAI_MEMORY);
            }
            // SAFETY: `addr` has room for `len` bytes of `ss`; `node` is a fresh
            // allocation of one addrinfo, written whole; `tail` points at the
            // last `ai_next` (or `head`).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (&ss as *const libc::sockaddr_storage).cast::<u8>(),
                    addr.cast::<u8>(),
                    len as usize,
                );
                let mut ai: addrinfo = std::mem::zeroed();
                ai.ai_family = c_int::from((*addr).sa_family);
                ai.ai_socktype = socktype;
                ai.ai_protocol = protocol;
                ai.ai_addrlen = len;
                ai.ai_addr = addr;
                node.write(ai);
                *tail = node;
                tail = &mut (*node).ai_next;
            }
        }
    }
    if let (Some(c), false) = (canon, head.is_null()) {
        if hints.flags & libc::AI_CANONNAME != 0 {
            // SAFETY: one byte more than the name for its NUL; checked for NULL.
            let p = unsafe { libc::malloc(c.len() + 1) }.cast::<c_char>();
            if p.is_null() {
                // SAFETY: our own list.
                unsafe { free_list(head) };
                return Err(libc::EAI_MEMORY);
            }
            // SAFETY: `p` has c.len() + 1 bytes; `head` is a node of ours.
            unsafe {
                std::ptr::copy_nonoverlapping(c.as_ptr().cast::<c_char>(), p, c.len());
                *p.add(c.len()) = 0;
                (*head).ai_canonname = p;
            }
        }
    }
    if head.is_null() {
        return Err(libc::EAI_NONAME);
    }
    remember(head);
    Ok(head)
}

/// Free a list made by [`build`].
///
/// # Safety
/// `head` is NULL or a list from [`build`], not used afterwards.
pub unsafe fn free_list(mut head: *mut addrinfo) {
    while !head.is_null() {
        // SAFETY: a node of ours: it, its address and its name are malloc'ed.
        unsafe {
            let next = (*head).ai_next;
            libc::free((*head).ai_addr.cast());
            libc::free((*head).ai_canonname.cast());
            libc::free(head.cast());
            head = next;
        }
    }
}

/// The port of `service`: none, a number, or a name the real `getaddrinfo`
/// looks up in the services database without a host (no network).
///
/// # Safety
/// `service` is NULL or NUL-terminated; `real` is libSystem's `getaddrinfo`.
pub unsafe fn port_of(
    service: *const c_char,
    hints: Hints,
    real: unsafe extern "C" fn(
        *const c_char,
        *const c_char,
        *const addrinfo,
        *mut *mut addrinfo,
    ) -> c_int,
    real_free: unsafe extern "C" fn(*mut addrinfo),
) -> Result<u16, c_int> {
    // SAFETY: per the contract.
    let Some(s) = (unsafe { crate::sys::cstr(service) }) else {
        return Ok(0);
    };
    if let Some(n) = std::str::from_utf8(s)
        .ok()
        .and_then(|t| t.parse::<u16>().ok())
    {
        return Ok(n);
    }
    if hints.flags & libc::AI_NUMERICSERV != 0 {
        return Err(libc::EAI_NONAME);
    }
    // SAFETY: all-zero is a valid addrinfo for hints.
    let mut h: addrinfo = unsafe { std::mem::zeroed() };
    h.ai_family = libc::AF_INET;
    h.ai_socktype = hints.socktype;
    h.ai_protocol = hints.protocol;
    let mut res: *mut addrinfo = std::ptr::null_mut();
    // SAFETY: no host: only the services database is read.
    let r = unsafe { real(std::ptr::null(), service, &h, &mut res) };
    if r != 0 {
        return Err(r);
    }
    // SAFETY: on success `res` is a list of at least one node with an address.
    let port = unsafe { super::decode((*res).ai_addr, (*res).ai_addrlen) }.map(|a| a.port());
    // SAFETY: the list the real getaddrinfo returned.
    unsafe { real_free(res) };
    port.ok_or(libc::EAI_SERVICE)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::net::TcpListener;

    /// A responder like the launcher's: answers `ok.test` with two addresses,
    /// REFUSED for `blocked.test`, NXDOMAIN for anything else; every question
    /// asked is recorded.
    fn responder() -> (SocketAddr, std::sync::mpsc::Receiver<(String, u16)>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                let mut len = [0u8; 2];
                while s.read_exact(&mut len).is_ok() {
                    let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                    s.read_exact(&mut q).unwrap();
                    // The question: labels from offset 12, then type.
                    let mut at = 12;
                    let mut labels = vec![];
                    while q[at] != 0 {
                        let n = usize::from(q[at]);
                        labels.push(String::from_utf8(q[at + 1..at + 1 + n].to_vec()).unwrap());
                        at += 1 + n;
                    }
                    let qtype = u16::from_be_bytes([q[at + 1], q[at + 2]]);
                    let name = labels.join(".");
                    tx.send((name.clone(), qtype)).unwrap();
                    let qend = at + 5;
                    let rcode = match name.as_str() {
                        "ok.test" => 0,
                        "blocked.test" => 5,
                        _ => 3,
                    };
                    let mut a = q[..2].to_vec();
                    a.extend_from_slice(&[0x81, 0x80 | rcode]);
                    let answers: Vec<Vec<u8>> = match (rcode, qtype) {
                        (0, TYPE_A) => vec![vec![127, 0, 0, 9]],
                        (0, TYPE_AAAA) => vec![Ipv6Addr::LOCALHOST.octets().to_vec()],
                        _ => vec![],
                    };
                    a.extend_from_slice(&[0, 1, 0, answers.len() as u8, 0, 0, 0, 0]);
                    a.extend_from_slice(&q[12..qend]);
                    for d in answers {
                        // Compressed name pointing at the question.
                        a.extend_from_slice(&[0xC0, 12]);
                        a.extend_from_slice(&qtype.to_be_bytes());
                        a.extend_from_slice(&[0, 1, 0, 0, 0, 30, 0, d.len() as u8]);
                        a.extend_from_slice(&d);
                    }
                    let mut framed = (a.len() as u16).to_be_bytes().to_vec();
                    framed.extend_from_slice(&a);
                    s.write_all(&framed).unwrap();
                }
            }
        });
        (addr, rx)
    }

    #[test]
    fn queries_are_well_formed_and_refuse_what_dns_cannot_carry() {
        let q = query(0x1234, b"ok.test.", TYPE_AAAA).unwrap();
        assert_eq!(&q[..4], &[0x12, 0x34, 0x01, 0x00]);
        assert_eq!(&q[12..], b"\x02ok\x04test\x00\x00\x1c\x00\x01");
        assert_eq!(
            query(1, b"ok.test", TYPE_A).unwrap()[12..],
            q[12..q.len() - 4]
                .iter()
                .copied()
                .chain([0, 1, 0, 1])
                .collect::<Vec<u8>>()[..]
        );
        for bad in [&b""[..], b".", b"a..b", &[b'x'; 64][..], &[b'a'; 254][..]] {
            assert!(query(1, bad, TYPE_A).is_none(), "{bad:?}");
        }
        // A reply to another id, or a query (QR clear), is no answer.
        let mut r = q.clone();
        assert!(parse(&r, 0x1234).is_none());
        r[2] |= 0x80;
        assert_eq!(parse(&r, 0x1234), Some((0, vec![])));
        assert!(parse(&r, 0x1235).is_none());
        // Truncated answers: no panic, no answer.
        for cut in 0..r.len() {
            let _ = parse(&r[..cut], 0x1234);
        }
    }

    #[test]
    fn allowed_names_answer_refused_and_unknown_ones_fail() {
        let (dns, asked) = responder();
        let got = resolve(dns, b"ok.test", libc::AF_UNSPEC).unwrap();
        assert_eq!(
            got,
            vec![
                IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9)),
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            ]
        );
        assert_eq!(asked.recv().unwrap(), ("ok.test".into(), TYPE_A));
        assert_eq!(asked.recv().unwrap(), ("ok.test".into(), TYPE_AAAA));
        // The name is remembered for the proxy.
        let mut buf = [0u8; super::super::names::HOST_MAX];
        let n = super::super::names::lookup(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9)), &mut buf);
        assert_eq!(n.map(|n| &buf[..n]), Some(&b"ok.test"[..]));
        assert_eq!(
            resolve(dns, b"ok.test", libc::AF_INET6).unwrap(),
            vec![IpAddr::V6(Ipv6Addr::LOCALHOST)]
        );
        assert_eq!(asked.recv().unwrap(), ("ok.test".into(), TYPE_AAAA));
        // Refused (the responder audits the rule) and unknown: EAI_NONAME.
        assert_eq!(
            resolve(dns, b"blocked.test", libc::AF_INET),
            Err(libc::EAI_NONAME)
        );
        assert_eq!(asked.recv().unwrap(), ("blocked.test".into(), TYPE_A));
        assert_eq!(
            resolve(dns, b"nowhere.test", libc::AF_UNSPEC),
            Err(libc::EAI_NONAME)
        );
        // localhost is answered here, nothing asked.
        assert_eq!(
            resolve(dns, b"LocalHost.", libc::AF_INET).unwrap(),
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]
        );
        assert_eq!(asked.recv().unwrap().0, "nowhere.test");
        assert!(asked.try_recv().is_err(), "localhost was asked for");
        // A family other than IPv4/IPv6.
        assert_eq!(
            resolve(dns, b"ok.test", libc::AF_UNIX),
            Err(libc::EAI_FAMILY)
        );
    }

    #[test]
    fn no_responder_is_eai_again() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = l.local_addr().unwrap();
        drop(l);
        assert_eq!(
            resolve(dead, b"ok.test", libc::AF_INET),
            Err(libc::EAI_AGAIN)
        );
    }

    #[test]
    fn addrinfo_lists_carry_every_address_and_socket_type() {
        let addrs = [
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9)),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ];
        let hints = Hints {
            flags: libc::AI_CANONNAME,
            ..Hints::default()
        };
        // SAFETY: the list is walked while alive and freed once.
        unsafe {
            let head = build(&addrs, 443, hints, Some(b"ok.test")).unwrap();
            let mut seen = vec![];
            let mut n = head;
            while !n.is_null() {
                let ai = &*n;
                let a = super::super::decode(ai.ai_addr, ai.ai_addrlen).unwrap();
                seen.push((a, ai.ai_family, ai.ai_socktype, ai.ai_protocol));
                n = ai.ai_next;
            }
            let v4: SocketAddr = "127.0.0.9:443".parse().unwrap();
            let v6: SocketAddr = "[::1]:443".parse().unwrap();
            assert_eq!(
                seen,
                vec![
                    (v4, libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP),
                    (v4, libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_UDP),
                    (v6, libc::AF_INET6, libc::SOCK_STREAM, libc::IPPROTO_TCP),
                    (v6, libc::AF_INET6, libc::SOCK_DGRAM, libc::IPPROTO_UDP),
                ]
            );
            assert_eq!(
                std::ffi::CStr::from_ptr((*head).ai_canonname).to_bytes(),
                b"ok.test"
            );
            assert!((*(*head).ai_next).ai_canonname.is_null());
            assert!(forget(head), "a list of ours is recognised");
            assert!(!forget(head), "only once");
            free_list(head);

            let stream = Hints {
                socktype: libc::SOCK_STREAM,
                ..Hints::default()
            };
            let head = build(&addrs[..1], 80, stream, Some(b"ok.test")).unwrap();
            assert!((*head).ai_next.is_null());
            assert!((*head).ai_canonname.is_null(), "no AI_CANONNAME asked");
            assert!(forget(head));
            free_list(head);
            let raw = Hints {
                socktype: libc::SOCK_RAW,
                ..Hints::default()
            };
            assert_eq!(build(&addrs, 80, raw, None), Err(libc::EAI_SOCKTYPE));
            assert!(!forget(std::ptr::null_mut()));
        }
    }
}
