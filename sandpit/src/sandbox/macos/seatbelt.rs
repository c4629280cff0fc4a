//! A pure compiler from sandpit's file and network policy to a Seatbelt profile.
//!
//! The output is SBPL text plus a list of parameters. No path ever appears in the
//! text: every path is a parameter (`(subpath (param "WRITABLE_ROOT_0"))`) whose value
//! is handed to `sandbox_init_with_parameters` or `sandbox-exec -D`, so a path made of
//! quotes, parentheses or newlines cannot change what the profile means. The only
//! values written into the text are the proxy port (a `u16`) and fixed names.
//!
//! Seatbelt applies the *last* matching rule, so the order of the emitted rules is the
//! semantics: every deny comes after the allow it overrides.
//!
//! - reads: everything is readable, then `block_read` and `allow_read` are emitted
//!   from the shortest path to the longest, a deny after an allow of the same path:
//!   the most specific rule wins, a tie goes to the deny;
//! - writes: only under `allow_write`, then every `block_write`, `block_read` and
//!   protected path is denied (deny always wins for writes), hard links of them are
//!   denied, and the directories above a protected path inside a writable root can
//!   be neither removed, renamed away nor created (by rename or symlink), whether
//!   they exist or not;
//! - devices: after the file rules, everything under `/dev` is denied and only the
//!   devices programs need (null, zero, random, terminals, `/dev/fd`) and those of
//!   `files.devices` are opened again, so no read or write rule above reaches a disk;
//! - network: outbound only to the proxy port (and sandpit's DNS responder) on
//!   localhost; binding and inbound on
//!   localhost only when the policy allows local binding; Unix sockets only under
//!   the writable roots, sandpit's own, and those of `isolation.unix_sockets`;
//! - last: LaunchServices, Apple Events and the programs that run code outside the
//!   sandbox (`open`, `osascript`, `launchctl`, …) are denied after everything else.
#![forbid(unsafe_code)]
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use super::{Error, Result};

/// The commented base profile every compiled profile starts with.
pub const BASE: &str = include_str!("../../../../profiles/seatbelt-base.sbpl");

/// The commented `/dev` rules, emitted after the compiled file rules: deny all of
/// `/dev`, then open the devices every program needs.
pub const DEV: &str = include_str!("../../../../profiles/seatbelt-dev.sbpl");

/// The GUI allowance (window server, pasteboard, fonts, text input, files the user
/// picks in the open panel), emitted only for wrapped apps and `--gui`.
pub const GUI: &str = include_str!("../../../../profiles/seatbelt-gui.sbpl");

/// A desktop app's own data, opened for reading and writing with the GUI allowance:
/// its container, preferences, caches and saved window state, all named by its
/// bundle identifier under the user's home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    /// `CFBundleIdentifier` of the app (checked by [`App::new`]).
    id: String,
    /// The home directory the app's `Library` is in.
    home: PathBuf,
}

