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
use std::ops::ControlFlow;

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
    let deny = |args: &[&[u8]]| decide(st, args);
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

/// One command line against `exec.block`: refused (and reported) or not.
fn decide(st: &State, args: &[&[u8]]) -> Result<(), libc::c_int> {
    match st.decider.exec(args) {
        Ok(()) => Ok(()),
        Err(d) => {
            crate::report::denied(&d);
            Err(libc::EACCES)
        }
    }
}

/// Linux reads at most this much of a program for its `#!` line (BINPRM_BUF_SIZE).
const SHEBANG_MAX: usize = 256;
/// How many times the kernel lets an interpreter be a script again (`exec_binprm`:
/// five rewrites); a longer chain is refused here.
const SCRIPT_DEPTH: usize = 5;

/// Judge what the kernel runs when the program is a script: `#!interp [arg]` makes
/// it `interp [arg] path argv[1]…`, so `#!/bin/rm -rf` in a file runs `rm -rf`
/// with its name on no command line. An interpreter that is a script again is read
/// the same way. `path` is a path this process can open (a descriptor's program is
/// named by its `/proc/self/fd/N`).
fn script(st: &State, path: &[u8], argv: &[&[u8]]) -> Result<(), libc::c_int> {
    let mut bufs = [[0u8; SHEBANG_MAX]; SCRIPT_DEPTH];
    let mut line: Argv<'_> = Argv::new();
    line.push(path)?;
    for a in argv.iter().skip(1) {
        line.push(a)?;
    }
    let mut program = path;
    for buf in bufs.iter_mut() {
        let Some((interp, arg)) = shebang(program, buf)? else {
            return Ok(());
        };
        let mut next: Argv<'_> = Argv::new();
        next.push(interp)?;
        if let Some(a) = arg {
            next.push(a)?;
        }
        for a in line.as_slice().iter() {
            next.push(a)?;
        }
        decide(st, next.as_slice())?;
        line = next;
        program = interp;
    }
    // Still a script: the kernel would refuse it (ELOOP); so does this.
    match shebang(program, &mut [0; SHEBANG_MAX])? {
        Some(_) => Err(libc::ELOOP),
        None => Ok(()),
    }
}

/// A `#!` line: the interpreter and its one optional argument.
type Shebang<'b> = (&'b [u8], Option<&'b [u8]>);

/// The interpreter and its one optional argument on a `#!` line at the start of the
/// regular file at `path`, split as the kernel splits them (spaces and tabs around,
/// the argument not split further, a NUL or newline ends the line). `None` for what
/// cannot be opened or is no script. A script of the caller's own that it may run
/// but not read (mode 111: the kernel runs its `#!` line all the same) is refused:
/// whoever made it could make it readable.
fn shebang<'b>(
    path: &[u8],
    buf: &'b mut [u8; SHEBANG_MAX],
) -> Result<Option<Shebang<'b>>, libc::c_int> {
    let mut p = crate::path::PBuf::new();
    if p.set(path).is_err() {
        return Ok(None);
    }
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
    // SAFETY: a NUL-terminated path. Called inside a hook body, this open reaches
    // the real one (the re-entry guard is set).
    let fd = unsafe { libc::open(p.as_ptr(), flags) };
    // SAFETY: stat fills the zeroed struct it is given.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    if fd < 0 {
        let e = crate::sys::errno();
        // Nothing there to run, or not a path: the kernel would not run it either.
        if matches!(
            e,
            libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG
        ) {
            return Ok(None);
        }
        // Anything else (EMFILE from a full descriptor table, ENOMEM, …) is no
        // answer, while the kernel's exec needs no descriptor: refused.
        if e != libc::EACCES {
            return Err(e);
        }
        // SAFETY: as above, with a NUL-terminated path.
        let own_unreadable = unsafe { libc::stat(p.as_ptr(), &mut sb) } == 0
            && sb.st_mode & libc::S_IFMT == libc::S_IFREG
            // SAFETY: getuid has no preconditions.
            && sb.st_uid == unsafe { libc::getuid() };
        return if own_unreadable {
            Err(libc::EACCES)
        } else {
            Ok(None)
        };
    }
    // SAFETY: fstat of our descriptor into the struct; reading into a buffer of the
    // length passed; closing our own descriptor.
    let n = unsafe {
        let regular = libc::fstat(fd, &mut sb) == 0 && sb.st_mode & libc::S_IFMT == libc::S_IFREG;
        let n = if regular {
            libc::read(fd, buf.as_mut_ptr().cast(), buf.len())
        } else {
            0
        };
        libc::close(fd);
        n
    };
    let head: &'b [u8] = buf;
    let Some(line) = head[..usize::try_from(n).unwrap_or(0)].strip_prefix(b"#!") else {
        return Ok(None);
    };
    let end = line
        .iter()
        .position(|&b| b == b'\n' || b == 0)
        .unwrap_or(line.len());
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let line = &line[..end];
    let Some(start) = line.iter().position(|b| !blank(b)) else {
        return Ok(None);
    };
    let line = &line[start..];
    let (interp, rest) = line.split_at(line.iter().position(blank).unwrap_or(line.len()));
    let rest = match rest.iter().position(|b| !blank(b)) {
        Some(i) => {
            &rest[i..rest
                .iter()
                .rposition(|b| !blank(b))
                .map_or(rest.len(), |j| j + 1)]
        }
        None => &[],
    };
    Ok(Some((interp, (!rest.is_empty()).then_some(rest))))
}

