//! `limits.memory`: the memory the whole run may hold.
//!
//! Where this user may make cgroups (a cgroup v2 subtree delegated to it with the
//! memory controller, as systemd does for `user@.service` and for
//! `systemd-run --user --scope -p Delegate=yes`), the run gets a cgroup of its own
//! with `memory.max`: every process of the sandbox counts, and so do the pages of
//! its memory-backed `/tmp` and `/dev/shm` (tmpfs pages are charged to the cgroup of
//! the process that wrote them). cgroup v2 allows processes only in leaves, so the
//! launcher must be alone in its cgroup: it moves itself into a leaf beside the
//! run's (`<own>/sandpit-launcher`, `<own>/sandpit-run-<pid>`).
//!
//! Elsewhere each process of the sandbox gets `RLIMIT_DATA` = the limit (its heap
//! and private writable mappings), and `/tmp` and `/dev/shm` stay bounded by
//! `limits.tmp_bytes` alone: the run says so in its `weaker:` list.
use std::io;
use std::path::{Path, PathBuf};

/// How the run's memory is limited ([`super::plan::Plan::memory`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Memory {
    /// A cgroup of the run's own under `own`, the launcher's delegated cgroup.
    Cgroup { own: PathBuf, bytes: u64 },
    /// `RLIMIT_DATA` in each process.
    Data { bytes: u64 },
}

/// For the layers line.
pub fn describe(m: &Memory) -> String {
    match m {
        Memory::Cgroup { bytes, .. } => {
            format!("memory at most {} for the run (cgroup)", size(*bytes))
        }
        Memory::Data { bytes } => format!("at most {} of data per process", size(*bytes)),
    }
}

/// `n` bytes in the largest binary unit that divides it.
pub fn size(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}

/// The launcher's cgroup when it may hold the run's: cgroup v2, the memory
/// controller delegated to it, writable by this user, and this process alone in it.
/// Else why not, for the `weaker:` line.
pub fn probe() -> Result<PathBuf, String> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let own = own_cgroup(&cgroup, &mountinfo)
        .ok_or("no cgroup v2 hierarchy holds this process (a cgroup v1 or hybrid system)")?;
    delegated(own, std::process::id())
}

/// `own` when it may hold the run's cgroup: the memory controller available there,
/// writable by this user, and process `me` alone in it.
fn delegated(own: PathBuf, me: u32) -> Result<PathBuf, String> {
    let controllers = std::fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "memory") {
        return Err(format!(
            "the memory controller is not delegated to this process's cgroup {}",
            own.display()
        ));
    }
    for f in ["", "cgroup.procs", "cgroup.subtree_control"] {
        let p = own.join(f);
        if rustix::fs::access(&p, rustix::fs::Access::WRITE_OK).is_err() {
            return Err(format!(
                "this user may not write {} (the cgroup is not delegated)",
                p.display()
            ));
        }
    }
    let procs = std::fs::read_to_string(own.join("cgroup.procs")).unwrap_or_default();
    let me = me.to_string();
    if procs.lines().any(|p| p.trim() != me) {
        return Err(format!(
            "other processes share this process's cgroup {}: start sandpit in one of its own \
             (`systemd-run --user --scope -p Delegate=yes sandpit run …`)",
            own.display()
        ));
    }
    Ok(own)
}

/// The directory of this process's cgroup v2: its path from `/proc/self/cgroup`
/// (`0::/path`) under the cgroup2 mount of `/proc/self/mountinfo` whose root holds it.
pub fn own_cgroup(cgroup: &str, mountinfo: &str) -> Option<PathBuf> {
    let rel = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    if !rel.starts_with('/') || rel.contains("/..") {
        return None;
    }
    for l in mountinfo.lines() {
        // id parent major:minor root mountpoint options… - fstype source super
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        let (root, point) = (*f.get(3)?, *f.get(4)?);
        let under = if root == "/" {
            Some(rel)
        } else {
            rel.strip_prefix(root)
                .filter(|r| r.is_empty() || r.starts_with('/'))
        };
        if let Some(under) = under {
            let mut p = PathBuf::from(unescape(point));
            p.push(under.trim_start_matches('/'));
            return Some(p);
        }
    }
    None
}

/// Mount points in mountinfo escape space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The run's cgroup, removed when dropped (once the sandbox is gone).
#[derive(Debug)]
pub struct RunCgroup {
    dir: PathBuf,
}

