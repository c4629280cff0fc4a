//! Applying the namespace half of a `Plan` in the forked child: enter new user, mount,
//! pid, net, ipc and uts namespaces, then build the new root from the plan's mount
//! operations and pivot into it.
//!
//! The new root is a recursive bind of the host root made read-only and nosuid; the
//! plan's operations are laid over it in order. Binds use the new mount API on
//! descriptors (openat2 + open_tree + move_mount), so a path inside a writable root
//! is resolved without following symlinks when the plan says so.
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::plan::{Kind, MountOp, Plan, DEVICES};
use super::sys;

/// A failed step, named for the error the user sees.
#[derive(Debug)]
pub struct StepError {
    pub what: String,
    pub source: io::Error,
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

trait Ctx<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, StepError>;
}

impl<T, E: Into<io::Error>> Ctx<T> for Result<T, E> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, StepError> {
        self.map_err(|e| StepError {
            what: what(),
            source: e.into(),
        })
    }
}

fn cstr(p: &Path) -> Result<CString, StepError> {
    CString::new(p.as_os_str().as_bytes()).ctx(|| format!("path {p:?}"))
}

/// Staging directory (a tmpfs sandpit mounts over the host's /tmp in its own mount
/// namespace, then pivots into) and the names used inside it.
const BASE: &str = "/tmp";
const NEWROOT: &str = "/newroot";
const OLDROOT: &str = "/oldroot";
const MASK_FILE: &str = "/mask-file";
const SEALED_DIR: &str = "/sealed";
/// The only file of a sealed placeholder: git neither lists nor removes the directory.
pub const SEALED_GITIGNORE: &str = "# sandpit: a protected path, read-only for this run\n*\n";

fn under(prefix: &str, p: &Path) -> PathBuf {
    let rel = p.strip_prefix("/").unwrap_or(p);
    Path::new(prefix).join(rel)
}

/// Map `uid`/`gid` of the process `pid`, just cloned into a new user namespace, to
/// themselves (no privilege is gained outside; inside, it holds capabilities until it
/// execs). Written by its parent, the launcher.
pub fn map_ids(pid: libc::pid_t, uid: u32, gid: u32) -> io::Result<()> {
    std::fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
    std::fs::write(format!("/proc/{pid}/uid_map"), format!("{uid} {uid} 1\n"))?;
    std::fs::write(format!("/proc/{pid}/gid_map"), format!("{gid} {gid} 1\n"))
}

/// Move the caller (inside the sandbox's user namespace) into a fresh network
/// namespace with its loopback up, and return a descriptor of it for pid 1 to join
/// ([`join_network`]). Making a network namespace is the costliest step of a start
/// (~0.4 ms here, ten times the other namespaces together), so the helper makes it
/// while pid 1 builds the mount tree.
pub fn make_network() -> Result<std::os::fd::OwnedFd, StepError> {
    sys::unshare(libc::CLONE_NEWNET).ctx(|| "creating network namespace (unshare)".into())?;
    sys::loopback_up().ctx(|| "bringing up loopback".into())?;
    let ns = std::fs::File::open("/proc/self/ns/net")
        .ctx(|| "opening the new network namespace".into())?;
    Ok(ns.into())
}

/// Join the network namespace [`make_network`] made.
pub fn join_network(ns: std::os::fd::BorrowedFd<'_>) -> Result<(), StepError> {
    sys::setns(ns, libc::CLONE_NEWNET).ctx(|| "joining the network namespace (setns)".into())
}