/// Judge the scripts a name without `/` can find on `PATH`: every regular file there
/// that may be executed (the search runs the first whose exec succeeds).
fn judge_search(st: &State, name: &[u8], argv: &[&[u8]]) -> Result<(), libc::c_int> {
    // SAFETY: getenv reads the process environment; the result is used at once.
    let path_var =
        unsafe { crate::sys::cstr(libc::getenv(c"PATH".as_ptr())) }.unwrap_or(b"/bin:/usr/bin");
    let judged = on_path(path_var, name, |cand| {
        // SAFETY: stat fills the zeroed struct; `cand` is NUL-terminated.
        let mut sb: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let runs = unsafe {
            libc::stat(cand.as_ptr(), &mut sb) == 0
                && sb.st_mode & libc::S_IFMT == libc::S_IFREG
                && libc::access(cand.as_ptr(), libc::X_OK) == 0
        };
        // Every candidate, not the first alone: the search goes on past one whose
        // exec fails (a missing interpreter, ENOENT), to the next.
        match runs.then(|| script(st, cand.as_bytes(), argv)) {
            Some(Err(e)) => ControlFlow::Break(e),
            _ => ControlFlow::Continue(()),
        }
    });
    judged.map_or(Ok(()), Err)
}

/// The files a search of `path` (a `PATH` value) for `name` tries, in order, as the
/// C library tries them (an empty entry is the current directory; one too long for
/// a path is passed over): `each` gets each in turn, NUL-terminated, and ends the
/// search with `Break`, whose value is returned.
pub fn on_path<B>(
    path: &[u8],
    name: &[u8],
    mut each: impl FnMut(&crate::path::PBuf) -> ControlFlow<B>,
) -> Option<B> {
    let mut cand = crate::path::PBuf::new();
    for dir in path.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        if cand.set(dir).is_err() || cand.push(name).is_err() {
            continue;
        }
        if let ControlFlow::Break(b) = each(&cand) {
            return Some(b);
        }
    }
    None
}

/// How the program's file is found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Find {
    /// The program is a path (relative to the current directory if not absolute),
    /// as `execve` takes.
    Path,
    /// A name without `/` is searched on `PATH` (`execvp`, `posix_spawnp`).
    Search,
}

/// Whether a program is started by a new process or replaces the caller.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// `execve` and friends: in place when called by the process the library was
    /// loaded into, a child's otherwise (after `fork`/`vfork`).
    Exec,
    /// `posix_spawn`, `system`, `popen`: always a new process.
    Spawn,
}

