//! The little of the DNS wire format (RFC 1035) sandpit needs: read a query's one
//! question, write an answer with A/AAAA records or an error code, and read the A/AAAA
//! records of an upstream answer. Pure.
//!
//! Decoding and encoding are `hickory-proto`'s (`Message::from_vec` / `to_vec`); what
//! stays here is sandpit's own, stricter acceptance on top: exactly one question, a
//! question name written without compression pointers, printable-ASCII labels
//! (lowercased, at most 253 characters), the query's opcode/RD/CD echoed, and the
//! question's bytes echoed exactly as sent (case included, for 0x20 randomisation).
use std::net::IpAddr;

use hickory_proto::op::{Message, MessageType, OpCode, Query as WireQuery, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

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

#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub id: u16,
    /// Opcode, RD and CD bits of the query's flags, echoed in the answer.
    pub flags: u16,
    /// The name as sent, lowercased, without trailing dot (ASCII; labels joined by '.').
    pub name: String,
    pub qtype: u16,
    pub qclass: u16,
    /// The question as decoded (name in the case it was sent), echoed in the answer.
    question: WireQuery,
}

impl Eq for Query {}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    b.get(i..i + 2).map(|x| u16::from_be_bytes([x[0], x[1]]))
}

/// Parse a standard query with exactly one question.
pub fn parse_query(b: &[u8]) -> Result<Query, MessageError> {
    if b.len() < 12 {
        return Err(MessageError::Truncated);
    }
    // The QR bit and the question count are checked on the raw header first: hickory
    // decodes any message, sandpit answers only single-question queries.
    let flags = u16_at(b, 2).ok_or(MessageError::Truncated)?;
    if flags & 0x8000 != 0 || u16_at(b, 4) != Some(1) {
        return Err(MessageError::NotAQuery);
    }
    // hickory follows compression pointers anywhere; in a query's question (the first
    // name of the message) one can only point back into the header, so refuse it.
    if b.get(12).is_some_and(|l| l & 0xc0 != 0) {
        return Err(MessageError::Name);
    }
    let msg = Message::from_vec(b).map_err(|_| MessageError::Truncated)?;
    if msg.metadata.message_type != MessageType::Query || msg.queries.len() != 1 {
        return Err(MessageError::NotAQuery);
    }
    let question = msg.queries[0].clone();
    let name = dotted_name(question.name())?;
    Ok(Query {
        id: msg.metadata.id,
        flags: flags & 0x7910,
        name,
        qtype: u16::from(question.query_type()),
        qclass: u16::from(question.query_class()),
        question,
    })
}

/// The name's labels, printable ASCII without dots, lowercased and joined by '.'.
fn dotted_name(n: &Name) -> Result<String, MessageError> {
    let mut name = String::new();
    for label in n.iter() {
        if label.is_empty() || !label.iter().all(|c| c.is_ascii_graphic() && *c != b'.') {
            return Err(MessageError::Name);
        }
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
        if name.len() > 253 {
            return Err(MessageError::Name);
        }
    }
    Ok(name)
}

/// The header id of any message, when it has one (for FORMERR answers).
pub fn message_id(b: &[u8]) -> Option<u16> {
    u16_at(b, 0)
}

/// An answer to `q` with `rcode` and the given addresses (those matching the
/// question type are written).
pub fn answer(q: &Query, rcode: u8, addrs: &[IpAddr], ttl: u32) -> Vec<u8> {
    let op_code = OpCode::from_u8(((q.flags >> 11) & 0x0f) as u8);
    let mut m = Message::response(q.id, op_code);
    m.metadata.authoritative = true;
    m.metadata.recursion_available = true;
    m.metadata.recursion_desired = q.flags & 0x0100 != 0;
    m.metadata.checking_disabled = q.flags & 0x0010 != 0;
    m.metadata.response_code = ResponseCode::from_low(rcode & 0x0f);
    m.add_query(q.question.clone());
    let owner = q.question.name().clone();
    for a in addrs {
        let rdata = match (a, q.qtype) {
            (IpAddr::V4(v4), TYPE_A) => RData::A(A(*v4)),
            (IpAddr::V6(v6), TYPE_AAAA) => RData::AAAA(AAAA(*v6)),
            _ => continue,
        };
        m.add_answer(Record::from_rdata(owner.clone(), ttl, rdata));
    }
    // Encoding a question hickory decoded itself plus address records cannot fail;
    // should it ever, the client gets the header-only SERVFAIL below.
    m.to_vec()
        .unwrap_or_else(|_| header_only(q.id, RCODE_SERVFAIL))
}

