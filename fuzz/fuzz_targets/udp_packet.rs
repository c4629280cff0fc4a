//! The UDP relay's packets (`sandpit/src/sandbox/linux/packet.rs`) on arbitrary
//! bytes, which is what the sandbox can write to its TUN device: never panics; a
//! datagram parsed is answered (`udp`, from its destination) by a packet that parses
//! back to that answer with a right checksum; a TCP segment's reset parses as a
//! reset; a refusal (`prohibited`) is a whole IP packet with right checksums.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit::sandbox::linux::packet::{
    checksum, ip_layer, parse, prohibited, tcp_reset, transport_checksum, udp, Packet,
    MAX_UDP_PAYLOAD, RST,
};

fuzz_target!(|data: &[u8]| {
    let p = parse(data);
    check_refusal(data);
    match &p {
        Packet::Udp { src, dst, payload } => {
            // An IPv6 datagram may carry more than an IPv4 one can: no answer then.
            let Some(reply) = udp(*dst, *src, payload) else {
                assert!(payload.len() > MAX_UDP_PAYLOAD);
                return;
            };
            assert_eq!(
                parse(&reply),
                Packet::Udp {
                    src: *dst,
                    dst: *src,
                    payload
                }
            );
            let (s, d, proto, seg) = ip_layer(&reply).expect("an IP packet");
            assert_eq!(transport_checksum(s, d, proto, seg), 0);
        }
        Packet::Tcp { .. } => {
            if let Some(r) = tcp_reset(&p) {
                match parse(&r) {
                    Packet::Tcp { flags, .. } => assert!(flags & RST != 0),
                    other => panic!("a reset parsed as {other:?}"),
                }
            }
        }
        Packet::Other => {}
    }
});

fn check_refusal(data: &[u8]) {
    if let Some(icmp) = prohibited(data) {
        let (s, d, _, seg) = ip_layer(&icmp).expect("an IP packet");
        if icmp[0] >> 4 == 4 {
            assert_eq!(checksum(&icmp[..20]), 0);
            assert_eq!(checksum(seg), 0);
        } else {
            assert_eq!(transport_checksum(s, d, 58, seg), 0);
        }
    }
}
