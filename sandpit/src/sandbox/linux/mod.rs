//! The Linux kernel layer (L2): user/mount/pid/net namespaces, Landlock and seccomp,
//! applied in a forked child before exec. `plan` is pure data built from the policy;
//! `supervise::run` applies it. All `unsafe` lives in `sys`.
#![deny(unsafe_code)]

pub mod bridge;
pub mod guard;
pub mod landlock;
pub mod loopback;
pub mod namespaces;
pub mod plan;
pub mod probe;
pub mod seccomp;
pub mod supervise;
mod sys;

pub use plan::{plan, FsView, HostFs, Input, Kind, Mode, MountOp, Network, Plan, PlanError};
pub use supervise::{block_forwarded_signals, run, spawn, Layer, Layers, Running, SpawnError};
