//! The child's environment, composed without allocating or locking (exec hooks can
//! run in a child forked — or vforked — from a threaded parent).
//!
//! - `SANDPIT_*` entries are replaced by the ones this process received;
//! - `LD_PRELOAD` always names this library (appended to what the caller passed);
//! - variables the policy withholds are dropped.
use crate::state::State;
use libc::c_char;
use std::mem::MaybeUninit;
use std::ptr;

/// A vector on the stack that moves to an anonymous mapping when it outgrows `N`
/// (never the heap).
pub struct Scratch<T: Copy, const N: usize> {
    stack: [MaybeUninit<T>; N],
    map: *mut T,
    map_cap: usize,
    len: usize,
}

impl<T: Copy, const N: usize> Default for Scratch<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy, const N: usize> Scratch<T, N> {
    pub fn new() -> Self {
        Scratch {
            stack: [const { MaybeUninit::uninit() }; N],
            map: ptr::null_mut(),
            map_cap: 0,
            len: 0,
        }
    }

    fn base(&mut self) -> *mut T {
        if self.map.is_null() {
            self.stack.as_mut_ptr().cast()
        } else {
            self.map
        }
    }

    pub fn push(&mut self, v: T) -> Result<(), libc::c_int> {
        let cap = if self.map.is_null() { N } else { self.map_cap };
        if self.len == cap {
            let new_cap = (cap * 2).max(64);
            let bytes = new_cap * std::mem::size_of::<T>();
            // SAFETY: anonymous private mapping; checked for MAP_FAILED.
            let m = unsafe {
                libc::mmap(
                    ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if m == libc::MAP_FAILED {
                return Err(libc::ENOMEM);
            }
            let m = m.cast::<T>();
            // SAFETY: the first `len` elements of the old storage are initialised and
            // the new mapping has room for `new_cap >= len` elements.
            unsafe { ptr::copy_nonoverlapping(self.base(), m, self.len) };
            self.release();
            self.map = m;
            self.map_cap = new_cap;
        }
        // SAFETY: `len < capacity` of the current storage.
        unsafe { self.base().add(self.len).write(v) };
        self.len += 1;
        Ok(())
    }

    pub fn as_slice(&mut self) -> &mut [T] {
        let len = self.len;
        // SAFETY: the first `len` elements are initialised.
        unsafe { std::slice::from_raw_parts_mut(self.base(), len) }
    }

    pub fn as_ptr(&mut self) -> *const T {
        self.base()
    }

    fn release(&mut self) {
        if !self.map.is_null() {
            // SAFETY: `map` is a mapping of `map_cap` elements made by `push`.
            unsafe { libc::munmap(self.map.cast(), self.map_cap * std::mem::size_of::<T>()) };
            self.map = ptr::null_mut();
        }
    }
}

impl<T: Copy, const N: usize> Drop for Scratch<T, N> {
    fn drop(&mut self) {
        self.release();
    }
}

const PRELOAD: &[u8] = crate::sys::PRELOAD_ENTRY;

/// A composed environment: pointers into the caller's strings, this library's
/// saved entries and a local `LD_PRELOAD=` buffer.
pub struct Envp {
    ptrs: Scratch<*const c_char, 512>,
    preload: [u8; 4200],
}

impl Default for Envp {
    fn default() -> Self {
        Self::new()
    }
}

/// The entries (`NAME=value`) of a NULL-terminated environment array, in order,
/// without allocating.
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of NUL-terminated strings that outlive
/// `'a` and do not change meanwhile.
pub unsafe fn entries<'a>(envp: *const *const c_char) -> impl Iterator<Item = &'a [u8]> {
    (0..).map_while(move |i| {
        if envp.is_null() {
            return None;
        }
        // SAFETY: entries up to the NULL terminator are readable, per the contract.
        let e = unsafe { *envp.add(i) };
        // SAFETY: NUL-terminated, per the contract.
        (!e.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(e) }.to_bytes())
    })
}

/// The name of a `NAME=value` entry. A leading `=` belongs to the name (as std reads
/// the environment: `=X_TOKEN=v` is named `=X_TOKEN`, which `*_TOKEN` withholds).
pub fn name_of(entry: &[u8]) -> &[u8] {
    let from = usize::from(entry.first() == Some(&b'='));
    match entry[from..].iter().position(|&b| b == b'=') {
        Some(i) => &entry[..from + i],
        None => entry,
    }
}

/// Does the `LD_PRELOAD` value already name `lib` (entries split on `:` or space)?
pub fn names_lib(value: &[u8], lib: &[u8]) -> bool {
    value
        .split(|&b| b == b':' || b == b' ')
        .any(|e| !e.is_empty() && e == lib)
}

/// `SANDPIT_AGENT_FILES_HIDDEN=1` (`sandpit_policy::vars::HIDDEN_VAR`).
pub const HIDDEN_MARK: &std::ffi::CStr = c"SANDPIT_AGENT_FILES_HIDDEN=1";

impl Envp {
    pub fn new() -> Envp {
        Envp {
            ptrs: Scratch::new(),
            preload: [0; 4200],
        }
    }

