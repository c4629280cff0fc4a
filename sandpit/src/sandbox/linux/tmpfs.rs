//! `limits.tmp_bytes` reached: the run's private `/tmp`, `/dev/shm` and `$TMPDIR`
//! are tmpfs mounts of that size, and a program that fills one gets ENOSPC ("No
//! space left on device") and nothing else — the user sees a build fail for want of
//! disk on a machine with plenty. The run's end says which mount was full, the
//! limit and how to raise it, as for the other limits.
//!
//! Pid 1 of the sandbox opens each mount (an `O_PATH` descriptor) once it has built
//! the root and hands it to the launcher over the set-up socket; the launcher reads
//! its use (`fstatvfs`) at the end: the descriptor holds the file system after the
//! sandbox's mount namespace is gone. What it cannot see: a mount filled and emptied again before the end (the
//! files are what a full mount leaves behind in almost every case).
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::plan::{MountOp, Plan};

/// What the end's line says about the limit: where `limits.tmp_bytes` was set, and
/// the run's scratch directory (`$TMPDIR`, named as such).
#[derive(Debug, Clone)]
pub struct Limit {
    pub origin: String,
    pub scratch: PathBuf,
}

/// The run's bounded tmpfs mounts, held open.
#[derive(Debug)]
pub struct Watch {
    mounts: Vec<(PathBuf, OwnedFd)>,
}

/// One mount found full at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full {
    pub path: PathBuf,
    /// The mount's size (`limits.tmp_bytes`).
    pub size: u64,
}

impl Watch {
    /// The mounts pid 1 of the sandbox opened and handed over ([`open`]).
    pub fn new(mounts: Vec<(PathBuf, OwnedFd)>) -> Watch {
        Watch { mounts }
    }

    /// The mounts that are full now: less than a 64th of their size free (a writer
    /// that met ENOSPC leaves at most a part of a page).
    pub fn full(&self) -> Vec<Full> {
        self.mounts
            .iter()
            .filter_map(|(path, fd)| {
                let s = rustix::fs::fstatvfs(fd).ok()?;
                let size = s.f_blocks.saturating_mul(s.f_frsize);
                let free = s.f_bfree.saturating_mul(s.f_frsize);
                is_full(size, free).then(|| Full {
                    path: path.clone(),
                    size,
                })
            })
            .collect()
    }
}

/// The plan's bounded tmpfs mounts, opened (`O_PATH`) by pid 1 of the sandbox once
/// it has built its root: the launcher cannot open them through `/proc/PID/root`,
/// since pid 1 is not dumpable. Best effort: one that cannot be opened is left out.
pub fn open(plan: &Plan) -> Vec<(PathBuf, OwnedFd)> {
    use rustix::fs::{Mode, OFlags};
    plan.mounts
        .iter()
        .filter_map(|m| match m {
            MountOp::Tmpfs { path, size } if *size != 0 => Some(path),
            _ => None,
        })
        .filter_map(|path| {
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fd = rustix::fs::open(path, flags, Mode::empty()).ok()?;
            Some((path.clone(), fd))
        })
        .collect()
}

fn is_full(size: u64, free: u64) -> bool {
    size != 0 && free < size / 64
}

/// The run's last word on full mounts: one line naming them, the limit, where it
/// was set and how to raise it (`None` when none was full).
pub fn full_line(full: &[Full], scratch: &Path, origin: &str) -> Option<String> {
    let first = full.first()?;
    let names: Vec<String> = full
        .iter()
        .map(|f| match f.path == scratch {
            true => format!("$TMPDIR ({})", f.path.display()),
            false => f.path.display().to_string(),
        })
        .collect();
    Some(format!(
        "sandpit: the run filled {} to limits.tmp_bytes = {} ({origin}): writes there \
         likely failed with ENOSPC (\"No space left on device\"); raise it under [limits] in \
         ~/.sandpit/config.toml (0: half the machine's memory each) if the command needs more",
        names.join(" and "),
        first.size
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn full_is_within_a_64th_of_the_size() {
        assert!(is_full(32 << 20, 0));
        assert!(is_full(32 << 20, 4096));
        assert!(!is_full(32 << 20, 1 << 20));
        assert!(!is_full(0, 0));
    }

    #[test]
    fn the_line_names_each_full_mount_and_the_limit() {
        let scratch = Path::new("/run/user/1000/sandpit/run-1");
        assert_eq!(full_line(&[], scratch, "x"), None);
        let full = [
            Full {
                path: scratch.to_path_buf(),
                size: 1 << 20,
            },
            Full {
                path: "/tmp".into(),
                size: 1 << 20,
            },
        ];
        let line = full_line(&full, scratch, "/h/.sandpit/config.toml:3:1").unwrap();
        assert!(
            line.starts_with(
                "sandpit: the run filled $TMPDIR (/run/user/1000/sandpit/run-1) and /tmp to \
                 limits.tmp_bytes = 1048576 (/h/.sandpit/config.toml:3:1)"
            ) && line.contains("ENOSPC")
                && line.contains("raise it under [limits]"),
            "{line}"
        );
    }
}
