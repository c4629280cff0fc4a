//! The macOS side of `sandpit run` (cross-built, not run here): policy → Seatbelt
//! profile applied to the forked child before exec, with the interposer injected
//! through `DYLD_INSERT_LIBRARIES` unless the mode choice says the program cannot
//! load it (SIP location, platform binary, hardened runtime without the DYLD
//! entitlements, `__RESTRICT`, setuid): then Seatbelt alone.
//!
//! The same launch path as Linux (`crate::launch`: snapshot, interposer, shims,
//! proxy, adversary, audit session); what differs is the kernel layer and the
//! network: no namespace and no bridge, so the proxy listens on 127.0.0.1 (token
//! required) and the profile lets the command reach only that port.
use super::{make_scratch, Request as RunArgs};
use crate::config::{load, scratch_root};
use crate::sandbox::macos::{apply, lifetime, seatbelt};
use anyhow::{bail, Context, Result};

/// What a run of `args` would do, planned as [`run`] plans it, nothing made or
/// started (`sandpit plan`): the plan and the kernel layer's part of the line.
pub fn dry_run(args: &RunArgs) -> Result<(super::RunPlan, Option<String>)> {
    let support = crate::sandbox::probe();
    let cmd0 = args.command.first().and_then(|c| c.to_str());
    let loaded = load(&args.policy, cmd0, scratch_root().join("RUN"))?;
    let facts = super::Facts {
        support: &support,
        cwd: std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .context("current directory")?,
        run_dir: crate::audit::run_dir(&loaded.policy.context.state_dir, "RUN"),
        proxy_port: 0,
    };
    let run = super::plan(args, loaded, &facts)?;
    let line = if support.seatbelt {
        "kernel layer: Seatbelt, its profile compiled from this policy"
    } else {
        "kernel layer: Seatbelt is not available: a run would not start"
    };
    Ok((run, Some(line.to_string())))
}

