//! The launcher's portable libc calls (platform-specific ones live in
//! `sandbox/linux/sys.rs` and `sandbox/macos/sys.rs`).

/// The real uid of this process.
pub fn uid() -> u32 {
    // SAFETY: getuid takes no arguments, cannot fail and touches no memory.
    unsafe { libc::getuid() }
}
