//! The Linux side of `sandpit run`: the mode (namespaces, or the Landlock-only
//! fallback when asked), the run planned ([`super::plan`]), then carried out:
//! the audit session, the launch (snapshot, interposer, shims, sockets), the kernel
//! plan under the placeholder locks, the spawn, the proxy and DNS, the end.
use super::{make_scratch, Request as RunArgs};
use crate::config::{load, scratch_root};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// One placeholder lock per writable root (placeholders lie in the workspace and
/// in agents' state directories, `~/.codex`, which runs in several workspaces
/// share): FNV-1a of its path, stable across sandpit versions.
fn placeholder_lock(root: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in root.as_os_str().as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    scratch_root().join(format!("placeholders-{h:016x}.lock"))
}

/// Whether the fallback mode (Landlock + seccomp, no namespaces) is asked for
/// (`SANDPIT_FORCE_FALLBACK`, with `--allow-degraded`): a run starts in it, and
/// `sandpit plan` and `sandpit explain` judge as it does.
pub fn forced_fallback() -> bool {
    std::env::var_os("SANDPIT_FORCE_FALLBACK").is_some()
}

/// The mode a run of `args` starts in (before a missing user namespace sends it to
/// the fallback), as `sandpit plan` shows it.
pub fn start_mode() -> crate::sandbox::linux::Mode {
    if forced_fallback() {
        crate::sandbox::linux::Mode::LandlockOnly
    } else {
        crate::sandbox::linux::Mode::Namespaces
    }
}

/// What a run of `args` would do, planned as [`run`] plans it, nothing made or
/// started: the plan and the kernel layer's part of the start-up line. Paths the
/// run would choose for itself (its scratch directory, its run directory) are
/// shown as `RUN`.
pub fn dry_run(args: &RunArgs) -> Result<(super::RunPlan, Option<String>)> {
    let support = crate::sandbox::linux::probe::quick();
    let mode = start_mode();
    let cmd0 = args.command.first().and_then(|c| c.to_str());
    let loaded = load(&args.policy, cmd0, scratch_root().join("RUN"))?;
    let facts = super::Facts {
        support: &support,
        mode,
        cwd: std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .context("current directory")?,
        run_dir: crate::audit::run_dir(&loaded.policy.context.state_dir, "RUN"),
        proxy_port: args.proxy_port.unwrap_or(3128),
    };
    let run = super::plan(args, loaded, &facts)?;
    // The kernel plan reads the filesystem only; paths the run has not made yet
    // (its scratch directory) may keep it from being drawn here.
    let line = crate::sandbox::linux::plan(&run.kernel, &crate::sandbox::linux::HostFs::default())
        .ok()
        .map(|p| describe(&p, &support));
    Ok((run, line))
}

