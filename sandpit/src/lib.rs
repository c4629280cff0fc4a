//! The sandpit launcher: loads the policy, starts the proxy and audit log, and runs
//! the agent under the kernel layer with the interposition library injected.
pub mod adversary;
pub mod audit;
pub mod budget;
pub mod caches;
pub mod cli;
pub mod config;
pub mod console;
pub mod control;
pub mod cpu;
pub mod credentials;
pub mod dns;
pub mod gitcfg;
pub mod inject;
pub mod inspect;
pub mod launch;
pub mod proxy;
pub mod run;
pub mod sandbox;
pub mod service;
#[cfg(target_os = "linux")]
pub mod splice;
pub mod sys;
pub mod telemetry;
pub mod timing;
pub mod trash;
pub mod vcs;
