//! The Linux kernel plan's input (`sandbox::linux::Input`) from a run's effective
//! policy: what is masked, carved out, writable, read-only, and the network.
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Host daemons that run code or hand out secrets on request listen on sockets,
/// and a read-only mount does not stop `connect()`: the directories that hold
/// them are masked like credentials. That is all of `/run` (the session bus and
/// the systemd user manager under /run/user/UID, screen sessions, the system bus,
/// container engines, …), the container managers' directories under /var, and
/// where the environment puts the SSH agent's, screen's, tmux's and git's
/// credential cache's sockets (never a directory that holds one of `keep`), and
/// the virtual consoles the user owns.
/// Returns them with what comes back inside them.
fn host_sockets(keep: &[&Path]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut masked: Vec<PathBuf> = ["/run", "/var/run"]
        .iter()
        .chain(&["/var/lib/lxd", "/var/snap/lxd/common/lxd", "/var/lib/incus"])
        .map(PathBuf::from)
        // /var/run is a link to /run on most systems: masked through it.
        .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_dir()))
        .collect();
    masked.dedup();
    // Where the user's environment puts such sockets, wherever that is: the SSH
    // agent's (the variable is withheld from the command, but a path can be
    // guessed or found), screen's and tmux's sessions, git's credential cache
    // under XDG_CACHE_HOME. Not what is masked already, and never a directory
    // that holds the workspace or home (a TMUX_TMPDIR of ~ masks only its
    // tmux-UID).
    let uid = crate::sys::uid();
    let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
    let named = [
        var("SSH_AUTH_SOCK"),
        var("SCREENDIR"),
        var("TMUX_TMPDIR").map(|d| d.join(format!("tmux-{uid}"))),
        var("XDG_CACHE_HOME").map(|d| d.join("git/credential")),
    ];
    for p in named.into_iter().flatten() {
        let Ok(p) = std::fs::canonicalize(p) else {
            continue;
        };
        if !masked.iter().any(|m| p.starts_with(m)) && !keep.iter().any(|k| k.starts_with(&p)) {
            masked.push(p);
        }
    }
    // Virtual consoles the user is logged in on (login hands the console to the
    // user): `/dev` is the host's, and only `/dev/pts` is the sandbox's own.
    for n in 1..=63 {
        let tty = PathBuf::from(format!("/dev/tty{n}"));
        if std::fs::metadata(&tty).is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == uid) {
            masked.push(tty);
        }
    }
    // Back inside, read-only: the file resolv.conf links to (sandpit's own is bound
    // over it), and programs kept under /run: NixOS's and Guix's system profile,
    // setuid wrappers and GPU drivers, and the directories on PATH there (not the
    // runtime directory's, which holds the session's sockets).
    let mut back: Vec<PathBuf> = std::fs::canonicalize("/etc/resolv.conf")
        .into_iter()
        .chain(
            [
                "/run/current-system",
                "/run/booted-system",
                "/run/wrappers",
                "/run/opengl-driver",
                "/run/opengl-driver-32",
            ]
            .map(PathBuf::from),
        )
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ))
        .filter(|p| p.starts_with("/run") && !p.starts_with("/run/user"))
        .filter(|p| {
            use std::path::Component;
            p.components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
                && p.exists()
        })
        .collect();
    back.sort();
    back.dedup();
    (masked, back)
}

/// The most directory entries one glob may walk to find what it matches
/// (`sandpit_policy::glob::expand`): some 50 ms of start-up.
pub const GLOB_WALK: usize = sandpit_policy::glob::WALK_LIMIT;

/// The paths `rules` name, for the kernel layer: a glob becomes what it matched
/// when the policy was loaded (`loaded`: the loader walked it already, and a `**`
/// over a large workspace is not walked twice), or, for a glob added since, what it
/// matches now. One that would walk more than [`GLOB_WALK`] entries stops the run
/// (the kernel layer could not hold it whole).
fn concrete(
    rules: &[sandpit_policy::Rule<PathBuf>],
    loaded: &sandpit_policy::glob::Matches,
) -> Result<Vec<PathBuf>> {
    let mut out = vec![];
    for r in rules {
        if !sandpit_policy::glob::is_glob(r.value.as_os_str().as_encoded_bytes()) {
            out.push(r.value.clone());
            continue;
        }
        let walked;
        let found = match loaded.get(&r.value) {
            Some(w) => w,
            None => {
                walked = sandpit_policy::glob::expand(&r.value, GLOB_WALK);
                &walked
            }
        };
        let found = found.as_ref().map_err(|e| {
            anyhow::anyhow!(
                "{} {:?} ({}) would walk more than {} entries under {} to find what it \
                 matches; the command was not started, as the kernel layer could not \
                 hold it whole. Narrow it (a directory before the `**`, e.g. \"src/**/.env\")",
                r.origin.key,
                r.origin.entry,
                r.origin.location(),
                e.visited - 1,
                sandpit_policy::glob::literal_prefix(&r.value).display()
            )
        })?;
        out.extend(found.iter().cloned());
    }
    Ok(out)
}

