//! Shared helpers for the interposer tests: a policy written as the launcher writes
//! it (snapshot in the state dir), the embedded library extracted the way `sandpit
//! run` extracts it, and commands run as the unprivileged test user with the
//! preload environment composed by `sandpit::inject::child_env`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
use crate::common::{is_root, TestHome, TEST_GID, TEST_UID};
use sandpit::inject;
use sandpit_policy::{Context, Layer, LoadOptions, Source};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub const CANARY: &str = "CANARY-7f3a9c-SECRET";

pub struct Pit {
    pub h: TestHome,
    pub state: PathBuf,
    pub snapshot: PathBuf,
    pub scratch: PathBuf,
    pub lib: inject::Installed,
    pub ends: inject::Endpoints,
}

fn chown_tree(p: &Path) {
    if !is_root() {
        return;
    }
    std::os::unix::fs::lchown(p, Some(TEST_UID), Some(TEST_GID)).unwrap();
    if p.is_dir() && !p.is_symlink() {
        for e in std::fs::read_dir(p).unwrap() {
            chown_tree(&e.unwrap().path());
        }
    }
}

/// The C probe (tests/dylib_common/probe.c), compiled once per test binary.
pub fn probe() -> PathBuf {
    static PROBE: OnceLock<PathBuf> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let dir = tempfile::Builder::new()
                .prefix("sandpit-probe-")
                .tempdir_in("/tmp")
                .unwrap()
                .keep();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            let out = dir.join("probe");
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/dylib_common/probe.c");
            let st = Command::new("cc")
                .args(["-O1", "-o"])
                .arg(&out)
                .arg(&src)
                .status()
                .expect("cc must be installed to build the test probe");
            assert!(st.success(), "compiling the probe failed");
            out
        })
        .clone()
}

impl Pit {
    /// A sandbox whose policy is the built-in default plus `user_toml`, with a
    /// canary in `~/.ssh/id_rsa` and a file `ok.txt` in the workspace.
    pub fn new(user_toml: &str) -> Pit {
        let h = TestHome::new();
        let state = h.home().join(".sandpit");
        let scratch = h.dir.path().join("scratch");
        std::fs::create_dir_all(&scratch).unwrap();
        h.give_to_test_user(&scratch);
        let ctx = Context {
            home: h.home(),
            workspace: h.workspace(),
            scratch: scratch.clone(),
            state_dir: state.clone(),
        };
        let mut o = LoadOptions::new(ctx);
        o.user = Some(Source::new(
            Layer::User,
            state.join("config.toml").display().to_string(),
            user_toml,
        ));
        let policy = sandpit_policy::load(&o).unwrap();
        let lib = inject::install(&state, inject::Stamps::Trusted).unwrap();
        let run = state.join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        let snapshot = run.join("policy.snapshot");
        std::fs::write(&snapshot, policy.snapshot()).unwrap();
        std::fs::set_permissions(&snapshot, std::fs::Permissions::from_mode(0o600)).unwrap();
        chown_tree(&state);
        h.write(&h.home().join(".ssh/id_rsa"), CANARY);
        h.write(&h.workspace().join("ok.txt"), "workspace-data");
        Pit {
            h,
            state,
            snapshot,
            scratch,
            lib,
            ends: inject::Endpoints::default(),
        }
    }

    /// Replace the snapshot's bytes (keeping its owner and mode).
    pub fn write_snapshot(&self, bytes: &[u8]) {
        std::fs::write(&self.snapshot, bytes).unwrap();
        chown_tree(&self.snapshot);
    }

    /// `program` as the test user, without the interposer (the positive baseline).
    pub fn bare(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = self.h.command(program);
        c.env("TMPDIR", &self.scratch);
        c
    }

    /// `program` as the test user under the interposer.
    pub fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = self.bare(program);
        for (k, v) in inject::child_env(None, &self.lib, &self.snapshot, &self.state, &self.ends) {
            c.env(k, v);
        }
        c
    }

    pub fn home(&self) -> PathBuf {
        self.h.home()
    }
    pub fn ws(&self) -> PathBuf {
        self.h.workspace()
    }
}

pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

pub fn run(c: &mut Command) -> Out {
    let o: Output = c.output().unwrap();
    Out {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Run the probe with `args` under the interposer.
pub fn probe_in(p: &Pit, args: &[&str]) -> Out {
    run(p.cmd(probe()).args(args))
}

/// Run the probe with `args` without the interposer.
pub fn probe_bare(p: &Pit, args: &[&str]) -> Out {
    run(p.bare(probe()).args(args))
}

pub fn errno_of(o: &Out) -> Option<i32> {
    o.stdout
        .lines()
        .find_map(|l| l.strip_prefix("err "))
        .and_then(|e| e.trim().parse().ok())
}
