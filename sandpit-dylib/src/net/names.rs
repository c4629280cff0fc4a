//! Which name the process resolved to which address, so a connect to a bare IP can
//! be handed to the proxy with the name it was meant for. A fixed table behind a
//! try-lock: never blocks, never allocates; on contention a record is skipped.
use super::canonical_ip;
use std::cell::UnsafeCell;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};

const SLOTS: usize = 128;
pub const HOST_MAX: usize = 253;

#[derive(Clone, Copy)]
struct Slot {
    ip: [u8; 16],
    used: bool,
    len: u8,
    host: [u8; HOST_MAX],
}

struct Table {
    lock: AtomicBool,
    inner: UnsafeCell<(usize, [Slot; SLOTS])>,
}

// SAFETY: `inner` is only touched while `lock` is held.
unsafe impl Sync for Table {}

static TABLE: Table = Table {
    lock: AtomicBool::new(false),
    inner: UnsafeCell::new((
        0,
        [Slot {
            ip: [0; 16],
            used: false,
            len: 0,
            host: [0; HOST_MAX],
        }; SLOTS],
    )),
};

fn key(ip: IpAddr) -> [u8; 16] {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn with_table<R>(f: impl FnOnce(&mut (usize, [Slot; SLOTS])) -> R) -> Option<R> {
    if TABLE
        .lock
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return None;
    }
    // SAFETY: we hold the lock.
    let r = f(unsafe { &mut *TABLE.inner.get() });
    TABLE.lock.store(false, Ordering::Release);
    Some(r)
}

/// Remember that `host` resolved to `ip`.
pub fn record(ip: IpAddr, host: &[u8]) {
    if host.is_empty() || host.len() > HOST_MAX {
        return;
    }
    let k = key(ip);
    with_table(|(next, slots)| {
        let i = slots
            .iter()
            .position(|s| s.used && s.ip == k)
            .unwrap_or_else(|| {
                let i = *next % SLOTS;
                *next = next.wrapping_add(1);
                i
            });
        let s = &mut slots[i];
        s.used = true;
        s.ip = k;
        s.len = host.len() as u8;
        s.host[..host.len()].copy_from_slice(host);
    });
}

/// The last name resolved to `ip`, copied into `out`.
pub fn lookup(ip: IpAddr, out: &mut [u8; HOST_MAX]) -> Option<usize> {
    let k = key(ip);
    with_table(|(_, slots)| {
        slots.iter().find(|s| s.used && s.ip == k).map(|s| {
            let n = usize::from(s.len);
            out[..n].copy_from_slice(&s.host[..n]);
            n
        })
    })
    .flatten()
}
