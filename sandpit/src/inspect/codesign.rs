//! Reads the parts of an Apple code signature that decide whether dyld honours
//! `DYLD_INSERT_LIBRARIES`: the CodeDirectory flags, its platform field and the
//! entitlements. The signature is a big-endian SuperBlob at `LC_CODE_SIGNATURE`.
//! Only the layout is read; the signature is not verified (the kernel does that).

/// CodeDirectory flag: ad-hoc signed (no certificate).
pub const CS_ADHOC: u32 = 0x0002;
/// CodeDirectory flag: the kernel enforces `CS_RESTRICT` (dyld ignores DYLD_*).
pub const CS_RESTRICT: u32 = 0x0800;
/// CodeDirectory flag: library validation required.
pub const CS_REQUIRE_LV: u32 = 0x2000;
/// CodeDirectory flag: hardened runtime.
pub const CS_RUNTIME: u32 = 0x0001_0000;
/// CodeDirectory flag: signed by the linker (ad-hoc, replaced by a real signature).
pub const CS_LINKER_SIGNED: u32 = 0x0002_0000;

/// Entitlement that lets a hardened-runtime program honour DYLD_* variables.
pub const ENT_ALLOW_DYLD_ENV: &str = "com.apple.security.cs.allow-dyld-environment-variables";
/// Entitlement that lets a hardened-runtime program load libraries signed by others.
pub const ENT_DISABLE_LV: &str = "com.apple.security.cs.disable-library-validation";

const MAGIC_EMBEDDED_SIGNATURE: u32 = 0xfade_0cc0;
const MAGIC_CODEDIRECTORY: u32 = 0xfade_0c02;
const MAGIC_ENTITLEMENTS: u32 = 0xfade_7171;
const SLOT_CODEDIRECTORY: u32 = 0;
const SLOT_ENTITLEMENTS: u32 = 5;

/// What the signature says.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Signature {
    /// The CodeDirectory's flags field.
    pub flags: u32,
    /// The CodeDirectory's platform field: non-zero for Apple platform binaries.
    pub platform: u8,
    /// The signing identifier.
    pub identifier: Option<String>,
    /// Entitlement keys whose value is `true`.
    pub entitlements: Vec<String>,
}

impl Signature {
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }
    pub fn entitled(&self, key: &str) -> bool {
        self.entitlements.iter().any(|e| e == key)
    }
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// Parse the SuperBlob at `blob`. `None` when it is not a code signature.
pub fn parse(blob: &[u8]) -> Option<Signature> {
    if be32(blob, 0)? != MAGIC_EMBEDDED_SIGNATURE {
        return None;
    }
    let len = (be32(blob, 4)? as usize).min(blob.len());
    let blob = &blob[..len];
    let count = be32(blob, 8)? as usize;
    let mut sig = Signature::default();
    let mut found_cd = false;
    for i in 0..count.min(64) {
        let entry = 12 + i * 8;
        let slot = be32(blob, entry)?;
        let off = be32(blob, entry + 4)? as usize;
        let magic = be32(blob, off)?;
        let blen = be32(blob, off + 4)? as usize;
        let Some(body) = blob.get(off..off.saturating_add(blen)) else {
            continue;
        };
        // Several CodeDirectories can exist (SHA-1 and SHA-256 alternates); the
        // primary one sits in slot 0 and its flags are the ones the kernel uses.
        if slot == SLOT_CODEDIRECTORY && magic == MAGIC_CODEDIRECTORY {
            sig.flags = be32(body, 12)?;
            sig.platform = *body.get(38)?;
            let ident = be32(body, 20)? as usize;
            if let Some(rest) = body.get(ident..) {
                let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
                sig.identifier = std::str::from_utf8(&rest[..end]).ok().map(String::from);
            }
            found_cd = true;
        } else if slot == SLOT_ENTITLEMENTS && magic == MAGIC_ENTITLEMENTS {
            sig.entitlements = true_entitlements(body.get(8..)?);
        }
    }
    found_cd.then_some(sig)
}

/// The keys whose value is boolean `true` in an XML entitlements plist.
fn true_entitlements(xml: &[u8]) -> Vec<String> {
    let Ok(value) = plist::Value::from_reader_xml(xml) else {
        return vec![];
    };
    let Some(dict) = value.as_dictionary() else {
        return vec![];
    };
    dict.iter()
        .filter(|(_, v)| v.as_boolean() == Some(true))
        .map(|(k, _)| k.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(flags: u32, platform: u8, ents: Option<&str>) -> Vec<u8> {
        let mut cd = vec![];
        cd.extend(MAGIC_CODEDIRECTORY.to_be_bytes());
        cd.extend(0u32.to_be_bytes()); // length, patched below
        cd.extend(0x20400u32.to_be_bytes());
        cd.extend(flags.to_be_bytes());
        cd.extend(0u32.to_be_bytes()); // hashOffset
        cd.extend(88u32.to_be_bytes()); // identOffset
        cd.resize(38, 0);
        cd.push(platform);
        cd.resize(88, 0);
        cd.extend(b"com.example.tool\0");
        let n = cd.len() as u32;
        cd[4..8].copy_from_slice(&n.to_be_bytes());
        let mut blobs = vec![(SLOT_CODEDIRECTORY, cd)];
        if let Some(x) = ents {
            let mut e = vec![];
            e.extend(MAGIC_ENTITLEMENTS.to_be_bytes());
            e.extend(((x.len() + 8) as u32).to_be_bytes());
            e.extend(x.as_bytes());
            blobs.push((SLOT_ENTITLEMENTS, e));
        }
        let mut out = vec![];
        out.extend(MAGIC_EMBEDDED_SIGNATURE.to_be_bytes());
        out.extend(0u32.to_be_bytes());
        out.extend((blobs.len() as u32).to_be_bytes());
        let mut off = 12 + 8 * blobs.len();
        for (slot, b) in &blobs {
            out.extend(slot.to_be_bytes());
            out.extend((off as u32).to_be_bytes());
            off += b.len();
        }
        for (_, b) in &blobs {
            out.extend(b);
        }
        let n = out.len() as u32;
        out[4..8].copy_from_slice(&n.to_be_bytes());
        out
    }

    #[test]
    fn reads_flags_platform_identifier_and_entitlements() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict>
<key>com.apple.security.cs.allow-dyld-environment-variables</key><true/>
<key>com.apple.security.cs.disable-library-validation</key><false/>
</dict></plist>"#;
        let s = parse(&blob(CS_RUNTIME | CS_ADHOC, 0, Some(xml))).unwrap();
        assert!(s.has(CS_RUNTIME));
        assert!(!s.has(CS_RESTRICT));
        assert_eq!(s.platform, 0);
        assert_eq!(s.identifier.as_deref(), Some("com.example.tool"));
        assert!(s.entitled(ENT_ALLOW_DYLD_ENV));
        assert!(
            !s.entitled(ENT_DISABLE_LV),
            "false values are not entitlements"
        );
        let p = parse(&blob(0, 2, None)).unwrap();
        assert_eq!(p.platform, 2);
        assert!(p.entitlements.is_empty());
    }

    #[test]
    fn garbage_is_not_a_signature() {
        assert_eq!(parse(b""), None);
        assert_eq!(
            parse(&[0xfa, 0xde, 0x0c, 0xc0, 0, 0, 0, 20, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        let mut b = blob(CS_RUNTIME, 0, None);
        b.truncate(30);
        assert_eq!(parse(&b), None);
    }
}
