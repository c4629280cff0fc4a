//! PATH shims and the argument parsers behind `sandpit exec`.
//!
//! [`analyze`] is a pure function of a tool name, its arguments and a [`Ctx`] (the
//! environment, files and git configuration it may consult): it returns every
//! destination the command line names and everything it cannot judge. The launcher
//! decides those against the policy; [`build_shim_dir`] writes the PATH directory
//! that routes the tools through `sandpit exec`.
#![forbid(unsafe_code)]

pub mod addr;
pub mod exec;
pub mod getopt;
pub mod judge;
pub mod review;
pub mod shimdir;
pub mod tools;

pub use addr::{Dest, Refusal};
pub use judge::{judge, Judge, Outcome};
pub use shimdir::{build_for_policy, build_shim_dir, child_env, ShimKind, SHIM_MARKER, TOOLS};
pub use tools::{analyze, Analysis};

/// What a parser may consult besides the argument vector. Tests and the fuzzer use
/// [`NoCtx`]; `sandpit exec` reads the real environment and files.
pub trait Ctx {
    /// An environment variable of the command.
    fn env(&self, name: &str) -> Option<String>;
    /// The text of a file the command would read; `None` when it cannot be read.
    fn read_file(&self, path: &str) -> Option<String>;
    /// All git configuration (`git config --list` with these global options), or
    /// `None` when it cannot be read.
    fn git_config(&self, global_args: &[String]) -> Option<Vec<(String, String)>>;
}

/// A context with no environment, no files and no git configuration.
pub struct NoCtx;

impl Ctx for NoCtx {
    fn env(&self, _: &str) -> Option<String> {
        None
    }
    fn read_file(&self, _: &str) -> Option<String> {
        None
    }
    fn git_config(&self, _: &[String]) -> Option<Vec<(String, String)>> {
        None
    }
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("shim directory {path}: {source}")]
    ShimDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("shim directory {0} must be an absolute path")]
    Relative(std::path::PathBuf),
}

pub type Result<T> = std::result::Result<T, Error>;
