//! The machine's own addresses: every address of every interface of the launcher's
//! network namespace, IPv4 and IPv6, loopback included. `network.mode =
//! "unrestricted"` refuses them as it refuses loopback (a public address on an
//! interface reaches the services listening on all interfaces), in the proxy, the
//! UDP relay and `sandpit explain` alike; `sandpit_policy` decides with the set
//! (`decide_connect`'s `own`), this module only gathers it.
//!
//! Read with `getifaddrs` and kept until an address changes: on Linux a route
//! netlink socket subscribed to address changes (`RTM_NEWADDR`/`RTM_DELADDR` of
//! both families) is emptied before each answer, and anything on it (or a lost
//! message) reads the addresses again. The kernel queues the message before the
//! change's own call returns, so an address added while a run goes on is refused
//! from the next connection on, and a decision costs one `recv` when nothing
//! changed rather than a dump of every interface. Where the socket cannot be made
//! (and on macOS) the addresses are read for every answer.
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};

struct Watch {
    #[cfg(target_os = "linux")]
    changes: Option<std::os::fd::OwnedFd>,
    addrs: Option<Arc<[IpAddr]>>,
}

fn watch() -> &'static Mutex<Watch> {
    static W: OnceLock<Mutex<Watch>> = OnceLock::new();
    W.get_or_init(|| {
        Mutex::new(Watch {
            // Subscribed before the first read: no change falls between them.
            #[cfg(target_os = "linux")]
            changes: crate::sys::address_changes().ok(),
            addrs: None,
        })
    })
}

/// The machine's addresses now. An error reading them is the caller's: every
/// caller refuses what it was asked to decide, rather than decide without them.
pub fn addrs() -> Result<Arc<[IpAddr]>, String> {
    let mut w = match watch().lock() {
        Ok(w) => w,
        Err(e) => e.into_inner(),
    };
    #[cfg(target_os = "linux")]
    {
        let changed = match &w.changes {
            Some(fd) => {
                use std::os::fd::AsFd;
                crate::sys::drain(fd.as_fd()).unwrap_or(true)
            }
            None => true,
        };
        if changed {
            w.addrs = None;
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        w.addrs = None;
    }
    if let Some(a) = &w.addrs {
        return Ok(a.clone());
    }
    let a: Arc<[IpAddr]> = crate::sys::interface_addrs()
        .map_err(|e| {
            format!("the machine's own addresses could not be read ({e}), so no address is known not to be one of them")
        })?
        .into();
    w.addrs = Some(a.clone());
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_among_the_machines_addresses_and_reads_are_cached() {
        let a = addrs().unwrap();
        assert!(a.iter().any(|ip| ip.is_loopback()), "{a:?}");
        let b = addrs().unwrap();
        assert_eq!(a, b);
    }
}
