#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Shared helpers for the end-to-end tests: the built binary, an unprivileged user to
//! run sandboxed workloads as (root bypasses file permissions), and a fresh HOME.
#![allow(dead_code)]
// Network namespaces (setns) are Linux's.
pub mod http1;
#[cfg(target_os = "linux")]
pub mod lab;
pub mod sink;
pub mod sshd;
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

/// The paths of profiles/default.toml's `block_write` that lie in the workspace
/// (besides `.git/hooks` and `.git/config`).
pub const PROTECTED: &[&str] = &[
    ".sandpit.toml",
    ".claude",
    ".codex",
    ".gemini",
    ".opencode",
    ".pi",
    ".cursor",
    ".vscode",
    ".idea",
    ".zed",
    ".helix",
    ".devcontainer",
    ".mcp.json",
    ".envrc",
];

/// The uid/gid sandboxed workloads run as when the tests themselves run as root.
pub const TEST_UID: u32 = 65534;
pub const TEST_GID: u32 = 65534;

/// The launcher under test: the one cargo built for these tests, or another build
/// of it named by `SANDPIT_TEST_BIN` (`.ci/run` runs the suite again against the
/// static musl build).
pub fn sandpit_bin() -> PathBuf {
    match std::env::var_os("SANDPIT_TEST_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_sandpit")),
    }
}

pub fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() == 0 }
}

/// True when `SANDPIT_MACHINE_LACKS` (comma-separated) names `feature`: the only way
/// a test may accept a missing kernel feature.
pub fn machine_lacks(feature: &str) -> bool {
    std::env::var("SANDPIT_MACHINE_LACKS")
        .map(|v| v.split(',').any(|f| f.trim() == feature))
        .unwrap_or(false)
}

/// A HOME and workspace owned by the unprivileged test user.
pub struct TestHome {
    pub dir: tempfile::TempDir,
}

impl TestHome {
    pub fn new() -> TestHome {
        Self::new_in("/tmp")
    }
    /// A test home in a fresh directory under `base` (`/tmp` for [`TestHome::new`]).
    pub fn new_in(base: &str) -> TestHome {
        let dir = tempfile::Builder::new()
            .prefix("sandpit-test-")
            .tempdir_in(base)
            .unwrap();
        let h = TestHome { dir };
        std::fs::create_dir_all(h.home()).unwrap();
        std::fs::create_dir_all(h.workspace()).unwrap();
        h.give_to_test_user(h.dir.path());
        h.give_to_test_user(&h.home());
        h.give_to_test_user(&h.workspace());
        h
    }
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    pub fn workspace(&self) -> PathBuf {
        self.home().join("project")
    }
    /// Make `path` belong to the test user (no-op when not root).
    pub fn give_to_test_user(&self, path: &Path) {
        if is_root() {
            chown(path, Some(TEST_UID), Some(TEST_GID)).unwrap();
        }
    }
    /// Write a file (creating parents) owned by the test user.
    pub fn write(&self, path: &Path, contents: &str) {
        let mut p = path.to_path_buf();
        let mut made = vec![];
        while let Some(parent) = p.parent() {
            if parent.exists() {
                break;
            }
            made.push(parent.to_path_buf());
            p = parent.to_path_buf();
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
        for d in made {
            self.give_to_test_user(&d);
        }
        self.give_to_test_user(path);
    }
    /// The user's own config, `~/.sandpit/config.toml`.
    pub fn user_config_path(&self) -> PathBuf {
        self.home().join(".sandpit/config.toml")
    }
    /// Write the user's own config (replacing it).
    pub fn user_config(&self, toml: &str) {
        self.write(&self.user_config_path(), toml);
    }
    /// A command for `program` run as the test user with this HOME, in the workspace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", self.home())
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .current_dir(self.workspace());
        if is_root() {
            // std drops root's supplementary groups when it changes uid.
            c.uid(TEST_UID).gid(TEST_GID);
        }
        c
    }
    /// `sandpit ARGS…` run as the test user.
    pub fn sandpit(&self) -> Command {
        self.command(sandpit_bin())
    }
    /// `sandpit run [--kernel-only] --` as the test user, the command to follow:
    /// every layer, or the kernel layer alone (as a static program meets it).
    pub fn sandpit_run(&self, kernel_only: bool) -> Command {
        let mut c = self.sandpit();
        c.arg("run");
        if kernel_only {
            c.arg("--kernel-only");
        }
        c.arg("--");
        c
    }
}

