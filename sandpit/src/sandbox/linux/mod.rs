//! The Linux kernel layer (L2): user/mount/pid/net namespaces, Landlock and seccomp,
//! applied in a forked child before exec. `plan` is pure data built from the policy;
//! `supervise::run` applies it. All `unsafe` lives in `sys`.
#![deny(unsafe_code)]

pub mod bridge;
pub mod guard;
pub mod landlock;
pub mod loopback;
pub mod memory;
pub mod namespaces;
pub mod notify;
pub mod packet;
pub mod plan;
pub mod probe;
pub mod seccomp;
pub mod sockets;
mod spare;
pub mod supervise;
mod sys;
pub mod tmpfs;
pub mod udp;

pub use guard::move_aside;
pub use plan::{
    absent_git_file_danger, plan, quarantine_path, FsView, HostFs, Input, Kind, Mode, MountOp,
    Network, Plan, PlanError,
};
pub use spare::{start_tender, Spares};
pub use supervise::{
    block_forwarded_signals, lock_placeholders, run, spawn, Layer, Layers, Running, SpawnError,
};

/// Why `limits.processes` would not hold for a run here, if it would not: without a
/// user namespace (`namespaces` false) and before Linux 5.14 the kernel counts
/// `RLIMIT_NPROC` across every process of the user, not per user namespace; and it
/// never applies it to root.
pub fn process_limit_void(namespaces: bool) -> Option<&'static str> {
    if !namespaces {
        return Some("without a user namespace it would count every process of your user");
    }
    if sys::getuid() == 0 {
        return Some("the kernel does not apply it to root");
    }
    match sys::kernel_release() {
        Some(v) if v >= (5, 14) => None,
        _ => Some("before Linux 5.14 it would count every process of your user"),
    }
}
