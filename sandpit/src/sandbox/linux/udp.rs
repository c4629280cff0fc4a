//! UDP to public addresses in `network.mode = "unrestricted"`, for every program,
//! static ones included: the helper that makes the sandbox's network namespace also
//! makes a TUN device there ([`make_device`]), with an address of each family and
//! the default routes, and hands its descriptor to the launcher. The launcher's relay
//! ([`serve`]) reads the IP packets the sandbox sends to anywhere but loopback:
//!
//! - a UDP datagram to a destination the policy allows
//!   (`sandpit_policy::decide_datagram`, the function that decides TCP for the proxy)
//!   leaves from a host UDP socket of its flow (sandbox address and port, and
//!   destination), connected to the destination, so only its replies come back; they
//!   are written into the TUN as IP packets from the destination. At most
//!   [`MAX_FLOWS`] flows; one idle for [`IDLE`] is closed, and a new flow beyond the
//!   limit closes the one idle longest;
//! - a datagram to a refused destination gets ICMP "administratively prohibited"
//!   (a connected socket's next call fails with `EHOSTUNREACH`/`EACCES`), and the
//!   refusal goes to the audit log once per destination per [`REFUSED_FOR`];
//! - a TCP segment gets a reset, so a `connect()` past the proxy fails at once
//!   (`ECONNREFUSED`), as it does without the device;
//! - anything else (ICMP, fragments, IPv6 extension headers) is dropped.
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::packet::{self, Packet};
use super::sys;

/// The device's name inside the sandbox.
pub const DEVICE: &str = "sandpit0";
/// The sandbox's own IPv4 address: RFC 7600's dummy address, for a host with no
/// other (it never appears outside: the relay sends from the host's own sockets).
pub const ADDR4: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 8);
/// The sandbox's own IPv6 address: a unique local address of sandpit's.
pub const ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd5a, 0x6e64, 0x7069, 0, 0, 0, 0, 8);
/// The device's MTU: as large as an IPv4 datagram can be (less slirp4netns's
/// margin), so the sandbox's kernel never fragments a datagram to the relay; the
/// host's kernel fragments what it sends, as it would for a host program.
pub const MTU: u32 = 65520;
/// Flows (sandbox address and port, destination) open at once.
pub const MAX_FLOWS: usize = 256;
/// A flow with no datagram either way for this long is closed.
pub const IDLE: Duration = Duration::from_secs(60);
/// A refused destination is answered from memory (not judged and logged again) this long.
pub const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Refused destinations remembered at once.
const MAX_REFUSED: usize = 1024;

/// Decides whether a new flow may reach a destination (and records the decision).
#[derive(Clone)]
pub struct Judge(pub Arc<JudgeFn>);

/// The judge's callback: the destination; whether it may be reached.
pub type JudgeFn = dyn Fn(SocketAddr) -> bool + Send + Sync;

impl Judge {
    /// Refuses every destination (what a relay without a policy does).
    pub fn refuse_all() -> Judge {
        Judge(Arc::new(|_| false))
    }
}

impl std::fmt::Debug for Judge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Judge")
    }
}

// --- the device ----------------------------------------------------------------------

const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const RTM_NEWROUTE: u16 = 24;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const IFLA_MTU: u16 = 4;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;
const IFA_F_NODAD: u8 = 0x02;
const RTA_OIF: u16 = 4;
const RTA_PREFSRC: u16 = 7;
const RT_TABLE_MAIN: u8 = 254;
const RTPROT_STATIC: u8 = 4;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RT_SCOPE_LINK: u8 = 253;
const RTN_UNICAST: u8 = 1;

