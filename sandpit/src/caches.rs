//! Package caches the sandbox may write: one directory per user and workspace,
//! `~/.cache/sandpit/<workspace name>-<hash>`, handed to each tool through its own
//! variable (`npm_config_cache`, `PIP_CACHE_DIR`, `GOCACHE`…), so `npm install` or
//! `go build` neither fails on the host's read-only caches nor writes into them. It is
//! added to the policy's `allow_write` (origin "sandpit package caches"), so every
//! layer and `sandpit config` agree.
//!
//! Why this place is safe: nothing outside the sandbox reads it. The host's tools keep
//! their own caches (`~/.npm`, `~/.cache/pip`, `~/.cargo`, `~/go`), which stay
//! read-only inside, so a package poisoned inside the sandbox is only ever trusted by
//! later sandboxed runs *in the same workspace*: one per workspace, because a cache
//! holds what runs later (`CARGO_HOME`'s config and `bin/`, extracted Go modules,
//! built wheels), and a shared one would let an agent in one project plant code that
//! runs in another project's sandbox, under that project's looser policy. sandpit itself never reads, runs or follows anything in it:
//! the launcher only creates the directory (mode 0700) and refuses a symlink or a
//! directory of another user in its place. It is not under `~/.sandpit`, whose
//! `block_write` entry keeps sandpit's own state (policy snapshots, the extracted
//! library, shims, logs) read-only with no exception.
#![forbid(unsafe_code)]
use sandpit_policy::{Context, Origin, Policy, Rule};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The cache directory for the workspace of `ctx`:
/// `~/.cache/sandpit/<workspace name>-<first 12 hex digits of its path's SHA-256>`.
pub fn dir(ctx: &Context) -> PathBuf {
    use sha2::{Digest, Sha256};
    use std::os::unix::ffi::OsStrExt;
    let hash: String = Sha256::digest(ctx.workspace.as_os_str().as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let name: String = ctx
        .workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    ctx.home
        .join(".cache/sandpit")
        .join(format!("{}-{hash}", name.trim_start_matches('.')))
}

/// Where the grant in the policy says it came from.
pub const ORIGIN: &str = "sandpit package caches";

/// Make the cache a writable root of `policy`, unless the policy protects it (a
/// `block_write` or `block_read` entry covering it wins: no cache then, and `env` is
/// not used). Returns whether the cache is writable.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub fn grant(policy: &mut Policy) -> bool {
    let cache = dir(&policy.context);
    let probe = cache.join("x");
    let blocked = policy
        .files
        .block_write
        .iter()
        .chain(&policy.files.block_read)
        .any(|r| probe.starts_with(&r.value));
    if blocked {
        return false;
    }
    if !policy.files.allow_write.iter().any(|r| r.value == cache) {
        let shown = match cache.strip_prefix(&policy.context.home) {
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => cache.display().to_string(),
        };
        let mut origin = Origin::builtin("files.allow_write", &shown);
        origin.file = ORIGIN.into();
        policy.files.allow_write.push(Rule {
            value: cache,
            origin,
        });
    }
    true
}

/// Whether `policy` (after `grant`) lets the sandbox write the cache.
pub fn granted(policy: &Policy) -> bool {
    let cache = dir(&policy.context);
    policy.files.allow_write.iter().any(|r| r.value == cache)
        && !policy
            .files
            .block_write
            .iter()
            .chain(&policy.files.block_read)
            .any(|r| cache.join("x").starts_with(&r.value))
}

/// Each tool's variable and the directory under the cache it points to.
pub const VARS: &[(&str, &str, &str)] = &[
    ("npm", "npm_config_cache", "npm"),
    ("pnpm", "pnpm_config_store_dir", "pnpm/store"),
    ("pnpm", "pnpm_config_cache_dir", "pnpm/cache"),
    ("pnpm", "pnpm_config_state_dir", "pnpm/state"),
    ("yarn", "YARN_CACHE_FOLDER", "yarn"),
    ("pip", "PIP_CACHE_DIR", "pip"),
    ("uv", "UV_CACHE_DIR", "uv"),
    ("cargo", "CARGO_HOME", "cargo"),
    ("go", "GOPATH", "go"),
    ("go", "GOMODCACHE", "go/pkg/mod"),
    ("go", "GOCACHE", "go-build"),
];

