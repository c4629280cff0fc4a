//! The one decision function every layer consults.
use crate::host::{
    canonical_host, canonical_ip, is_localhost, is_metadata, non_public_range, Host, HostMatch,
};
use crate::matchers::command_line;
use crate::origin::Origin;
use crate::path::{depth, display, is_within, normalize};
use crate::{NetMode, Policy, ReviewEvent};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
    /// Allowed by the rules, but the adversary must review it first.
    Review,
}

/// What is being asked. Paths are absolute; they are normalized before matching.
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    /// A read by the agent: the command sandpit starts (and what it execs in place),
    /// or one of `env.agent_programs`. Where no agent is told apart (a plain
    /// command), every process is.
    Read(&'a Path),
    Write(&'a Path),
    /// A read by a command the agent spawned: `files.agent_read` is not for it.
    ReadSpawned(&'a Path),
    /// A write by a command the agent spawned.
    WriteSpawned(&'a Path),
    /// A TCP connection by host alone: `[[network.program]]` entries are not judged
    /// (the proxy, which enforces them, attributes each connection itself and asks
    /// with [`Request::ConnectFrom`]).
    Connect {
        host: &'a str,
        port: u16,
    },
    /// A TCP connection from `program` (`None`: not known).
    ConnectFrom {
        host: &'a str,
        port: u16,
        program: Option<&'a Program>,
    },
    Exec(&'a [String]),
    /// A TCP server listening on this address (`bind` then `listen`; port 0: an
    /// unbound socket, which listens on every address).
    Listen(std::net::SocketAddr),
    /// A connection to the pathname Unix socket at `path` (absolute, links
    /// resolved). `host` says that a program outside the sandbox has bound it
    /// (the launcher and `explain` read that from the host's socket table; the
    /// interposer cannot tell, and passes false).
    Unix {
        path: &'a Path,
        host: bool,
    },
    /// Whether the launcher's variable `name` reaches `to`.
    Env {
        name: &'a str,
        to: EnvTo<'a>,
    },
    /// An HTTP request the proxy can read: plain HTTP, or a host whose TLS sandpit
    /// terminates. `target` is the request target in origin form (`/path?query`).
    Http {
        method: &'a str,
        scheme: &'a str,
        host: &'a str,
        port: u16,
        target: &'a str,
    },
}

impl<'a> Request<'a> {
    /// A read or a write of `p`, by the agent or by a command it `spawned`.
    pub fn path(p: &'a Path, write: bool, spawned: bool) -> Request<'a> {
        match (write, spawned) {
            (false, false) => Request::Read(p),
            (true, false) => Request::Write(p),
            (false, true) => Request::ReadSpawned(p),
            (true, true) => Request::WriteSpawned(p),
        }
    }
}

/// Who a variable would reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvTo<'a> {
    /// The command sandpit starts, and whatever it execs in place (a shebang's
    /// interpreter, `env`, a shell's `exec`): the agent.
    Command,
    /// A program (absolute path) that a process holding the agent's variables starts.
    Spawned(&'a Path),
}

/// The program behind a connection: its executable as the kernel names it
/// (`/proc/PID/exe`), and the process, as the launcher sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    pub path: std::path::PathBuf,
    pub pid: Option<u32>,
}

impl std::fmt::Display for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "{} (pid {pid})", self.path.display()),
            None => write!(f, "{}", self.path.display()),
        }
    }
}

/// A decision, the rule that made it, and a reason a model can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub decision: Decision,
    pub rule: Option<Origin>,
    pub reason: String,
}

impl Verdict {
    fn new(decision: Decision, rule: Option<&Origin>, reason: String) -> Verdict {
        Verdict {
            decision,
            rule: rule.cloned(),
            reason,
        }
    }
    pub fn is_allowed(&self) -> bool {
        self.decision == Decision::Allow
    }
    pub fn is_denied(&self) -> bool {
        self.decision == Decision::Deny
    }
    /// The one line the sandboxed program sees on stderr.
    pub fn line(&self) -> String {
        format!("sandpit: {}", self.reason)
    }
}

const NOT_RETRY: &str = "this is sandpit's sandbox policy; retrying will not help";

/// Decide a request against the policy.
pub fn decide(policy: &Policy, req: &Request) -> Verdict {
    match *req {
        Request::Read(p) => decide_read(policy, &normalize(p)),
        Request::Write(p) => decide_write(policy, &normalize(p)),
        Request::ReadSpawned(p) => decide_spawned(policy, &normalize(p), false),
        Request::WriteSpawned(p) => decide_spawned(policy, &normalize(p), true),
        Request::Connect { host, port } => match canonical_host(host) {
            // The machine's own addresses are not part of a request: inside the
            // sandbox they cannot be read. The launcher's proxy and relay judge
            // with them (`decide_connect`'s `own`).
            Ok(h) => decide_connect(policy, &h, port, &[]),
            Err(e) => Verdict::new(
                Decision::Deny,
                None,
                format!("blocked connection to {host:?}: {e}; {NOT_RETRY}"),
            ),
        },
        Request::ConnectFrom {
            host,
            port,
            program,
        } => match canonical_host(host) {
            Ok(h) => decide_connect_by(policy, &h, port, program, &[]),
            Err(e) => Verdict::new(
                Decision::Deny,
                None,
                format!("blocked connection to {host:?}: {e}; {NOT_RETRY}"),
            ),
        },
        Request::Exec(argv) => decide_exec(policy, argv),
        Request::Env { name, to } => decide_env(policy, name, to),
        Request::Http {
            method,
            scheme,
            host,
            port,
            target,
        } => decide_http(policy, method, scheme, host, port, target),
        Request::Listen(addr) => decide_listen(policy, addr),
        Request::Unix { path, host } => decide_unix(policy, &normalize(path), host),
    }
}