impl App {
    /// The app `id` of the user whose home is `home`. An identifier is what
    /// Apple allows in one (letters, digits, `.`, `-`, `_`), no empty part: it
    /// becomes part of paths and a preference domain.
    pub fn new(id: &str, home: &Path) -> Result<App> {
        let ok = !id.is_empty()
            && id.len() <= 255
            && id.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if !ok {
            return Err(Error::BadAppId { id: id.to_string() });
        }
        Ok(App {
            id: id.to_string(),
            home: home.to_path_buf(),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The directories (container, caches, saved state) and the preferences file.
    fn places(&self) -> ([PathBuf; 3], PathBuf) {
        let lib = self.home.join("Library");
        (
            [
                lib.join("Containers").join(&self.id),
                lib.join("Caches").join(&self.id),
                lib.join("Saved Application State")
                    .join(format!("{}.savedState", self.id)),
            ],
            lib.join("Preferences").join(format!("{}.plist", self.id)),
        )
    }
}

/// The GUI allowance of a run: the fixed set of `profiles/seatbelt-gui.sbpl`, and
/// the app's own data when the program belongs to an app bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gui {
    pub app: Option<App>,
}

/// What the network layer of the profile allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// No network at all, not even the proxy.
    Offline,
    /// Outbound TCP only to sandpit's proxy on localhost at this port: the
    /// network modes "filtered" and "unrestricted" alike (the proxy lifts host
    /// filtering for the latter and keeps every non-public address closed).
    Proxy { port: u16 },
}

/// The compiler's input: the parts of the policy Seatbelt can express. All paths are
/// absolute; [`compile`] canonicalises their spelling for macOS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// Denied for reading and writing (and hard-linking).
    pub block_read: Vec<PathBuf>,
    /// Readable again when inside a `block_read` (the most specific rule wins).
    pub allow_read: Vec<PathBuf>,
    /// The only places writes may happen.
    pub allow_write: Vec<PathBuf>,
    /// Never writable, even inside `allow_write`.
    pub block_write: Vec<PathBuf>,
    /// Paths that would run code outside the sandbox later (`.git/hooks`,
    /// `.sandpit.toml`, agent hook files, sandpit's own state), denied even when
    /// absent. Compiled like `block_write`: every unwritable path inside a writable
    /// root has its directories guarded against rename and symlink tricks.
    pub protected: Vec<PathBuf>,
    pub network: Network,
    /// Allow binding and accepting on localhost.
    pub allow_local_binding: bool,
    /// Host devices opened again inside the restricted `/dev` (`files.devices`):
    /// readable, writable (data only) and ioctl-able, a directory with what it holds.
    pub devices: Vec<PathBuf>,
    /// Allow the `com.apple.trustd.agent` look-up that Go's crypto/x509 needs to verify
    /// TLS certificates on macOS (`isolation.macos_trustd`). trustd can reach the
    /// network on the process's behalf (OCSP, CRL fetches), and it answers for every
    /// app's trust settings: weaker isolation.
    pub trustd: bool,
    /// Host Unix sockets the sandbox may connect to, by exact path
    /// (`isolation.unix_sockets`): the Docker socket, the SSH agent. Reachable even
    /// inside a `block_read` directory, whose files stay unreadable.
    pub unix_sockets: Vec<PathBuf>,
    /// sandpit's control socket (shim re-entry, exec review), reachable from inside.
    pub control_socket: Option<PathBuf>,
    /// Datagram sockets the layers inside report to (the interposer's audit socket),
    /// reachable from inside.
    pub report_sockets: Vec<PathBuf>,
    /// The GUI allowance: only for wrapped apps (`sandpit wrap`) and `--gui`.
    pub gui: Option<Gui>,
    /// sandpit's DNS responder on localhost (DNS over TCP), which the interposer's
    /// resolver hooks ask: reachable with the proxy, never offline.
    pub dns_port: Option<u16>,
}

impl Default for Input {
    fn default() -> Input {
        Input {
            block_read: vec![],
            allow_read: vec![],
            allow_write: vec![],
            block_write: vec![],
            protected: vec![],
            network: Network::Offline,
            allow_local_binding: false,
            devices: vec![],
            trustd: false,
            unix_sockets: vec![],
            control_socket: None,
            report_sockets: vec![],
            gui: None,
            dns_port: None,
        }
    }
}

