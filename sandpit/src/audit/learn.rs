//! `sandpit run --learn`: turn what a run needed into a draft policy TOML. The draft
//! holds only additions (allow_read, allow_write, network.allow) and comments for
//! what no config line can allow; it is written to `~/.sandpit/learned/<run>.toml`
//! and never applied by itself.
use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::summary::{fixes, Fix};
use super::{private_dir, AuditError, Record, Result};

/// The draft's text for these records (denials and learned would-be denials).
pub fn draft(home: &Path, run: &str, records: &[Record]) -> String {
    let mut adds: BTreeSet<(&'static str, &'static str, String)> = BTreeSet::new();
    let mut notes: BTreeSet<String> = BTreeSet::new();
    for r in records.iter().filter(|r| r.decision.is_denial()) {
        for f in fixes(home, r) {
            match f {
                Fix::Add { table, key, value } => {
                    adds.insert((table, key, value));
                }
                Fix::Note(n) => {
                    notes.insert(format!("{} {}: {n}", r.action, r.subject));
                }
            }
        }
    }
    let mut doc = toml::Table::new();
    for (table, key, value) in adds {
        let t = doc
            .entry(table)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(t) = t {
            let list = t.entry(key).or_insert_with(|| toml::Value::Array(vec![]));
            if let toml::Value::Array(a) = list {
                a.push(toml::Value::String(value));
            }
        }
    }
    let mut s = format!(
        "# Draft policy learned from sandpit run {run}: what the run needed beyond the\n\
         # policy it ran with. Review every line. Use it with `sandpit run --config FILE`\n\
         # (it then stands in for ~/.sandpit/config.toml) or copy lines into that file.\n"
    );
    for n in &notes {
        s.push_str("# note: ");
        // One comment line, whatever the record's subject holds.
        s.push_str(&crate::console::printable(n));
        s.push('\n');
    }
    if doc.is_empty() {
        s.push_str("# the run needed nothing beyond its policy.\n");
    } else {
        s.push('\n');
        s.push_str(&toml::to_string(&doc).unwrap_or_default());
    }
    s
}

/// Write the draft to `<state_dir>/learned/<run>.toml` (0600, never overwriting).
pub fn write(state_dir: &Path, run: &str, text: &str) -> Result<PathBuf> {
    let dir = state_dir.join("learned");
    private_dir(&dir)?;
    let path = dir.join(format!("{run}.toml"));
    let io = |source| AuditError::Io {
        path: path.clone(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Decision, Layer, RuleRef};

    #[test]
    fn draft_is_valid_toml_with_each_need_once() {
        let home = Path::new("/h");
        let mut a = Record::new(
            "r",
            Layer::Interposer,
            "read",
            "/h/.ssh/config".into(),
            Decision::Learn,
        );
        a.rule = Some(RuleRef {
            file: "built-in default".into(),
            key: "files.block_read".into(),
            entry: "~/.ssh".into(),
            line: 0,
            col: 0,
        });
        let b = Record::new(
            "r",
            Layer::Proxy,
            "connect",
            "api.example.com:443".into(),
            Decision::Deny,
        );
        let mut c = Record::new(
            "r",
            Layer::Interposer,
            "exec",
            "curl --data x".into(),
            Decision::Learn,
        );
        c.rule = Some(RuleRef {
            file: "built-in default".into(),
            key: "exec.block".into(),
            entry: "curl --data".into(),
            line: 0,
            col: 0,
        });
        let text = draft(home, "r", &[a.clone(), b, a, c]);
        let v: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(v["files"]["allow_read"].as_array().unwrap().len(), 1);
        assert_eq!(v["files"]["allow_read"][0].as_str(), Some("~/.ssh/config"));
        assert_eq!(
            v["network"]["allow"][0].as_str(),
            Some("api.example.com:443")
        );
        assert!(
            text.contains("# note: exec curl --data x: commands have no allow list"),
            "{text}"
        );
    }
}
