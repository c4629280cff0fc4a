//! Re-entry guard and the panic barrier every hook body runs behind.
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    // const-initialised and Drop-free: access never allocates or registers a
    // destructor, so it is safe in a forked child and in early constructors.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread is inside a hook body.
#[inline]
pub fn entered() -> bool {
    INSIDE.with(|c| c.get())
}

pub struct Entered;
impl Entered {
    fn new() -> Entered {
        INSIDE.with(|c| c.set(true));
        Entered
    }
}
impl Drop for Entered {
    fn drop(&mut self) {
        INSIDE.with(|c| c.set(false));
    }
}

/// Set the guard; `None` if this thread is already inside a hook (one TLS access).
#[inline]
pub fn enter() -> Option<Entered> {
    if INSIDE.with(|c| c.replace(true)) {
        None
    } else {
        Some(Entered)
    }
}

/// Run `body` with the guard set. A panic or an `Err(errno)` sets errno and returns
/// `fail`; the real function is never called as a fallback. Errno from a successful
/// body (e.g. the real call's own failure) is preserved.
#[inline]
pub fn run<R>(fail: R, body: impl FnOnce() -> Result<R, libc::c_int>) -> R {
    let _g = Entered::new();
    run_entered(fail, body)
}

/// [`run`] for a caller that already holds the guard (from [`enter`]).
#[inline]
pub fn run_entered<R>(fail: R, body: impl FnOnce() -> Result<R, libc::c_int>) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(r)) => r,
        Ok(Err(errno)) => {
            crate::sys::set_errno(errno);
            fail
        }
        Err(_) => {
            crate::sys::set_errno(libc::EPERM);
            fail
        }
    }
}

/// Run `f` with the guard set (used by load-time code that calls hooked functions).
pub fn with_guard<R>(f: impl FnOnce() -> R) -> R {
    let was = entered();
    INSIDE.with(|c| c.set(true));
    let r = f();
    INSIDE.with(|c| c.set(was));
    r
}

/// Run `f` (a real call that may not return, or may take long) with the guard
/// cleared. Needed around exec: in a `vfork` child the thread-local lives in the
/// parent's memory, and a successful exec never runs our cleanup — a guard left set
/// would silently disable every hook in the parent.
#[inline]
pub fn released<R>(f: impl FnOnce() -> R) -> R {
    let was = entered();
    INSIDE.with(|c| c.set(false));
    let r = f();
    INSIDE.with(|c| c.set(was));
    r
}

#[cfg(test)]
mod tests {
    /// The barrier holds with the unwinder linked in (build.rs: libgcc_eh instead of
    /// libgcc_s): a panicking body fails with EPERM and never unwinds past `run`.
    #[test]
    fn a_panicking_body_fails_with_eperm() {
        crate::sys::set_errno(0);
        let r = super::run(-1, || -> Result<i32, libc::c_int> { panic!("body failed") });
        assert_eq!(r, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EPERM)
        );
        assert_eq!(super::run(-1, || Ok(7)), 7);
    }
}
