//! `sandpit config [--json]`: the effective policy with each entry's origin.
use crate::config::{load, scratch_root, PolicyArgs};
use sandpit_policy::{path::display, Context, Policy, Rule};
use std::fmt::Write;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// Show the policy as it would apply to this command (picks its profile).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn execute(args: Args) -> anyhow::Result<i32> {
    let mut loaded = load(
        &args.policy,
        args.command.first().map(String::as_str),
        scratch_root().join("RUN"),
    )?;
    // The policy a run enforces (`run::effective`), as `sandpit explain` judges:
    // with the run's private /tmp and /dev/shm where the kernel layer makes them.
    #[cfg(target_os = "linux")]
    let private_tmp = crate::run::plan::private_tmp(crate::run::linux::start_mode());
    #[cfg(not(target_os = "linux"))]
    let private_tmp = false;
    loaded.policy = crate::run::effective(loaded.policy, private_tmp, false);
    if args.json {
        let v = serde_json::json!({
            "profile": loaded.profile,
            "sources": loaded.sources.iter().map(|(l, n)| serde_json::json!({"layer": l, "file": n})).collect::<Vec<_>>(),
            "policy": loaded.policy,
            "caches": crate::caches::granted(&loaded.policy).then(|| {
                crate::caches::env(&crate::caches::dir(&loaded.policy.context))
                    .into_iter()
                    .collect::<std::collections::BTreeMap<_, _>>()
            }),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let chain: Vec<&str> = loaded.sources.iter().map(|(_, n)| n.as_str()).collect();
        print!("{}", render(&loaded.policy, &chain));
    }
    Ok(0)
}

fn list<T>(out: &mut String, key: &str, rules: &[Rule<T>], show: impl Fn(&T) -> String) {
    if rules.is_empty() {
        let _ = writeln!(out, "{key} = []");
        return;
    }
    let _ = writeln!(out, "{key} = [");
    let shown: Vec<String> = rules
        .iter()
        .map(|r| format!("{:?},", show(&r.value)))
        .collect();
    let width = shown.iter().map(String::len).max().unwrap_or(0);
    for (s, r) in shown.iter().zip(rules) {
        let _ = writeln!(out, "  {s:width$}  # {}", r.origin.location());
    }
    let _ = writeln!(out, "]");
}

/// The policy as TOML a user can read and copy from, each entry with its origin.
pub fn render(p: &Policy, chain: &[&str]) -> String {
    let ctx: &Context = &p.context;
    let path = |v: &std::path::PathBuf| display(v, ctx);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# effective sandpit policy; layers: {}",
        chain.join(" < ")
    );
    let _ = writeln!(o, "# workspace = {}", ctx.workspace.display());
    let _ = writeln!(o, "# $TMPDIR   = {} (per run)", ctx.scratch.display());
    let _ = writeln!(
        o,
        "# state     = {} (read-only inside the sandbox)",
        ctx.state_dir.display()
    );
    let cache = crate::caches::dir(ctx);
    if crate::caches::granted(p) {
        let _ = writeln!(
            o,
            "# caches    = {} (writable inside, one per workspace; the host's caches stay read-only)",
            path(&cache)
        );
        for (tool, var, sub) in crate::caches::VARS {
            let _ = writeln!(o, "#   {var:<22} = {}  ({tool})", path(&cache.join(sub)));
        }
    }
    let _ = writeln!(o, "\n[files]");
    list(&mut o, "block_read", &p.files.block_read, path);
    list(&mut o, "allow_read", &p.files.allow_read, path);
    list(&mut o, "agent_read", &p.files.agent_read, path);
    list(&mut o, "allow_write", &p.files.allow_write, path);
    list(&mut o, "block_write", &p.files.block_write, path);
    list(&mut o, "devices", &p.files.devices, path);
    if let Some(origin) = &p.files.allow_home_workspace {
        let _ = writeln!(
            o,
            "allow_home_workspace = true  # {} (the home may be the workspace; / never)",
            origin.location()
        );
    }
    match &p.files.real_dotenv {
        Some(origin) => {
            let _ = writeln!(o, "real_dotenv = true  # {}", origin.location());
        }
        None => {
            let _ = writeln!(
                o,
                "real_dotenv = false  # .env files with secrets are shown as copies with sentinels"
            );
        }
    }
    let _ = writeln!(o, "\n[network]");
    let _ = writeln!(
        o,
        "mode = {:?}  # {}",
        p.network.mode.value.as_str(),
        p.network.mode.origin.location()
    );
    list(&mut o, "allow", &p.network.allow, |h| h.to_string());
    list(&mut o, "block", &p.network.block, |h| h.to_string());
    let _ = writeln!(
        o,
        "allow_local_binding = {}  # {}",
        p.network.allow_local_binding.value,
        p.network.allow_local_binding.origin.location()
    );
    let _ = writeln!(
        o,
        "ask_on_blocked_host = {}  # {} (asks only when a terminal is there)",
        p.network.ask_on_blocked_host.value,
        p.network.ask_on_blocked_host.origin.location()
    );
    let _ = writeln!(
        o,
        "ask_timeout = {}  # {}",
        p.network.ask_timeout.value,
        p.network.ask_timeout.origin.location()
    );
    if !p.network.resolve.is_empty() {
        let _ = writeln!(o, "\n[network.resolve]");
        for r in &p.network.resolve {
            let addrs: Vec<String> = r
                .value
                .addrs
                .iter()
                .map(|a| format!("{a:?}").replace('"', ""))
                .collect();
            let _ = writeln!(
                o,
                "{:?} = {:?}  # {}",
                r.value.name,
                addrs,
                r.origin.location()
            );
        }
    }
    if !p.network.http.allow.is_empty() || !p.network.http.block.is_empty() {
        let _ = writeln!(o, "\n[network.http]");
        let show = |r: &sandpit_policy::HttpRule| {
            let port = r.port.map(|p| format!(":{p}")).unwrap_or_default();
            format!(
                "{} {}://{}{port}{}",
                r.method.as_deref().unwrap_or("*"),
                r.scheme,
                r.host,
                r.path
            )
        };
        list(&mut o, "allow", &p.network.http.allow, show);
        list(&mut o, "block", &p.network.http.block, show);
    }
    if !p.network.tls.extra_roots.is_empty() {
        let _ = writeln!(o, "\n[network.tls]");
        list(&mut o, "extra_roots", &p.network.tls.extra_roots, path);
    }
    // The source is where sandpit reads the value; the value itself is never read
    // here, let alone shown.
    for c in &p.credentials {
        let _ = writeln!(
            o,
            "\n[credentials.{}]  # {}\nenv = {:?}  # holds a per-run sentinel inside\nsource = {:?}\nhosts = {:?}  # TLS terminated there; the real value goes nowhere else",
            c.name,
            c.origin.location(),
            c.env,
            c.source.to_string(),
            c.hosts
        );
        if let Some(f) = &c.file {
            let _ = writeln!(o, "file = {:?}  # shown inside with the sentinel", path(f));
        }
        if c.body {
            let _ = writeln!(o, "body = true  # request bodies too");
        }
        if c.required {
            let _ = writeln!(o, "required = true  # a missing source stops the run");
        }
    }
    // Those this run would do without (their source is missing), as a run says.
    for s in &p.credentials_skipped {
        let _ = writeln!(o, "\n# {}", s.line());
    }
    let _ = writeln!(o, "\n[exec]");
    list(&mut o, "block", &p.exec.block, |e| e.source.clone());
    let _ = writeln!(o, "\n[env]");
    list(&mut o, "withhold", &p.env.withhold, String::clone);
    list(&mut o, "agent", &p.env.agent, String::clone);
    list(
        &mut o,
        "agent_programs",
        &p.env.agent_programs,
        String::clone,
    );
    if !p.env.set.is_empty() {
        let _ = writeln!(o, "\n[env.set]  # the command gets these");
        for r in &p.env.set {
            let _ = writeln!(
                o,
                "{} = {:?}  # {}",
                r.value.name,
                r.value.value,
                r.origin.location()
            );
        }
    }
    if let Some(a) = &p.adversary {
        let _ = writeln!(o, "\n[adversary]  # {}", a.origin.location());
        let _ = writeln!(
            o,
            "provider = {:?}\nmodel = {:?}",
            format!("{:?}", a.provider).to_lowercase(),
            a.model
        );
        if let Some(e) = &a.endpoint {
            let _ = writeln!(o, "endpoint = {e:?}");
        }
        let _ = writeln!(
            o,
            "review = {:?}\ntimeout_ms = {}\non_error = {:?}\ncache = {}",
            a.review
                .iter()
                .map(|r| format!("{r:?}").to_lowercase())
                .collect::<Vec<_>>(),
            a.timeout_ms,
            format!("{:?}", a.on_error).to_lowercase(),
            a.cache
        );
    }
    if let Some(a) = &p.ssh.agent {
        let _ = writeln!(
            o,
            "\n[ssh]\nagent = {:?}  # {}",
            a.value.as_str(),
            a.origin.location()
        );
    }
    let _ = writeln!(o, "\n[shims]\nenabled = {}", p.shims.enabled);
    list(&mut o, "extra", &p.shims.extra, String::clone);
    let _ = writeln!(
        o,
        "\n[limits]\nprocesses = {}  # {}",
        p.limits.processes.value,
        p.limits.processes.origin.location()
    );
    for (key, r) in [
        ("audit_bytes", &p.limits.audit_bytes),
        ("tmp_bytes", &p.limits.tmp_bytes),
        ("logs_days", &p.limits.logs_days),
        ("logs_bytes", &p.limits.logs_bytes),
        ("connections", &p.limits.connections),
        ("connections_per_second", &p.limits.connections_per_second),
        ("memory", &p.limits.memory),
        ("cache_bytes", &p.limits.cache_bytes),
        ("launcher_cpu", &p.limits.launcher_cpu),
    ] {
        let _ = writeln!(o, "{key} = {}  # {}", r.value, r.origin.location());
    }
    let iso = &p.isolation;
    let _ = writeln!(o, "\n[isolation]");
    list(&mut o, "unix_sockets", &iso.unix_sockets, path);
    for (key, on) in [
        ("nested_user_namespaces", &iso.nested_user_namespaces),
        ("macos_trustd", &iso.macos_trustd),
    ] {
        match on {
            Some(origin) => writeln!(o, "{key} = true  # {}", origin.location()),
            None => writeln!(o, "{key} = false"),
        }
        .ok();
    }
    if let Some(e) = &p.telemetry.otlp_endpoint {
        let _ = writeln!(
            o,
            "\n[telemetry]\notlp_endpoint = {:?}  # {}",
            e.value,
            e.origin.location()
        );
        // The values may be a collector's token: names only.
        for (name, _) in &p.telemetry.headers {
            let _ = writeln!(o, "# header {name} (value not shown)");
        }
    }
    o
}
