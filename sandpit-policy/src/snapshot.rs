//! The compiled policy as bytes: written by the launcher into its state directory and
//! read by the interposer and `sandpit exec`, which must not re-parse TOML layers.
//!
//! The body is postcard (compact binary serde), not JSON: every process the
//! interposer loads into decodes it at start, and JSON's string scanning made that
//! the largest part of the interposer's own start-up work.
use crate::error::{Error, Result};
use crate::Policy;

/// First bytes of every snapshot; a file without them is foreign.
pub const MAGIC: &[u8] = b"sandpit-policy-v5\n";

impl Policy {
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        // Serializing plain data cannot fail; an empty body would fail closed on load.
        out.extend(postcard::to_allocvec(self).unwrap_or_default());
        out
    }

    /// Decode a snapshot without compiling its `re:` patterns (the launcher did;
    /// one that no longer compiles matches every command, failing closed).
    pub fn decode_snapshot(bytes: &[u8]) -> Result<Policy> {
        let body = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| Error::Snapshot("not a sandpit policy snapshot (bad header)".into()))?;
        match postcard::take_from_bytes::<Policy>(body) {
            Ok((policy, [])) => Ok(policy),
            Ok(_) => Err(Error::Snapshot("trailing bytes after the policy".into())),
            Err(e) => Err(Error::Snapshot(e.to_string())),
        }
    }

    /// [`Policy::decode_snapshot`], then every `re:` pattern compiled.
    pub fn from_snapshot(bytes: &[u8]) -> Result<Policy> {
        let policy = Self::decode_snapshot(bytes)?;
        for r in &policy.exec.block {
            crate::ExecPattern::parse(&r.value.source).map_err(Error::Snapshot)?;
        }
        Ok(policy)
    }
}
