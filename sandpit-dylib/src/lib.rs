//! The injected interposition library (L1).
//!
//! Loaded into every dynamically linked process of the sandboxed tree with
//! `LD_PRELOAD` (Linux). Each hooked libc entry point is a thin exported function:
//! init → decode args → decide → act. Hook bodies are platform-neutral; the
//! `hook!` macro is the only place that knows how a symbol is registered (Linux:
//! `#[no_mangle]` export + `dlsym(RTLD_NEXT)`; macOS `__DATA,__interpose` later).
//!
//! Rules every hook follows:
//! - a panic never crosses `extern "C"`: bodies run under `catch_unwind` and fail
//!   with `-1`/`EPERM` (or `NULL`/`EPERM`), never by calling the real function;
//! - a thread-local guard sends calls made by this library's own code straight to
//!   the real function;
//! - real symbols are resolved once at load, and loading aborts if one resolves to
//!   this library itself;
//! - the exec path composes the child's environment without allocating or locking.
#![allow(clippy::missing_safety_doc)]
// Linux only so far: on macOS the crate is empty until the `__DATA,__interpose`
// registration lands (cross-built, not run).
#![cfg(target_os = "linux")]

#[macro_use]
pub mod hook;
pub mod decide;
pub mod envp;
pub mod exec;
pub mod files;
pub mod guard;
pub mod net;
pub mod path;
pub mod report;
pub mod state;
pub mod sys;
