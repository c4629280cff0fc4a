//! ssh, scp and git-over-ssh through the shims to a loopback sshd: allowed hosts are
//! tunnelled through the proxy by the ProxyCommand sandpit supplies; a blocked host
//! never reaches the proxy or the server.
//!
//! The proxy here is a minimal CONNECT proxy in the test (the real one lives in the
//! launcher); it maps the test name `ssh.test` to 127.0.0.1, as sandpit's resolver
//! would. The name does not resolve on this machine, so a session can only succeed
//! through the tunnel. Needs `openssh-server` (sshd, sftp-server) installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use common::text;

use common::TestHome;
use sandpit_policy::{Layer, LoadOptions, Source};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

const TOKEN_AUTH: &str = "Basic c2FuZHBpdDp0b2s="; // sandpit:tok

fn login_user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn start_sshd(dir: &Path, port: u16, authorized: &Path) -> common::sshd::Sshd {
    let hostkey = dir.join("hostkey");
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&hostkey)
        .status()
        .unwrap();
    assert!(st.success());
    common::sshd::start(
        port,
        &hostkey,
        authorized,
        &["Subsystem=sftp /usr/lib/openssh/sftp-server"],
    )
}

/// A CONNECT proxy on loopback that records each target and maps `ssh.test` to
/// 127.0.0.1. Returns its port and the log.
fn start_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let log = log2.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if c.read(&mut b).unwrap_or(0) != 1 {
                        return;
                    }
                    head.push(b[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
                log.lock().unwrap().push(target.clone());
                let authed = head
                    .lines()
                    .any(|l| l.eq_ignore_ascii_case(&format!("proxy-authorization: {TOKEN_AUTH}")));
                let Some(port) = target.strip_prefix("ssh.test:") else {
                    let _ = c.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\nnot mapped\n");
                    return;
                };
                if !authed {
                    let _ = c.write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n");
                    return;
                }
                let Ok(up) = TcpStream::connect(format!("127.0.0.1:{port}")) else {
                    let _ = c.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                    return;
                };
                let _ = c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
                let (mut c2, mut up2) = (c.try_clone().unwrap(), up.try_clone().unwrap());
                let mut up = up;
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c2, &mut up2);
                    let _ = up2.shutdown(std::net::Shutdown::Write);
                });
                let _ = std::io::copy(&mut up, &mut c);
                let _ = c.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (port, log)
}

struct Fx {
    h: TestHome,
    shims: PathBuf,
    snapshot: PathBuf,
    key: PathBuf,
    ssh_port: u16,
    proxy_port: u16,
    proxy_log: Arc<Mutex<Vec<String>>>,
    user: String,
    _sshd: common::sshd::Sshd,
}

impl Fx {
    fn new() -> Fx {
        Fx::build(false)
    }

    /// `small`: the shims link to the small `sandpit-shim` binary (as in
    /// `sandpit run --shims`), which is then also ssh's ProxyCommand.
    fn build(small: bool) -> Fx {
        let h = TestHome::new();
        let root = h.dir.path().to_path_buf();
        let state = root.join("state");
        let srv = root.join("server");
        for d in [&state, &srv] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // The client's key belongs to the test user (ssh refuses keys others can read).
        let key = h.home().join("id");
        let st = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap();
        assert!(st.success());
        h.give_to_test_user(&key);
        let authorized = srv.join("authorized_keys");
        std::fs::copy(key.with_extension("pub"), &authorized).unwrap();
        let ssh_port = common::free_port();
        let sshd = start_sshd(&srv, ssh_port, &authorized);
        let (proxy_port, proxy_log) = start_proxy();

        let ctx = sandpit_policy::Context {
            home: h.home(),
            workspace: h.workspace(),
            scratch: root.join("scratch"),
            state_dir: state.clone(),
        };
        let mut opts = LoadOptions::new(ctx);
        opts.user = Some(Source::new(
            Layer::User,
            "/test/config.toml",
            format!("[network]\nallow = [\"ssh.test:{ssh_port}\"]\n"),
        ));
        let policy = sandpit_policy::load(&opts).unwrap();
        let snapshot = state.join("policy.snapshot");
        std::fs::write(&snapshot, policy.snapshot()).unwrap();
        let shims = root.join("shims");
        let target = if small {
            let out = h
                .sandpit()
                .args(["exec", "--install-shim"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out));
            PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
        } else {
            common::sandpit_bin()
        };
        let made = sandpit_shims::build_for_policy(
            &shims,
            &target,
            &policy,
            "/usr/local/bin:/usr/bin:/bin",
        )
        .unwrap();
        for t in ["ssh", "scp", "git"] {
            assert!(made.contains(&t.to_string()), "{made:?}");
        }
        Fx {
            h,
            shims,
            snapshot,
            key,
            ssh_port,
            proxy_port,
            proxy_log,
            user: login_user(),
            _sshd: sshd,
        }
    }