/// Build the sandbox root from `plan.mounts` and pivot into it. Runs as pid 1 of the
/// new pid namespace (procfs is mounted for it).
pub fn apply_mounts(plan: &Plan) -> Result<(), StepError> {
    sys::make_private_recursive(c"/").ctx(|| "making mounts private".into())?;
    sys::mount_fs(
        c"tmpfs",
        c"/tmp",
        rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
        c"mode=0700",
    )
    .ctx(|| "mounting staging tmpfs".into())?;
    sys::chdir(c"/tmp").ctx(|| "entering staging tmpfs".into())?;
    for d in ["newroot", "oldroot"] {
        std::fs::create_dir(d).ctx(|| format!("creating staging {d}"))?;
    }
    sys::pivot_root(c".", c"oldroot").ctx(|| "pivot_root into staging".into())?;
    sys::chdir(c"/").ctx(|| "chdir /".into())?;
    let _ = BASE;

    // The host, read-only and nosuid, as the base of the new root.
    sys::rbind(c"/oldroot", c"/newroot").ctx(|| "binding the host root".into())?;
    let root = sys::open_path(c"/newroot", false).ctx(|| "opening new root".into())?;
    sys::set_mount_attr(
        root.as_fd(),
        true,
        sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID,
        0,
    )
    .ctx(|| "making the host view read-only".into())?;
    drop(root);

    {
        let f = std::fs::File::create(MASK_FILE).ctx(|| "creating mask file".into())?;
        f.set_permissions(std::fs::Permissions::from_mode(0o000))
            .ctx(|| "chmod mask file".into())?;
    }

    if plan
        .mounts
        .iter()
        .any(|m| matches!(m, MountOp::Sealed { .. }))
    {
        std::fs::create_dir(SEALED_DIR).ctx(|| "creating the sealed directory".into())?;
        let ignore = Path::new(SEALED_DIR).join(".gitignore");
        std::fs::write(&ignore, SEALED_GITIGNORE)
            .ctx(|| "writing the sealed directory's .gitignore".into())?;
        for (p, mode) in [(ignore.as_path(), 0o444), (Path::new(SEALED_DIR), 0o555)] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
                .ctx(|| format!("chmod {p:?}"))?;
        }
    }

    for (i, op) in plan.mounts.iter().enumerate() {
        apply_op(i, op)?;
    }

    sys::chdir(c"/newroot").ctx(|| "entering new root".into())?;
    sys::pivot_root(c".", c".").ctx(|| "pivot_root into new root".into())?;
    sys::umount_detach(c".").ctx(|| "detaching the old root".into())?;
    let cwd = cstr(&plan.cwd)?;
    sys::chdir(&cwd).ctx(|| format!("chdir {:?}", plan.cwd))?;
    Ok(())
}

fn exists_nofollow(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// Make sure a mountpoint exists in the new root; only ever needed inside sandpit's
/// own tmpfs (private /tmp, masks), since elsewhere the new root mirrors the host.
fn ensure_mountpoint(target: &Path, dir: bool) -> Result<(), StepError> {
    if exists_nofollow(target) {
        return Ok(());
    }
    if let Some(parent) = target.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .ctx(|| format!("creating mountpoint parent {parent:?}"))?;
    }
    if dir {
        std::fs::create_dir(target).ctx(|| format!("creating mountpoint {target:?}"))
    } else {
        std::fs::File::create(target)
            .map(drop)
            .ctx(|| format!("creating mountpoint {target:?}"))
    }
}

fn bind(path: &Path, no_symlinks: bool, read_only: bool) -> Result<(), StepError> {
    let src = under(OLDROOT, path);
    let dst = under(NEWROOT, path);
    let src_fd = sys::open_path(&cstr(&src)?, no_symlinks).ctx(|| format!("opening {path:?}"))?;
    let is_dir = std::fs::metadata(&src).map(|m| m.is_dir()).unwrap_or(true);
    ensure_mountpoint(&dst, is_dir)?;
    let tree = sys::clone_mount(src_fd.as_fd(), true).ctx(|| format!("cloning mount {path:?}"))?;
    if read_only {
        sys::set_mount_attr(
            tree.as_fd(),
            true,
            sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID,
            0,
        )
        .ctx(|| format!("making {path:?} read-only"))?;
    }
    let dst_fd =
        sys::open_path(&cstr(&dst)?, no_symlinks).ctx(|| format!("opening target {path:?}"))?;
    sys::move_mount(tree.as_fd(), dst_fd.as_fd()).ctx(|| format!("mounting {path:?}"))
}

/// Mount a read-only, inert copy of `template` (a file or directory prepared in the
/// staging root) over `path` in the new root.
fn place_template(
    template: &CStr,
    what: &str,
    path: &Path,
    nofollow: bool,
) -> Result<(), StepError> {
    let src = sys::open_path(template, false).ctx(|| format!("opening {what}"))?;
    let tree = sys::inert_clone(src.as_fd()).ctx(|| format!("cloning {what}"))?;
    let t = sys::open_path(&cstr(&under(NEWROOT, path))?, nofollow)
        .ctx(|| format!("opening {path:?}"))?;
    sys::move_mount(tree.as_fd(), t.as_fd()).ctx(|| format!("placing {what} over {path:?}"))
}