pub fn run(args: RunArgs) -> Result<i32> {
    use crate::sandbox::linux::{Layer, Mode, SpawnError};

    // No trial namespace here (that costs a few ms): the run itself tries, and a
    // failure to create the user namespace is handled below.
    let support = crate::sandbox::linux::probe::quick();
    if !support.seccomp {
        bail!("seccomp is not available in this kernel; sandpit cannot run without it");
    }
    let no_userns = |why: &str| {
        anyhow::anyhow!(
            "user namespaces are unavailable ({why}), so reads of credential paths cannot \
             be masked and the network cannot be isolated; the command was not started. \
             Pass --allow-degraded to run with Landlock + seccomp only (weaker)."
        )
    };
    let degrade = |why: &str| -> Result<Mode> {
        if !args.allow_degraded {
            return Err(no_userns(why));
        }
        if support.landlock_abi.is_none() {
            bail!(
                "neither user namespaces ({why}) nor Landlock are available: no kernel \
                 layer can confine files; the command was not started"
            );
        }
        Ok(Mode::LandlockOnly)
    };
    let mut mode = if forced_fallback() {
        degrade("SANDPIT_FORCE_FALLBACK is set")?
    } else {
        Mode::Namespaces
    };
    if support.landlock_abi.is_none() && !args.allow_degraded {
        bail!(
            "Landlock is unavailable in this kernel; the command was not started. Pass \
             --allow-degraded to run with namespaces + seccomp only."
        );
    }
    crate::timing::mark("arguments parsed, kernel probed");
    let scratch = make_scratch(&scratch_root())?;
    let mut result = run_with_scratch(&args, mode, &support, &scratch);
    if mode == Mode::Namespaces {
        if let Some(SpawnError::Layer {
            layer: Layer::UserNamespace,
            message,
        }) = result
            .as_ref()
            .err()
            .and_then(|e| e.downcast_ref::<SpawnError>())
        {
            let message = message.clone();
            mode = match degrade(&message) {
                Ok(m) => m,
                Err(e) => {
                    crate::trash::discard(&scratch);
                    return Err(e);
                }
            };
            result = run_with_scratch(&args, mode, &support, &scratch);
        }
    }
    let allow_degraded = args.allow_degraded;
    crate::trash::discard(&scratch);
    match result {
        Ok(code) => Ok(code),
        Err(e) => match e.downcast::<SpawnError>() {
            Ok(SpawnError::Layer { layer, message }) => {
                let hint = match layer {
                    Layer::UserNamespace | Layer::Landlock if !allow_degraded => {
                        " Pass --allow-degraded to accept a weaker mode."
                    }
                    _ => "",
                };
                bail!("{layer} could not be set up: {message}; the command was not started.{hint}")
            }
            Ok(other) => Err(other.into()),
            Err(e) => Err(e),
        },
    }
}

fn run_with_scratch(
    args: &RunArgs,
    mode: crate::sandbox::linux::Mode,
    support: &crate::sandbox::KernelSupport,
    scratch: &Path,
) -> Result<i32> {
    use crate::sandbox::linux;
    // Before the audit session's and the launch's threads exist (they inherit it).
    linux::block_forwarded_signals().context("blocking signals")?;
    let cmd0 = args.command.first().and_then(|c| c.to_str());
    let loaded = load(&args.policy, cmd0, scratch.to_path_buf())?;
    crate::timing::mark("policy loaded");
    // What the plan depends on and the run chooses for itself: its id (and so its
    // directory), and in the fallback mode the bridge's port on this machine's
    // loopback (a free one, bound now and handed to the spawn, unless one was asked
    // for).
    let run_id = crate::audit::new_run_id().context("drawing the run's id")?;
    let bridge_listener = match (mode, args.proxy_port) {
        (linux::Mode::LandlockOnly, None) => Some(
            crate::sys::tcp_listener(("127.0.0.1", 0))
                .context("binding the proxy bridge on 127.0.0.1")?,
        ),
        _ => None,
    };
    let proxy_port = match &bridge_listener {
        Some(l) => l.local_addr().context("proxy bridge address")?.port(),
        None => args.proxy_port.unwrap_or(3128),
    };
    let facts = super::Facts {
        support,
        mode,
        cwd: std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .context("current directory")?,
        run_dir: crate::audit::run_dir(&loaded.policy.context.state_dir, &run_id),
        proxy_port,
    };
    let run = super::plan(args, loaded, &facts)?;
    crate::timing::mark("run planned");
    carry_out(args, &run, &facts, run_id, bridge_listener)
}