/// A pathname Unix socket: reachable when `isolation.unix_sockets` names it (or a
/// directory holding it), when it is sandpit's own (the state directory), or when
/// the run could have made it itself (under a writable root, not bound by a
/// program outside). Every other socket is a host program's, and a host program
/// that listens may do what the sandbox may not (a Docker daemon mounts home, an
/// SSH agent signs): unreachable, in every network mode.
fn decide_unix(policy: &Policy, p: &Path, host: bool) -> Verdict {
    let shown = display(p, &policy.context);
    if let Some(a) = deepest(&policy.isolation.unix_sockets, p) {
        return Verdict::new(
            Decision::Allow,
            Some(&a.origin),
            format!("connecting to the socket {shown} allowed by {}", a.origin),
        );
    }
    let denied = |rule: Option<&Origin>, why: String| {
        Verdict::new(
            Decision::Deny,
            rule,
            format!("blocked connecting to the socket {shown}: {why}; {NOT_RETRY}. To allow it, add it to unix_sockets under [isolation] in ~/.sandpit/config.toml"),
        )
    };
    let read = decide_read(policy, p);
    if read.is_denied() {
        let why = format!(
            "it is hidden like every unreadable path ({})",
            read.rule
                .as_ref()
                .map_or_else(String::new, |r| r.to_string())
        );
        return denied(read.rule.as_ref(), why);
    }
    if is_within(p, &policy.context.state_dir) {
        return Verdict::new(
            Decision::Allow,
            None,
            format!("connecting to {shown} allowed: it is sandpit's own socket for this run"),
        );
    }
    if host {
        return denied(None, "a program outside the sandbox listens on it".into());
    }
    match deepest(&policy.files.allow_write, p) {
        Some(w) => Verdict::new(
            Decision::Allow,
            Some(&w.origin),
            format!("connecting to {shown} allowed: it is under the writable root of {}, where the run makes its own sockets (the host's sockets there are hidden)", w.origin),
        ),
        None => denied(None, "outside the writable roots only programs outside the sandbox make sockets".into()),
    }
}

