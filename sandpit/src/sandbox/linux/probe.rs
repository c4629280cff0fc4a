//! What this kernel offers: the Landlock ABI, unprivileged user namespaces (tried for
//! real in a throw-away child), seccomp.
use super::sys::{self, Fork};
use crate::sandbox::KernelSupport;

pub fn probe() -> KernelSupport {
    KernelSupport {
        landlock_abi: sys::landlock_abi(),
        user_namespaces: user_namespaces_work(),
        seccomp: sys::seccomp_available(),
        seatbelt: false,
    }
}

/// What can be learned without creating a namespace (two system calls): user
/// namespaces are reported as available, the caller finds out by trying.
pub fn quick() -> KernelSupport {
    KernelSupport {
        landlock_abi: sys::landlock_abi(),
        user_namespaces: true,
        seccomp: sys::seccomp_available(),
        seatbelt: false,
    }
}

/// Create user+mount+pid+net namespaces in a child that exits at once. The child
/// only makes async-signal-safe calls, so this is safe from a threaded process.
fn user_namespaces_work() -> bool {
    let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWNET;
    match sys::fork() {
        Ok(Fork::Child) => sys::exit_now(if sys::unshare(flags).is_ok() { 0 } else { 1 }),
        Ok(Fork::Parent(pid)) => matches!(sys::wait(pid, false), Ok(Some((_, sys::Exit::Code(0))))),
        Err(_) => false,
    }
}
