//! `plan(&Input, &dyn FsView) -> Plan`: the whole Linux kernel layer as data, computed
//! without touching the system (the filesystem is seen only through `FsView`, so the
//! golden tests below use a fake one). `namespaces::apply_mounts`, `landlock::apply`
//! and `seccomp` turn the plan into kernel state in the forked child.
//!
//! Precedence, deepest rule last: the host is read-only; writable roots are bound
//! writable; protected paths inside them (and sandpit's state dir) are bound read-only
//! over that; read-denied paths are masked last, so a mask wins over everything except
//! an explicit `allow_read` carve-out inside it.
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::seccomp;

/// What exists at a path (following symlinks), as far as planning needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Kind {
    Dir,
    File,
}

/// The only window `plan` has on the filesystem: one `stat` per named path, never a
/// directory walk.
pub trait FsView {
    /// Kind of the object at `path`, following symlinks; `None` if nothing is there.
    fn kind(&self, path: &Path) -> Option<Kind>;
    /// Whether some component of `path` is a symlink (checked for paths that sandpit
    /// mounts writable or read-only inside a writable root).
    fn has_symlink(&self, path: &Path) -> bool;
    /// Entries of one directory (fallback mode only: the parents of read-denied
    /// paths are listed once each, never recursively).
    fn list(&self, dir: &Path) -> Option<Vec<PathBuf>>;
    /// Whether `dir` is a directory with no entries (asked only of protected paths).
    fn is_empty_dir(&self, dir: &Path) -> bool;
    /// Whether `path` is a regular file holding just what a file placeholder there
    /// holds ([`placeholder_contents`]; asked only of protected paths).
    fn is_placeholder_file(&self, path: &Path) -> bool;
}

/// The real filesystem. Each answer is looked up once per plan: the plan asks about
/// the same ancestors (`/`, home, the workspace) for every protected path, and a
/// `stat` costs more than everything else it does.
#[derive(Default)]
pub struct HostFs {
    kinds: RefCell<HashMap<Vec<u8>, Option<Kind>>>,
    symlinks: RefCell<HashMap<Vec<u8>, bool>>,
}

impl FsView for HostFs {
    fn kind(&self, path: &Path) -> Option<Kind> {
        let key = path.as_os_str().as_bytes();
        if let Some(k) = self.kinds.borrow().get(key) {
            return *k;
        }
        let k = std::fs::metadata(path)
            .ok()
            .map(|m| if m.is_dir() { Kind::Dir } else { Kind::File });
        self.kinds.borrow_mut().insert(key.to_vec(), k);
        k
    }
    fn has_symlink(&self, path: &Path) -> bool {
        let mut p = PathBuf::new();
        for c in path.components() {
            p.push(c);
            let key = p.as_os_str().as_bytes();
            let cached = self.symlinks.borrow().get(key).copied();
            let link = cached.unwrap_or_else(|| {
                let link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
                self.symlinks.borrow_mut().insert(key.to_vec(), link);
                link
            });
            if link {
                return true;
            }
        }
        false
    }
    fn list(&self, dir: &Path) -> Option<Vec<PathBuf>> {
        let rd = std::fs::read_dir(dir).ok()?;
        let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        v.sort();
        Some(v)
    }
    fn is_empty_dir(&self, dir: &Path) -> bool {
        std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
    }
    fn is_placeholder_file(&self, path: &Path) -> bool {
        is_placeholder_file(path)
    }
}

/// Which kernel mechanisms carry the file and network policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Mode {
    /// User, mount, pid, net, ipc, uts namespaces + Landlock + seccomp.
    Namespaces,
    /// No user namespaces: Landlock (writes, TCP connect to the proxy port only) +
    /// seccomp refusing datagram/raw sockets. Reads are not masked: weaker.
    LandlockOnly,
}

/// Where the sandbox's traffic may go.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Network {
    /// Only to sandpit's proxy: inside, `127.0.0.1:port` is relayed to `socket`.
    Proxy {
        socket: PathBuf,
        port: u16,
        /// Nameserver written into the sandbox's `/etc/resolv.conf`, if any.
        resolver: Option<IpAddr>,
        /// Unix datagram socket of sandpit's DNS responder: queries to
        /// 127.0.0.1:53 inside are relayed there (and resolv.conf points at it).
        dns_socket: Option<PathBuf>,
        /// UDP to the addresses the policy allows (`network.mode = "unrestricted"`):
        /// through a TUN device inside, relayed by the launcher (`udp.rs`).
        udp: bool,
    },
    /// Nothing at all (an empty network namespace; in fallback, no TCP connect).
    Offline,
}

/// Everything `plan` needs; all paths absolute and canonical.
#[derive(Debug, Clone)]
pub struct Input {
    pub mode: Mode,
    pub home: PathBuf,
    pub workspace: PathBuf,
    /// Per-run scratch directory: writable, becomes `TMPDIR`.
    pub scratch: PathBuf,
    /// sandpit's own state (policy snapshot, extracted library, logs): read-only.
    pub state_dir: PathBuf,
    /// Writable roots besides the workspace and scratch.
    pub writable: Vec<PathBuf>,
    pub read_denied: Vec<PathBuf>,
    /// Carve-outs inside read-denied directories.
    pub read_allowed: Vec<PathBuf>,
    /// Paths that must stay unwritable (inside writable roots they are bound
    /// read-only, including ones that do not exist yet).
    pub write_protected: Vec<PathBuf>,
    pub network: Network,
    /// Policy `network.allow_local_binding`: TCP bind allowed (else refused by
    /// Landlock), and in namespace mode the sandbox's loopback listeners are
    /// mirrored on the host.
    pub allow_local_binding: bool,
    /// The host's loopback services the sandbox may reach (`loopback::services`).
    pub loopback: Vec<super::loopback::Loopback>,
    /// The working directory of the command (inside the sandbox view).
    pub cwd: PathBuf,
    /// Policy `limits.processes` (0: none).
    pub processes: u64,
    /// Why that limit would not hold for this run (`super::process_limit_void`).
    pub processes_void: Option<&'static str>,
    /// The launcher's variables that never enter the sandbox (`env.withhold`, less
    /// what `env.agent` keeps for the command).
    pub env_withheld: Vec<String>,
    /// Host devices passed into the sandbox's `/dev` (`files.devices`).
    pub devices: Vec<PathBuf>,
    /// Protected files a tool reads whenever they exist (a config file
    /// `include.path` names, the files of `sandpit_policy::runlater::REGISTRY`): held like
    /// `.git/commondir`, never by a placeholder directory, which would break the tool.
    pub read_if_present: Vec<PathBuf>,
    /// Sockets programs on this machine have bound (the kernel's socket table) that
    /// the policy does not let the sandbox connect to: masked where the sandbox
    /// would see them (namespace mode; Landlock has no right for connecting).
    pub host_sockets: Vec<PathBuf>,
    /// Policy `isolation.nested_user_namespaces`: seccomp lets new user namespaces
    /// and `chroot` through.
    pub nested_user_namespaces: bool,
    /// Policy `limits.tmp_bytes`: the size of the private `/tmp` and `/dev/shm`
    /// each (0: the kernel's default).
    pub tmp_bytes: u64,
    /// Policy `limits.cache_bytes`: no file the sandbox writes may grow past it
    /// (`RLIMIT_FSIZE`; 0: none).
    pub file_bytes: u64,
    /// Policy `limits.memory` (0: none).
    pub memory: u64,
    /// The launcher's cgroup when the run's may go under it (`memory::probe`), or
    /// why not.
    pub memory_cgroup: Result<PathBuf, String>,
}