/// The variables for a sandboxed command, values absolute paths under `cache`.
pub fn env(cache: &Path) -> Vec<(String, String)> {
    VARS.iter()
        .map(|(_, k, sub)| {
            (
                k.to_string(),
                cache.join(sub).to_string_lossy().into_owned(),
            )
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("creating the package cache {path}: {source}")]
    Create {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "package cache {0} is not a directory owned by this user (a symlink?); \
         remove it and run again"
    )]
    NotOurs(String),
    #[error(
        "the package cache {path} holds {used} bytes, at or past limits.cache_bytes = \
         {limit} ({origin}); empty it (rm -rf {path}) or raise limits.cache_bytes under \
         [limits] in ~/.sandpit/config.toml (0: no limit)"
    )]
    Full {
        path: String,
        used: u64,
        limit: u64,
        origin: String,
    },
}

/// Bytes `dir` takes on disk: the blocks allocated to everything under it, symlinks
/// not followed, other file systems mounted inside not entered (a hard link is
/// counted once per name: never less than the truth). What cannot be read counts 0.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub fn usage(dir: &Path) -> u64 {
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        return 0;
    };
    let dev = top.dev();
    let mut total = top.blocks() * 512;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.dev() != dev {
                continue;
            }
            total += m.blocks() * 512;
            if m.is_dir() {
                todo.push(e.path());
            }
        }
    }
    total
}

/// Where the launcher notes that a run ended with the cache at or past its limit:
/// under sandpit's state directory, which the sandbox cannot write.
fn marker(state_dir: &Path, cache: &Path) -> PathBuf {
    let name = cache.file_name().unwrap_or_default();
    state_dir.join("cache-full").join(name)
}

/// The start of a run: a cache that the last run left at or past `limit`
/// (`limits.cache_bytes`; 0: none), and still is, stops this run. Only then is the
/// cache walked: a start costs nothing when the last run left it below the limit.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub fn check(cache: &Path, limit: &Rule<u64>, state_dir: &Path) -> Result<(), CacheError> {
    let mark = marker(state_dir, cache);
    if !mark.exists() {
        return Ok(());
    }
    match full(cache, limit.value) {
        Some(used) => Err(CacheError::Full {
            path: cache.display().to_string(),
            used,
            limit: limit.value,
            origin: limit.origin.location(),
        }),
        None => {
            let _ = std::fs::remove_file(&mark);
            Ok(())
        }
    }
}

/// The cache's usage when it is at or past `limit` (0: none).
fn full(cache: &Path, limit: u64) -> Option<u64> {
    if limit == 0 {
        return None;
    }
    let used = usage(cache);
    (used >= limit).then_some(used)
}

/// The end of a run: walk the cache; at or past `limit`, note it for the next
/// run's `check` and return the line for the user.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub fn full_line(cache: &Path, limit: &Rule<u64>, state_dir: &Path) -> Option<String> {
    let used = full(cache, limit.value)?;
    let mark = marker(state_dir, cache);
    let noted = mark
        .parent()
        .is_some_and(|d| std::fs::create_dir_all(d).is_ok())
        && std::fs::write(&mark, used.to_string()).is_ok();
    let next = if noted {
        "the next run in this workspace stops until it is emptied"
    } else {
        "empty it"
    };
    Some(format!(
        "sandpit: the run filled the package cache {} to {used} bytes, at or past \
         limits.cache_bytes = {} ({}): {next} (rm -rf {}) or raise the limit under \
         [limits] in ~/.sandpit/config.toml (0: no limit)",
        cache.display(),
        limit.value,
        limit.origin.location(),
        cache.display(),
    ))
}

