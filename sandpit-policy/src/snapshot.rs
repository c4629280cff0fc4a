//! The compiled policy as bytes: written by the launcher into its state directory and
//! read by the interposer and `sandpit exec`, which must not re-parse TOML layers.
use crate::error::{Error, Result};
use crate::Policy;

/// First bytes of every snapshot; a file without them is foreign.
pub const MAGIC: &[u8] = b"sandpit-policy-v1\n";

impl Policy {
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        // Serializing plain data cannot fail; an empty body would fail closed on load.
        out.extend(serde_json::to_vec(self).unwrap_or_default());
        out
    }

    pub fn from_snapshot(bytes: &[u8]) -> Result<Policy> {
        let body = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| Error::Snapshot("not a sandpit policy snapshot (bad header)".into()))?;
        let policy: Policy =
            serde_json::from_slice(body).map_err(|e| Error::Snapshot(e.to_string()))?;
        for r in &policy.exec.block {
            crate::ExecPattern::parse(&r.value.source).map_err(Error::Snapshot)?;
        }
        Ok(policy)
    }
}
