//! Loopback services in and dev servers out, for namespace mode.
//!
//! In: every `[network] allow` entry that names a loopback port (`localhost:11434`,
//! `127.0.0.1:8080`) becomes a TCP listener *inside* the network namespace at the
//! same address and port, created by the sandbox's pid 1 and handed to the launcher,
//! which relays each connection to the host's same address and port. Any client —
//! proxy-aware or not, dynamic or static — reaches exactly those ports; every other
//! loopback port inside is empty.
//!
//! Out (`allow_local_binding = true`): a small helper process inside the namespace
//! (the "factory") lists the namespace's loopback TCP listeners and opens connections
//! to them on request. The launcher polls that list and, for each listener a command
//! in the sandbox opened on 127.0.0.0/8 or ::1, listens on the host's same address
//! and port and relays each connection in. The mirror ends with the run.
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use sandpit_policy::host::HostMatch;
use sandpit_policy::Policy;

use super::sys;

/// One loopback service of the host, reachable inside at `listen`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Loopback {
    /// Where the listener sits inside the sandbox (the address clients dial).
    pub listen: SocketAddr,
    /// Host addresses tried in order for each connection.
    pub targets: Vec<SocketAddr>,
    /// The allow entry, as written (for messages).
    pub entry: String,
    /// The rule and where it was written (for the audit log).
    pub rule: String,
}

/// Told about each connection relayed to a loopback service, with the host address
/// that answered (`None`: none did). `sandpit run` writes it to the audit log.
#[derive(Clone)]
pub struct Observer(pub Arc<ObserveFn>);

/// The observer's callback: the service, and the host address that answered.
pub type ObserveFn = dyn Fn(&Loopback, Option<SocketAddr>) + Send + Sync;

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

const LO4: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
const LO6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

/// The host's loopback services the policy lets the sandbox reach: one per address
/// (a loopback name such as `localhost:11434` gives 127.0.0.1 and ::1, each trying
/// its own family on the host first). Block entries win
/// (`sandpit_policy::loopback_service`).
pub fn services(policy: &Policy) -> Vec<Loopback> {
    let mut out: Vec<Loopback> = vec![];
    for r in &policy.network.allow {
        let Some(port) = r.value.port else { continue };
        let addrs: Vec<(IpAddr, Vec<IpAddr>)> = match &r.value.host {
            HostMatch::Ip(ip) => vec![(*ip, vec![*ip])],
            HostMatch::Exact(_) if r.value.is_loopback() => {
                vec![(LO4, vec![LO4, LO6]), (LO6, vec![LO6, LO4])]
            }
            _ => continue,
        };
        for (ip, targets) in addrs {
            let listen = SocketAddr::new(ip, port);
            if sandpit_policy::loopback_service(policy, ip, port).is_none()
                || out.iter().any(|l| l.listen == listen)
            {
                continue;
            }
            out.push(Loopback {
                listen,
                targets: targets
                    .into_iter()
                    .map(|t| SocketAddr::new(t, port))
                    .collect(),
                entry: r.origin.entry.clone(),
                rule: r.origin.to_string(),
            });
        }
    }
    out
}

/// Human lines for `sandpit check` / `explain`: how each allowed loopback port is
/// reached, and what `allow_local_binding` does.
pub fn describe(policy: &Policy) -> Vec<String> {
    let mut lines = vec![];
    let svcs = services(policy);
    let mut entries: Vec<&str> = svcs.iter().map(|s| s.entry.as_str()).collect();
    entries.dedup();
    for e in entries {
        let at: Vec<String> = svcs
            .iter()
            .filter(|s| s.entry == e)
            .map(|s| s.listen.to_string())
            .collect();
        let port = svcs
            .iter()
            .find(|s| s.entry == e)
            .map(|s| s.listen.port())
            .unwrap_or(0);
        lines.push(format!(
            "loopback service {e:?}: inside the sandbox, sandpit listens at {} and relays to this machine's same address and port, for every client (static binaries and clients that ignore proxy variables included); with --allow-degraded (no network namespace), Landlock lets TCP connect reach port {port} directly",
            at.join(" and ")
        ));
    }
    let b = &policy.network.allow_local_binding;
    lines.push(if b.value {
        format!(
            "allow_local_binding = true ({}): a server the sandbox starts on 127.0.0.1/::1 is reachable from this machine at the same address and port while the run lasts; binding other addresses is refused",
            b.origin.location()
        )
    } else {
        format!(
            "allow_local_binding = false ({}): TCP bind inside the sandbox is refused (Landlock; the interposer names the key)",
            b.origin.location()
        )
    });
    lines
}