/// A TCP server inside the sandbox: only with `network.allow_local_binding`, and then
/// only on a loopback address with a port (this machine reaches it there while the
/// run lasts), in every network mode.
fn decide_listen(policy: &Policy, addr: std::net::SocketAddr) -> Verdict {
    let b = &policy.network.allow_local_binding;
    let ip = match addr.ip() {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    let unbound = if addr.port() == 0 {
        " (an unbound socket listens on every address)"
    } else {
        ""
    };
    if !b.value {
        return Verdict::new(
            Decision::Deny,
            Some(&b.origin),
            format!("blocked listening on {addr}{unbound}: network.allow_local_binding = false ({}); set allow_local_binding = true under [network] in ~/.sandpit/config.toml (or pass --allow-local-binding) to let a server in the sandbox be reached from this machine", b.origin.location()),
        );
    }
    if addr.port() == 0 || !ip.is_loopback() {
        return Verdict::new(
            Decision::Deny,
            Some(&b.origin),
            format!("blocked listening on {addr}{unbound}: allow_local_binding allows loopback addresses only (127.0.0.1 or ::1), never other interfaces; bind to 127.0.0.1 first"),
        );
    }
    Verdict::new(
        Decision::Allow,
        Some(&b.origin),
        format!("listening on {addr} allowed by network.allow_local_binding ({}): this machine reaches it at the same address while the run lasts", b.origin.location()),
    )
}

/// Percent-decode `s`; `None` when an escape is malformed or decodes to a byte that
/// is not allowed in a path (NUL, a control character).
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            let v = u8::from_str_radix(h, 16).ok()?;
            if v < 0x20 || v == 0x7f {
                return None;
            }
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `[network.http]` for one request: a `block` entry that matches denies; an `allow`
/// entry that matches allows; when `allow` names the host and none matches, denied.
/// The path is matched decoded and without its query; one with dot segments (`..`,
/// also encoded) is denied where any entry names the host, since servers resolve them.
fn decide_http(
    policy: &Policy,
    method: &str,
    scheme: &str,
    host: &str,
    port: u16,
    target: &str,
) -> Verdict {
    let http = &policy.network.http;
    let host = match canonical_host(host) {
        Ok(h) => h.to_string(),
        Err(e) => {
            return Verdict::new(
                Decision::Deny,
                None,
                format!("blocked request to {host:?}: {e}; {NOT_RETRY}"),
            )
        }
    };
    let url = format!("{scheme}://{host}:{port}{target}");
    let named: Vec<&crate::Rule<crate::HttpRule>> = http
        .allow
        .iter()
        .chain(&http.block)
        .filter(|r| r.value.names(scheme, &host, port))
        .collect();
    if named.is_empty() {
        return Verdict::new(
            Decision::Allow,
            None,
            format!(
                "no network.http entry names {scheme}://{host}:{port}: the host's rules decide"
            ),
        );
    }
    let raw = target.split(['?', '#']).next().unwrap_or("");
    let path = match percent_decode(raw) {
        Some(p)
            if p.starts_with('/')
                && !p.split('/').any(|s| s == "." || s == "..")
                && !p.contains('\\') =>
        {
            p
        }
        _ => {
            return Verdict::new(
                Decision::Deny,
                Some(&named[0].origin),
                format!("blocked {method} {url}: the path has dot segments, a backslash or a bad escape, and network.http rules name this host; {NOT_RETRY}"),
            )
        }
    };
    if let Some(b) = http
        .block
        .iter()
        .find(|r| r.value.names(scheme, &host, port) && r.value.matches(method, &path))
    {
        return Verdict::new(
            Decision::Deny,
            Some(&b.origin),
            format!("blocked {method} {url}: {}; {NOT_RETRY}", b.origin),
        );
    }
    let mut allows = http
        .allow
        .iter()
        .filter(|r| r.value.names(scheme, &host, port))
        .peekable();
    if allows.peek().is_none() {
        return Verdict::new(
            Decision::Allow,
            None,
            format!("{method} {url}: no network.http.block entry matches"),
        );
    }
    let mut first = None;
    for a in allows {
        if a.value.matches(method, &path) {
            return Verdict::new(
                Decision::Allow,
                Some(&a.origin),
                format!("{method} {url} allowed by {}", a.origin),
            );
        }
        first.get_or_insert(a);
    }
    Verdict::new(
        Decision::Deny,
        first.map(|a| &a.origin),
        format!("blocked {method} {url}: network.http.allow names {host} but no entry matches this method and path; {NOT_RETRY}. To allow it, add \"{method} {scheme}://{host}{path}\" to [network.http] allow in ~/.sandpit/config.toml"),
    )
}

/// What becomes of an environment variable: one that `env.withhold` does not name
/// passes; a withheld one never enters the sandbox, unless `env.agent` keeps it for
/// the agent: then the command has it, and of the programs it spawns only those
/// `env.agent_programs` names, where the sandbox cannot write them.
/// What the run itself makes of a variable, before `env.withhold` is asked
/// ([`run_env`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnv<'a> {
    /// A credential's variable: it holds the run's sentinel, never the secret,
    /// and reaches every program (the sentinel is useless elsewhere).
    Sentinel(&'a crate::Credential),
    /// One of the run's CA variables ([`crate::CA_BUNDLE_ENV`]): it names a file,
    /// never a secret, and reaches every program.
    Ca(&'a crate::Credential),
    /// The variable a credential's real value is read from: it reaches none.
    Source(&'a crate::Credential),
    /// `env.set` gives it a value: it reaches every program.
    Set(&'a crate::Rule<crate::EnvSet>),
}

impl RunEnv<'_> {
    /// Whether the variable reaches the sandbox's programs.
    pub fn reaches(self) -> bool {
        !matches!(self, RunEnv::Source(_))
    }
}

/// What the run says of the variable `name` (`[credentials]`, `env.set`);
/// `None`: nothing, and `env.withhold` decides. Allocation-free: the interposer
/// asks it for every variable it passes on to an exec, so that its compiled
/// `env.withhold` globs decide only what is left, as [`decide`] does.
pub fn run_env<'a>(policy: &'a Policy, name: &str) -> Option<RunEnv<'a>> {
    let Some(first) = policy.credentials.first() else {
        return policy.env.set_by(name).map(RunEnv::Set);
    };
    if let Some(c) = policy.credential_for_env(name) {
        return Some(RunEnv::Sentinel(c));
    }
    if policy.sets_ca_env(name) {
        return Some(RunEnv::Ca(first));
    }
    (policy.credentials.iter())
        .find(|c| c.source_var() == Some(name))
        .map(RunEnv::Source)
        .or_else(|| policy.env.set_by(name).map(RunEnv::Set))
}

fn decide_env(policy: &Policy, name: &str, to: EnvTo) -> Verdict {
    let mut v = decide_env_rules(policy, name, to);
    // A credential for the variable that this run does without: say so, and why
    // (`sandpit explain env OPENAI_API_KEY` with the variable unset).
    if let Some(s) = policy.skipped_for_env(name) {
        v.reason.push_str(&format!(
            "; credentials.{} ({}) is skipped in this run: {}",
            s.credential.name,
            s.credential.origin.location(),
            s.why
        ));
    }
    v
}

fn decide_env_rules(policy: &Policy, name: &str, to: EnvTo) -> Verdict {
    if let Some(r) = run_env(policy, name) {
        let (origin, reason) = match r {
            RunEnv::Sentinel(c) => (
                &c.origin,
                format!(
                    "{name} holds the sentinel of credentials.{} ({}): every program sees it; the proxy puts the real value into requests to {} only",
                    c.name,
                    c.origin.location(),
                    c.hosts.join(", ")
                ),
            ),
            RunEnv::Ca(c) => (
                &c.origin,
                format!(
                    "{name} is set by sandpit to the run's certificate authority, which [credentials] ({}) has: every program sees it, whatever env.withhold says",
                    c.origin.location()
                ),
            ),
            RunEnv::Source(c) => (
                &c.origin,
                format!(
                    "{name} is the source of credentials.{} ({}): its value never enters the sandbox",
                    c.name,
                    c.origin.location()
                ),
            ),
            RunEnv::Set(s) => (
                &s.origin,
                format!(
                    "{name} is set to {:?} by {}: every program sees it, whatever env.withhold says",
                    s.value.value, s.origin
                ),
            ),
        };
        let decision = match r.reaches() {
            true => Decision::Allow,
            false => Decision::Deny,
        };
        return Verdict::new(decision, Some(origin), reason);
    }
    let env = &policy.env;
    let Some(w) = env.withheld_by(name) else {
        return Verdict::new(
            Decision::Allow,
            None,
            format!("{name} is not withheld: it reaches every program"),
        );
    };
    let gone = |why: String| Verdict::new(Decision::Deny, Some(&w.origin), why);
    let Some(a) = env.agent_keeps(name) else {
        return gone(format!(
            "{name} is withheld ({}): it is removed before the command starts, so no program in the sandbox sees it",
            w.origin
        ));
    };
    let program = match to {
        EnvTo::Command => {
            return Verdict::new(
                Decision::Allow,
                Some(&a.origin),
                format!("{name} is the agent's own ({}): the command sandpit starts keeps it; the programs it spawns do not, but for env.agent_programs", a.origin),
            )
        }
        EnvTo::Spawned(p) => p,
    };
    let shown = display(program, &policy.context);
    let Some(m) = env.agent_program(program.as_os_str().as_encoded_bytes()) else {
        return gone(format!(
            "{name} is withheld ({}) from the programs the agent spawns, and {shown} is not one of env.agent_programs",
            w.origin
        ));
    };
    if !decide_write(policy, &normalize(program)).is_denied() {
        return gone(format!(
            "{name} is withheld ({}): {shown} matches {} but the sandbox can write it, so it is not taken for the agent",
            w.origin, m.origin
        ));
    }
    Verdict::new(
        Decision::Allow,
        Some(&m.origin),
        format!(
            "{name} is the agent's own ({}), and {shown} is the agent's program ({})",
            a.origin, m.origin
        ),
    )
}

fn deepest<'a, T: AsRef<Path>>(
    rules: &'a [crate::Rule<T>],
    p: &Path,
) -> Option<&'a crate::Rule<T>> {
    deepest_at(rules, p).map(|(r, _)| r)
}

