//! The attack suite's harness (`tests/threats.rs`): every case is a shell script run
//! as the unprivileged test user, first without sandpit (it must show its effect),
//! then under `sandpit run` with every layer and with layers switched off one at a
//! time. A case is judged only by its effect, never by an exit code or a message:
//!
//! - the canary (in credential files, a withheld variable, a host process's
//!   environment, a host daemon's answer) appears in no output and no workspace file;
//! - nothing outside the workspace (and no protected path inside it) changed;
//! - the case's blocked listeners (TCP on 127.0.0.1 and ::1, UDP on 127.0.0.1) got
//!   nothing; the host daemons were never asked to run anything; the user's other
//!   terminal got no bytes and kept its settings;
//! - no host process was killed, no process of the run outlived it, a blocked tool
//!   left no `ran-marker`, and the script saw no `EFFECT:` of its own (used only for
//!   effects visible from inside alone: a tampered run file, a nested namespace).
//!
//! Each class carries a positive control that must print `CONTROL-OK` in every
//! configuration. The harness prints one table per class: which configurations held
//! each case, and which layer that shows holds it.
#![allow(dead_code)]
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::UdpSocket;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::sink::Sink;
use crate::common::{is_root, TestHome, PROTECTED, TEST_GID, TEST_UID};

pub const CANARY: &str = "CANARY-threat-4b7e19";

/// One way of running a case.
pub struct Config {
    pub name: &'static str,
    pub flags: &'static [&'static str],
    /// `SANDPIT_FORCE_FALLBACK`: no namespaces (Landlock + seccomp only).
    pub fallback: bool,
}

/// Every layer, then each one switched off. `kernel only` is the boundary's claim:
/// namespaces + Landlock + seccomp with no interposer and no shims.
pub const CONFIGS: &[Config] = &[
    Config {
        name: "all",
        flags: &["--shims"],
        fallback: false,
    },
    Config {
        name: "-interposer",
        flags: &["--kernel-only", "--shims"],
        fallback: false,
    },
    Config {
        name: "-namespaces",
        flags: &["--allow-degraded", "--shims"],
        fallback: true,
    },
    Config {
        name: "kernel only",
        flags: &["--kernel-only"],
        fallback: false,
    },
    Config {
        name: "landlock+seccomp",
        flags: &["--kernel-only", "--allow-degraded"],
        fallback: true,
    },
];

/// What a case must withstand.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Held with every layer on and by the kernel layer alone.
    Kernel,
    /// Held with every layer on (a precision layer holds it; the kernel need not).
    Layers,
    /// Measured only: no layer is designed to hold it (reported, not asserted).
    Measured,
    /// A positive control: must print CONTROL-OK and show no effect everywhere.
    Control,
}

pub struct Case {
    pub name: &'static str,
    pub script: String,
    /// The script without sandpit, when it must differ (names only sandpit resolves).
    pub bare: Option<String>,
    pub expect: Expect,
    /// What the host must hold in the run's fresh home besides the usual stage.
    pub setup: Option<Setup>,
}

pub fn case(name: &'static str, expect: Expect, script: &str) -> Case {
    Case {
        name,
        script: script.to_string(),
        bare: None,
        expect,
        setup: None,
    }
}

impl Case {
    pub fn bare(mut self, script: &str) -> Case {
        self.bare = Some(script.to_string());
        self
    }
    pub fn with(mut self, setup: Setup) -> Case {
        self.setup = Some(setup);
        self
    }
}

/// Host state one case needs in its run's own home (each run has a fresh one), made
/// before the run (bare and sandboxed alike) and taken down after it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// git's credential cache, started as the user (`git credential-cache store`),
    /// holding the canary as a password behind `~/.cache/git/credential/socket`.
    CredentialCache,
    /// An SSH agent at a path no default names (`~/.agent/ssh.sock`) that
    /// `SSH_AUTH_SOCK` names; the variable is withheld inside, so the script finds
    /// the path as `$AGENT`. It answers the canary and runs code on request, like
    /// `$DAEMON`.
    SshAgent,
    /// The workspace is a linked worktree: `.git` is a file (`gitdir: ~/repo`).
    LinkedWorktree,
    /// The repository's hooks live in the worktree, as husky sets them up:
    /// `core.hooksPath = .husky/_`, the user's hook in `.husky/pre-commit`.
    HooksPath,
}

/// What a setup left running, stopped after the run.
enum Running {
    Nothing,
    Agent(PathBuf, Arc<std::sync::atomic::AtomicBool>),
    Cache,
}

