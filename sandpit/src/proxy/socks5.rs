//! SOCKS5 (RFC 1928) and its username/password sub-negotiation (RFC 1929), pure.
//! Each parser takes the bytes received so far: `Ok(None)` = need more.
//!
//! Kept here rather than on a crate (issue #33): the server-side SOCKS5 crates drive
//! the socket themselves instead of parsing bytes given to them — `fast-socks5`
//! (MIT) reads and answers through its own `AsyncRead`/`AsyncWrite` state machine,
//! which the proxy's limits, audit and peeking would have to be rebuilt around, and
//! which cannot be fuzzed as a pure function (`fuzz/fuzz_targets/proxy_socks5.rs`);
//! it also brings anyhow, async-trait, tokio-stream and a second socket2. The
//! `socks5-proto` crate is GPL-3.0, which sandpit (Apache-2.0) cannot take. The
//! three messages sandpit reads are a few dozen lines each.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const VERSION: u8 = 5;
pub const METHOD_NONE: u8 = 0x00;
pub const METHOD_USERPASS: u8 = 0x02;
pub const METHOD_UNACCEPTABLE: u8 = 0xff;
pub const CMD_CONNECT: u8 = 1;

/// Reply codes.
pub const REP_OK: u8 = 0x00;
pub const REP_FAILURE: u8 = 0x01;
pub const REP_NOT_ALLOWED: u8 = 0x02;
pub const REP_HOST_UNREACHABLE: u8 = 0x04;
pub const REP_REFUSED: u8 = 0x05;
pub const REP_CMD_UNSUPPORTED: u8 = 0x07;
pub const REP_ATYP_UNSUPPORTED: u8 = 0x08;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SocksError {
    #[error("not SOCKS version 5")]
    Version,
    #[error("no authentication methods offered")]
    NoMethods,
    #[error("bad username/password sub-negotiation")]
    Auth,
    #[error("unknown address type {0}")]
    AddressType(u8),
    #[error("domain name is empty or not printable ASCII")]
    Domain,
    #[error("reserved byte is not zero")]
    Reserved,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    Ip(IpAddr),
    /// As sent, not yet canonicalized.
    Domain(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub cmd: u8,
    pub dest: Dest,
    pub port: u16,
}

/// Client greeting: the offered methods, and bytes consumed.
pub fn parse_greeting(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, SocksError> {
    let Some(&ver) = buf.first() else {
        return Ok(None);
    };
    if ver != VERSION {
        return Err(SocksError::Version);
    }
    let Some(&n) = buf.get(1) else {
        return Ok(None);
    };
    if n == 0 {
        return Err(SocksError::NoMethods);
    }
    let end = 2 + usize::from(n);
    Ok(buf.get(2..end).map(|m| (m.to_vec(), end)))
}

/// RFC 1929 credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPass {
    pub user: Vec<u8>,
    pub pass: Vec<u8>,
}

/// RFC 1929 username/password, and bytes consumed.
pub fn parse_userpass(buf: &[u8]) -> Result<Option<(UserPass, usize)>, SocksError> {
    let Some(&ver) = buf.first() else {
        return Ok(None);
    };
    if ver != 1 {
        return Err(SocksError::Auth);
    }
    let Some(&ulen) = buf.get(1) else {
        return Ok(None);
    };
    let ulen = usize::from(ulen);
    let Some(user) = buf.get(2..2 + ulen) else {
        return Ok(None);
    };
    let Some(&plen) = buf.get(2 + ulen) else {
        return Ok(None);
    };
    let pstart = 3 + ulen;
    let end = pstart + usize::from(plen);
    let Some(pass) = buf.get(pstart..end) else {
        return Ok(None);
    };
    Ok(Some((
        UserPass {
            user: user.to_vec(),
            pass: pass.to_vec(),
        },
        end,
    )))
}

/// The request after negotiation, and bytes consumed.
pub fn parse_request(buf: &[u8]) -> Result<Option<(Request, usize)>, SocksError> {
    if buf.len() < 4 {
        if buf.first().is_some_and(|&v| v != VERSION) {
            return Err(SocksError::Version);
        }
        return Ok(None);
    }
    if buf[0] != VERSION {
        return Err(SocksError::Version);
    }
    if buf[2] != 0 {
        return Err(SocksError::Reserved);
    }
    let cmd = buf[1];
    let (dest, rest) = match buf[3] {
        1 => {
            let Some(a) = buf.get(4..8) else {
                return Ok(None);
            };
            (
                Dest::Ip(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
                8,
            )
        }
        4 => {
            let Some(a) = buf.get(4..20) else {
                return Ok(None);
            };
            let mut o = [0u8; 16];
            o.copy_from_slice(a);
            (Dest::Ip(IpAddr::V6(Ipv6Addr::from(o))), 20)
        }
        3 => {
            let Some(&n) = buf.get(4) else {
                return Ok(None);
            };
            let end = 5 + usize::from(n);
            let Some(name) = buf.get(5..end) else {
                return Ok(None);
            };
            if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
                return Err(SocksError::Domain);
            }
            (
                Dest::Domain(String::from_utf8_lossy(name).into_owned()),
                end,
            )
        }
        t => return Err(SocksError::AddressType(t)),
    };
    let Some(p) = buf.get(rest..rest + 2) else {
        return Ok(None);
    };
    let port = u16::from_be_bytes([p[0], p[1]]);
    Ok(Some((Request { cmd, dest, port }, rest + 2)))
}

/// A reply with an all-zero IPv4 bind address.
pub fn reply(code: u8) -> [u8; 10] {
    [VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greeting_auth_request() {
        assert_eq!(
            parse_greeting(&[5, 2, 0, 2]).unwrap(),
            Some((vec![0, 2], 4))
        );
        assert_eq!(parse_greeting(&[5, 2, 0]).unwrap(), None);
        assert!(parse_greeting(&[4, 1, 0]).is_err());
        let up = [1, 3, b'a', b'b', b'c', 2, b'x', b'y'];
        assert_eq!(
            parse_userpass(&up).unwrap(),
            Some((
                UserPass {
                    user: b"abc".to_vec(),
                    pass: b"xy".to_vec()
                },
                8
            ))
        );
        for cut in 0..up.len() {
            assert_eq!(parse_userpass(&up[..cut]).unwrap(), None);
        }
        let mut req = vec![5, 1, 0, 3, 12];
        req.extend_from_slice(b"allowed.test");
        req.extend_from_slice(&443u16.to_be_bytes());
        for cut in 0..req.len() {
            assert_eq!(parse_request(&req[..cut]).unwrap(), None);
        }
        let (r, n) = parse_request(&req).unwrap().unwrap();
        assert_eq!(n, req.len());
        assert_eq!(
            r,
            Request {
                cmd: 1,
                dest: Dest::Domain("allowed.test".into()),
                port: 443
            }
        );
        assert!(parse_request(&[5, 1, 0, 9, 0, 0]).is_err());
        assert!(parse_request(&[5, 1, 0, 3, 0, 0, 80]).is_err());
    }
}
