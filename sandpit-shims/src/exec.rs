//! The body of `sandpit exec TOOL ARGS…` and of the small `sandpit-shim` binary the
//! shim directory links to: find the real tool on PATH without the shim directory,
//! judge the whole command and every destination it names against the run's policy
//! snapshot, ask the adversary when the policy says so, then replace the process with
//! the real tool (`execv`, no extra child). Blocked: one line on stderr, exit 126,
//! nothing run. Also `exec --connect HOST PORT`, the ProxyCommand that tunnels ssh
//! through sandpit's proxy.
//!
//! Std and `sandpit-policy` only: the shim
//! binary that links this must start in a fraction of a millisecond, so no async
//! runtime, no HTTP stack, no argument-parser crate.
//!
//! The shims are a precision layer, not the boundary: a process that calls the real
//! binary by absolute path is not seen here, and the kernel layer and the proxy hold
//! for it.
use crate::{judge, Ctx, Judge, Outcome, SHIM_MARKER};
use sandpit_policy::Policy;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The policy snapshot written by `sandpit run` (shared with the interposer).
pub const SNAPSHOT_VAR: &str = "SANDPIT_SNAPSHOT";
/// The shim directory `sandpit run --shims` put first on PATH.
pub const SHIM_DIR_VAR: &str = "SANDPIT_SHIM_DIR";
/// `http://user:token@host:port` of sandpit's proxy, for the ssh tunnel.
pub const PROXY_URL_VAR: &str = "SANDPIT_PROXY_URL";
/// The run's audit datagram socket (set by `sandpit run`).
pub const AUDIT_VAR: &str = "SANDPIT_AUDIT";

/// How many shimmed commands deep this process is. A wrapper script on PATH that
/// calls its own name again would otherwise loop through the shim forever.
pub const DEPTH_VAR: &str = "SANDPIT_SHIM_DEPTH";
const MAX_DEPTH: u32 = 32;

/// Exit status of a blocked command (POSIX: found but not executable).
pub const EXIT_BLOCKED: i32 = 126;
/// Exit status when the real tool is not on PATH.
pub const EXIT_NOT_FOUND: i32 = 127;

/// File name of the small shim binary (`sandpit run --shims` extracts it next to the
/// interposer and links every shim to it). A file of this name is never taken for
/// the real tool.
pub const SHIM_BIN_NAME: &str = "sandpit-shim";

/// How the policy is found when `SANDPIT_SNAPSHOT` is not set: the launcher loads
/// its layered configuration; the shim binary has none and refuses.
pub type Fallback<'a> = &'a dyn Fn(&str) -> Result<Policy, String>;

/// The shim binary's fallback: outside `sandpit run` there is no policy to judge by.
pub fn no_fallback(_: &str) -> Result<Policy, String> {
    Err(format!(
        "{SNAPSHOT_VAR} is not set: this shim only runs inside `sandpit run --shims`"
    ))
}

/// Dispatch on argv: `TOOL …` through a link named after the tool, or
/// `<launcher> exec TOOL …` / `<launcher> exec --connect HOST PORT`, where the
/// launcher's name starts with `sandpit`. `None`: not a shim call (the caller
/// handles its own command line). `connect_too`: also take `exec --connect`.
pub fn dispatch(fallback: Fallback<'_>, connect_too: bool) -> Option<i32> {
    let mut args = std::env::args_os();
    let argv0 = args.next()?;
    let name = Path::new(&argv0).file_name()?.to_os_string();
    // Shim mode is any other name: a link in the shim directory named after its
    // tool. `/proc/self/exe` re-executions (argv[0] "…/exe") stay the launcher.
    if !name.as_bytes().starts_with(b"sandpit") && name != "exe" {
        return Some(run_tool(&name, args.collect(), fallback));
    }
    if args.next()? != "exec" {
        return None;
    }
    let tool = args.next()?;
    if tool == "--connect" && connect_too {
        let rest: Vec<OsString> = args.collect();
        return Some(match rest.as_slice() {
            [h, p] => match (h.to_str(), p.to_str()) {
                (Some(h), Some(p)) => connect(h, p, fallback),
                _ => blocked("sandpit: connect: HOST and PORT must be UTF-8"),
            },
            _ => blocked("sandpit: connect: usage: exec --connect HOST PORT"),
        });
    }
    if tool.as_bytes().starts_with(b"-") {
        return None; // --help and the launcher's own flags
    }
    Some(run_tool(&tool, args.collect(), fallback))
}