/// The rule of `rules` that holds for `p` most specifically, with how specific
/// ([`rule_depth`]).
fn deepest_at<'a, T: AsRef<Path>>(
    rules: &'a [crate::Rule<T>],
    p: &Path,
) -> Option<(&'a crate::Rule<T>, (usize, usize))> {
    rules
        .iter()
        .filter_map(|r| rule_depth(r.value.as_ref(), p).map(|d| (r, d)))
        .max_by_key(|(_, d)| *d)
}

/// How specifically the rule `rule` (a path or a glob) holds for `p`, if it does:
/// the depth it holds from (a path rule's own; a glob's, the shallowest ancestor of
/// `p` it matches), then the depth of its literal part (a glob naming more of the
/// path before its wildcards is the more specific at the same depth).
pub fn rule_depth(rule: &Path, p: &Path) -> Option<(usize, usize)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = rule.as_os_str().as_bytes();
    if crate::glob::is_glob(bytes) {
        let at = crate::glob::root_depth(p.as_os_str().as_bytes(), bytes)?;
        return Some((at, depth(&crate::glob::literal_prefix(rule))));
    }
    is_within(p, rule).then(|| (depth(rule), depth(rule)))
}

fn decide_read(policy: &Policy, p: &Path) -> Verdict {
    let shown = display(p, &policy.context);
    let block = deepest_at(&policy.files.block_read, p);
    let allow = deepest_at(&policy.files.allow_read, p);
    match (block, allow) {
        // The deeper rule wins; for the same path, the later layer (a profile's
        // carve-out of its own agent's auth file over the default's block) — never
        // a project file's, which may only tighten.
        (Some((b, bd)), Some((a, ad)))
            if ad > bd
                || (ad == bd
                    && a.origin.layer > b.origin.layer
                    && a.origin.layer != crate::Layer::Project) =>
        {
            Verdict::new(Decision::Allow, Some(&a.origin), format!("read of {shown} allowed by {}", a.origin))
        }
        (Some((b, _)), _) => Verdict::new(
            Decision::Deny,
            Some(&b.origin),
            format!("blocked read of {shown} ({}); {NOT_RETRY}. To allow it, add it to [files] allow_read in ~/.sandpit/config.toml", b.origin),
        ),
        (None, Some(_)) => Verdict::new(Decision::Allow, None, format!("read of {shown} is not restricted")),
        (None, None) => match dotenv_beyond(policy, p) {
            Some(b) => Verdict::new(
                Decision::Deny,
                Some(&b.origin),
                format!("blocked read of {shown}: a .env file past the run's .env search (it stops after a bound, and this file was not looked through for secrets); {NOT_RETRY}. To read .env files as they are, set real_dotenv = true under [files] in ~/.sandpit/config.toml"),
            ),
            None => Verdict::new(Decision::Allow, None, format!("read of {shown} is not restricted")),
        },
    }
}