impl Setup {
    fn start(self, s: &Stage, env: &mut Vec<(&str, String)>) -> Running {
        let home = s.h.home();
        match self {
            Setup::CredentialCache => {
                let mut c = s.h.command("sh");
                c.args(["-c", &format!(
                    "printf 'protocol=https\\nhost=example.test\\nusername=u\\npassword={CANARY}\\n\\n' | git credential-cache --timeout=120 store"
                )]);
                let o = c.output().unwrap();
                assert!(o.status.success(), "git credential-cache store: {o:?}");
                assert!(home.join(".cache/git/credential/socket").exists());
                Running::Cache
            }
            Setup::SshAgent => {
                let dir = home.join(".agent");
                std::fs::create_dir_all(&dir).unwrap();
                s.h.give_to_test_user(&dir);
                let sock = dir.join("ssh.sock");
                let l = UnixListener::bind(&sock).unwrap();
                s.h.give_to_test_user(&sock);
                let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
                serve_daemon_until(
                    l,
                    Arc::new(Mutex::new(s.outside.clone())),
                    Some(stop.clone()),
                );
                env.push(("SSH_AUTH_SOCK", sock.display().to_string()));
                env.push(("AGENT", sock.display().to_string()));
                Running::Agent(sock, stop)
            }
            Setup::LinkedWorktree => {
                let ws = s.h.workspace();
                std::fs::remove_dir_all(ws.join(".git")).unwrap();
                let o =
                    s.h.command("git")
                        .args(["init", "-q", "--separate-git-dir"])
                        .arg(home.join("repo"))
                        .arg(&ws)
                        .output()
                        .unwrap();
                assert!(o.status.success(), "git init: {o:?}");
                assert!(ws.join(".git").is_file());
                Running::Nothing
            }
            Setup::HooksPath => {
                let ws = s.h.workspace();
                for args in [
                    &["init", "-q"][..],
                    &["config", "core.hooksPath", ".husky/_"],
                ] {
                    let o = s.h.command("git").args(args).output().unwrap();
                    assert!(o.status.success(), "git {args:?}: {o:?}");
                }
                s.h.write(&ws.join(".husky/_/h"), "#!/bin/sh\n");
                s.h.write(&ws.join(".husky/pre-commit"), "npm test\n");
                Running::Nothing
            }
        }
    }
}

impl Running {
    fn stop(self, s: &Stage) {
        match self {
            Running::Nothing => {}
            Running::Cache => {
                let _ =
                    s.h.command("git")
                        .args(["credential-cache", "exit"])
                        .output();
            }
            Running::Agent(sock, stop) => {
                stop.store(true, Ordering::SeqCst);
                // Wake its accept, which then sees the flag.
                let _ = std::os::unix::net::UnixStream::connect(&sock);
            }
        }
    }
}

/// A host daemon on a unix socket that "runs code on request": any byte it receives
/// makes it write `daemon-ran` into the current run's outside directory, and it
/// answers with the canary (like an agent that hands out a secret).
fn serve_daemon(l: UnixListener, target: Arc<Mutex<PathBuf>>) {
    serve_daemon_until(l, target, None);
}

/// `serve_daemon`, until `stop` is set (checked after each accept).
fn serve_daemon_until(
    l: UnixListener,
    target: Arc<Mutex<PathBuf>>,
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
) {
    std::thread::spawn(move || {
        for s in l.incoming() {
            if stop.as_ref().is_some_and(|f| f.load(Ordering::SeqCst)) {
                return;
            }
            let Ok(mut s) = s else { continue };
            let t = target.clone();
            std::thread::spawn(move || {
                let _ = s.write_all(format!("{CANARY}\n").as_bytes());
                let mut b = [0u8; 256];
                if matches!(s.read(&mut b), Ok(n) if n > 0) {
                    let _ = std::fs::write(t.lock().unwrap().join("daemon-ran"), "ran");
                }
            });
        }
    });
}

/// An allowed host's listener (127.0.0.2) that redirects every request to the
/// blocked listener's address.
fn start_redirect(to_port: u16) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut b = [0u8; 4096];
            let _ = s.read(&mut b);
            let _ = s.write_all(
                format!(
                    "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{to_port}/redirected\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            );
        }
    });
    port
}

