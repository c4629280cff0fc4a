//! The launcher's portable system calls, through rustix where it has them
//! (platform-specific ones live in `sandbox/linux/sys.rs` and `sandbox/macos/sys.rs`).
//! By hand: signal dispositions (rustix has them only in its `runtime` module),
//! credentials whose pid may be 0 (rustix's `UCred` holds a non-zero `Pid`), and
//! what each function says.

/// Let SIGPIPE end this process, as it ends most programs (Rust ignores it, so a
/// write to a closed pipe is an error, which `println!` turns into a panic).
pub fn default_sigpipe() {
    // SAFETY: resetting one signal's disposition to the default; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The real uid of this process.
pub fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// Connections the kernel queues on a listener before they are accepted; it caps the
/// number at `net.core.somaxconn` (4096 by default since Linux 5.4; 128 on macOS).
const LISTEN_BACKLOG: i32 = 4096;

/// A TCP listener on `addr` whose queue holds a burst of connections. std listens
/// with a backlog of 128: an agent opening a few hundred connections at once while
/// the launcher is busy had its connects dropped and retried (a second's delay each),
/// or reset. Listening again on a listening socket only changes its backlog.
pub fn tcp_listener<A: std::net::ToSocketAddrs>(addr: A) -> std::io::Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr)?;
    rustix::net::listen(&l, LISTEN_BACKLOG)?;
    Ok(l)
}

/// Whether `fd` has something to read (or its reading side is shut down, or it has
/// an error to report: a read would not wait; for a pidfd, its process has exited),
/// waiting at most `timeout_ms` (-1: until it does), without reading it. A signal
/// interrupting the wait answers `false`, not an error.
pub fn readable(fd: std::os::fd::BorrowedFd<'_>, timeout_ms: i32) -> std::io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut p = [PollFd::new(&fd, PollFlags::IN)];
    let timeout = (timeout_ms >= 0).then(|| Timespec {
        tv_sec: i64::from(timeout_ms / 1000),
        tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
    });
    match poll(&mut p, timeout.as_ref()) {
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
        Ok(n) => Ok(n == 1
            && p[0]
                .revents()
                .intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR)),
    }
}

/// Have the kernel attach each sender's credentials to what a unix socket
/// receives (`SO_PASSCRED`), for [`recv_with_pid`].
#[cfg(target_os = "linux")]
pub fn pass_credentials(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    Ok(rustix::net::sockopt::set_socket_passcred(fd, true)?)
}

/// One datagram from a unix socket set up by [`pass_credentials`], and its
/// sender's pid as the kernel gives it, in this process's pid namespace (`None`
/// when none came, or the sender is not visible from here). By hand, as
/// [`peer_credentials`]: the pid may be 0, which rustix's `UCred` cannot hold.
#[cfg(target_os = "linux")]
pub fn recv_with_pid(
    fd: std::os::fd::BorrowedFd<'_>,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<u32>)> {
    use std::os::fd::AsRawFd;
    // Room for one SCM_CREDENTIALS message, aligned for cmsghdr.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid (empty) value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg points at iov (over `buf`) and `control`, both live and sized as
    // stated, for the duration of the call.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: recvmsg filled `msg`'s control buffer, which is still live.
    let pid = unsafe { sender_pid(&msg) };
    Ok((
        n as usize,
        pid.and_then(|p| u32::try_from(p).ok()).filter(|&p| p != 0),
    ))
}

/// The sender's pid from the `SCM_CREDENTIALS` message in `msg`'s control buffer.
///
/// # Safety
/// `msg` was filled by a successful `recvmsg` and its control buffer is still live.
#[cfg(target_os = "linux")]
pub unsafe fn sender_pid(msg: &libc::msghdr) -> Option<libc::pid_t> {
    let mut pid = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within
    // msg_controllen (the caller's promise); a credentials message's payload is a
    // ucred, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET
                && (*c).cmsg_type == libc::SCM_CREDENTIALS
                && (*c).cmsg_len as usize
                    >= libc::CMSG_LEN(std::mem::size_of::<libc::ucred>() as u32) as usize
            {
                let cred = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::ucred>());
                pid = Some(cred.pid);
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    pid
}

/// The pid and uid of the process at the other end of a unix stream socket, as
/// the kernel recorded them when it connected (`SO_PEERCRED`; the pid in this
/// process's pid namespace). Linux only: elsewhere an error. By hand: rustix's
/// `UCred` holds a non-zero `Pid`, and the kernel gives 0 for a peer this pid
/// namespace cannot see.
pub fn peer_credentials(s: &std::os::unix::net::UnixStream) -> std::io::Result<(u32, u32)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: getsockopt on an open socket, writing at most `len` bytes into
        // `cred`, which lives across the call.
        let r = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                std::ptr::addr_of_mut!(cred).cast(),
                &mut len,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        match u32::try_from(cred.pid) {
            Ok(pid) if pid != 0 => Ok((pid, cred.uid)),
            _ => Err(std::io::Error::other("the peer's pid is not visible here")),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = s;
        Err(std::io::Error::other(
            "peer credentials are read on Linux only",
        ))
    }
}

/// `n` random bytes from the kernel, as lowercase hex.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut b = vec![0u8; n];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// A regular file's bytes, mapped read-only rather than read: inspecting a 200 MB
/// agent binary then costs the few pages its headers occupy, not reading it all
/// (~120 ms at every start).
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
    /// The mapped file's metadata (`fstat` of the descriptor it was mapped from).
    meta: std::fs::Metadata,
}