impl Input {
    /// The Seatbelt input for `policy`, with sandpit's proxy listening on localhost at
    /// `proxy_port`. Filtered and unrestricted networks both go through the proxy
    /// (unrestricted still denies metadata addresses there); offline has no network.
    /// Every `block_write` entry is treated as protected (guarded against rename and
    /// symlink tricks when it lies inside a writable root), and sandpit's state
    /// directory is protected whatever the policy says. `[isolation]` gives the
    /// trustd switch and the host Unix sockets; `files.devices` the devices, except
    /// those the policy refuses to read (as on Linux). The control and report sockets
    /// are set by the launcher once it has bound them ([`Input::bind`]).
    pub fn from_policy(policy: &sandpit_policy::Policy, proxy_port: u16) -> Input {
        let values = |rules: &[sandpit_policy::Rule<PathBuf>]| -> Vec<PathBuf> {
            rules.iter().map(|r| r.value.clone()).collect()
        };
        let files = &policy.files;
        let mut protected = values(&files.block_write);
        if !policy.context.state_dir.as_os_str().is_empty() {
            protected.push(policy.context.state_dir.clone());
        }
        let network = match policy.network.mode.value {
            sandpit_policy::NetMode::Offline => Network::Offline,
            sandpit_policy::NetMode::Filtered | sandpit_policy::NetMode::Unrestricted => {
                Network::Proxy { port: proxy_port }
            }
        };
        Input {
            // A block that a later layer carves out whole is not compiled (as in the
            // Linux plan): the profile agrees with `decide`.
            block_read: files
                .block_read
                .iter()
                .map(|r| r.value.clone())
                .filter(|p| {
                    sandpit_policy::decide(policy, &sandpit_policy::Request::Read(p)).is_denied()
                })
                .collect(),
            allow_read: values(&files.allow_read),
            allow_write: values(&files.allow_write),
            block_write: vec![],
            protected,
            network,
            allow_local_binding: policy.network.allow_local_binding.value,
            devices: files
                .devices
                .iter()
                .map(|r| r.value.clone())
                .filter(|p| {
                    !sandpit_policy::decide(policy, &sandpit_policy::Request::Read(p)).is_denied()
                })
                .collect(),
            trustd: policy.isolation.macos_trustd(),
            unix_sockets: values(&policy.isolation.unix_sockets),
            control_socket: None,
            report_sockets: vec![],
            gui: None,
            dns_port: None,
        }
    }

    /// The run's services, once the launcher has bound them: the proxy's and the
    /// DNS responder's loopback ports (only where the plan sends connections through
    /// the proxy), sandpit's control socket, and the datagram sockets the layers
    /// inside report to. A planned proxy given no port stays at port 0, which
    /// [`compile`] refuses: no profile without the proxy the plan promised.
    pub fn bind(
        mut self,
        proxy: Option<u16>,
        dns: Option<u16>,
        control: Option<PathBuf>,
        reports: impl IntoIterator<Item = PathBuf>,
    ) -> Input {
        if let Network::Proxy { port } = &mut self.network {
            *port = proxy.unwrap_or(0);
            self.dns_port = dns;
        }
        self.control_socket = control;
        self.report_sockets.extend(reports);
        self
    }
}

/// A compiled profile: SBPL text and the parameters it refers to, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub sbpl: String,
    pub params: Vec<(String, String)>,
}

impl Profile {
    /// The argument vector of the `/usr/bin/sandbox-exec` fallback, before the command.
    pub fn sandbox_exec_args(&self) -> Vec<String> {
        let mut args = vec!["-p".to_string(), self.sbpl.clone()];
        for (k, v) in &self.params {
            args.push(format!("-D{k}={v}"));
        }
        args
    }
}

/// Programs that hand work to a process outside the sandbox (LaunchServices, Apple
/// Events, launchd). Their exec is denied; the mach services behind them stay denied
/// by `(deny default)` and are named again at the end of the profile.
pub const HOST_LAUNCHERS: &[&str] = &[
    "/usr/bin/open",
    "/usr/bin/osascript",
    "/usr/bin/osacompile",
    "/usr/bin/automator",
    "/usr/bin/shortcuts",
    "/usr/bin/lsappinfo",
    "/bin/launchctl",
];

/// Mach services that run code or open documents outside the sandbox.
pub const HOST_LAUNCH_SERVICES: &[&str] = &[
    "com.apple.coreservices.launchservicesd",
    "com.apple.coreservices.appleevents",
    "com.apple.lsd.mapdb",
    "com.apple.lsd.modifydb",
    "com.apple.lsd.open",
];