/// Carry a plan out: everything from here on makes, binds or starts something.
fn carry_out(
    args: &RunArgs,
    run: &super::RunPlan,
    facts: &super::Facts,
    run_id: String,
    bridge_listener: Option<std::net::TcpListener>,
) -> Result<i32> {
    use crate::sandbox::linux;
    let support = facts.support;
    let policy = &run.policy;
    // Audit log, audit socket and learn mode first: the launch's interposer
    // reports to the session's socket (and it makes ~/.sandpit, which the plan
    // then binds read-only).
    let mut session = crate::audit::Session::start_as(policy, &args.audit, &args.command, run_id)?;
    crate::timing::mark("audit session started");
    let mut launch = super::launch(run, &session, false)?;
    // `sandpit allow`/`deny` during the run (src/control); the reviewer's verdicts
    // and the OTLP export's masking of secrets (src/telemetry).
    let (live, control) = crate::control::prepare(policy, &session, launch.snapshot());
    // Asking about blocked hosts, on the terminal the spawn relays (src/console.rs).
    let (console, asking) = super::asking(policy, launch.has_own_proxy());
    if let Some(c) = &console {
        let user_config = crate::config::user_config(&args.policy, &policy.context.state_dir).0;
        launch.set_ask(crate::proxy::Asking(std::sync::Arc::new(
            crate::control::Asker::new(live.clone(), c.clone(), session.sink(), user_config),
        )));
    }
    launch.set_decide(live);
    launch.set_on_verdict(session.verdict_recorder());
    session.set_export_masker(crate::telemetry::masker(policy));
    crate::timing::mark("run prepared (snapshot, interposer, sockets)");
    // Package caches of sandpit's own, writable (the host's stay read-only).
    if let Some(cache) = &run.caches {
        crate::caches::ensure(cache, crate::sys::uid())?;
        // limits.cache_bytes: a cache the last run left full (and still full) stops
        // the run here; during the run each file is bounded by RLIMIT_FSIZE (the
        // plan's `file_bytes`); at the end the cache is walked.
        crate::caches::check(cache, &policy.limits.cache_bytes, &policy.context.state_dir)?;
    }
    if let Some(l) = super::withheld_line(run) {
        session.note_at_end(l);
    }
    super::make_state_dirs(run)?;
    let input = &run.kernel;
    // Held before the plan looks for placeholders other runs made.
    let mut placeholder_locks = vec![];
    if input.mode == linux::Mode::Namespaces {
        // Once each: two of this process's locks on one file would stand in each
        // other's way when the last run takes it exclusively.
        // Not the run's own scratch directory ($TMPDIR): no other run shares it,
        // and its lock file would be left behind by every run.
        let roots: std::collections::BTreeSet<&PathBuf> = std::iter::once(&input.workspace)
            .chain(&input.writable)
            .filter(|r| !r.starts_with(&input.scratch))
            .collect();
        for root in roots {
            let path = placeholder_lock(root);
            let f = linux::lock_placeholders(&path)
                .with_context(|| format!("locking {}", path.display()))?;
            placeholder_locks.push((root.clone(), f));
        }
    }
    let mut plan = linux::plan(input, &linux::HostFs::default())?;
    plan.report_refusals = run.kernel_refusals_reported;
    crate::timing::mark("planned");
    plan.env.extend(run.env.iter().cloned());
    plan.env.extend(session.child_env());
    if plan.sealed_git() {
        // The sealed `.git` of a directory that is no repository is not one go
        // can stamp a build from.
        // Added to the command's own GOFLAGS: env.set's, else this process's.
        let set = plan.env.iter().rfind(|(k, _)| k == "GOFLAGS");
        let mut flags = match set {
            Some((_, v)) => v.clone(),
            None => std::env::var("GOFLAGS").unwrap_or_default(),
        };
        flags.push_str(if flags.is_empty() { "" } else { " " });
        flags.push_str("-buildvcs=false");
        crate::launch::set_env(&mut plan.env, "GOFLAGS".into(), flags);
    }
    launch.apply(&mut plan)?;
    scrubbed_copies(run, &launch, &mut plan)?;
    let profile = run
        .profile
        .as_deref()
        .map(|p| format!(" [profile {p}]"))
        .unwrap_or_default();
    let mut line = format!(
        "layers: {}{profile}; {}; {asking}",
        launch.describe(&plan, support),
        describe(&plan, support)
    );
    if let Some(files) = run.agent_files() {
        line.push_str("; ");
        line.push_str(&files);
    }
    if let Some(files) = run.scrubbed_line() {
        line.push_str("; ");
        line.push_str(&files);
    }
    eprintln!("sandpit: {line}");
    session.kernel_layer(&line);
    session.set_unrecorded(launch.unrecorded());
    // The run's id and a secret no process of the sandbox sees: the sandbox
    // cannot take the names files are moved aside to before they are.
    let quarantine_tag = format!(
        "{}-{}",
        session.run(),
        crate::sys::random_hex(4).context("reading /dev/urandom")?
    );
    // Remove what the last runs left (placeholders, their own directories) and
    // make the next runs' placeholders, off the start and the end of every run.
    // Forked while the launcher is single-threaded.
    let state = &policy.context.state_dir;
    let ns = plan.mode == linux::Mode::Namespaces;
    let tender = linux::start_tender(ns.then(|| state.clone()), &scratch_root());
    let layers = linux::Layers {
        landlock_abi: support.landlock_abi,
        placeholder_locks,
        spare_state: Some(state.clone()),
        quarantine_tag: quarantine_tag.clone(),
        loopback_observer: Some(loopback_audit(session.sink())),
        // The policy is copied for the relay's thread only where there is one.
        udp_judge: matches!(plan.net, linux::plan::NetPlan::Bridge { udp: true, .. })
            .then(|| udp_judge(policy, session.sink())),
        bridge_listener,
        serve_bridge: launch.has_own_proxy(),
        tender,
        console,
        refusal_observer: plan
            .report_refusals
            .then(|| kernel_refusals(policy, session.sink())),
        launcher_cpu: Some(session.launcher_cpu()),
        tmp_limit: Some(linux::tmpfs::Limit {
            origin: policy.limits.tmp_bytes.origin.location(),
            scratch: input.scratch.clone(),
        }),
    };
    let mut running = match linux::spawn(&plan, &launch.command(&args.command), &layers) {
        Ok(r) => r,
        Err(e) => {
            session.finish(None);
            return Err(e.into());
        }
    };
    crate::timing::mark("command exec'd");
    session.listen();
    let control = crate::control::serve(control);
    if let Some(l) = running.take_bridge() {
        launch.serve_bridge(l);
    }
    launch.attribute_to(running.pid());
    // Threads (the proxy runtime) only after the fork.
    let services = match launch.start(Some(session.sink())) {
        Ok(s) => s,
        Err(e) => {
            crate::launch::abort_command();
            let _ = running.wait();
            session.finish(None);
            return Err(e.into());
        }
    };
    crate::timing::mark("proxy and DNS started");
    let result = running.wait();
    crate::timing::mark("command and its supervisors exited");
    for line in services.finish() {
        eprintln!("{line}");
    }
    if let Some(line) = run.caches.as_deref().and_then(|c| {
        crate::caches::full_line(c, &policy.limits.cache_bytes, &policy.context.state_dir)
    }) {
        eprintln!("{line}");
    }
    for p in &plan.absent_git_files {
        quarantine(p, &quarantine_tag, &session);
    }
    crate::timing::mark("proxy and DNS stopped");
    drop(control);
    session.finish(result.as_ref().ok().copied());
    crate::timing::mark("audit session finished, run directory removed");
    Ok(result?)
}

