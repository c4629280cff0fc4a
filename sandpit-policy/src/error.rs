//! One error type for the policy crate. Every configuration error carries the file,
//! line and column it came from and a hint saying what to do.
use std::fmt;

/// A problem found in a policy source, located to the character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where the text came from: a path, `built-in default`, `profile NAME`, `command line`.
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub message: String,
    pub hint: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}\n  hint: {}",
            self.file, self.line, self.column, self.message, self.hint
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(Box<Diagnostic>),
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("unknown profile {name:?}: no built-in profile and no {path} ({hint})")]
    UnknownProfile {
        name: String,
        path: String,
        hint: String,
    },
    #[error("policy snapshot is unusable: {0}")]
    Snapshot(String),
}

impl Error {
    /// The located diagnostic, when this is a configuration error.
    pub fn diagnostic(&self) -> Option<&Diagnostic> {
        match self {
            Error::Config(d) => Some(d),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