fn header_only(id: u16, rcode: u8) -> Vec<u8> {
    let mut out = id.to_be_bytes().to_vec();
    out.extend_from_slice(&(0x8080u16 | u16::from(rcode & 0x0f)).to_be_bytes());
    out.extend_from_slice(&[0; 8]);
    out
}

/// A FORMERR answer for an unparseable message. Written by hand: hickory's encoder
/// needs a decoded message, and this answers one it could not decode.
pub fn format_error(id: u16) -> Vec<u8> {
    header_only(id, RCODE_FORMERR)
}

/// A recursive query for `name`/`qtype` (what sandpit sends upstream).
pub fn build_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, MessageError> {
    if name.split('.').any(|l| l.is_empty() || l.len() > 63) {
        return Err(MessageError::Name);
    }
    let wire_name = Name::from_ascii(name).map_err(|_| MessageError::Name)?;
    let mut q = WireQuery::query(wire_name, RecordType::from(qtype));
    q.set_query_class(DNSClass::IN);
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(q);
    m.to_vec().map_err(|_| MessageError::Name)
}

/// The rcode and A/AAAA addresses of an upstream answer with id `id`.
pub fn parse_answer(b: &[u8], id: u16) -> Result<(u8, Vec<IpAddr>), MessageError> {
    if b.len() < 12 || u16_at(b, 0) != Some(id) {
        return Err(MessageError::Truncated);
    }
    let m = Message::from_vec(b).map_err(|_| MessageError::Truncated)?;
    if m.metadata.message_type != MessageType::Response {
        return Err(MessageError::NotAQuery);
    }
    let rcode = m.metadata.response_code.low();
    let addrs = m
        .answers
        .iter()
        .filter(|r| r.dns_class == DNSClass::IN)
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect();
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
        // The question comes back exactly as sent, case included.
        assert_eq!(&a[12..q.len()], &q[12..]);
        let (rcode, addrs) = parse_answer(&a, 0x1234).unwrap();
        assert_eq!(rcode, RCODE_NOERROR);
        assert_eq!(addrs, vec!["127.0.0.2".parse::<IpAddr>().unwrap()]);
        let r = answer(&parsed, RCODE_REFUSED, &[], 0);
        assert_eq!(parse_answer(&r, 0x1234).unwrap(), (RCODE_REFUSED, vec![]));
    }

    #[test]
    fn answer_echoes_flags_and_sets_aa_ra() {
        let mut q = build_query(7, "a.test", TYPE_AAAA).unwrap();
        q[3] |= 0x10; // CD
        let parsed = parse_query(&q).unwrap();
        let a = answer(&parsed, RCODE_NXDOMAIN, &[], 5);
        let flags = u16::from_be_bytes([a[2], a[3]]);
        assert_eq!(flags, 0x8000 | 0x0400 | 0x0100 | 0x0080 | 0x0010 | 3);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_query(&[0; 5]).is_err());
        let mut q = build_query(1, "a.test", TYPE_A).unwrap();
        q[12] = 0xc0;
        assert!(parse_query(&q).is_err());
        let mut q = build_query(1, "a.test", TYPE_A).unwrap();
        q[13] = b' ';
        assert_eq!(parse_query(&q), Err(MessageError::Name));
        assert!(build_query(1, "a..test", TYPE_A).is_err());
        assert!(build_query(1, "", TYPE_A).is_err());
        let mut two = build_query(1, "a.test", TYPE_A).unwrap();
        two[5] = 2;
        assert_eq!(parse_query(&two), Err(MessageError::NotAQuery));
    }
}
