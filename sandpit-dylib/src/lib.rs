//! The injected interposition library (L1).
//!
//! Loaded into every dynamically linked process of the sandboxed tree with
//! `LD_PRELOAD` (Linux) or `DYLD_INSERT_LIBRARIES` (macOS). Each hooked libc entry
//! point is a thin exported function: init → decode args → decide → act. Hook
//! bodies are platform-neutral; the `hook!` macro is the only place that knows how
//! a symbol is registered (Linux: `#[no_mangle]` export + `dlsym(RTLD_NEXT)`;
//! macOS: a `__DATA,__interpose` tuple per libSystem symbol, the original called by
//! name). C-variadic entry points go through C trampolines (`csrc/`).
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
// Linux: `open`, `open64`, `openat`, `openat64` are C-variadic in libc and defined
// here with the mode as a fixed argument, which the x86_64 and aarch64 Linux ABIs
// pass exactly where the variadic one goes (macOS's arm64 ABI does not: its hooks
// go through csrc/darwin.c). Newer compilers flag the mismatch with this lint
// (unknown to the pinned stable one, hence `unknown_lints`); moving Linux onto C
// trampolines as on macOS would retire both.
#![allow(unknown_lints)]
#![allow(invalid_runtime_symbol_definitions)]
// Linux and macOS (the macOS build is cross-built and checked here, not run).
#![cfg(any(target_os = "linux", target_os = "macos"))]
// Unit tests link no `__interpose` tuples (as they export nothing on Linux): on
// macOS the hook bodies are then unused.
#![cfg_attr(all(test, target_os = "macos"), allow(dead_code))]

#[macro_use]
pub mod hook;
#[cfg(target_os = "linux")]
pub mod cwd;
pub mod decide;
pub mod envp;
pub mod exec;
pub mod files;
pub mod guard;
#[cfg(target_os = "linux")]
pub mod hide;
pub mod net;
pub mod path;
pub mod report;
pub mod state;
pub mod sys;
