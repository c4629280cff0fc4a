//! `sandpit explain read|write PATH`, `explain connect HOST[:PORT]`,
//! `explain udp ADDR:PORT`, `explain listen ADDR:PORT`, `explain unix PATH`, `explain env NAME`, `explain exec -- CMD…`: the
//! verdict, the rule, the reason, and the layers that enforce it.
use crate::cli::UsageError;
use crate::config::{load, scratch_root, PolicyArgs};
use sandpit_policy::{check_resolved, decide, parse_authority, Decision, Host, Request, Verdict};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Machine-readable output.
    #[arg(long, global = true)]
    pub json: bool,
    /// Why was this denied in run RUN? Shows the matching audit log records.
    #[arg(long, value_name = "RUN", global = true)]
    pub run: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum What {
    /// Would reading PATH be allowed?
    Read {
        path: PathBuf,
        /// Judge it for a command the agent spawned rather than the agent itself
        /// (`files.agent_read`: the agent's own files are not for those).
        #[arg(long)]
        spawned: bool,
    },
    /// Would writing PATH (creating, changing, renaming, deleting) be allowed?
    Write {
        path: PathBuf,
        /// Judge it for a command the agent spawned.
        #[arg(long)]
        spawned: bool,
    },
    /// Would a connection to HOST[:PORT] be allowed? (port 443 when omitted)
    Connect {
        host: String,
        /// The program that connects (a path, or a name looked up in PATH), for
        /// `[[network.program]]` entries; without it, a host such an entry names is
        /// judged as for a program sandpit cannot identify.
        #[arg(long, value_name = "PROGRAM")]
        program: Option<PathBuf>,
    },
    /// Would the HTTP request METHOD URL be allowed? (`[network.http]`: plain HTTP,
    /// and https:// to hosts whose TLS sandpit terminates)
    Http { method: String, url: String },
    /// Does the environment variable NAME reach the command sandpit starts (or, with
    /// --program, a program the agent starts)?
    Env {
        name: String,
        /// The program a process holding the agent's variables starts.
        #[arg(long, value_name = "PATH")]
        program: Option<PathBuf>,
    },
    /// Would a UDP datagram to ADDR:PORT (an address: 1.2.3.4:443, [2001:db8::1]:443)
    /// be allowed?
    Udp { addr: String },
    /// Would a TCP server inside the sandbox listening on ADDR:PORT be allowed?
    /// (`8000` means 127.0.0.1:8000; port 0: an unbound socket)
    Listen { addr: String },
    /// Would connecting to the Unix socket at PATH be allowed?
    Unix { path: PathBuf },
    /// Would running this command line be allowed?
    Exec {
        #[arg(last = true, required = true, value_name = "CMD")]
        argv: Vec<String>,
    },
}

/// The program `explain connect --program` judges, as the proxy would see it: a
/// name without a slash is looked up in PATH, and links are resolved
/// (`/proc/PID/exe` names the file itself).
fn program_path(given: &Path) -> Result<sandpit_policy::Program, UsageError> {
    let found = if given.components().count() == 1 && !given.is_absolute() {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|d| d.join(given))
            .find(|c| c.is_file())
            .ok_or_else(|| {
                UsageError(format!(
                    "--program {}: not found in PATH; give its path",
                    given.display()
                ))
            })?
    } else {
        absolute(given).map_err(|e| UsageError(e.to_string()))?
    };
    let path = std::fs::canonicalize(&found).unwrap_or(found);
    Ok(sandpit_policy::Program { path, pid: None })
}

