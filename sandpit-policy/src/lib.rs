//! sandpit's policy: one source for every layer.
//!
//! A policy is data. It is loaded from layered TOML sources ([`load`]), validated with
//! file:line:column diagnostics, canonicalized once, and consulted through one decision
//! function, [`decide`]. Each enforcement layer (kernel plan, Seatbelt profile,
//! interposer, proxy, shims) compiles or queries this same value. The crate has no
//! async runtime and no network code, so the injected library can link it.
#![forbid(unsafe_code)]

pub mod decide;
pub mod error;
pub mod glob;
pub mod host;
pub mod load;
pub mod matchers;
pub mod origin;
pub mod path;
pub mod runlater;
pub mod snapshot;
pub mod vars;

pub use decide::{
    askable, check_resolved, decide, decide_connect_by, decide_datagram, is_own, loopback_service,
    run_env, Decision, EnvTo, Program, Request, RunEnv, Verdict, PRIVATE_TMPFS,
};
pub use error::{Diagnostic, Error, Result};
pub use host::{canonical_host, parse_authority, Host, HostError, HostPattern};
pub use load::{load, LoadOptions, Source, BUILTIN_PROFILES, DEFAULT_POLICY};
pub use matchers::ExecPattern;
pub use origin::{Layer, Origin, Rule};
pub use path::Context;

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::PathBuf;

/// The effective policy after all layers, with every entry's origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub context: Context,
    pub files: Files,
    pub network: Network,
    pub exec: Exec,
    pub env: Env,
    pub adversary: Option<Adversary>,
    pub shims: Shims,
    pub limits: Limits,
    /// Switches that weaken isolation for the programs that need it (`[isolation]`).
    #[serde(default)]
    pub isolation: Isolation,
    /// Secrets the sandbox sees only as sentinels (`[credentials.NAME]`): the proxy
    /// puts the real value into requests to the secret's hosts alone.
    #[serde(default)]
    pub credentials: Vec<Credential>,
    /// Credentials a layer brought that this run does without, each with why: a
    /// source variable that is not set, a source file that does not exist (unless
    /// `required = true`), a profile's credential under `network.mode =
    /// "unrestricted"`. `sandpit plan`, `config` and `explain` name them; the run
    /// says so in one line each.
    #[serde(default)]
    pub credentials_skipped: Vec<SkippedCredential>,
    /// `[ssh]`: the SSH agent the sandbox gets.
    #[serde(default)]
    pub ssh: Ssh,
    /// Where the launcher exports every decision (`[telemetry]`). Never in the
    /// snapshot the sandbox reads (its headers may hold a collector's token).
    #[serde(skip)]
    pub telemetry: Telemetry,
    /// Learn mode (`sandpit run --learn`): the interposer records what it would deny
    /// instead of denying it. Set by the launcher alone, never by a config file, and
    /// carried to the interposer in the snapshot: the sandbox cannot turn it on.
    pub learn: bool,
    /// What each glob of the path lists matched when the policy was loaded: the
    /// Linux kernel layer's concrete paths come from this one walk. Never in the
    /// snapshot: the interposer matches a glob against each path it judges.
    #[serde(skip)]
    pub glob_matches: glob::Matches,
}