fn apply_op(i: usize, op: &MountOp) -> Result<(), StepError> {
    match op {
        MountOp::Tmpfs { path, size } => {
            let dst = under(NEWROOT, path);
            if !exists_nofollow(&dst) {
                // The scratch dir inside the private /tmp: made, as a bind would.
                if !std::fs::symlink_metadata(under(OLDROOT, path)).is_ok_and(|m| m.is_dir()) {
                    return Ok(()); // e.g. no /dev/shm on this host
                }
                ensure_mountpoint(&dst, true)?;
            }
            let size = CString::new(size.to_string()).ctx(|| "tmpfs size".to_string())?;
            let mut options = vec![(c"mode", c"1777")];
            if size.as_bytes() != b"0" {
                options.push((c"size", size.as_c_str()));
            }
            let m = sys::new_mount(
                c"tmpfs",
                &options,
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
            )
            .ctx(|| format!("creating tmpfs for {path:?}"))?;
            let t = sys::open_path(&cstr(&dst)?, false).ctx(|| format!("opening {path:?}"))?;
            sys::move_mount(m.as_fd(), t.as_fd()).ctx(|| format!("mounting tmpfs on {path:?}"))
        }
        MountOp::Writable { path, no_symlinks } => bind(path, *no_symlinks, false),
        MountOp::ReadOnly { path, no_symlinks } => bind(path, *no_symlinks, true),
        MountOp::MaskDir {
            path,
            allow,
            writable,
        } => {
            let dst = under(NEWROOT, path);
            let sealed_now = allow.is_empty() && writable.is_empty();
            let mode: &std::ffi::CStr = if sealed_now { c"000" } else { c"111" };
            let m =
                sys::small_tmpfs(mode, sealed_now).ctx(|| format!("creating mask for {path:?}"))?;
            let t = sys::open_path(&cstr(&dst)?, false).ctx(|| format!("opening {path:?}"))?;
            sys::move_mount(m.as_fd(), t.as_fd()).ctx(|| format!("masking {path:?}"))?;
            if !sealed_now {
                for (a, kind) in allow {
                    let adst = under(NEWROOT, a);
                    ensure_mountpoint(&adst, *kind == Kind::Dir)?;
                    bind(a, false, true)?;
                }
                for w in writable {
                    ensure_mountpoint(&under(NEWROOT, w), true)?;
                    bind(w, false, false)?;
                }
                let top =
                    sys::open_path(&cstr(&dst)?, false).ctx(|| format!("opening {path:?}"))?;
                sys::set_mount_attr(top.as_fd(), false, sys::MOUNT_ATTR_RDONLY, 0)
                    .ctx(|| format!("sealing mask {path:?}"))?;
            }
            Ok(())
        }
        MountOp::MaskFile { path } => place_template(c"/mask-file", "mask file", path, false),
        // Gone since the plan (its program ended): nothing to hide. Out of this
        // process's reach, which holds every right the command will (a socket in
        // another user's private directory, seen by a launcher run as root): none
        // for the command either. Any other failure stops the run.
        MountOp::MaskSocket { path } => {
            let reach = sys::open_path(&cstr(&under(NEWROOT, path))?, false);
            if reach.is_err_and(|e| e.raw_os_error() == Some(libc::EACCES)) {
                return Ok(());
            }
            match place_template(c"/mask-file", "mask file", path, false) {
                Err(e) if e.source.kind() == io::ErrorKind::NotFound => Ok(()),
                r => r,
            }
        }
        // The placeholder lies inside a writable root: never follow a symlink.
        MountOp::Sealed { path } => place_template(c"/sealed", "sealed dir", path, true),
        MountOp::Proc { path } => {
            let m = sys::new_mount(
                c"proc",
                &[],
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV | sys::MOUNT_ATTR_NOEXEC,
            )
            .ctx(|| "creating procfs".into())?;
            let t = sys::open_path(&cstr(&under(NEWROOT, path))?, false)
                .ctx(|| format!("opening {path:?}"))?;
            sys::move_mount(m.as_fd(), t.as_fd()).ctx(|| "mounting procfs".into())
        }
        MountOp::File { path, contents } => {
            let staged = PathBuf::from(format!("/file-{i}"));
            std::fs::write(&staged, contents).ctx(|| format!("staging {path:?}"))?;
            let src =
                sys::open_path(&cstr(&staged)?, false).ctx(|| format!("opening {staged:?}"))?;
            let tree = sys::clone_mount(src.as_fd(), false).ctx(|| format!("cloning {path:?}"))?;
            sys::set_mount_attr(tree.as_fd(), false, sys::MOUNT_ATTR_RDONLY, 0)
                .ctx(|| format!("sealing {path:?}"))?;
            // A link (resolv.conf into /run) is followed inside the new root.
            let t =
                sys::open_path_in(c"/newroot", &cstr(path)?).ctx(|| format!("opening {path:?}"))?;
            sys::move_mount(tree.as_fd(), t.as_fd()).ctx(|| format!("mounting {path:?}"))
        }
        MountOp::Dev { path, pass } => {
            let dst = under(NEWROOT, path);
            let m = sys::new_mount(
                c"tmpfs",
                &[(c"mode", c"0755"), (c"size", c"64k")],
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV | sys::MOUNT_ATTR_NOEXEC,
            )
            .ctx(|| format!("creating the sandbox's {path:?}"))?;
            let t = sys::open_path(&cstr(&dst)?, true).ctx(|| format!("opening {path:?}"))?;
            sys::move_mount(m.as_fd(), t.as_fd()).ctx(|| format!("mounting {path:?}"))?;
            for d in ["pts", "shm"] {
                std::fs::create_dir(dst.join(d)).ctx(|| format!("creating {path:?}/{d}"))?;
            }
            for (name, to) in [
                ("fd", "/proc/self/fd"),
                ("stdin", "/proc/self/fd/0"),
                ("stdout", "/proc/self/fd/1"),
                ("stderr", "/proc/self/fd/2"),
                ("ptmx", "pts/ptmx"),
            ] {
                std::os::unix::fs::symlink(to, dst.join(name))
                    .ctx(|| format!("linking {path:?}/{name}"))?;
            }
            // Each device bound from the host's, where the host has it; a passed one
            // never through a link (`/dev/log` → a socket under the masked /run,
            // `/dev/core` → /proc/kcore): the run stops instead.
            for dev in DEVICES.iter().map(|n| path.join(n)) {
                if exists_nofollow(&under(OLDROOT, &dev)) {
                    bind(&dev, false, false)?;
                }
            }
            for dev in pass {
                if exists_nofollow(&under(OLDROOT, dev)) {
                    bind(dev, true, false)?;
                }
            }
            let t = sys::open_path(&cstr(&dst)?, true).ctx(|| format!("opening {path:?}"))?;
            sys::set_mount_attr(t.as_fd(), false, sys::MOUNT_ATTR_RDONLY, 0)
                .ctx(|| format!("making {path:?} read-only"))
        }
        MountOp::Devpts { path } => {
            let m = sys::new_mount(
                c"devpts",
                &[(c"ptmxmode", c"0666"), (c"mode", c"0620")],
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
            )
            .ctx(|| "creating a devpts instance".into())?;
            let t = sys::open_path(&cstr(&under(NEWROOT, path))?, true)
                .ctx(|| format!("opening {path:?}"))?;
            sys::move_mount(m.as_fd(), t.as_fd()).ctx(|| format!("mounting devpts on {path:?}"))?;
            // /dev/ptmx is the instance's own, so new terminals are made in it.
            let ptmx = sys::open_path(&cstr(&under(NEWROOT, &path.join("ptmx")))?, true)
                .ctx(|| "opening the new ptmx".into())?;
            let tree = sys::clone_mount(ptmx.as_fd(), false).ctx(|| "cloning ptmx".into())?;
            let dev_ptmx = path.with_file_name("ptmx");
            // Where /dev/ptmx links to pts/ptmx, that is the new one already.
            let t = sys::open_path_in(c"/newroot", &cstr(&dev_ptmx)?)
                .ctx(|| format!("opening {dev_ptmx:?}"))?;
            sys::move_mount(tree.as_fd(), t.as_fd()).ctx(|| format!("mounting {dev_ptmx:?}"))
        }
    }
}

/// `OsStr` helper used by callers that build argv/env.
pub fn c(s: &OsStr) -> Result<CString, StepError> {
    CString::new(s.as_bytes()).ctx(|| format!("argument {s:?} contains NUL"))
}