/// How a connection to `host:port` reaches this machine's loopback, when `host` is
/// a loopback address or name (`sandpit explain connect localhost:11434`).
pub fn how_reached(policy: &Policy, host: &sandpit_policy::Host, port: u16) -> Option<String> {
    use sandpit_policy::Host;
    let candidates: Vec<IpAddr> = match host {
        Host::Ip(ip) if sandpit_policy::host::is_loopback(*ip) => {
            vec![sandpit_policy::host::canonical_ip(*ip)]
        }
        Host::Name(n) if n == "localhost" || n.ends_with(".localhost") => vec![LO4, LO6],
        _ => return None,
    };
    let svcs: Vec<Loopback> = services(policy)
        .into_iter()
        .filter(|s| s.listen.port() == port && candidates.contains(&s.listen.ip()))
        .collect();
    if svcs.is_empty() {
        // `localhost` stands for 127.0.0.1 and ::1 only: another 127/8 address is
        // listed by itself.
        let entry = match host {
            Host::Ip(ip) if !sandpit_policy::host::is_localhost(*ip) => format!("{host}:{port}"),
            _ => format!("localhost:{port}"),
        };
        return Some(format!(
            "loopback inside the sandbox is the sandbox's own: this machine's {host}:{port} is not reachable (not a listed loopback service; list it with its port in [network] allow, e.g. \"{entry}\")"
        ));
    }
    let at: Vec<String> = svcs.iter().map(|s| s.listen.to_string()).collect();
    Some(format!(
        "a loopback service of this machine ({}): inside the sandbox, sandpit listens at {} and relays each connection to this machine's same address and port, for every client (static and proxy-unaware ones included); dynamic programs connect there directly; proxy-aware clients may go through the proxy, which dials it; without a network namespace (--allow-degraded) Landlock lets TCP connect reach port {port} directly",
        svcs[0].entry,
        at.join(" and ")
    ))
}

/// Copy both directions between two streams until both are done.
fn pipe(a: TcpStream, b: TcpStream) -> io::Result<()> {
    let (mut ar, mut aw) = (a.try_clone()?, a);
    let (mut br, mut bw) = (b.try_clone()?, b);
    let up = thread::spawn(move || {
        let _ = io::copy(&mut ar, &mut bw);
        let _ = bw.shutdown(Shutdown::Write);
    });
    let _ = io::copy(&mut br, &mut aw);
    let _ = aw.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

/// Accept on a listener inside the sandbox forever (in a thread), relaying each
/// connection to the first of the service's targets on the host that answers. A
/// service that is down closes the connection.
pub fn serve(
    listener: TcpListener,
    svc: Loopback,
    observer: Option<Observer>,
) -> thread::JoinHandle<()> {
    let svc = Arc::new(svc);
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (svc, observer) = (svc.clone(), observer.clone());
            thread::spawn(move || {
                for t in &svc.targets {
                    if let Ok(up) = TcpStream::connect_timeout(t, Duration::from_secs(10)) {
                        if let Some(o) = &observer {
                            (o.0)(&svc, Some(*t));
                        }
                        let _ = pipe(conn, up);
                        return;
                    }
                }
                if let Some(o) = &observer {
                    (o.0)(&svc, None);
                }
            });
        }
    })
}

/// Loopback TCP listeners in `/proc/net/tcp` (or `tcp6`) text.
pub fn listening(table: &str, v6: bool) -> Vec<SocketAddr> {
    let mut out = vec![];
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || f[3] != "0A" {
            continue;
        }
        let Some((addr, port)) = f[1].split_once(':') else {
            continue;
        };
        let Ok(port) = u16::from_str_radix(port, 16) else {
            continue;
        };
        // The kernel prints each 32-bit word of the address in host byte order.
        let mut bytes = vec![];
        for i in 0..addr.len() / 8 {
            let Ok(w) = u32::from_str_radix(&addr[i * 8..i * 8 + 8], 16) else {
                break;
            };
            bytes.extend_from_slice(&w.to_ne_bytes());
        }
        let ip = match (v6, bytes.len()) {
            (false, 4) => IpAddr::from([bytes[0], bytes[1], bytes[2], bytes[3]]),
            (true, 16) => {
                let mut b = [0u8; 16];
                b.copy_from_slice(&bytes);
                IpAddr::V6(Ipv6Addr::from(b))
            }
            _ => continue,
        };
        if sandpit_policy::host::is_loopback(ip) {
            out.push(SocketAddr::new(ip, port));
        }
    }
    out
}

