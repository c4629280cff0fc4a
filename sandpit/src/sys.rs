//! The launcher's portable libc calls (platform-specific ones live in
//! `sandbox/linux/sys.rs` and `sandbox/macos/sys.rs`).

/// The real uid of this process.
pub fn uid() -> u32 {
    // SAFETY: getuid takes no arguments, cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

/// `n` random bytes from the kernel, as lowercase hex.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut b = vec![0u8; n];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}