/// The startup and `.env` files the plan found secrets in, each shown as a
/// read-only copy without them, bound over the file last (namespace mode; the
/// fallback hides them, `run::plan::SCRUBBED`). A credential's variable gets its
/// sentinel, every other `.env` secret the run's own. One that cannot be read as
/// text any more is masked.
fn scrubbed_copies(
    run: &super::RunPlan,
    launch: &crate::launch::Prepared,
    plan: &mut crate::sandbox::linux::Plan,
) -> Result<()> {
    use crate::sandbox::linux::plan::MountOp;
    if run.scrubbed.copies.is_empty() || plan.mode != crate::sandbox::linux::Mode::Namespaces {
        return Ok(());
    }
    let other = format!(
        "sandpit-sentinel-dotenv-{}",
        crate::sys::random_hex(16).context("reading /dev/urandom")?
    );
    let sentinel = |env: &str| launch.sentinel(env).unwrap_or_else(|| other.clone());
    for c in &run.scrubbed.copies {
        match crate::scrub::render(c, &run.policy, &sentinel, &other) {
            Some((contents, _)) => plan.mounts.push(MountOp::File {
                path: c.path.clone(),
                contents,
            }),
            None if c.path.exists() => plan.mounts.push(MountOp::MaskFile {
                path: c.path.clone(),
            }),
            None => {}
        }
    }
    Ok(())
}