const FILE_LAYERS: &[&str] = &[
    "kernel: mount-namespace masks and read-only binds plus Landlock hold for every process, static binaries and raw syscalls included",
    "interposer: refuses the libc call with this reason, so the agent sees which rule applied",
];
const NET_LAYERS: &[&str] = &[
    "kernel: the network namespace's only way out for TCP is sandpit's proxy (direct TCP and raw sockets go nowhere; UDP see `sandpit explain udp`)",
    "proxy: decides each connection by name (TLS SNI, HTTP Host, CONNECT, SOCKS5, the name the process resolved)",
    "interposer: sends connect() to the proxy and names the rule on a denial",
    "shims (with --shims): curl, wget, ssh, nc… are checked on their arguments before they run",
];
const UDP_LAYERS: &[&str] = &[
    "kernel (Linux, namespace mode): UDP reaches sandpit's DNS responder only; with network.mode = \"unrestricted\" a TUN device is the namespace's default route and the launcher relays each datagram this decision allows, for static programs too, and answers the rest with ICMP \"administratively prohibited\"",
    "interposer: refuses connect() and sendto() with this reason",
    "limit: the fallback mode without namespaces and macOS's Seatbelt refuse UDP sockets (DNS aside) in every mode",
];
const ENV_LAYERS: &[&str] = &[
    "launcher: a withheld variable the agent does not keep is removed before the command starts, so no program in the sandbox has it, whatever it is linked as",
    "interposer: the agent's own variables (env.agent) pass to execs in place and to env.agent_programs only; every other program a dynamic process starts goes without",
    "limit: a static agent (no interposer) hands the variables it holds to what it spawns",
];
const LISTEN_LAYERS: &[&str] = &[
    "kernel: Landlock's TCP bind right (granted only for ephemeral ports without allow_local_binding); the server is in the sandbox's own network namespace, and this machine reaches it only through sandpit's mirror of the allowed port",
    "interposer: refuses bind() and listen() with this reason, so the agent sees which key applies",
];
const UNIX_LAYERS: &[&str] = &[
    "kernel (Linux, namespace mode): every socket bound in sandpit's network namespace when the run starts is hidden by a mount unless allowed, static programs and raw syscalls included; not: one a host program binds later (or binds again after a restart) where the sandbox sees it, one bound in another network namespace (a container's), another name (a hard link) of a socket",
    "kernel (macOS): Seatbelt allows connecting only under the writable roots and to the allowed sockets",
    "interposer: refuses connect() with this reason (it judges by location: it cannot tell who bound a socket)",
    "limit: the fallback mode without namespaces hides none (Landlock has no right for connecting)",
];
const EXEC_LAYERS: &[&str] = &[
    "interposer: exec*, posix_spawn, system and popen are matched against exec.block",
    "shims (with --shims): the command's first word, if it is shimmed",
    "adversary: reviews commands the rules allow, when [adversary] is configured",
    "kernel: does not match command lines; it still confines whatever the command does",
];

/// `ADDR:PORT`, `[V6]:PORT`, or a bare port on 127.0.0.1.
fn listen_addr(s: &str) -> anyhow::Result<std::net::SocketAddr> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| {
        UsageError(format!(
            "{s:?} is no listening address: write 127.0.0.1:8000, [::1]:8000 or a port"
        ))
        .into()
    })
}

/// `p` with a leading `~` (alone or before a `/`) read as the home directory, however
/// the shell quoted it: `'~/.ssh/id_rsa'` names the same file as `~/.ssh/id_rsa`.
fn home_expanded(p: &Path) -> anyhow::Result<PathBuf> {
    let mut parts = p.components();
    match parts.next() {
        Some(std::path::Component::Normal(first)) if first == "~" => {
            Ok(crate::config::home()?.join(parts.as_path()))
        }
        _ => Ok(p.to_path_buf()),
    }
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    let p = home_expanded(p)?;
    let p = if p.is_absolute() {
        p
    } else {
        std::env::current_dir()?.join(p)
    };
    Ok(sandpit_policy::path::resolve_existing(&p))
}

