//! The SSH agent the sandbox gets: a socket the launcher serves in the run's
//! directory, which `SSH_AUTH_SOCK` names inside. It lists the identities of the
//! launcher's own agent (`SSH_AUTH_SOCK` outside) and has that agent sign only
//! what `filter` allows: the login of an ssh session bound to a known host key
//! (the user's `known_hosts`, read here, outside the sandbox) of a destination
//! the policy allows. The real agent's socket stays masked, the private key files
//! unreadable; `known_hosts` and the `.pub` files come back readable so that ssh
//! inside can check the host and pick the key (`effective_files`).
//!
//! Plan ([`plan`], no side effects) → bind before the fork ([`Agent::bind`]) →
//! serve after it ([`Agent::serve`], one thread per connection, each with its own
//! connection to the real agent).
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sandpit_policy::{NetMode, Policy, SshAgent};

pub mod filter;
pub mod known_hosts;

pub use filter::{Connection, HostKeys, Step};

/// The socket's name in the run's directory.
pub const SOCKET: &str = "ssh-agent.sock";
/// Where carve-outs of this module come from, in `sandpit config` and refusals.
pub const ORIGIN: &str = "filtering SSH agent (sandpit)";

/// The run plan's part: the filtering agent, when the run has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The socket the sandbox's `SSH_AUTH_SOCK` names.
    pub socket: PathBuf,
    /// The launcher's agent, which signs.
    pub upstream: PathBuf,
    /// The `known_hosts` files read at each bind: the user's and the system's.
    pub known_hosts: Vec<PathBuf>,
    /// Why it is on, for `sandpit plan`.
    pub why: String,
}

/// Whether the run gets the filtering agent, and why: `ssh.agent = "filtered"`,
/// or by default when the launcher has an agent and the network policy allows
/// some host; never with `ssh.agent = "off"` or an offline network.
pub fn wanted(policy: &Policy, auth_sock: Option<&OsString>) -> Option<String> {
    let auth_sock = auth_sock.filter(|s| !s.is_empty())?;
    let net = &policy.network;
    if net.mode.value == NetMode::Offline {
        return None;
    }
    let shown = Path::new(auth_sock).display();
    match &policy.ssh.agent {
        Some(r) if r.value == SshAgent::Off => None,
        Some(r) => Some(format!("ssh.agent = \"filtered\" ({}), for {shown}", r.origin.location())),
        None if net.allow.is_empty() && net.mode.value == NetMode::Filtered => None,
        None => Some(format!(
            "SSH_AUTH_SOCK is set ({shown}) and the network policy allows hosts (ssh.agent = \"off\" turns it off)"
        )),
    }
}

/// The run's filtering agent, if the effective policy has one ([`effective`]):
/// its socket in the run's directory, which `SSH_AUTH_SOCK` (`env.set`) now names.
pub fn plan(policy: &mut Policy, run_dir: &Path) -> Option<Plan> {
    let why = wanted(policy, std::env::var_os("SSH_AUTH_SOCK").as_ref())?;
    let upstream = PathBuf::from(std::env::var_os("SSH_AUTH_SOCK")?);
    let socket = run_dir.join(SOCKET);
    let set = (policy.env.set.iter_mut()).find(|r| r.origin.file == ORIGIN)?;
    set.value.value = socket.to_string_lossy().into_owned();
    Some(Plan {
        socket,
        upstream,
        known_hosts: vec![
            policy.context.home.join(".ssh/known_hosts"),
            PathBuf::from("/etc/ssh/ssh_known_hosts"),
        ],
        why,
    })
}

/// The effective policy's part (`run::effective`, which `explain` judges with):
/// with the filtering agent, `SSH_AUTH_SOCK` is set to its socket (`env.set`,
/// so that no layer withholds it), and what ssh inside needs of `~/.ssh` is
/// readable: the known hosts (to check the server) and the public keys (to pick
/// the agent's key that goes with an `IdentityFile`). The rest of `~/.ssh`
/// (private keys, config) stays as the policy has it. The socket's path is the
/// run's ([`plan`] puts it in).
pub fn effective(policy: &mut Policy) {
    if wanted(policy, std::env::var_os("SSH_AUTH_SOCK").as_ref()).is_none() {
        return;
    }
    let origin = |key: &str, entry: &str| {
        let mut o = sandpit_policy::Origin::builtin(key, entry);
        o.file = ORIGIN.into();
        o
    };
    let ssh = policy.context.home.join(".ssh");
    for (path, entry) in [
        (ssh.join("known_hosts"), "~/.ssh/known_hosts"),
        (ssh.join("*.pub"), "~/.ssh/*.pub"),
    ] {
        policy.files.allow_read.push(sandpit_policy::Rule {
            value: path,
            origin: origin("files.allow_read", entry),
        });
    }
    policy.env.set.retain(|r| r.value.name != "SSH_AUTH_SOCK");
    policy.env.set.push(sandpit_policy::Rule {
        value: sandpit_policy::EnvSet {
            name: "SSH_AUTH_SOCK".into(),
            value: format!("<the run's directory>/{SOCKET}"),
        },
        origin: origin("env.set", "SSH_AUTH_SOCK"),
    });
}

/// The destinations a host key may log in to: its names in the `known_hosts`
/// files that the policy's network rules allow.
pub struct PolicyHosts {
    pub policy: Arc<Policy>,
    pub known_hosts: Vec<PathBuf>,
}