/// The kernel plan's input from the effective policy. `block_read` → masked,
/// `allow_read` → carve-outs, `allow_write` → writable roots, `block_write` →
/// read-only (inside writable roots, including paths that do not exist yet),
/// `context.scratch` → TMPDIR, `context.state_dir` → read-only.
///
/// `policy` is the run's effective policy ([`super::effective`]): its private /tmp
/// and /dev/shm grants are the plan's tmpfs mounts, never binds of the host's.
/// `will_exist` are the writable roots the run makes before it starts (package
/// caches, an agent's state directories on a fresh home); `run_dir` is the audit
/// session's directory, the only one under `<state>/run` that shows through.
pub fn plan_input(
    policy: &sandpit_policy::Policy,
    mode: crate::sandbox::linux::Mode,
    proxy: Option<(PathBuf, u16, Option<PathBuf>)>,
    udp: bool,
    cwd: PathBuf,
    will_exist: &[PathBuf],
    run_dir: &Path,
) -> Result<crate::sandbox::linux::Input> {
    use crate::sandbox::linux::Network;
    use sandpit_policy::NetMode;
    let values = |rules: &[sandpit_policy::Rule<PathBuf>]| concrete(rules, &policy.glob_matches);
    let ctx = &policy.context;
    // Unrestricted goes through the proxy as filtered does: the proxy lifts host
    // filtering, and the kernel layer keeps everything else (docs/run.md) but UDP
    // to public addresses when the plan relays it (`sandbox/linux/udp.rs`).
    let network = match policy.network.mode.value {
        NetMode::Offline => Network::Offline,
        NetMode::Filtered | NetMode::Unrestricted => match proxy {
            Some((socket, port, dns_socket)) => Network::Proxy {
                socket,
                port,
                resolver: None,
                dns_socket,
                udp,
            },
            // No proxy to reach: nothing is allowed out.
            None => Network::Offline,
        },
    };
    let cwd = if cwd.starts_with(&ctx.workspace) {
        cwd
    } else {
        ctx.workspace.clone()
    };
    // A block_read entry that a later layer carves out whole (a profile's
    // allow_read of its own agent's auth file) is not masked. Only an entry at or
    // below some allow_read rule can be carved out: the rest skip `decide`.
    let files = &policy.files;
    let mut read_denied: Vec<PathBuf> = values(&files.block_read)?
        .into_iter()
        .filter(|p| {
            !files
                .allow_read
                .iter()
                .any(|a| sandpit_policy::decide::rule_depth(&a.value, p).is_some())
                || sandpit_policy::decide(policy, &sandpit_policy::Request::Read(p)).is_denied()
        })
        .collect();
    let (sockets, back) = host_sockets(&[&ctx.home, &ctx.workspace]);
    read_denied.extend(sockets);
    // Other runs' sockets (audit, adversary) and every run's log stay out of
    // reach: only this run's directory shows through.
    read_denied.extend([ctx.state_dir.join("run"), ctx.state_dir.join("logs")]);
    // Every other socket a program on this machine has bound, wherever it is
    // (the kernel's socket table names them): hidden unless the policy lets the
    // sandbox connect to it. Only a mount hides one: Landlock has no right for
    // connecting, so the fallback mode leaves them (docs/kernel.md).
    let host_sockets = if mode == crate::sandbox::linux::Mode::Namespaces {
        crate::sandbox::linux::sockets::bound()
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .filter(|s| {
                let unix = sandpit_policy::Request::Unix {
                    path: s,
                    host: true,
                };
                sandpit_policy::decide(policy, &unix).is_denied()
            })
            .collect()
    } else {
        vec![]
    };
    let mut read_allowed: Vec<PathBuf> = values(&policy.files.allow_read)?;
    read_allowed.extend(back);
    read_allowed.push(run_dir.to_path_buf());
    // Sockets the policy allows come back inside whatever mask holds them (all
    // of /run, ~/.docker).
    // The sockets themselves: a directory or glob there must not bring back
    // the other files of a masked directory.
    for p in values(&policy.isolation.unix_sockets)? {
        read_allowed.extend(crate::sandbox::linux::sockets::named_by(&p, GLOB_WALK));
    }
    let own_writable: Vec<sandpit_policy::Rule<PathBuf>> = policy
        .files
        .allow_write
        .iter()
        .filter(|r| r.origin.file != sandpit_policy::PRIVATE_TMPFS)
        .cloned()
        .collect();
    Ok(crate::sandbox::linux::Input {
        mode,
        home: ctx.home.clone(),
        workspace: ctx.workspace.clone(),
        scratch: ctx.scratch.clone(),
        state_dir: ctx.state_dir.clone(),
        // A writable root that does not exist yet has nothing to bind: it stays
        // absent (and unwritable, as its parent is read-only) for this run.
        // The private /tmp and /dev/shm are tmpfs mounts of the plan's, not binds.
        writable: values(&own_writable)?
            .into_iter()
            .filter(|p| p.symlink_metadata().is_ok() || will_exist.contains(p))
            .collect(),
        read_denied,
        read_allowed,
        write_protected: values(&policy.files.block_write)?,
        network,
        allow_local_binding: policy.network.allow_local_binding.value,
        loopback: crate::sandbox::linux::loopback::services(policy),
        cwd,
        processes: policy.limits.processes.value,
        processes_void: crate::sandbox::linux::process_limit_void(
            mode == crate::sandbox::linux::Mode::Namespaces,
        ),
        env_withheld: crate::launch::withheld_env(policy),
        devices: values(&policy.files.devices)?,
        host_sockets,
        nested_user_namespaces: policy.isolation.nested_user_namespaces(),
        tmp_bytes: policy.limits.tmp_bytes.value,
        file_bytes: policy.limits.cache_bytes.value,
        memory: policy.limits.memory.value,
        memory_cgroup: crate::sandbox::linux::memory::probe(),
        read_if_present: policy
            .files
            .block_write
            .iter()
            .filter(|r| {
                crate::gitcfg::is_include(&r.origin)
                    || r.origin.file == crate::vcs::ORIGIN
                    || (r.origin.file == sandpit_policy::runlater::ORIGIN
                        && sandpit_policy::runlater::entry(&r.origin.entry).is_some_and(|e| {
                            matches!(
                                e.kind,
                                sandpit_policy::runlater::Kind::File
                                    | sandpit_policy::runlater::Kind::Tree
                            )
                        }))
            })
            .map(|r| r.value.clone())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandpit_policy::glob::{Matches, TooMany, Walk};

    /// A policy whose `files.block_read` is the glob `pattern`, under `root`.
    fn glob_policy(root: &Path, pattern: &str) -> sandpit_policy::Policy {
        let text = format!(
            "[files]\nblock_read = [\"{}\"]\n",
            root.join(pattern).display()
        );
        crate::service::decide::policy_from_toml(&text).unwrap()
    }

    fn under(root: &Path, paths: Vec<PathBuf>) -> Vec<PathBuf> {
        paths.into_iter().filter(|p| p.starts_with(root)).collect()
    }

    /// The loader walks each glob once, and the kernel layer takes that walk's
    /// matches: a match made after loading is not among them (a second walk would
    /// find it), while a glob the loader never saw is walked when the plan is made.
    #[test]
    fn a_glob_is_walked_once_when_the_policy_is_loaded() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let write = |p: &str| {
            std::fs::create_dir_all(root.join(p).parent().unwrap()).unwrap();
            std::fs::write(root.join(p), "").unwrap();
        };
        write("a/.env");
        let p = glob_policy(&root, "**/.env");
        write("b/.env");
        let rules = &p.files.block_read;
        assert_eq!(
            under(&root, concrete(rules, &p.glob_matches).unwrap()),
            [root.join("a/.env")]
        );
        // Control: walked now, the same rules find both.
        assert_eq!(
            under(&root, concrete(rules, &Matches::default()).unwrap()),
            [root.join("a/.env"), root.join("b/.env")]
        );
        // A glob added after loading is walked when the plan is made.
        let mut added = rules.clone();
        let mut r = added[0].clone();
        r.value = root.join("*/.env");
        added.push(r);
        assert_eq!(
            under(&root, concrete(&added, &p.glob_matches).unwrap()),
            [
                root.join("a/.env"),
                root.join("a/.env"),
                root.join("b/.env")
            ]
        );
    }

    /// A glob whose load-time walk stopped at the limit stops the run, with the
    /// walk's own count, as a glob walked at plan time does.
    #[test]
    fn a_glob_that_walked_too_far_when_loaded_stops_the_run() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let p = glob_policy(&root, "**/.env");
        let rule = p
            .files
            .block_read
            .iter()
            .find(|r| r.value.starts_with(&root))
            .unwrap();
        assert_eq!(
            p.glob_matches.get(&rule.value),
            Some(&Ok(vec![])),
            "the loader walked it"
        );
        let walks = [(
            rule.value.clone(),
            Walk::Err(TooMany {
                visited: GLOB_WALK + 1,
            }),
        )];
        let err = concrete(std::slice::from_ref(rule), &Matches::new(walks.into()))
            .unwrap_err()
            .to_string();
        let want = format!(
            "files.block_read {:?} (test.toml:2:15) would walk more than 100000 entries under {}",
            root.join("**/.env").display().to_string(),
            root.display()
        );
        assert!(err.starts_with(&want), "{err}");
        assert!(err.contains("Narrow it"), "{err}");
    }
}
