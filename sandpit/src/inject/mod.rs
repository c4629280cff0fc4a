//! Injection of the interposition library (L1).
//!
//! The launcher embeds the cdylib built by the workspace `build.rs`. At run time it
//! is extracted to `~/.sandpit/lib/<sha256>/libsandpit.so`: directories created
//! 0700, the file written to a temporary name and renamed into place (atomic), and
//! before *each* use the directories and file are checked — owned by this user, not
//! writable by group or others — and the file's bytes compared with the embedded
//! ones (the hash naming the directory is computed at build time, so a run never
//! hashes the library). Anything off is an error: the command does not run.
//!
//! Reading 2.4 MB to compare it cost ~0.8 ms of every start, so a comparison that
//! passed leaves a stamp beside the file: its device, inode, size and change time
//! (`ctime`, which no process can set back: every write, chmod, rename or
//! replacement moves it). While the file's identity equals the stamp the bytes are
//! not read again; any difference means a full comparison. The stamp is trusted
//! only when no sandboxed command can write the state directory: [`Stamps::for_policy`]
//! refuses it when a writable root of the policy contains that directory (Landlock,
//! the file boundary in the degraded mode, cannot carve it out of such a root), so
//! that whatever a command there wrote is compared, and replaced, by the next run.
//! Outside that, forging a stamp takes this user's own processes outside any
//! sandbox, which could as well edit the user's shell start-up files.
//!
//! [`child_env`] composes the variables the sandboxed child starts with; the
//! library itself puts them back into every grandchild.
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

mod sys;

include!(concat!(env!("OUT_DIR"), "/dylib.rs"));

pub use sandpit_policy::vars::{
    AUDIT_VAR, DNS_VAR, PRELOAD_VAR, PROXY_VAR, SNAPSHOT_VAR, STATE_DIR_VAR, TOKEN_VAR,
};

#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is not owned by this user; refusing to load the interposer from it")]
    Foreign(PathBuf),
    #[error("{0} is writable by group or others; refusing to load the interposer from it")]
    Writable(PathBuf),
    #[error("{0} is not a {1}")]
    WrongKind(PathBuf, &'static str),
    #[error("{0} does not match the embedded interposer (hash differs)")]
    Tampered(PathBuf),
}

pub type Result<T> = std::result::Result<T, InjectError>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InjectError + '_ {
    move |source| InjectError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Hex SHA-256 of `bytes`.
pub fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Owned by this user and not writable by group/others; of the expected kind.
fn check_owned(path: &Path, dir: bool) -> Result<()> {
    let md = std::fs::symlink_metadata(path).map_err(io(path))?;
    if dir && !md.is_dir() {
        return Err(InjectError::WrongKind(path.to_path_buf(), "directory"));
    }
    if !dir && !md.is_file() {
        return Err(InjectError::WrongKind(path.to_path_buf(), "regular file"));
    }
    if md.uid() != sys::euid() {
        return Err(InjectError::Foreign(path.to_path_buf()));
    }
    if md.mode() & 0o022 != 0 {
        return Err(InjectError::Writable(path.to_path_buf()));
    }
    Ok(())
}

/// Create `dir` with mode 0700 if missing, then check it.
fn ensure_dir(dir: &Path) -> Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(dir)(e)),
    }
    check_owned(dir, true)
}

/// Whether a verification stamp may spare the byte comparison (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamps {
    Trusted,
    Ignored,
}

impl Stamps {
    /// Ignored when a root the policy makes writable contains the state directory.
    pub fn for_policy(policy: &sandpit_policy::Policy) -> Stamps {
        let state = &policy.context.state_dir;
        let writable = policy
            .files
            .allow_write
            .iter()
            .any(|r| sandpit_policy::path::is_within(state, &r.value));
        if writable {
            Stamps::Ignored
        } else {
            Stamps::Trusted
        }
    }
}

/// The extracted library.
#[derive(Debug, Clone)]
pub struct Installed {
    pub path: PathBuf,
    expected: Cow<'static, [u8]>,
    stamps: Stamps,
}