/// Create the cache directory (and `~/.cache`) if missing, mode 0700, and check it
/// is a real directory of ours, so the bind mount lands where the plan says.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub fn ensure(cache: &Path, uid: u32) -> Result<(), CacheError> {
    let shown = || cache.display().to_string();
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(cache)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(CacheError::Create {
                path: shown(),
                source,
            })
        }
    }
    match std::fs::symlink_metadata(cache) {
        Ok(m) if m.is_dir() && m.uid() == uid => Ok(()),
        Ok(_) => Err(CacheError::NotOurs(shown())),
        Err(source) => Err(CacheError::Create {
            path: shown(),
            source,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_inside_the_cache_and_go_modules_live_in_gopath() {
        let ctx = |ws: &str| Context {
            home: "/h".into(),
            workspace: ws.into(),
            scratch: "/run/s".into(),
            state_dir: "/h/.sandpit".into(),
        };
        let d = dir(&ctx("/h/p"));
        let e = env(&d);
        assert!(e.iter().all(|(_, v)| v.starts_with("/h/.cache/sandpit/p-")));
        let get = |k: &str| e.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(get("GOMODCACHE"), format!("{}/pkg/mod", get("GOPATH")));
        assert_eq!(get("npm_config_cache"), format!("{}/npm", d.display()));
        // One per workspace: another project never shares it.
        assert_ne!(dir(&ctx("/h/q")), d);
        assert_ne!(dir(&ctx("/other/p")), d);
        assert_eq!(dir(&ctx("/h/p")), d);
    }

    #[test]
    fn the_grant_is_an_allow_write_entry_unless_the_policy_protects_the_place() {
        use sandpit_policy::{Context, LoadOptions, Source};
        let load = |user: Option<&str>| {
            let mut o = LoadOptions::new(Context {
                home: "/h".into(),
                workspace: "/h/p".into(),
                scratch: "/run/s".into(),
                state_dir: "/h/.sandpit".into(),
            });
            o.user = user.map(|u| Source::new(sandpit_policy::Layer::User, "u.toml", u));
            sandpit_policy::load(&o).unwrap()
        };
        let mut p = load(None);
        assert!(!granted(&p));
        assert!(grant(&mut p) && granted(&p));
        let r = p.files.allow_write.last().unwrap();
        assert_eq!(r.value, dir(&p.context));
        assert!(r
            .value
            .to_string_lossy()
            .starts_with("/h/.cache/sandpit/p-"));
        assert!(
            r.origin.entry.starts_with("~/.cache/sandpit/p-"),
            "{}",
            r.origin.entry
        );
        assert_eq!(r.origin.file, ORIGIN);
        // Granting twice adds nothing.
        let n = p.files.allow_write.len();
        grant(&mut p);
        assert_eq!(p.files.allow_write.len(), n);
        let mut p = load(Some("[files]\nblock_write = [\"~/.cache\"]\n"));
        assert!(!grant(&mut p) && !granted(&p));
        let mut p = load(Some("[files]\nblock_read = [\"~/.cache/sandpit\"]\n"));
        assert!(!grant(&mut p));
    }

    #[test]
    fn usage_counts_blocks_and_the_limit_stops_a_full_cache() {
        let t = tempfile::tempdir().unwrap();
        let c = t.path().join("cache");
        std::fs::create_dir_all(c.join("pip/http")).unwrap();
        std::fs::write(c.join("pip/http/a"), vec![1u8; 300 << 10]).unwrap();
        std::os::unix::fs::symlink("/usr", c.join("pip/usr")).unwrap();
        let used = usage(&c);
        // 300 KiB of data, a few directories; the symlink's target is not counted.
        assert!((300 << 10..400 << 10).contains(&used), "{used}");
        let rule = |v: u64| Rule {
            value: v,
            origin: Origin::builtin("limits.cache_bytes", &v.to_string()),
        };
        let state = t.path().join("state");
        assert!(full_line(&c, &rule(1 << 20), &state).is_none());
        assert!(full_line(&c, &rule(0), &state).is_none());
        // Not noted full by a run: the start does not walk, whatever the size.
        check(&c, &rule(256 << 10), &state).unwrap();
        let line = full_line(&c, &rule(256 << 10), &state).unwrap();
        assert!(
            line.contains("limits.cache_bytes") && line.contains("[limits]"),
            "{line}"
        );
        assert!(line.contains("the next run"), "{line}");
        let e = check(&c, &rule(256 << 10), &state).unwrap_err().to_string();
        assert!(
            e.contains("limits.cache_bytes = 262144") && e.contains("rm -rf"),
            "{e}"
        );
        // Raised (or emptied), the start walks once more and forgets the note.
        check(&c, &rule(1 << 20), &state).unwrap();
        check(&c, &rule(256 << 10), &state).unwrap();
        assert_eq!(usage(&t.path().join("absent")), 0);
    }

    #[test]
    fn a_symlink_in_place_of_the_cache_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let uid = std::fs::metadata(t.path()).unwrap().uid();
        std::os::unix::fs::symlink(t.path(), t.path().join("cache")).unwrap();
        assert!(matches!(
            ensure(&t.path().join("cache"), uid),
            Err(CacheError::NotOurs(_))
        ));
        ensure(&t.path().join("fresh"), uid).unwrap();
        assert!(t.path().join("fresh").is_dir());
    }
}
