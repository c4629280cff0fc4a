//! The little of the DNS wire format (RFC 1035) sandpit needs: read a query's one
//! question, write an answer with A/AAAA records or an error code, and read the A/AAAA
//! records of an upstream answer. Pure.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
pub const CLASS_IN: u16 = 1;

pub const RCODE_NOERROR: u8 = 0;
pub const RCODE_FORMERR: u8 = 1;
pub const RCODE_SERVFAIL: u8 = 2;
pub const RCODE_NXDOMAIN: u8 = 3;
pub const RCODE_NOTIMP: u8 = 4;
pub const RCODE_REFUSED: u8 = 5;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error("DNS message truncated")]
    Truncated,
    #[error("DNS message is not a single-question query")]
    NotAQuery,
    #[error("malformed DNS name")]
    Name,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub id: u16,
    /// Opcode, RD and CD bits of the query's flags, echoed in the answer.
    pub flags: u16,
    /// The name as sent, lowercased, without trailing dot (ASCII; labels joined by '.').
    pub name: String,
    pub qtype: u16,
    pub qclass: u16,
    /// The question section's raw bytes, echoed in the answer.
    question: Vec<u8>,
}

fn u16_at(b: &[u8], i: usize) -> Result<u16, MessageError> {
    b.get(i..i + 2)
        .map(|x| u16::from_be_bytes([x[0], x[1]]))
        .ok_or(MessageError::Truncated)
}

/// Read an uncompressed name at `pos`: (dotted lowercase name, next position).
fn read_name(b: &[u8], mut pos: usize) -> Result<(String, usize), MessageError> {
    let mut name = String::new();
    loop {
        let len = usize::from(*b.get(pos).ok_or(MessageError::Truncated)?);
        pos += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            // Compression pointers do not belong in a query's question.
            return Err(MessageError::Name);
        }
        let label = b.get(pos..pos + len).ok_or(MessageError::Truncated)?;
        if !label.iter().all(|c| c.is_ascii_graphic() && *c != b'.') {
            return Err(MessageError::Name);
        }
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
        pos += len;
        if name.len() > 253 {
            return Err(MessageError::Name);
        }
    }
    Ok((name, pos))
}

/// Skip a possibly compressed name, returning the next position.
fn skip_name(b: &[u8], mut pos: usize) -> Result<usize, MessageError> {
    loop {
        let len = *b.get(pos).ok_or(MessageError::Truncated)?;
        if len & 0xc0 == 0xc0 {
            return Ok(pos + 2);
        }
        if len & 0xc0 != 0 {
            return Err(MessageError::Name);
        }
        pos += 1 + usize::from(len);
        if len == 0 {
            return Ok(pos);
        }
        if pos > b.len() {
            return Err(MessageError::Truncated);
        }
    }
}

/// Parse a standard query with exactly one question.
pub fn parse_query(b: &[u8]) -> Result<Query, MessageError> {
    if b.len() < 12 {
        return Err(MessageError::Truncated);
    }
    let id = u16_at(b, 0)?;
    let flags = u16_at(b, 2)?;
    let qd = u16_at(b, 4)?;
    if flags & 0x8000 != 0 || qd != 1 {
        return Err(MessageError::NotAQuery);
    }
    let (name, pos) = read_name(b, 12)?;
    let qtype = u16_at(b, pos)?;
    let qclass = u16_at(b, pos + 2)?;
    Ok(Query {
        id,
        flags: flags & 0x7910,
        name,
        qtype,
        qclass,
        question: b[12..pos + 4].to_vec(),
    })
}

/// The header id of any message, when it has one (for FORMERR answers).
pub fn message_id(b: &[u8]) -> Option<u16> {
    u16_at(b, 0).ok()
}

