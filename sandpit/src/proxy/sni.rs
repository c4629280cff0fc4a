//! TLS ClientHello → server name (SNI). Pure: feed it every byte the client sent so
//! far; it answers "need more", the name, or why the name is unreadable. The
//! ClientHello may be split across reads and across TLS records.
//!
//! Unreadable (no SNI, Encrypted Client Hello, anything malformed) is reported as such;
//! the proxy treats unreadable as denied unless an IP rule allows the address.

/// Largest ClientHello handshake message accepted (post-quantum key shares make
/// them a few KiB; 64 KiB is far above any real one).
pub const MAX_HELLO: usize = 64 * 1024;

/// What the bytes so far say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sni {
    /// A prefix of a ClientHello that may still turn out well-formed.
    Incomplete,
    /// The server_name host_name, exactly as sent (not yet canonicalized).
    Name(String),
    /// A well-formed ClientHello without a server_name extension.
    Missing,
    /// The ClientHello carries an encrypted_client_hello extension.
    Ech,
    /// Not a TLS ClientHello, or malformed.
    Malformed(&'static str),
}

use tls_parser::{SNIType, TlsExtension, TlsExtensionType};

const EXT_SERVER_NAME: u16 = 0;
const EXT_ECH: u16 = 0xfe0d;
const EXT_ECH_OUTER: u16 = 0xfd00;

/// True when `buf` starts like a TLS handshake record.
pub fn looks_like_tls(buf: &[u8]) -> bool {
    buf.first() == Some(&0x16)
}

/// Parse the ClientHello at the start of `buf`.
pub fn parse(buf: &[u8]) -> Sni {
    // Reassemble the handshake message from consecutive handshake records.
    let mut hs: Vec<u8> = Vec::new();
    let mut pos = 0;
    let needed = loop {
        if hs.len() >= 4 {
            let len = u24(&hs[1..4]);
            if hs[0] != 1 {
                return Sni::Malformed("first handshake message is not a ClientHello");
            }
            if len > MAX_HELLO {
                return Sni::Malformed("ClientHello too large");
            }
            if hs.len() >= 4 + len {
                break 4 + len;
            }
        }
        let Some(hdr) = buf.get(pos..pos + 5) else {
            return check_prefix(&buf[pos..]);
        };
        if hdr[0] != 0x16 {
            return Sni::Malformed("not a TLS handshake record");
        }
        if hdr[1] != 3 {
            return Sni::Malformed("unknown TLS record version");
        }
        let rlen = usize::from(u16::from_be_bytes([hdr[3], hdr[4]]));
        if rlen == 0 || rlen > 16384 + 2048 {
            return Sni::Malformed("bad TLS record length");
        }
        let Some(body) = buf.get(pos + 5..pos + 5 + rlen) else {
            return Sni::Incomplete;
        };
        hs.extend_from_slice(body);
        pos += 5 + rlen;
        if hs.len() > MAX_HELLO + 4 {
            return Sni::Malformed("ClientHello too large");
        }
    };
    parse_client_hello(&hs[4..needed])
}

fn check_prefix(rest: &[u8]) -> Sni {
    match rest {
        [] => Sni::Incomplete,
        [t, ..] if *t != 0x16 => Sni::Malformed("not a TLS handshake record"),
        [_, v, ..] if *v != 3 => Sni::Malformed("unknown TLS record version"),
        _ => Sni::Incomplete,
    }
}

fn u24(b: &[u8]) -> usize {
    (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2])
}

