//! Symbol registration: the one place that knows how a hook becomes an export.
//!
//! `hook!` emits, for each hooked symbol:
//! - the exported `#[no_mangle] extern "C"` function (Linux: found first by the
//!   dynamic linker because the library is preloaded);
//! - a `Real` slot holding the next definition, resolved by `dlsym(RTLD_NEXT)` in a
//!   load-time constructor (lazily, once, if a call arrives before it ran);
//! - the body wrapper: re-entry guard, `catch_unwind`, errno on failure.
//!
//! macOS will register the same bodies through `__DATA,__interpose` tuples emitted by
//! this macro; there the "real" symbol is the original name itself.
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The next definition of a hooked symbol.
pub struct Real {
    name: &'static CStr,
    addr: AtomicUsize,
}

impl Real {
    pub const fn new(name: &'static CStr) -> Real {
        Real {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// Resolve with `dlsym(RTLD_NEXT)`. Aborts if the lookup finds this library's own
    /// hook: calling it would recurse forever, and falling through unchecked is not
    /// an option.
    pub fn resolve(&self, ours: usize) -> usize {
        // SAFETY: `name` is a NUL-terminated string with static lifetime; RTLD_NEXT is
        // valid from code inside a shared object.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
        if p != 0 && p == ours {
            crate::report::raw_stderr(
                b"sandpit: interposer resolved a real symbol to itself; aborting\n",
            );
            std::process::abort();
        }
        if p != 0 {
            self.addr.store(p, Ordering::Release);
        }
        p
    }

    /// The resolved address, resolving now if the constructor has not run yet.
    /// Zero when the C library has no such symbol.
    #[inline]
    pub fn get(&self, ours: usize) -> usize {
        let a = self.addr.load(Ordering::Acquire);
        if a != 0 {
            a
        } else {
            self.resolve(ours)
        }
    }
}

/// `hook! { fn name(a: T, …) -> R; fail = VALUE; |real| BODY }`
///
/// `BODY` evaluates to `Result<R, c_int>`; `Err(errno)` sets errno and returns
/// `VALUE`. `real` is the next definition, typed like the hook.
#[macro_export]
macro_rules! hook {
    ($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty;
     fail = $fail:expr; |$real:ident| $body:block) => {
        #[allow(non_snake_case, non_upper_case_globals)]
        pub(crate) mod $name {
            pub(crate) static REAL: $crate::hook::Real = $crate::hook::Real::new(
                match ::std::ffi::CStr::from_bytes_with_nul(
                    concat!(stringify!($name), "\0").as_bytes(),
                ) {
                    Ok(c) => c,
                    Err(_) => panic!("symbol name"),
                },
            );
            // Unit tests link this crate into the test binary: no exports, no
            // constructors there.
            #[cfg(not(test))]
            #[used]
            #[cfg_attr(target_os = "linux", link_section = ".init_array")]
            #[cfg_attr(target_os = "macos", link_section = "__DATA,__mod_init_func")]
            static INIT: extern "C" fn() = init;
            #[allow(dead_code)]
            extern "C" fn init() {
                REAL.resolve(super::$name as *const () as usize);
            }
        }

        $(#[$meta])*
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            type Sig = unsafe extern "C" fn($($ty),*) -> $ret;
            let addr = $name::REAL.get($name as *const () as usize);
            if addr == 0 {
                $crate::sys::set_errno(::libc::ENOSYS);
                return $fail;
            }
            // SAFETY: `addr` came from dlsym for this very symbol name, whose C type is
            // `Sig` (the hook is declared with the same signature).
            let $real: Sig = unsafe { ::std::mem::transmute::<usize, Sig>(addr) };
            if $crate::guard::entered() {
                // Our own code (or a libc function it called) re-entered: go straight
                // to the real function.
                // SAFETY: same arguments the caller passed us, same signature.
                return unsafe { $real($($arg),*) };
            }
            $crate::guard::run($fail, move || -> ::std::result::Result<$ret, ::libc::c_int> { $body })
        }
    };
}
