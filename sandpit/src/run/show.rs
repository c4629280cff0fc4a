//! A run plan as `sandpit plan` prints it: text for people, JSON for programs.
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::plan::{Interposition, Proxy, RunPlan};

fn shown(home: &Path, p: &Path) -> String {
    crate::audit::summary::tilde(home, &p.to_string_lossy())
}

fn paths(home: &Path, ps: &[PathBuf]) -> Vec<String> {
    let mut v: Vec<String> = ps.iter().map(|p| shown(home, p)).collect();
    v.sort();
    v.dedup();
    v
}

/// The network part: mode, whose proxy, DNS, UDP relay.
fn network(plan: &RunPlan) -> Value {
    let n = &plan.policy.network;
    let (asks, asking) = super::ask_state(
        &plan.policy,
        matches!(plan.proxy, Proxy::Own { .. }),
        super::on_terminal(),
    );
    let proxy = match &plan.proxy {
        Proxy::None => json!(null),
        Proxy::Own { socket, dns } => json!({"kind": "sandpit", "socket": socket, "dns": dns}),
        Proxy::External { socket, dns } => {
            json!({"kind": "external", "socket": socket, "dns": dns})
        }
    };
    json!({
        "mode": n.mode.value,
        "allowed_hosts": n.allow.iter().map(|r| r.origin.entry.clone()).collect::<Vec<_>>(),
        "blocked_hosts": n.block.iter().map(|r| r.origin.entry.clone()).collect::<Vec<_>>(),
        "proxy": proxy,
        "udp_relay": plan.udp_relay,
        "allow_local_binding": n.allow_local_binding.value,
        "ask_on_blocked_host": {
            "asks": asks,
            "why": asking,
            "timeout_seconds": n.ask_timeout.value,
        },
    })
}