    /// Compose from `envp` (NULL means empty). Returns the NULL-terminated array.
    ///
    /// # Safety
    /// `envp` is NULL or a NULL-terminated array of NUL-terminated strings.
    ///
    /// `agent`: the program that runs is the agent (an exec in place by a process
    /// that is, or one of `env.agent_programs`): the variables of `env.agent` pass.
    /// `hidden`: it holds the layer that hides `files.agent_read` already (the mark
    /// that it takes no second one).
    pub unsafe fn compose(
        &mut self,
        st: &State,
        envp: *const *const c_char,
        agent: bool,
        hidden: bool,
    ) -> Result<*const *const c_char, libc::c_int> {
        if st.lib.is_empty() {
            return Err(libc::EPERM);
        }
        let mut old_preload: Option<*const c_char> = None;
        // SAFETY: per the contract.
        for bytes in unsafe { entries(envp) } {
            // The caller's string itself (a slice from its first byte).
            let e: *const c_char = bytes.as_ptr().cast();
            let name = name_of(bytes);
            if name.starts_with(b"SANDPIT_")
                || (st.decider.withhold(name) && !(agent && st.decider.agent_keeps(name)))
            {
                continue;
            }
            if name == crate::sys::PRELOAD_NAME {
                old_preload = Some(e);
                continue;
            }
            self.ptrs.push(e)?;
        }
        for e in &st.reinject {
            self.ptrs.push(e.as_ptr())?;
        }
        if hidden {
            self.ptrs.push(HIDDEN_MARK.as_ptr())?;
        }
        let old = old_preload
            // SAFETY: one of the caller's NUL-terminated strings.
            .map(|p| unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes())
            .map(|b| &b[PRELOAD.len().min(b.len())..]);
        match old {
            Some(v) if names_lib(v, &st.lib) => {
                if let Some(p) = old_preload {
                    self.ptrs.push(p)?;
                }
            }
            _ => {
                let v = old.unwrap_or(b"");
                let sep = usize::from(!v.is_empty());
                let n = PRELOAD.len() + v.len() + sep + st.lib.len();
                if n + 1 > self.preload.len() {
                    return Err(libc::E2BIG);
                }
                let b = &mut self.preload;
                b[..PRELOAD.len()].copy_from_slice(PRELOAD);
                let mut o = PRELOAD.len();
                b[o..o + v.len()].copy_from_slice(v);
                o += v.len();
                if sep == 1 {
                    b[o] = b':';
                    o += 1;
                }
                b[o..o + st.lib.len()].copy_from_slice(&st.lib);
                o += st.lib.len();
                b[o] = 0;
                let p = self.preload.as_ptr().cast();
                self.ptrs.push(p)?;
            }
        }
        self.ptrs.push(ptr::null())?;
        Ok(self.ptrs.as_ptr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hidden_mark_names_the_variable() {
        let mark = HIDDEN_MARK.to_str().unwrap();
        assert_eq!(mark, format!("{}=1", sandpit_policy::vars::HIDDEN_VAR));
        // The name the agent's library unsets.
        assert_eq!(
            c"SANDPIT_AGENT_FILES_HIDDEN".to_str().unwrap(),
            sandpit_policy::vars::HIDDEN_VAR
        );
    }

    #[test]
    fn scratch_spills_to_mapping() {
        let mut s: Scratch<usize, 4> = Scratch::new();
        for i in 0..1000 {
            s.push(i).unwrap();
        }
        assert_eq!(s.as_slice().len(), 1000);
        assert_eq!(s.as_slice()[999], 999);
        assert_eq!(s.as_slice()[3], 3);
    }

    #[test]
    fn names_as_std_reads_them() {
        for (entry, name) in [
            (&b"PATH=/bin"[..], &b"PATH"[..]),
            (b"A=b=c", b"A"),
            (b"EMPTY=", b"EMPTY"),
            (b"=X_TOKEN=v", b"=X_TOKEN"),
            (b"NOVALUE", b"NOVALUE"),
            (b"=", b"="),
        ] {
            assert_eq!(name_of(entry), name, "{:?}", String::from_utf8_lossy(entry));
        }
    }

    #[test]
    fn preload_membership() {
        assert!(names_lib(b"/a.so:/lib/x.so", b"/lib/x.so"));
        assert!(names_lib(b"/lib/x.so /a.so", b"/lib/x.so"));
        assert!(!names_lib(b"/lib/x.so.bak", b"/lib/x.so"));
    }
}