/// Send a shim denial to the run's audit socket (`SANDPIT_AUDIT`), in the format of
/// the launcher's `audit::socket` (which re-judges it against its own policy).
fn report(line: &str, subject: &[&str]) {
    let Some(sock) = std::env::var_os(AUDIT_VAR) else {
        return;
    };
    let mut msg: Vec<u8> = line.bytes().filter(|&b| b != 0).collect();
    for f in ["SANDPIT-AUDIT/1", "deny@shims", "exec"]
        .iter()
        .chain(subject)
    {
        msg.push(0);
        msg.extend(f.bytes().filter(|&b| b != 0));
    }
    if let Ok(s) = UnixDatagram::unbound() {
        let _ = s.set_nonblocking(true);
        let _ = s.send_to(&msg, Path::new(&sock));
    }
}

fn blocked(line: &str) -> i32 {
    eprintln!("{line}");
    EXIT_BLOCKED
}

/// Judge and exec `tool args…`. Returns only when the tool did not run.
pub fn run_tool(tool: &OsStr, args: Vec<OsString>, fallback: Fallback<'_>) -> i32 {
    let Some(tool_s) = tool.to_str() else {
        return blocked("sandpit: exec: the tool name is not UTF-8");
    };
    if tool_s.is_empty() || tool_s.contains('/') {
        return blocked(&format!(
            "sandpit: exec: `{tool_s}` must be a bare command name"
        ));
    }
    let mut sargs = Vec::with_capacity(args.len());
    for a in &args {
        match a.to_str() {
            Some(s) => sargs.push(s.to_string()),
            // Bytes the parsers cannot read could hide a destination.
            None => {
                return blocked(&format!(
                    "sandpit: {tool_s}: an argument is not UTF-8, so it cannot be judged"
                ))
            }
        }
    }
    let depth = std::env::var(DEPTH_VAR)
        .ok()
        .and_then(|d| d.parse::<u32>().ok())
        .unwrap_or(0);
    if depth >= MAX_DEPTH {
        return blocked(&format!(
            "sandpit: {tool_s}: shimmed commands nested {MAX_DEPTH} deep: something on PATH calls the shim again (a wrapper script?); not run"
        ));
    }
    let real = match find_real(tool_s) {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("{msg}");
            return EXIT_NOT_FOUND;
        }
    };
    let policy = match load_policy(tool_s, fallback) {
        Ok(p) => p,
        Err(msg) => return blocked(&format!("sandpit: {tool_s}: {msg}; not run")),
    };
    let ctx = RealCtx { git: &real };
    let judged = crate::review::Deferring::new(&policy);
    let ssh_tunnel = match judge(&judged, tool_s, &sargs, &ctx) {
        Outcome::Blocked(line) => {
            // The launcher's audit log records the denial; the launcher re-judges
            // the claim against its policy.
            let mut subject: Vec<&str> = vec![tool_s];
            subject.extend(sargs.iter().map(String::as_str));
            report(&line, &subject);
            return blocked(&line);
        }
        Outcome::Run { ssh_tunnel } => ssh_tunnel,
    };
    if judged.needs_review() {
        // Every rule allowed it; the adversary has the last word (docs/adversary.md).
        if let Err(line) = ask_adversary(&policy, tool_s, &sargs) {
            let mut subject: Vec<&str> = vec![tool_s];
            subject.extend(sargs.iter().map(String::as_str));
            report(&line, &subject);
            return blocked(&line);
        }
    }
    let mut cmd = std::process::Command::new(&real);
    cmd.arg0(tool).env(DEPTH_VAR, (depth + 1).to_string());
    if ssh_tunnel {
        if let Some(pc) = proxy_command() {
            cmd.arg("-o").arg(pc);
        }
    }
    cmd.args(&args);
    let err = cmd.exec();
    eprintln!("sandpit: {tool_s}: cannot run {}: {err}", real.display());
    EXIT_BLOCKED
}

