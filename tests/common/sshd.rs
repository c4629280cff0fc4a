//! A real OpenSSH server on 127.0.0.1 for the tests that log in over SSH
//! (tests/shims_ssh.rs, tests/ssh_agent.rs): its own host key and authorized keys,
//! public keys only, no PAM; killed when dropped.
use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The running server.
pub struct Sshd(Child);

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `/usr/sbin/sshd` on 127.0.0.1:`port` with `hostkey` and `authorized`, and `extra`
/// options (`-o` each), once it answers with its banner.
pub fn start(port: u16, hostkey: &Path, authorized: &Path, extra: &[&str]) -> Sshd {
    let sshd = Path::new("/usr/sbin/sshd");
    assert!(
        sshd.exists(),
        "/usr/sbin/sshd is missing: install openssh-server"
    );
    if super::is_root() {
        // Privilege separation directory sshd insists on.
        std::fs::create_dir_all("/run/sshd").unwrap();
    }
    let mut c = Command::new(sshd);
    c.args(["-D", "-e", "-f", "/dev/null", "-p", &port.to_string()])
        .arg("-o")
        .arg(format!("HostKey={}", hostkey.display()))
        .arg("-o")
        .arg(format!("AuthorizedKeysFile={}", authorized.display()));
    for o in [
        "ListenAddress=127.0.0.1",
        "StrictModes=no",
        "UsePAM=no",
        "PidFile=none",
        "PasswordAuthentication=no",
        "KbdInteractiveAuthentication=no",
        "PermitRootLogin=prohibit-password",
    ]
    .iter()
    .chain(extra)
    {
        c.args(["-o", o]);
    }
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let guard = Sshd(child);
    super::wait_until(20, "sshd's banner", || {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let mut b = [0u8; 7];
        s.read_exact(&mut b).is_ok() && &b == b"SSH-2.0"
    });
    guard
}