/// Rewrite an absolute path the way Seatbelt sees it on macOS: `.` and empty
/// components removed, and the top-level symlinks `/tmp`, `/var`, `/etc` replaced by
/// their `/private/…` targets. A rule spelled otherwise silently matches nothing.
/// Rejects relative paths, `..` and non-UTF-8 paths.
pub fn canonical(path: &Path) -> Result<String> {
    if !path.is_absolute() {
        return Err(Error::RelativePath {
            path: path.to_path_buf(),
        });
    }
    let mut parts: Vec<&str> = vec![];
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Prefix(_) | Component::ParentDir => {
                return Err(Error::DotDot {
                    path: path.to_path_buf(),
                })
            }
            Component::Normal(s) => match s.to_str() {
                Some(s) => parts.push(s),
                None => {
                    return Err(Error::NotUtf8 {
                        path: path.to_path_buf(),
                    })
                }
            },
        }
    }
    let mut out = String::new();
    if let Some(first) = parts.first() {
        if matches!(*first, "tmp" | "var" | "etc") {
            out.push_str("/private");
        }
    }
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

fn depth(p: &str) -> usize {
    p.split('/').filter(|s| !s.is_empty()).count()
}

/// `inner` is `outer` or below it, component-wise.
fn within(inner: &str, outer: &str) -> bool {
    outer == "/"
        || inner == outer
        || (inner.starts_with(outer) && inner.as_bytes().get(outer.len()) == Some(&b'/'))
}

fn canonical_set(paths: &[PathBuf]) -> Result<Vec<String>> {
    let mut set = BTreeSet::new();
    for p in paths {
        set.insert(canonical(p)?);
    }
    Ok(set.into_iter().collect())
}

/// Builds the text and the parameter list together so a name always has a value.
struct Emitter {
    sbpl: String,
    params: Vec<(String, String)>,
    counters: BTreeMap<&'static str, usize>,
}

/// A glob (`sandpit_policy::glob`) as a profile's regular expression for every path
/// it matches and everything beneath, as `subpath` holds for a path: `*` and `?`
/// within one component, `**` any number of whole components, every other
/// character literal.
fn glob_regex(p: &str) -> Result<String> {
    if p.contains('"') || p.chars().any(char::is_control) {
        return Err(Error::GlobQuote {
            path: PathBuf::from(p),
        });
    }
    let mut re = String::from("^");
    for c in p.split('/').filter(|c| !c.is_empty()) {
        if c == "**" {
            re.push_str("(/[^/]+)*");
            continue;
        }
        re.push('/');
        for ch in c.chars() {
            match ch {
                '*' => re.push_str("[^/]*"),
                '?' => re.push_str("[^/]"),
                '\\' | '.' | '+' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' => {
                    re.push('\\');
                    re.push(ch);
                }
                _ => re.push(ch),
            }
        }
    }
    re.push_str("(/.*)?$");
    Ok(re)
}

fn is_glob(p: &str) -> bool {
    sandpit_policy::glob::is_glob(p.as_bytes())
}

impl Emitter {
    /// The filter for `p` and what lies beneath: `(subpath (param …))`, or for a
    /// glob its regular expression.
    fn beneath(&mut self, prefix: &'static str, p: &str) -> Result<String> {
        if is_glob(p) {
            return Ok(format!("(regex #\"{}\")", glob_regex(p)?));
        }
        Ok(format!("(subpath {})", self.param(prefix, p)))
    }

    fn param(&mut self, prefix: &'static str, value: &str) -> String {
        let n = self.counters.entry(prefix).or_insert(0);
        let name = format!("{prefix}_{n}");
        *n += 1;
        self.params.push((name.clone(), value.to_string()));
        format!("(param \"{name}\")")
    }
    fn line(&mut self, s: &str) {
        self.sbpl.push_str(s);
        self.sbpl.push('\n');
    }
}

