//! The decision boundary of the library: [`Engine`] wraps the launcher's
//! `sandpit_policy::Policy` (loaded from its snapshot) and answers the hooks.
//!
//! Verdicts come from `sandpit_policy::decide`, so the interposer, the kernel plan
//! and `sandpit explain` agree and the agent sees the same reason text everywhere.
//! Because `decide` builds its reason strings for every answer, the hot paths (open,
//! exec) first run an allocation-free check compiled from the same rules with the
//! same semantics (deepest rule wins, by whole path components); only when that check
//! does not clearly allow is `decide` asked, and its verdict is final.
use sandpit_policy::matchers::Glob;
use sandpit_policy::{Decision, Policy, Request};
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// How the hooks treat a connection: through sandpit's proxy, or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetMode {
    /// Every TCP connection goes to the proxy, which decides by host. The policy's
    /// "unrestricted" is this too: the proxy lifts host filtering there, and for
    /// the hooks only UDP changes (to public addresses, [`Engine::datagram`]);
    /// binding, raw sockets and loopback services stay as they are.
    Filtered,
    Offline,
}

/// A denial: the line the sandboxed program sees on stderr (without newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied(pub String);

/// The four path-rule lists, by their bit in [`PathTree`].
const BLOCK_READ: usize = 0;
const ALLOW_READ: usize = 1;
const BLOCK_WRITE: usize = 2;
const ALLOW_WRITE: usize = 3;

/// The path rules of all four lists as one tree of path components, so a path is
/// judged in one walk down its own components that ends where it leaves the rules'
/// tree (a workspace file usually two or three nodes below `/`), instead of one
/// prefix comparison per rule: the default policy names dozens of paths.
///
/// A rule contains a path exactly when `under(path, rule)`: the rule's components
/// (split on `/`, empty ones included) are a prefix of the path's.
struct PathTree {
    nodes: Vec<Node>,
    /// The chain of single-child nodes below `/` that no rule names (every rule
    /// lies under `/tmp/x` when home, workspace and scratch do), spelt as a path:
    /// a path outside it is contained by no rule, one comparison.
    trunk: Vec<u8>,
    /// The node at the end of the trunk, and its depth.
    start: usize,
    start_depth: usize,
    /// Where most opens land (the workspace, the scratch directory, home), each
    /// with the walk down to it done once: a path inside one starts there, one
    /// comparison instead of a lookup per component above it.
    anchors: Vec<Anchor>,
    /// The rules that are globs (`sandpit_policy::glob`), by list: matched against
    /// each path after the walk, as they name no single node.
    globs: Vec<(usize, Vec<u8>)>,
}

/// A walk's state: the node reached, its depth, and per list the depth of the
/// deepest rule on the way.
#[derive(Clone, Copy)]
struct Walk {
    node: usize,
    depth: usize,
    found: [Option<usize>; 4],
}

struct Anchor {
    /// A path whose every component is a node, so any path that continues it past
    /// a `/` is walked through `at`.
    path: Box<[u8]>,
    at: Walk,
}

#[derive(Default)]
struct Node {
    /// Bit `1 << list` for each list with a rule naming exactly this node.
    lists: u8,
    /// One bit per child, at [`bit`] of its key: a name whose bit is clear is no
    /// child, known without reading the children — most lookups miss (a workspace
    /// file's first component below the workspace is rarely a protected name), and
    /// after a system call the children are seldom still in cache.
    filter: u64,
    /// Sorted by `key`, so a lookup is a binary search over integers (a home
    /// directory node has dozens of children) and one comparison of names.
    children: Vec<Child>,
}