/// The factory's loop (a process inside the network namespace, forked by pid 1):
/// `L` → the namespace's loopback listeners, one per line; `C<addr>` → a connection
/// to that loopback address, as a descriptor. Exits when the launcher hangs up.
pub fn factory(sock: OwnedFd) -> ! {
    let mut buf = [0u8; 256];
    loop {
        let n = match sys::recv_msg(sock.as_fd(), &mut buf) {
            Ok((n, _)) if n > 0 => n,
            _ => sys::exit_now(0),
        };
        let reply = match buf[0] {
            b'L' => {
                let mut text = String::new();
                for (path, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
                    let t = std::fs::read_to_string(path).unwrap_or_default();
                    for a in listening(&t, v6) {
                        text.push_str(&a.to_string());
                        text.push('\n');
                    }
                }
                text.truncate(60_000);
                send(&sock, format!("L{text}").as_bytes())
            }
            b'C' => {
                let addr = std::str::from_utf8(&buf[1..n])
                    .ok()
                    .and_then(|s| s.parse::<SocketAddr>().ok())
                    .filter(|a| sandpit_policy::host::is_loopback(a.ip()));
                match addr.map(|a| TcpStream::connect_timeout(&a, Duration::from_secs(5))) {
                    Some(Ok(s)) => sys::send_fd(sock.as_fd(), b"S", s.as_fd()),
                    Some(Err(e)) => send(&sock, format!("E{e}").as_bytes()),
                    None => send(&sock, b"Enot a loopback address"),
                }
            }
            _ => send(&sock, b"Eunknown request"),
        };
        if reply.is_err() {
            sys::exit_now(0)
        }
    }
}

fn send(sock: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    let mut s = UnixStream::from(sock.try_clone()?);
    s.write_all(msg)
}

/// The launcher's end of the factory.
struct Factory(Mutex<OwnedFd>);

impl Factory {
    fn ask(&self, msg: &[u8]) -> io::Result<(Vec<u8>, Option<OwnedFd>)> {
        let sock = self
            .0
            .lock()
            .map_err(|_| io::Error::other("factory lock poisoned"))?;
        send(&sock, msg)?;
        let mut buf = vec![0u8; 65_536];
        let (n, fd) = sys::recv_msg(sock.as_fd(), &mut buf)?;
        if n == 0 && fd.is_none() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        buf.truncate(n);
        Ok((buf, fd))
    }

    fn listeners(&self) -> io::Result<Vec<SocketAddr>> {
        let (reply, _) = self.ask(b"L")?;
        let text = String::from_utf8_lossy(reply.get(1..).unwrap_or_default()).into_owned();
        Ok(text.lines().filter_map(|l| l.parse().ok()).collect())
    }

    fn connect(&self, to: SocketAddr) -> io::Result<TcpStream> {
        match self.ask(format!("C{to}").as_bytes())? {
            (_, Some(fd)) => Ok(TcpStream::from(fd)),
            (reply, None) => Err(io::Error::other(
                String::from_utf8_lossy(reply.get(1..).unwrap_or_default()).into_owned(),
            )),
        }
    }
}

/// At most this many of the sandbox's listeners are mirrored at once (each costs
/// the launcher a descriptor and a thread).
const MAX_MIRRORED: usize = 64;

struct Mirrored {
    stop: Arc<AtomicBool>,
}