/// File rules. Every path is absolute, normalized and symlink-resolved where it exists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Files {
    /// Unreadable (and so unwritable).
    pub block_read: Vec<Rule<PathBuf>>,
    /// Readable carve-outs inside a `block_read` (the more specific rule wins).
    pub allow_read: Vec<Rule<PathBuf>>,
    /// Read-only, even inside a writable root (deny wins for writes).
    pub block_write: Vec<Rule<PathBuf>>,
    /// The only writable roots.
    pub allow_write: Vec<Rule<PathBuf>>,
    /// The agent's own files (its login): readable by the agent (the command sandpit
    /// starts, and `env.agent_programs`), never by the commands it spawns. Each is in
    /// `allow_read` too, with the same origin: the kernel layer cannot tell the two
    /// apart, the interposer can (see `Request::ReadSpawned`).
    #[serde(default)]
    pub agent_read: Vec<Rule<PathBuf>>,
    /// Host devices passed through into the sandbox's own minimal `/dev` (beside
    /// null, zero, full, random, urandom and tty): `/dev/kvm`, `/dev/dri`. Weaker
    /// isolation, so only the user's own layers may name one, never a project file.
    #[serde(default)]
    pub devices: Vec<Rule<PathBuf>>,
    /// Where the user accepted their home, or a directory holding it, as the
    /// workspace (`files.allow_home_workspace`, `--allow-home-workspace`); never a
    /// project file. `/` is refused whatever this says. The launcher checks it
    /// before the policy loads (the loader walks the workspace's globs). Not in the
    /// snapshot: nothing inside the sandbox asks.
    #[serde(skip)]
    pub allow_home_workspace: Option<Origin>,
    /// `files.real_dotenv = true`: the workspace's `.env` files are shown as they
    /// are, not as copies with their secrets replaced. Only the user's own layers
    /// may turn it on, never a project file.
    #[serde(default)]
    pub real_dotenv: Option<Origin>,
    /// Set by a run whose `.env` search stopped at its bound (never by a
    /// configuration file): a `.env` file in the workspace that the search did not
    /// find is refused for reading (`sandpit/src/scrub`, docs/run.md).
    #[serde(default)]
    pub dotenv_beyond: Option<DotenvBeyond>,
}

/// The `.env` files a run's bounded search found, and the rule that refuses the
/// others ([`Files::dotenv_beyond`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DotenvBeyond {
    pub origin: Origin,
    /// The files found (as found and with links resolved), sorted.
    pub seen: Vec<PathBuf>,
}

/// Whether a file named `name` is a `.env` file: `.env` or `.env.*`, but for
/// examples, samples, templates, dists and defaults (`.env.example`,
/// `.env.local.sample`), which hold no real values.
pub fn is_dotenv_name(name: &[u8]) -> bool {
    if name == b".env" {
        return true;
    }
    let Some(rest) = name.strip_prefix(b".env.") else {
        return false;
    };
    !rest.is_empty()
        && ![
            &b"example"[..],
            b"sample",
            b"template",
            b"dist",
            b"defaults",
        ]
        .iter()
        .any(|x| {
            rest == *x
                || (rest.len() > x.len()
                    && rest.ends_with(x)
                    && rest[rest.len() - x.len() - 1] == b'.')
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetMode {
    /// No network at all.
    Offline,
    /// Only hosts in `network.allow` (and not in `network.block`).
    Filtered,
    /// No host filtering; metadata and every other protection stay.
    Unrestricted,
}

impl NetMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetMode::Offline => "offline",
            NetMode::Filtered => "filtered",
            NetMode::Unrestricted => "unrestricted",
        }
    }
}

/// A static answer of sandpit's resolver: `name → addresses`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolveEntry {
    pub name: String,
    pub addrs: Vec<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    pub mode: Rule<NetMode>,
    pub allow: Vec<Rule<HostPattern>>,
    pub block: Vec<Rule<HostPattern>>,
    pub allow_local_binding: Rule<bool>,
    /// `network.ask_on_blocked_host`: when a terminal is there, ask the user about a
    /// host denied only because `allow` does not name it. Only the user's config (or
    /// the built-in default, on) may turn it on; a project file may turn it off.
    pub ask_on_blocked_host: Rule<bool>,
    /// `network.ask_timeout`: seconds a question waits for its answer before the
    /// connection is denied (default 30; a project file may only lower it).
    pub ask_timeout: Rule<u32>,
    pub resolve: Vec<Rule<ResolveEntry>>,
    /// `[network.tls]`: how the proxy verifies the servers it terminates TLS for.
    #[serde(default)]
    pub tls: Tls,
    /// `[network.http]`: method and path rules for plain HTTP and for the hosts
    /// whose TLS sandpit terminates.
    #[serde(default)]
    pub http: Http,
    /// `[[network.program]]`: hosts only the programs named may reach. They only
    /// restrict: a host must be allowed by the rules above as well.
    #[serde(default)]
    pub program: Vec<Rule<ProgramRule>>,
}