/// A key's bit in [`Node::filter`] (Fibonacci hashing: the top six bits).
fn bit(key: u64) -> u64 {
    1 << (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

struct Child {
    key: u64,
    name: Box<[u8]>,
    node: u32,
}

/// A component's first eight bytes, zero-padded (a component holds no NUL): equal
/// names have equal keys, and names of up to eight bytes equal keys only if equal.
fn key(comp: &[u8]) -> u64 {
    match comp.first_chunk::<8>() {
        Some(head) => u64::from_le_bytes(*head),
        // Byte by byte: a copy into a zeroed array is a call to memcpy and a
        // stalled load of bytes just stored, on every short component of every path.
        None => comp.iter().rev().fold(0, |k, &b| (k << 8) | u64::from(b)),
    }
}

impl PathTree {
    /// The tree of `lists`, with `anchors` (paths most opens lie under) that name
    /// nodes as shortcuts.
    fn new(lists: [&[sandpit_policy::Rule<std::path::PathBuf>]; 4], anchors: &[&[u8]]) -> PathTree {
        let mut t = PathTree {
            nodes: vec![Node::default()],
            trunk: Vec::new(),
            start: 0,
            start_depth: 0,
            anchors: Vec::new(),
            globs: Vec::new(),
        };
        for (list, rules) in lists.iter().enumerate() {
            for r in *rules {
                let mut p = r.value.as_os_str().as_bytes();
                if sandpit_policy::glob::is_glob(p) {
                    t.globs.push((list, p.to_vec()));
                    continue;
                }
                // As `under` reads a prefix: one trailing `/` is not a component.
                if p.len() > 1 && p.ends_with(b"/") {
                    p = &p[..p.len() - 1];
                }
                // `under` never matches an absolute path below a relative rule; the
                // empty rule (like `/`) contains every absolute path.
                let Some(rest) = p.strip_prefix(b"/").or(p.is_empty().then_some(&b""[..])) else {
                    continue;
                };
                let mut node = 0;
                if !rest.is_empty() {
                    for comp in rest.split(|&b| b == b'/') {
                        node = t.child_or_insert(node, comp);
                    }
                }
                t.nodes[node].lists |= 1 << list;
            }
        }
        while let [only] = &t.nodes[t.start].children[..] {
            if t.nodes[t.start].lists != 0 || only.name.is_empty() {
                break;
            }
            t.trunk.push(b'/');
            t.trunk.extend_from_slice(&only.name);
            t.start = only.node as usize;
            t.start_depth += 1;
        }
        for &a in anchors {
            if let Some((at, true)) = t.begin(a).map(|(w, rest)| t.walk(w, rest)) {
                t.anchors.push(Anchor { path: a.into(), at });
            }
        }
        // The longer first: a path under both is walked from the deeper.
        t.anchors.sort_by_key(|a| std::cmp::Reverse(a.path.len()));
        t
    }

    fn child(&self, node: usize, comp: &[u8]) -> Option<usize> {
        let k = key(comp);
        let node = &self.nodes[node];
        if node.filter & bit(k) == 0 {
            return None;
        }
        let children = &node.children;
        let at = children.partition_point(|c| c.key < k);
        children[at..]
            .iter()
            .take_while(|c| c.key == k)
            // Equal keys: the first eight bytes are equal.
            .find(|c| c.name.len() == comp.len() && c.name.get(8..) == comp.get(8..))
            .map(|c| c.node as usize)
    }

    fn child_or_insert(&mut self, node: usize, comp: &[u8]) -> usize {
        if let Some(i) = self.child(node, comp) {
            return i;
        }
        let i = self.nodes.len();
        self.nodes.push(Node::default());
        let k = key(comp);
        self.nodes[node].filter |= bit(k);
        let children = &mut self.nodes[node].children;
        let at = children.partition_point(|c| c.key <= k);
        children.insert(
            at,
            Child {
                key: k,
                name: comp.into(),
                node: i as u32,
            },
        );
        i
    }

    /// Per list, the depth (number of components) of the deepest rule containing
    /// the absolute path `p`.
    fn deepest(&self, p: &[u8]) -> [Option<usize>; 4] {
        let mut found = self.deepest_in_tree(p);
        for (list, pat) in &self.globs {
            if let Some(d) = sandpit_policy::glob::root_depth(p, pat) {
                found[*list] = found[*list].max(Some(d));
            }
        }
        found
    }

    fn deepest_in_tree(&self, p: &[u8]) -> [Option<usize>; 4] {
        for a in &self.anchors {
            match p.strip_prefix(&a.path[..]) {
                Some([]) => return a.at.found,
                Some([b'/', rest @ ..]) => return self.walk(a.at, Some(rest)).0.found,
                _ => {}
            }
        }
        match self.begin(p) {
            Some((at, rest)) => self.walk(at, rest).0.found,
            None => [None; 4],
        }
    }

    /// The walk at the end of the trunk and the components of `p` after it, or
    /// `None` when `p` lies outside the trunk (no rule contains it).
    fn begin<'p>(&self, p: &'p [u8]) -> Option<(Walk, Option<&'p [u8]>)> {
        // Not `strip_prefix` of an empty trunk: that calls memcmp with length 0 and
        // the empty Vec's dangling pointer (address 1), and glibc's AVX-512 memcmp
        // reads it with a masked load from the unmapped page 0, which the CPU
        // serves slowly (a fault-suppression assist): measured ~10 ns per path.
        if self.trunk.is_empty() {
            return Some((self.at_start(), Some(p.strip_prefix(b"/")?)));
        }
        let rest = match p.strip_prefix(&self.trunk[..])? {
            [] => None,
            [b'/', r @ ..] => Some(r),
            _ => return None,
        };
        Some((self.at_start(), rest))
    }

    /// The walk at the end of the trunk.
    fn at_start(&self) -> Walk {
        let mut at = Walk {
            node: self.start,
            depth: self.start_depth,
            found: [None; 4],
        };
        at.note(&self.nodes[self.start]);
        at
    }

    /// Walk on from `at` down the `/`-separated components `rest`, as far as the
    /// tree goes; true when every component was a node.
    fn walk(&self, mut at: Walk, rest: Option<&[u8]>) -> (Walk, bool) {
        for comp in rest.into_iter().flat_map(|r| r.split(|&b| b == b'/')) {
            let Some(next) = self.child(at.node, comp) else {
                return (at, false);
            };
            at.node = next;
            // An empty component (`//`) adds no depth.
            at.depth += usize::from(!comp.is_empty());
            at.note(&self.nodes[next]);
        }
        (at, true)
    }
}

impl Walk {
    fn note(&mut self, node: &Node) {
        for (list, f) in self.found.iter_mut().enumerate() {
            if node.lists & (1 << list) != 0 {
                *f = Some(self.depth);
            }
        }
    }
}

pub struct Engine {
    policy: Policy,
    paths: PathTree,
    /// Lowercased ASCII substrings of `exec.block`, when every entry is one and no
    /// adversary reviews commands (otherwise every exec asks `decide`).
    exec_plain: Option<Vec<Vec<u8>>>,
    /// `env.withhold`, compiled: every variable of every environment passed on is
    /// matched against it.
    withhold: Vec<Glob>,
    /// `env.agent`, compiled: the withheld variables the agent keeps.
    agent: Vec<Glob>,
    home: Vec<u8>,
    state_dir: Vec<u8>,
    /// Learn mode (the snapshot's `learn`, set by `sandpit run --learn`; never from
    /// the environment, which the sandbox controls): path and exec denials are
    /// recorded to the audit socket as `learn` and allowed; the kernel layer still
    /// holds.
    learn: bool,
    /// The adversary's control socket (`SANDPIT_ADVERSARY_SOCKET` as this process
    /// received it): asked, blocking, for every exec the rules send to review.
    adversary_socket: Option<std::ffi::OsString>,
    /// `adversary.review` names writes: a write outside these two directories (the
    /// workspace, the scratch `$TMPDIR`) is not allowed on the fast path.
    review_write: Option<(Vec<u8>, Vec<u8>)>,
    /// This process is a command the agent spawned (`crate::state::Hide::Spawned`):
    /// `files.agent_read` is not for it.
    spawned: bool,
}

impl Engine {
    pub fn new(policy: Policy) -> Engine {
        let reviews_exec = policy
            .adversary
            .as_ref()
            .is_some_and(|a| a.review.contains(&sandpit_policy::ReviewEvent::Exec));
        let exec_plain = if reviews_exec {
            None
        } else {
            policy
                .exec
                .block
                .iter()
                .map(|r| {
                    let s = &r.value.source;
                    (!r.value.is_regex() && s.is_ascii())
                        .then(|| s.to_ascii_lowercase().into_bytes())
                })
                .collect()
        };
        // Compile regexes now, not lazily in a forked child.
        for r in &policy.exec.block {
            let _ = r.value.matches("");
        }
        let review_write = policy
            .adversary
            .as_ref()
            .is_some_and(|a| a.review.contains(&sandpit_policy::ReviewEvent::Write))
            .then(|| {
                (
                    policy.context.workspace.as_os_str().as_bytes().to_vec(),
                    policy.context.scratch.as_os_str().as_bytes().to_vec(),
                )
            });
        Engine {
            review_write,
            paths: PathTree::new(
                [
                    &policy.files.block_read,
                    &policy.files.allow_read,
                    &policy.files.block_write,
                    &policy.files.allow_write,
                ],
                &[
                    policy.context.workspace.as_os_str().as_bytes(),
                    policy.context.scratch.as_os_str().as_bytes(),
                    policy.context.home.as_os_str().as_bytes(),
                ],
            ),
            exec_plain,
            withhold: policy
                .env
                .withhold
                .iter()
                .map(|g| Glob::new(&g.value))
                .collect(),
            agent: policy
                .env
                .agent
                .iter()
                .map(|g| Glob::new(&g.value))
                .collect(),
            home: policy.context.home.as_os_str().as_bytes().to_vec(),
            state_dir: policy.context.state_dir.as_os_str().as_bytes().to_vec(),
            learn: policy.learn,
            policy,
            adversary_socket: None,
            spawned: false,
        }
    }

    /// This process is a command the agent spawned.
    pub fn set_spawned(&mut self) {
        self.spawned = true;
    }

    /// Whether `p` is, or lies below, one of the agent's own files that this
    /// process may not touch.
    fn hidden(&self, p: &[u8]) -> bool {
        self.spawned
            && (self.policy.files.agent_read.iter())
                .any(|r| under(p, r.value.as_os_str().as_bytes()))
    }

    pub fn set_adversary_socket(&mut self, socket: Option<std::ffi::OsString>) {
        self.adversary_socket = socket;
    }

    /// Send a structured denial to the audit socket; in learn mode, allow it.
    fn audited(
        &self,
        action: &[u8],
        subject: &[&[u8]],
        r: Result<(), Denied>,
    ) -> Result<(), Denied> {
        match r {
            Ok(()) => Ok(()),
            Err(d) => {
                let kind: &[u8] = if self.learn { b"learn" } else { b"deny" };
                crate::net::audit::record(kind, action, d.0.as_bytes(), subject);
                if self.learn {
                    Ok(())
                } else {
                    Err(d)
                }
            }
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    fn read_ok(found: &[Option<usize>; 4]) -> bool {
        match (found[BLOCK_READ], found[ALLOW_READ]) {
            (Some(b), Some(a)) => a > b,
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    /// Allocation-free: true only when `decide` would certainly allow. `Write`
    /// includes `Read`'s check (a read-only path is never written on the fast path).
    pub fn path_allowed_fast(&self, access: Access, p: &[u8]) -> bool {
        if self.hidden(p) {
            return false;
        }
        // A `.env` file past the run's stopped `.env` search: the slow path decides.
        if self.policy.files.dotenv_beyond.is_some()
            && sandpit_policy::is_dotenv_name(p.rsplit(|b| *b == b'/').next().unwrap_or(p))
        {
            return false;
        }
        let found = self.paths.deepest(p);
        match access {
            Access::Read => Self::read_ok(&found),
            Access::Write => {
                Self::rules_may_write(&found)
                    && self
                        .review_write
                        .as_ref()
                        .is_none_or(|(ws, scratch)| under(p, ws) || under(p, scratch))
            }
        }
    }

    /// `path` is absolute and canonical (no `.`, `..`, `//`, symlinks).
    pub fn path(&self, access: Access, p: &[u8]) -> Result<(), Denied> {
        if self.path_allowed_fast(access, p) {
            return Ok(());
        }
        let path = Path::new(OsStr::from_bytes(p));
        let write = access == Access::Write;
        let req = Request::path(path, write, self.spawned);
        let action: &[u8] = if write { b"write" } else { b"read" };
        let v = sandpit_policy::decide(&self.policy, &req);
        let r = if v.decision == Decision::Review && access == Access::Write {
            // A write outside the workspace that the rules allowed: the adversary has
            // the last word, and every failure to get its ALLOW denies.
            crate::guard::with_guard(|| {
                let cwd = std::env::current_dir()
                    .map(|c| c.into_os_string().into_vec())
                    .unwrap_or_default();
                sandpit_review::review_write(
                    &self.policy,
                    self.adversary_socket.as_deref(),
                    &cwd,
                    p,
                )
                .map(|_| ())
                .map_err(Denied)
            })
        } else {
            verdict(v)
        };
        self.audited(action, &[p], r)
    }

    /// The whole command line (argv joined by spaces) against `exec.block`.
    pub fn exec(&self, argv: &[&[u8]]) -> Result<(), Denied> {
        if let Some(pats) = &self.exec_plain {
            if argv.iter().all(|a| a.is_ascii()) && !pats.iter().any(|p| contains_joined(argv, p)) {
                return Ok(());
            }
        }
        let owned: Vec<String> = argv
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let v = sandpit_policy::decide(&self.policy, &Request::Exec(&owned));
        let r = if v.decision == Decision::Review {
            // Every rule allowed it; the adversary has the last word. No socket, an
            // untrusted one, a dead launcher or a timeout all deny (fail closed).
            crate::guard::with_guard(|| {
                let cwd = std::env::current_dir()
                    .map(|c| c.into_os_string().into_vec())
                    .unwrap_or_default();
                sandpit_review::review_exec(
                    &self.policy,
                    self.adversary_socket.as_deref(),
                    &cwd,
                    argv,
                )
                .map(|_| ())
                .map_err(Denied)
            })
        } else {
            verdict(v)
        };
        self.audited(b"exec", argv, r)
    }

    /// True when the variable `name` must not reach spawned commands.
    pub fn withhold(&self, name: &[u8]) -> bool {
        // A name that is not UTF-8 is matched on its lossy form (borrowed, without a
        // copy, when it is UTF-8).
        let name = String::from_utf8_lossy(name);
        // A credential's variable, the run's CA variables and env.set's reach every
        // program; the variable a real value is read from reaches none.
        if let Some(c) = sandpit_policy::run_env(&self.policy, &name) {
            return !c.reaches();
        }
        self.withhold.iter().any(|g| g.matches(name.as_bytes()))
    }

    /// True when `env.agent` keeps the (withheld) variable `name` for the agent.
    pub fn agent_keeps(&self, name: &[u8]) -> bool {
        let name = String::from_utf8_lossy(name);
        // A credential's real value is nobody's, the agent's neither.
        if sandpit_policy::run_env(&self.policy, &name).is_some_and(|c| !c.reaches()) {
            return false;
        }
        self.agent.iter().any(|g| g.matches(name.as_bytes()))
    }

    /// Whether `program` (absolute, resolved) is one of `env.agent_programs` and the
    /// sandbox cannot write it (`decide`'s `EnvTo::Spawned`, allocation-free: one
    /// the rules might let the sandbox write is never the agent).
    pub fn agent_program(&self, program: &[u8]) -> bool {
        if self.policy.env.agent_program(program).is_none() {
            return false;
        }
        !Self::rules_may_write(&self.paths.deepest(program))
    }

    /// Whether the path rules let a write through (the adversary may still review it).
    fn rules_may_write(found: &[Option<usize>; 4]) -> bool {
        Self::read_ok(found) && found[BLOCK_WRITE].is_none() && found[ALLOW_WRITE].is_some()
    }

    /// Whether `env.agent` names any variable (else no program is ever the agent).
    pub fn keeps_any(&self) -> bool {
        !self.agent.is_empty()
    }

    pub fn net_mode(&self) -> NetMode {
        match self.policy.network.mode.value {
            sandpit_policy::NetMode::Offline => NetMode::Offline,
            sandpit_policy::NetMode::Filtered | sandpit_policy::NetMode::Unrestricted => {
                NetMode::Filtered
            }
        }
    }

    /// The policy's verdict on a direct connection (used for its reason text).
    /// Never learned: the kernel layer would refuse the connection anyway.
    pub fn connect(&self, host: &str, port: u16) -> Result<(), Denied> {
        let r = verdict(sandpit_policy::decide(
            &self.policy,
            &Request::Connect { host, port },
        ));
        if let Err(d) = &r {
            let mut digits = [0u8; 5];
            let n = port_digits(port, &mut digits);
            let subject: [&[u8]; 2] = [host.as_bytes(), &digits[5 - n..]];
            crate::net::audit::record(b"deny", b"connect", d.0.as_bytes(), &subject);
        }
        r
    }

    /// The policy's refusal of `host`, for a lookup the resolver did not answer
    /// (sandpit's DNS responder answers a refused name with REFUSED, which programs
    /// report only as "could not resolve"). Not audited: the responder logged it.
    pub fn lookup(&self, host: &str, port: u16) -> Option<Denied> {
        verdict(sandpit_policy::decide(
            &self.policy,
            &Request::Connect { host, port },
        ))
        .err()
    }

    /// A UDP datagram to `dest`, sandpit's DNS responder aside
    /// (`sandpit_policy::decide_datagram`): public addresses in unrestricted mode,
    /// which the kernel layer relays; nowhere else. A refusal is audited.
    pub fn datagram(&self, dest: std::net::SocketAddr) -> Result<(), Denied> {
        // The machine's own addresses cannot be read from inside the sandbox's
        // network namespace: the kernel layer's relay refuses them.
        let r = verdict(sandpit_policy::decide_datagram(&self.policy, dest, &[]));
        if let Err(d) = &r {
            let mut digits = [0u8; 5];
            let n = port_digits(dest.port(), &mut digits);
            let mut ip = [0u8; 64];
            let mut w = &mut ip[..];
            let _ = std::io::Write::write_fmt(&mut w, format_args!("{}", dest.ip()));
            let left = w.len();
            let ip = &ip[..64 - left];
            let subject: [&[u8]; 2] = [ip, &digits[5 - n..]];
            crate::net::audit::record(b"deny", b"udp", d.0.as_bytes(), &subject);
        }
        r
    }

    /// A connection to the pathname Unix socket `p` (absolute, resolved). The
    /// interposer cannot tell who bound it: it judges by location, and the kernel
    /// layer hides the host's sockets under the writable roots.
    pub fn unix(&self, p: &[u8]) -> Result<(), Denied> {
        let path = Path::new(OsStr::from_bytes(p));
        let r = verdict(sandpit_policy::decide(
            &self.policy,
            &Request::Unix { path, host: false },
        ));
        self.audited(b"unix", &[p], r)
    }

    /// Whether `ip:port` is a host loopback service the policy lists with its port
    /// (`localhost:11434`): the kernel layer makes it reachable directly, so the
    /// connect goes there rather than to the proxy.
    pub fn loopback_service(&self, ip: std::net::IpAddr, port: u16) -> bool {
        sandpit_policy::loopback_service(&self.policy, ip, port).is_some()
    }

    /// A TCP server on `addr` (`sandpit_policy::decide`, as `sandpit explain listen`).
    pub fn listen(&self, addr: std::net::SocketAddr) -> sandpit_policy::Verdict {
        sandpit_policy::decide(&self.policy, &sandpit_policy::Request::Listen(addr))
    }

    /// The home directory the policy was written against (to print `~/…`).
    pub fn home(&self) -> &[u8] {
        &self.home
    }

    /// The state directory the snapshot must live in.
    pub fn state_dir(&self) -> &[u8] {
        &self.state_dir
    }
}

/// `port` in decimal at the end of `out`; returns the number of digits.
fn port_digits(mut port: u16, out: &mut [u8; 5]) -> usize {
    let mut n = 0;
    loop {
        out[4 - n] = b'0' + (port % 10) as u8;
        port /= 10;
        n += 1;
        if port == 0 {
            return n;
        }
    }
}

fn verdict(v: sandpit_policy::Verdict) -> Result<(), Denied> {
    match v.decision {
        Decision::Deny => Err(Denied(v.line())),
        Decision::Allow | Decision::Review => Ok(()),
    }
}

/// Case-insensitive (ASCII) substring `needle` (already lowercase) of `argv`
/// joined by single spaces, without building the joined string.
pub fn contains_joined(argv: &[&[u8]], needle: &[u8]) -> bool {
    let total: usize = argv.iter().map(|a| a.len() + 1).sum::<usize>();
    let len = total.saturating_sub(1);
    if needle.is_empty() {
        return true;
    }
    if needle.len() > len {
        return false;
    }
    // Byte at position k of the joined line.
    let at = |k: usize| -> u8 {
        let mut k = k;
        for a in argv {
            if k < a.len() {
                return a[k].to_ascii_lowercase();
            }
            if k == a.len() {
                return b' ';
            }
            k -= a.len() + 1;
        }
        0
    };
    (0..=len - needle.len()).any(|s| needle.iter().enumerate().all(|(j, &c)| at(s + j) == c))
}

/// `path` equals `prefix` or lies below it (whole components).
pub fn under(path: &[u8], prefix: &[u8]) -> bool {
    let prefix = if prefix.len() > 1 && prefix.ends_with(b"/") {
        &prefix[..prefix.len() - 1]
    } else {
        prefix
    };
    if prefix == b"/" {
        return path.first() == Some(&b'/');
    }
    path.starts_with(prefix) && (path.len() == prefix.len() || path[prefix.len()] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandpit_policy::{Context, Layer, LoadOptions, Source};

    fn engine(user: &str) -> Engine {
        let ctx = Context {
            home: "/h".into(),
            workspace: "/h/p".into(),
            scratch: "/tmp/run".into(),
            state_dir: "/h/.sandpit".into(),
        };
        let mut o = LoadOptions::new(ctx);
        o.user = Some(Source::new(Layer::User, "/h/.sandpit/config.toml", user));
        let p = sandpit_policy::load(&o).unwrap();
        Engine::new(Policy::from_snapshot(&p.snapshot()).unwrap())
    }

    #[test]
    fn fast_check_agrees_with_decide() {
        let e = engine(
            "[files]\nallow_read = [\"~/.ssh/known_hosts\"]\n[exec]\nblock = [\"curl --data\", \"re:nc\\\\s+-e\"]\n",
        );
        let paths: &[&str] = &[
            "/h/.ssh",
            "/h/.ssh/id_rsa",
            "/h/.sshx",
            "/h/.ssh/known_hosts",
            "/h/p",
            "/h/p/x/y",
            "/h/p/.git/hooks/pre-commit",
            "/h/p/.git/config",
            "/h/p/.gitx",
            "/h/.bashrc",
            "/h/.sandpit/x",
            "/tmp/run/a",
            "/tmp/other",
            "/etc/passwd",
            "/",
            "/h",
            "/h/.aws/credentials",
        ];
        for p in paths {
            if e.path_allowed_fast(Access::Write, p.as_bytes()) {
                assert!(e.path_allowed_fast(Access::Read, p.as_bytes()), "{p}");
            }
            for acc in [Access::Read, Access::Write] {
                let fast = e.path_allowed_fast(acc, p.as_bytes());
                let req = match acc {
                    Access::Read => Request::Read(Path::new(p)),
                    Access::Write => Request::Write(Path::new(p)),
                };
                let slow = sandpit_policy::decide(e.policy(), &req).is_allowed();
                assert_eq!(fast, slow, "{acc:?} {p}");
                assert_eq!(e.path(acc, p.as_bytes()).is_ok(), slow, "{acc:?} {p}");
            }
        }
        let d = e.path(Access::Read, b"/h/.ssh/id_rsa").unwrap_err();
        assert!(
            d.0.starts_with(
                "sandpit: blocked read of ~/.ssh/id_rsa (files.block_read \"~/.ssh\" in "
            ),
            "{}",
            d.0
        );
    }

    /// Glob rules: the fast check and `decide` agree on paths each glob matches, at
    /// different depths, and on paths beside them.
    #[test]
    fn fast_check_agrees_with_decide_on_globs() {
        let e = engine(
            "[files]\nblock_read = [\"**/.env\", \"~/.config/*/credentials*\"]\n\
             allow_read = [\"~/p/docs/**/.env\"]\nblock_write = [\"~/p/**/*.pem\"]\n\
             allow_write = [\"~/.cache/*/tmp\"]\n",
        );
        let cases: &[(&str, bool, bool)] = &[
            // (path, readable, writable)
            ("/h/p/.env", false, false),
            ("/h/p/a/b/.env", false, false),
            ("/h/p/a/b/.env/x", false, false),
            ("/h/p/.envx", true, true),
            ("/h/p/docs/.env", true, true),
            ("/h/p/docs/x/.env", true, true),
            ("/h/.config/myapp/credentials.db", false, false),
            ("/h/.config/myapp/other", true, false),
            ("/h/p/k/key.pem", true, false),
            ("/h/p/key.pem", true, false),
            ("/h/p/key.pemx", true, true),
            ("/h/.cache/pip/tmp/x", true, true),
            ("/h/.cache/pip/other", true, false),
        ];
        for (p, read, write) in cases {
            for (acc, want) in [(Access::Read, read), (Access::Write, write)] {
                let req = match acc {
                    Access::Read => Request::Read(Path::new(p)),
                    Access::Write => Request::Write(Path::new(p)),
                };
                let slow = sandpit_policy::decide(e.policy(), &req).is_allowed();
                assert_eq!(slow, *want, "decide {acc:?} {p}");
                if e.path_allowed_fast(acc, p.as_bytes()) {
                    assert!(slow, "fast {acc:?} {p}");
                }
                assert_eq!(e.path(acc, p.as_bytes()).is_ok(), slow, "{acc:?} {p}");
            }
        }
    }

    /// The tree against its definition, `under` for each rule of each list, on every
    /// path made of a small alphabet of components (with empty ones: `//`, a
    /// trailing `/`), for rules spelt as `under` reads them (`/`, empty, a trailing
    /// `/`, relative, names sharing their first eight bytes), and for rule sets
    /// under a trunk (ending at a named node, or at a fork).
    #[test]
    fn path_tree_agrees_with_under() {
        let sets: [[&[&str]; 4]; 3] = [
            [
                &[
                    "/a",
                    "/a/b/c",
                    "/",
                    "/b/",
                    "",
                    "a/b",
                    "/componentA/b",
                    "/componentB",
                ],
                &["/a/b", "/a//b", "/c/a"],
                &["/a/b/c/a", "/b"],
                &["/a/b/", "/c", "/a/b/c/a/b"],
            ],
            [
                &["/c/a/b", "/c/a/ab/c"],
                &["/c/a/b/a"],
                &["/c/a/b//a"],
                &["/c/a/", "/c/a/c/"],
            ],
            [&["/c/a/b"], &[], &["/c/a/ab"], &["/c/a/b/c/a"]],
        ];
        let depth = |p: &str| p.split('/').filter(|c| !c.is_empty()).count();
        let mut checked = 0;
        for (set, rules) in sets.iter().enumerate() {
            let lists = rules.map(|l| {
                l.iter()
                    .map(|p| sandpit_policy::Rule {
                        value: std::path::PathBuf::from(p),
                        origin: sandpit_policy::Origin::builtin("files", p),
                    })
                    .collect::<Vec<_>>()
            });
            // Anchors naming nodes (also through `//`) are taken, others not.
            let anchors: [&[&str]; 3] = [
                &["/a/b", "/a/b/c", "/a//b", "/c", "/zz", "/a/b/", "a/b", "/"],
                &["/c/a/b", "/c/a", "/c/a/x", "/c"],
                &["/c/a/b/c", "/c/a/ab", "/c/a/b", "/c/a/b/a"],
            ];
            let anchors: Vec<&[u8]> = anchors[set].iter().map(|a| a.as_bytes()).collect();
            let tree = PathTree::new([&lists[0], &lists[1], &lists[2], &lists[3]], &anchors);
            let trunk = [&b""[..], b"/c/a", b"/c/a"][set];
            assert_eq!(tree.trunk, trunk, "set {set}");
            let taken: Vec<&[u8]> = tree.anchors.iter().map(|a| &a.path[..]).collect();
            let want: [&[&[u8]]; 3] = [
                &[b"/a/b/c", b"/a//b", b"/a/b", b"/c"],
                &[b"/c/a/b", b"/c/a"],
                &[b"/c/a/b/c", b"/c/a/ab", b"/c/a/b"],
            ];
            assert_eq!(taken, want[set], "set {set}");
            let mut paths = vec![String::new()];
            for _ in 0..5 {
                let mut longer = vec![];
                for p in &paths {
                    for c in ["a", "b", "c", "", "ab", "componentA", "componentB"] {
                        longer.push(format!("{p}/{c}"));
                    }
                }
                for p in &longer {
                    let want: Vec<Option<usize>> = rules
                        .iter()
                        .map(|l| {
                            l.iter()
                                .filter(|r| under(p.as_bytes(), r.as_bytes()))
                                .map(|r| depth(r))
                                .max()
                        })
                        .collect();
                    assert_eq!(tree.deepest(p.as_bytes()).to_vec(), want, "set {set}: {p}");
                    checked += 1;
                }
                paths = longer;
            }
            assert_eq!(tree.deepest(b"c/a/b"), [None; 4], "a relative path");
        }
        assert!(checked > 30_000, "{checked}");
    }

    #[test]
    fn writes_outside_the_workspace_go_to_review_and_fail_closed_without_a_socket() {
        let e = engine(
            "[files]\nallow_write = [\"~/extra\"]\n[adversary]\nprovider = \"openai\"\nmodel = \"m\"\nreview = [\"write\"]\n",
        );
        // The workspace and the scratch dir: allowed on the fast path, never reviewed.
        for p in ["/h/p/a", "/tmp/run/a"] {
            assert!(e.path_allowed_fast(Access::Write, p.as_bytes()), "{p}");
            assert!(e.path(Access::Write, p.as_bytes()).is_ok(), "{p}");
        }
        // An extra allow_write root: the rules allow it, the adversary decides; with
        // no control socket that is a denial.
        let p = "/h/extra/x";
        assert!(!e.path_allowed_fast(Access::Write, p.as_bytes()));
        let v = sandpit_policy::decide(e.policy(), &Request::Write(Path::new(p)));
        assert_eq!(v.decision, Decision::Review);
        let d = e.path(Access::Write, p.as_bytes()).unwrap_err();
        assert!(d.0.contains("needs the adversary's review"), "{}", d.0);
        // Reads there are not reviewed.
        assert!(e.path(Access::Read, p.as_bytes()).is_ok());
        // Without review = ["write"] the same write is simply allowed.
        let e = engine("[files]\nallow_write = [\"~/extra\"]\n");
        assert!(e.path_allowed_fast(Access::Write, p.as_bytes()));
    }

    #[test]
    fn exec_matching() {
        let e = engine("[exec]\nblock = [\"curl --data\"]\n");
        assert!(e.exec_plain.is_some());
        assert!(e.exec(&[b"/usr/bin/CURL", b"--data", b"x"]).is_err());
        assert!(e.exec(&[b"curl", b"-d"]).is_ok());
        assert!(e.exec(&[b"curl"]).is_ok());
        let e = engine("[exec]\nblock = [\"re:nc\\\\s+-e\"]\n");
        assert!(e.exec_plain.is_none());
        assert!(e.exec(&[b"nc", b"-e", b"/bin/sh"]).is_err());
        assert!(e.exec(&[b"nc", b"-l"]).is_ok());
    }

    #[test]
    fn env_and_joined() {
        let e = engine("[env]\nwithhold = [\"*_TOKEN\", \"AWS_*\"]\n");
        assert!(e.withhold(b"GH_TOKEN"));
        assert!(e.withhold(b"AWS_SECRET_ACCESS_KEY"));
        assert!(!e.withhold(b"PATH"));
        assert!(e.withhold(b"AWS_CA_BUNDLE"));
        // With a credential: its variable and the run's CA variables pass, the
        // variable its real value comes from does not, for the agent neither.
        let e = engine("[env]\nwithhold = [\"*_TOKEN\", \"AWS_*\"]\nagent = [\"REAL_*\"]\n[credentials.gh]\nenv = \"GH_TOKEN\"\nsource = \"env:REAL_GH\"\nhosts = [\"api.github.com\"]\n");
        assert!(!e.withhold(b"GH_TOKEN"));
        assert!(!e.withhold(b"AWS_CA_BUNDLE"));
        assert!(!e.withhold(b"NODE_EXTRA_CA_CERTS"));
        assert!(e.withhold(b"AWS_SECRET_ACCESS_KEY"));
        assert!(e.withhold(b"REAL_GH") && !e.agent_keeps(b"REAL_GH"));
        assert!(e.agent_keeps(b"REAL_OTHER"));
        // env.set's variables pass withhold too.
        let e = engine("[env]\nwithhold = [\"X_*\"]\n[env.set]\nX_MODE = \"quiet\"\n");
        assert!(!e.withhold(b"X_MODE") && e.withhold(b"X_OTHER"));
        assert!(contains_joined(&[b"a", b"BC"], b"a bc"));
        assert!(!contains_joined(&[b"ab", b"c"], b"abc"));
        assert!(under(b"/a/b", b"/a"));
        assert!(!under(b"/ab", b"/a"));
    }
}