impl RunCgroup {
    /// Move this process into a leaf of `own`, enable the memory controller below
    /// `own`, and make the run's cgroup with `memory.max` = `bytes` (no swap beyond
    /// it). At the limit the kernel ends the run's largest process, not the whole
    /// run: an agent whose build balloons keeps running.
    pub fn create(own: &Path, bytes: u64) -> io::Result<RunCgroup> {
        let ctx = |what: &str, p: &Path| {
            let what = what.to_string();
            let p = p.to_path_buf();
            move |e: io::Error| io::Error::new(e.kind(), format!("{what} {}: {e}", p.display()))
        };
        let leaf = own.join("sandpit-launcher");
        match std::fs::create_dir(&leaf) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(ctx("creating", &leaf)(e))
            }
            _ => {}
        }
        let procs = leaf.join("cgroup.procs");
        std::fs::write(&procs, std::process::id().to_string()).map_err(ctx("writing", &procs))?;
        let sub = own.join("cgroup.subtree_control");
        std::fs::write(&sub, "+memory").map_err(ctx("writing", &sub))?;
        let dir = own.join(format!("sandpit-run-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(ctx("creating", &dir))?;
        let cg = RunCgroup { dir };
        let max = cg.dir.join("memory.max");
        std::fs::write(&max, bytes.to_string()).map_err(ctx("writing", &max))?;
        // Without swap accounting these files are absent: the limit holds anyway.
        let _ = std::fs::write(cg.dir.join("memory.swap.max"), "0");
        Ok(cg)
    }

    /// Put process `pid` (and what it starts from now on) in the run's cgroup.
    pub fn add(&self, pid: i32) -> io::Result<()> {
        let procs = self.dir.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string())
            .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", procs.display())))
    }

    /// How many times the kernel ended processes of the run at the limit.
    pub fn oom_kills(&self) -> u64 {
        let events = std::fs::read_to_string(self.dir.join("memory.events")).unwrap_or_default();
        events
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // Empty once the sandbox's processes are gone; a cgroup that still holds
        // one stays (the kernel refuses), and is named by its launcher's pid.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
24 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
31 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
";

    #[test]
    fn the_own_cgroup_is_found_under_the_cgroup2_mount() {
        let p = own_cgroup(
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope\n",
            MOUNTINFO,
        );
        assert_eq!(
            p.unwrap(),
            Path::new(
                "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope"
            )
        );
        assert_eq!(
            own_cgroup("0::/\n", MOUNTINFO).unwrap(),
            Path::new("/sys/fs/cgroup/")
        );
        // A hybrid system: the v2 hierarchy mounted elsewhere, with a root of its own.
        let hybrid = "40 24 0:30 /sub /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_cgroup("4:memory:/x\n0::/sub/a\n", hybrid).unwrap(),
            Path::new("/sys/fs/cgroup/unified/a")
        );
        assert_eq!(own_cgroup("0::/other\n", hybrid), None);
        // cgroup v1 only, or nothing to go by.
        assert_eq!(own_cgroup("4:memory:/x\n", MOUNTINFO), None);
        assert_eq!(
            own_cgroup("0::/a\n", "24 1 253:0 / / rw - ext4 /dev/vda rw\n"),
            None
        );
        assert_eq!(own_cgroup("0::/../a\n", MOUNTINFO), None);
    }

    /// A stand-in for a delegated cgroup: a directory with the files the kernel
    /// would show.
    fn fake(controllers: &str, procs: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (f, v) in [
            ("cgroup.controllers", controllers),
            ("cgroup.procs", procs),
            ("cgroup.subtree_control", ""),
        ] {
            std::fs::write(d.path().join(f), v).unwrap();
        }
        d
    }

    #[test]
    fn a_cgroup_is_taken_only_with_the_memory_controller_and_alone_in_it() {
        let d = fake("cpu io memory pids\n", "42\n");
        assert_eq!(delegated(d.path().into(), 42).unwrap(), d.path());
        let e = delegated(d.path().into(), 7).unwrap_err();
        assert!(e.contains("other processes share"), "{e}");
        let d = fake("cpu io pids\n", "42\n");
        let e = delegated(d.path().into(), 42).unwrap_err();
        assert!(e.contains("memory controller is not delegated"), "{e}");
    }

    #[test]
    fn the_run_cgroup_is_made_beside_the_launchers_leaf() {
        let d = fake("memory\n", "42\n");
        let cg = RunCgroup::create(d.path(), 256 << 20).unwrap();
        let read = |p: &str| std::fs::read_to_string(d.path().join(p)).unwrap();
        assert_eq!(
            read("sandpit-launcher/cgroup.procs"),
            std::process::id().to_string()
        );
        assert_eq!(read("cgroup.subtree_control"), "+memory");
        let run = format!("sandpit-run-{}", std::process::id());
        assert_eq!(read(&format!("{run}/memory.max")), "268435456");
        assert_eq!(read(&format!("{run}/memory.swap.max")), "0");
        cg.add(1234).unwrap();
        assert_eq!(read(&format!("{run}/cgroup.procs")), "1234");
        assert_eq!(cg.oom_kills(), 0);
        std::fs::write(
            d.path().join(&run).join("memory.events"),
            "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n",
        )
        .unwrap();
        assert_eq!(cg.oom_kills(), 2);
    }

    #[test]
    fn escaped_mount_points_are_read_back() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/a\\\\"), "/a\\\\");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