/// An allowed host (127.0.0.2) that relays by request, as a front end routing by
/// `Host` or an open proxy does: a request for itself (`allowed.test`, 127.0.0.2) is
/// answered `relay:allowed` and the connection kept; a request naming another host
/// (its `Host`, or a `CONNECT`'s target) is sent on there with whatever follows it,
/// loopback only (`blocked.test` is 127.0.0.1). What the sandbox's proxy lets reach
/// it for another host reaches that host.
fn start_relay() -> u16 {
    use std::io::BufRead;
    let l = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            std::thread::spawn(move || {
                let mut out = s.try_clone().unwrap();
                let mut r = std::io::BufReader::new(s);
                loop {
                    let mut head = String::new();
                    let mut host = String::new();
                    loop {
                        let mut line = String::new();
                        if !matches!(r.read_line(&mut line), Ok(n) if n > 0) {
                            return;
                        }
                        if let Some((k, v)) = line.split_once(':') {
                            if k.eq_ignore_ascii_case("host") {
                                host = v.trim().to_string();
                            }
                        }
                        head.push_str(&line);
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut first = head.split_whitespace();
                    let connect = first.next() == Some("CONNECT");
                    if connect {
                        host = first.next().unwrap_or_default().to_string();
                    }
                    let (name, port) = host.rsplit_once(':').unwrap_or((&host, "80"));
                    let name = name.to_ascii_lowercase();
                    if name == "allowed.test" || name == "127.0.0.2" {
                        let _ = out.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nrelay:allowed",
                        );
                        continue;
                    }
                    let ip = if name == "blocked.test" {
                        "127.0.0.1"
                    } else {
                        &name
                    };
                    let (Ok(ip), Ok(port)) =
                        (ip.parse::<std::net::Ipv4Addr>(), port.parse::<u16>())
                    else {
                        return;
                    };
                    if !ip.is_loopback() {
                        return;
                    }
                    let Ok(mut to) = std::net::TcpStream::connect((ip, port)) else {
                        return;
                    };
                    if connect {
                        let _ = out.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
                    } else {
                        let _ = to.write_all(head.as_bytes());
                    }
                    let _ = std::io::copy(&mut r, &mut to);
                    return;
                }
            });
        }
    });
    port
}

/// A terminal of the same user outside the sandbox (a shell in another window): a
/// pty pair whose slave the test user owns. Counts the bytes that reach its master
/// (what would show on the user's screen, the echo of injected keystrokes included)
/// and keeps its settings, to tell whether a run changed them.
struct Terminal {
    slave: std::os::fd::OwnedFd,
    path: PathBuf,
    got: Arc<AtomicUsize>,
    settings: libc::termios,
}

impl Terminal {
    fn open() -> Terminal {
        let (master, slave, path) = crate::common::user_terminal();
        let got = Arc::new(AtomicUsize::new(0));
        let g = got.clone();
        // Ends (EIO) when the slave is closed with the fixtures.
        std::thread::spawn(move || {
            let mut master = master;
            let mut b = [0u8; 1024];
            while let Ok(n) = master.read(&mut b) {
                if n == 0 {
                    break;
                }
                g.fetch_add(n, Ordering::SeqCst);
            }
        });
        let mut t = Terminal {
            slave,
            path,
            got,
            // SAFETY: termios is plain data; overwritten by tcgetattr below.
            settings: unsafe { std::mem::zeroed() },
        };
        t.settings = t.current();
        t
    }
    fn current(&self) -> libc::termios {
        use std::os::fd::AsRawFd;
        // SAFETY: termios is plain data; tcgetattr fills it from our own descriptor.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        let got =
            // SAFETY: as above.
            unsafe { libc::tcgetattr(self.slave.as_raw_fd(), &mut t) };
        assert_eq!(got, 0);
        t
    }
    /// Whether a run changed the terminal's settings; puts them back if so.
    fn reconfigured(&self) -> bool {
        use std::os::fd::AsRawFd;
        let (a, b) = (self.current(), self.settings);
        let changed = (a.c_iflag, a.c_oflag, a.c_cflag, a.c_lflag, a.c_cc)
            != (b.c_iflag, b.c_oflag, b.c_cflag, b.c_lflag, b.c_cc);
        if changed {
            // SAFETY: setting our own descriptor's terminal to settings read from it.
            unsafe { libc::tcsetattr(self.slave.as_raw_fd(), libc::TCSANOW, &self.settings) };
        }
        changed
    }
}

/// A UDP socket that counts datagrams.
struct UdpSink {
    port: u16,
    got: Arc<AtomicUsize>,
}

impl UdpSink {
    fn start() -> UdpSink {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = s.local_addr().unwrap().port();
        let got = Arc::new(AtomicUsize::new(0));
        let g = got.clone();
        std::thread::spawn(move || {
            let mut b = [0u8; 2048];
            while s.recv_from(&mut b).is_ok() {
                g.fetch_add(1, Ordering::SeqCst);
            }
        });
        UdpSink { port, got }
    }
}

/// Listeners shared by one class's runs (runs are sequential: effects are the
/// difference before/after each run).
pub struct Fixtures {
    blocked: Sink,
    blocked6: Sink,
    udp: UdpSink,
    allowed: Sink,
    redirect: u16,
    relay: u16,
    daemon_dir: tempfile::TempDir,
    /// The same daemon under `/run` (a screen session's `/run/screen/S-user`, the
    /// session bus): removed with the fixtures.
    run_dir: tempfile::TempDir,
    abstract_name: String,
    terminal: Terminal,
    target: Arc<Mutex<PathBuf>>,
}