/// One rtnetlink request: header, fixed part, attributes (each padded to 4 bytes).
fn request(kind: u16, flags: u16, seq: u32, fixed: &[u8], attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    m.extend_from_slice(fixed);
    for (t, data) in attrs {
        m.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
        m.extend_from_slice(&t.to_ne_bytes());
        m.extend_from_slice(data);
        m.resize(m.len().next_multiple_of(4), 0);
    }
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    m[4..6].copy_from_slice(&kind.to_ne_bytes());
    m[6..8].copy_from_slice(&(flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    m
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn family(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => libc::AF_INET as u8,
        IpAddr::V6(_) => libc::AF_INET6 as u8,
    }
}

/// The requests that configure device `index`: up with [`MTU`], then for each of
/// `addrs` the address (IPv6 without duplicate detection, usable at once) and a
/// default route through the device from it.
fn configuration(index: u32, addrs: &[IpAddr]) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = vec![];
    let mut link = vec![libc::AF_UNSPEC as u8, 0, 0, 0];
    link.extend_from_slice(&(index as i32).to_ne_bytes());
    let up = libc::IFF_UP as u32;
    link.extend_from_slice(&up.to_ne_bytes()); // flags
    link.extend_from_slice(&up.to_ne_bytes()); // change
    out.push((
        "bringing the device up",
        request(RTM_NEWLINK, 0, 1, &link, &[(IFLA_MTU, &MTU.to_ne_bytes())]),
    ));
    for (i, ip) in addrs.iter().enumerate() {
        let a = ip_bytes(*ip);
        let prefix = (a.len() * 8) as u8;
        let seq = 2 + 2 * i as u32;
        let nodad = if ip.is_ipv6() { IFA_F_NODAD } else { 0 };
        let mut ifa = vec![family(*ip), prefix, nodad, RT_SCOPE_UNIVERSE];
        ifa.extend_from_slice(&index.to_ne_bytes());
        let flags = u32::from(nodad).to_ne_bytes();
        out.push((
            "giving it an address",
            request(
                RTM_NEWADDR,
                NLM_F_CREATE | NLM_F_EXCL,
                seq,
                &ifa,
                &[(IFA_LOCAL, &a), (IFA_ADDRESS, &a), (IFA_FLAGS, &flags)],
            ),
        ));
        let scope = if ip.is_ipv4() {
            RT_SCOPE_LINK
        } else {
            RT_SCOPE_UNIVERSE
        };
        let mut rt = vec![
            family(*ip),
            0, // a default route: destination length 0
            0,
            0,
            RT_TABLE_MAIN,
            RTPROT_STATIC,
            scope,
            RTN_UNICAST,
        ];
        rt.extend_from_slice(&0u32.to_ne_bytes());
        out.push((
            "making it the default route",
            request(
                RTM_NEWROUTE,
                NLM_F_CREATE | NLM_F_EXCL,
                seq + 1,
                &rt,
                &[(RTA_OIF, &index.to_ne_bytes()), (RTA_PREFSRC, &a)],
            ),
        ));
    }
    out
}

/// Send one request and read its acknowledgement.
fn apply(nl: BorrowedFd<'_>, msg: &[u8]) -> io::Result<()> {
    sys::send(nl, msg)?;
    let mut buf = [0u8; 1024];
    loop {
        let n = sys::recv(nl, &mut buf)?;
        if n < 20 {
            return Err(io::ErrorKind::InvalidData.into());
        }
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if kind != NLMSG_ERROR {
            continue;
        }
        let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
        return match err {
            0 => Ok(()),
            e => Err(io::Error::from_raw_os_error(-e)),
        };
    }
}

/// Make the TUN device in the current network namespace (the helper's, before it
/// hands the namespace to pid 1) and configure it; its descriptor, for the relay.
/// IPv6 is left out where the kernel or the device has none.
pub fn make_device() -> Result<OwnedFd, String> {
    let tun = sys::tun_open(DEVICE).map_err(|e| match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "opening /dev/net/tun: {e} (most distributions make it readable and writable by everyone, mode 0666)"
        ),
        Some(libc::ENOENT) | Some(libc::ENODEV) => {
            format!("opening /dev/net/tun: {e} (no TUN support here: the tun module, or the device in a container)")
        }
        _ => format!("making the TUN device: {e}"),
    })?;
    let index = sys::if_index(DEVICE).map_err(|e| format!("finding the TUN device: {e}"))?;
    let nl = sys::netlink_route().map_err(|e| format!("opening a netlink socket: {e}"))?;
    for (what, msg) in configuration(index, &[ADDR4.into()]) {
        apply(nl.as_fd(), &msg).map_err(|e| format!("TUN device: {what}: {e}"))?;
    }
    for (what, msg) in configuration(index, &[ADDR6.into()]).into_iter().skip(1) {
        match apply(nl.as_fd(), &msg) {
            Ok(()) => {}
            // No IPv6 in this kernel (booted with ipv6.disable=1), or none on the
            // device (disable_ipv6): programs cannot send over it either.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAFNOSUPPORT | libc::EOPNOTSUPP | libc::EACCES)
                ) =>
            {
                break
            }
            Err(e) => return Err(format!("TUN device: {what} (IPv6): {e}")),
        }
    }
    Ok(tun)
}