/// The plan as JSON (`sandpit plan --json`). `kernel_line` is the kernel layer's
/// part of the start-up line, where the platform has one to show.
pub fn to_json(plan: &RunPlan, kernel_line: Option<&str>) -> Value {
    #[cfg_attr(not(any(target_os = "linux", target_os = "macos")), allow(unused_mut))]
    let mut v = json!({
        "command": plan.command.iter().map(|c| c.to_string_lossy()).collect::<Vec<_>>(),
        "profile": plan.profile,
        "sources": plan.sources.iter().map(|(l, s)| json!({"layer": format!("{l:?}").to_lowercase(), "source": s})).collect::<Vec<_>>(),
        "workspace": plan.policy.context.workspace,
        "interposer": match &plan.interposer {
            Interposition::On => json!({"on": true}),
            Interposition::Off(why) => json!({"on": false, "why": why}),
        },
        "agent_programs_without_interposer": plan.static_agent,
        "agent_files": plan.agent_files(),
        "kernel_refusals_reported": plan.kernel_refusals_reported,
        "shims": plan.shims,
        "learn": plan.policy.learn,
        "network": network(plan),
        "env": {
            "set": plan.env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
            "withheld": plan.withheld,
        },
        "credentials": plan.credentials.as_ref().map(|c| json!({
            "sentinels": c.sentinels.iter().map(|(name, env, hosts)| json!({"name": name, "env": env, "hosts": hosts})).collect::<Vec<_>>(),
            "ca": c.ca,
            "bundle": c.bundle,
            "ca_env": c.ca_env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
        })),
        "scrubbed": {
            "shown_as_copies": plan.scrubbed_shown(),
            "files": plan.scrubbed.copies,
            "dotenv_search_stopped": plan.scrubbed.dotenv_walk_stopped,
        },
        "credentials_skipped": plan.policy.credentials_skipped.iter().map(|s| json!({
            "name": s.credential.name, "env": s.credential.env, "hosts": s.credential.hosts,
            "rule": s.credential.origin.location(), "why": s.why,
        })).collect::<Vec<_>>(),
        "notes": plan.notes,
        "ssh_agent": plan.ssh_agent.as_ref().map(|a| json!({
            "socket": a.socket,
            "signs_with": a.upstream,
            "known_hosts": a.known_hosts,
            "why": a.why,
        })),
        "package_cache": plan.caches,
        "state_dirs_made": plan.state_dirs.iter().map(|(d, e)| json!({"path": d, "entry": e})).collect::<Vec<_>>(),
        "kernel_line": kernel_line,
    });
    #[cfg(target_os = "linux")]
    {
        let home = &plan.policy.context.home;
        let k = &plan.kernel;
        v["kernel"] = json!({
            "mode": format!("{:?}", k.mode),
            "writable": paths(home, &k.writable),
            "read_only_inside_writable": paths(home, &k.write_protected),
            "unreadable": paths(home, &k.read_denied),
            "readable_again": paths(home, &k.read_allowed),
            "devices": paths(home, &k.devices),
            "host_sockets_hidden": k.host_sockets.len(),
            "loopback_services": k.loopback.iter().map(|l| l.listen.to_string()).collect::<Vec<_>>(),
            "processes": k.processes,
            "processes_not_limited": k.processes_void,
            "tmp_bytes": k.tmp_bytes,
            "nested_user_namespaces": k.nested_user_namespaces,
        });
    }
    #[cfg(target_os = "macos")]
    {
        let home = &plan.policy.context.home;
        let s = &plan.seatbelt;
        v["kernel"] = json!({
            "mode": "Seatbelt",
            "writable": paths(home, &s.allow_write),
            "read_only_inside_writable": paths(home, &s.protected),
            "unreadable": paths(home, &s.block_read),
            "readable_again": paths(home, &s.allow_read),
            "devices": paths(home, &s.devices),
            "unix_sockets": paths(home, &s.unix_sockets),
            "network": match s.network {
                crate::sandbox::macos::seatbelt::Network::Offline => "offline",
                crate::sandbox::macos::seatbelt::Network::Proxy { .. } => "sandpit's proxy on 127.0.0.1 only",
            },
            "trustd": s.trustd,
            "gui": s.gui.as_ref().map(|g| g.app.as_ref().map(|a| a.id().to_string())),
        });
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let _ = paths;
    v
}

/// The plan for people: one heading per layer, the rule lists below.
pub fn to_text(plan: &RunPlan, kernel_line: Option<&str>) -> String {
    let v = to_json(plan, kernel_line);
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    let cmd: Vec<String> = plan
        .command
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    line(format!("plan for: {}", cmd.join(" ")));
    if let Some(p) = &plan.profile {
        line(format!("profile: {p}"));
    }
    let sources: Vec<&str> = plan.sources.iter().map(|(_, s)| s.as_str()).collect();
    line(format!("policy from: {}", sources.join(", ")));
    if let Some(k) = kernel_line {
        line(k.to_string());
    }
    line(match &plan.interposer {
        Interposition::On => "interposer: on".into(),
        Interposition::Off(why) => format!("interposer: OFF ({why})"),
    });
    for a in &plan.static_agent {
        line(format!(
            "  agent program {} is static: no interposer in it, only in what it spawns",
            a.display()
        ));
    }
    if let Some(files) = plan.agent_files() {
        line(format!("agent's own files: {files}"));
    }
    if plan.kernel_refusals_reported {
        line("kernel refusals: reported with their rule (seccomp notifier on path calls)".into());
    }
    line(format!("shims: {}", if plan.shims { "on" } else { "off" }));
    if plan.policy.learn {
        line("learn mode: the interposer records what it would deny".into());
    }
    let n = &v["network"];
    let proxy = match &plan.proxy {
        Proxy::None => "no proxy (nothing goes out)".to_string(),
        Proxy::Own { .. } => "sandpit's proxy and DNS responder".to_string(),
        Proxy::External { socket, .. } => format!("the proxy at {}", socket.display()),
    };
    line(format!(
        "network: {} through {proxy}{}",
        n["mode"].as_str().unwrap_or_default(),
        if plan.udp_relay {
            "; UDP to public addresses relayed"
        } else {
            ""
        }
    ));
    if let Some(why) = n["ask_on_blocked_host"]["why"].as_str() {
        line(format!("{why} (as run from here)"));
    }
    let list = |title: &str, items: &Value, out: &mut Vec<String>| {
        if let Some(a) = items.as_array().filter(|a| !a.is_empty()) {
            out.push(format!("{title}:"));
            for i in a {
                out.push(format!(
                    "  {}",
                    i.as_str().map_or_else(|| i.to_string(), str::to_string)
                ));
            }
        }
    };
    let mut rest = vec![];
    list("allowed hosts", &n["allowed_hosts"], &mut rest);
    list("blocked hosts", &n["blocked_hosts"], &mut rest);
    if let Some(k) = v.get("kernel") {
        list("writable", &k["writable"], &mut rest);
        list(
            "read-only inside writable roots",
            &k["read_only_inside_writable"],
            &mut rest,
        );
        list("unreadable (masked)", &k["unreadable"], &mut rest);
        list(
            "readable again inside masked paths",
            &k["readable_again"],
            &mut rest,
        );
        list("devices", &k["devices"], &mut rest);
        if let Some(n) = k["host_sockets_hidden"].as_u64().filter(|n| *n > 0) {
            rest.push(format!("host unix sockets hidden: {n}"));
        }
    }
    let withheld: Vec<Value> = plan.withheld.iter().map(|w| json!(w)).collect();
    list("environment withheld", &Value::Array(withheld), &mut rest);
    let set: Vec<Value> = plan
        .env
        .iter()
        .map(|(k, v)| json!(format!("{k}={v}")))
        .collect();
    list("environment set", &Value::Array(set), &mut rest);
    if let Some(c) = &plan.credentials {
        rest.push(
            "credentials (real values stay in sandpit; its proxy puts them in for these hosts alone):"
                .into(),
        );
        for (name, env, hosts) in &c.sentinels {
            rest.push(format!(
                "  {name}: {env} holds a sentinel; the real value goes to {}",
                hosts.join(", ")
            ));
        }
        let names: Vec<&str> = c.ca_env.iter().map(|(k, _)| k.as_str()).collect();
        rest.push(format!(
            "  TLS clients trust the run's CA ({}): {}",
            shown(&plan.policy.context.home, &c.bundle),
            names.join(", ")
        ));
    }
    if let Some(l) = plan.scrubbed_line() {
        rest.push(l);
        for c in &plan.scrubbed.copies {
            rest.push(format!("  {}", shown(&plan.policy.context.home, &c.path)));
        }
    }
    if !plan.policy.credentials_skipped.is_empty() {
        rest.push("credentials skipped in this run:".into());
        for s in &plan.policy.credentials_skipped {
            rest.push(format!("  {}", s.line()));
        }
    }
    for n in &plan.notes {
        rest.push(n.clone());
    }
    if let Some(a) = &plan.ssh_agent {
        rest.push(format!(
            "ssh agent: filtered (SSH_AUTH_SOCK={}): lists the keys of {}, signs only logins to hosts whose key {} holds and the network policy allows; {}",
            shown(&plan.policy.context.home, &a.socket),
            a.upstream.display(),
            a.known_hosts
                .iter()
                .map(|p| shown(&plan.policy.context.home, p))
                .collect::<Vec<_>>()
                .join(" or "),
            a.why
        ));
    }
    let made: Vec<Value> = plan
        .state_dirs
        .iter()
        .map(|(d, e)| {
            json!(format!(
                "{} (for files.allow_write {e:?})",
                shown(&plan.policy.context.home, d)
            ))
        })
        .collect();
    list("made at start", &Value::Array(made), &mut rest);
    for r in rest {
        line(r);
    }
    out
}