/// The rule refusing `p` when it is a `.env` file in the workspace that the run's
/// stopped `.env` search did not find ([`crate::Files::dotenv_beyond`]).
fn dotenv_beyond<'a>(policy: &'a Policy, p: &Path) -> Option<&'a crate::DotenvBeyond> {
    let b = policy.files.dotenv_beyond.as_ref()?;
    let name = p.file_name()?;
    (crate::is_dotenv_name(name.as_encoded_bytes())
        && is_within(p, &policy.context.workspace)
        && b.seen.binary_search_by(|s| s.as_path().cmp(p)).is_err())
    .then_some(b)
}

/// An access by a command the agent spawned: the agent's own files
/// (`files.agent_read`, and what lies below one) are not for it; everything else is
/// decided as for the agent.
fn decide_spawned(policy: &Policy, p: &Path, write: bool) -> Verdict {
    let Some(a) = deepest(&policy.files.agent_read, p) else {
        return match write {
            true => decide_write(policy, p),
            false => decide_read(policy, p),
        };
    };
    let shown = display(p, &policy.context);
    let what = match write {
        true => "blocked write to",
        false => "blocked read of",
    };
    Verdict::new(
        Decision::Deny,
        Some(&a.origin),
        format!("{what} {shown} ({}): the agent's own login, which the commands it spawns may not touch; {NOT_RETRY}", a.origin),
    )
}

fn decide_write(policy: &Policy, p: &Path) -> Verdict {
    let shown = display(p, &policy.context);
    let read = decide_read(policy, p);
    if read.is_denied() {
        return Verdict {
            reason: read
                .reason
                .replacen("blocked read of", "blocked write to", 1),
            ..read
        };
    }
    if let Some(b) = deepest(&policy.files.block_write, p) {
        // A file of the run-later registry says which tool runs it, and when.
        let what = match crate::runlater::entry(&b.origin.entry) {
            Some(e) if b.origin.file == crate::runlater::ORIGIN => {
                format!(" ({}: {}; docs/run-later.md)", e.tool, e.runs)
            }
            _ => String::new(),
        };
        return Verdict::new(
            Decision::Deny,
            Some(&b.origin),
            format!("blocked write to {shown} ({}): it is protected because code outside the sandbox may run it later{what}; {NOT_RETRY}", b.origin),
        );
    }
    match deepest(&policy.files.allow_write, p) {
        Some(_) if reviews_write(policy, p) => {
            let adv = policy.adversary.as_ref().map(|a| &a.origin);
            Verdict::new(Decision::Review, adv, format!("write to {shown} (outside the workspace) goes to the adversary for review"))
        }
        Some(a) => Verdict::new(Decision::Allow, Some(&a.origin), format!("write to {shown} allowed by {}", a.origin)),
        None => Verdict::new(
            Decision::Deny,
            None,
            format!(
                "blocked write to {shown}: outside the writable roots (the workspace {} and $TMPDIR); {NOT_RETRY}. To allow it, add it to [files] allow_write in ~/.sandpit/config.toml",
                display(&policy.context.workspace, &policy.context)
            ),
        ),
    }
}

/// The origin file of the `allow_write` rules `sandpit run` adds for the run's own
/// private `/tmp` and `/dev/shm` (namespace mode): gone with the run, never reviewed.
pub const PRIVATE_TMPFS: &str = "private tmpfs of this run";

/// Whether a write to `p` that the rules allow goes to the adversary: with
/// `adversary.review = ["write"]`, every write outside the workspace, the run's
/// scratch directory (`$TMPDIR`) and its private tmpfs mounts, e.g. under an extra
/// `allow_write` root.
pub fn reviews_write(policy: &Policy, p: &Path) -> bool {
    policy
        .adversary
        .as_ref()
        .is_some_and(|a| a.review.contains(&ReviewEvent::Write))
        && !p.starts_with(&policy.context.workspace)
        && !p.starts_with(&policy.context.scratch)
        && deepest(&policy.files.allow_write, p).is_none_or(|r| r.origin.file != PRIVATE_TMPFS)
}

/// Whether an allow entry names this address itself (not through a wildcard name).
fn names_address(policy: &Policy, ip: IpAddr, port: u16) -> Option<&Origin> {
    policy
        .network
        .allow
        .iter()
        .find(|r| {
            matches!(r.value.host, HostMatch::Ip(_) | HostMatch::Cidr(..))
                && r.value.matches(&Host::Ip(ip), port)
        })
        .map(|r| &r.origin)
}