impl Installed {
    /// Re-check before use: directories and file ours and not group/other
    /// writable, content byte for byte the embedded library.
    pub fn verify(&self) -> Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        check_owned(dir, true)?;
        if let Some(lib) = dir.parent() {
            check_owned(lib, true)?;
        }
        check_owned(&self.path, false)?;
        let stamp = self.stamp_path();
        let md = std::fs::symlink_metadata(&self.path).map_err(io(&self.path))?;
        let identity = identity(&md);
        let trusted = self.stamps == Stamps::Trusted;
        if trusted && std::fs::read_to_string(&stamp).is_ok_and(|s| s == identity) {
            return Ok(());
        }
        if !same_content(&self.path, &self.expected).map_err(io(&self.path))? {
            return Err(InjectError::Tampered(self.path.clone()));
        }
        // Change times come from a coarse clock: a file changed less than a second
        // ago could change again with the same ctime, so it gets no stamp yet. A
        // stamp that cannot be written only costs the next run a comparison.
        if trusted && settled(&md) {
            let mut tmp = stamp.clone().into_os_string();
            tmp.push(format!(".{}.tmp", std::process::id()));
            if std::fs::write(&tmp, &identity).is_err() || std::fs::rename(&tmp, &stamp).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Ok(())
    }

    /// `dir/.<name>.verified`: the identity of the file when its bytes last matched.
    fn stamp_path(&self) -> PathBuf {
        let name = self.path.file_name().unwrap_or_default().to_string_lossy();
        self.path.with_file_name(format!(".{name}.verified"))
    }
}

/// Whether the file last changed over a second ago.
fn settled(md: &std::fs::Metadata) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    now - md.ctime() > 1
}

/// What changes whenever a file's bytes can have: device, inode, size and ctime.
fn identity(md: &std::fs::Metadata) -> String {
    format!(
        "{} {} {} {}.{:09}\n",
        md.dev(),
        md.ino(),
        md.size(),
        md.ctime(),
        md.ctime_nsec()
    )
}

/// Whether the file at `path` holds exactly `expected`: compared in chunks through
/// one small buffer (reading the library whole costs more than the comparison).
fn same_content(path: &Path, expected: &[u8]) -> std::io::Result<bool> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    if f.metadata()?.len() != expected.len() as u64 {
        return Ok(false);
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut rest = expected;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(rest.is_empty());
        }
        match rest.split_at_checked(n) {
            Some((want, tail)) if want == &buf[..n] => rest = tail,
            _ => return Ok(false),
        }
    }
}

/// Extract the embedded library under `state_dir` (normally `~/.sandpit`).
pub fn install(state_dir: &Path, stamps: Stamps) -> Result<Installed> {
    install_hashed(
        state_dir,
        stamps,
        Cow::Borrowed(DYLIB),
        DYLIB_SHA256,
        DYLIB_FILE_NAME,
    )
}

/// Extract the embedded shim binary (`sandpit-shim`, what the PATH shims link to)
/// the same way: `~/.sandpit/lib/<sha256>/sandpit-shim`, checked before use.
pub fn install_shim(state_dir: &Path, stamps: Stamps) -> Result<Installed> {
    if SHIM_BIN.is_empty() {
        // A `cargo clippy` build embeds nothing; such a binary cannot make shims.
        return Err(InjectError::WrongKind(
            state_dir.join("lib"),
            "build with the shim binary embedded",
        ));
    }
    install_hashed(
        state_dir,
        stamps,
        Cow::Borrowed(SHIM_BIN),
        SHIM_SHA256,
        sandpit_shims::exec::SHIM_BIN_NAME,
    )
}

/// [`install`] for given bytes (tests use it with fixtures).
pub fn install_bytes(
    state_dir: &Path,
    stamps: Stamps,
    bytes: &[u8],
    name: &str,
) -> Result<Installed> {
    let hash = content_hash(bytes);
    install_hashed(state_dir, stamps, Cow::Owned(bytes.to_vec()), &hash, name)
}

/// Extract `bytes`, whose hex SHA-256 is `hash`, as `state_dir/lib/<hash>/<name>`.
pub fn install_hashed(
    state_dir: &Path,
    stamps: Stamps,
    bytes: Cow<'static, [u8]>,
    hash: &str,
    name: &str,
) -> Result<Installed> {
    ensure_dir(state_dir)?;
    let lib = state_dir.join("lib");
    ensure_dir(&lib)?;
    let dir = lib.join(hash);
    ensure_dir(&dir)?;
    let path = dir.join(name);
    let inst = Installed {
        path,
        expected: bytes,
        stamps,
    };
    if inst.path.exists() && inst.verify().is_ok() {
        return Ok(inst);
    }
    // Write a private temporary file and rename it over the final name.
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o500)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(&inst.expected).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o500)).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &inst.path).map_err(io(&inst.path))?;
    inst.verify()?;
    Ok(inst)
}

/// Endpoints the library talks to; `None` leaves the variable unset.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    /// The proxy's transparent-redirect listener.
    pub proxy: Option<SocketAddr>,
    /// The proxy's per-run token (sent in the transparent handshake line).
    pub proxy_token: Option<String>,
    /// sandpit's DNS responder.
    pub dns: Option<SocketAddr>,
    /// The audit log's datagram socket.
    pub audit: Option<PathBuf>,
}

