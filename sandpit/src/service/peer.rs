//! Which process of the run opened a connection the proxy accepted: the kernel's
//! word, never the client's. The proxy's listener (the bridge inside the sandbox's
//! network namespace, or the loopback listener of the fallback mode) sees the
//! client's address; the socket table of that namespace (`/proc/ROOT/net/tcp{,6}`,
//! read through a process of the run) names the inode of the client's socket, and
//! the descriptor tables of the run's processes (the run's first process and its
//! descendants, nothing else) name who holds it; `/proc/PID/exe` names the program.
//!
//! Limits: a socket passed to another process (`SCM_RIGHTS`, inherited over a
//! fork) is held by both, and every holder is returned; a process that exits
//! right after connecting leaves no holder (the caller fails closed); a process
//! that left the run's tree (reparented outside it) is not found.
use std::net::SocketAddr;

pub use sandpit_policy::Program;

/// Most processes walked for one connection: a fork bomb's tree is not walked whole.
#[cfg(target_os = "linux")]
const MAX_PROCESSES: usize = 4096;

/// Most descriptors of one process looked at through `pidfd_getfd`.
#[cfg(target_os = "linux")]
const MAX_DESCRIPTORS: i32 = 1 << 16;

/// Where the run's processes are: the launcher's view of its first process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub root: u32,
}

impl Run {
    /// The processes of the run holding the client end of the TCP connection from
    /// `peer` to `local` (the addresses as the accepting side sees them). Empty when
    /// no process of the run holds it (or on a platform without `/proc`).
    pub fn owners(&self, peer: SocketAddr, local: SocketAddr) -> Vec<Program> {
        #[cfg(target_os = "linux")]
        {
            let Some(inode) = socket_inode(self.root, peer, local) else {
                return vec![];
            };
            holders(self.root, inode)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (peer, local);
            vec![]
        }
    }
}

/// The program of the process `pid` (launcher's view): a unix socket's peer.
/// None when the executable has no name a rule could match: deleted since, or an
/// anonymous file (`memfd_create` takes a name with slashes in it, and its
/// `/memfd:NAME (deleted)` could otherwise end like an allowed program's path).
pub fn program_of(pid: u32) -> Option<Program> {
    let path = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let raw = path.as_os_str().as_encoded_bytes();
    if raw.starts_with(b"/memfd:") || raw.ends_with(b" (deleted)") {
        return None;
    }
    Some(Program {
        path,
        pid: Some(pid),
    })
}

/// The inode of the socket whose local address is `peer` and remote `local`, from
/// the socket tables of `root`'s network namespace.
#[cfg(target_os = "linux")]
fn socket_inode(root: u32, peer: SocketAddr, local: SocketAddr) -> Option<u64> {
    let want = (canonical(peer), canonical(local));
    ["tcp", "tcp6"].iter().find_map(|t| {
        let text = std::fs::read_to_string(format!("/proc/{root}/net/{t}")).ok()?;
        text.lines().skip(1).find_map(|l| {
            let (l_addr, r_addr, inode) = table_line(l)?;
            (canonical(l_addr) == want.0 && canonical(r_addr) == want.1 && inode != 0)
                .then_some(inode)
        })
    })
}