impl Fixtures {
    pub fn new() -> Fixtures {
        let target = Arc::new(Mutex::new(PathBuf::new()));
        // Like ssh-agent's /tmp/ssh-XXXX/agent.N: a private directory of the user.
        let daemon_dir = tempfile::Builder::new()
            .prefix("sandpit-threat-daemon-")
            .tempdir_in("/tmp")
            .unwrap();
        let sock = daemon_dir.path().join("agent.sock");
        serve_daemon(UnixListener::bind(&sock).unwrap(), target.clone());
        if is_root() {
            std::os::unix::fs::chown(daemon_dir.path(), Some(TEST_UID), Some(TEST_GID)).unwrap();
            std::os::unix::fs::chown(&sock, Some(TEST_UID), Some(TEST_GID)).unwrap();
        }
        let abstract_name = format!(
            "sandpit-threat-{}",
            daemon_dir.path().file_name().unwrap().to_string_lossy()
        );
        {
            use std::os::linux::net::SocketAddrExt;
            let a = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                .unwrap();
            serve_daemon(UnixListener::bind_addr(&a).unwrap(), target.clone());
        }
        let run_dir = tempfile::Builder::new()
            .prefix("sandpit-threat-")
            .tempdir_in(if is_root() {
                PathBuf::from("/run")
            } else {
                // SAFETY: getuid has no preconditions.
                PathBuf::from(format!("/run/user/{}", unsafe { libc::getuid() }))
            })
            .unwrap();
        let run_sock = run_dir.path().join("daemon.sock");
        serve_daemon(UnixListener::bind(&run_sock).unwrap(), target.clone());
        own(run_dir.path());
        own(&run_sock);
        let blocked = Sink::start("127.0.0.1", "blocked");
        Fixtures {
            redirect: start_redirect(blocked.port),
            relay: start_relay(),
            run_dir,
            terminal: Terminal::open(),
            blocked,
            blocked6: Sink::start("::1", "blocked6"),
            udp: UdpSink::start(),
            allowed: Sink::start("127.0.0.2", "allowed"),
            daemon_dir,
            abstract_name,
            target,
        }
    }
    fn counters(&self) -> (usize, usize, usize, usize, usize) {
        (
            self.blocked.seen().0,
            self.blocked.seen().1,
            self.blocked6.seen().0,
            self.blocked6.seen().1,
            self.udp.got.load(Ordering::SeqCst),
        )
    }
}

/// A fresh HOME for one run: credentials holding the canary, an outside directory,
/// protected files in the workspace, a forbidden tool, a victim host process.
pub struct Stage {
    pub h: TestHome,
    pub outside: PathBuf,
    pub tag: String,
    victim: Child,
}

const USER_CONFIG: &str = r#"[network]
allow = ["allowed.test"]
[network.resolve]
"allowed.test" = "127.0.0.2"
"blocked.test" = "127.0.0.1"
[files]
allow_read = ["~/.ssh/known_hosts"]
[exec]
block = ["forbidden-tool"]
"#;

pub const SECRET_PATHS: &[&str] = &[
    ".ssh/id_rsa",
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".netrc",
    ".config/gh/hosts.yml",
    ".docker/config.json",
    ".kube/config",
    ".gnupg/private-keys-v1.d/key",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".config/gcloud/credentials.db",
    ".pi/agent/auth.json",
];

impl Stage {
    fn new() -> Stage {
        let h = TestHome::new();
        let home = h.home();
        let ws = h.workspace();
        h.write(&home.join(".sandpit/config.toml"), USER_CONFIG);
        // sandpit's package caches (a writable root by design, made by the launcher
        // before the run): present from the start, so only their contents change.
        for d in [home.join(".cache"), home.join(".cache/sandpit")] {
            std::fs::create_dir_all(&d).unwrap();
            h.give_to_test_user(&d);
        }
        for p in SECRET_PATHS {
            h.write(&home.join(p), &format!("{CANARY}\n"));
        }
        h.write(&home.join(".ssh/known_hosts"), "KNOWN-HOSTS-OK\n");
        h.write(&home.join("notes.txt"), "NORMAL\n");
        h.write(&home.join(".bashrc"), "# rc\n");
        let outside = h.dir.path().join("outside");
        h.write(&outside.join("existing.txt"), "ORIGINAL\n");
        h.write(&ws.join("mine.txt"), "MINE\n");
        h.write(&ws.join(".git/config"), "[core]\n");
        h.write(&ws.join(".git/hooks/README"), "hooks\n");
        h.write(&ws.join(".git/HEAD"), "ref: refs/heads/main\n");
        std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), ws.join("planted-link")).unwrap();
        if is_root() {
            std::os::unix::fs::lchown(ws.join("planted-link"), Some(TEST_UID), Some(TEST_GID))
                .unwrap();
        }
        let bin = ws.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        h.give_to_test_user(&bin);
        std::fs::copy("/usr/bin/touch", bin.join("forbidden-tool")).unwrap();
        h.give_to_test_user(&bin.join("forbidden-tool"));
        let tag = format!(
            "sandpit-outlive-{}",
            h.dir.path().file_name().unwrap().to_string_lossy()
        );
        // A host process of the same user, holding the canary in its environment.
        let victim = h
            .command("sleep")
            .arg("300")
            .env("GITHUB_TOKEN", CANARY)
            .spawn()
            .unwrap();
        Stage {
            h,
            outside,
            tag,
            victim,
        }
    }
}