/// Ask the launcher's adversary over the control socket named by
/// `SANDPIT_ADVERSARY_SOCKET`; no socket, or one outside the state directory, denies.
fn ask_adversary(policy: &Policy, tool: &str, args: &[String]) -> Result<String, String> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut argv: Vec<&[u8]> = vec![tool.as_bytes()];
    argv.extend(args.iter().map(|a| a.as_bytes()));
    let socket = std::env::var_os(crate::review::SOCKET_VAR);
    crate::review::review_exec(policy, socket.as_deref(), cwd.as_os_str().as_bytes(), &argv)
}

fn current_exe() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// Is `p` a shim: a link to this binary, or a script carrying the marker?
fn is_shim(p: &Path, me: Option<&Path>) -> bool {
    if let (Some(me), Ok(c)) = (me, std::fs::canonicalize(p)) {
        if c == me {
            return true;
        }
    }
    if std::fs::canonicalize(p).is_ok_and(|c| c.file_name().is_some_and(|n| n == SHIM_BIN_NAME)) {
        return true;
    }
    let mut head = [0u8; 64];
    let n = std::fs::File::open(p)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let head = &head[..n];
    head.starts_with(b"#!")
        && head
            .windows(SHIM_MARKER.len())
            .any(|w| w == SHIM_MARKER.as_bytes())
}

/// The real `tool` on PATH, skipping the shim directory (however it is spelled) and
/// anything that is a shim itself, so a PATH listing the shim directory twice or
/// through a symlink cannot loop.
pub fn find_real(tool: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let shim_dir = std::env::var_os(SHIM_DIR_VAR)
        .filter(|d| !d.is_empty())
        .and_then(|d| std::fs::canonicalize(d).ok());
    let me = current_exe();
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let cand = dir.join(tool);
        let Ok(meta) = std::fs::metadata(&cand) else {
            continue;
        };
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            continue;
        }
        if let Some(sd) = &shim_dir {
            if std::fs::canonicalize(&dir).is_ok_and(|d| &d == sd) {
                continue;
            }
        }
        if is_shim(&cand, me.as_deref()) {
            continue;
        }
        return Ok(cand);
    }
    Err(format!(
        "sandpit: {tool}: command not found on PATH (outside sandpit's shim directory)"
    ))
}

/// The snapshot named by `SANDPIT_SNAPSHOT`, or — outside `sandpit run` — the
/// layered configuration (slow, but the same rules).
fn load_policy(tool: &str, fallback: Fallback<'_>) -> Result<Policy, String> {
    match std::env::var_os(SNAPSHOT_VAR).filter(|v| !v.is_empty()) {
        Some(p) => {
            let bytes = std::fs::read(&p).map_err(|e| {
                format!(
                    "cannot read the policy snapshot {}: {e}",
                    Path::new(&p).display()
                )
            })?;
            // Not Policy::from_snapshot: that validates (compiles) every `re:`
            // pattern, which the launcher already did. A pattern that no longer
            // compiles matches every command (fails closed).
            Policy::decode_snapshot(&bytes)
                .map_err(|e| format!("the policy snapshot is corrupt: {e}"))
        }
        None => fallback(tool),
    }
}

/// `ProxyCommand='<sandpit>' exec --connect %h %p`, when a proxy is configured.
fn proxy_command() -> Option<String> {
    std::env::var_os(PROXY_URL_VAR).filter(|v| !v.is_empty())?;
    let exe = std::env::current_exe().ok()?;
    let exe = exe.to_str()?;
    // ssh runs it with /bin/sh -c and expands %-tokens first.
    let quoted = exe.replace('%', "%%").replace('\'', r"'\''");
    Some(format!("ProxyCommand='{quoted}' exec --connect %h %p"))
}

/// The environment, files and git configuration, as the tool would see them.
struct RealCtx<'a> {
    /// The real git binary when the tool is git.
    git: &'a Path,
}

const MAX_FILE: u64 = 1 << 20;

