//! The system calls of the Linux probe that libc does not wrap safely.

const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// The Landlock ABI version the running kernel supports, `None` when Landlock is
/// not built in or not enabled at boot.
pub fn landlock_abi() -> Option<u32> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag,
    // landlock_create_ruleset creates nothing and only returns the ABI version
    // (or -1 with errno ENOSYS/EOPNOTSUPP); no memory is read or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|v| *v > 0)
}
