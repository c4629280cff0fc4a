//! A network lab: two network namespaces of the test's own. The *machine*
//! (`Lab::name`), where `sandpit run` started with [`Lab::command`] lives, has
//! loopback up and a veth link to the *world*, its default route for both
//! families; the world holds on its loopback device the addresses a test needs
//! (stand-ins for a public host, the cloud metadata address, a LAN address) and
//! the servers listening there. So the stand-ins are other machines to sandpit's
//! proxy and relay, as they would be, and not addresses of its own; a loopback
//! address, or an address the test gives the machine ([`Lab::add_own`]), is the
//! machine's. No packet ever leaves the namespaces. Needs root (`ip netns`).
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

/// The machine's end of the link to the world, and the world's (private and
/// unique-local addresses: the machine's own, never a stand-in).
const MACHINE4: &str = "10.200.0.1";
const WORLD4: &str = "10.200.0.2";
const MACHINE6: &str = "fd5b:1ab::1";
const WORLD6: &str = "fd5b:1ab::2";

pub struct Lab {
    pub name: String,
    ns: std::fs::File,
    world_name: String,
    world: std::fs::File,
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
    /// A machine linked to a world with `addrs` on it.
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
        let world_name = format!("{name}-w");
        ip(&["netns", "add", &name]);
        // Dropped (and both namespaces deleted) from here on, even if a step fails.
        let ns = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
        let world = match Command::new("ip")
            .args(["netns", "add", &world_name])
            .status()
        {
            Ok(s) if s.success() => {
                std::fs::File::open(format!("/run/netns/{world_name}")).unwrap()
            }
            _ => {
                let _ = Command::new("ip").args(["netns", "del", &name]).output();
                panic!("ip netns add {world_name} failed");
            }
        };
        let lab = Lab {
            name,
            ns,
            world_name,
            world,
        };
        let (m, w) = (lab.name.as_str(), lab.world_name.as_str());
        for n in [m, w] {
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        ip(&[
            "-n", m, "link", "add", "lab0", "type", "veth", "peer", "name", "lab1", "netns", w,
        ]);
        for (n, dev, v4, v6) in [(m, "lab0", MACHINE4, MACHINE6), (w, "lab1", WORLD4, WORLD6)] {
            ip(&["-n", n, "addr", "add", &format!("{v4}/30"), "dev", dev]);
            ip(&[
                "-n",
                n,
                "addr",
                "add",
                &format!("{v6}/64"),
                "dev",
                dev,
                "nodad",
            ]);
            ip(&["-n", n, "link", "set", dev, "up"]);
        }
        ip(&["-n", m, "route", "add", "default", "via", WORLD4]);
        ip(&["-n", m, "-6", "route", "add", "default", "via", WORLD6]);
        for a in addrs {
            let cidr = if a.contains(':') {
                format!("{a}/128")
            } else {
                format!("{a}/32")
            };
            ip(&["-n", w, "addr", "add", &cidr, "dev", "lo"]);
        }
        lab
    }

    /// Give the machine `cidr` (`5.45.100.7/24`, `2a01:4f8::7/64`) on an interface
    /// of its own (`own0`, one end of a veth pair whose other end it also holds: a
    /// `dummy` device needs a module not every kernel has), as a host's public
    /// address is: one of its own.
    pub fn add_own(&self, cidr: &str) {
        let m = self.name.as_str();
        let has = Command::new("ip")
            .args(["-n", m, "link", "show", "own0"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !has {
            ip(&[
                "-n", m, "link", "add", "own0", "type", "veth", "peer", "name", "own1",
            ]);
            for dev in ["own0", "own1"] {
                ip(&["-n", m, "link", "set", dev, "up"]);
            }
        }
        let mut args = vec!["-n", m, "addr", "add", cidr, "dev", "own0"];
        if cidr.contains(':') {
            args.push("nodad");
        }
        ip(&args);
    }

    /// The namespace a server at `addr` belongs in: the machine's for loopback
    /// and unspecified addresses (its own services), else the world's.
    fn ns_for(&self, addr: &SocketAddr) -> std::os::fd::RawFd {
        let ip = addr.ip();
        if ip.is_loopback() || ip.is_unspecified() {
            self.ns.as_raw_fd()
        } else {
            self.world.as_raw_fd()
        }
    }

    /// Run `f` on a thread that has entered the namespace `fd` (sockets it makes
    /// belong to it).
    fn inside<T: Send + 'static>(
        &self,
        fd: std::os::fd::RawFd,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
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

    /// A TCP server at `addr` in the lab: the machine's own service for a loopback
    /// or unspecified address (`0.0.0.0`, `[::]`: every address of the machine),
    /// else another machine's, in the world.
    pub fn serve(&self, addr: &str) -> Server {
        let addr: SocketAddr = addr.parse().unwrap();
        let l = self.inside(self.ns_for(&addr), move || TcpListener::bind(addr).unwrap());
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
        let u = self.inside(self.ns_for(&addr), move || UdpSocket::bind(addr).unwrap());
        u.set_nonblocking(true).unwrap();
        u
    }

    /// A UDP server at `addr` in the lab (the machine's or the world's, as for
    /// [`Lab::serve`]): answers every datagram with `ECHO <addr> <datagram>` to its
    /// sender and counts them.
    pub fn udp_echo(&self, addr: &str) -> Server {
        let addr: SocketAddr = addr.parse().unwrap();
        let u = self.inside(self.ns_for(&addr), move || UdpSocket::bind(addr).unwrap());
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
        for n in [&self.name, &self.world_name] {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}