/// A protected file git reads whenever it exists (`.git/commondir`) that appeared
/// during the run past the interposer (a static program, a raw system call; for
/// `config.worktree`, possibly git on the host): moved aside so that the user's
/// git does not take its config from where the sandbox pointed it, or found moved
/// by the mount guard, which stopped the run; said and recorded either way.
fn quarantine(path: &Path, tag: &str, session: &crate::audit::Session) {
    use crate::sandbox::linux;
    let why = linux::absent_git_file_danger(path);
    let who = if path.file_name().is_some_and(|n| n == "config.worktree") {
        "appeared during the run (made inside the sandbox, or by git on the host: `git \
         sparse-checkout`, `git config --worktree`)"
    } else {
        "was created by the run"
    };
    let guard_moved =
        || linux::quarantine_path(path, tag).filter(|to| std::fs::symlink_metadata(to).is_ok());
    let moved = match linux::move_aside(path, tag) {
        Err(e)
            if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
                && path.parent().is_some_and(give_back_rights) =>
        {
            linux::move_aside(path, tag)
        }
        r => r,
    };
    match moved.map(|m| m.or_else(guard_moved)) {
        Ok(None) => {}
        Ok(Some(to)) => {
            eprintln!(
                "sandpit: warning: {} {who} ({why}); moved it to {}",
                path.display(),
                to.display()
            );
            session.quarantined(path, &to, why);
        }
        Err(e) => {
            eprintln!(
                "sandpit: error: {} {who} ({why}) and could not be moved aside ({e}); \
                 remove it before running git in this workspace",
                path.display()
            );
            session.quarantined(path, path, &format!("{why}; could not be moved: {e}"));
        }
    }
}

/// The run may have taken the write or search right of a directory it owns (this
/// user's): given back to its owner, and said. Whether it was.
fn give_back_rights(dir: &Path) -> bool {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Ok(m) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    let mode = m.mode() & 0o7777;
    if !m.is_dir() || m.uid() != crate::sys::uid() {
        return false;
    }
    if std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700)).is_err() {
        return false;
    }
    eprintln!(
        "sandpit: warning: the run had set {}'s mode to {mode:o}; it is {:o} again",
        dir.display(),
        mode | 0o700
    );
    true
}

/// Connections relayed to a host loopback service go to the audit log like the
/// proxy's decisions (the proxy is not on their path).
fn loopback_audit(
    sink: std::sync::Arc<dyn crate::audit::event::AuditSink>,
) -> crate::sandbox::linux::loopback::Observer {
    use crate::audit::event::{AuditEvent, Way};
    crate::sandbox::linux::loopback::Observer(std::sync::Arc::new(move |svc, to| {
        let host = sandpit_policy::Host::Ip(svc.listen.ip()).to_string();
        let port = svc.listen.port();
        let (allow, reason) = match to {
            Some(a) => (
                true,
                format!("{host}:{port} is a loopback service of this machine, relayed to {a}"),
            ),
            None => (
                false,
                format!(
                    "{}nothing answers at this machine's {host}:{port}",
                    crate::audit::ALLOWED_BUT
                ),
            ),
        };
        sink.record(AuditEvent {
            time: std::time::SystemTime::now(),
            way: Way::Loopback,
            host,
            port,
            addr: to,
            allow,
            rule: Some(svc.rule.clone()),
            reason,
            program: None,
        });
    }))
}

/// Whether the process (or thread) `pid` holds the layer that hides
/// `files.agent_read`: the interposer put its mark in the environment the program
/// was exec'd with. A process that cannot be read (gone, or undumpable in the
/// fallback mode) is taken to hold none: no refusal is reported that may not be one.
fn hidden_in(pid: u32) -> bool {
    let mark = format!("{}=1", sandpit_policy::vars::HIDDEN_VAR);
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|e| e == mark.as_bytes()))
}

