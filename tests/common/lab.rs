//! A network lab: a network namespace of the test's own, with the addresses a test
//! needs (a stand-in for a public host, the cloud metadata address, a LAN address)
//! on its loopback device, and servers listening there. `sandpit run` started with
//! [`Lab::command`] lives in that namespace, so its proxy dials these stand-ins and
//! no packet ever leaves the machine. Needs root (`ip netns`).
use super::{is_root, TestHome, TEST_GID, TEST_UID};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

static NEXT: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) {
    let o = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2)");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

pub struct Lab {
    pub name: String,
    ns: std::fs::File,
}

/// A TCP server in the lab: answers every connection with `LAB <addr>` and counts them.
pub struct Server {
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl Server {
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Lab {
    /// A namespace with loopback up and `addrs` on it.
    pub fn new(addrs: &[&str]) -> Lab {
        assert!(
            is_root(),
            "the network lab makes a network namespace: run the tests as root"
        );
        let name = format!(
            "sandpit-lab-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        ip(&["netns", "add", &name]);
        let ns = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
        let lab = Lab { name, ns };
        ip(&["-n", &lab.name, "link", "set", "lo", "up"]);
        for a in addrs {
            let cidr = if a.contains(':') {
                format!("{a}/128")
            } else {
                format!("{a}/32")
            };
            ip(&["-n", &lab.name, "addr", "add", &cidr, "dev", "lo"]);
        }
        lab
    }

    /// Run `f` on a thread that has entered the lab's namespace (sockets it makes
    /// belong to the lab).
    fn inside<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let fd = self.ns.as_raw_fd();
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: a namespace descriptor this Lab holds open; setns changes
                // only this thread's network namespace.
                let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
                assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap()
        })
    }

    /// A TCP server at `addr` in the lab.
    pub fn serve(&self, addr: &str) -> Server {
        let addr: SocketAddr = addr.parse().unwrap();
        let l = self.inside(move || TcpListener::bind(addr).unwrap());
        let addr = l.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                h.fetch_add(1, Ordering::SeqCst);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = s.read(&mut [0u8; 512]);
                let _ = s.write_all(format!("LAB {addr}\n").as_bytes());
            }
        });
        Server { addr, hits }
    }

    /// A UDP socket at `addr` in the lab (non-blocking: `recv` tells whether
    /// anything arrived).
    pub fn udp(&self, addr: &str) -> UdpSocket {
        let addr: SocketAddr = addr.parse().unwrap();
        let u = self.inside(move || UdpSocket::bind(addr).unwrap());
        u.set_nonblocking(true).unwrap();
        u
    }

    /// A UDP server at `addr` in the lab: answers every datagram with `ECHO <addr>
    /// <datagram>` to its sender and counts them.
    pub fn udp_echo(&self, addr: &str) -> Server {
        let addr: SocketAddr = addr.parse().unwrap();
        let u = self.inside(move || UdpSocket::bind(addr).unwrap());
        let addr = u.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = u.recv_from(&mut buf) {
                h.fetch_add(1, Ordering::SeqCst);
                let mut reply = format!("ECHO {addr} ").into_bytes();
                reply.extend_from_slice(&buf[..n]);
                let _ = u.send_to(&reply, from);
            }
        });
        Server { addr, hits }
    }

    /// `program` as the test user inside the lab, with `h`'s HOME and workspace.
    /// `/dev/net/tun` is open to every user there, as distributions have it (udev's
    /// rule; a machine without udev may leave it 0600): a node of the lab's own in a
    /// tmpfs over `/dev/net`, in the mount namespace `ip netns exec` makes.
    pub fn command(&self, h: &TestHome, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.command_with_tun(h, program, "0666")
    }

    /// [`Lab::command`] with `/dev/net/tun` of `mode` (`0600`: closed to the test user).
    pub fn command_with_tun(
        &self,
        h: &TestHome,
        program: impl AsRef<std::ffi::OsStr>,
        mode: &str,
    ) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]);
        with_tun(c, h, program, mode)
    }
}

/// `program` as the test user in this machine's network namespace, with
/// `/dev/net/tun` open to every user (as [`Lab::command`] has it): for runs that
/// need the host's socket table (`/proc/net/unix` is per network namespace).
pub fn host_command(h: &TestHome, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private"]);
    with_tun(c, h, program, "0666")
}

/// `c` (a program that runs its arguments in a mount namespace of its own) made to
/// put a TUN control node of `mode` over `/dev/net`, then run `program` as the test
/// user with `h`'s HOME, in the workspace.
fn with_tun(
    mut c: Command,
    h: &TestHome,
    program: impl AsRef<std::ffi::OsStr>,
    mode: &str,
) -> Command {
    c.args(["sh", "-c"])
        .arg(format!(
            "mount -t tmpfs -o mode=0755 sandpit-lab /dev/net && \
             mknod -m {mode} /dev/net/tun c 10 200 && exec \"$@\""
        ))
        .args(["sh", "setpriv"])
        .arg(format!("--reuid={TEST_UID}"))
        .arg(format!("--regid={TEST_GID}"))
        .args(["--clear-groups", "--"])
        .arg(program)
        .env_clear()
        .env("HOME", h.home())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .current_dir(h.workspace());
    c
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