// --- the relay -----------------------------------------------------------------------

/// One flow: datagrams from `src` in the sandbox to `dst`, and the replies.
struct Flow {
    src: SocketAddr,
    dst: SocketAddr,
    sock: UdpSocket,
    /// The last datagram either way (idle flows close).
    last: Instant,
    /// When it was last used, in the relay's count of datagrams (the flow used
    /// longest ago makes way for a new one).
    used: u64,
}

/// The relay's state (one thread owns it).
struct Relay {
    tun: std::fs::File,
    judge: Judge,
    flows: Vec<Flow>,
    refused: HashMap<SocketAddr, Instant>,
    /// Datagrams relayed so far, either way.
    count: u64,
}

/// Relay the sandbox's UDP through `tun` until the device goes away (the run ends).
pub fn serve(tun: OwnedFd, judge: Judge) -> io::Result<thread::JoinHandle<()>> {
    sys::set_nonblocking(tun.as_fd())?;
    let mut relay = Relay::new(tun, judge);
    thread::Builder::new()
        .name("sandpit-udp-relay".into())
        .spawn(move || {
            let _ = relay.run();
        })
}

impl Relay {
    fn new(tun: OwnedFd, judge: Judge) -> Relay {
        Relay {
            tun: std::fs::File::from(tun),
            judge,
            flows: vec![],
            refused: HashMap::new(),
            count: 0,
        }
    }