/// Mirror the sandbox's loopback listeners (except `exclude`, sandpit's own) on the
/// host until the factory goes away (the run ended). Runs in its own thread.
pub fn mirror(factory: OwnedFd, exclude: Vec<SocketAddr>) -> thread::JoinHandle<()> {
    let factory = Arc::new(Factory(Mutex::new(factory)));
    thread::spawn(move || {
        let mut active: BTreeMap<SocketAddr, Mirrored> = BTreeMap::new();
        let mut refused: Vec<SocketAddr> = vec![];
        while let Ok(now) = factory.listeners() {
            let now: Vec<SocketAddr> = now.into_iter().filter(|a| !exclude.contains(a)).collect();
            for a in &now {
                if active.contains_key(a) || refused.contains(a) {
                    continue;
                }
                if active.len() >= MAX_MIRRORED {
                    eprintln!(
                        "sandpit: a server in the sandbox listens on {a}, but {MAX_MIRRORED} servers are already reachable from this machine; it stays reachable only inside"
                    );
                    refused.push(*a);
                    continue;
                }
                match crate::sys::tcp_listener(a) {
                    Ok(l) => {
                        eprintln!(
                            "sandpit: a server in the sandbox listens on {a}; reachable from this machine at {a} while the run lasts (allow_local_binding)"
                        );
                        let stop = Arc::new(AtomicBool::new(false));
                        accept_into(l, *a, factory.clone(), stop.clone());
                        active.insert(*a, Mirrored { stop });
                    }
                    Err(e) => {
                        eprintln!(
                            "sandpit: a server in the sandbox listens on {a}, but {a} cannot be opened on this machine ({e}); it is reachable only inside the sandbox"
                        );
                        refused.push(*a);
                    }
                }
            }
            let gone: Vec<SocketAddr> = active
                .keys()
                .filter(|a| !now.contains(a))
                .copied()
                .collect();
            for a in gone {
                if let Some(m) = active.remove(&a) {
                    m.stop.store(true, Ordering::SeqCst);
                    // Wake the blocked accept so the listener is dropped.
                    let _ = TcpStream::connect_timeout(&a, Duration::from_secs(1));
                }
            }
            refused.retain(|a| now.contains(a));
            thread::sleep(Duration::from_millis(150));
        }
        for m in active.values() {
            m.stop.store(true, Ordering::SeqCst);
        }
        for a in active.keys() {
            let _ = TcpStream::connect_timeout(a, Duration::from_secs(1));
        }
    })
}

fn accept_into(l: TcpListener, inside: SocketAddr, factory: Arc<Factory>, stop: Arc<AtomicBool>) {
    thread::spawn(move || {
        for conn in l.incoming() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let Ok(conn) = conn else { continue };
            let factory = factory.clone();
            thread::spawn(move || {
                // A server that just went away: the connection is closed.
                if let Ok(inner) = factory.connect(inside) {
                    let _ = pipe(conn, inner);
                }
            });
        }
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tables_parse_to_loopback_listeners() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 1 1 0000000000000000 100 0 0 10 0
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F41 0100007F:9C40 01 00000000:00000000 00:00000000 00000000 65534        0 3 1 0000000000000000 100 0 0 10 0
";
        let v6 =
            "  sl  local_address                         remote_address                        st
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A
   1: 00000000000000000000000000000000:1F91 00000000000000000000000000000000:0000 0A
";
        if cfg!(target_endian = "little") {
            assert_eq!(
                listening(v4, false),
                vec!["127.0.0.1:8000".parse::<SocketAddr>().unwrap()]
            );
            assert_eq!(
                listening(v6, true),
                vec!["[::1]:8080".parse::<SocketAddr>().unwrap()]
            );
        }
    }

    fn policy(text: &str) -> Policy {
        crate::service::decide::policy_from_toml(text).unwrap()
    }

    #[test]
    fn services_follow_the_allow_list() {
        let p = policy(
            "[network]\nallow = [\"localhost:11434\", \"127.0.0.2:8080\", \"api.example\"]\nblock = [\"[::1]:11434\"]\n",
        );
        let s = services(&p);
        let listen: Vec<String> = s.iter().map(|l| l.listen.to_string()).collect();
        assert_eq!(listen, vec!["127.0.0.1:11434", "127.0.0.2:8080"]);
        assert_eq!(
            s[0].targets,
            vec![
                "127.0.0.1:11434".parse::<SocketAddr>().unwrap(),
                "[::1]:11434".parse().unwrap()
            ]
        );
        assert!(services(&policy(
            "[network]\nmode = \"offline\"\nallow = [\"localhost:1\"]\n"
        ))
        .is_empty());
        let d = describe(&p).join("\n");
        assert!(d.contains("127.0.0.1:11434"), "{d}");
        assert!(d.contains("allow_local_binding = false"), "{d}");
    }
}
