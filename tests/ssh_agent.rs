//! git over SSH through sandpit's filtering agent (`sandpit/src/sshagent/`): a real
//! `sshd` on loopback serving a bare repository, a real `ssh-agent` of the test user
//! holding a fresh key, and `sandpit run` with that agent's `SSH_AUTH_SOCK`. Inside,
//! `git clone` and `git push` over SSH log in through the agent socket sandpit
//! serves; `ssh-keygen -Y sign`, adding and removing keys, and a login to a host
//! whose key the user's `known_hosts` gives to a destination the policy does not
//! allow, get nothing; the private key file stays unreadable.
//!
//! The name `ssh.test` exists only in sandpit's resolver (`[network.resolve]`);
//! ssh reaches it through the ProxyCommand the ssh shim supplies. Needs
//! `openssh-server` and `openssh-client` (sshd, ssh-agent, ssh-add, ssh-keygen).
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use common::{text, TestHome};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "sandpit-test", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

fn login_user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

struct World {
    h: TestHome,
    port: u16,
    agent_sock: PathBuf,
    host_pub: String,
    repo: PathBuf,
    user: String,
    _sshd: common::sshd::Sshd,
    _agent: Killed,
}

impl World {
    fn new() -> World {
        assert!(
            Path::new("/usr/sbin/sshd").exists(),
            "/usr/sbin/sshd is missing: install openssh-server"
        );
        let h = TestHome::new();
        let root = h.dir.path().to_path_buf();
        let srv = root.join("server");
        std::fs::create_dir_all(&srv).unwrap();
        std::fs::set_permissions(&srv, std::fs::Permissions::from_mode(0o755)).unwrap();
        // The user's key, in ~/.ssh as ssh-keygen leaves it.
        let ssh_dir = h.home().join(".ssh");
        std::fs::create_dir_all(&ssh_dir).unwrap();
        std::fs::set_permissions(&ssh_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let key = ssh_dir.join("id_ed25519");
        keygen(&key);
        for p in [&ssh_dir, &key, &key.with_extension("pub")] {
            h.give_to_test_user(p);
        }
        let authorized = srv.join("authorized_keys");
        std::fs::copy(key.with_extension("pub"), &authorized).unwrap();
        // The server and its host key.
        let hostkey = srv.join("hostkey");
        keygen(&hostkey);
        let host_pub = std::fs::read_to_string(hostkey.with_extension("pub")).unwrap();
        let repo = srv.join("repo.git");
        let st = Command::new("git")
            .args(["init", "-q", "--bare", "-b", "main"])
            .arg(&repo)
            .status()
            .unwrap();
        assert!(st.success());
        let st = Command::new("chown")
            .args(["-R", &format!("{}:{}", login_user(), login_user())])
            .arg(&repo)
            .status()
            .unwrap();
        assert!(st.success());
        let port = common::free_port();
        let sshd = common::sshd::start(port, &hostkey, &authorized, &[]);
        // The test user's own agent, holding the key.
        let agent_dir = root.join("agent");
        std::fs::create_dir_all(&agent_dir).unwrap();
        std::fs::set_permissions(&agent_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        h.give_to_test_user(&agent_dir);
        let agent_sock = agent_dir.join("agent.sock");
        let agent = h
            .command("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&agent_sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let agent = Killed(agent);
        common::wait_until(20, "ssh-agent's socket", || agent_sock.exists());
        let w = World {
            h,
            port,
            agent_sock,
            host_pub,
            repo,
            user: login_user(),
            _sshd: sshd,
            _agent: agent,
        };
        let out = w.outside("ssh-add").arg(&key).output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        w.h.user_config(&format!(
            "[network]\nallow = [\"ssh.test:{port}\"]\n[network.resolve]\n\"ssh.test\" = \"127.0.0.1\"\n"
        ));
        w
    }

    /// The user's `known_hosts`: the server's key under `name`, hashed as
    /// `HashKnownHosts yes` writes it, or plain.
    fn known_as(&self, name: &str, hashed: bool) {
        let path = self.h.home().join(".ssh/known_hosts");
        let key: Vec<&str> = self.host_pub.split_whitespace().take(2).collect();
        self.h.write(&path, &format!("{name} {}\n", key.join(" ")));
        if !hashed {
            return;
        }
        let st = Command::new("ssh-keygen")
            .arg("-H")
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        let _ = std::fs::remove_file(path.with_extension("old"));
        self.h.give_to_test_user(&path);
        assert!(std::fs::read_to_string(&path).unwrap().starts_with("|1|"));
    }

    /// A command of the test user outside the sandbox, with its agent.
    fn outside(&self, program: &str) -> Command {
        let mut c = self.h.command(program);
        c.env("SSH_AUTH_SOCK", &self.agent_sock)
            .stdin(Stdio::null());
        c
    }

    /// `sh -c script` under `sandpit run --shims`, the launcher holding the agent.
    fn sandpit(&self, script: &str) -> Output {
        self.sandpit_with(&[], &[], script)
    }

    /// The same with more `sandpit run` flags and variables.
    fn sandpit_with(&self, flags: &[&str], env: &[(&str, &str)], script: &str) -> Output {
        let mut c = self.outside(common::sandpit_bin().to_str().unwrap());
        c.args(["run", "--shims"])
            .args(flags)
            .args(["--", "sh", "-c", script])
            .env("GIT_SSH_COMMAND", self.ssh_command())
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    /// ssh as git runs it: the user's known hosts checked strictly, the key named
    /// by its file (ssh reads the `.pub` and asks the agent for the rest; `-i` would
    /// drop a file it cannot see). ssh takes ~/.ssh from the password database, not
    /// HOME: named here.
    fn ssh_command(&self) -> String {
        let ssh = self.h.home().join(".ssh");
        format!(
            "ssh -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityFile={} -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes -o LogLevel=ERROR",
            ssh.join("id_ed25519").display(),
            ssh.join("known_hosts").display()
        )
    }

    fn url(&self) -> String {
        format!(
            "ssh://{}@ssh.test:{}{}",
            self.user,
            self.port,
            self.repo.display()
        )
    }

    /// The keys the real agent holds.
    fn agent_keys(&self) -> String {
        let out = self.outside("ssh-add").arg("-l").output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

#[test]
fn git_clones_and_pushes_over_ssh_through_the_filtering_agent_and_nothing_else_is_signed() {
    let w = World::new();
    w.known_as(&format!("[ssh.test]:{}", w.port), true);
    let private = std::fs::read_to_string(w.h.home().join(".ssh/id_ed25519")).unwrap();
    let canary = private.lines().nth(1).unwrap().to_string();

    // The probe works bare: the agent signs anything for whoever reaches it.
    let payload = w.h.workspace().join("payload");
    w.h.write(&payload, "data\n");
    let out = w
        .outside("ssh-keygen")
        .args(["-Y", "sign", "-n", "file", "-f"])
        .arg(w.h.home().join(".ssh/id_ed25519.pub"))
        .arg(&payload)
        .output()
        .unwrap();
    assert!(out.status.success(), "bare: {}", text(&out));
    let sig = payload.with_extension("sig");
    assert!(sig.exists());
    std::fs::remove_file(&sig).unwrap();

    // Positive control: clone, commit, push over SSH inside the sandbox.
    let script = format!(
        "set -e; git clone -q {url} clone; cd clone; git -c user.name=t -c user.email=t@t \
         commit -q --allow-empty -m from-the-sandbox; git push -q origin HEAD:main; echo pushed",
        url = w.url()
    );
    let out = w.sandpit(&script);
    assert!(out.status.success(), "{}", text(&out));
    assert!(common::stdout(&out).contains("pushed"), "{}", text(&out));
    let log = Command::new("git")
        .arg("-C")
        .arg(&w.repo)
        .args(["log", "--format=%s", "main"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout).trim(),
        "from-the-sandbox"
    );

    // Through the same socket: no signature of other data, no key added or
    // removed, and the private key stays unreadable.
    let extra = w.h.workspace().join("extra");
    let script = format!(
        "test -S \"$SSH_AUTH_SOCK\" && echo socket-ok; \
         ssh-add -l && echo listed; \
         ssh-keygen -Y sign -n file -f ~/.ssh/id_ed25519.pub {payload} && echo SIGNED; \
         ssh-keygen -q -t ed25519 -N '' -f {extra} && ssh-add {extra} && echo ADDED; \
         ssh-add -D && echo REMOVED; \
         ssh-add -x </dev/null && echo LOCKED; \
         cat ~/.ssh/id_ed25519; \
         cat ~/.ssh/id_ed25519.pub ~/.ssh/known_hosts >/dev/null && echo public-ok",
        payload = payload.display(),
        extra = extra.display()
    );
    let out = w.sandpit(&script);
    let all = text(&out);
    assert!(all.contains("socket-ok"), "{all}");
    assert!(
        all.contains("listed") && all.contains("sandpit-test"),
        "{all}"
    );
    assert!(all.contains("public-ok"), "{all}");
    for never in ["SIGNED", "ADDED", "REMOVED", "LOCKED"] {
        assert!(!all.contains(never), "{never}: {all}");
    }
    assert!(!sig.exists(), "{all}");
    assert!(!all.contains(&canary), "{all}");
    assert!(all.contains("the SSH agent refused"), "{all}");
    // The real agent still holds its one key, unlocked.
    let keys = w.agent_keys();
    assert_eq!(keys.lines().count(), 1, "{keys}");
    assert!(keys.contains("sandpit-test"), "{keys}");
}

#[test]
fn a_session_with_a_host_whose_known_name_is_not_allowed_gets_no_signature() {
    let w = World::new();
    // The user knows this host key as other.test, which the policy does not allow:
    // ssh itself is told not to check, so only the agent stands in the way.
    w.known_as(&format!("[other.test]:{}", w.port), false);
    let unchecked = "ssh -o BatchMode=yes -o IdentitiesOnly=yes -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR";
    let login = format!(
        "{unchecked} -o IdentityFile={} -p {} {}@ssh.test echo logged-in",
        w.h.home().join(".ssh/id_ed25519").display(),
        w.port,
        w.user
    );
    let out = w.sandpit(&login);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(!all.contains("logged-in"), "{all}");
    assert!(
        all.contains("the SSH agent refused")
            && !all.contains("[other.test]")
            && all.contains("other.test:")
            && all.contains("does not allow"),
        "{all}"
    );

    // Control: the same login once the user knows the key as ssh.test.
    w.known_as(&format!("[ssh.test]:{}", w.port), true);
    let out = w.sandpit(&login);
    assert!(out.status.success(), "{}", text(&out));
    assert!(common::stdout(&out).contains("logged-in"), "{}", text(&out));
}

/// Without the interposer (a static agent meets only the kernel layer) and in the
/// Landlock-only fallback, the agent socket is the same: clone works, signing
/// anything else does not.
#[test]
fn the_agent_works_the_same_without_the_interposer_and_in_the_fallback_mode() {
    let w = World::new();
    w.known_as(&format!("[ssh.test]:{}", w.port), true);
    let payload = w.h.workspace().join("payload");
    w.h.write(&payload, "data\n");
    for (i, (flags, env)) in [
        (&["--kernel-only"][..], &[][..]),
        (
            &["--allow-degraded"][..],
            &[("SANDPIT_FORCE_FALLBACK", "1")][..],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let script = format!(
            "git clone -q {url} clone{i} && echo cloned; \
             ssh-keygen -Y sign -n file -f ~/.ssh/id_ed25519.pub {payload} && echo SIGNED",
            url = w.url(),
            payload = payload.display()
        );
        let out = w.sandpit_with(flags, env, &script);
        let all = text(&out);
        assert!(all.contains("cloned"), "{flags:?} {env:?}: {all}");
        assert!(!all.contains("SIGNED"), "{flags:?} {env:?}: {all}");
        assert!(!payload.with_extension("sig").exists(), "{all}");
    }
}