/// Where no interposer reports them, the paths the kernel layer refuses are judged
/// with the run's policy (the one the Landlock rules and masks were compiled from)
/// and each refused one is recorded with its rule: once per program, operation and
/// path (a retry loop adds nothing; the log's own bound holds the rest). A path
/// that `files.agent_read` hides is refused only to a process that holds the hiding
/// layer, which the interposer marks in the environment it passes to exec
/// (`SANDPIT_AGENT_FILES_HIDDEN`): a caller whose environment has the mark is
/// judged as a command the agent spawned, every other one as the agent (a static
/// agent's own children hold no layer, and read the file).
fn kernel_refusals(
    policy: &sandpit_policy::Policy,
    log: std::sync::Arc<crate::audit::AuditLog>,
) -> crate::sandbox::linux::notify::Observer {
    use crate::audit::{Decision, Layer, Record, RuleRef};
    use crate::sandbox::linux::notify::{Access, Observer, Op};
    use sandpit_policy::{decide, Request};
    /// Distinct refusals remembered; past it, new ones are not recorded.
    const DISTINCT: usize = 10_000;
    /// Verdicts remembered (a build opens the same headers again and again): the
    /// policy does not change during the run, so a remembered one is exact.
    const VERDICTS: usize = 4096;
    /// The rule, the reason and the path the kernel checked (links followed).
    type Refused = Option<(Option<RuleRef>, String, std::path::PathBuf)>;
    let policy = policy.clone();
    let verdicts = std::sync::Mutex::new(std::collections::HashMap::<_, (Refused, Refused)>::new());
    let seen = std::sync::Mutex::new(std::collections::HashSet::new());
    Observer(std::sync::Arc::new(move |a: &Access| {
        let Ok(mut known) = verdicts.lock() else {
            return;
        };
        // Remembered by the path as the call gave it: following its links costs a
        // readlink a component, once. Judged for the agent and for a spawned
        // command: only where the two differ (a hidden file) is the caller asked.
        let key = (a.op, a.path.clone());
        let (as_agent, as_spawned) = match known.get(&key) {
            Some(r) => r.clone(),
            None => {
                // What the kernel checked: the file a link names. Executing needs
                // what reading needs from the kernel layer.
                let path = a.resolved();
                let judge = |spawned: bool| -> Refused {
                    let v = decide(&policy, &Request::path(&path, a.op == Op::Write, spawned));
                    (!v.is_allowed())
                        .then(|| (v.rule.as_ref().map(RuleRef::from), v.reason, path.clone()))
                };
                let as_agent = judge(false);
                let as_spawned = match as_agent.is_none() && !policy.files.agent_read.is_empty() {
                    true => judge(true),
                    false => None,
                };
                if known.len() >= VERDICTS {
                    known.clear();
                }
                known.insert(key, (as_agent.clone(), as_spawned.clone()));
                (as_agent, as_spawned)
            }
        };
        let refused = match as_spawned {
            Some(r) if hidden_in(a.pid) => Some(r),
            _ => as_agent,
        };
        drop(known);
        // A path that is not there fails with ENOENT before any check.
        let Some((rule, reason, path)) = refused else {
            return;
        };
        if a.must_exist && !a.exists() {
            return;
        }
        let program = a.program();
        let Ok(mut seen) = seen.lock() else { return };
        let key = (program.clone(), a.op, path.clone());
        if seen.contains(&key) {
            return;
        }
        if seen.len() >= DISTINCT {
            // Said once, when the first one goes unrecorded.
            if seen.len() == DISTINCT {
                seen.insert(key);
                drop(seen);
                let mut r = Record::new(
                    log.run(),
                    Layer::Kernel,
                    "note",
                    String::new(),
                    Decision::Info,
                );
                r.reason = format!(
                    "{DISTINCT} distinct refusals of the kernel layer recorded; later ones are refused as ever but not recorded one by one"
                );
                log.record(r);
            }
            return;
        }
        seen.insert(key);
        drop(seen);
        let mut r = Record::new(
            log.run(),
            Layer::Kernel,
            a.op.as_str(),
            path.display().to_string(),
            Decision::Deny,
        );
        r.rule = rule;
        r.reason = reason;
        r.pid = Some(a.pid);
        r.program = program.map(|p| p.display().to_string());
        log.record(r);
    }))
}