/// Whether `ip` is one of `own`, the addresses of the machine itself (every
/// interface's, as the launcher reads them), in any spelling.
pub fn is_own(own: &[IpAddr], ip: IpAddr) -> bool {
    let ip = canonical_ip(ip);
    own.iter().any(|a| canonical_ip(*a) == ip)
}

/// The kind of address `ip` is, when it is no public address of another machine:
/// a non-public range ([`non_public_range`]), or one of `own`, the machine's own
/// addresses (a public address on one of its interfaces reaches its services that
/// listen on all interfaces, as loopback does).
fn closed_range(ip: IpAddr, own: &[IpAddr]) -> Option<&'static str> {
    non_public_range(ip).or_else(|| is_own(own, ip).then_some(OWN))
}

/// [`closed_range`]'s word for an address of the machine itself.
const OWN: &str = "own";

/// `range` ([`closed_range`]) as the reasons say it.
fn a_range(range: &str) -> String {
    if range == OWN {
        "an address of this machine itself (one of its interfaces', where its services listening on all interfaces answer)".into()
    } else {
        format!("a {range} address")
    }
}

/// Decide a connection to an already canonical host. `own`: the addresses of the
/// machine itself (every interface), which `network.mode = "unrestricted"` refuses
/// as it refuses loopback; empty where they cannot be known (inside the sandbox).
pub fn decide_connect(policy: &Policy, host: &Host, port: u16, own: &[IpAddr]) -> Verdict {
    let net = &policy.network;
    let dest = format!("{host}:{port}");
    if net.mode.value == NetMode::Offline {
        return Verdict::new(
            Decision::Deny,
            Some(&net.mode.origin),
            format!(
                "blocked connection to {dest} (network.mode = \"offline\" in {}); {NOT_RETRY}",
                net.mode.origin.location()
            ),
        );
    }
    if let Host::Ip(ip) = host {
        if is_metadata(*ip) {
            return match names_address(policy, *ip, port) {
                Some(o) => Verdict::new(Decision::Allow, Some(o), format!("connection to {dest} allowed by {o}")),
                None => Verdict::new(Decision::Deny, None, format!("blocked connection to {dest}: cloud metadata and link-local addresses are always denied unless named in network.allow; {NOT_RETRY}")),
            };
        }
    }
    if let Some(b) = net.block.iter().find(|r| r.value.matches(host, port)) {
        return Verdict::new(
            Decision::Deny,
            Some(&b.origin),
            format!("blocked connection to {dest} ({}); {NOT_RETRY}", b.origin),
        );
    }
    if net.mode.value == NetMode::Unrestricted {
        // Unrestricted lifts host filtering and nothing else: the host's loopback
        // services, its own addresses, the LAN and every other non-public range
        // stay closed.
        if let Host::Ip(ip) = host {
            if let Some(range) = closed_range(*ip, own) {
                return Verdict::new(
                    Decision::Deny,
                    Some(&net.mode.origin),
                    format!(
                        "blocked connection to {dest}: {}; network.mode = \"unrestricted\" ({}) opens public addresses of other machines only; {NOT_RETRY}",
                        a_range(range),
                        net.mode.origin.location()
                    ),
                );
            }
        }
        return Verdict::new(
            Decision::Allow,
            Some(&net.mode.origin),
            format!(
                "connection to {dest} allowed: network.mode = \"unrestricted\" in {}",
                net.mode.origin.location()
            ),
        );
    }
    // Loopback is allowed one port at a time (a bare "localhost" is a load error).
    let loopback = match host {
        Host::Ip(ip) => ip.is_loopback(),
        Host::Name(n) => n == "localhost" || n.ends_with(".localhost"),
    };
    let entry = if loopback {
        dest.clone()
    } else {
        host.to_string()
    };
    match net.allow.iter().find(|r| r.value.matches(host, port)) {
        Some(a) => Verdict::new(Decision::Allow, Some(&a.origin), format!("connection to {dest} allowed by {}", a.origin)),
        None => Verdict::new(
            Decision::Deny,
            None,
            format!("blocked connection to {dest}: the host is not in network.allow; {NOT_RETRY}. To allow it, add \"{entry}\" to [network] allow in ~/.sandpit/config.toml"),
        ),
    }
}

/// Whether a connection to `host:port` that the host rules refused without a rule
/// (the host is not in `network.allow`) may be put to the user
/// (`network.ask_on_blocked_host`): only a host name, in filtered mode, not a
/// `localhost` name, and not a host a `[[network.program]]` entry limits (the
/// question could not name the program with the kernel's certainty, and its answer
/// would bypass the entry). Whether a terminal is there to ask on is the run's part.
pub fn askable(policy: &Policy, host: &Host, port: u16) -> bool {
    let Host::Name(name) = host else {
        return false;
    };
    policy.network.mode.value == NetMode::Filtered
        && name != "localhost"
        && !name.ends_with(".localhost")
        && !policy
            .network
            .program
            .iter()
            .any(|r| r.value.names(host, port))
}

