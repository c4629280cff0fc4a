//! The IP packets of the UDP relay (`udp.rs`): what the sandbox's kernel sends
//! through its TUN device, parsed, and what goes back, built with correct checksums.
//! Pure: no I/O. Only what the relay acts on is understood: UDP and TCP over IPv4
//! without fragmentation, and over IPv6 without extension headers; everything else
//! is [`Packet::Other`] and dropped.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const UDP: u8 = 17;
const TCP: u8 = 6;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;

/// TCP flags.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// Hop limit of what the relay writes back (as a host one hop away would).
const TTL: u8 = 64;

/// What one packet from the sandbox is, as far as the relay cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet<'a> {
    Udp {
        src: SocketAddr,
        dst: SocketAddr,
        payload: &'a [u8],
    },
    Tcp {
        src: SocketAddr,
        dst: SocketAddr,
        seq: u32,
        ack: u32,
        flags: u8,
        /// Bytes of payload (what a reset's acknowledgement counts).
        len: u32,
    },
    Other,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The IP header's source and destination, the transport protocol and its bytes.
pub fn ip_layer(p: &[u8]) -> Option<(IpAddr, IpAddr, u8, &[u8])> {
    match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if ihl < 20 || p.len() < ihl {
                return None;
            }
            let total = usize::from(be16(p, 2));
            // A fragment (more to come, or not the first) is not a whole datagram.
            if total < ihl || total > p.len() || be16(p, 6) & 0x3fff != 0 {
                return None;
            }
            let src = Ipv4Addr::from(be32(p, 12));
            let dst = Ipv4Addr::from(be32(p, 16));
            Some((src.into(), dst.into(), p[9], &p[ihl..total]))
        }
        6 => {
            if p.len() < 40 {
                return None;
            }
            let end = 40 + usize::from(be16(p, 4));
            if end > p.len() {
                return None;
            }
            let mut a = [0u8; 16];
            a.copy_from_slice(&p[8..24]);
            let src = Ipv6Addr::from(a);
            a.copy_from_slice(&p[24..40]);
            let dst = Ipv6Addr::from(a);
            // Extension headers (fragments among them) are not followed: dropped.
            Some((src.into(), dst.into(), p[6], &p[40..end]))
        }
        _ => None,
    }
}

/// Parse one packet read from the TUN device.
pub fn parse(p: &[u8]) -> Packet<'_> {
    let Some((s, d, proto, t)) = ip_layer(p) else {
        return Packet::Other;
    };
    match proto {
        UDP if t.len() >= 8 => {
            let len = usize::from(be16(t, 4));
            if len < 8 || len > t.len() {
                return Packet::Other;
            }
            Packet::Udp {
                src: SocketAddr::new(s, be16(t, 0)),
                dst: SocketAddr::new(d, be16(t, 2)),
                payload: &t[8..len],
            }
        }
        TCP if t.len() >= 20 => {
            let off = usize::from(t[12] >> 4) * 4;
            if off < 20 || off > t.len() {
                return Packet::Other;
            }
            Packet::Tcp {
                src: SocketAddr::new(s, be16(t, 0)),
                dst: SocketAddr::new(d, be16(t, 2)),
                seq: be32(t, 4),
                ack: be32(t, 8),
                flags: t[13],
                len: (t.len() - off) as u32,
            }
        }
        _ => Packet::Other,
    }
}

