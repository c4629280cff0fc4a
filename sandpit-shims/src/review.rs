//! The shims' side of the adversary's review: the protocol is `sandpit-review`'s
//! (re-exported here), [`Deferring`] is the shims' own.
use crate::Judge;
use sandpit_policy::{decide, Decision, Policy, Request};
use std::cell::Cell;

pub use sandpit_review::*;

/// A [`Judge`] over the policy that lets `Decision::Review` through and remembers
/// it, so the caller asks the adversary only after every deterministic check of the
/// command (its destinations included) has passed.
pub struct Deferring<'a> {
    policy: &'a Policy,
    review: Cell<bool>,
}

impl<'a> Deferring<'a> {
    pub fn new(policy: &'a Policy) -> Deferring<'a> {
        Deferring {
            policy,
            review: Cell::new(false),
        }
    }

    /// Whether a command judged through this needs the adversary.
    pub fn needs_review(&self) -> bool {
        self.review.get()
    }
}

impl Judge for Deferring<'_> {
    fn exec(&self, argv: &[String]) -> Result<(), String> {
        if !reviews_exec(self.policy) {
            return self.policy.exec(argv);
        }
        let v = decide(self.policy, &Request::Exec(argv));
        match v.decision {
            Decision::Allow => Ok(()),
            Decision::Deny => Err(v.reason),
            Decision::Review => {
                self.review.set(true);
                Ok(())
            }
        }
    }

    fn connect(&self, host: &str, port: Option<u16>) -> Result<(), String> {
        self.policy.connect(host, port)
    }
}