impl PolicyHosts {
    /// The hosts the policy names exactly, for hashed and pattern entries: each
    /// with its port, or 22.
    fn candidates(&self) -> Vec<known_hosts::Destination> {
        use sandpit_policy::host::HostMatch;
        (self.policy.network.allow.iter())
            .filter_map(|r| {
                let host = match &r.value.host {
                    HostMatch::Exact(n) => n.clone(),
                    HostMatch::Ip(ip) => sandpit_policy::Host::Ip(*ip).to_string(),
                    _ => return None,
                };
                Some((host, r.value.port.unwrap_or(22)))
            })
            .collect()
    }
}

impl HostKeys for PolicyHosts {
    fn allowed(&self, key: &ssh_key::public::KeyData) -> Result<String, String> {
        let mut known = known_hosts::Known::default();
        for f in &self.known_hosts {
            if let Ok(text) = std::fs::read_to_string(f) {
                known.add(&text);
            }
        }
        let fingerprint = key.fingerprint(ssh_key::HashAlg::Sha256);
        let names = known.destinations(key, &self.candidates());
        if names.is_empty() {
            return Err(format!(
                "session bind to a host key in no known_hosts ({fingerprint}): only hosts known to the user are logged in to"
            ));
        }
        for (host, port) in &names {
            let Ok(h) = sandpit_policy::canonical_host(host) else {
                continue;
            };
            if sandpit_policy::decide::decide_connect(&self.policy, &h, *port).is_allowed() {
                return Ok(format!("{h}:{port}"));
            }
        }
        let shown: Vec<String> = names.iter().map(|(h, p)| format!("{h}:{p}")).collect();
        Err(format!(
            "session bind to the host key of {} ({fingerprint}), which the network policy does not allow",
            shown.join(", ")
        ))
    }
}

/// What the agent did, for the run's summary.
#[derive(Default)]
pub struct Tally {
    pub signed: AtomicUsize,
    pub refused: Mutex<Vec<String>>,
}

impl Tally {
    /// The summary line, when the agent refused something.
    pub fn summary(&self) -> Option<String> {
        let refused = self.refused.lock().ok()?;
        let first = refused.first()?;
        Some(format!(
            "sandpit: the SSH agent refused {} request{} (signed {} login{}): {first}",
            refused.len(),
            if refused.len() == 1 { "" } else { "s" },
            self.signed.load(Ordering::Relaxed),
            if self.signed.load(Ordering::Relaxed) == 1 {
                ""
            } else {
                "s"
            },
        ))
    }
}

/// The socket, bound before the fork.
pub struct Agent {
    plan: Plan,
    listener: UnixListener,
}

impl Agent {
    /// Bind the socket in the run's directory (private to the user, read-only inside).
    pub fn bind(plan: &Plan) -> std::io::Result<Agent> {
        let _ = std::fs::remove_file(&plan.socket);
        let listener = UnixListener::bind(&plan.socket)?;
        Ok(Agent {
            plan: plan.clone(),
            listener,
        })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Serve each connection on its own thread, for as long as the process lives.
    pub fn serve(self, hosts: Arc<dyn HostKeys + Send + Sync>, tally: Arc<Tally>) {
        let Agent { plan, listener } = self;
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (hosts, tally, upstream) =
                    (hosts.clone(), tally.clone(), plan.upstream.clone());
                std::thread::spawn(move || {
                    let _ = serve_one(conn, &upstream, &*hosts, &tally);
                });
            }
        });
    }
}

fn read_frame(s: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > filter::MAX_MESSAGE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "agent message too long or empty",
        ));
    }
    let mut msg = vec![0u8; len];
    s.read_exact(&mut msg)?;
    Ok(Some(msg))
}

fn write_frame(s: &mut impl Write, msg: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(msg.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "answer too long"))?;
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(msg);
    s.write_all(&out)
}

/// The real agent, connected on first use.
struct Upstream<'a> {
    path: &'a Path,
    conn: Option<UnixStream>,
}

impl Upstream<'_> {
    fn ask(&mut self, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        if self.conn.is_none() {
            self.conn = Some(UnixStream::connect(self.path)?);
        }
        let Some(c) = self.conn.as_mut() else {
            return Err(std::io::ErrorKind::NotConnected.into());
        };
        write_frame(c, msg)?;
        read_frame(c)?.ok_or_else(|| std::io::ErrorKind::UnexpectedEof.into())
    }
}

/// One client: each message judged, then answered by the real agent or refused.
fn serve_one(
    mut conn: UnixStream,
    upstream: &Path,
    hosts: &dyn HostKeys,
    tally: &Tally,
) -> std::io::Result<()> {
    let mut state = Connection::default();
    let mut up = Upstream {
        path: upstream,
        conn: None,
    };
    let failure = [filter::FAILURE];
    while let Some(msg) = read_frame(&mut conn)? {
        let answer = match state.step(&msg, hosts) {
            Step::Forward => up.ask(&msg).unwrap_or(failure.to_vec()),
            Step::Sign { .. } => match up.ask(&msg) {
                Ok(a) => {
                    tally.signed.fetch_add(1, Ordering::Relaxed);
                    a
                }
                Err(_) => failure.to_vec(),
            },
            Step::Bound { .. } => {
                // The real agent's own destination constraints see the bind too; an
                // agent without the extension refuses it, which changes nothing here.
                let _ = up.ask(&msg);
                vec![filter::SUCCESS]
            }
            Step::Refuse(why) => {
                if let Ok(mut r) = tally.refused.lock() {
                    if r.len() < 64 {
                        r.push(why);
                    }
                }
                failure.to_vec()
            }
        };
        write_frame(&mut conn, &answer)?;
    }
    Ok(())
}