/// A command's status, stdout and stderr, for assertion messages.
/// Another terminal of the test user's outside the sandbox (a shell in another
/// window): a pseudo-terminal pair of this process, the slave handed to the test user
/// when the tests run as root. Returns the master, the slave and the slave's path.
pub fn user_terminal() -> (std::fs::File, std::os::fd::OwnedFd, PathBuf) {
    use std::os::fd::{AsRawFd, FromRawFd};
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors into the out-parameters; null name,
    // termios and winsize are allowed (const on Linux, mut on macOS, where the tests
    // are only type-checked).
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: both descriptors are new and ours alone.
    let (master, slave) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    };
    let path = std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd())).unwrap();
    if is_root() {
        chown(&path, Some(TEST_UID), Some(TEST_GID)).unwrap();
    }
    (master, slave, path)
}

pub fn text(o: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A command's standard output, as text.
pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A command's standard error, as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What `sandpit explain …` printed, once its exit status is checked against the
/// verdict it printed (text or `--json`): 0 for ALLOW, 1 for DENY or REVIEW.
pub fn explained(o: &std::process::Output) -> String {
    let out = stdout(o);
    let allowed = if out.trim_start().starts_with('{') {
        out.contains("\"decision\": \"allow\"")
    } else {
        out.starts_with("ALLOW")
    };
    let want = if allowed { 0 } else { 1 };
    assert_eq!(o.status.code(), Some(want), "explain: {}", text(o));
    out
}

/// Wait until `cond` holds, checking every 10 ms for at most `secs` seconds: for
/// something that must happen (a datagram landing, bytes reaching a listener), in
/// place of a fixed sleep. Whether it held.
pub fn wait_for(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// [`wait_for`], failing the test when `cond` does not hold within `secs`: `what`
/// names the condition awaited in the panic message.
pub fn wait_until(secs: u64, what: impl std::fmt::Display, cond: impl FnMut() -> bool) {
    assert!(wait_for(secs, cond), "waited {secs} s for {what}, in vain");
}

/// Poll `probe` every 10 ms until it gives a value, for at most `secs` seconds;
/// fails the test naming `what` when it never does.
pub fn wait_for_some<T>(
    secs: u64,
    what: impl std::fmt::Display,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let mut got = None;
    wait_until(secs, what, || {
        got = probe();
        got.is_some()
    });
    got.expect("wait_until returned, so the probe gave a value")
}

/// A loopback TCP port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Start `cmd` with stdout piped (and `stderr` as given) and wait for its first line,
/// which must be `ready`: the sandboxed script's sign that it runs. The rest of its
/// stdout follows in the lines returned.
pub fn spawn_ready(
    mut cmd: Command,
    stderr: Stdio,
) -> (Child, std::io::Lines<std::io::BufReader<ChildStdout>>) {
    use std::io::BufRead;
    let mut child = cmd.stdout(Stdio::piped()).stderr(stderr).spawn().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    (child, lines)
}

/// The parent of process `pid`, from /proc.
pub fn ppid(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether process `pid` is a run's tending process (`sandbox::linux::start_tender`),
/// which names itself `sandpit-tend`.
pub fn is_tender(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c == "sandpit-tend\n")
}

/// The tending process (`sandbox::linux::start_tender`, named `sandpit-tend`) of the
/// run whose launcher is `launcher`, while that launcher runs.
pub fn tender_of(launcher: u32) -> u32 {
    for _ in 0..200 {
        let found = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|&p| ppid(p) == Some(launcher) && is_tender(p));
        if let Some(p) = found {
            return p;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("no tending process under the launcher {launcher}");
}

/// Process `pid` stopped (SIGSTOP) until this is dropped (SIGCONT).
pub struct Stopped(u32);

impl Stopped {
    pub fn new(pid: u32) -> Stopped {
        // SAFETY: kill with integer arguments; the caller names a process of its test.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as in `new`.
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}