/// The UDP relay's judge: `sandpit_policy::decide_datagram` with the machine's own
/// addresses (`service::own`), each decision (a new flow, or a refused
/// destination) written to the audit log.
fn udp_judge(
    policy: &sandpit_policy::Policy,
    sink: std::sync::Arc<dyn crate::audit::event::AuditSink>,
) -> crate::sandbox::linux::udp::Judge {
    use crate::audit::event::{AuditEvent, Way};
    let policy = policy.clone();
    crate::sandbox::linux::udp::Judge(std::sync::Arc::new(move |dst| {
        // The machine's own addresses as they are now: one added during the run
        // is refused from its next new flow on.
        let v = match crate::service::own::addrs() {
            Ok(own) => sandpit_policy::decide_datagram(&policy, dst, &own),
            Err(e) => sandpit_policy::Verdict {
                decision: sandpit_policy::Decision::Deny,
                rule: None,
                reason: format!("blocked UDP to {dst}: {e}"),
            },
        };
        let allow = v.is_allowed();
        sink.record(AuditEvent {
            time: std::time::SystemTime::now(),
            way: Way::Udp,
            host: sandpit_policy::Host::Ip(sandpit_policy::host::canonical_ip(dst.ip()))
                .to_string(),
            port: dst.port(),
            addr: allow.then_some(dst),
            allow,
            rule: v.rule.map(|o| o.to_string()),
            reason: v.reason,
            program: None,
        });
        allow
    }))
}

fn describe(plan: &crate::sandbox::linux::Plan, s: &crate::sandbox::KernelSupport) -> String {
    use crate::sandbox::linux::{plan::NetPlan, Mode};
    let mut parts = vec![];
    match plan.mode {
        Mode::Namespaces => parts.push("namespaces (user, mount, pid, net, ipc, uts)".to_string()),
        Mode::LandlockOnly => parts.push("DEGRADED: no namespaces".to_string()),
    }
    match s.landlock_abi {
        Some(abi) => parts.push(format!(
            "Landlock ABI {abi}{}{}",
            if abi >= 6 { " with scopes" } else { "" },
            if plan.landlock.tcp_connect.is_some() {
                ", TCP connect limited"
            } else {
                ""
            }
        )),
        None => parts.push("DEGRADED: no Landlock".to_string()),
    }
    parts.push(format!(
        "seccomp ({} rules)",
        crate::sandbox::linux::seccomp::table(plan.seccomp, plan.nested_user_namespaces).len()
    ));
    if plan.report_refusals {
        parts.push("refusals reported by a seccomp notifier".to_string());
    }
    if let Some(n) = plan.processes {
        parts.push(format!("at most {n} processes and threads"));
    }
    if let Some(m) = &plan.memory {
        parts.push(crate::sandbox::linux::memory::describe(m));
    }
    let net = match &plan.net {
        NetPlan::Bridge { port, relay_to, .. } => {
            format!(
                "network: proxy only (127.0.0.1:{port} -> {})",
                relay_to.display()
            )
        }
        NetPlan::Offline => "network: none".to_string(),
    };
    let mut net = net;
    if let NetPlan::Bridge { udp: true, .. } = &plan.net {
        net.push_str(&format!(
            " + UDP to public addresses (relayed from the TUN device {})",
            crate::sandbox::linux::udp::DEVICE
        ));
    }
    if !plan.loopback.is_empty() {
        let at: Vec<String> = plan.loopback.iter().map(|l| l.listen.to_string()).collect();
        net.push_str(&format!(
            " + loopback services {} (relayed to this machine)",
            at.join(", ")
        ));
    } else if let (Mode::LandlockOnly, Some(ports)) = (plan.mode, &plan.landlock.tcp_connect) {
        if ports.len() > 1 {
            net.push_str(" + loopback service ports by Landlock rule");
        }
    }
    if plan.mirror {
        net.push_str(
            "; servers on loopback inside are mirrored on this machine (allow_local_binding)",
        );
    }
    let mut line = format!("kernel layer: {}; {net}", parts.join(" + "));
    for w in &plan.weaker {
        line.push_str("; weaker: ");
        line.push_str(w);
    }
    line
}