/// Whether the program that is about to run is the agent: an exec in place by the
/// process this library was loaded into, or a program of `env.agent_programs` that
/// the sandbox cannot write. Allocation-free (runs after `fork`).
fn runs_as_agent(st: &State, program: Option<&[u8]>, find: Find, how: How) -> bool {
    // Without env.agent there is nothing to keep, and without the agent's own files
    // nothing to hide: no lookup on any exec.
    if !st.decider.keeps_any() && !st.hide.is_agent() {
        return false;
    }
    // SAFETY: getpid has no preconditions.
    if how == How::Exec && unsafe { libc::getpid() } == st.pid {
        return true;
    }
    let Some(p) = program else {
        return false;
    };
    let mut abs = crate::path::PBuf::new();
    let found = if find == Find::Search && !p.contains(&b'/') {
        // SAFETY: getenv reads the process environment; the result is used at once.
        let path_var =
            unsafe { crate::sys::cstr(libc::getenv(c"PATH".as_ptr())) }.unwrap_or(b"/bin:/usr/bin");
        on_path(path_var, p, |cand| {
            // SAFETY: a NUL-terminated candidate path.
            match unsafe { libc::access(cand.as_ptr(), libc::X_OK) } == 0 {
                true => ControlFlow::Break(abs.set(cand.as_bytes()).is_ok()),
                false => ControlFlow::Continue(()),
            }
        })
        .unwrap_or(false)
    } else if p.first() == Some(&b'/') {
        abs.set(p).is_ok()
    } else {
        let mut cwd = crate::path::PBuf::new();
        cwd.getcwd().is_ok() && crate::path::join(cwd.as_bytes(), p, &mut abs).is_ok()
    };
    if !found || abs.as_bytes().first() != Some(&b'/') {
        return false;
    }
    let mut real = crate::path::PBuf::new();
    matches!(
        crate::path::resolve(abs.as_bytes(), true, &mut real),
        Ok(crate::path::Kind::File)
    ) && st.decider.agent_program(real.as_bytes())
}

/// What [`prepare`] decided for a program about to start.
pub struct Prepared {
    /// The child's environment (it lives in the `Envp` passed to `prepare`).
    pub envp: *const *const c_char,
    /// A spawn call (`posix_spawn`, `system`, `popen`) of the agent's starts a program
    /// that must not see `files.agent_read`: the caller makes it through [`start`].
    pub hide: bool,
}

/// Decide `program argv` and compose the child environment from `envp`.
///
/// # Safety
/// `argv`/`envp` as for `execve`.
pub unsafe fn prepare(
    program: Option<&[u8]>,
    find: Find,
    how: How,
    argv: *const *const c_char,
    envp: *const *const c_char,
    env_out: &mut crate::envp::Envp,
) -> Result<Prepared, libc::c_int> {
    let st = crate::state::get()?;
    let mut args = Argv::new();
    // SAFETY: per the contract.
    unsafe { decode(argv, &mut args) }?;
    judge(st, program, &mut args)?;
    if let Some(p) = program {
        let args = args.as_slice();
        match find {
            Find::Search if !p.contains(&b'/') => judge_search(st, p, args)?,
            Find::Path | Find::Search => script(st, p, args)?,
        }
    }
    let agent = runs_as_agent(st, program, find, how);
    let hide = how == How::Spawn && st.hide.is_agent() && !agent;
    let hidden = hide_before_exec(st, how, agent)? || hide;
    // SAFETY: per the contract.
    let envp = unsafe { env_out.compose(st, envp, agent, hidden) }?;
    Ok(Prepared { envp, hide })
}

/// The prologue of every exec in place (`execve`, `execv`, `execveat`, `fexecve`,
/// `execvp`, `execvpe`, `execl*`): [`prepare`] `program argv` (found as `find`
/// says), then `exec` with the child's environment, which lives until `exec`
/// returns. Refused: the errno, and `exec` is not called. `exec` releases the
/// re-entry guard around each real call itself (`crate::guard::released`).
///
/// # Safety
/// `argv`/`envp` as for `execve`.
pub unsafe fn in_place<R>(
    program: &[u8],
    find: Find,
    argv: *const *const c_char,
    envp: *const *const c_char,
    exec: impl FnOnce(*const *const c_char) -> Result<R, libc::c_int>,
) -> Result<R, libc::c_int> {
    let mut env = crate::envp::Envp::new();
    // SAFETY: per the contract.
    let envp = unsafe { prepare(Some(program), find, How::Exec, argv, envp, &mut env) }?.envp;
    exec(envp)
}

