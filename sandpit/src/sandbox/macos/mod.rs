//! The macOS kernel layer: a Seatbelt (SBPL) profile compiled from the policy and
//! applied by sandpit to the forked child before exec.
//!
//! The compiler is pure and builds on every platform so its output is unit-tested on
//! Linux; only `apply` (and its FFI in `sys`) exists on macOS.
pub mod bundle;
pub mod reap;
pub mod seatbelt;

#[cfg(target_os = "macos")]
pub mod apply;
#[cfg(target_os = "macos")]
pub mod lifetime;
#[cfg(target_os = "macos")]
mod sys;

use std::path::PathBuf;

/// Errors of the macOS kernel layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("seatbelt: path {path:?} is not absolute; policy paths must be absolute")]
    RelativePath { path: PathBuf },
    #[error("seatbelt: path {path:?} contains `..`; policy paths must be canonical")]
    DotDot { path: PathBuf },
    #[error(
        "seatbelt: path {path:?} is not valid UTF-8 and cannot be passed as a profile parameter"
    )]
    NotUtf8 { path: PathBuf },
    #[error("seatbelt: glob {path:?} holds a quote or control character, which a profile's regular expression cannot")]
    GlobQuote { path: PathBuf },
    #[error("seatbelt: device {path:?} does not lie under /dev")]
    NotADevice { path: PathBuf },
    #[error("seatbelt: {id:?} is not a bundle identifier (letters, digits, `.`, `-`, `_`; no empty part); check CFBundleIdentifier in the app's Info.plist")]
    BadAppId { id: String },
    #[error("seatbelt: proxy port 0 is not a port")]
    ProxyPortZero,
    #[error("seatbelt: parameter {name} contains a NUL byte")]
    Nul { name: String },
    #[error(
        "seatbelt: neither sandbox_init_with_parameters nor /usr/bin/sandbox-exec is available"
    )]
    Unavailable,
    #[error("seatbelt: the kernel refused the profile: {message}")]
    Rejected { message: String },
    #[error("seatbelt: {what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, Error>;