/// `existing` with `lib` appended (`:`-separated), unless it already names it.
pub fn preload_value(existing: Option<&OsStr>, lib: &Path) -> OsString {
    let lib = lib.as_os_str();
    match existing {
        Some(v) if !v.is_empty() => {
            let named = v
                .as_bytes()
                .split(|&b| b == b':' || b == b' ')
                .any(|e| e == lib.as_bytes());
            if named {
                v.to_os_string()
            } else {
                let mut b = v.as_bytes().to_vec();
                b.push(b':');
                b.extend_from_slice(lib.as_bytes());
                OsString::from_vec(b)
            }
        }
        _ => lib.to_os_string(),
    }
}

/// The variables to set in the sandboxed child: the preload (appended to an
/// existing `LD_PRELOAD`), the snapshot path and state dir, and the endpoints.
pub fn child_env(
    existing_preload: Option<&OsStr>,
    lib: &Installed,
    snapshot: &Path,
    state_dir: &Path,
    ends: &Endpoints,
) -> Vec<(OsString, OsString)> {
    let mut v = vec![
        (
            PRELOAD_VAR.into(),
            preload_value(existing_preload, &lib.path),
        ),
        (SNAPSHOT_VAR.into(), snapshot.as_os_str().to_os_string()),
        (STATE_DIR_VAR.into(), state_dir.as_os_str().to_os_string()),
    ];
    if let Some(p) = ends.proxy {
        v.push((PROXY_VAR.into(), p.to_string().into()));
    }
    if let Some(t) = &ends.proxy_token {
        v.push((TOKEN_VAR.into(), t.into()));
    }
    if let Some(p) = ends.dns {
        v.push((DNS_VAR.into(), p.to_string().into()));
    }
    if let Some(p) = &ends.audit {
        v.push((AUDIT_VAR.into(), p.as_os_str().to_os_string()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_library_is_an_object_file() {
        assert!(DYLIB.len() > 1000);
        #[cfg(target_os = "linux")]
        assert_eq!(&DYLIB[..4], b"\x7fELF");
        // MH_MAGIC_64, little-endian.
        #[cfg(target_os = "macos")]
        assert_eq!(&DYLIB[..4], b"\xcf\xfa\xed\xfe");
    }

    #[test]
    fn build_time_hashes_are_the_embedded_binaries() {
        assert_eq!(DYLIB_SHA256, content_hash(DYLIB));
        assert_eq!(SHIM_SHA256, content_hash(SHIM_BIN));
    }

    #[test]
    fn same_length_tampering_is_caught() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let inst =
            install_bytes(&state, Stamps::Trusted, b"library-bytes", "libsandpit.so").unwrap();
        let mut p = std::fs::metadata(&inst.path).unwrap().permissions();
        p.set_mode(0o700);
        std::fs::set_permissions(&inst.path, p).unwrap();
        std::fs::write(&inst.path, b"library-bytez").unwrap();
        assert!(matches!(inst.verify(), Err(InjectError::Tampered(_))));
    }

    /// The fixture library installed under `state`.
    fn fixture(state: &Path, stamps: Stamps) -> Installed {
        install_bytes(state, stamps, b"library-bytes", "libsandpit.so").unwrap()
    }

    /// Same-length tampering, then a stamp forged to match the tampered file.
    fn tamper_and_forge_stamp(inst: &Installed) {
        std::fs::set_permissions(&inst.path, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(&inst.path, b"library-bytez").unwrap();
        std::fs::write(
            inst.stamp_path(),
            identity(&std::fs::symlink_metadata(&inst.path).unwrap()),
        )
        .unwrap();
    }

    #[test]
    fn a_matching_stamp_spares_the_comparison_and_any_change_undoes_it() {
        let d = tempfile::tempdir().unwrap();
        let inst = fixture(&d.path().join("s"), Stamps::Trusted);
        // Just written: not settled, so no stamp yet.
        assert!(!inst.stamp_path().exists());
        // A stamp forged for a tampered file is trusted and the bytes are not read
        // (which is what a stamp is for: only this user outside a sandbox can forge).
        tamper_and_forge_stamp(&inst);
        inst.verify().unwrap();
        // Any change of the file (here a chmod) moves its ctime: full comparison.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::set_permissions(&inst.path, std::fs::Permissions::from_mode(0o500)).unwrap();
        assert!(matches!(inst.verify(), Err(InjectError::Tampered(_))));
        // A settled, verified file gets its stamp.
        let ok = fixture(&d.path().join("t"), Stamps::Trusted);
        std::thread::sleep(std::time::Duration::from_millis(2100));
        ok.verify().unwrap();
        assert_eq!(
            std::fs::read_to_string(ok.stamp_path()).unwrap(),
            identity(&std::fs::symlink_metadata(&ok.path).unwrap())
        );
        // Where the sandbox could write the state directory, a matching stamp does
        // not spare the comparison: the tampered file is caught, and replaced by a
        // new install.
        let state = d.path().join("w");
        let weak = fixture(&state, Stamps::Ignored);
        tamper_and_forge_stamp(&weak);
        assert!(matches!(weak.verify(), Err(InjectError::Tampered(_))));
        let again = fixture(&state, Stamps::Ignored);
        assert_eq!(std::fs::read(&again.path).unwrap(), b"library-bytes");
    }

    #[test]
    fn stamps_are_ignored_when_a_writable_root_holds_the_state_dir() {
        let ctx = sandpit_policy::Context {
            home: "/home/u".into(),
            workspace: "/home/u/proj".into(),
            scratch: "/tmp/s".into(),
            state_dir: "/home/u/.sandpit".into(),
        };
        let mut policy =
            sandpit_policy::load::load(&sandpit_policy::load::LoadOptions::new(ctx)).unwrap();
        assert_eq!(Stamps::for_policy(&policy), Stamps::Trusted);
        let home = sandpit_policy::Rule {
            value: PathBuf::from("/home/u"),
            origin: sandpit_policy::Origin::builtin("files.allow_write", "~"),
        };
        policy.files.allow_write.push(home);
        assert_eq!(Stamps::for_policy(&policy), Stamps::Ignored);
    }

    #[test]
    fn installs_atomically_and_verifies() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join(".sandpit");
        let inst =
            install_bytes(&state, Stamps::Trusted, b"library-bytes", "libsandpit.so").unwrap();
        assert!(inst.path.ends_with(format!(
            "lib/{}/libsandpit.so",
            content_hash(b"library-bytes")
        )));
        for dir in [
            &state,
            &state.join("lib"),
            &inst.path.parent().unwrap().to_path_buf(),
        ] {
            assert_eq!(
                std::fs::metadata(dir).unwrap().mode() & 0o777,
                0o700,
                "{dir:?}"
            );
        }
        assert_eq!(std::fs::read(&inst.path).unwrap(), b"library-bytes");
        // Idempotent.
        install_bytes(&state, Stamps::Trusted, b"library-bytes", "libsandpit.so").unwrap();
        // Tampered content is caught before use, and repaired by a new install.
        std::fs::set_permissions(&inst.path, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(&inst.path, b"evil").unwrap();
        std::fs::set_permissions(&inst.path, std::fs::Permissions::from_mode(0o500)).unwrap();
        assert!(matches!(inst.verify(), Err(InjectError::Tampered(_))));
        let again =
            install_bytes(&state, Stamps::Trusted, b"library-bytes", "libsandpit.so").unwrap();
        again.verify().unwrap();
        assert_eq!(std::fs::read(&again.path).unwrap(), b"library-bytes");
    }

    #[test]
    fn refuses_group_writable_or_foreign() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join(".sandpit");
        let inst = install_bytes(&state, Stamps::Trusted, b"x", "libsandpit.so").unwrap();
        let dir = inst.path.parent().unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(matches!(inst.verify(), Err(InjectError::Writable(_))));
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&inst.path, std::fs::Permissions::from_mode(0o522)).unwrap();
        assert!(matches!(inst.verify(), Err(InjectError::Writable(_))));
        std::fs::set_permissions(&inst.path, std::fs::Permissions::from_mode(0o500)).unwrap();
        inst.verify().unwrap();
        if sys::euid() == 0 {
            std::os::unix::fs::chown(dir, Some(65534), None).unwrap();
            assert!(matches!(inst.verify(), Err(InjectError::Foreign(_))));
        }
    }

    #[test]
    fn preload_is_appended_once() {
        let lib = Path::new("/h/.sandpit/lib/x/libsandpit.so");
        assert_eq!(preload_value(None, lib), "/h/.sandpit/lib/x/libsandpit.so");
        assert_eq!(
            preload_value(Some(OsStr::new("/usr/lib/libjemalloc.so")), lib),
            "/usr/lib/libjemalloc.so:/h/.sandpit/lib/x/libsandpit.so"
        );
        let both = "/a.so:/h/.sandpit/lib/x/libsandpit.so";
        assert_eq!(preload_value(Some(OsStr::new(both)), lib), both);
    }
}