/// Path → (mode, mtime, bytes) of everything outside the workspace that the run must
/// not change (of `~/.sandpit`, the user's config only), and of the protected paths
/// inside it.
fn snapshot(s: &Stage) -> BTreeMap<PathBuf, (u32, i64, Vec<u8>)> {
    let mut m = BTreeMap::new();
    let ws = s.h.workspace();
    let skip = [
        ws.clone(),
        // The launcher's own state (logs, run directories, the extracted library):
        // tampering with it from inside is judged by the cases' own EFFECT lines.
        s.h.home().join(".sandpit"),
        // sandpit's package caches: writable inside by design (docs/run.md).
        s.h.home().join(".cache/sandpit"),
        // Written by the host during the run (create_late_secrets).
        s.h.home().join(".ssh/late_key"),
        s.h.home().join(".azure"),
    ];
    walk(s.h.dir.path(), &skip, &mut m);
    walk(&s.h.home().join(".sandpit/config.toml"), &[], &mut m);
    // A linked worktree's `.git` file (Setup::LinkedWorktree): the user's git
    // follows it.
    if ws.join(".git").is_file() {
        walk(&ws.join(".git"), &[], &mut m);
    }
    // `.husky`: Setup::HooksPath's hooks, which the user's next commit runs.
    for p in [".git/hooks", ".git/config", ".husky"]
        .iter()
        .chain(PROTECTED)
    {
        let p = ws.join(p);
        if p.symlink_metadata().is_ok() {
            walk(&p, &[], &mut m);
        } else {
            m.insert(p, (0, 0, b"<absent>".to_vec()));
        }
    }
    m
}

fn walk(p: &Path, skip: &[PathBuf], m: &mut BTreeMap<PathBuf, (u32, i64, Vec<u8>)>) {
    if skip.iter().any(|s| s == p) {
        return;
    }
    let Ok(md) = p.symlink_metadata() else { return };
    let bytes = if md.is_file() {
        std::fs::read(p).unwrap_or_default()
    } else if md.is_symlink() {
        std::fs::read_link(p)
            .map(|t| t.into_os_string().into_encoded_bytes())
            .unwrap_or_default()
    } else {
        vec![]
    };
    let mtime = if md.is_dir() { 0 } else { md.mtime() };
    m.insert(p.to_path_buf(), (md.mode(), mtime, bytes));
    if md.is_dir() {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            walk(&e.path(), skip, m);
        }
    }
}

/// Files under `dir` (symlinks not followed) whose bytes contain `needle`, and
/// whether a `ran-marker` exists.
fn scan(dir: &Path, needle: &[u8], hits: &mut Vec<PathBuf>, ran: &mut bool) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let Ok(md) = p.symlink_metadata() else {
            continue;
        };
        if p.file_name().is_some_and(|n| n == "ran-marker") {
            *ran = true;
        }
        if md.is_dir() {
            scan(&p, needle, hits, ran);
        } else if md.is_file() && md.len() < 8 << 20 {
            if let Ok(b) = std::fs::read(&p) {
                if b.windows(needle.len()).any(|w| w == needle) {
                    hits.push(p);
                }
            }
        }
    }
}

/// Was the process signalled: dead, dying, stopped, or a signal still pending (a
/// SIGKILL sent just before the run ended may not have been acted on yet)?
fn signalled(pid: u32) -> bool {
    let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return true;
    };
    st.lines().any(|l| {
        let (k, v) = l.split_once(':').unwrap_or(("", ""));
        let v = v.trim();
        match k {
            "State" => v.starts_with(['Z', 'X', 'T', 't']),
            "SigPnd" | "ShdPnd" => u64::from_str_radix(v, 16).is_ok_and(|m| m != 0),
            _ => false,
        }
    })
}

/// Processes whose command line carries `tag`.
fn tagged(tag: &str) -> Vec<i32> {
    let mut found = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&c).contains(tag) {
                found.push(pid);
            }
        }
    }
    found
}

