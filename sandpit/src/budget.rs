//! A count shared between threads that never goes past its limit: the relay's
//! grown buffers draw bytes on one, the DNS bridge's relays in flight on another.
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Budget {
    used: AtomicUsize,
    limit: usize,
}

impl Budget {
    pub const fn new(limit: usize) -> Budget {
        Budget {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// Take `n` if that stays within the limit; `false` (nothing taken) otherwise.
    pub fn take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|&t| t <= self.limit)
            })
            .is_ok()
    }

    /// Give back `n` taken earlier.
    pub fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::Budget;

    #[test]
    fn takes_stop_at_the_limit_and_gives_make_room() {
        let b = Budget::new(10);
        assert!(b.take(6) && b.take(4));
        assert!(!b.take(1), "past the limit");
        assert!(!b.take(usize::MAX), "no overflow past it either");
        assert_eq!(b.used(), 10);
        b.give(4);
        assert!(b.take(3));
        assert_eq!(b.used(), 9);
    }
}