/// The GUI allowance: the fixed part, then the app's own data as parameters.
fn emit_gui(e: &mut Emitter, gui: &Gui) -> Result<()> {
    e.line("\n; --- GUI allowance (profiles/seatbelt-gui.sbpl): wrapped apps and --gui only");
    e.sbpl.push_str(GUI);
    let Some(app) = &gui.app else {
        e.line("; no app bundle: no container or preferences of its own");
        return Ok(());
    };
    let (dirs, prefs) = app.places();
    e.line("; the app's own container, caches and saved window state (by bundle identifier)");
    for d in &dirs {
        // Always a parameter, never a glob: a home with `[` in it is just a path.
        let r = e.param("APP_DATA", &canonical(d)?);
        e.line(&format!("(allow file-read* file-write* (subpath {r}))"));
    }
    e.line("; its preferences: the file, and writes through cfprefsd to its domain only");
    let r = e.param("APP_PREFERENCES", &canonical(&prefs)?);
    e.line(&format!("(allow file-read* file-write* (literal {r}))"));
    let r = e.param("APP_ID", &app.id);
    e.line(&format!(
        "(allow user-preference-write (preference-domain {r}))"
    ));
    Ok(())
}

/// Compile the policy into a profile. Pure: no file system access, no environment.
pub fn compile(input: &Input) -> Result<Profile> {
    let block_read = canonical_set(&input.block_read)?;
    let allow_read = canonical_set(&input.allow_read)?;
    let allow_write = canonical_set(&input.allow_write)?;
    let protected = canonical_set(&input.protected)?;
    let mut write_deny: BTreeSet<String> = canonical_set(&input.block_write)?.into_iter().collect();
    write_deny.extend(block_read.iter().cloned());
    write_deny.extend(protected.iter().cloned());
    let control_socket = match &input.control_socket {
        Some(p) => Some(canonical(p)?),
        None => None,
    };
    let report_sockets = input
        .report_sockets
        .iter()
        .map(|p| canonical(p))
        .collect::<Result<Vec<_>>>()?;
    let devices = canonical_set(&input.devices)?;
    // Opened after every file rule: anything but a device would escape them.
    if let Some(d) = devices.iter().find(|d| !within(d, "/dev") || *d == "/dev") {
        return Err(Error::NotADevice {
            path: PathBuf::from(d),
        });
    }
    let unix_sockets = canonical_set(&input.unix_sockets)?;

    let mut e = Emitter {
        sbpl: String::with_capacity(BASE.len() + 4096),
        params: vec![],
        counters: BTreeMap::new(),
    };
    e.sbpl.push_str(BASE);
    // Before every compiled file rule, so that a read or write denial of the policy
    // still wins over a file the user picks and over the app's own data.
    if let Some(gui) = &input.gui {
        emit_gui(&mut e, gui)?;
    }

    // Reads: the most specific rule wins, a deny wins a tie.
    e.line("\n; --- reads (compiled): all, then block_read/allow_read from short to long");
    e.line("(allow file-read*)");
    let mut reads: Vec<(usize, bool, &str)> = block_read
        .iter()
        .map(|p| (depth(p), true, p.as_str()))
        .chain(allow_read.iter().map(|p| (depth(p), false, p.as_str())))
        .collect();
    // (depth, allow before deny, path): allows sort first at equal depth.
    reads.sort();
    for (_, deny, p) in reads {
        if deny {
            let f = e.beneath("READ_DENY", p)?;
            e.line(&format!("(deny file-read* {f})"));
        } else {
            let f = e.beneath("READ_ALLOW", p)?;
            e.line(&format!("(allow file-read* {f})"));
        }
    }

    // Writes: only under the writable roots; every deny after every allow.
    e.line("\n; --- writes (compiled): writable roots, then every denial after them");
    let mut roots_by_depth: Vec<&String> = allow_write.iter().collect();
    roots_by_depth.sort_by_key(|p| (depth(p), p.as_str()));
    for p in &roots_by_depth {
        let f = e.beneath("WRITABLE_ROOT", p)?;
        e.line(&format!("(allow file-write* {f})"));
    }
    let mut denies: Vec<&String> = write_deny.iter().collect();
    denies.sort_by_key(|p| (depth(p), p.as_str()));
    for p in &denies {
        let f = e.beneath("WRITE_DENY", p)?;
        // A hard link would give the file a second, writable (or readable) name.
        e.line(&format!("(deny file-write* file-link {f})"));
    }
    // Directories between a writable root and a protected path inside it: renaming
    // one away and back, or creating it by renaming a prepared directory (or a
    // symlink, or a `.git` gitdir file) into its place, would move the protected path
    // out from under its rule. Emitted whether they exist or not; the cost is that
    // an absent one cannot be created (`git init` needs `.git/hooks`, which is
    // protected anyway).
    // The same holds for a `block_read` path inside a writable root: renaming its
    // directory away would make the secret readable under the new name.
    let mut guards = BTreeSet::new();
    for p in &write_deny {
        // A glob's directories from its first wildcard on are not known: the
        // literal part and its parents are guarded.
        let (p, from): (String, bool) = if is_glob(p) {
            let lit = sandpit_policy::glob::literal_prefix(Path::new(p.as_str()));
            (lit.to_string_lossy().into_owned(), true)
        } else {
            (p.clone(), false)
        };
        let p = &p;
        for root in &allow_write {
            if within(p, root) && (p != root || from) {
                if from && p != root {
                    guards.insert(p.clone());
                }
                let mut a = Path::new(p.as_str()).parent();
                while let Some(dir) = a {
                    let Some(d) = dir.to_str() else { break };
                    if !within(d, root) {
                        break;
                    }
                    guards.insert(d.to_string());
                    a = dir.parent();
                }
            }
        }
    }
    let mut guards: Vec<String> = guards.into_iter().collect();
    guards.sort_by_key(|p| (depth(p), p.clone()));
    for g in &guards {
        let r = e.param("PROTECTED_PARENT", g);
        e.line(&format!(
            "(deny file-write-unlink file-write-create (literal {r}))"
        ));
    }

    // Devices: after every file rule above, so neither `(allow file-read*)` nor a
    // writable root above /dev re-opens a disk.
    e.line("\n; --- /dev: denied but for what programs need (profiles/seatbelt-dev.sbpl)");
    e.sbpl.push_str(DEV);
    for (i, dev) in devices.iter().enumerate() {
        if i == 0 {
            e.line("; files.devices: host devices passed through by the user's own config");
        }
        let r = e.param("DEVICE", dev);
        e.line(&format!(
            "(allow file-read* file-write-data file-ioctl (subpath {r}))"
        ));
    }

    // Network.
    e.line("\n; --- network (compiled)");
    // Recent macOS checks socket creation itself (`system-socket`); only TCP
    // sockets are ever created for the network, so UDP (DNS, QUIC) goes nowhere.
    const TCP_SOCKETS: &str = "(allow system-socket (require-all (require-any (socket-domain AF_INET) (socket-domain AF_INET6)) (socket-type SOCK_STREAM)))";
    match input.network {
        Network::Offline => {
            e.line("; offline: no network-outbound rule at all");
        }
        Network::Proxy { port } => {
            if port == 0 {
                return Err(Error::ProxyPortZero);
            }
            e.line("; every TCP connection goes through sandpit's proxy, which decides by domain");
            e.line(TCP_SOCKETS);
            // `port` is a u16: formatting it cannot inject text.
            e.line(&format!(
                "(allow network-outbound (remote tcp \"localhost:{port}\"))"
            ));
            if let Some(dns) = input.dns_port {
                if dns == 0 {
                    return Err(Error::ProxyPortZero);
                }
                e.line("; sandpit's DNS responder: the interposer's resolver hooks ask it, by the policy");
                e.line(&format!(
                    "(allow network-outbound (remote tcp \"localhost:{dns}\"))"
                ));
            }
        }
    }
    if input.allow_local_binding {
        e.line("; allow_local_binding: servers may listen and accept on localhost only");
        if input.network == Network::Offline {
            e.line(TCP_SOCKETS);
        }
        e.line("(allow network-bind (local ip \"localhost:*\"))");
        e.line("(allow network-inbound (local ip \"localhost:*\"))");
    }
    if let Some(sock) = &control_socket {
        e.line("; sandpit's control socket: shims re-enter sandpit and ask for review here");
        let r = e.param("CONTROL_SOCKET", sock);
        e.line(&format!(
            "(allow network-outbound (remote unix-socket (path-literal {r})))"
        ));
    }
    for (i, sock) in report_sockets.iter().enumerate() {
        if i == 0 {
            e.line("; sandpit's audit socket: the interposer reports its denials here");
        }
        let r = e.param("REPORT_SOCKET", sock);
        e.line(&format!(
            "(allow network-outbound (remote unix-socket (path-literal {r})))"
        ));
    }
    // Local IPC between processes of the run, through sockets under writable roots.
    for root in &roots_by_depth {
        let f = e.beneath("SOCKET_ROOT", root)?;
        e.line(&format!(
            "(allow network-outbound (remote unix-socket {f}))"
        ));
    }
    // Host sockets by exact path. Nothing denies network-outbound anywhere in the
    // profile, so this allow is the last matching rule for connect() to the path even
    // inside a `block_read` directory, whose `(deny file-read*)` is another operation.
    for (i, sock) in unix_sockets.iter().enumerate() {
        if i == 0 {
            e.line("; isolation.unix_sockets: host sockets the user lets the sandbox connect to");
        }
        // The socket, or those beneath a directory or matching a glob, as `decide`.
        let f = e.beneath("UNIX_SOCKET", sock)?;
        e.line(&format!(
            "(allow network-outbound (remote unix-socket {f}))"
        ));
    }
    if input.trustd {
        e.line("; isolation.macos_trustd: Go's crypto/x509 verifies certificates through trustd,");
        e.line("; which may fetch OCSP/CRL data from the network on the process's behalf");
        e.line("(allow mach-lookup (global-name \"com.apple.trustd.agent\"))");
    }

    // Last: nothing earlier may open a way out through the host.
    e.line("\n; --- host launchers: denied after every allow above");
    e.line("(deny lsopen)");
    e.line("(deny appleevent-send)");
    let mut launch = String::from("(deny mach-lookup");
    for s in HOST_LAUNCH_SERVICES {
        let _ = write!(launch, "\n  (global-name \"{s}\")");
    }
    launch.push(')');
    e.line(&launch);
    let mut exec = String::from("(deny process-exec*");
    for s in HOST_LAUNCHERS {
        let _ = write!(exec, "\n  (literal \"{s}\")");
    }
    exec.push(')');
    e.line(&exec);

    for (k, v) in &e.params {
        if v.contains('\0') {
            return Err(Error::Nul { name: k.clone() });
        }
    }
    Ok(Profile {
        sbpl: e.sbpl,
        params: e.params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_spellings() {
        let c = |s: &str| canonical(Path::new(s)).unwrap();
        assert_eq!(c("/tmp"), "/private/tmp");
        assert_eq!(c("/tmp/x"), "/private/tmp/x");
        assert_eq!(c("/var/folders/ab"), "/private/var/folders/ab");
        assert_eq!(c("/etc/hosts"), "/private/etc/hosts");
        assert_eq!(c("//Users///me/./p/"), "/Users/me/p");
        assert_eq!(c("/"), "/");
        assert_eq!(c("/private/tmp"), "/private/tmp");
        assert_eq!(c("/tmpfoo"), "/tmpfoo");
        assert!(canonical(Path::new("rel/x")).is_err());
        assert!(canonical(Path::new("/a/../b")).is_err());
    }

    #[test]
    fn within_is_component_wise() {
        assert!(within("/a/b", "/a"));
        assert!(within("/a", "/a"));
        assert!(!within("/ab", "/a"));
        assert!(within("/x", "/"));
    }
}
