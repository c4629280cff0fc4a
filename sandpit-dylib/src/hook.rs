//! Symbol registration: the one place that knows how a hook becomes an export.
//!
//! `hook!` emits, for each hooked symbol:
//! - the exported `#[no_mangle] extern "C"` function (Linux: found first by the
//!   dynamic linker because the library is preloaded);
//! - a `Real` slot holding the next definition, resolved by `dlsym(RTLD_NEXT)` in a
//!   load-time constructor (lazily, once, if a call arrives before it ran);
//! - the body wrapper: re-entry guard, `catch_unwind`, errno on failure.
//!
//! On macOS the same bodies are registered through `__DATA,__interpose` tuples
//! emitted by this macro (dyld rebinds every other image's calls to the replacee);
//! there the "real" function is the original symbol itself, called by name, since
//! interposing does not apply to this library's own calls.
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One `__DATA,__interpose` entry: dyld binds every other image's references to
/// `replacee` to `replacement` (layout fixed by dyld: two pointers).
#[repr(C)]
pub struct Interpose {
    pub replacement: *const (),
    pub replacee: *const (),
}
// SAFETY: two code addresses, never written after load.
unsafe impl Sync for Interpose {}

/// The next definition of a hooked symbol (Linux; on macOS the original is named).
#[cfg_attr(target_os = "macos", allow(dead_code))]
pub struct Real {
    name: &'static CStr,
    addr: AtomicUsize,
}

#[cfg_attr(target_os = "macos", allow(dead_code))]
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