impl Mapped {
    pub fn open(path: &std::path::Path) -> std::io::Result<Mapped> {
        let f = std::fs::File::open(path)?;
        let meta = f.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        let len = usize::try_from(meta.len())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::FileTooLarge))?;
        if len == 0 {
            // mmap refuses an empty length; an empty file has no bytes to map.
            return Ok(Mapped {
                ptr: std::ptr::null_mut(),
                len: 0,
                meta,
            });
        }
        use rustix::mm::{mmap, MapFlags, ProtFlags};
        // SAFETY: a fresh private read-only mapping of an open file; the kernel
        // picks the address. The descriptor may close afterwards.
        let ptr = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ,
                MapFlags::PRIVATE,
                &f,
                0,
            )
        }?;
        Ok(Mapped { ptr, len, meta })
    }

    pub fn metadata(&self) -> &std::fs::Metadata {
        &self.meta
    }

    /// The file's bytes as of the mapping. A file truncated while mapped would
    /// fault on the lost pages: binaries are replaced by rename (a new inode,
    /// while this mapping keeps the old one), not rewritten in place.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `len` bytes mapped readable at `ptr` until drop, never written.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: the mapping made in `open`, unmapped once.
            let _ = unsafe { rustix::mm::munmap(self.ptr, self.len) };
        }
    }
}

/// recvmsg(2) on `fd`, retried when a signal interrupts it: the bytes received.
/// Descriptors passed in it are close-on-exec.
///
/// # Safety
/// `hdr` describes buffers (name, iov, control) valid and writable for the lengths
/// it gives.
#[cfg(target_os = "linux")]
pub unsafe fn recvmsg(fd: std::os::fd::RawFd, hdr: &mut libc::msghdr) -> std::io::Result<usize> {
    loop {
        // SAFETY: per the contract.
        let r = unsafe { libc::recvmsg(fd, hdr, libc::MSG_CMSG_CLOEXEC) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The IPv4 and IPv6 addresses of every network interface of this network
/// namespace (`getifaddrs`), loopback included, each once.
pub fn interface_addrs() -> std::io::Result<Vec<std::net::IpAddr>> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list it allocates to `head`; freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = vec![];
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is an element of the list getifaddrs returned, not freed yet.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says its full type;
        // each is read only as the type its family names.
        let ip = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))
                }
                _ => continue,
            }
        };
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    // SAFETY: the list getifaddrs returned, freed once, no reference into it left.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// A route netlink socket subscribed to the address changes of every interface of
/// this network namespace (`RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR`), not blocking:
/// a message waits on it after each address added or removed.
#[cfg(target_os = "linux")]
pub fn address_changes() -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::net::netlink::SocketAddrNetlink;
    use rustix::net::{bind, socket_with, AddressFamily, SocketFlags, SocketType};
    const RTMGRP_IPV4_IFADDR: u32 = 0x10;
    const RTMGRP_IPV6_IFADDR: u32 = 0x100;
    // NETLINK_ROUTE is protocol 0, which rustix spells `None`.
    let fd = socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    bind(
        &fd,
        &SocketAddrNetlink::new(0, RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR),
    )?;
    Ok(fd)
}

/// Empty a non-blocking socket: whether anything was waiting on it. A lost
/// message (`ENOBUFS`: the queue overflowed) counts as something.
#[cfg(target_os = "linux")]
pub fn drain(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<bool> {
    let mut buf = [0u8; 8192];
    let mut any = false;
    loop {
        match rustix::net::recv(fd, &mut buf[..], rustix::net::RecvFlags::DONTWAIT) {
            Ok(_) => any = true,
            Err(rustix::io::Errno::AGAIN) => return Ok(any),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::NOBUFS) => any = true,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Find `name` the way execvp would: as given when it contains a slash, else the
/// first executable file named so in `path_env`.
pub fn which(
    name: &str,
    path_env: &std::ffi::OsStr,
    cwd: &std::path::Path,
) -> Option<std::path::PathBuf> {
    if name.contains('/') {
        let p = cwd.join(name);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(path_env)
        .map(|dir| cwd.join(dir).join(name))
        .find(|p| is_executable(p))
}

pub fn is_executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    /// A burst of connections nobody accepts yet all complete at once: the queue
    /// holds them (with std's backlog of 128 the rest wait for a SYN retry, 1 s).
    #[test]
    fn a_listener_queues_a_burst_of_connections() {
        use std::time::{Duration, Instant};
        let somaxconn: i32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        assert!(
            somaxconn >= 600,
            "net.core.somaxconn is {somaxconn}: the kernel caps every listener's queue \
             there (4096 since Linux 5.4); raise it to run this test"
        );
        let l = super::tcp_listener(("127.0.0.1", 0)).unwrap();
        let addr = l.local_addr().unwrap();
        let start = Instant::now();
        let conns: Vec<_> = (0..600)
            .map(|_| std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)))
            .collect();
        let failed = conns.iter().filter(|c| c.is_err()).count();
        assert_eq!(failed, 0, "{failed} of 600 connects did not complete");
        assert!(start.elapsed() < Duration::from_secs(5));
        drop(l);
    }
}
