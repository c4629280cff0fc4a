//! The system calls the launcher needs that std does not wrap.
use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Raise the soft limit on open files to the hard limit (the proxy holds two
/// descriptors per relayed connection). Returns the new soft limit.
pub fn raise_nofile() -> std::io::Result<libc::rlim_t> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    // rustix's `None` is RLIM_INFINITY.
    let lim = getrlimit(Resource::Nofile);
    let cur = lim.current.unwrap_or(libc::RLIM_INFINITY);
    let max = lim.maximum.unwrap_or(libc::RLIM_INFINITY);
    if cur < max {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: lim.maximum,
                maximum: lim.maximum,
            },
        )?;
        return Ok(max);
    }
    Ok(cur)
}

/// Send SIGTERM to this process (the launcher forwards it to the command).
pub fn terminate_self() {
    use rustix::process::{getpid, kill_process, Signal};
    let _ = kill_process(getpid(), Signal::TERM);
}

/// Have the kernel attach each sender's credentials to the datagrams `sock` receives
/// (`SO_PASSCRED`), for [`recv_with_pid`].
#[cfg(target_os = "linux")]
pub fn pass_credentials(sock: &UnixDatagram) -> io::Result<()> {
    Ok(rustix::net::sockopt::set_socket_passcred(sock, true)?)
}

/// Receive one datagram into `buf`: its length, the sender's pid as the kernel
/// reports it (`None` when no credentials came with it: `SO_PASSCRED` was off when
/// it was sent) and the sender's address (`None`: unnamed, nowhere to reply). By
/// hand: the pid may be 0, which rustix's `UCred` cannot hold.
#[cfg(target_os = "linux")]
pub fn recv_with_pid(
    sock: &UnixDatagram,
    buf: &mut [u8],
) -> io::Result<(usize, Option<libc::pid_t>, Option<SocketAddr>)> {
    use std::os::fd::AsRawFd;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::ucred>() as u32) } as usize;
    // u64s: the control buffer must be aligned for cmsghdr.
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: sockaddr_un and msghdr are plain data; all zeroes is valid for both.
    let mut name: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_name = (&mut name as *mut libc::sockaddr_un).cast();
    hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = cbuf.as_mut_ptr().cast();
    hdr.msg_controllen = (cbuf.len() * 8) as _;
    // SAFETY: hdr describes `name`, `buf` (through iov) and `cbuf`, all valid and
    // writable for the lengths it gives.
    let n = unsafe { crate::sys::recvmsg(sock.as_raw_fd(), &mut hdr) }?;
    // SAFETY: recvmsg filled `hdr`'s control buffer, `cbuf`, which is still live.
    let pid = unsafe { crate::sys::sender_pid(&hdr) };
    Ok((n, pid, unix_addr(&name, hdr.msg_namelen as usize)))
}

/// The std address for the first `len` bytes of `name` (`None`: unnamed).
#[cfg(target_os = "linux")]
fn unix_addr(name: &libc::sockaddr_un, len: usize) -> Option<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::ffi::OsStrExt;
    let path_at = std::mem::offset_of!(libc::sockaddr_un, sun_path);
    let path: Vec<u8> = name.sun_path[..len.checked_sub(path_at)?.min(name.sun_path.len())]
        .iter()
        .map(|&c| c as u8)
        .collect();
    match path.split_first()? {
        (0, abstract_name) => SocketAddr::from_abstract_name(abstract_name).ok(),
        _ => {
            let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
            SocketAddr::from_pathname(std::ffi::OsStr::from_bytes(&path[..end])).ok()
        }
    }
}

/// Elsewhere there is no bridge to relay DNS: nothing carries credentials, so
/// every datagram is reported without a sender (and dropped).
#[cfg(not(target_os = "linux"))]
pub fn recv_with_pid(
    sock: &UnixDatagram,
    buf: &mut [u8],
) -> io::Result<(usize, Option<libc::pid_t>, Option<SocketAddr>)> {
    let (n, from) = sock.recv_from(buf)?;
    Ok((n, None, Some(from)))
}