/// The Internet checksum's running sum (RFC 1071) of `data`, on top of `sum`.
fn sum(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

/// Fold a running sum into the one's complement checksum.
fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The Internet checksum of `data`: 0 over a header or segment whose checksum is right.
pub fn checksum(data: &[u8]) -> u16 {
    fold(sum(0, data))
}

/// The checksum of a transport segment (UDP, TCP, ICMPv6) with its pseudo-header:
/// 0 over a segment whose checksum is right.
pub fn transport_checksum(src: IpAddr, dst: IpAddr, proto: u8, segment: &[u8]) -> u16 {
    let mut acc = 0;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            acc = sum(acc, &s.octets());
            acc = sum(acc, &d.octets());
            acc += u32::from(proto);
            acc += segment.len() as u32;
        }
        _ => {
            acc = sum(acc, &v6(src).octets());
            acc = sum(acc, &v6(dst).octets());
            acc += segment.len() as u32;
            acc += u32::from(proto);
        }
    }
    fold(sum(acc, segment))
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// An IP packet from `src` to `dst` carrying `segment` of `proto`, whose checksum
/// field lies at `sum_at` in the segment (filled in here).
fn ip_packet(src: IpAddr, dst: IpAddr, proto: u8, mut segment: Vec<u8>, sum_at: usize) -> Vec<u8> {
    segment[sum_at] = 0;
    segment[sum_at + 1] = 0;
    let mut c = match (src, dst, proto) {
        // ICMP (v4) has no pseudo-header.
        (IpAddr::V4(_), IpAddr::V4(_), ICMP) => checksum(&segment),
        _ => transport_checksum(src, dst, proto, &segment),
    };
    if proto == UDP && c == 0 {
        c = 0xffff; // 0 means "no checksum" in UDP over IPv4, and is invalid over IPv6
    }
    segment[sum_at..sum_at + 2].copy_from_slice(&c.to_be_bytes());
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (20 + segment.len()) as u16;
            let mut p = Vec::with_capacity(usize::from(total));
            p.extend_from_slice(&[0x45, 0]);
            p.extend_from_slice(&total.to_be_bytes());
            // Identification 0, don't fragment.
            p.extend_from_slice(&[0, 0, 0x40, 0, TTL, proto, 0, 0]);
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            let h = checksum(&p);
            p[10..12].copy_from_slice(&h.to_be_bytes());
            p.extend_from_slice(&segment);
            p
        }
        _ => {
            let mut p = Vec::with_capacity(40 + segment.len());
            p.extend_from_slice(&[0x60, 0, 0, 0]);
            p.extend_from_slice(&(segment.len() as u16).to_be_bytes());
            p.extend_from_slice(&[proto, TTL]);
            p.extend_from_slice(&v6(src).octets());
            p.extend_from_slice(&v6(dst).octets());
            p.extend_from_slice(&segment);
            p
        }
    }
}

/// The largest UDP payload [`udp`] can carry: an IPv4 packet's length is 16 bits.
pub const MAX_UDP_PAYLOAD: usize = 65535 - 20 - 8;