/// The devices every sandbox's `/dev` holds (`MountOp::Dev`).
pub const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// One mount in the child's new root; paths are host paths, mounted at the same place.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum MountOp {
    /// An empty writable tmpfs (private `/tmp`, `/dev/shm`) of at most `size` bytes
    /// (0: the kernel's default, half the machine's memory).
    Tmpfs { path: PathBuf, size: u64 },
    /// The host object bound writable (a writable root, or a pin: an ancestor of a
    /// protected path bound onto itself so it cannot be renamed away).
    Writable { path: PathBuf, no_symlinks: bool },
    /// The host object bound read-only.
    ReadOnly { path: PathBuf, no_symlinks: bool },
    /// An empty, read-only, mode-000 tmpfs over a directory; `allow` are host paths
    /// re-exposed read-only inside it, `writable` are writable roots that lie inside
    /// it, re-exposed writable (the tmpfs is then traversable, not listable).
    MaskDir {
        path: PathBuf,
        allow: Vec<(PathBuf, Kind)>,
        writable: Vec<PathBuf>,
    },
    /// An empty mode-000 file bound read-only over a file.
    MaskFile { path: PathBuf },
    /// The same over a socket a program on this machine has bound
    /// ([`Input::host_sockets`]); one removed before the mount is made (its program
    /// ended) has nothing left to hide and is skipped.
    MaskSocket { path: PathBuf },
    /// A read-only directory of sandpit's over an empty one (a placeholder): it
    /// holds only a `.gitignore` of `*`, so git neither lists it nor tries to
    /// remove it (`git clean -d`, `git stash -u`); the host's directory stays empty.
    Sealed { path: PathBuf },
    /// A fresh procfs for the new pid namespace.
    Proc { path: PathBuf },
    /// A sandpit-written file bound read-only (resolv.conf); a link is followed
    /// inside the new root.
    File { path: PathBuf, contents: String },
    /// The sandbox's own `/dev`: a read-only tmpfs holding [`DEVICES`] and `pass`
    /// (bound from the host's), `pts/` and `shm/` (mounted over later), and the
    /// links `fd`, `stdin`, `stdout`, `stderr` and `ptmx`. No other host device
    /// (cameras, sound, security keys, `/dev/kvm`, disks) is there to open.
    Dev { path: PathBuf, pass: Vec<PathBuf> },
    /// A devpts instance of the sandbox's own over the host's (`/dev/pts`), its
    /// `ptmx` bound over `/dev/ptmx`: the user's other terminals are not there to
    /// open, and terminals made inside are made in it. The command's own terminal
    /// (a descriptor it inherits) works as before.
    Devpts { path: PathBuf },
}

impl MountOp {
    pub fn path(&self) -> &Path {
        match self {
            MountOp::Tmpfs { path, .. }
            | MountOp::Writable { path, .. }
            | MountOp::ReadOnly { path, .. }
            | MountOp::MaskDir { path, .. }
            | MountOp::MaskFile { path }
            | MountOp::MaskSocket { path }
            | MountOp::Sealed { path }
            | MountOp::Proc { path }
            | MountOp::Devpts { path }
            | MountOp::Dev { path, .. }
            | MountOp::File { path, .. } => path,
        }
    }
}

/// Files git reads whenever they exist, and stumbles on when a directory stands
/// there: protected by a read-only bind when present, never by a placeholder.
/// `commondir` in a `.git` names the directory git takes the config and hooks from;
/// `config.worktree` is config; a `HEAD` at the top of a writable root (`root`)
/// makes git take that directory for a bare repository, config and all, once its
/// `.git` is unusable (and a `HEAD` directory there would make `git log HEAD`
/// ambiguous).
fn is_read_if_present(p: &Path, root: &Path) -> bool {
    let name = p.file_name();
    let in_git = p
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == ".git");
    (in_git && name.is_some_and(|n| n == "commondir" || n == "config.worktree"))
        || (p.parent() == Some(root) && name.is_some_and(|n| n == "HEAD"))
}

/// Why a file of `Plan::absent_git_files` that the run created is moved aside.
pub fn absent_git_file_danger(p: &Path) -> &'static str {
    match p.file_name().and_then(|n| n.to_str()) {
        Some("HEAD") => {
            "with `.git` unusable, git would take the workspace for a repository and run \
             what its config names"
        }
        Some("config.worktree") => {
            "git reads it as the repository's config once `extensions.worktreeConfig` is \
             on, hooks and `core.fsmonitor` included"
        }
        Some("commondir") => "git would take its config from what it names",
        _ if sandpit_policy::runlater::REGISTRY
            .iter()
            .any(|e| p.ends_with(e.path.trim_start_matches("~/"))) =>
        {
            "a tool the user runs later reads it whenever it exists and runs the program it \
             names (docs/run-later.md)"
        }
        _ if p.components().any(|c| {
            crate::vcs::DIRS
                .iter()
                .any(|(d, _)| c.as_os_str() == std::ffi::OsStr::new(d))
        }) =>
        {
            "the version-control tool the user runs later in the workspace reads it and runs \
             the commands it names"
        }
        _ => "git includes it in its config, hooks and `core.fsmonitor` included",
    }
}

/// Where a file of `Plan::absent_git_files` the run created is moved: beside it,
/// named with `tag` (the run's id and a secret, `Layers::quarantine_tag`).
pub fn quarantine_path(p: &Path, tag: &str) -> Option<PathBuf> {
    let name = p.file_name()?.to_string_lossy();
    Some(p.with_file_name(format!("{name}.sandpit-quarantine-{tag}")))
}

/// What sandpit creates on the host before the run (and removes after it if it is
/// still empty and no other run uses it) so that a protected path that does not
/// exist yet can be a mountpoint. Creating a file or directory there fails (EEXIST,
/// EISDIR, EROFS), and renaming over it or removing it fails (EBUSY).
///
/// In the workspace always a directory, whatever the protected path would have
/// been, taken inside by a read-only `MountOp::Sealed`: git lists, adds, stashes and
/// cleans neither an empty directory (the host's view) nor one holding only ignored
/// files (the sandbox's), so the placeholder is no junk for git. Outside it (an
/// agent's state directory), a name that reads as a file's (`config.toml`,
/// `AGENTS.md`: it has an extension) gets a file bound read-only, empty or `{}` for
/// JSON ([`placeholder_contents`]): the agent reads it as an empty config, where a
/// directory stopped it ("is not a file").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Placeholder {
    pub path: PathBuf,
    /// A file (empty, or `{}` for JSON), not a directory.
    pub file: bool,
}

impl Placeholder {
    fn dir(path: &Path) -> Placeholder {
        Placeholder {
            path: path.to_path_buf(),
            file: false,
        }
    }
}

/// What a file placeholder at `p` holds: an empty JSON object for a `.json` or
/// `.jsonc` name (an empty file is no JSON: gemini-cli stops on it), else nothing.
pub fn placeholder_contents(p: &Path) -> &'static [u8] {
    match p.extension().and_then(|e| e.to_str()) {
        Some("json" | "jsonc") => b"{}\n",
        _ => b"",
    }
}

/// Whether the host's `p` is a regular file (not a link) holding just
/// [`placeholder_contents`]: a placeholder some run made, or one that is as good.
pub fn is_placeholder_file(p: &Path) -> bool {
    let want = placeholder_contents(p);
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.len() == want.len() as u64)
        && (want.is_empty() || std::fs::read(p).is_ok_and(|b| b == want))
}

/// Whether a missing protected path gets a file as its placeholder rather than a
/// directory ([`Placeholder`]): outside the workspace, a name with an extension or
/// one of the dot-files that are always files (`.env`, `.npmrc`, …).
fn file_placeholder(p: &Path, workspace: &Path) -> bool {
    const DOT_FILES: &[&str] = &[".env", ".envrc", ".npmrc", ".yarnrc"];
    !inside(p, workspace)
        && (p.extension().is_some()
            || p.file_name()
                .is_some_and(|n| DOT_FILES.iter().any(|f| n == *f)))
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LandlockPlan {
    /// Hierarchies where every write right is granted.
    pub writable: Vec<PathBuf>,
    /// Hierarchies where only writing to existing files and device ioctls are
    /// granted (`/dev`: null, tty, pts).
    pub devices: Vec<PathBuf>,
    /// TCP ports `connect` may reach (fallback mode); `None` = not restricted.
    pub tcp_connect: Option<Vec<u16>>,
    /// Refuse TCP `bind` (fallback mode, unless the policy allows local binding).
    pub deny_tcp_bind: bool,
    /// With `deny_tcp_bind`: still let `bind` take an ephemeral port (port 0: a client
    /// binding before connect, Go's IPv6 probe). Namespace mode only: there a server
    /// on it is unreachable from outside; in fallback mode it would listen on this
    /// machine's interfaces.
    pub bind_ephemeral: bool,
    /// Also handle the rights Landlock checks when a file is *opened* — WriteFile,
    /// Truncate, IoctlDev — each of which costs a walk up the path on every such
    /// open (Truncate and IoctlDev on read-only opens too). In namespace mode they
    /// are left out: the read-only bind mounts already refuse writing and truncating
    /// every existing file outside the writable roots (and the protected paths
    /// inside them), the sandboxed program holds no capability to remount them, and
    /// seccomp refuses the mount calls and the dangerous tty ioctls. Landlock there
    /// still refuses creating, removing, renaming and linking outside the writable
    /// roots, and adds its scopes. In fallback mode Landlock is the file boundary and
    /// handles everything.
    pub file_open_rights: bool,
    /// Fallback mode: reads are handled too. `read` hierarchies may be read;
    /// `list_only` (the parents of read-denied paths) may only be listed.
    pub reads: Option<ReadRules>,
}

/// Read confinement without a mount namespace: everything except the read-denied
/// paths, expressed as Landlock allow rules on their siblings.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReadRules {
    pub read: Vec<PathBuf>,
    pub list_only: Vec<PathBuf>,
}