pub fn execute(args: Args) -> anyhow::Result<i32> {
    if let Some(run) = &args.run {
        return crate::cli::log::explain_run(run, &args.what, args.json);
    }
    let cmd = match &args.what {
        What::Exec { argv } => argv.first().map(String::as_str),
        _ => None,
    };
    let loaded = load(&args.policy, cmd, scratch_root().join("RUN"))?;
    // The policy a run enforces (`run::effective`): on Linux the namespace mode adds
    // the run's private /tmp and /dev/shm (writable, the run's own), as `sandpit
    // run` does.
    #[cfg(target_os = "linux")]
    let private_tmp = crate::run::plan::private_tmp(crate::run::linux::start_mode());
    #[cfg(not(target_os = "linux"))]
    let private_tmp = false;
    let mut policy = crate::run::effective(loaded.policy.clone(), private_tmp, false);
    // Startup and `.env` files with secrets: copies where the run has a mount
    // namespace, else unreadable, as the run plan decides.
    let scrubbed = match &args.what {
        What::Read { .. } | What::Write { .. } => {
            crate::run::plan::scrub(&mut policy, private_tmp).copies
        }
        _ => vec![],
    };
    let p = &policy;
    // The machine's own addresses, as the run's proxy and UDP relay read them.
    let own = crate::service::own::addrs().map_err(anyhow::Error::msg)?;
    #[allow(unused_mut)]
    let mut reached: Option<String> = None;
    let (subject, verdicts, layers): (String, Vec<Verdict>, &[&str]) = match &args.what {
        What::Read { path, spawned } | What::Write { path, spawned } => {
            let abs = absolute(path)?;
            let write = matches!(args.what, What::Write { .. });
            let v = decide(p, &Request::path(&abs, write, *spawned));
            if !spawned {
                let by_spawned = decide(p, &Request::path(&abs, write, true));
                if by_spawned.decision != v.decision {
                    reached = Some(format!(
                        "for the agent; a command it spawns: {} (--spawned)",
                        by_spawned.reason
                    ));
                }
            }
            let real = std::fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
            if !v.is_denied() && scrubbed.iter().any(|c| c.path == real) {
                reached = Some(
                    "what is read is a read-only copy without its withheld variables and secrets (docs/run.md)"
                        .into(),
                );
            }
            let (verb, by) = (
                if write { "write" } else { "read" },
                if *spawned {
                    " by a spawned command"
                } else {
                    ""
                },
            );
            (
                format!("{verb} {}{by}", abs.display()),
                vec![v],
                FILE_LAYERS,
            )
        }
        What::Connect { host, program } => {
            let (h, port) =
                parse_authority(host).map_err(|e| UsageError(format!("{host:?}: {e}")))?;
            let port = port.unwrap_or(443);
            let program = program.as_deref().map(program_path).transpose()?;
            let mut vs = vec![sandpit_policy::decide_connect_by(
                p,
                &h,
                port,
                program.as_ref(),
                &own,
            )];
            reached = crate::run::would_ask(p, &h, port, &vs[0]);
            if program.is_none() {
                let limits: Vec<String> = p
                    .network
                    .program
                    .iter()
                    .filter(|r| r.value.names(&h, port))
                    .map(|r| {
                        format!(
                            "{:?} ({}): {}",
                            r.value.name,
                            r.origin.location(),
                            r.value.programs.join(", ")
                        )
                    })
                    .collect();
                if !limits.is_empty() {
                    let only = format!(
                        "only some programs may reach it (network.program {}); pass --program PATH to judge one",
                        limits.join("; ")
                    );
                    reached = Some(match reached {
                        Some(r) => format!("{r}; {only}"),
                        None => only,
                    });
                }
            }
            // For a name the policy maps itself, also judge the address it resolves to.
            if let (Host::Name(n), true) = (&h, vs[0].is_allowed()) {
                if let Some(r) = p.network.resolve.iter().find(|r| &r.value.name == n) {
                    for a in &r.value.addrs {
                        vs.push(check_resolved(p, &h, port, *a, &own));
                    }
                }
            }
            #[cfg(target_os = "linux")]
            if let Some(how) = crate::sandbox::linux::loopback::how_reached(p, &h, port) {
                reached = Some(how);
            }
            // A credential's host: TLS is terminated there, and which secrets go in.
            if let Host::Name(n) = &h {
                let names: Vec<String> = p
                    .credentials
                    .iter()
                    .filter(|c| c.hosts.iter().any(|x| x == n))
                    .map(|c| format!("credentials.{} ({})", c.name, c.origin.location()))
                    .collect();
                if !names.is_empty() {
                    let t = format!(
                        "TLS terminated by sandpit's proxy (a per-run CA); the real value of {} replaces its sentinel in requests here",
                        names.join(", ")
                    );
                    reached = Some(match reached {
                        Some(r) => format!("{r}; {t}"),
                        None => t,
                    });
                }
            }
            let from = program
                .as_ref()
                .map_or_else(String::new, |p| format!(" from {}", p.path.display()));
            (format!("connect {h}:{port}{from}"), vs, NET_LAYERS)
        }
        What::Http { method, url } => {
            let bad = || {
                UsageError(format!(
                    "{url:?} is no URL: write http://HOST[:PORT]/PATH or https://…"
                ))
            };
            let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
            let scheme = scheme.to_ascii_lowercase();
            if scheme != "http" && scheme != "https" {
                return Err(bad().into());
            }
            let cut = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, target) = rest.split_at(cut);
            let target = if target.starts_with('/') {
                target.to_string()
            } else {
                format!("/{target}")
            };
            let (h, port) =
                parse_authority(authority).map_err(|e| UsageError(format!("{url:?}: {e}")))?;
            let port = port.unwrap_or(if scheme == "https" { 443 } else { 80 });
            let method = method.to_ascii_uppercase();
            let mut vs = vec![sandpit_policy::decide::decide_connect(p, &h, port, &own)];
            let terminated = matches!(&h, Host::Name(n) if p.inject_host(n));
            if scheme == "http" || terminated {
                vs.push(decide(
                    p,
                    &Request::Http {
                        method: &method,
                        scheme: &scheme,
                        host: &h.to_string(),
                        port,
                        target: &target,
                    },
                ));
            } else {
                reached = Some(format!(
                    "TLS to {h} is the client's own (no credential names the host): the proxy decides the host, not the method or path"
                ));
            }
            (
                format!("http {method} {scheme}://{h}:{port}{target}"),
                vs,
                NET_LAYERS,
            )
        }
        What::Udp { addr } => {
            let a: std::net::SocketAddr = addr.parse().map_err(|_| {
                UsageError(format!(
                    "{addr:?} is no UDP destination: write an address and port, 1.2.3.4:443 or [2001:db8::1]:443"
                ))
            })?;
            (
                format!("udp {a}"),
                vec![sandpit_policy::decide_datagram(p, a, &own)],
                UDP_LAYERS,
            )
        }
        What::Env { name, program } => {
            let abs = program.as_deref().map(absolute).transpose()?;
            let to = match &abs {
                Some(p) => sandpit_policy::EnvTo::Spawned(p),
                None => sandpit_policy::EnvTo::Command,
            };
            let subject = match &abs {
                Some(p) => format!("env {name} to {}", p.display()),
                None => format!("env {name}"),
            };
            (
                subject,
                vec![decide(p, &Request::Env { name, to })],
                ENV_LAYERS,
            )
        }
        What::Listen { addr } => {
            let a = listen_addr(addr)?;
            (
                format!("listen {a}"),
                vec![decide(p, &Request::Listen(a))],
                LISTEN_LAYERS,
            )
        }
        What::Unix { path } => {
            let abs = absolute(path)?;
            #[cfg(target_os = "linux")]
            let host = crate::sandbox::linux::sockets::is_bound(&abs);
            #[cfg(not(target_os = "linux"))]
            let host = false;
            (
                format!("unix {}", abs.display()),
                vec![decide(p, &Request::Unix { path: &abs, host })],
                UNIX_LAYERS,
            )
        }
        What::Exec { argv } => (
            format!("exec {}", argv.join(" ")),
            vec![decide(p, &Request::Exec(argv))],
            EXEC_LAYERS,
        ),
    };
    let overall = if verdicts.iter().any(|v| v.decision == Decision::Deny) {
        Decision::Deny
    } else if verdicts.iter().any(|v| v.decision == Decision::Review) {
        Decision::Review
    } else {
        Decision::Allow
    };
    if args.json {
        let v = serde_json::json!({
            "request": subject,
            "decision": overall,
            "verdicts": verdicts,
            "profile": loaded.profile,
            "layers": layers,
            "reached": reached,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let word = match overall {
            Decision::Allow => "ALLOW",
            Decision::Deny => "DENY",
            Decision::Review => "REVIEW",
        };
        println!("{word}  {subject}");
        for v in &verdicts {
            match &v.rule {
                Some(r) => println!("  rule:   {r}"),
                None => println!("  rule:   (none: the default for this kind of request)"),
            }
            println!("  reason: {}", v.reason);
        }
        if let Some(how) = &reached {
            println!("  reached: {how}");
        }
        println!("  enforced by:");
        for l in layers {
            println!("    - {l}");
        }
    }
    Ok(exit_code(overall))
}

/// The exit status of a verdict, as `test` and `git check-ignore` answer: 0 when the
/// operation is allowed, 1 when it is not (denied, or left to the reviewer); a usage
/// error is 2 (`cli::main`).
fn exit_code(d: Decision) -> i32 {
    match d {
        Decision::Allow => 0,
        Decision::Deny | Decision::Review => 1,
    }
}