/// One `[[network.program]]` entry: `hosts` may be reached by `programs` only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramRule {
    /// Shown in decisions.
    pub name: String,
    /// A basename (`git`) or a glob over it, or an absolute path (`/usr/bin/git`) or a
    /// glob over the whole path (`*` crosses `/`).
    pub programs: Vec<String>,
    pub hosts: Vec<HostPattern>,
}

impl ProgramRule {
    /// Whether the entry limits `host:port`.
    pub fn names(&self, host: &Host, port: u16) -> bool {
        self.hosts.iter().any(|h| h.matches(host, port))
    }

    /// The entry of `programs` the executable `path` matches.
    pub fn program(&self, path: &[u8]) -> Option<&str> {
        let base = path.rsplit(|b| *b == b'/').next().unwrap_or(path);
        self.programs
            .iter()
            .find(|p| {
                if p.contains('/') {
                    matchers::glob_match_bytes(p.as_bytes(), path)
                } else {
                    matchers::glob_match_bytes(p.as_bytes(), base)
                }
            })
            .map(String::as_str)
    }
}

/// `[network.http]`: `"GET https://api.github.com/repos/OWNER/**"`. For a request to
/// a host some entry names (scheme, host and port agreeing): a `block` match denies,
/// then an `allow` match allows, and when `allow` names the host but no entry matches,
/// the request is denied. Hosts no entry names are decided by host alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Http {
    pub allow: Vec<Rule<HttpRule>>,
    pub block: Vec<Rule<HttpRule>>,
}

/// One `[network.http]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpRule {
    /// Upper-case method; `None` for `*` (any).
    pub method: Option<String>,
    /// `http` or `https`.
    pub scheme: String,
    /// Canonical host.
    pub host: String,
    /// `None`: the scheme's default port only (80, 443).
    pub port: Option<u16>,
    /// Path glob: `*` within a segment, `**` any number of whole segments.
    pub path: String,
}

impl HttpRule {
    /// The port this entry is for.
    pub fn port(&self) -> u16 {
        self.port
            .unwrap_or(if self.scheme == "https" { 443 } else { 80 })
    }
    /// Whether the entry is about `scheme://host:port`.
    pub fn names(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.scheme == scheme && self.host == host && self.port() == port
    }
    /// Whether `method` and the (decoded, query-free) `path` match.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        self.method.as_deref().is_none_or(|m| m == method) && path_glob(&self.path, path)
    }
}

/// Match a path against a glob whose `*` and `?` stay within a segment and whose
/// `**` segment stands for any number of whole segments.
pub fn path_glob(pattern: &str, path: &str) -> bool {
    fn go(p: &[&str], s: &[&str]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((&"**", rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some((seg, rest)) => match s.split_first() {
                Some((x, srest)) => matchers::glob_match(seg, x) && go(rest, srest),
                None => false,
            },
        }
    }
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    go(&p, &s)
}

/// `[network.tls]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tls {
    /// PEM files of roots trusted for upstream TLS besides the system's (a corporate
    /// CA; the tests' loopback CA). Used where the proxy terminates TLS (the hosts of
    /// `[credentials]`); every other connection is the client's own TLS.
    pub extra_roots: Vec<Rule<PathBuf>>,
}

/// Where a credential's real value comes from (`source`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CredentialSource {
    /// `env:NAME`: the launcher's variable (never passed into the sandbox).
    Env(String),
    /// `file:PATH`: the file's contents, without the trailing newline.
    File(PathBuf),
    /// `command:CMD`: what `sh -c CMD` prints, without the trailing newline.
    Command(String),
}

