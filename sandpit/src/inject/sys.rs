//! The one system call the injector needs that std does not wrap.

/// The effective uid of this process.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}
