//! Exec hooks. Every way a process starts another program is judged on its whole
//! command line against `exec.block`, and the child's environment is composed by
//! [`crate::envp::Envp`] so the child is hooked too — even after `env -i` or
//! `env -u LD_PRELOAD`.
//!
//! These run after `fork` (and `vfork`) in children of threaded parents: they do
//! not allocate or lock (argv slices and env arrays live on the stack or in an
//! anonymous mapping).
use crate::envp::Scratch;
use crate::state::State;
use libc::c_char;

pub mod execve;
pub mod execvp;
pub mod spawn;
pub mod system;

pub type Argv<'a> = Scratch<&'a [u8], 256>;

/// Decode a NULL-terminated argv into `out`.
///
/// # Safety
/// `argv` is NULL or a NULL-terminated array of NUL-terminated strings that outlive
/// the use of `out`.
pub unsafe fn decode<'a>(
    argv: *const *const c_char,
    out: &mut Argv<'a>,
) -> Result<(), libc::c_int> {
    if argv.is_null() {
        return Ok(());
    }
    let mut i = 0;
    loop {
        // SAFETY: NULL-terminated per the contract.
        let a = unsafe { *argv.add(i) };
        if a.is_null() {
            return Ok(());
        }
        // SAFETY: NUL-terminated per the contract; the lifetime is the caller's.
        out.push(unsafe { std::ffi::CStr::from_ptr(a) }.to_bytes())?;
        i += 1;
    }
}

/// Judge a command line. `program` is the file actually executed (when known): the
/// line is judged both as passed and with argv\[0\] replaced by it, so a forged
/// argv\[0\] cannot hide the program.
pub fn judge<'a>(
    st: &State,
    program: Option<&'a [u8]>,
    argv: &mut Argv<'a>,
) -> Result<(), libc::c_int> {
    let args = argv.as_slice();
    let deny = |args: &[&[u8]]| match st.decider.exec(args) {
        Ok(()) => Ok(()),
        Err(d) => {
            crate::report::denied(&d);
            Err(libc::EACCES)
        }
    };
    deny(args)?;
    if let Some(p) = program {
        if args.is_empty() {
            return deny(&[p]);
        }
        if args[0] != p {
            let saved = args[0];
            args[0] = p;
            let r = deny(args);
            args[0] = saved;
            r?;
        }
    }
    Ok(())
}

/// Decide `program argv` and compose the child environment from `envp`.
///
/// # Safety
/// `argv`/`envp` as for `execve`.
pub unsafe fn prepare(
    program: Option<&[u8]>,
    argv: *const *const c_char,
    envp: *const *const c_char,
    env_out: &mut crate::envp::Envp,
) -> Result<*const *const c_char, libc::c_int> {
    let st = crate::state::get()?;
    let mut args = Argv::new();
    // SAFETY: per the contract.
    unsafe { decode(argv, &mut args) }?;
    judge(st, program, &mut args)?;
    // SAFETY: per the contract.
    unsafe { env_out.compose(st, envp) }
}

/// The process environment (`environ`).
pub fn environ() -> *const *const c_char {
    // SAFETY: reading the pointer value of libc's global.
    unsafe { *crate::sys::environ_ptr() }
}
