//! What the launcher's network services (the proxy and the DNS responder) share:
//! the decision each makes for a host ([`decide`]: the policy's verdict and the
//! reviewer's hook) and the handle of a running listener. Neither service imports
//! the other for these.
use std::net::SocketAddr;

use tokio::task::JoinHandle;

pub mod decide;
pub mod own;
pub mod peer;

/// A running listener; dropping it (or [`Running::shutdown`]) stops the listener and
/// every connection it carries.
pub struct Running {
    pub(crate) local: Option<SocketAddr>,
    pub(crate) task: JoinHandle<()>,
}

impl Running {
    pub(crate) fn new(local: SocketAddr, task: JoinHandle<()>) -> Running {
        Running {
            local: Some(local),
            task,
        }
    }
    /// The bound address (TCP/UDP listeners).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }
    pub fn shutdown(self) {}
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}
