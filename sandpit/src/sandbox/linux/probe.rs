//! What the running Linux kernel offers sandpit, as `sandpit check` reports it.
//! Reads sysctls and asks Landlock for its ABI; creates nothing.
#![forbid(unsafe_code)]
use crate::sandbox::KernelSupport;

fn sysctl(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Unprivileged user namespaces are allowed (the knobs Debian and Ubuntu add
/// included). A probe by reading settings, not by creating one.
fn user_namespaces() -> bool {
    let max = sysctl("/proc/sys/user/max_user_namespaces").unwrap_or(0);
    let debian = sysctl("/proc/sys/kernel/unprivileged_userns_clone").unwrap_or(1);
    let ubuntu = sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").unwrap_or(0);
    max > 0 && debian != 0 && ubuntu == 0
}

/// The kernel was built with seccomp (the `Seccomp:` line exists).
fn seccomp() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
        .unwrap_or(false)
}

pub fn probe() -> KernelSupport {
    KernelSupport {
        landlock_abi: super::sys::landlock_abi(),
        user_namespaces: user_namespaces(),
        seccomp: seccomp(),
        seatbelt: false,
    }
}