/// Decide a connection to an already canonical host from `program` (`None`: the
/// program is not known). The host rules decide first ([`decide_connect`]); a host
/// they allow that a `[[network.program]]` entry names may then be reached only by
/// the programs that entry names: entries only restrict, never allow. Entries of a
/// project file narrow further: where one names the host, the program must be
/// named by a project entry as well as by one of the user's own layers, if any.
/// A program matches only where the sandbox cannot write it (a copy of `python3`
/// named `git` in the workspace is not `git`).
pub fn decide_connect_by(
    policy: &Policy,
    host: &Host,
    port: u16,
    program: Option<&Program>,
    own: &[IpAddr],
) -> Verdict {
    let v = decide_connect(policy, host, port, own);
    if !v.is_allowed() {
        return v;
    }
    let naming: Vec<&crate::Rule<crate::ProgramRule>> = policy
        .network
        .program
        .iter()
        .filter(|r| r.value.names(host, port))
        .collect();
    if naming.is_empty() {
        return v;
    }
    let dest = format!("{host}:{port}");
    let mut matched = None;
    for project in [false, true] {
        let group: Vec<_> = naming
            .iter()
            .filter(|r| (r.origin.layer == crate::Layer::Project) == project)
            .collect();
        let Some(first) = group.first() else {
            continue;
        };
        let refuse = |why: String| {
            let names: Vec<&str> = group
                .iter()
                .flat_map(|r| r.value.programs.iter().map(String::as_str))
                .collect();
            Verdict::new(
                Decision::Deny,
                Some(&first.origin),
                format!(
                    "blocked connection to {dest}: network.program {:?} ({}) lets only {} reach it, and {why}; {NOT_RETRY}",
                    first.value.name,
                    first.origin.location(),
                    names.join(", "),
                ),
            )
        };
        let Some(p) = program else {
            return refuse(
                "the program that opened this connection could not be identified".into(),
            );
        };
        let path = p.path.as_os_str().as_encoded_bytes();
        let Some((r, entry)) = group
            .iter()
            .find_map(|r| r.value.program(path).map(|e| (r, e)))
        else {
            let base = p.path.file_name().map_or_else(
                || p.path.display().to_string(),
                |b| b.to_string_lossy().into_owned(),
            );
            return refuse(format!(
                "this connection comes from {p}. If {base} should reach it, add \"{}\" to programs of that entry in {}",
                p.path.display(),
                first.origin.file
            ));
        };
        if !decide_write(policy, &normalize(&p.path)).is_denied() {
            return refuse(format!(
                "this connection comes from {p}, which matches {entry:?} but lies where the sandbox can write (a program the sandbox could plant is never one of them)"
            ));
        }
        matched.get_or_insert((*r, entry));
    }
    let Some((r, entry)) = matched else {
        return v;
    };
    let by = program.map_or_else(String::new, |p| p.to_string());
    Verdict::new(
        Decision::Allow,
        Some(&r.origin),
        format!(
            "{}; {by} is {entry:?} of network.program {:?} ({})",
            v.reason,
            r.value.name,
            r.origin.location()
        ),
    )
}

/// Decide whether `name` (already allowed) may be dialled at the address it resolved
/// to. Answers in loopback, private, link-local or metadata ranges are denied unless
/// the policy names them: a `network.resolve` entry, an address or range in
/// `network.allow`, or a loopback name with its port listed (`localhost:11434`,
/// which stands for 127.0.0.1 and ::1 only). An address of the machine itself (one
/// of `own`) counts as non-public: a name resolving to it is refused alike.
pub fn check_resolved(
    policy: &Policy,
    name: &Host,
    port: u16,
    addr: IpAddr,
    own: &[IpAddr],
) -> Verdict {
    let addr = canonical_ip(addr);
    let dest = format!("{name}:{port} ({addr})");
    if let Host::Name(n) = name {
        if let Some(r) = policy
            .network
            .resolve
            .iter()
            .find(|r| &r.value.name == n && r.value.addrs.contains(&addr))
        {
            return Verdict::new(
                Decision::Allow,
                Some(&r.origin),
                format!("{dest} named by {}", r.origin),
            );
        }
    }
    let Some(range) = closed_range(addr, own) else {
        return Verdict::new(Decision::Allow, None, format!("{dest} is a public address"));
    };
    if let Some(o) = names_address(policy, addr, port) {
        return Verdict::new(Decision::Allow, Some(o), format!("{dest} named by {o}"));
    }
    // Address entries were judged just above: what is left are loopback names, and a
    // name stands for 127.0.0.1 and ::1 (where the relay listeners are), not 127/8.
    if is_localhost(addr) {
        if let Some(r) = policy.network.allow.iter().find(|r| {
            r.value.port == Some(port) && r.value.is_loopback() && r.value.matches(name, port)
        }) {
            return Verdict::new(
                Decision::Allow,
                Some(&r.origin),
                format!("{dest} named by {}", r.origin),
            );
        }
    }
    Verdict::new(
        Decision::Deny,
        None,
        format!("blocked connection to {dest}: the name resolved to {} that the policy does not name; {NOT_RETRY}. To allow it, name the address in [network] allow or the name in [network.resolve]", a_range(range)),
    )
}