impl std::fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialSource::Env(n) => write!(f, "env:{n}"),
            CredentialSource::File(p) => write!(f, "file:{}", p.display()),
            CredentialSource::Command(c) => write!(f, "command:{c}"),
        }
    }
}

/// One `[credentials.NAME]` table. The sandbox's variable `env` holds a per-run
/// sentinel; the proxy replaces it with the value read from `source` in requests to
/// `hosts` (TLS terminated for those hosts alone) and denies it anywhere else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub name: String,
    pub env: String,
    pub source: CredentialSource,
    /// Canonical host names (any port).
    pub hosts: Vec<String>,
    /// `file`: a file the agent reads that holds the real value (an auth JSON): the
    /// sandbox sees it with the sentinel in its place.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// `body = true`: the sentinel is replaced in request bodies too (up to 1 MiB),
    /// not only in the request head. Off by default: a body is content the server
    /// may keep and show (an issue, a gist), and the real value would land there.
    #[serde(default)]
    pub body: bool,
    /// `required = true`: a run whose source cannot be read stops (exit 2, the
    /// table's file:line:col). Otherwise a source variable that is not set or a
    /// source file that does not exist only skips the credential, with one line.
    #[serde(default)]
    pub required: bool,
    /// The table's header.
    pub origin: Origin,
}

/// A credential the run does without ([`Policy::credentials_skipped`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedCredential {
    pub credential: Credential,
    /// Why, for people: "OPENAI_API_KEY is not set".
    pub why: String,
}

impl SkippedCredential {
    /// The one line a run, `sandpit plan` and `sandpit config` print for it.
    pub fn line(&self) -> String {
        let c = &self.credential;
        format!(
            "credentials.{} ({}) skipped: {}; {} is not bound to {}",
            c.name,
            c.origin.location(),
            self.why,
            c.env,
            c.hosts.join(", ")
        )
    }
}

/// The variables a run with `[credentials]` sets to point TLS clients at its
/// certificate authority: those that replace the default roots get a bundle (the
/// system's roots and the run's CA), `NODE_EXTRA_CA_CERTS`, which adds to them,
/// the CA alone. They name files, never a secret: every program keeps them, even
/// where `env.withhold` names them (`AWS_*` would take the AWS CLI's).
pub const CA_BUNDLE_ENV: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "NPM_CONFIG_CAFILE",
    "CARGO_HTTP_CAINFO",
    "AWS_CA_BUNDLE",
    "DENO_CERT",
    "NIX_SSL_CERT_FILE",
    "HEX_CACERTS_PATH",
    "BUNDLE_SSL_CA_CERT",
];
/// The variable that gets the run's CA alone (see [`CA_BUNDLE_ENV`]).
pub const CA_ADD_ENV: &str = "NODE_EXTRA_CA_CERTS";

/// Whether `name` is one of the variables a run with `[credentials]` points at its
/// certificate authority ([`CA_BUNDLE_ENV`], [`CA_ADD_ENV`]).
pub fn is_ca_env(name: &str) -> bool {
    name == CA_ADD_ENV || CA_BUNDLE_ENV.contains(&name)
}

impl Credential {
    /// The variable the real value is read from (`source = "env:NAME"`), if any.
    pub fn source_var(&self) -> Option<&str> {
        match &self.source {
            CredentialSource::Env(v) => Some(v),
            _ => None,
        }
    }
}

impl Policy {
    /// Whether `name` is one of the variables the run sets to its CA: only when
    /// some credential makes the run have one.
    pub fn sets_ca_env(&self, name: &str) -> bool {
        !self.credentials.is_empty() && is_ca_env(name)
    }

    /// The credential whose sandbox variable is `name`.
    pub fn credential_for_env(&self, name: &str) -> Option<&Credential> {
        self.credentials.iter().find(|c| c.env == name)
    }