/// Make the call `f` that starts a program (`posix_spawn`, `system`, `popen`), on a
/// thread of its own that takes the layer hiding `files.agent_read` first when
/// `hide` says so. No hook runs in the child a spawn call makes before its `exec`,
/// so the child would otherwise take the layer only in its own constructor: never
/// when it is static, and not when the loader could not load this library (the
/// loader only warns: a command that made the library unreadable, or a limit on the
/// agent's memory, would start it bare). Landlock restricts the calling thread
/// alone, and the child inherits that thread's layer at `clone`, before its first
/// instruction; the agent's other threads keep their access. The thread ends when
/// `f` returns (`system` returns when the command ends). Fails closed: no thread, no
/// layer, no program.
pub fn start<R>(hide: bool, f: impl FnOnce() -> R) -> Result<R, libc::c_int> {
    if !hide {
        return Ok(crate::guard::released(f));
    }
    #[cfg(target_os = "linux")]
    {
        let st = crate::state::get()?;
        let crate::state::Hide::Agent(layer) = &st.hide else {
            return Err(libc::EPERM);
        };
        let job = Unshared(f);
        let ran = std::thread::scope(|s| {
            let worker = std::thread::Builder::new()
                .name("sandpit-spawn".into())
                .spawn_scoped(s, move || {
                    layer.restrict()?;
                    Ok(Unshared(crate::guard::released(|| job.call())))
                })
                .map_err(|_| libc::EAGAIN)?;
            // While it runs, SIGCHLD waits for this thread too, as it does for a
            // single thread in `system` (a handler here that reaps every child would
            // take the status `system` waits for). Blocked only now: the thread, and
            // through it the program, inherit the caller's signal mask unchanged.
            let held = BlockedChld::new();
            let r = worker.join().map_err(|_| libc::EPERM);
            drop(held);
            r?
        });
        ran.map(|r: Unshared<R>| r.0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = f;
        Err(libc::EPERM)
    }
}

/// SIGCHLD blocked in the calling thread until dropped (then the mask it had).
#[cfg(target_os = "linux")]
struct BlockedChld(libc::sigset_t);

#[cfg(target_os = "linux")]
impl BlockedChld {
    fn new() -> BlockedChld {
        // SAFETY: sigset_t is plain data; the calls fill and read the sets given.
        unsafe {
            let mut chld: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut chld);
            libc::sigaddset(&mut chld, libc::SIGCHLD);
            libc::pthread_sigmask(libc::SIG_BLOCK, &chld, &mut old);
            BlockedChld(old)
        }
    }
}

#[cfg(target_os = "linux")]
impl Drop for BlockedChld {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// A value moved to the spawning thread and back: the call and its result hold raw
/// pointers (argv, `FILE *`), which the calling thread does not touch meanwhile (it
/// waits for the thread to end).
#[cfg(target_os = "linux")]
struct Unshared<T>(T);

// SAFETY: see the type's comment: one thread uses the value at a time.
#[cfg(target_os = "linux")]
unsafe impl<T> Send for Unshared<T> {}

#[cfg(target_os = "linux")]
impl<R, F: FnOnce() -> R> Unshared<F> {
    /// Call it (a method, so that the closure moves the whole wrapper).
    fn call(self) -> R {
        (self.0)()
    }
}

/// A program the agent starts by `fork` + `exec` that is not the agent takes the
/// layer that hides `files.agent_read` here, between the two (it may be static, and
/// this library never load into it). Returns whether it did. Allocation-free.
fn hide_before_exec(st: &State, how: How, agent: bool) -> Result<bool, libc::c_int> {
    #[cfg(target_os = "linux")]
    if let crate::state::Hide::Agent(layer) = &st.hide {
        // SAFETY: getpid has no preconditions.
        let child = how == How::Exec && unsafe { libc::getpid() } != st.pid;
        if child && !agent {
            layer.restrict_once()?;
            return Ok(true);
        }
    }
    let _ = (st, how, agent);
    Ok(false)
}

/// The process environment (`environ`).
pub fn environ() -> *const *const c_char {
    // SAFETY: reading the pointer value of libc's global.
    unsafe { *crate::sys::environ_ptr() }
}