/// Allow reading everything except `denied` (and what lies beneath): for each
/// strict ancestor of a denied path, every child that is neither denied nor itself
/// such an ancestor gets read access; ancestors get listing only. Carve-outs in
/// `allowed` are granted back. One directory listing per ancestor, no walk.
fn read_rules(denied: &[PathBuf], allowed: &[PathBuf], fs: &dyn FsView) -> ReadRules {
    let mut ancestors: Vec<PathBuf> = vec![];
    for d in denied {
        let mut a = d.parent();
        while let Some(p) = a {
            ancestors.push(p.to_path_buf());
            a = p.parent();
        }
    }
    ancestors.sort();
    ancestors.dedup();
    // A denied path that is also an ancestor of another denied one stays denied.
    ancestors.retain(|a| !denied.iter().any(|d| inside(a, d)) && fs.kind(a) == Some(Kind::Dir));
    let mut read = vec![];
    for a in &ancestors {
        for child in fs.list(a).unwrap_or_default() {
            let blocked = denied.iter().any(|d| inside(&child, d));
            if !blocked && !ancestors.contains(&child) {
                read.push(child);
            }
        }
    }
    for a in allowed {
        if denied.iter().any(|d| inside(a, d)) && fs.kind(a).is_some() {
            read.push(a.clone());
        }
    }
    read.sort();
    read.dedup();
    ReadRules {
        read,
        list_only: ancestors,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum NetPlan {
    /// Listen on 127.0.0.1:port (inside the namespace, or on the host in fallback)
    /// and relay each connection to the unix socket.
    Bridge {
        port: u16,
        relay_to: PathBuf,
        dns_relay_to: Option<PathBuf>,
        /// A TUN device inside is the default route, and the launcher relays the UDP
        /// the policy allows (`udp.rs`); namespace mode only.
        udp: bool,
    },
    Offline,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    pub mode: Mode,
    pub placeholders: Vec<Placeholder>,
    pub mounts: Vec<MountOp>,
    pub landlock: LandlockPlan,
    pub seccomp: seccomp::Profile,
    /// [`Input::nested_user_namespaces`], for `seccomp::table`.
    pub nested_user_namespaces: bool,
    pub net: NetPlan,
    pub env: Vec<(String, String)>,
    /// The launcher's variables the command does not get (`Input::env_withheld`).
    pub env_withheld: Vec<String>,
    pub cwd: PathBuf,
    /// Read-denied paths that do not exist now: nothing to mask (if the host creates
    /// one during the run, the kernel layer does not hide it; L1 still refuses it).
    pub unmasked_missing: Vec<PathBuf>,
    /// Protected files git reads whenever they exist (`.git/commondir`, a `HEAD` at
    /// the workspace's top) that do not exist now and get no placeholder: the
    /// interposer refuses creating them; one that a static program or a raw system
    /// call creates is moved aside at once by the mount guard, which stops the run
    /// (`guard.rs`), and by the launcher at the run's end in fallback mode.
    pub absent_git_files: Vec<PathBuf>,
    /// What this plan cannot enforce, for the start-up line and `sandpit check`.
    pub weaker: Vec<String>,
    /// Namespace mode: listeners inside at these addresses relay to the host's.
    pub loopback: Vec<super::loopback::Loopback>,
    /// Namespace mode with `allow_local_binding`: the sandbox's loopback listeners
    /// are mirrored on the host while the run lasts.
    pub mirror: bool,
    /// Namespace mode: the tasks the sandbox's user namespace may hold at once
    /// (`RLIMIT_NPROC` set in the command's process; the kernel counts each user
    /// namespace's own tasks). Without one the limit would count every process of
    /// the user, so there is none.
    pub processes: Option<u64>,
    /// `limits.memory`: a cgroup of the run's own, or `RLIMIT_DATA` in each process.
    pub memory: Option<super::memory::Memory>,
    /// Report what the kernel layer refuses alone (`notify.rs`): a seccomp
    /// notification filter on the path-taking calls, answered by the launcher. Off
    /// here; the run turns it on where a program of the run lacks the interposer.
    pub report_refusals: bool,
    /// `limits.cache_bytes`: `RLIMIT_FSIZE` of each process, `SIGXFSZ` ignored, so
    /// a write past it fails with `EFBIG`.
    pub file_bytes: Option<u64>,
}

impl Plan {
    /// Whether a `.git` that did not exist is sealed for the run (the workspace is
    /// no repository): go's VCS stamping would fail on it.
    pub fn sealed_git(&self) -> bool {
        self.mounts.iter().any(
            |m| matches!(m, MountOp::Sealed { path } if path.file_name() == Some(".git".as_ref())),
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("path {0:?} must be absolute and normalized (no `.`/`..`)")]
    NotCanonical(PathBuf),
    #[error(
        "protected path {0:?} (or one of its parents inside a writable root) is a \
         symlink; sandpit will not mount over a path the sandbox could re-point"
    )]
    SymlinkInProtected(PathBuf),
}

fn check(p: &Path) -> Result<(), PlanError> {
    let ok = p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(PlanError::NotCanonical(p.to_path_buf()))
    }
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

/// `p` is `root` or lies beneath it: the plan's paths are absolute and normalized,
/// so they compare as bytes (the plan makes thousands of these calls).
fn inside(p: &Path, root: &Path) -> bool {
    sandpit_policy::path::is_within_normal(p, root)
}

pub(super) fn strictly_inside(p: &Path, root: &Path) -> bool {
    p.as_os_str() != root.as_os_str() && inside(p, root)
}

/// Rank for ordering operations on the same depth: tmpfs first, then writable, then
/// read-only, so the more restrictive mount lands on top.
fn rank(op: &MountOp) -> u8 {
    match op {
        MountOp::Tmpfs { .. } => 0,
        MountOp::Writable { .. } => 1,
        MountOp::ReadOnly { .. } | MountOp::Sealed { .. } => 2,
        _ => 3,
    }
}

/// Compute the plan. Pure: the same input and filesystem view give the same plan.
pub fn plan(input: &Input, fs: &dyn FsView) -> Result<Plan, PlanError> {
    for p in [
        &input.home,
        &input.workspace,
        &input.scratch,
        &input.state_dir,
    ]
    .into_iter()
    .chain(&input.writable)
    .chain(&input.read_denied)
    .chain(&input.read_allowed)
    .chain(&input.write_protected)
    {
        check(p)?;
    }
    let mut roots: Vec<PathBuf> = vec![input.workspace.clone(), input.scratch.clone()];
    roots.extend(input.writable.iter().cloned());
    roots.sort();
    roots.dedup();
    // Nested roots keep their own mount: something read-only (the state dir) may lie
    // between them. The innermost root containing a path is the one that counts.
    let root_of = |p: &Path| {
        roots
            .iter()
            .filter(|r| inside(p, r))
            .max_by_key(|r| depth(r))
            .cloned()
    };

    let ns = input.mode == Mode::Namespaces;
    let mut binds: Vec<MountOp> = vec![];
    let mut absent_git_files = vec![];
    let mut placeholders = vec![];
    let mut weaker = vec![];

    if ns {
        // Passed through unless the policy also refuses reading it.
        let pass = input
            .devices
            .iter()
            .filter(|d| !input.read_denied.iter().any(|r| inside(d, r)))
            .cloned()
            .collect();
        binds.push(MountOp::Dev {
            path: PathBuf::from("/dev"),
            pass,
        });
        binds.push(MountOp::Tmpfs {
            path: PathBuf::from("/tmp"),
            size: input.tmp_bytes,
        });
        binds.push(MountOp::Tmpfs {
            path: PathBuf::from("/dev/shm"),
            size: input.tmp_bytes,
        });
        // The private /tmp hides the host's: bring back what the run must still see.
        for p in [&input.home, &input.state_dir] {
            if strictly_inside(p, Path::new("/tmp")) && root_of(p).is_none() && fs.kind(p).is_some()
            {
                binds.push(MountOp::ReadOnly {
                    path: p.clone(),
                    no_symlinks: false,
                });
            }
        }
        for r in &roots {
            // The scratch dir ($TMPDIR) is a tmpfs of limits.tmp_bytes like /tmp: a
            // program filling it meets ENOSPC, not the host's disk (and with a memory
            // cgroup its pages count against limits.memory).
            if r == &input.scratch && input.tmp_bytes != 0 {
                binds.push(MountOp::Tmpfs {
                    path: r.clone(),
                    size: input.tmp_bytes,
                });
                continue;
            }
            binds.push(MountOp::Writable {
                path: r.clone(),
                no_symlinks: false,
            });
        }
        // sandpit's state stays read-only even where it lies in a writable root.
        if root_of(&input.state_dir).is_some() && fs.kind(&input.state_dir).is_some() {
            binds.push(MountOp::ReadOnly {
                path: input.state_dir.clone(),
                no_symlinks: false,
            });
        }
        let mut pins: Vec<PathBuf> = vec![];
        for p in &input.write_protected {
            let Some(root) = root_of(p) else { continue };
            if p == &root {
                continue; // a whole writable root cannot also be protected
            }
            if fs.has_symlink(p) {
                return Err(PlanError::SymlinkInProtected(p.clone()));
            }
            // The deepest path that exists or, if the protected path is missing, the
            // first missing component: that is what gets the read-only mount.
            let (target, sealed) = if let Some(kind) = fs.kind(p) {
                // An empty directory (another run's placeholder, or the user's) gets
                // the same sealed view as a placeholder of this run, and is listed as
                // one: if the run that made it ends (and removes it) between this
                // plan and the spawn taking the placeholder lock, the spawn makes it
                // again instead of failing to mount on nothing.
                let sealed = kind == Kind::Dir && fs.is_empty_dir(p);
                if sealed {
                    placeholders.push(Placeholder::dir(p));
                } else if kind == Kind::File && fs.is_placeholder_file(p) {
                    // The same for another run's empty-file placeholder.
                    placeholders.push(Placeholder {
                        path: p.clone(),
                        file: true,
                    });
                }
                (p.clone(), sealed)
            } else {
                let mut first_missing = p.clone();
                let mut parent_kind = None;
                while let Some(parent) = first_missing.parent() {
                    parent_kind = fs.kind(parent);
                    if parent_kind.is_some() || parent == root {
                        break;
                    }
                    first_missing = parent.to_path_buf();
                }
                if parent_kind == Some(Kind::File) {
                    // e.g. `.git/hooks` where `.git` is a worktree's or a submodule's
                    // gitfile: nothing can be created beneath it, but rewriting it
                    // (`gitdir: evil`) would point the user's git at a repository
                    // the sandbox made. The file is bound read-only.
                    let Some(file) = first_missing.parent() else {
                        continue;
                    };
                    (file.to_path_buf(), false)
                } else if first_missing == *p
                    && (is_read_if_present(p, &root) || input.read_if_present.contains(p))
                {
                    // No placeholder: git reads these whenever they exist, and would
                    // fail on a directory there (the interposer refuses creating them).
                    absent_git_files.push(p.clone());
                    continue;
                } else if first_missing == *p && file_placeholder(p, &input.workspace) {
                    placeholders.push(Placeholder {
                        path: p.clone(),
                        file: true,
                    });
                    (p.clone(), false)
                } else {
                    // `.git/hooks` in a directory that is no repository yet seals `.git`
                    // itself: otherwise a raw-syscall or static program could create a
                    // repository whose config (core.fsmonitor, hooks) runs code the next
                    // time the user runs git there. git (which skips an invalid `.git`)
                    // and the interposer cope; `git init` must happen before the run, and
                    // go's VCS stamping is turned off for the run (`sealed_git`).
                    placeholders.push(Placeholder::dir(&first_missing));
                    (first_missing, true)
                }
            };
            let mut a = target.parent();
            while let Some(anc) = a {
                if !strictly_inside(anc, &root) {
                    break;
                }
                pins.push(anc.to_path_buf());
                a = anc.parent();
            }
            binds.push(if sealed {
                MountOp::Sealed { path: target }
            } else {
                MountOp::ReadOnly {
                    path: target,
                    no_symlinks: true,
                }
            });
        }
        pins.sort();
        pins.dedup();
        for p in pins {
            if !binds.iter().any(|b| b.path() == p) {
                binds.push(MountOp::Writable {
                    path: p,
                    no_symlinks: true,
                });
            }
        }
    } else {
        weaker.push(
            "read-denied paths are refused by Landlock, not masked (their names stay listable)"
                .into(),
        );
        weaker.push("protected paths inside the workspace stay writable".into());
        weaker.push("descendants are tracked by subreaper, not a pid namespace".into());
        weaker.push("the host's /dev: every device the user may open stays open".into());
    }
    if input.nested_user_namespaces {
        weaker.push(
            "new user namespaces and chroot allowed (isolation.nested_user_namespaces)".into(),
        );
    }
    // Never without a user namespace, whatever the input says.
    let why_no_limit = match (input.processes, ns) {
        (0, _) => None,
        (_, false) => Some(input.processes_void.unwrap_or("no user namespace")),
        (_, true) => input.processes_void,
    };
    if let Some(why) = why_no_limit {
        weaker.push(format!("no process limit (limits.processes: {why})"));
    }
    let memory = match (input.memory, ns, &input.memory_cgroup) {
        (0, _, _) => None,
        (bytes, true, Ok(own)) => Some(super::memory::Memory::Cgroup {
            own: own.clone(),
            bytes,
        }),
        (bytes, _, why) => {
            let why = match why {
                Err(why) if ns => why.as_str(),
                _ => "no namespaces",
            };
            weaker.push(format!(
                "memory: limits.memory bounds each process's data (RLIMIT_DATA), not the whole \
                 run, and /tmp and /dev/shm only by limits.tmp_bytes (no cgroup: {why})"
            ));
            Some(super::memory::Memory::Data { bytes })
        }
    };
    binds.sort_by(|a, b| {
        (depth(a.path()), rank(a))
            .cmp(&(depth(b.path()), rank(b)))
            .then_with(|| a.path().cmp(b.path()))
    });
    binds.dedup();
    // A name that is one entry's file placeholder and the first missing directory of
    // a deeper entry's (`~/.codex/config.toml` and `~/.codex/config.toml/x`) is a
    // file: nothing can be made beneath a file either.
    let file_names: Vec<PathBuf> = placeholders
        .iter()
        .filter(|p| p.file)
        .map(|p| p.path.clone())
        .collect();
    placeholders.retain(|p| p.file || !file_names.contains(&p.path));
    binds.retain(|b| !matches!(b, MountOp::Sealed { path } if file_names.contains(path)));
    placeholders.sort_by(|a, b| a.path.cmp(&b.path));
    placeholders.dedup();

    let mut masks = vec![];
    let mut unmasked_missing = vec![];
    if ns {
        let mut denied = input.read_denied.clone();
        denied.sort();
        denied.dedup();
        // The private /tmp and /dev show only what is brought back into them.
        let shown = |p: &Path| {
            ![Path::new("/tmp"), Path::new("/dev")]
                .iter()
                .any(|t| inside(p, t))
                || [&input.home, &input.state_dir]
                    .into_iter()
                    .chain(&roots)
                    .any(|b| inside(p, b))
        };
        for p in &denied {
            if denied.iter().any(|o| strictly_inside(p, o)) {
                continue; // already under a mask
            }
            if !shown(p) {
                continue; // hidden by the private /tmp or /dev/shm already
            }
            match fs.kind(p) {
                Some(Kind::Dir) => {
                    let allow = input
                        .read_allowed
                        .iter()
                        .filter(|a| strictly_inside(a, p))
                        .filter_map(|a| fs.kind(a).map(|k| (a.clone(), k)))
                        .collect();
                    let writable = roots
                        .iter()
                        .filter(|r| strictly_inside(r, p))
                        .cloned()
                        .collect();
                    masks.push(MountOp::MaskDir {
                        path: p.clone(),
                        allow,
                        writable,
                    });
                }
                Some(Kind::File) => masks.push(MountOp::MaskFile { path: p.clone() }),
                None => unmasked_missing.push(p.clone()),
            }
        }
        for p in &input.host_sockets {
            // Hidden by a mask, unless a directory inside it that holds the socket
            // comes back (a carve-out, a writable root): the deepest decides.
            let deepest = |dirs: &mut dyn Iterator<Item = &PathBuf>| {
                dirs.filter(|d| inside(p, d)).map(|d| depth(d)).max()
            };
            let masked = deepest(&mut denied.iter());
            let back = deepest(&mut input.read_allowed.iter().chain(&roots));
            if shown(p) && (masked.is_none() || back >= masked) {
                masks.push(MountOp::MaskSocket { path: p.clone() });
            }
        }
        masks.sort_by(|a, b| (depth(a.path()), a.path()).cmp(&(depth(b.path()), b.path())));
    }

    let mut tail = vec![];
    if ns {
        tail.push(MountOp::Proc {
            path: PathBuf::from("/proc"),
        });
        if fs.kind(Path::new("/dev/pts/ptmx")).is_some()
            && fs.kind(Path::new("/dev/ptmx")).is_some()
        {
            tail.push(MountOp::Devpts {
                path: PathBuf::from("/dev/pts"),
            });
        }
        let nameserver = match &input.network {
            Network::Proxy {
                resolver: Some(ip), ..
            } => Some(*ip),
            Network::Proxy {
                dns_socket: Some(_),
                ..
            } => Some(IpAddr::from([127, 0, 0, 1])),
            _ => None,
        };
        if let Some(ip) = nameserver {
            tail.push(MountOp::File {
                path: PathBuf::from("/etc/resolv.conf"),
                contents: format!("# written by sandpit\nnameserver {ip}\noptions edns0\n"),
            });
        }
    }

    let mut ll_writable = roots.clone();
    if ns {
        ll_writable.push(PathBuf::from("/tmp"));
        ll_writable.push(PathBuf::from("/dev/shm"));
    }
    ll_writable.sort();
    ll_writable.dedup();
    let net = match &input.network {
        Network::Proxy {
            socket,
            port,
            dns_socket,
            udp,
            ..
        } => NetPlan::Bridge {
            port: *port,
            relay_to: socket.clone(),
            // Port 53 exists only inside a network namespace of our own.
            dns_relay_to: if ns { dns_socket.clone() } else { None },
            // So does the TUN device; in fallback mode seccomp refuses UDP sockets.
            udp: *udp && ns,
        },
        Network::Offline => NetPlan::Offline,
    };
    let tcp_connect = match (&input.mode, &net) {
        (Mode::Namespaces, _) => None,
        (Mode::LandlockOnly, NetPlan::Bridge { port, .. }) => {
            // No namespace to put relays in: the host's loopback services are
            // reached directly, by port.
            let mut ports = vec![*port];
            ports.extend(input.loopback.iter().map(|l| l.listen.port()));
            ports.sort_unstable();
            ports.dedup();
            Some(ports)
        }
        (Mode::LandlockOnly, NetPlan::Offline) => Some(vec![]),
    };
    if !ns {
        weaker.push("network confined by Landlock TCP rules and seccomp, not a namespace".into());
        if matches!(net, NetPlan::Bridge { .. }) && !input.loopback.is_empty() {
            weaker.push(
                "loopback services are allowed by port: Landlock lets TCP connect reach those ports on any host, the internet included, past the proxy"
                    .into(),
            );
        }
        if !input.allow_local_binding {
            weaker.push(
                "TCP listen() on a socket never bound (an ephemeral port on every address) is not a bind to Landlock: only the interposer refuses it"
                    .into(),
            );
        }
        if input.allow_local_binding {
            weaker.push(
                "allow_local_binding: Landlock cannot limit bind to loopback addresses (the interposer refuses others for dynamic programs)"
                    .into(),
            );
        }
    }
    let loopback = match (&net, ns) {
        (NetPlan::Bridge { port, .. }, true) => {
            let mut v = input.loopback.clone();
            // The bridge owns its address inside.
            v.retain(|l| l.listen != std::net::SocketAddr::from(([127, 0, 0, 1], *port)));
            if v.len() < input.loopback.len() {
                weaker.push(format!(
                    "a loopback service on port {port} collides with the proxy bridge inside the sandbox and is reached through the proxy only"
                ));
            }
            v
        }
        _ => vec![],
    };

    let mut env = vec![(
        "TMPDIR".to_string(),
        input.scratch.to_string_lossy().into_owned(),
    )];
    if let NetPlan::Bridge { port, .. } = &net {
        let url = format!("http://127.0.0.1:{port}");
        for k in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            env.push((k.to_string(), url.clone()));
        }
        env.push(("NO_PROXY".into(), String::new()));
        env.push(("no_proxy".into(), String::new()));
    }

    let mirror = ns && input.allow_local_binding;
    let mut mounts = binds;
    mounts.extend(masks);
    mounts.extend(tail);
    Ok(Plan {
        mode: input.mode,
        placeholders,
        mounts,
        landlock: LandlockPlan {
            writable: ll_writable,
            devices: vec![PathBuf::from("/dev")],
            deny_tcp_bind: !input.allow_local_binding,
            bind_ephemeral: ns,
            file_open_rights: !ns,
            tcp_connect,
            reads: if ns || input.read_denied.is_empty() {
                None
            } else {
                Some(read_rules(&input.read_denied, &input.read_allowed, fs))
            },
        },
        seccomp: if ns {
            seccomp::Profile::Namespaced
        } else {
            seccomp::Profile::Fallback
        },
        nested_user_namespaces: input.nested_user_namespaces,
        net,
        env,
        env_withheld: input.env_withheld.clone(),
        cwd: input.cwd.clone(),
        unmasked_missing,
        absent_git_files,
        weaker,
        loopback,
        mirror,
        processes: (input.processes != 0 && why_no_limit.is_none()).then_some(input.processes),
        memory,
        report_refusals: false,
        file_bytes: (input.file_bytes != 0).then_some(input.file_bytes),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Kinds, symlinks, and the files that hold a placeholder's contents.
    struct FakeFs(BTreeMap<PathBuf, Kind>, Vec<PathBuf>, Vec<PathBuf>);

    impl FakeFs {
        fn new(entries: &[(&str, Kind)]) -> FakeFs {
            FakeFs(
                entries
                    .iter()
                    .map(|(p, k)| (PathBuf::from(p), *k))
                    .collect(),
                vec![],
                vec![],
            )
        }
    }

    impl FsView for FakeFs {
        fn kind(&self, path: &Path) -> Option<Kind> {
            self.0.get(path).copied()
        }
        fn has_symlink(&self, path: &Path) -> bool {
            self.1.iter().any(|s| path.starts_with(s))
        }
        fn list(&self, dir: &Path) -> Option<Vec<PathBuf>> {
            Some(
                self.0
                    .keys()
                    .filter(|p| p.parent() == Some(dir))
                    .cloned()
                    .collect(),
            )
        }
        fn is_empty_dir(&self, dir: &Path) -> bool {
            self.0.get(dir) == Some(&Kind::Dir) && self.list(dir).unwrap_or_default().is_empty()
        }
        fn is_placeholder_file(&self, path: &Path) -> bool {
            self.0.get(path) == Some(&Kind::File) && self.2.iter().any(|e| e == path)
        }
    }

    fn input() -> Input {
        Input {
            mode: Mode::Namespaces,
            home: "/home/u".into(),
            workspace: "/home/u/proj".into(),
            scratch: "/home/u/.sandpit/run/1".into(),
            state_dir: "/home/u/.sandpit".into(),
            writable: vec![],
            read_denied: vec![
                "/home/u/.ssh".into(),
                "/home/u/.aws".into(),
                "/home/u/.netrc".into(),
                "/home/u/.ssh/id_rsa".into(),
                "/home/u/.config/gh".into(),
            ],
            read_allowed: vec!["/home/u/.config/gh/config.yml".into()],
            write_protected: vec![
                "/home/u/proj/.git/hooks".into(),
                "/home/u/proj/.git/config".into(),
                "/home/u/proj/.sandpit.toml".into(),
                "/home/u/proj/.claude/settings.json".into(),
                "/etc".into(),
            ],
            network: Network::Proxy {
                socket: "/home/u/.sandpit/run/1/proxy.sock".into(),
                port: 3128,
                resolver: Some("127.0.0.53".parse().unwrap()),
                dns_socket: None,
                udp: false,
            },
            allow_local_binding: false,
            processes: 8192,
            processes_void: None,
            memory: 0,
            memory_cgroup: Err("none in tests".into()),
            env_withheld: vec![],
            devices: vec![],
            read_if_present: vec![],
            host_sockets: vec![],
            nested_user_namespaces: false,
            tmp_bytes: 0,
            file_bytes: 0,
            loopback: vec![],
            cwd: "/home/u/proj".into(),
        }
    }

    fn fs() -> FakeFs {
        use Kind::*;
        FakeFs::new(&[
            ("/", Dir),
            ("/home", Dir),
            ("/home/u", Dir),
            ("/home/u/proj", Dir),
            ("/home/u/proj/.git", Dir),
            ("/home/u/proj/.git/config", File),
            ("/home/u/.sandpit", Dir),
            ("/home/u/.sandpit/run/1", Dir),
            ("/home/u/.ssh", Dir),
            ("/home/u/.ssh/id_rsa", File),
            ("/home/u/.netrc", File),
            ("/home/u/.config", Dir),
            ("/home/u/.config/gh", Dir),
            ("/home/u/.config/gh/config.yml", File),
            ("/etc", Dir),
        ])
    }

    fn render(p: &Plan) -> String {
        let mut s = String::new();
        for ph in &p.placeholders {
            let what = if ph.file { "file" } else { "dir" };
            s += &format!("create {what} {}\n", ph.path.display());
        }
        for m in &p.mounts {
            s += &match m {
                MountOp::Tmpfs { path, size: 0 } => format!("tmpfs {}\n", path.display()),
                MountOp::Tmpfs { path, size } => {
                    format!("tmpfs {} size={size}\n", path.display())
                }
                MountOp::Writable { path, no_symlinks } => {
                    format!(
                        "rw {}{}\n",
                        path.display(),
                        if *no_symlinks { " nofollow" } else { "" }
                    )
                }
                MountOp::ReadOnly { path, no_symlinks } => {
                    format!(
                        "ro {}{}\n",
                        path.display(),
                        if *no_symlinks { " nofollow" } else { "" }
                    )
                }
                MountOp::MaskDir {
                    path,
                    allow,
                    writable,
                } => format!(
                    "mask-dir {}{}{}\n",
                    path.display(),
                    allow
                        .iter()
                        .map(|(a, _)| format!(" +{}", a.display()))
                        .collect::<String>(),
                    writable
                        .iter()
                        .map(|a| format!(" +rw {}", a.display()))
                        .collect::<String>()
                ),
                MountOp::MaskFile { path } => format!("mask-file {}\n", path.display()),
                MountOp::MaskSocket { path } => format!("mask-socket {}\n", path.display()),
                MountOp::Sealed { path } => format!("sealed {}\n", path.display()),
                MountOp::Proc { path } => format!("proc {}\n", path.display()),
                MountOp::Devpts { path } => format!("devpts {}\n", path.display()),
                MountOp::Dev { path, pass } => format!(
                    "dev {}{}\n",
                    path.display(),
                    pass.iter()
                        .map(|d| format!(" +{}", d.display()))
                        .collect::<String>()
                ),
                MountOp::File { path, contents } => {
                    format!("file {} {:?}\n", path.display(), contents)
                }
            };
        }
        s
    }

    #[test]
    fn golden_namespaced_plan() {
        let p = plan(&input(), &fs()).unwrap();
        let expected = "\
create dir /home/u/proj/.claude
create dir /home/u/proj/.git/hooks
create dir /home/u/proj/.sandpit.toml
tmpfs /tmp
dev /dev
tmpfs /dev/shm
rw /home/u/proj
rw /home/u/proj/.git nofollow
sealed /home/u/proj/.claude
sealed /home/u/proj/.sandpit.toml
rw /home/u/.sandpit/run/1
ro /home/u/proj/.git/config nofollow
sealed /home/u/proj/.git/hooks
mask-file /home/u/.netrc
mask-dir /home/u/.ssh
mask-dir /home/u/.config/gh +/home/u/.config/gh/config.yml
proc /proc
file /etc/resolv.conf \"# written by sandpit\\nnameserver 127.0.0.53\\noptions edns0\\n\"
";
        assert_eq!(render(&p), expected);
        assert_eq!(p.unmasked_missing, vec![PathBuf::from("/home/u/.aws")]);
        assert_eq!(
            p.landlock.writable,
            vec![
                PathBuf::from("/dev/shm"),
                "/home/u/.sandpit/run/1".into(),
                "/home/u/proj".into(),
                "/tmp".into()
            ]
        );
        assert_eq!(p.landlock.tcp_connect, None);
        assert_eq!(p.seccomp, seccomp::Profile::Namespaced);
        assert_eq!(
            p.net,
            NetPlan::Bridge {
                port: 3128,
                relay_to: "/home/u/.sandpit/run/1/proxy.sock".into(),
                dns_relay_to: None,
                udp: false,
            }
        );
        assert_eq!(p.env[0], ("TMPDIR".into(), "/home/u/.sandpit/run/1".into()));
        assert!(p.weaker.is_empty());
    }

    /// The process limit is set only where it holds, and the plan says why not.
    #[test]
    fn the_process_limit_only_where_the_kernel_counts_the_sandbox_alone() {
        let p = plan(&input(), &fs()).unwrap();
        assert_eq!(p.processes, Some(8192));
        assert!(p.weaker.is_empty(), "{:?}", p.weaker);
        let mut i = input();
        i.processes = 0;
        let p = plan(&i, &fs()).unwrap();
        assert_eq!(p.processes, None);
        assert!(p.weaker.is_empty(), "{:?}", p.weaker);
        let mut i = input();
        i.processes_void = Some("the kernel does not apply it to root");
        let p = plan(&i, &fs()).unwrap();
        assert_eq!(p.processes, None);
        assert!(p.weaker.contains(
            &"no process limit (limits.processes: the kernel does not apply it to root)".into()
        ));
        let mut i = input();
        i.mode = Mode::LandlockOnly;
        i.processes_void = super::super::process_limit_void(false);
        let p = plan(&i, &fs()).unwrap();
        assert_eq!(p.processes, None);
        assert!(p.weaker.contains(
            &"no process limit (limits.processes: without a user namespace it would count every process of your user)".into()
        ));
        // Without a user namespace there is none even if the input forgot why.
        i.processes_void = None;
        assert_eq!(plan(&i, &fs()).unwrap().processes, None);
    }

    #[test]
    fn scratch_inside_state_dir_stays_writable_above_read_only_state() {
        // The whole home as workspace: the state dir inside it must be re-protected.
        let mut i = input();
        i.workspace = "/home/u".into();
        let p = plan(&i, &fs()).unwrap();
        let pos = |want: &MountOp| p.mounts.iter().position(|m| m == want).unwrap();
        let state = pos(&MountOp::ReadOnly {
            path: "/home/u/.sandpit".into(),
            no_symlinks: false,
        });
        let scratch = pos(&MountOp::Writable {
            path: "/home/u/.sandpit/run/1".into(),
            no_symlinks: false,
        });
        assert!(state < scratch);
    }

    #[test]
    fn home_under_tmp_is_re_exposed_read_only_before_the_workspace() {
        let mut i = input();
        i.home = "/tmp/t/home".into();
        i.workspace = "/tmp/t/home/proj".into();
        i.cwd = i.workspace.clone();
        i.write_protected.clear();
        i.read_denied = vec!["/tmp/t/home/.ssh".into()];
        let f = FakeFs::new(&[
            ("/tmp/t/home", Kind::Dir),
            ("/tmp/t/home/proj", Kind::Dir),
            ("/tmp/t/home/.ssh", Kind::Dir),
            ("/home/u/.sandpit", Kind::Dir),
        ]);
        let r = render(&plan(&i, &f).unwrap());
        assert!(
            r.starts_with(
                "tmpfs /tmp\ndev /dev\ntmpfs /dev/shm\nro /tmp/t/home\nrw /tmp/t/home/proj\n\
                 rw /home/u/.sandpit/run/1\nmask-dir /tmp/t/home/.ssh\n"
            ),
            "{r}"
        );
    }

    #[test]
    fn writable_root_inside_a_masked_dir_is_re_exposed_writable() {
        let mut i = input();
        i.scratch = "/run/user/1000/sandpit/run-1".into();
        i.read_denied = vec!["/run/user/1000".into()];
        let mut f = fs();
        f.0.insert("/run/user/1000".into(), Kind::Dir);
        let r = render(&plan(&i, &f).unwrap());
        assert!(
            r.contains("mask-dir /run/user/1000 +rw /run/user/1000/sandpit/run-1\n"),
            "{r}"
        );
    }

    #[test]
    fn the_private_tmpfs_mounts_take_limits_tmp_bytes() {
        let mut i = input();
        i.tmp_bytes = 1 << 20;
        let r = render(&plan(&i, &fs()).unwrap());
        assert!(
            r.contains("tmpfs /tmp size=1048576\n") && r.contains("tmpfs /dev/shm size=1048576\n"),
            "{r}"
        );
        // The scratch dir too, in place of its bind; with no limit it stays a bind.
        assert!(
            r.contains(&format!("tmpfs {} size=1048576\n", i.scratch.display())),
            "{r}"
        );
        i.tmp_bytes = 0;
        let r = render(&plan(&i, &fs()).unwrap());
        assert!(
            !r.contains(&format!("tmpfs {}", i.scratch.display())),
            "{r}"
        );
    }

    #[test]
    fn limits_memory_takes_a_cgroup_where_one_is_delegated_else_rlimit_data() {
        use super::super::memory::Memory;
        let mut i = input();
        i.memory = 1 << 30;
        i.memory_cgroup = Ok("/sys/fs/cgroup/u.scope".into());
        let p = plan(&i, &fs()).unwrap();
        assert_eq!(
            p.memory,
            Some(Memory::Cgroup {
                own: "/sys/fs/cgroup/u.scope".into(),
                bytes: 1 << 30
            })
        );
        assert!(
            !p.weaker.iter().any(|w| w.contains("memory")),
            "{:?}",
            p.weaker
        );
        i.memory_cgroup = Err("not delegated".into());
        let p = plan(&i, &fs()).unwrap();
        assert_eq!(p.memory, Some(Memory::Data { bytes: 1 << 30 }));
        assert!(
            p.weaker
                .iter()
                .any(|w| w.contains("RLIMIT_DATA") && w.contains("no cgroup: not delegated")),
            "{:?}",
            p.weaker
        );
        i.memory = 0;
        assert_eq!(plan(&i, &fs()).unwrap().memory, None);
    }

    #[test]
    fn host_sockets_are_masked_where_the_sandbox_would_see_them() {
        let mut i = input();
        i.host_sockets = [
            "/home/u/.local/d.sock",
            "/home/u/proj/dev.sock",
            "/tmp/.X11-unix/X0",
            "/home/u/.ssh/agent.sock",
        ]
        .map(PathBuf::from)
        .to_vec();
        let r = render(&plan(&i, &fs()).unwrap());
        let masked: Vec<&str> = r.lines().filter(|l| l.starts_with("mask-socket")).collect();
        // The private /tmp hides the third, the mask over ~/.ssh the fourth.
        assert_eq!(
            masked,
            [
                "mask-socket /home/u/.local/d.sock",
                "mask-socket /home/u/proj/dev.sock"
            ],
            "{r}"
        );
        // One in a carve-out or a writable root inside a mask comes back with it.
        i.read_allowed.push("/home/u/.ssh/pub".into());
        i.host_sockets.push("/home/u/.ssh/pub/s.sock".into());
        let r = render(&plan(&i, &fs()).unwrap());
        assert!(r.contains("mask-socket /home/u/.ssh/pub/s.sock\n"), "{r}");
        i.mode = Mode::LandlockOnly;
        let r = render(&plan(&i, &fs()).unwrap());
        assert!(!r.contains("mask-socket"), "{r}");
    }

    #[test]
    fn a_gitfile_above_protected_paths_is_bound_read_only() {
        // A worktree's or submodule's `.git` file: `.git/hooks` and `.git/config`
        // can never be made beneath it, but `gitdir: evil` could be written into it.
        let mut f = fs();
        f.0.insert("/home/u/proj/.git".into(), Kind::File);
        f.0.remove(&PathBuf::from("/home/u/proj/.git/config"));
        let r = render(&plan(&input(), &f).unwrap());
        let git: Vec<&str> = r.lines().filter(|l| l.contains(".git")).collect();
        assert_eq!(git, ["ro /home/u/proj/.git nofollow"], "{r}");
    }

    #[test]
    fn files_git_reads_when_present_get_no_placeholder() {
        let mut i = input();
        i.write_protected.extend([
            PathBuf::from("/home/u/proj/.git/commondir"),
            PathBuf::from("/home/u/proj/.git/config.worktree"),
            PathBuf::from("/home/u/proj/HEAD"),
            PathBuf::from("/home/u/proj/sub/HEAD"),
        ]);
        let r = render(&plan(&i, &fs()).unwrap());
        assert!(
            !r.contains("commondir") && !r.contains("config.worktree") && !r.contains("proj/HEAD"),
            "{r}"
        );
        assert_eq!(
            plan(&i, &fs()).unwrap().absent_git_files,
            [
                PathBuf::from("/home/u/proj/.git/commondir"),
                PathBuf::from("/home/u/proj/.git/config.worktree"),
                PathBuf::from("/home/u/proj/HEAD"),
            ]
        );
        let mut f = fs();
        f.0.insert("/home/u/proj/.git/commondir".into(), Kind::File);
        let p = plan(&i, &f).unwrap();
        assert!(render(&p).contains("ro /home/u/proj/.git/commondir nofollow"));
        assert_eq!(
            p.absent_git_files,
            [
                PathBuf::from("/home/u/proj/.git/config.worktree"),
                PathBuf::from("/home/u/proj/HEAD")
            ]
        );
    }

    #[test]
    fn inside_agrees_with_path_starts_with() {
        for (p, r) in [
            ("/a/b", "/a"),
            ("/a/b", "/a/b"),
            ("/a/bc", "/a/b"),
            ("/a", "/a/b"),
            ("/a/b", "/"),
            ("/", "/"),
            ("/a/b/c", "/a/b/"),
            ("/ab", "/a"),
        ] {
            let (p, r) = (Path::new(p), Path::new(r));
            assert_eq!(inside(p, r), p.starts_with(r), "{p:?} in {r:?}");
        }
    }

    #[test]
    fn an_existing_empty_protected_dir_is_sealed_and_listed_as_a_placeholder() {
        // Another run's placeholder: if that run removes it before this one's spawn
        // takes the placeholder lock, the spawn makes it again.
        let mut f = fs();
        f.0.insert("/home/u/proj/.sandpit.toml".into(), Kind::Dir);
        let p = plan(&input(), &f).unwrap();
        assert!(p.mounts.contains(&MountOp::Sealed {
            path: "/home/u/proj/.sandpit.toml".into()
        }));
        assert!(p.placeholders.contains(&Placeholder {
            path: "/home/u/proj/.sandpit.toml".into(),
            file: false,
        }));
    }

    #[test]
    fn a_missing_protected_file_outside_the_workspace_gets_an_empty_file() {
        // An agent's state directory (codex: `~/.codex` writable, its config.toml
        // protected): the agent reads the config when it is there, and a directory
        // would stop it. A name without an extension, and any name in the workspace,
        // still gets a sealed directory.
        let mut i = input();
        i.writable.push("/home/u/.codex".into());
        i.write_protected.extend(
            [
                "/home/u/.codex/config.toml",
                "/home/u/.codex/skills",
                "/home/u/proj/.mcp.json",
            ]
            .map(PathBuf::from),
        );
        let mut f = fs();
        f.0.insert("/home/u/.codex".into(), Kind::Dir);
        let p = plan(&i, &f).unwrap();
        let config = PathBuf::from("/home/u/.codex/config.toml");
        assert!(p.placeholders.contains(&Placeholder {
            path: config.clone(),
            file: true
        }));
        assert!(p.mounts.contains(&MountOp::ReadOnly {
            path: config.clone(),
            no_symlinks: true
        }));
        // A dot-file that is always a file.
        let mut j = i.clone();
        j.writable.push("/home/u/.gemini".into());
        j.write_protected.push("/home/u/.gemini/.env".into());
        f.0.insert("/home/u/.gemini".into(), Kind::Dir);
        assert!(plan(&j, &f).unwrap().placeholders.contains(&Placeholder {
            path: "/home/u/.gemini/.env".into(),
            file: true
        }));
        for dir in ["/home/u/.codex/skills", "/home/u/proj/.mcp.json"] {
            assert!(p.placeholders.contains(&Placeholder::dir(Path::new(dir))));
            assert!(p.mounts.contains(&MountOp::Sealed { path: dir.into() }));
        }
        // Another run's (an empty file there now) is listed too, so that this run's
        // spawn makes it again if that run removes it first; a file with content is
        // only bound.
        f.0.insert(config.clone(), Kind::File);
        f.2.push(config.clone());
        let p = plan(&i, &f).unwrap();
        assert!(p.placeholders.iter().any(|ph| ph.path == config && ph.file));
        f.2.clear();
        let p = plan(&i, &f).unwrap();
        assert!(!p.placeholders.iter().any(|ph| ph.path == config));
        assert!(p.mounts.contains(&MountOp::ReadOnly {
            path: config,
            no_symlinks: true
        }));
    }

    #[test]
    fn devices_are_passed_into_dev_unless_reading_them_is_refused() {
        let mut i = input();
        i.devices = vec!["/dev/kvm".into(), "/dev/dri".into(), "/dev/tty3".into()];
        i.read_denied.push("/dev/tty3".into());
        let mut f = fs();
        f.0.insert("/dev".into(), Kind::Dir);
        f.0.insert("/dev/tty3".into(), Kind::File);
        let p = plan(&i, &f).unwrap();
        assert!(p.mounts.contains(&MountOp::Dev {
            path: "/dev".into(),
            pass: vec!["/dev/kvm".into(), "/dev/dri".into()],
        }));
        // No mask under /dev: nothing of the host's is there to hide.
        assert!(!p.mounts.iter().any(|m| m.path().starts_with("/dev/tty3")));
        // Without a mount namespace there is no /dev of the sandbox's, and it says so.
        i.mode = Mode::LandlockOnly;
        let p = plan(&i, &f).unwrap();
        assert!(!p.mounts.iter().any(|m| matches!(m, MountOp::Dev { .. })));
        assert!(p.weaker.iter().any(|w| w.contains("/dev")));
    }

    #[test]
    fn a_json_placeholder_holds_an_empty_object() {
        assert_eq!(
            placeholder_contents(Path::new("/h/.gemini/settings.json")),
            b"{}\n"
        );
        assert_eq!(
            placeholder_contents(Path::new("/h/.config/x.jsonc")),
            b"{}\n"
        );
        assert_eq!(
            placeholder_contents(Path::new("/h/.codex/config.toml")),
            b""
        );
        assert_eq!(placeholder_contents(Path::new("/h/.codex/AGENTS.md")), b"");
    }

    #[test]
    fn a_directory_that_is_no_repository_gets_a_sealed_git() {
        let mut f = fs();
        f.0.remove(&PathBuf::from("/home/u/proj/.git"));
        f.0.remove(&PathBuf::from("/home/u/proj/.git/config"));
        let p = plan(&input(), &f).unwrap();
        assert!(p.sealed_git());
        assert!(p.mounts.contains(&MountOp::Sealed {
            path: "/home/u/proj/.git".into()
        }));
        assert!(p.placeholders.contains(&Placeholder {
            path: "/home/u/proj/.git".into(),
            file: false,
        }));
        // In a repository nothing seals `.git` itself.
        assert!(!plan(&input(), &fs()).unwrap().sealed_git());
    }

    #[test]
    fn symlinked_protected_path_is_refused() {
        let mut f = fs();
        f.1.push("/home/u/proj/.git".into());
        assert!(matches!(
            plan(&input(), &f),
            Err(PlanError::SymlinkInProtected(_))
        ));
    }

    #[test]
    fn relative_or_dotted_paths_are_refused() {
        let mut i = input();
        i.read_denied.push("/home/u/../u/.ssh".into());
        assert!(matches!(plan(&i, &fs()), Err(PlanError::NotCanonical(_))));
        let mut i = input();
        i.workspace = "proj".into();
        assert!(plan(&i, &fs()).is_err());
    }

    /// The UDP relay's TUN device exists only in a network namespace of the run's
    /// own: in fallback mode seccomp refuses UDP sockets instead.
    #[test]
    fn udp_is_relayed_in_namespace_mode_only() {
        let mut i = input();
        let udp_of = |i: &Input| match plan(i, &fs()).unwrap().net {
            NetPlan::Bridge { udp, .. } => udp,
            NetPlan::Offline => panic!("offline"),
        };
        assert!(!udp_of(&i));
        if let Network::Proxy { udp, .. } = &mut i.network {
            *udp = true;
        }
        assert!(udp_of(&i));
        i.mode = Mode::LandlockOnly;
        assert!(!udp_of(&i));
    }

    #[test]
    fn fallback_plan_has_no_mounts_and_says_so() {
        let mut i = input();
        i.mode = Mode::LandlockOnly;
        let p = plan(&i, &fs()).unwrap();
        assert!(p.mounts.is_empty());
        assert!(p.placeholders.is_empty());
        assert_eq!(p.landlock.tcp_connect, Some(vec![3128]));
        assert_eq!(p.seccomp, seccomp::Profile::Fallback);
        assert!(p.weaker.iter().any(|w| w.contains("not masked")));
        let r = p.landlock.reads.clone().unwrap();
        let paths = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(
            r.list_only,
            paths(&["/", "/home", "/home/u", "/home/u/.config", "/home/u/.ssh"])
                .into_iter()
                .filter(|p| p != Path::new("/home/u/.ssh"))
                .collect::<Vec<_>>()
        );
        // Siblings of the denied paths are readable; the denied ones are not; the
        // carve-out inside ~/.config/gh is.
        assert_eq!(
            r.read,
            paths(&[
                "/etc",
                "/home/u/.config/gh/config.yml",
                "/home/u/.sandpit",
                "/home/u/proj",
            ])
        );
        i.network = Network::Offline;
        assert_eq!(plan(&i, &fs()).unwrap().landlock.tcp_connect, Some(vec![]));
    }

    #[test]
    fn loopback_services_become_listeners_inside_or_landlock_ports_in_fallback() {
        use super::super::loopback::Loopback;
        let svc = |a: &str| Loopback {
            listen: a.parse().unwrap(),
            targets: vec![a.parse().unwrap()],
            entry: "localhost:11434".into(),
            rule: String::new(),
        };
        let mut i = input();
        i.loopback = vec![
            svc("127.0.0.1:11434"),
            svc("[::1]:11434"),
            svc("127.0.0.1:3128"),
        ];
        let p = plan(&i, &fs()).unwrap();
        // The bridge's own address is not given away; the collision is reported.
        assert_eq!(p.loopback, vec![svc("127.0.0.1:11434"), svc("[::1]:11434")]);
        assert!(
            p.weaker.iter().any(|w| w.contains("collides")),
            "{:?}",
            p.weaker
        );
        assert!(p.landlock.deny_tcp_bind);
        assert!(!p.mirror);
        i.allow_local_binding = true;
        let p = plan(&i, &fs()).unwrap();
        assert!(p.mirror && !p.landlock.deny_tcp_bind);
        i.mode = Mode::LandlockOnly;
        let p = plan(&i, &fs()).unwrap();
        assert!(p.loopback.is_empty() && !p.mirror);
        assert_eq!(p.landlock.tcp_connect, Some(vec![3128, 11434]));
        assert!(p.weaker.iter().any(|w| w.contains("allowed by port")));
    }
}