    /// A skipped credential whose sandbox variable is `name`.
    pub fn skipped_for_env(&self, name: &str) -> Option<&SkippedCredential> {
        (self.credentials_skipped.iter()).find(|s| s.credential.env == name)
    }

    /// Set a credential aside for this run ([`Policy::credentials_skipped`]): the
    /// variables it made a sentinel or withheld go back to `env.withhold` and
    /// `env.agent`.
    pub fn skip_credential(&mut self, name: &str, why: String) {
        if let Some(i) = self.credentials.iter().position(|c| c.name == name) {
            let credential = self.credentials.remove(i);
            self.credentials_skipped
                .push(SkippedCredential { credential, why });
        }
    }

    /// An `https://` entry of `[network.http]` for a host whose TLS sandpit does not
    /// terminate (no credential names it): it could not be enforced.
    pub fn unenforceable_http(&self) -> Option<&Rule<HttpRule>> {
        self.network
            .http
            .allow
            .iter()
            .chain(&self.network.http.block)
            .find(|r| r.value.scheme == "https" && !self.inject_host(&r.value.host))
    }

    /// Whether the proxy terminates TLS for `host` (a canonical name): some
    /// credential names it.
    pub fn inject_host(&self, host: &str) -> bool {
        self.credentials
            .iter()
            .any(|c| c.hosts.iter().any(|h| h == host))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exec {
    pub block: Vec<Rule<ExecPattern>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Env {
    /// Globs of variable names that never enter the sandbox (removed before the
    /// command starts), except those in `agent`.
    pub withhold: Vec<Rule<String>>,
    /// Globs of withheld variables the agent itself needs (its API key): the
    /// command sandpit starts keeps them, through every exec in place (a shebang,
    /// `env`, a shell's `exec`), and so do the programs of `agent_programs` it
    /// starts; every other program it spawns goes without.
    pub agent: Vec<Rule<String>>,
    /// Programs that are the agent when an agent process starts them (the native
    /// binary behind a Node or Python wrapper): a basename, or a glob over the
    /// whole path (`*` crosses `/`). Only where the sandbox cannot write the
    /// program: one the sandbox could plant is never the agent.
    pub agent_programs: Vec<Rule<String>>,
    /// `env.set`: variables the command sandpit starts gets with these values
    /// (a profile turns off what its agent does that sandpit cannot hold: gemini's
    /// restart of itself under node). They hold no secret: every program keeps
    /// them, whatever `env.withhold` says. A later layer replaces an earlier one's
    /// value; a project file may set none.
    #[serde(default)]
    pub set: Vec<Rule<EnvSet>>,
}

/// One `env.set` variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvSet {
    pub name: String,
    pub value: String,
}

impl Env {
    /// The `env.set` rule that sets `name`, if any.
    pub fn set_by(&self, name: &str) -> Option<&Rule<EnvSet>> {
        self.set.iter().find(|r| r.value.name == name)
    }

    /// The `env.withhold` rule that names `name`, if any.
    pub fn withheld_by(&self, name: &str) -> Option<&Rule<String>> {
        self.withhold
            .iter()
            .find(|r| matchers::glob_match(&r.value, name))
    }

    /// Whether the variable `name` is withheld.
    pub fn is_withheld(&self, name: &str) -> bool {
        self.withheld_by(name).is_some()
    }

    /// The `env.agent` rule that keeps `name` for the agent, if any.
    pub fn agent_keeps(&self, name: &str) -> Option<&Rule<String>> {
        self.agent
            .iter()
            .find(|r| matchers::glob_match(&r.value, name))
    }

    /// The `env.agent_programs` entry `program` (an absolute path) matches.
    pub fn agent_program(&self, program: &[u8]) -> Option<&Rule<String>> {
        let base = program.rsplit(|b| *b == b'/').next().unwrap_or(program);
        self.agent_programs.iter().find(|r| {
            if r.value.contains('/') {
                matchers::glob_match_bytes(r.value.as_bytes(), program)
            } else {
                matchers::glob_match_bytes(r.value.as_bytes(), base)
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Anthropic,
    Openai,
    Gemini,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewEvent {
    Exec,
    Network,
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    Deny,
    Allow,
}

/// The LLM reviewer's settings (`[adversary]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adversary {
    pub provider: Provider,
    pub model: String,
    pub endpoint: Option<String>,
    pub api_key_env: Option<String>,
    pub rules: String,
    pub review: Vec<ReviewEvent>,
    pub timeout_ms: u64,
    pub on_error: OnError,
    pub cache: bool,
    pub origin: Origin,
}

/// What the sandboxed processes may hold at once (`[limits]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Processes and threads in the sandbox's user namespace at once (`RLIMIT_NPROC`
    /// there, which counts only that namespace's tasks): a fork bomb stops here.
    /// `0`: no limit.
    pub processes: Rule<u64>,
    /// Bytes of audit log one run writes; past them each further record is counted
    /// (by layer, action and decision), not written, and the run ends with one record
    /// per count. `0`: no limit.
    #[serde(default = "Limits::default_audit_bytes")]
    pub audit_bytes: Rule<u64>,
    /// Bytes the run's private `/tmp` and `/dev/shm` may hold, each: they live in
    /// memory, and the kernel's default would let each take half the machine's
    /// (`0`: that default).
    #[serde(default = "Limits::default_tmp_bytes")]
    pub tmp_bytes: Rule<u64>,
    /// Days a run's log is kept in `~/.sandpit/logs` (`0`: for good).
    #[serde(default = "Limits::default_logs_days")]
    pub logs_days: Rule<u64>,
    /// Bytes all kept logs may take; past them the oldest go (`0`: no limit).
    #[serde(default = "Limits::default_logs_bytes")]
    pub logs_bytes: Rule<u64>,
    /// Connections open through the proxy at once; past it a new one is refused
    /// (HTTP 503, SOCKS5 general failure) until one closes. `0`: no limit.
    #[serde(default = "Limits::default_connections")]
    pub connections: Rule<u64>,
    /// New connections per second through the proxy to any one host (a burst of as
    /// many is allowed); past it a new one is refused as above. `0`: no limit.
    #[serde(default = "Limits::default_connections_per_second")]
    pub connections_per_second: Rule<u64>,
    /// Bytes of memory the whole run may hold (its processes and its memory-backed
    /// `/tmp` and `/dev/shm`): a cgroup v2 `memory.max` where this user may create
    /// one (delegated), else each process's data (`RLIMIT_DATA`), reported as
    /// weaker. `0`: no limit.
    #[serde(default = "Limits::default_memory")]
    pub memory: Rule<u64>,
    /// Bytes of disk the package cache sandpit mounts for the workspace may hold
    /// (`~/.cache/sandpit/<workspace>-<hash>`): a cache at or past it stops the next
    /// run before it starts, and no file the sandbox writes (cache, workspace or
    /// scratch on disk) may grow past it (`RLIMIT_FSIZE`: `EFBIG`). `0`: no limit.
    #[serde(default = "Limits::default_cache_bytes")]
    pub cache_bytes: Rule<u64>,
    /// CPU the launcher may spend on what the sandbox makes it do unasked — the
    /// audit socket's records and the kernel layer's refusal reports — in percent
    /// of one core. Past it the launcher answers later (the notifier lets the
    /// stopped call wait, the audit reader lets the senders block): the workload
    /// slows, no record is dropped, and the run says so at its end. `0`: no limit.
    #[serde(default = "Limits::default_launcher_cpu")]
    pub launcher_cpu: Rule<u64>,
}

impl Limits {
    /// The built-in default of `limits.processes`.
    pub const PROCESSES: u64 = 8192;
    /// The smallest `limits.processes` other than 0: below it ordinary commands
    /// (a shell running a pipeline) could not start.
    pub const MIN_PROCESSES: u64 = 16;
    /// The built-in default of `limits.audit_bytes`: 64 MiB.
    pub const AUDIT_BYTES: u64 = 64 << 20;
    /// The smallest `limits.audit_bytes` other than 0: a run's own start and exit
    /// records fit many times over.
    pub const MIN_AUDIT_BYTES: u64 = 16 << 10;
    /// The built-in default of `limits.tmp_bytes`: 2 GiB.
    pub const TMP_BYTES: u64 = 2 << 30;
    /// The smallest `limits.tmp_bytes` other than 0.
    pub const MIN_TMP_BYTES: u64 = 1 << 20;
    /// The built-in default of `limits.logs_days`.
    pub const LOGS_DAYS: u64 = 30;
    /// The built-in default of `limits.logs_bytes`: 1 GiB.
    pub const LOGS_BYTES: u64 = 1 << 30;
    /// The built-in default of `limits.connections`.
    pub const CONNECTIONS: u64 = 512;
    /// The smallest `limits.connections` other than 0: a browser-like client opens
    /// a few at once.
    pub const MIN_CONNECTIONS: u64 = 16;
    /// The built-in default of `limits.connections_per_second`.
    pub const CONNECTIONS_PER_SECOND: u64 = 200;
    /// The smallest `limits.connections_per_second` other than 0.
    pub const MIN_CONNECTIONS_PER_SECOND: u64 = 10;
    /// The built-in default of `limits.memory`: 8 GiB.
    pub const MEMORY: u64 = 8 << 30;
    /// The smallest `limits.memory` other than 0: a shell and a Python start well
    /// within it.
    pub const MIN_MEMORY: u64 = 64 << 20;
    /// The built-in default of `limits.cache_bytes`: 16 GiB.
    pub const CACHE_BYTES: u64 = 16 << 30;
    /// The smallest `limits.cache_bytes` other than 0.
    pub const MIN_CACHE_BYTES: u64 = 1 << 20;
    /// The built-in default of `limits.launcher_cpu`: half of one core. A flood
    /// of 100k denied opens took 42–49% of a core (debug build), an open-heavy
    /// `--kernel-only` build less: ordinary runs stay under it, and a flood
    /// leaves the rest of the machine at least half a core more than it would.
    pub const LAUNCHER_CPU: u64 = 50;
    /// The smallest `limits.launcher_cpu` other than 0: below it one report's
    /// own cost would make the callers wait whole scheduler ticks.
    pub const MIN_LAUNCHER_CPU: u64 = 5;

    /// `key`'s built-in default `v`.
    fn builtin(key: &str, v: u64) -> Rule<u64> {
        Rule {
            value: v,
            origin: Origin::builtin(key, &v.to_string()),
        }
    }
    fn default_audit_bytes() -> Rule<u64> {
        Limits::builtin("limits.audit_bytes", Limits::AUDIT_BYTES)
    }
    fn default_tmp_bytes() -> Rule<u64> {
        Limits::builtin("limits.tmp_bytes", Limits::TMP_BYTES)
    }
    fn default_logs_days() -> Rule<u64> {
        Limits::builtin("limits.logs_days", Limits::LOGS_DAYS)
    }
    fn default_logs_bytes() -> Rule<u64> {
        Limits::builtin("limits.logs_bytes", Limits::LOGS_BYTES)
    }
    fn default_connections() -> Rule<u64> {
        Limits::builtin("limits.connections", Limits::CONNECTIONS)
    }
    fn default_connections_per_second() -> Rule<u64> {
        Limits::builtin(
            "limits.connections_per_second",
            Limits::CONNECTIONS_PER_SECOND,
        )
    }
    fn default_memory() -> Rule<u64> {
        Limits::builtin("limits.memory", Limits::MEMORY)
    }
    fn default_cache_bytes() -> Rule<u64> {
        Limits::builtin("limits.cache_bytes", Limits::CACHE_BYTES)
    }
    fn default_launcher_cpu() -> Rule<u64> {
        Limits::builtin("limits.launcher_cpu", Limits::LAUNCHER_CPU)
    }
}

/// Every limit at its built-in default, each with that as its origin.
impl Default for Limits {
    fn default() -> Limits {
        Limits {
            processes: Limits::builtin("limits.processes", Limits::PROCESSES),
            audit_bytes: Limits::default_audit_bytes(),
            tmp_bytes: Limits::default_tmp_bytes(),
            logs_days: Limits::default_logs_days(),
            logs_bytes: Limits::default_logs_bytes(),
            connections: Limits::default_connections(),
            connections_per_second: Limits::default_connections_per_second(),
            memory: Limits::default_memory(),
            cache_bytes: Limits::default_cache_bytes(),
            launcher_cpu: Limits::default_launcher_cpu(),
        }
    }
}

/// Weaker isolation, asked for by name (`[isolation]`). Each is off by default and
/// only the user's own layers (built-in profiles, `~/.sandpit/config.toml`, flags)
/// may turn one on: a project file that names one is an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolation {
    /// Host Unix sockets (pathname sockets, by path) the sandbox may connect to: a
    /// Docker socket, the SSH agent. Every other socket bound on the host is out of
    /// reach; the run's own sockets under its writable roots are always reachable.
    pub unix_sockets: Vec<Rule<PathBuf>>,
    /// Linux: new user namespaces (and the namespaces and `chroot` a sandboxing
    /// program makes inside one), for Chromium's and Electron's own sandbox. Mounts
    /// stay refused: Landlock refuses them to every confined process.
    pub nested_user_namespaces: Option<Origin>,
    /// macOS: the certificate trust daemon (`com.apple.trustd`), which Go programs
    /// need to verify TLS certificates (it also answers for every app's trust
    /// settings).
    pub macos_trustd: Option<Origin>,
}

impl Isolation {
    pub fn nested_user_namespaces(&self) -> bool {
        self.nested_user_namespaces.is_some()
    }
    pub fn macos_trustd(&self) -> bool {
        self.macos_trustd.is_some()
    }
}

/// Export of the run's decisions (`[telemetry]`). Only the user's own layers may
/// set it: a project file that could would send the user's audit records where the
/// project says.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Telemetry {
    /// The OTLP/HTTP endpoint (`http://127.0.0.1:4318`): logs go to
    /// `<endpoint>/v1/logs`, or to the endpoint itself when it already ends so.
    pub otlp_endpoint: Option<Rule<String>>,
    /// Extra HTTP headers of each export request (a collector's token).
    pub headers: Vec<(String, String)>,
}

/// Header values are never shown (a token).
impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Telemetry")
            .field("otlp_endpoint", &self.otlp_endpoint)
            .field("headers", &names)
            .finish()
    }
}

/// `[ssh]`: whether the sandbox gets the launcher's filtering SSH agent
/// (`sandpit/src/sshagent/`), which signs only logins to known, allowed hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ssh {
    /// `ssh.agent`; `None`: on when the launcher has an agent (`SSH_AUTH_SOCK`)
    /// and the network policy allows some host.
    pub agent: Option<Rule<SshAgent>>,
}

/// `ssh.agent`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SshAgent {
    /// The filtering agent, whenever the launcher has an agent.
    Filtered,
    /// No agent inside.
    Off,
}

impl SshAgent {
    pub fn as_str(self) -> &'static str {
        match self {
            SshAgent::Filtered => "filtered",
            SshAgent::Off => "off",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shims {
    /// Install PATH shims even without `--shims`.
    pub enabled: bool,
    /// Extra commands to shim beyond the built-in network tools.
    pub extra: Vec<Rule<String>>,
}