    fn cmd(&self, tool: &str) -> Command {
        let mut c = self.h.command(tool);
        c.env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", self.shims.display()),
        )
        .env("SANDPIT_SNAPSHOT", &self.snapshot)
        .env("SANDPIT_SHIM_DIR", &self.shims)
        .env(
            "SANDPIT_PROXY_URL",
            format!("http://sandpit:tok@127.0.0.1:{}", self.proxy_port),
        )
        .stdin(Stdio::null());
        c
    }

    fn ssh_opts(&self) -> Vec<String> {
        vec![
            "-i".into(),
            self.key.display().to_string(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            "IdentitiesOnly=yes".into(),
            "-o".into(),
            "StrictHostKeyChecking=no".into(),
            "-o".into(),
            "UserKnownHostsFile=/dev/null".into(),
            "-o".into(),
            "LogLevel=ERROR".into(),
        ]
    }

    fn proxy_log(&self) -> Vec<String> {
        self.proxy_log.lock().unwrap().clone()
    }
}

#[test]
fn ssh_to_an_allowed_host_goes_through_the_tunnel_and_a_blocked_host_nowhere() {
    ssh_tunnel_and_blocked_host(&Fx::new());
}

#[test]
fn ssh_through_the_small_shim_goes_through_the_tunnel_and_a_blocked_host_nowhere() {
    ssh_tunnel_and_blocked_host(&Fx::build(true));
}

fn ssh_tunnel_and_blocked_host(fx: &Fx) {
    let target = format!("ssh.test:{}", fx.ssh_port);

    // Allowed: a real session, through the proxy.
    let out = fx
        .cmd("ssh")
        .args(fx.ssh_opts())
        .args(["-p", &fx.ssh_port.to_string()])
        .arg(format!("{}@ssh.test", fx.user))
        .arg("echo tunnel-ok")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "tunnel-ok");
    assert_eq!(fx.proxy_log(), vec![target.clone()]);

    // Control: without the shims the name goes nowhere (it only exists in the proxy).
    let out = fx
        .cmd("/usr/bin/ssh")
        .args(fx.ssh_opts())
        .args(["-p", &fx.ssh_port.to_string()])
        .arg(format!("{}@ssh.test", fx.user))
        .arg("echo tunnel-ok")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(fx.proxy_log().len(), 1);

    // Blocked host: refused before ssh runs; the proxy sees nothing.
    let out = fx
        .cmd("ssh")
        .args(fx.ssh_opts())
        .args(["-p", &fx.ssh_port.to_string()])
        .arg(format!("{}@evil.test", fx.user))
        .arg("echo tunnel-ok")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("evil.test"));
    assert!(out.stdout.is_empty());
    // Allowed host, but the caller's own ProxyCommand: refused.
    let out = fx
        .cmd("ssh")
        .args(fx.ssh_opts())
        .args(["-p", &fx.ssh_port.to_string()])
        .args(["-o", "ProxyCommand=nc 127.0.0.1 22"])
        .arg(format!("{}@ssh.test", fx.user))
        .arg("echo tunnel-ok")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", text(&out));
    assert_eq!(fx.proxy_log().len(), 1);
}

#[test]
fn scp_and_git_over_ssh_use_the_tunnel() {
    let fx = Fx::new();
    let target = format!("ssh.test:{}", fx.ssh_port);

    // scp runs /usr/bin/ssh itself (not from PATH): the shim hands it the tunnel.
    let src = fx.h.dir.path().join("server").join("payload.txt");
    std::fs::write(&src, "scp-payload\n").unwrap();
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o644)).unwrap();
    let dst = fx.h.workspace().join("got.txt");
    let out = fx
        .cmd("scp")
        .args(fx.ssh_opts())
        .args(["-P", &fx.ssh_port.to_string()])
        .arg(format!("{}@ssh.test:{}", fx.user, src.display()))
        .arg(&dst)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&dst).unwrap(), "scp-payload\n");
    assert_eq!(fx.proxy_log(), vec![target.clone()]);

    // git runs `ssh` from PATH: the ssh shim judges and tunnels it.
    let repo = fx.h.dir.path().join("server").join("repo.git");
    let st = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&repo)
        .status()
        .unwrap();
    assert!(st.success());
    let ssh_cmd = format!("ssh {}", fx.ssh_opts().join(" "));
    let out = fx
        .cmd("git")
        .env("GIT_SSH_COMMAND", &ssh_cmd)
        .args(["ls-remote"])
        .arg(format!(
            "ssh://{}@ssh.test:{}{}",
            fx.user,
            fx.ssh_port,
            repo.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fx.proxy_log(), vec![target.clone(), target.clone()]);

    // git to a host the policy does not allow: refused by the git shim.
    let out = fx
        .cmd("git")
        .env("GIT_SSH_COMMAND", &ssh_cmd)
        .args(["ls-remote", "ssh://git@evil.test/r.git"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", text(&out));
    assert_eq!(fx.proxy_log().len(), 2);
}