/// An answer to `q` with `rcode` and the given addresses (those matching the
/// question type are written).
pub fn answer(q: &Query, rcode: u8, addrs: &[IpAddr], ttl: u32) -> Vec<u8> {
    let records: Vec<&IpAddr> = addrs
        .iter()
        .filter(|a| {
            matches!(
                (a, q.qtype),
                (IpAddr::V4(_), TYPE_A) | (IpAddr::V6(_), TYPE_AAAA)
            )
        })
        .collect();
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&q.id.to_be_bytes());
    // QR, the query's opcode/RD/CD, AA, RA, rcode.
    let flags = 0x8000 | q.flags | 0x0400 | 0x0080 | u16::from(rcode & 0x0f);
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(records.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&q.question);
    for a in records {
        out.extend_from_slice(&[0xc0, 0x0c]);
        let (ty, data): (u16, Vec<u8>) = match a {
            IpAddr::V4(v4) => (TYPE_A, v4.octets().to_vec()),
            IpAddr::V6(v6) => (TYPE_AAAA, v6.octets().to_vec()),
        };
        out.extend_from_slice(&ty.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(&data);
    }
    out
}

/// A FORMERR answer for an unparseable message.
pub fn format_error(id: u16) -> Vec<u8> {
    let mut out = id.to_be_bytes().to_vec();
    out.extend_from_slice(&(0x8080u16 | u16::from(RCODE_FORMERR)).to_be_bytes());
    out.extend_from_slice(&[0; 8]);
    out
}

/// A recursive query for `name`/`qtype` (what sandpit sends upstream).
pub fn build_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, MessageError> {
    let mut out = id.to_be_bytes().to_vec();
    out.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(MessageError::Name);
        }
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(out)
}

/// The rcode and A/AAAA addresses of an upstream answer with id `id`.
pub fn parse_answer(b: &[u8], id: u16) -> Result<(u8, Vec<IpAddr>), MessageError> {
    if b.len() < 12 || u16_at(b, 0)? != id {
        return Err(MessageError::Truncated);
    }
    let flags = u16_at(b, 2)?;
    if flags & 0x8000 == 0 {
        return Err(MessageError::NotAQuery);
    }
    let rcode = (flags & 0x0f) as u8;
    let qd = u16_at(b, 4)?;
    let an = u16_at(b, 6)?;
    let mut pos = 12;
    for _ in 0..qd {
        pos = skip_name(b, pos)? + 4;
    }
    let mut addrs = Vec::new();
    for _ in 0..an {
        pos = skip_name(b, pos)?;
        let ty = u16_at(b, pos)?;
        let class = u16_at(b, pos + 2)?;
        let len = usize::from(u16_at(b, pos + 8)?);
        let data = b
            .get(pos + 10..pos + 10 + len)
            .ok_or(MessageError::Truncated)?;
        pos += 10 + len;
        if class != CLASS_IN {
            continue;
        }
        match (ty, data.len()) {
            (TYPE_A, 4) => addrs.push(IpAddr::V4(Ipv4Addr::new(
                data[0], data[1], data[2], data[3],
            ))),
            (TYPE_AAAA, 16) => {
                let mut o = [0u8; 16];
                o.copy_from_slice(data);
                addrs.push(IpAddr::V6(Ipv6Addr::from(o)));
            }
            _ => {}
        }
    }
    Ok((rcode, addrs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_answer_round_trip() {
        let q = build_query(0x1234, "Allowed.Test", TYPE_A).unwrap();
        let parsed = parse_query(&q).unwrap();
        assert_eq!(parsed.name, "allowed.test");
        assert_eq!(parsed.qtype, TYPE_A);
        let a = answer(
            &parsed,
            RCODE_NOERROR,
            &["127.0.0.2".parse().unwrap(), "::1".parse().unwrap()],
            60,
        );
        let (rcode, addrs) = parse_answer(&a, 0x1234).unwrap();
        assert_eq!(rcode, RCODE_NOERROR);
        assert_eq!(addrs, vec!["127.0.0.2".parse::<IpAddr>().unwrap()]);
        let r = answer(&parsed, RCODE_REFUSED, &[], 0);
        assert_eq!(parse_answer(&r, 0x1234).unwrap(), (RCODE_REFUSED, vec![]));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_query(&[0; 5]).is_err());
        let mut q = build_query(1, "a.test", TYPE_A).unwrap();
        q[12] = 0xc0;
        assert!(parse_query(&q).is_err());
    }
}