/// Decide a UDP datagram to `addr` (a `sendto`, or a `connect` of a UDP socket).
/// sandpit's DNS responder is reached in every mode and is not judged here (the
/// kernel layer relays it; the interposer knows its address). Anywhere else only in
/// `network.mode = "unrestricted"`, and there exactly where a TCP connection to the
/// same address and port would be allowed ([`decide_connect`], then
/// [`check_resolved`]): public addresses; the host's loopback, the LAN, link-local
/// and metadata addresses in every spelling, and the machine's own addresses
/// (`own`, as for [`decide_connect`]) stay closed. Network review sees only
/// what goes through sandpit's proxy, so with it UDP stays closed too.
pub fn decide_datagram(policy: &Policy, addr: SocketAddr, own: &[IpAddr]) -> Verdict {
    let net = &policy.network;
    let ip = canonical_ip(addr.ip());
    let dest = SocketAddr::new(ip, addr.port());
    let loc = net.mode.origin.location();
    match net.mode.value {
        NetMode::Offline => {
            return Verdict::new(
                Decision::Deny,
                Some(&net.mode.origin),
                format!("blocked UDP to {dest} (network.mode = \"offline\" in {loc}); {NOT_RETRY}"),
            )
        }
        NetMode::Filtered => {
            return Verdict::new(
                Decision::Deny,
                Some(&net.mode.origin),
                format!("blocked UDP to {dest}: network.mode = \"filtered\" ({loc}) lets UDP reach sandpit's DNS responder only (the proxy carries TCP); {NOT_RETRY}. network.mode = \"unrestricted\" in ~/.sandpit/config.toml opens UDP to public addresses"),
            )
        }
        NetMode::Unrestricted => {}
    }
    if let Some(a) = policy
        .adversary
        .as_ref()
        .filter(|a| a.review.contains(&ReviewEvent::Network))
    {
        return Verdict::new(
            Decision::Deny,
            Some(&a.origin),
            format!("blocked UDP to {dest}: adversary.review includes \"network\" ({}) and the reviewer sees only connections through sandpit's proxy, so UDP stays closed; {NOT_RETRY}", a.origin),
        );
    }
    let host = Host::Ip(ip);
    let as_udp = |v: Verdict| Verdict {
        reason: v
            .reason
            .replacen("blocked connection to", "blocked UDP to", 1),
        ..v
    };
    // No program is known for a datagram: a host a program rule limits stays closed.
    let tcp = decide_connect_by(policy, &host, addr.port(), None, own);
    if !tcp.is_allowed() {
        return as_udp(tcp);
    }
    let resolved = check_resolved(policy, &host, addr.port(), ip, own);
    if !resolved.is_allowed() {
        return as_udp(resolved);
    }
    Verdict::new(
        Decision::Allow,
        Some(&net.mode.origin),
        format!("UDP to {dest} allowed: network.mode = \"unrestricted\" in {loc} opens public addresses"),
    )
}

/// The allow rule that makes `ip:port` a loopback service of the host: the network
/// is filtered, `ip` is a loopback address, an allow entry names it with this port
/// (`127.0.0.1:8080`, `[::1]:8080`, or a loopback name such as `localhost:11434`,
/// which stands for 127.0.0.1 and ::1), and no block entry covers it. Such a
/// destination is reached at the same address and port from inside the sandbox by
/// every client (the kernel layer relays it); every other loopback port is not.
pub fn loopback_service(
    policy: &Policy,
    ip: IpAddr,
    port: u16,
) -> Option<&crate::Rule<crate::HostPattern>> {
    let ip = canonical_ip(ip);
    let net = &policy.network;
    if net.mode.value != NetMode::Filtered || !ip.is_loopback() {
        return None;
    }
    if net
        .block
        .iter()
        .any(|b| b.value.matches(&Host::Ip(ip), port))
    {
        return None;
    }
    net.allow.iter().find(|r| {
        r.value.port == Some(port)
            && r.value.is_loopback()
            && match &r.value.host {
                HostMatch::Ip(a) => canonical_ip(*a) == ip,
                HostMatch::Exact(_) => is_localhost(ip),
                HostMatch::Subdomains(_) | HostMatch::Cidr(..) => false,
            }
    })
}

fn decide_exec(policy: &Policy, argv: &[String]) -> Verdict {
    let line = command_line(argv);
    let shown = argv.join(" ");
    if let Some(b) = policy.exec.block.iter().find(|r| r.value.matches(&line)) {
        return Verdict::new(
            Decision::Deny,
            Some(&b.origin),
            format!("blocked command `{shown}` ({}); {NOT_RETRY}", b.origin),
        );
    }
    if let Some(adv) = policy
        .adversary
        .as_ref()
        .filter(|a| a.review.contains(&ReviewEvent::Exec))
    {
        return Verdict::new(
            Decision::Review,
            Some(&adv.origin),
            format!("command `{shown}` goes to the adversary for review"),
        );
    }
    Verdict::new(
        Decision::Allow,
        None,
        format!("command `{shown}` matches no exec.block pattern"),
    )
}
