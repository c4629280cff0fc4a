//! The SSH agent the sandbox gets: a socket the launcher serves in the run's
//! directory, which `SSH_AUTH_SOCK` names inside. It lists the identities of the
//! launcher's own agent (`SSH_AUTH_SOCK` outside) and has that agent sign only
//! what `filter` allows: the login of an ssh session bound to a known host key
//! (the user's `known_hosts`, read here, outside the sandbox) of a destination
//! the policy allows. The real agent's socket stays masked, the private key files
//! unreadable; `known_hosts` and the `.pub` files come back readable so that ssh
//! inside can check the host and pick the key ([`effective`]).
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
/// Connections served at once (each holds a thread and a connection to the real
/// agent); one more is closed at once. ssh and git hold one each.
pub const MAX_CONNECTIONS: usize = 64;

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
        // Unrestricted mode lifts host filtering and nothing else: the agent signs
        // only for hosts `network.allow` names, so an empty list (as unrestricted
        // mode always has) means no agent.
        None if net.allow.is_empty() => None,
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
    /// `policy` with `network.mode = "filtered"`: what a login may go to.
    named: Policy,
}

impl PolicyHosts {
    pub fn new(policy: Arc<Policy>, known_hosts: Vec<PathBuf>) -> PolicyHosts {
        let mut named = (*policy).clone();
        if named.network.mode.value == NetMode::Unrestricted {
            named.network.mode.value = NetMode::Filtered;
        }
        PolicyHosts {
            policy,
            known_hosts,
            named,
        }
    }

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
            // Judged as in filtered mode: unrestricted mode lifts host filtering, not
            // what the user's key logs in to (only hosts `network.allow` names). No
            // own addresses: a session to one of this machine's addresses never got
            // past the proxy, which refuses them (`service::own`); this module
            // imports no other.
            if sandpit_policy::decide::decide_connect(&self.named, &h, *port, &[]).is_allowed() {
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
        let open = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::AcqRel);
                    drop(conn);
                    continue;
                }
                let (hosts, tally, upstream, done) = (
                    hosts.clone(),
                    tally.clone(),
                    plan.upstream.clone(),
                    open.clone(),
                );
                let spawned = std::thread::Builder::new()
                    .name("sandpit-ssh-agent".into())
                    .spawn(move || {
                        let _ = serve_one(conn, &upstream, &*hosts, &tally);
                        done.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::AcqRel);
                }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn policy(text: &str) -> Policy {
        let dir = std::env::temp_dir();
        let mut o = sandpit_policy::LoadOptions::new(sandpit_policy::Context {
            home: dir.join("sandpit-home"),
            workspace: dir.join("sandpit-home/project"),
            scratch: dir.join("sandpit-scratch"),
            state_dir: dir.join("sandpit-home/.sandpit"),
        });
        o.user = Some(sandpit_policy::Source::new(
            sandpit_policy::Layer::User,
            "test.toml",
            text,
        ));
        sandpit_policy::load(&o).unwrap()
    }

    #[test]
    fn on_by_default_with_an_agent_and_an_allowed_host_and_off_when_told() {
        let sock = Some(OsString::from("/tmp/agent.sock"));
        let allowed = "[network]\nallow = [\"git.test:22\"]\n";
        assert!(wanted(&policy(allowed), sock.as_ref()).is_some());
        // No agent, an empty one, nothing allowed, offline, off: none.
        assert!(wanted(&policy(allowed), None).is_none());
        assert!(wanted(&policy(allowed), Some(&OsString::new())).is_none());
        assert!(wanted(&policy(""), sock.as_ref()).is_none());
        // Unrestricted mode with nothing named: no host a login may go to.
        let open = "[network]\nmode = \"unrestricted\"\n";
        assert!(wanted(&policy(open), sock.as_ref()).is_none());
        let offline = "[network]\nmode = \"offline\"\n[ssh]\nagent = \"filtered\"\n";
        assert!(wanted(&policy(offline), sock.as_ref()).is_none());
        let off = format!("{allowed}[ssh]\nagent = \"off\"\n");
        assert!(wanted(&policy(&off), sock.as_ref()).is_none());
        // Asked for: on with nothing allowed yet (unrestricted, or rules added live).
        let asked = "[ssh]\nagent = \"filtered\"\n";
        let why = wanted(&policy(asked), sock.as_ref()).unwrap();
        assert!(why.contains("ssh.agent = \"filtered\""), "{why}");
    }

    /// A host key's destinations are judged by the network policy: allowed, not
    /// allowed, and a hashed name tried against the hosts the policy names.
    #[test]
    fn a_known_host_key_counts_only_for_an_allowed_destination() {
        let t = tempfile::tempdir().unwrap();
        let key_line =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHhM6VifnlocEXLilXQUun8WInLVnp9ja6HUAx4Ovizz";
        let key = ssh_key::PublicKey::from_openssh(key_line)
            .unwrap()
            .key_data()
            .clone();
        let kh = t.path().join("known_hosts");
        let hosts = |allow: &str, known: &str| {
            std::fs::write(&kh, known).unwrap();
            PolicyHosts::new(
                Arc::new(policy(&format!("[network]\nallow = [{allow}]\n"))),
                vec![t.path().join("missing"), kh.clone()],
            )
            .allowed(&key)
        };
        let known = format!("[git.test]:2222 {key_line}\n");
        assert_eq!(
            hosts("\"git.test:2222\"", &known),
            Ok("git.test:2222".into())
        );
        let why = hosts("\"git.test:22\"", &known).unwrap_err();
        assert!(
            why.contains("git.test:2222") && why.contains("does not allow"),
            "{why}"
        );
        let why = hosts("\"git.test:2222\"", "").unwrap_err();
        assert!(why.contains("no known_hosts"), "{why}");
        // Hashed, as ssh-keygen -H writes `[git.test]:2222`.
        let hashed =
            format!("|1|CdGLMhBIHZM//THHW4E5lLj5rwE=|HhOq2r+a3OETwPTIqZlR4aw1EOA= {key_line}\n");
        assert_eq!(
            hosts("\"ssh.test:2222\"", &hashed),
            Ok("ssh.test:2222".into())
        );
        assert!(hosts("\"ssh.test:22\", \"*.ssh.test\"", &hashed).is_err());
        // Unrestricted mode opens every public host to connections, not to logins
        // with the user's key: a known host gets no signature, as network.allow
        // (which that mode cannot have) names none.
        std::fs::write(&kh, &known).unwrap();
        let why = PolicyHosts::new(
            Arc::new(policy(
                "[network]\nmode = \"unrestricted\"\n[ssh]\nagent = \"filtered\"\n",
            )),
            vec![kh.clone()],
        )
        .allowed(&key)
        .unwrap_err();
        assert!(why.contains("does not allow"), "{why}");
    }
}