#[cfg(target_os = "linux")]
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// One line of `/proc/net/tcp{,6}`: local address, remote address, inode.
#[cfg(target_os = "linux")]
fn table_line(line: &str) -> Option<(SocketAddr, SocketAddr, u64)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let local = hex_addr(f.get(1)?)?;
    let remote = hex_addr(f.get(2)?)?;
    let inode = f.get(9)?.parse().ok()?;
    Some((local, remote, inode))
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): each 32-bit word of
/// the address in the kernel's (host) byte order.
#[cfg(target_os = "linux")]
fn hex_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => std::net::IpAddr::from(word(0)?),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            std::net::IpAddr::from(b)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The run's processes (`root` and its descendants) that hold `socket:[inode]`.
/// Empty — no program known, which refuses a host a program rule limits — when the
/// walk passes [`MAX_PROCESSES`] or a holder's program cannot be named: a partial
/// list could leave out the holder that would be refused.
#[cfg(target_os = "linux")]
fn holders(root: u32, inode: u64) -> Vec<Program> {
    let mut out = vec![];
    let mut todo = vec![root];
    let mut seen = 0;
    while let Some(pid) = todo.pop() {
        seen += 1;
        if seen > MAX_PROCESSES {
            return vec![];
        }
        if holds(pid, inode) {
            match program_of(pid) {
                Some(p) => out.push(p),
                None => return vec![],
            }
        }
        todo.extend(children(pid));
    }
    out
}

/// Whether `pid` holds `socket:[inode]`: its descriptor table as `/proc` lists it,
/// or, for a process the interposer made non-dumpable (whose `/proc/PID/fd` is
/// then root's), each descriptor duplicated with `pidfd_getfd` and compared (the
/// launcher may: it owns the sandbox's user namespace and is the process's
/// ancestor), the duplicate closed at once.
#[cfg(target_os = "linux")]
fn holds(pid: u32, inode: u64) -> bool {
    let target = format!("socket:[{inode}]");
    match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(dir) => dir.flatten().any(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|l| l.as_os_str().as_encoded_bytes() == target.as_bytes())
        }),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => holds_by_pidfd(pid, inode),
        Err(_) => false,
    }
}

#[cfg(target_os = "linux")]
fn holds_by_pidfd(pid: u32, inode: u64) -> bool {
    use rustix::fs::FileType;
    use rustix::process::{pidfd_getfd, pidfd_open, Pid, PidfdFlags, PidfdGetfdFlags};
    let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    let Ok(pidfd) = pidfd_open(p, PidfdFlags::empty()) else {
        return false;
    };
    // The size of its descriptor table (`FDSize`); every descriptor is below it.
    let size = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("FDSize:"))
                .and_then(|n| n.trim().parse::<i32>().ok())
        })
        .unwrap_or(1024)
        .clamp(0, MAX_DESCRIPTORS);
    (0..size).any(|fd| {
        pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty())
            .ok()
            .and_then(|f| rustix::fs::fstat(&f).ok())
            .is_some_and(|st| {
                FileType::from_raw_mode(st.st_mode) == FileType::Socket && st.st_ino == inode
            })
    })
}

/// Every thread's children of `pid`.
#[cfg(target_os = "linux")]
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    let mut out = vec![];
    for t in tasks.flatten() {
        let path = t.path().join("children");
        if let Ok(s) = std::fs::read_to_string(path) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernels_socket_table() {
        let l = table_line("   0: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 123456 1 0000000000000000 20 4 30 10 -1").unwrap();
        assert_eq!(l.0, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(l.1, "127.0.0.1:54321".parse().unwrap());
        assert_eq!(l.2, 123456);
        let six = hex_addr("00000000000000000000000001000000:0050").unwrap();
        assert_eq!(six, "[::1]:80".parse().unwrap());
        let mapped = hex_addr("0000000000000000FFFF00000100007F:0050").unwrap();
        assert_eq!(canonical(mapped), "127.0.0.1:80".parse().unwrap());
    }

    /// A connection this test process makes is found in its own tree, and its
    /// program is this test binary; a connection of no process of the tree is not.
    #[test]
    fn finds_the_process_holding_the_client_end() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let run = Run {
            root: std::process::id(),
        };
        let got = run.owners(peer, s.local_addr().unwrap());
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(
            got,
            vec![Program {
                path: me,
                pid: Some(std::process::id())
            }]
        );
        drop(c);
        let none = run.owners("127.0.0.1:1".parse().unwrap(), s.local_addr().unwrap());
        assert!(none.is_empty());
    }
}
