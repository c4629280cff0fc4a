//! The one system call the launcher needs that std does not wrap.

/// Raise the soft limit on open files to the hard limit (the proxy holds two
/// descriptors per relayed connection). Returns the new soft limit.
pub fn raise_nofile() -> std::io::Result<libc::rlim_t> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let want = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `want` is a valid rlimit; setrlimit only reads it.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim.rlim_cur = lim.rlim_max;
    }
    Ok(lim.rlim_cur)
}

/// Send SIGTERM to this process (the launcher forwards it to the command).
pub fn terminate_self() {
    // SAFETY: kill with our own pid and a valid signal number has no memory effects.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGTERM);
    }
}