impl Ctx for RealCtx<'_> {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
    fn read_file(&self, path: &str) -> Option<String> {
        let f = std::fs::File::open(path).ok()?;
        let mut s = String::new();
        f.take(MAX_FILE).read_to_string(&mut s).ok()?;
        Some(s)
    }
    fn git_config(&self, global_args: &[String]) -> Option<Vec<(String, String)>> {
        if self.git.file_name().is_none_or(|n| n != "git") {
            return None;
        }
        let out = std::process::Command::new(self.git)
            .args(global_args)
            .args(["config", "--list", "-z"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        // Outside a repository git still lists the global config (status 0);
        // anything else means it could not be read.
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8(out.stdout).ok()?;
        Some(
            text.split('\0')
                .filter(|e| !e.is_empty())
                .map(|e| match e.split_once('\n') {
                    Some((k, v)) => (k.to_string(), v.to_string()),
                    None => (e.to_string(), "true".to_string()),
                })
                .collect(),
        )
    }
}

/// `sandpit exec --connect HOST PORT`: judge HOST:PORT again (the proxy judges it a
/// third time), open a CONNECT tunnel through sandpit's proxy and relay
/// stdin/stdout over it.
pub fn connect(host: &str, port: &str, fallback: Fallback<'_>) -> i32 {
    let port: u16 = match port.parse() {
        Ok(p) if p != 0 => p,
        _ => return blocked(&format!("sandpit: connect: bad port {port:?}")),
    };
    let policy = match load_policy("ssh", fallback) {
        Ok(p) => p,
        Err(msg) => return blocked(&format!("sandpit: connect: {msg}")),
    };
    if let Err(reason) = policy.connect(host, Some(port)) {
        return blocked(&format!("sandpit: ssh tunnel: {reason}"));
    }
    match tunnel(host, port) {
        Ok(()) => 0,
        Err(e) => blocked(&format!("sandpit: ssh tunnel to {host}:{port}: {e}")),
    }
}

/// The proxy's address and `user:password` from `SANDPIT_PROXY_URL`.
fn proxy_endpoint() -> Result<(String, Option<String>), String> {
    let url = std::env::var(PROXY_URL_VAR)
        .map_err(|_| format!("{PROXY_URL_VAR} is not set: no proxy to tunnel through"))?;
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{PROXY_URL_VAR} must be an http:// URL"))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    Ok(match authority.rsplit_once('@') {
        Some((cred, hp)) => (hp.to_string(), Some(cred.to_string())),
        None => (authority.to_string(), None),
    })
}

fn base64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(T[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Copy until end of file, flushing every chunk. Deliberately not `io::copy`: its
/// splice(2) fast path between a pipe and a socket stalled ssh sessions here.
fn relay(from: &mut dyn Read, to: &mut dyn Write) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
    }
}

fn tunnel(host: &str, port: u16) -> Result<(), String> {
    let (proxy, cred) = proxy_endpoint()?;
    // The launcher always names a literal address; parsing it here keeps the
    // (static) shim binary away from getaddrinfo and NSS.
    let addr: std::net::SocketAddr = proxy
        .parse()
        .map_err(|_| format!("{PROXY_URL_VAR} must name an IP address and port, not {proxy:?}"))?;
    let mut sock = std::net::TcpStream::connect(addr)
        .map_err(|e| format!("cannot reach sandpit's proxy at {proxy}: {e}"))?;
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(c) = cred {
        req.push_str(&format!(
            "Proxy-Authorization: Basic {}\r\n",
            base64(c.as_bytes())
        ));
    }
    req.push_str("\r\n");
    sock.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    // Read the response head byte by byte so no tunnel bytes are consumed.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 {
            return Err("the proxy's answer is too long".into());
        }
        match sock.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return Err("the proxy closed the connection".into()),
        }
    }
    let status_line =
        String::from_utf8_lossy(head.split(|b| *b == b'\r').next().unwrap_or(&[])).into_owned();
    if status_line.split_whitespace().nth(1) != Some("200") {
        // The proxy's refusal body carries its own reason line.
        let mut body = String::new();
        let _ = sock.take(4096).read_to_string(&mut body);
        let why = body.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("the proxy refused: {status_line} {why}"));
    }
    let mut up = sock.try_clone().map_err(|e| e.to_string())?;
    let writer = std::thread::spawn(move || {
        let _ = relay(&mut std::io::stdin().lock(), &mut up);
        let _ = up.shutdown(std::net::Shutdown::Write);
    });
    let _ = relay(&mut sock, &mut std::io::stdout().lock());
    // The server closed: ssh is done with us even if stdin is still open.
    drop(writer);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_padding() {
        assert_eq!(base64(b"sandpit:tok"), "c2FuZHBpdDp0b2s=");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        assert_eq!(base64(b""), "");
    }
}
