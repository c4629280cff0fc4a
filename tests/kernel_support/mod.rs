//! Helpers shared by the kernel-layer end-to-end tests: run a shell script with and
//! without sandpit as the unprivileged test user, and build small C probes.
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::TestHome;

pub const CANARY: &str = "CANARY-7f3a9c-secret";

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `sh -c script` as the test user without any sandbox (the probe's control run).
pub fn bare(h: &TestHome, script: &str) -> Output {
    h.command("sh").arg("-c").arg(script).output().unwrap()
}

/// `sandpit run --kernel-only -- sh -c script` as the test user.
pub fn sandboxed(h: &TestHome, script: &str) -> Output {
    sandpit_cmd(h, &[], script).output().unwrap()
}

/// `sandpit run --kernel-only`: these tests judge the kernel layer alone (the
/// interposer would answer first, with its own errors; `tests/run_*.rs` test the
/// composed run).
pub fn sandpit_cmd(h: &TestHome, flags: &[&str], script: &str) -> Command {
    let mut c = h.sandpit();
    c.arg("run")
        .arg("--kernel-only")
        .args(flags)
        .arg("--")
        .arg("sh")
        .arg("-c")
        .arg(script);
    c
}

/// Compile a C probe from `tests/kernel_support/NAME.c` into the workspace (visible
/// and executable inside the sandbox). `static_link` builds with `-static`.
pub fn build_probe(h: &TestHome, name: &str, static_link: bool) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/kernel_support")
        .join(format!("{name}.c"));
    let out = h.workspace().join(name);
    let mut c = Command::new("cc");
    c.arg("-O1").arg("-o").arg(&out).arg(&src);
    if static_link {
        c.arg("-static");
    }
    let r = c.output().expect("cc must be installed to build probes");
    assert!(
        r.status.success(),
        "building {name} failed (static glibc needs libc6-dev): {}",
        text(&r)
    );
    h.give_to_test_user(&out);
    out
}

/// Is this path's content still `expected`?
pub fn content(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}