/// `hook! { fn name(a: T, …) -> R; fail = VALUE; [macos…;] |real| BODY }`
///
/// `BODY` evaluates to `Result<R, c_int>`; `Err(errno)` sets errno and returns
/// `VALUE`. `real` is the next definition, typed like the hook.
///
/// The optional clause names the libSystem symbols the body is registered for on
/// macOS (default: the hook's own name), each one a `__DATA,__interpose` tuple whose
/// real function is that same symbol:
/// - `macos = ["connect", "connect$NOCANCEL"];` the tuple's replacement is a Rust
///   function exported as `sandpit_hook_<symbol>`;
/// - `macos_variadic = ["open", "open$NOCANCEL"];` for C-variadic functions (Apple
///   arm64 passes variadic arguments on the stack): the replacement is the C
///   trampoline `sandpit_c_<symbol>` (csrc/darwin.c), which calls
///   `sandpit_hook_<symbol>` with fixed arguments, and the real call goes through
///   `sandpit_real_<symbol>`, which calls the variadic original.
///
/// A symbol may carry `#[cfg(…)]` (e.g. `$INODE64` variants exist on x86_64 only).
/// On Linux the clause is ignored.
#[macro_export]
macro_rules! hook {
    ($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty;
     fail = $fail:expr; |$real:ident| $body:block) => {
        $crate::hook! { @imp direct; $(#[$meta])* fn $name($($arg: $ty),*) -> $ret;
            fail = $fail; [stringify!($name)]; |$real| $body }
    };
    ($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty;
     fail = $fail:expr; macos = [$($syms:tt)+]; |$real:ident| $body:block) => {
        $crate::hook! { @imp direct; $(#[$meta])* fn $name($($arg: $ty),*) -> $ret;
            fail = $fail; [$($syms)+]; |$real| $body }
    };
    ($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty;
     fail = $fail:expr; macos_variadic = [$($syms:tt)+]; |$real:ident| $body:block) => {
        $crate::hook! { @imp variadic; $(#[$meta])* fn $name($($arg: $ty),*) -> $ret;
            fail = $fail; [$($syms)+]; |$real| $body }
    };

    (@imp $kind:ident; $(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),*) -> $ret:ty;
     fail = $fail:expr; $syms:tt; |$real:ident| $body:block) => {
        #[allow(non_snake_case, non_upper_case_globals, dead_code, unused_imports)]
        pub(crate) mod $name {
            use super::*;
            /// The C type of the hooked function.
            pub(crate) type Sig = unsafe extern "C" fn($($ty),*) -> $ret;

            #[cfg(not(target_os = "macos"))]
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
            #[cfg(all(not(test), not(target_os = "macos")))]
            #[used]
            #[link_section = ".init_array"]
            static INIT: extern "C" fn() = init;
            #[cfg(not(target_os = "macos"))]
            extern "C" fn init() {
                REAL.resolve(super::$name as *const () as usize);
            }

            /// The real function: the next definition (`dlsym(RTLD_NEXT)`);
            /// `ENOSYS` when the C library has none.
            #[cfg(not(target_os = "macos"))]
            #[inline]
            pub(crate) fn real() -> ::std::result::Result<Sig, ::libc::c_int> {
                let addr = REAL.get(super::$name as *const () as usize);
                if addr == 0 {
                    return Err(::libc::ENOSYS);
                }
                // SAFETY: `addr` came from dlsym for this very symbol name, whose C
                // type is `Sig` (the hook is declared with the same signature).
                Ok(unsafe { ::std::mem::transmute::<usize, Sig>(addr) })
            }

            /// The real function: libSystem's own (interposition does not apply to
            /// this library's calls).
            #[cfg(target_os = "macos")]
            #[inline]
            pub(crate) fn real() -> ::std::result::Result<Sig, ::libc::c_int> {
                $crate::__hook_real!($kind; [($($arg: $ty),*) -> $ret]; $syms)
            }
        }

        $(#[$meta])*
        #[cfg(not(target_os = "macos"))]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            let $real = match $name::real() {
                Ok(r) => r,
                Err(e) => {
                    $crate::sys::set_errno(e);
                    return $fail;
                }
            };
            let Some(_guard) = $crate::guard::enter() else {
                // Our own code (or a libc function it called) re-entered: go straight
                // to the real function.
                // SAFETY: same arguments the caller passed us, same signature.
                return unsafe { $real($($arg),*) };
            };
            $crate::guard::run_entered($fail, move || -> ::std::result::Result<$ret, ::libc::c_int> { $body })
        }

        /// The hook body, shared by every libSystem symbol registered for it; `real`
        /// is that symbol's original.
        $(#[$meta])*
        #[cfg(target_os = "macos")]
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn $name($real: $name::Sig, $($arg: $ty),*) -> $ret {
            let Some(_guard) = $crate::guard::enter() else {
                // A libSystem function called from our own code re-entered: go
                // straight to the real function.
                // SAFETY: same arguments the caller passed us, same signature.
                return unsafe { $real($($arg),*) };
            };
            $crate::guard::run_entered($fail, move || -> ::std::result::Result<$ret, ::libc::c_int> { $body })
        }

        $crate::__interpose_all!($kind; $name; [($($arg: $ty),*) -> $ret]; $syms);
    };
}

/// The real function on macOS (see [`hook!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __hook_real {
    ($kind:ident; $sig:tt; [$first:expr $(, $($rest:tt)*)?]) => {
        $crate::__hook_real!(@one $kind; $first; $sig)
    };
    (@one direct; $sym:expr; [($($arg:ident : $ty:ty),*) -> $ret:ty]) => {{
        #[allow(clashing_extern_declarations)]
        extern "C" {
            #[link_name = $sym]
            fn original($($arg: $ty),*) -> $ret;
        }
        Ok(original as Sig)
    }};
    (@one variadic; $sym:expr; [($($arg:ident : $ty:ty),*) -> $ret:ty]) => {{
        extern "C" {
            #[link_name = concat!("sandpit_real_", $sym)]
            fn original($($arg: $ty),*) -> $ret;
        }
        Ok(original as Sig)
    }};
}

/// The `__DATA,__interpose` tuples of one hook: the first symbol, then the others
/// (each may carry `#[cfg(…)]`).
#[doc(hidden)]
#[macro_export]
macro_rules! __interpose_all {
    ($kind:ident; $name:ident; $sig:tt;
     [$first:expr $(, $(#[$scfg:meta])* $sym:literal)* $(,)?]) => {
        $crate::__interpose!($kind; $name; $first; $sig);
        $(
            $(#[$scfg])*
            $crate::__interpose!($kind; $name; $sym; $sig);
        )*
    };
}

/// One `__DATA,__interpose` tuple for `$sym` (see [`hook!`]). macOS only.
#[doc(hidden)]
#[macro_export]
macro_rules! __interpose {
    (direct; $name:ident; $sym:expr; [($($arg:ident : $ty:ty),*) -> $ret:ty]) => {
        #[cfg(all(target_os = "macos", not(test)))]
        const _: () = {
            #[allow(clashing_extern_declarations)]
            extern "C" {
                #[link_name = $sym]
                fn original($($arg: $ty),*) -> $ret;
            }
            #[export_name = concat!("sandpit_hook_", $sym)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "C" fn replacement($($arg: $ty),*) -> $ret {
                // SAFETY: the caller's arguments; `original` has the hook's type.
                unsafe { $name(original, $($arg),*) }
            }
            #[used]
            #[link_section = "__DATA,__interpose"]
            static ENTRY: $crate::hook::Interpose = $crate::hook::Interpose {
                replacement: replacement as *const (),
                replacee: original as *const (),
            };
        };
    };
    (variadic; $name:ident; $sym:expr; [($($arg:ident : $ty:ty),*) -> $ret:ty]) => {
        #[cfg(all(target_os = "macos", not(test)))]
        const _: () = {
            #[allow(clashing_extern_declarations)]
            extern "C" {
                #[link_name = $sym]
                fn original();
                #[link_name = concat!("sandpit_c_", $sym)]
                fn trampoline();
                #[link_name = concat!("sandpit_real_", $sym)]
                fn real_fixed($($arg: $ty),*) -> $ret;
            }
            /// Called by the C trampoline with the variadic argument fetched.
            #[export_name = concat!("sandpit_hook_", $sym)]
            unsafe extern "C" fn fixed($($arg: $ty),*) -> $ret {
                // SAFETY: the caller's arguments; `real_fixed` has the hook's type.
                unsafe { $name(real_fixed, $($arg),*) }
            }
            #[used]
            #[link_section = "__DATA,__interpose"]
            static ENTRY: $crate::hook::Interpose = $crate::hook::Interpose {
                replacement: trampoline as *const (),
                replacee: original as *const (),
            };
        };
    };
    // A C-variadic function implemented wholly in C (`sandpit_c_<symbol>`).
    (c_only; $sym:expr) => {
        #[cfg(all(target_os = "macos", not(test)))]
        const _: () = {
            #[allow(clashing_extern_declarations)]
            extern "C" {
                #[link_name = $sym]
                fn original();
                #[link_name = concat!("sandpit_c_", $sym)]
                fn trampoline();
            }
            #[used]
            #[link_section = "__DATA,__interpose"]
            static ENTRY: $crate::hook::Interpose = $crate::hook::Interpose {
                replacement: trampoline as *const (),
                replacee: original as *const (),
            };
        };
    };
}