/// The ClientHello body (after the 4-byte handshake header) → SNI verdict.
///
/// The ClientHello and its extensions are decoded by `tls-parser` (rusticata); the
/// record framing above stays here because tls-parser reads one record at a time and
/// leaves reassembling a handshake message split across records to its caller.
/// sandpit's own checks on top: nothing after the extensions, no extension twice,
/// exactly one printable-ASCII host_name, any ECH/ESNI extension makes it unreadable.
fn parse_client_hello(body: &[u8]) -> Sni {
    let Ok((rest, ch)) = tls_parser::parse_tls_handshake_client_hello(body) else {
        return Sni::Malformed("truncated ClientHello");
    };
    if !rest.is_empty() {
        return Sni::Malformed("bytes after extensions");
    }
    let Some(ext) = ch.ext else {
        return Sni::Missing;
    };
    let Ok((rest, exts)) = tls_parser::parse_tls_client_hello_extensions(ext) else {
        return Sni::Malformed("truncated extension");
    };
    if !rest.is_empty() {
        return Sni::Malformed("truncated extension");
    }
    let mut name: Option<String> = None;
    let mut seen: Vec<u16> = Vec::with_capacity(exts.len());
    let mut ech = false;
    for e in &exts {
        let ty = match e {
            TlsExtension::Grease(ty, _) => *ty,
            other => TlsExtensionType::from(other).0,
        };
        if seen.contains(&ty) {
            return Sni::Malformed("duplicate extension");
        }
        seen.push(ty);
        match e {
            TlsExtension::SNI(list) => match server_name(list) {
                Ok(n) => name = Some(n),
                Err(why) => return Sni::Malformed(why),
            },
            TlsExtension::EncryptedServerName { .. } => ech = true,
            TlsExtension::Unknown(t, _) if t.0 == EXT_ECH || t.0 == EXT_ECH_OUTER => ech = true,
            _ => {}
        }
    }
    if ech {
        return Sni::Ech;
    }
    match name {
        Some(n) => Sni::Name(n),
        None => Sni::Missing,
    }
}

fn server_name(list: &[(SNIType, &[u8])]) -> Result<String, &'static str> {
    let mut found: Option<String> = None;
    for (ty, v) in list {
        if *ty != SNIType::HostName {
            return Err("unknown server_name type");
        }
        if found.is_some() {
            return Err("more than one host_name");
        }
        if v.is_empty() || v.len() > 255 || !v.iter().all(|b| b.is_ascii_graphic()) {
            return Err("host_name is not a printable ASCII name");
        }
        found = Some(String::from_utf8_lossy(v).into_owned());
    }
    found.ok_or("empty server_name list")
}

/// Build a minimal ClientHello record (for tests, benches and fuzz seeds).
pub fn build_client_hello(sni: Option<&str>, ech: bool) -> Vec<u8> {
    let mut exts = Vec::new();
    if let Some(name) = sni {
        let n = name.as_bytes();
        let entry_len = 3 + n.len();
        exts.extend_from_slice(&EXT_SERVER_NAME.to_be_bytes());
        exts.extend_from_slice(&((entry_len + 2) as u16).to_be_bytes());
        exts.extend_from_slice(&(entry_len as u16).to_be_bytes());
        exts.push(0);
        exts.extend_from_slice(&(n.len() as u16).to_be_bytes());
        exts.extend_from_slice(n);
    }
    if ech {
        exts.extend_from_slice(&EXT_ECH.to_be_bytes());
        exts.extend_from_slice(&4u16.to_be_bytes());
        exts.extend_from_slice(&[0, 0, 1, 0]);
    }
    // supported_versions: TLS 1.3
    exts.extend_from_slice(&[0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04]);
    let mut body = vec![3, 3];
    body.extend_from_slice(&[0x42; 32]);
    body.push(0);
    body.extend_from_slice(&[0, 2, 0x13, 0x01]);
    body.extend_from_slice(&[1, 0]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut hs = vec![1];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sni_at_every_split_point() {
        let hello = build_client_hello(Some("allowed.test"), false);
        for cut in 0..hello.len() {
            assert_eq!(parse(&hello[..cut]), Sni::Incomplete, "cut at {cut}");
        }
        assert_eq!(parse(&hello), Sni::Name("allowed.test".into()));
    }

    #[test]
    fn reads_sni_across_records() {
        let hello = build_client_hello(Some("allowed.test"), false);
        let hs = &hello[5..];
        let mut split = Vec::new();
        for chunk in hs.chunks(7) {
            split.extend_from_slice(&[0x16, 3, 1]);
            split.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
            split.extend_from_slice(chunk);
        }
        assert_eq!(parse(&split), Sni::Name("allowed.test".into()));
    }

    #[test]
    fn missing_ech_and_garbage_are_unreadable() {
        assert_eq!(parse(&build_client_hello(None, false)), Sni::Missing);
        assert_eq!(parse(&build_client_hello(Some("a.test"), true)), Sni::Ech);
        assert!(matches!(parse(b"GET / HTTP/1.1\r\n"), Sni::Malformed(_)));
        assert!(matches!(
            parse(&[0x16, 3, 1, 0, 4, 2, 0, 0, 0]),
            Sni::Malformed(_)
        ));
        let mut h = build_client_hello(Some("a.test"), false);
        h[5] = 2;
        assert!(matches!(parse(&h), Sni::Malformed(_)));
    }
}