    fn run(&mut self) -> io::Result<()> {
        let mut buf = vec![0u8; 65536];
        let mut swept = Instant::now();
        loop {
            let ready = {
                let mut fds: Vec<BorrowedFd<'_>> = vec![self.tun.as_fd()];
                fds.extend(self.flows.iter().map(|f| f.sock.as_fd()));
                sys::poll_readable(&fds, 1000)?
            };
            // Replies first: the flows' indices are those polled.
            for i in (0..self.flows.len()).rev() {
                if ready.get(i + 1) == Some(&true) {
                    self.replies(i, &mut buf);
                }
            }
            if ready.first() == Some(&true) {
                for _ in 0..256 {
                    match self.tun.read(&mut buf) {
                        Ok(0) => return Ok(()),
                        Ok(n) => self.packet(&buf[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // The device is gone with the sandbox's namespace (EBADFD).
                        Err(e) => return Err(e),
                    }
                }
            }
            if swept.elapsed() >= Duration::from_secs(1) {
                swept = Instant::now();
                self.sweep(swept);
            }
        }
    }

    /// Close the flows idle for [`IDLE`] at `now`; forget old refusals.
    fn sweep(&mut self, now: Instant) {
        self.flows
            .retain(|f| now.saturating_duration_since(f.last) < IDLE);
        self.refused
            .retain(|_, at| now.saturating_duration_since(*at) < REFUSED_FOR);
    }

    /// Pass every reply queued on flow `i` into the sandbox.
    fn replies(&mut self, i: usize, buf: &mut [u8]) {
        let f = &mut self.flows[i];
        loop {
            match f.sock.recv(buf) {
                Ok(n) => {
                    f.last = Instant::now();
                    self.count += 1;
                    f.used = self.count;
                    if let Some(p) = packet::udp(f.dst, f.src, &buf[..n]) {
                        let _ = self.tun.write(&p);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // WouldBlock: done; an ICMP error the host got (refused, unreachable)
                // is dropped, as a NAT that does not pass it on would.
                Err(_) => return,
            }
        }
    }

    fn packet(&mut self, p: &[u8]) {
        match packet::parse(p) {
            Packet::Udp { src, dst, payload } => self.datagram(p, src, dst, payload),
            tcp @ Packet::Tcp { .. } => {
                if let Some(rst) = packet::tcp_reset(&tcp) {
                    let _ = self.tun.write(&rst);
                }
            }
            Packet::Other => {}
        }
    }

    fn datagram(&mut self, p: &[u8], src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
        let now = Instant::now();
        self.count += 1;
        if let Some(f) = self.flows.iter_mut().find(|f| f.src == src && f.dst == dst) {
            f.last = now;
            f.used = self.count;
            let _ = f.sock.send(payload);
            return;
        }
        let refused = self
            .refused
            .get(&dst)
            .is_some_and(|at| now.duration_since(*at) < REFUSED_FOR);
        // A destination the host cannot reach either (no route for its family) is
        // answered and remembered the same way: the sender learns at once, and the
        // judge is not asked (and the log not written) for each datagram.
        let sock = match refused || !(self.judge.0)(dst) {
            true => None,
            false => open(dst).ok(),
        };
        let Some(sock) = sock else {
            if !refused {
                if self.refused.len() >= MAX_REFUSED {
                    self.refused.clear();
                }
                self.refused.insert(dst, now);
            }
            if let Some(e) = packet::prohibited(p) {
                let _ = self.tun.write(&e);
            }
            return;
        };
        let _ = sock.send(payload);
        if self.flows.len() >= MAX_FLOWS {
            if let Some((oldest, _)) = self.flows.iter().enumerate().min_by_key(|(_, f)| f.used) {
                self.flows.swap_remove(oldest);
            }
        }
        self.flows.push(Flow {
            src,
            dst,
            sock,
            last: now,
            used: self.count,
        });
    }
}

/// A host UDP socket connected to `dst` (only its datagrams are received).
fn open(dst: SocketAddr) -> io::Result<UdpSocket> {
    let any: SocketAddr = match dst {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = UdpSocket::bind(any)?;
    s.connect(dst)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A relay whose "device" is one end of a datagram socket pair (one packet per
    /// read and write, as a TUN device's), and the other end; its judge allows
    /// 127.0.0.1 only (the tests' echo servers) and counts its calls.
    fn relay() -> (Relay, UnixDatagram, Arc<AtomicUsize>) {
        relay_allowing(|d| d.ip() == IpAddr::from([127, 0, 0, 1]))
    }

    fn relay_allowing(
        allow: impl Fn(SocketAddr) -> bool + Send + Sync + 'static,
    ) -> (Relay, UnixDatagram, Arc<AtomicUsize>) {
        let (a, b) = UnixDatagram::pair().unwrap();
        b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let asked = Arc::new(AtomicUsize::new(0));
        let n = asked.clone();
        let judge = Judge(Arc::new(move |d: SocketAddr| {
            n.fetch_add(1, Ordering::SeqCst);
            allow(d)
        }));
        (Relay::new(OwnedFd::from(a), judge), b, asked)
    }

    fn echo() -> SocketAddr {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = s.local_addr().unwrap();
        thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = s.recv_from(&mut buf) {
                let mut r = b"ECHO ".to_vec();
                r.extend_from_slice(&buf[..n]);
                let _ = s.send_to(&r, from);
            }
        });
        at
    }

    fn inside(port: u16) -> SocketAddr {
        SocketAddr::new(ADDR4.into(), port)
    }

    /// A datagram out, its reply back in as a packet from the destination to the
    /// sender, with checksums the kernel accepts; a second datagram of the flow is
    /// not judged again.
    #[test]
    fn a_datagram_goes_out_and_its_reply_comes_back_as_a_packet() {
        let (mut r, dev, asked) = relay();
        let to = echo();
        for i in 0..2 {
            let out = packet::udp(inside(40000), to, format!("hi {i}").as_bytes()).unwrap();
            r.packet(&out);
            assert_eq!(r.flows.len(), 1);
            let fds = [r.flows[0].sock.as_fd()];
            assert!(sys::poll_readable(&fds, 5000).unwrap()[0]);
            r.replies(0, &mut [0u8; 65536]);
            let mut buf = [0u8; 65536];
            let n = dev.recv(&mut buf).unwrap();
            assert_eq!(
                packet::parse(&buf[..n]),
                Packet::Udp {
                    src: to,
                    dst: inside(40000),
                    payload: format!("ECHO hi {i}").as_bytes()
                }
            );
            assert_eq!(packet::checksum(&buf[..20]), 0);
            assert_eq!(
                packet::transport_checksum(to.ip(), ADDR4.into(), 17, &buf[20..n]),
                0
            );
        }
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    /// A refused destination gets "administratively prohibited" and opens no flow; it
    /// is judged once while remembered. A TCP segment gets a reset.
    #[test]
    fn a_refused_datagram_gets_an_error_and_a_syn_a_reset() {
        let (mut r, dev, asked) = relay();
        let lan: SocketAddr = "10.9.8.7:53".parse().unwrap();
        let mut buf = [0u8; 65536];
        for _ in 0..3 {
            r.packet(&packet::udp(inside(40001), lan, b"x").unwrap());
            let n = dev.recv(&mut buf).unwrap();
            let (s, d, proto, seg) = packet::ip_layer(&buf[..n]).unwrap();
            assert_eq!(
                (s, d, proto, seg[0], seg[1]),
                (lan.ip(), ADDR4.into(), 1, 3, 13)
            );
        }
        assert!(r.flows.is_empty());
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        // Forgotten after REFUSED_FOR: judged (and logged) again.
        r.sweep(Instant::now() + REFUSED_FOR);
        r.packet(&packet::udp(inside(40001), lan, b"x").unwrap());
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        let _ = dev.recv(&mut buf).unwrap();
        // The kernel's own SYN (captured in packet.rs's tests) to 1.2.3.4:443.
        let hex = "4500003cc95f40004006ad4ec0000008010203049c4201bbccae980f00000000a002faf0eabf0000020405b40402080a0fad8bd5000000000103030a";
        let syn_packet: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        r.packet(&syn_packet);
        let n = dev.recv(&mut buf).unwrap();
        assert!(matches!(
            packet::parse(&buf[..n]),
            Packet::Tcp { flags, ack: 0xccae9810, .. } if flags == packet::RST | packet::ACK
        ));
    }

    /// A destination allowed but out of the host's reach too (here the broadcast
    /// address, which a socket without SO_BROADCAST cannot connect to) is answered
    /// like a refused one, and not judged again for each datagram.
    #[test]
    fn an_allowed_destination_the_host_cannot_reach_is_answered_at_once() {
        let (mut r, dev, asked) = relay_allowing(|_| true);
        let to: SocketAddr = "255.255.255.255:9".parse().unwrap();
        let mut buf = [0u8; 65536];
        for _ in 0..2 {
            r.packet(&packet::udp(inside(40003), to, b"x").unwrap());
            let n = dev.recv(&mut buf).unwrap();
            let (_, _, proto, seg) = packet::ip_layer(&buf[..n]).unwrap();
            assert_eq!((proto, seg[0], seg[1]), (1, 3, 13));
        }
        assert!(r.flows.is_empty());
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    /// At most MAX_FLOWS flows: a new one closes the one idle longest; a flow idle
    /// for IDLE is closed.
    #[test]
    fn flows_are_bounded_and_expire() {
        let (mut r, _dev, _) = relay();
        let to = echo();
        for port in 0..MAX_FLOWS as u16 + 10 {
            r.packet(&packet::udp(inside(1000 + port), to, b"x").unwrap());
        }
        assert_eq!(r.flows.len(), MAX_FLOWS);
        assert!(r.flows.iter().all(|f| f.src.port() >= 1010));
        r.sweep(Instant::now() + IDLE - Duration::from_secs(1));
        assert_eq!(r.flows.len(), MAX_FLOWS);
        r.sweep(Instant::now() + IDLE);
        assert!(r.flows.is_empty());
    }

    /// The requests are what `ip link set up mtu`, `ip addr add` and `ip route add
    /// default dev` send: lengths, types, flags and attributes in place.
    #[test]
    fn the_configuration_requests_are_well_formed() {
        let msgs = configuration(7, &[ADDR4.into(), ADDR6.into()]);
        assert_eq!(msgs.len(), 5);
        for (seq, (_, m)) in msgs.iter().enumerate() {
            let len = u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize;
            assert_eq!(len, m.len());
            assert_eq!(len % 4, 0);
            let flags = u16::from_ne_bytes([m[6], m[7]]);
            assert_eq!(
                flags & (NLM_F_REQUEST | NLM_F_ACK),
                NLM_F_REQUEST | NLM_F_ACK
            );
            assert_eq!(
                u32::from_ne_bytes(m[8..12].try_into().unwrap()),
                seq as u32 + 1
            );
            // Attributes tile the rest exactly.
            let fixed = match u16::from_ne_bytes([m[4], m[5]]) {
                RTM_NEWLINK => 16,
                RTM_NEWADDR => 8,
                RTM_NEWROUTE => 12,
                t => panic!("type {t}"),
            };
            let mut at = 16 + fixed;
            while at < len {
                let alen = usize::from(u16::from_ne_bytes([m[at], m[at + 1]]));
                assert!(alen >= 4 && at + alen <= len, "{m:?}");
                at += alen.next_multiple_of(4);
            }
            assert_eq!(at, len);
        }
        // The link request names the device and sets IFF_UP in flags and change.
        let link = &msgs[0].1;
        assert_eq!(i32::from_ne_bytes(link[20..24].try_into().unwrap()), 7);
        assert_eq!(u32::from_ne_bytes(link[24..28].try_into().unwrap()), 1);
        assert_eq!(u32::from_ne_bytes(link[28..32].try_into().unwrap()), 1);
        // The IPv6 address skips duplicate detection (usable at once), IPv4's has /32.
        assert_eq!(&msgs[1].1[16..19], &[libc::AF_INET as u8, 32, 0]);
        assert_eq!(
            &msgs[3].1[16..19],
            &[libc::AF_INET6 as u8, 128, IFA_F_NODAD]
        );
        assert!(msgs[3].1.windows(16).any(|w| w == ADDR6.octets()));
        // Default routes: destination length 0, the main table, through the device.
        for r in [&msgs[2].1, &msgs[4].1] {
            assert_eq!(r[17], 0);
            assert_eq!(r[20], RT_TABLE_MAIN);
            let oif = [8u16.to_ne_bytes(), RTA_OIF.to_ne_bytes()].concat();
            assert!(r
                .windows(8)
                .any(|w| w[..4] == oif[..] && w[4..] == 7u32.to_ne_bytes()));
        }
    }
}