pub fn run(args: RunArgs) -> Result<i32> {
    let support = crate::sandbox::probe();
    if !support.seatbelt {
        bail!(
            "Seatbelt is not available (neither sandbox_init_with_parameters nor {}); \
             the command was not started",
            apply::SANDBOX_EXEC
        );
    }
    let scratch = make_scratch(&scratch_root())?;
    let result = run_with_scratch(&args, &support, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn run_with_scratch(
    args: &RunArgs,
    support: &crate::sandbox::KernelSupport,
    scratch: &std::path::Path,
) -> Result<i32> {
    // Before the audit session's and the launch's threads exist (they inherit it).
    apply::block_forwarded_signals()?;
    let cmd0 = args.command.first().and_then(|c| c.to_str());
    let loaded = load(&args.policy, cmd0, scratch.to_path_buf())?;
    let run_id = crate::audit::new_run_id().context("drawing the run's id")?;
    let facts = super::Facts {
        support,
        cwd: std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .context("current directory")?,
        run_dir: crate::audit::run_dir(&loaded.policy.context.state_dir, &run_id),
        proxy_port: 0,
    };
    let run = super::plan(args, loaded, &facts)?;
    let policy = &run.policy;
    super::make_state_dirs(&run)?;
    // Every process of the run carries it (the interposer puts it back into every
    // exec it sees), so the end of the run finds them (sandbox::macos::reap).
    let marker = (
        crate::sandbox::macos::reap::MARKER.to_string(),
        run_id.clone(),
    );
    let mut session =
        crate::audit::Session::start_as(policy, &args.audit, &args.command, run_id.clone())?;
    session.set_export_masker(crate::telemetry::masker(policy));
    if let Some(l) = super::withheld_line(&run) {
        session.note_at_end(l);
    }
    let mut launch = super::launch(&run, &session, true)?;

    // The plan's profile input, with the ports and sockets bound for this run.
    let proxy = launch.loopback_proxy();
    let (control, audit) = launch.reachable_sockets();
    let mut input = run.seatbelt.clone().bind(
        proxy.map(|a| a.port()),
        launch.loopback_dns().map(|a| a.port()),
        control,
        audit,
    );
    // The filtering SSH agent's socket, bound by the launch (src/sshagent).
    if let Some(a) = &run.ssh_agent {
        input.unix_sockets.push(a.socket.clone());
    }
    let profile = seatbelt::compile(&input).context("compiling the Seatbelt profile")?;

    let command = launch_argv(&args.command);
    let (program, rest) = command.split_first().context("no command given")?;
    let rest: Vec<&std::ffi::OsStr> = rest.iter().map(|a| a.as_os_str()).collect();
    let (mut cmd, applied) = apply::command(&profile, program, &rest)?;

    let mut env = vec![(
        "TMPDIR".to_string(),
        policy.context.scratch.to_string_lossy().into_owned(),
    )];
    env.push(marker);
    env.extend(run.env.iter().cloned());
    env.extend(session.child_env());
    // The interposer's resolver hooks ask sandpit's responder (DNS over TCP).
    env.extend(launch.child_env(proxy, input.dns_port.and(launch.loopback_dns()))?);
    for name in &run.withheld {
        cmd.env_remove(name);
    }
    cmd.envs(env);
    let cwd = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .context("current directory")?;
    cmd.current_dir(if cwd.starts_with(&policy.context.workspace) {
        cwd
    } else {
        policy.context.workspace.clone()
    });

    let mut parts = vec![match applied {
        apply::Applied::InProcess => "kernel (Seatbelt, applied by sandpit before exec)".into(),
        apply::Applied::SandboxExec => format!(
            "kernel (Seatbelt through {}, the fallback)",
            apply::SANDBOX_EXEC
        ),
    }];
    parts.extend(launch.describe_unbridged().into_iter().map(|p| {
        if applied == apply::Applied::SandboxExec && p == "interposer" {
            "interposer OFF (stripped with DYLD_* by sandbox-exec)".to_string()
        } else {
            p
        }
    }));
    if let Some(g) = &input.gui {
        parts.push(match &g.app {
            Some(app) => format!("GUI allowance (app {})", app.id()),
            None => "GUI allowance (no app bundle)".to_string(),
        });
    }
    let profile_name = run
        .profile
        .as_deref()
        .map(|p| format!(" [profile {p}]"))
        .unwrap_or_default();
    let mut line = format!("layers: {}{profile_name}", parts.join(", "));
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

    // Threads (the proxy runtime) start after the fork; connections made before
    // the proxy serves wait in the listener's backlog.
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            session.finish(None);
            return Err(anyhow::Error::from(e).context("starting the command under Seatbelt"));
        }
    };
    // From here on every process of the run is watched, and killed at the end.
    let watch = match lifetime::Watch::start(child.id(), &run_id) {
        Ok(w) => w,
        Err(e) => {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            session.finish(None);
            return Err(anyhow::Error::from(e).context("watching the command's processes"));
        }
    };
    session.listen();
    let services = match launch.start(Some(session.sink())) {
        Ok(s) => s,
        Err(e) => {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            let _ = watch.end();
            session.finish(None);
            return Err(e.into());
        }
    };
    let result = apply::wait_for(child);
    match watch.end() {
        Ok(r) if r.killed > 0 => eprintln!(
            "sandpit: ended {} process(es) the command left running",
            r.killed
        ),
        Ok(_) => {}
        Err(e) => eprintln!("sandpit: could not look for processes left running: {e}"),
    }
    for line in services.finish() {
        eprintln!("{line}");
    }
    session.finish(result.as_ref().ok().copied());
    Ok(result?)
}

/// The argv to exec: for a script whose shebang is `#!/usr/bin/env X`, X (resolved
/// through PATH, as `sandpit check` reports) is started directly, so the
/// SIP-protected `/usr/bin/env` never sits between sandpit and the program — dyld
/// would strip `DYLD_INSERT_LIBRARIES` there and the interposer the mode choice
/// promised would be lost. Anything else runs as given.
fn launch_argv(command: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let Some(program) = command.first().and_then(|c| c.to_str()) else {
        return command.to_vec();
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/"));
    match crate::inspect::inspect(program, &path, &cwd, crate::inspect::Host::current()) {
        Ok(i) if i.shebangs.iter().any(|h| h.resolved_via_env.is_some()) => i
            .launch
            .into_iter()
            .map(std::path::PathBuf::into_os_string)
            .chain(command[1..].iter().cloned())
            .collect(),
        _ => command.to_vec(),
    }
}