/// One change the host makes (home, workspace).
type HostChange = fn(&Path, &Path);

/// Changes the host makes while a run goes on, each asked for by a script that
/// touches `ready-TAG` and then waits for `go-TAG` (see `LATE` and `REPLACED` in
/// threats.rs).
const HOST_CHANGES: [(&str, HostChange); 2] = [
    ("late", create_late_secrets),
    ("replace", replace_by_rename),
];

/// The host's side of one change: once the script has touched `ready-TAG`, make it,
/// give sandpit's mount guard a moment (it reacts within a fraction of a millisecond;
/// these tests are about whether it does, not about that window, which is
/// documented), then touch `go-TAG`. (Polls for at most 20 s.)
fn host_change(home: &Path, ws: &Path, tag: &str, change: HostChange) {
    for _ in 0..400 {
        if ws.join(format!("ready-{tag}")).exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    change(home, ws);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let _ = std::fs::write(ws.join(format!("go-{tag}")), "");
}

/// Give `p` to the test user (when running as root).
fn own(p: &Path) {
    if is_root() {
        let _ = std::os::unix::fs::chown(p, Some(TEST_UID), Some(TEST_GID));
    }
}

/// Secrets that appear while the run is going: a key in the masked `~/.ssh` and one
/// in a credential directory (`~/.azure`) that did not exist at start.
fn create_late_secrets(home: &Path, _ws: &Path) {
    let _ = std::fs::write(home.join(".ssh/late_key"), format!("{CANARY}\n"));
    own(&home.join(".ssh/late_key"));
    let gc = home.join(".azure");
    let _ = std::fs::create_dir_all(&gc);
    own(&gc);
    let _ = std::fs::write(gc.join("late.json"), format!("{CANARY}\n"));
    own(&gc.join("late.json"));
}

/// A host tool rewriting a file the sandbox sees masked or read-only (git config,
/// an editor, a credential helper): `~/.netrc` and the workspace's `.git/config` are
/// replaced by a rename over them, with the same bytes and time (so nothing changes
/// unless the sandbox acts). The kernel detaches a mount whose file is renamed over,
/// in every mount namespace.
fn replace_by_rename(home: &Path, ws: &Path) {
    for p in [home.join(".netrc"), ws.join(".git/config")] {
        let tmp = p.with_extension("sandpit-test-new");
        let Ok(mtime) = p.metadata().and_then(|m| m.modified()) else {
            continue;
        };
        if std::fs::copy(&p, &tmp).is_ok() {
            let _ = std::fs::File::options()
                .write(true)
                .open(&tmp)
                .and_then(|f| f.set_modified(mtime));
            own(&tmp);
            let _ = std::fs::rename(&tmp, &p);
        }
    }
}

/// The file in the workspace that holds a run's script.
const CASE_FILE: &str = ".threat-case.sh";
/// The script's first line: prints `RUN_STARTED`, which its text does not contain.
const RUN_MARK: &str = "echo RUN-$((40+2))-STARTED";
const RUN_STARTED: &str = "RUN-42-STARTED";

/// The effects one run had.
#[derive(Default, Debug)]
pub struct Effects {
    pub effects: Vec<String>,
    pub control_ok: bool,
    pub started: bool,
    pub output: String,
}

/// Run `script` as the test user: bare (`config` None) or under sandpit.
fn run_once(fx: &Fixtures, case: &Case, config: Option<&Config>) -> Effects {
    let mut s = Stage::new();
    *fx.target.lock().unwrap() = s.outside.clone();
    let sandboxed = config.is_some();
    let script = match (&case.bare, sandboxed) {
        (Some(b), false) => b.clone(),
        _ => case.script.clone(),
    };
    let mut vars: Vec<(&str, String)> = vec![
        (
            "B",
            if sandboxed {
                "blocked.test"
            } else {
                "127.0.0.1"
            }
            .into(),
        ),
        (
            "A",
            if sandboxed {
                "allowed.test"
            } else {
                "127.0.0.2"
            }
            .into(),
        ),
        ("BP", fx.blocked.port.to_string()),
        ("BP6", fx.blocked6.port.to_string()),
        ("BU", fx.udp.port.to_string()),
        ("AP", fx.allowed.port.to_string()),
        ("RP", fx.redirect.to_string()),
        ("LP", fx.relay.to_string()),
        ("PTY", fx.terminal.path.display().to_string()),
        ("OUT", s.outside.display().to_string()),
        ("VICTIM", s.victim.id().to_string()),
        (
            "DAEMON",
            fx.daemon_dir
                .path()
                .join("agent.sock")
                .display()
                .to_string(),
        ),
        (
            "RDAEMON",
            fx.run_dir.path().join("daemon.sock").display().to_string(),
        ),
        ("ADAEMON", fx.abstract_name.clone()),
        ("TAG", s.tag.clone()),
        ("GITHUB_TOKEN", CANARY.into()),
    ];
    let running = case.setup.map(|x| x.start(&s, &mut vars));
    let mut c = match config {
        Some(cfg) => {
            let mut c = s.h.sandpit();
            c.arg("run").args(cfg.flags);
            if cfg.fallback {
                // Without namespaces the bridge listens on the host's loopback: give
                // each run its own port (concurrent degraded runs collide on 3128).
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port();
                c.env("SANDPIT_FORCE_FALLBACK", "1")
                    .arg(format!("--proxy-port={port}"));
            }
            c.arg("--").arg("timeout");
            c
        }
        None => {
            let mut c = s.h.command("timeout");
            c.env("TMPDIR", s.h.dir.path())
                .env("SANDPIT_SNAPSHOT", s.outside.join("policy.snapshot"))
                .env("SANDPIT_SHIM_DIR", &s.outside)
                .env("LD_PRELOAD", "");
            c
        }
    };
    // The script is a file in the workspace, run as `sh ./CASE_FILE`: no command
    // line carries its text, so a rule that matches the text (an `exec.block`
    // pattern) cannot refuse the run as a whole; each of its commands is judged on
    // its own. Its first line proves it ran: a run that never started holds nothing.
    // The marker is computed as it runs (`RUN_MARK`), so a message that quotes the
    // script (a refusal of the command line, a syntax error) cannot fake it.
    let script = format!("{RUN_MARK}\n{script}\n");
    s.h.write(&s.h.workspace().join(CASE_FILE), &script);
    c.args(["-s", "KILL", "60", "sh", &format!("./{CASE_FILE}")]);
    for (k, v) in &vars {
        c.env(k, v);
    }
    let before = snapshot(&s);
    let counters = fx.counters();
    let typed = fx.terminal.got.load(Ordering::SeqCst);
    let host: Vec<_> = HOST_CHANGES
        .iter()
        .filter(|(tag, _)| script.contains(&format!("ready-{tag}")))
        .map(|&(tag, change)| {
            let (home, ws) = (s.h.home(), s.h.workspace());
            std::thread::spawn(move || host_change(&home, &ws, tag, change))
        })
        .collect();
    let o: Output = c.output().unwrap();
    for t in host {
        t.join().unwrap();
    }
    // Relays and the daemon's work land asynchronously; the command has exited, so
    // anything sent is in flight. Only scripts that use the network or a socket wait.
    if [
        "$B",
        "$A",
        "BU",
        "DAEMON",
        "RP",
        "BP",
        "PROXY",
        "PTY",
        "AGENT",
        "credential",
    ]
    .iter()
    .any(|v| script.contains(v))
    {
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut e = Effects {
        control_ok: output.contains("CONTROL-OK"),
        started: output.contains(RUN_STARTED),
        ..Effects::default()
    };
    if output.contains(CANARY) {
        e.effects.push("canary in output".into());
    }
    if output.contains("EFFECT:") {
        let l = output.lines().find(|l| l.contains("EFFECT:")).unwrap_or("");
        e.effects.push(format!("self-reported {}", l.trim()));
    }
    let mut hits = vec![];
    let mut ran = false;
    scan(&s.h.workspace(), CANARY.as_bytes(), &mut hits, &mut ran);
    if !hits.is_empty() {
        e.effects.push(format!("canary in {:?}", hits[0]));
    }
    if ran {
        e.effects.push("blocked tool ran".into());
    }
    let after = snapshot(&s);
    let changed: Vec<_> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .chain(before.keys().filter(|k| !after.contains_key(*k)).cloned())
        .collect();
    if !changed.is_empty() {
        e.effects.push(format!("changed {:?}", changed[0]));
    }
    let now = fx.counters();
    if now != counters {
        e.effects
            .push(format!("listener got {:?} (was {:?})", now, counters));
    }
    let typed = fx.terminal.got.load(Ordering::SeqCst) - typed;
    if typed > 0 {
        e.effects
            .push(format!("the user's other terminal got {typed} bytes"));
    }
    if fx.terminal.reconfigured() {
        e.effects
            .push("the user's other terminal reconfigured".into());
    }
    if matches!(s.victim.try_wait(), Ok(Some(_))) || signalled(s.victim.id()) {
        e.effects.push("host process signalled".into());
    }
    let _ = s.victim.kill();
    let _ = s.victim.wait();
    // A process the kernel is still tearing down (SIGKILL pending, zombie) did not
    // outlive the run.
    let left: Vec<i32> = tagged(&s.tag)
        .into_iter()
        .filter(|p| !signalled(*p as u32))
        .collect();
    if !left.is_empty() {
        e.effects.push("a process outlived the run".into());
        for pid in left {
            // SAFETY: the pid is a process this test's run started (its command line
            // carries this run's unique tag).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    if let Some(r) = running {
        r.stop(&s);
    }
    e.output = output;
    e
}

/// One class: run every case bare and in every configuration, print the table,
/// and assert what the cases expect.
pub fn run_class(class: &str, cases: Vec<Case>) {
    let fx = Fixtures::new();
    // `SANDPIT_THREATS_SHOW=all` (a configuration's name) prints what each case
    // printed in that configuration, to see where it was refused.
    let show = std::env::var("SANDPIT_THREATS_SHOW").ok();
    let mut failures = vec![];
    let mut rows = vec![];
    let mut held_all = 0;
    let mut held_kernel = 0;
    let mut attacks = 0;
    for c in &cases {
        let bare = run_once(&fx, c, None);
        match c.expect {
            Expect::Control => {
                if !bare.control_ok || !bare.effects.is_empty() {
                    failures.push(format!(
                        "{}: control fails without sandpit: {:?}\n{}",
                        c.name, bare.effects, bare.output
                    ));
                }
            }
            _ => {
                if bare.effects.is_empty() {
                    failures.push(format!(
                        "{}: the probe shows no effect without sandpit (it proves nothing):\n{}",
                        c.name, bare.output
                    ));
                }
            }
        }
        let mut cells = vec![];
        let mut held = vec![];
        for cfg in CONFIGS {
            let e = run_once(&fx, c, Some(cfg));
            if show.as_deref() == Some(cfg.name) {
                println!(
                    "--- {} [{}]: {:?}\n{}",
                    c.name,
                    cfg.name,
                    e.effects,
                    e.output.trim_end()
                );
            }
            if !e.started {
                failures.push(format!(
                    "{} [{}]: the command did not run:\n{}",
                    c.name, cfg.name, e.output
                ));
            }
            let ok = if c.expect == Expect::Control {
                e.control_ok && e.effects.is_empty()
            } else {
                e.effects.is_empty() && e.started
            };
            held.push(ok);
            cells.push(if ok {
                "held".to_string()
            } else {
                "LEAK".to_string()
            });
            let must = match c.expect {
                Expect::Control => true,
                Expect::Kernel => cfg.name == "all" || cfg.name == "kernel only",
                Expect::Layers => cfg.name == "all",
                Expect::Measured => false,
            };
            if must && !ok {
                failures.push(format!(
                    "{} [{}]: {}: {:?}\n{}",
                    c.name,
                    cfg.name,
                    if c.expect == Expect::Control {
                        "positive control failed"
                    } else {
                        "not held"
                    },
                    e.effects,
                    e.output
                ));
            }
        }
        let by = if c.expect == Expect::Control {
            if held.iter().all(|h| *h) {
                "control ok".to_string()
            } else {
                "CONTROL FAILED".to_string()
            }
        } else {
            attacks += 1;
            held_all += usize::from(held[0]);
            held_kernel += usize::from(held[3]);
            held_by(&held)
        };
        rows.push(format!(
            "| {:<28} | {} | {by} |",
            c.name,
            cells
                .iter()
                .map(|c| format!("{c:<5}"))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    let mut table = format!(
        "\n## {class}: {attacks} cases, held {held_all}/{attacks} with all layers, {held_kernel}/{attacks} by the kernel layer alone\n\n| {:<28} | {} | held by |\n|{}\n",
        "case",
        CONFIGS
            .iter()
            .map(|c| c.name)
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(CONFIGS.len() + 2)
    );
    for r in rows {
        table.push_str(&r);
        table.push('\n');
    }
    println!("{table}");
    if let Some(dir) = option_env!("CARGO_TARGET_TMPDIR") {
        let d = Path::new(dir).join("threats");
        let _ = std::fs::create_dir_all(&d);
        let _ = std::fs::write(d.join(format!("{class}.md")), &table);
    }
    assert!(failures.is_empty(), "{class}:\n{}", failures.join("\n\n"));
}

/// Which layer the pattern of held configurations shows holds the case.
fn held_by(h: &[bool]) -> String {
    let (all, no_interposer, no_ns, ns_kernel, degraded_kernel) = (h[0], h[1], h[2], h[3], h[4]);
    let mut s = if !all {
        "NOT HELD".to_string()
    } else if ns_kernel && degraded_kernel {
        "kernel (either mode)".to_string()
    } else if ns_kernel {
        "kernel (namespaces)".to_string()
    } else if degraded_kernel {
        "kernel (Landlock, degraded mode only); interposer".to_string()
    } else if no_interposer {
        "shims".to_string()
    } else {
        "interposer".to_string()
    };
    if all && !no_ns {
        s.push_str("; leaks without namespaces even with the interposer");
    }
    s
}
