//! Where each policy entry came from, so every verdict can name the exact rule.
use serde::{Deserialize, Serialize};
use std::fmt;

/// The layer a source belongs to, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Default,
    Profile,
    User,
    Project,
    Flags,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Default => "built-in default",
            Layer::Profile => "agent profile",
            Layer::User => "user config",
            Layer::Project => "project config",
            Layer::Flags => "command line",
        })
    }
}

/// The rule behind a policy entry: file, key, entry text and position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub layer: Layer,
    /// A path, or a name such as `built-in default` or `command line`.
    pub file: String,
    /// Dotted key, e.g. `files.block_read`.
    pub key: String,
    /// The entry as written, e.g. `~/.ssh`.
    pub entry: String,
    pub line: u32,
    pub column: u32,
}

impl Origin {
    /// An origin for values sandpit adds itself (the run's scratch dir, its state).
    pub fn builtin(key: &str, entry: &str) -> Origin {
        Origin {
            layer: Layer::Default,
            file: "built-in default".into(),
            key: key.into(),
            entry: entry.into(),
            line: 0,
            column: 0,
        }
    }

    /// `file:line:col`, or just the file name for built-in entries.
    pub fn location(&self) -> String {
        if self.line == 0 {
            self.file.clone()
        } else {
            format!("{}:{}:{}", self.file, self.line, self.column)
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?} in {}", self.key, self.entry, self.location())
    }
}

/// A policy entry together with the rule that put it there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule<T> {
    pub value: T,
    pub origin: Origin,
}