/// A UDP datagram from `src` to `dst` (both of one family), or `None` when the
/// payload does not fit one IP packet.
pub fn udp(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Option<Vec<u8>> {
    if payload.len() > MAX_UDP_PAYLOAD || src.is_ipv4() != dst.is_ipv4() {
        return None;
    }
    let mut seg = Vec::with_capacity(8 + payload.len());
    seg.extend_from_slice(&src.port().to_be_bytes());
    seg.extend_from_slice(&dst.port().to_be_bytes());
    seg.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    seg.extend_from_slice(&[0, 0]);
    seg.extend_from_slice(payload);
    Some(ip_packet(src.ip(), dst.ip(), UDP, seg, 6))
}

/// The reset that answers a TCP segment (RFC 9293 §3.10.7.1, a closed port), so the
/// sender's connect() fails at once; `None` for a reset (never answered).
pub fn tcp_reset(p: &Packet<'_>) -> Option<Vec<u8>> {
    let Packet::Tcp {
        src,
        dst,
        seq,
        ack,
        flags,
        len,
    } = *p
    else {
        return None;
    };
    if flags & RST != 0 || src.is_ipv4() != dst.is_ipv4() {
        return None;
    }
    let (rseq, rack, rflags) = if flags & ACK != 0 {
        (ack, 0, RST)
    } else {
        let n = len + u32::from(flags & SYN != 0) + u32::from(flags & FIN != 0);
        (0, seq.wrapping_add(n), RST | ACK)
    };
    let mut seg = Vec::with_capacity(20);
    seg.extend_from_slice(&dst.port().to_be_bytes());
    seg.extend_from_slice(&src.port().to_be_bytes());
    seg.extend_from_slice(&rseq.to_be_bytes());
    seg.extend_from_slice(&rack.to_be_bytes());
    // Header length 20 bytes, flags, window 0, checksum, urgent pointer.
    seg.extend_from_slice(&[5 << 4, rflags, 0, 0, 0, 0, 0, 0]);
    Some(ip_packet(dst.ip(), src.ip(), TCP, seg, 16))
}

/// "Communication administratively prohibited" for `original` (a packet parsed as
/// UDP), from its destination: ICMP type 3 code 13 over IPv4 (a connected socket
/// then fails with `EHOSTUNREACH`), ICMPv6 type 1 code 1 over IPv6 (`EACCES`).
/// Carries as much of the original as RFC 1812 and RFC 4443 allow.
pub fn prohibited(original: &[u8]) -> Option<Vec<u8>> {
    let (s, d, proto, _) = ip_layer(original)?;
    if proto == ICMP || proto == ICMPV6 {
        return None; // never an error about an error
    }
    let (kind, code, keep, icmp) = match s {
        IpAddr::V4(_) => (3, 13, 576 - 20 - 8, ICMP),
        IpAddr::V6(_) => (1, 1, 1280 - 40 - 8, ICMPV6),
    };
    let mut seg = vec![kind, code, 0, 0, 0, 0, 0, 0];
    seg.extend_from_slice(&original[..original.len().min(keep)]);
    Some(ip_packet(d, s, icmp, seg, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // Captured from Linux 6.18 through a TUN device (192.0.0.8 and
    // fd5a:6e64:7069::8 on it): `sendto(b"hello sandpit")` from port 40000/40001 to
    // 1.2.3.4:5353 and [2606:4700:4700::1111]:5353, and non-blocking connects from
    // ports 40002/40003 to port 443 of the same hosts. The kernel made every checksum.
    const UDP4: &str =
        "450000295841400040111e75c0000008010203049c4014e90015806a68656c6c6f2073616e64706974";
    const UDP6: &str = "600801b300151140fd5a6e64706900000000000000000008260647004700000000000000000011119c4114e90015a32f68656c6c6f2073616e64706974";
    const SYN4: &str = "4500003cc95f40004006ad4ec0000008010203049c4201bbccae980f00000000a002faf0eabf0000020405b40402080a0fad8bd5000000000103030a";
    const SYN6: &str = "60092ae400280640fd5a6e64706900000000000000000008260647004700000000000000000011119c4301bbcc5a8e0a00000000a002fd2089b10000020405a00402080a21e305b0000000000103030a";

    fn at(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_kernels_packets_parse_and_their_checksums_verify() {
        let p = hex(UDP4);
        assert_eq!(
            parse(&p),
            Packet::Udp {
                src: at("192.0.0.8:40000"),
                dst: at("1.2.3.4:5353"),
                payload: b"hello sandpit"
            }
        );
        assert_eq!(checksum(&p[..20]), 0);
        let (s, d) = (at("192.0.0.8:0").ip(), at("1.2.3.4:0").ip());
        assert_eq!(transport_checksum(s, d, UDP, &p[20..]), 0);
        let p = hex(UDP6);
        assert_eq!(
            parse(&p),
            Packet::Udp {
                src: at("[fd5a:6e64:7069::8]:40001"),
                dst: at("[2606:4700:4700::1111]:5353"),
                payload: b"hello sandpit"
            }
        );
        let (s, d) = (
            at("[fd5a:6e64:7069::8]:0").ip(),
            at("[2606:4700:4700::1111]:0").ip(),
        );
        assert_eq!(transport_checksum(s, d, UDP, &p[40..]), 0);
        let p = hex(SYN4);
        assert_eq!(
            parse(&p),
            Packet::Tcp {
                src: at("192.0.0.8:40002"),
                dst: at("1.2.3.4:443"),
                seq: 0xccae980f,
                ack: 0,
                flags: SYN,
                len: 0
            }
        );
        assert_eq!(checksum(&p[..20]), 0);
        assert!(matches!(parse(&hex(SYN6)), Packet::Tcp { flags: SYN, .. }));
        // A checksum that is off by one bit is seen to be.
        let mut bad = hex(UDP4);
        bad[27] ^= 1;
        let (s, d) = (at("192.0.0.8:0").ip(), at("1.2.3.4:0").ip());
        assert_ne!(transport_checksum(s, d, UDP, &bad[20..]), 0);
    }

    /// What the relay builds is byte for byte what the kernel sends, but for the
    /// fields it leaves at zero (IPv4 identification, IPv6 flow label).
    #[test]
    fn built_datagrams_match_the_kernels_byte_for_byte() {
        let mut mine = udp(at("192.0.0.8:40000"), at("1.2.3.4:5353"), b"hello sandpit").unwrap();
        // The kernel's identification, and the header checksum over it.
        mine[4..6].copy_from_slice(&[0x58, 0x41]);
        mine[10..12].copy_from_slice(&[0, 0]);
        let h = checksum(&mine[..20]);
        mine[10..12].copy_from_slice(&h.to_be_bytes());
        assert_eq!(mine, hex(UDP4));
        let mut mine = udp(
            at("[fd5a:6e64:7069::8]:40001"),
            at("[2606:4700:4700::1111]:5353"),
            b"hello sandpit",
        )
        .unwrap();
        mine[1..4].copy_from_slice(&[0x08, 0x01, 0xb3]);
        assert_eq!(mine, hex(UDP6));
        // A well-known header (RFC 1071 examples elsewhere use the same one).
        let h = hex("450000730000400040110000c0a80001c0a800c7");
        assert_eq!(checksum(&h), 0xb861);
    }

    #[test]
    fn a_syn_gets_a_reset_that_acknowledges_it() {
        for syn in [SYN4, SYN6] {
            let p = hex(syn);
            let got = parse(&p);
            let rst = tcp_reset(&got).unwrap();
            let Packet::Tcp {
                src,
                dst,
                seq,
                ack,
                flags,
                len,
            } = parse(&rst)
            else {
                panic!("not TCP: {rst:?}")
            };
            let Packet::Tcp {
                src: s0,
                dst: d0,
                seq: seq0,
                ..
            } = got
            else {
                unreachable!()
            };
            assert_eq!((src, dst), (d0, s0));
            assert_eq!((seq, ack, flags, len), (0, seq0 + 1, RST | ACK, 0));
            let off = if s0.is_ipv4() { 20 } else { 40 };
            assert_eq!(transport_checksum(src.ip(), dst.ip(), TCP, &rst[off..]), 0);
            if s0.is_ipv4() {
                assert_eq!(checksum(&rst[..20]), 0);
            }
            // A reset is never answered.
            assert_eq!(tcp_reset(&parse(&rst)), None);
        }
        // A segment with ACK set gets a reset at its acknowledgement number.
        let ackd = Packet::Tcp {
            src: at("192.0.0.8:1"),
            dst: at("1.2.3.4:2"),
            seq: 7,
            ack: 99,
            flags: ACK,
            len: 10,
        };
        let r = tcp_reset(&ackd).unwrap();
        assert!(matches!(
            parse(&r),
            Packet::Tcp {
                seq: 99,
                flags: RST,
                ..
            }
        ));
    }

    #[test]
    fn a_refused_datagram_gets_a_prohibited_error_with_its_header() {
        for (p, off, kind) in [(hex(UDP4), 20, 3u8), (hex(UDP6), 40, 1)] {
            let e = prohibited(&p).unwrap();
            let (s, d, proto, seg) = ip_layer(&e).unwrap();
            let (s0, d0, ..) = ip_layer(&p).unwrap();
            assert_eq!((s, d), (d0, s0));
            assert_eq!(&seg[..2], &[kind, if kind == 3 { 13 } else { 1 }]);
            assert_eq!(&seg[8..], &p[..]);
            match proto {
                ICMP => assert_eq!(checksum(seg), 0),
                _ => assert_eq!(transport_checksum(s, d, ICMPV6, seg), 0),
            }
            assert_eq!(e.len(), off + 8 + p.len());
            // Never an error about an error.
            assert_eq!(prohibited(&e), None);
        }
    }

    #[test]
    fn fragments_options_and_garbage_are_other() {
        let mut frag = hex(UDP4);
        frag[6] = 0x20; // more fragments
        assert_eq!(parse(&frag), Packet::Other);
        let mut later = hex(UDP4);
        later[6..8].copy_from_slice(&[0x00, 0x10]); // offset 128
        assert_eq!(parse(&later), Packet::Other);
        let mut ext = hex(UDP6);
        ext[6] = 0; // hop-by-hop options first
        assert_eq!(parse(&ext), Packet::Other);
        for n in 0..hex(UDP4).len() {
            // Truncated anywhere: never a panic, never a datagram longer than sent.
            let short = &hex(UDP4)[..n];
            assert_eq!(parse(short), Packet::Other, "{n}");
        }
        let mut lying = hex(UDP4);
        lying[25] = 0xff; // UDP length beyond the packet
        assert_eq!(parse(&lying), Packet::Other);
        assert_eq!(parse(&[0x70; 64]), Packet::Other);
        // Mixed families and oversized payloads are not built.
        assert!(udp(at("1.1.1.1:1"), at("[::1]:1"), b"").is_none());
        assert!(udp(
            at("1.1.1.1:1"),
            at("2.2.2.2:1"),
            &vec![0; MAX_UDP_PAYLOAD + 1]
        )
        .is_none());
    }

    /// What the sandbox writes into the device is untrusted: no byte string, random
    /// or a captured packet with its bytes changed, truncated or extended, makes
    /// the parser or the answers built from it panic, and every answer built is
    /// itself a packet that parses with right checksums.
    #[test]
    fn hostile_packets_never_panic_and_answers_are_well_formed() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let captured: Vec<Vec<u8>> = [UDP4, UDP6, SYN4, SYN6].iter().map(|h| hex(h)).collect();
        for round in 0..20_000 {
            let mut p = if round % 4 == 0 {
                (0..(next() % 120) as usize)
                    .map(|_| next() as u8)
                    .collect::<Vec<u8>>()
            } else {
                let mut p = captured[(next() % 4) as usize].clone();
                for _ in 0..(next() % 4) {
                    let at = (next() as usize) % p.len();
                    p[at] = next() as u8;
                }
                match next() % 3 {
                    0 => p.truncate((next() as usize) % (p.len() + 1)),
                    1 => p.extend((0..(next() % 16)).map(|_| next() as u8)),
                    _ => {}
                }
                p
            };
            // The version nibble of random bytes rarely says 4 or 6: make it.
            if round % 8 == 0 && !p.is_empty() {
                p[0] = (p[0] & 0x0f) | if next() % 2 == 0 { 0x40 } else { 0x60 };
            }
            let parsed = parse(&p);
            for answer in [tcp_reset(&parsed), prohibited(&p)].into_iter().flatten() {
                let (s, d, proto, seg) = ip_layer(&answer).expect("an answer parses");
                // ICMP over IPv4 has no pseudo-header; TCP and ICMPv6 do.
                let sum = if proto == ICMP {
                    checksum(seg)
                } else {
                    transport_checksum(s, d, proto, seg)
                };
                assert_eq!(sum, 0, "{answer:?}");
                if s.is_ipv4() {
                    assert_eq!(checksum(&answer[..20]), 0, "IPv4 header: {answer:?}");
                }
            }
        }
    }
}
