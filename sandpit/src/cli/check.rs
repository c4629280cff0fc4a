//! `sandpit check -- BIN`: what a run of BIN would get — the binary the kernel
//! really executes, whether the interposer loads into it, which kernel layer this
//! machine offers, the mode, and what falls through to which layer.
use anyhow::Context as _;

use crate::config::{load, scratch_root, PolicyArgs};
use crate::inspect::{self, choose_mode, Host, Inspection, Mode, ModeChoice};
use crate::sandbox::macos::seatbelt;
use crate::sandbox::KernelSupport;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also print the Seatbelt (macOS) profile the policy compiles to, with its
    /// parameters, as `/usr/bin/sandbox-exec` would take them. Works on any OS.
    #[arg(long)]
    pub seatbelt: bool,
    /// The proxy port written into the printed Seatbelt profile (`sandpit run`
    /// picks its own at run time).
    #[arg(
        long,
        value_name = "PORT",
        default_value_t = 8877,
        requires = "seatbelt"
    )]
    pub proxy_port: u16,
    /// Print the profile with the GUI allowance, as `sandpit run --gui` (and a
    /// wrapped app) gets it.
    #[arg(long, requires = "seatbelt")]
    pub gui: bool,
    /// The control socket written into the printed Seatbelt profile.
    #[arg(long, value_name = "PATH", requires = "seatbelt")]
    pub control_socket: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The command to check (only the program is inspected).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

#[derive(Debug, serde::Serialize)]
struct Report<'a> {
    inspection: &'a Inspection,
    kernel_support: &'a KernelSupport,
    #[serde(flatten)]
    choice: &'a ModeChoice,
    #[serde(skip_serializing_if = "Option::is_none")]
    seatbelt: Option<SeatbeltReport>,
    /// How the host's loopback services are reached and what allow_local_binding does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    loopback: Vec<String>,
    /// The process limit the kernel layer sets (`limits.processes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<String>,
    /// Where UDP goes, and whether unrestricted mode's relay can be set up here.
    #[serde(skip_serializing_if = "Option::is_none")]
    udp: Option<String>,
    /// The programs the requested one starts as the agent itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    agent_programs: Vec<inspect::AgentProgram>,
    /// The `mode:` line: the layers `sandpit run` of this program would start, as
    /// `sandpit plan` says them (shims and the adversary only where configured).
    mode_line: String,
}

/// The layers a run would start: the mode's kernel and interposition, then the
/// shims and the adversary as the policy has them (the run plan's `shims` is
/// `sandpit run --shims` or `shims.enabled`; the adversary is `[adversary]`), and
/// what turns on those that are off.
fn mode_line(c: &ModeChoice, policy: Option<&sandpit_policy::Policy>) -> String {
    let mut layers = match c.mode {
        Mode::Full => vec!["kernel", "interposition"],
        Mode::Kernel => vec!["kernel"],
        Mode::Refuse => {
            return "refused: no kernel layer (runs only with the explicit degraded flag)".into()
        }
    };
    let mut off = vec![];
    if c.mode == Mode::Kernel {
        off.push("no interposition");
    }
    match policy {
        Some(p) => {
            if p.shims.enabled {
                layers.push("shims");
            } else {
                off.push("shims off (`sandpit run --shims` adds them)");
            }
            if p.adversary.is_some() {
                layers.push("adversary");
            } else {
                off.push("no adversary ([adversary] configures one)");
            }
        }
        None => off.push("shims and adversary unknown: the policy did not load"),
    }
    let name = if c.mode == Mode::Full {
        "full"
    } else {
        "kernel"
    };
    let mut line = format!("{name} ({})", layers.join(" + "));
    for o in off {
        line.push_str("; ");
        line.push_str(o);
    }
    line
}

/// Where UDP goes under `policy` (Linux), and for unrestricted mode whether its relay's
/// TUN device can be made here: the control device opened (and closed, no device made).
#[cfg(target_os = "linux")]
fn udp_line(policy: &sandpit_policy::Policy) -> String {
    let mode = &policy.network.mode;
    if mode.value != sandpit_policy::NetMode::Unrestricted {
        return format!(
            "to sandpit's DNS responder only (network.mode = {:?}, {})",
            mode.value.as_str(),
            mode.origin.location()
        );
    }
    let reviewed = policy
        .adversary
        .as_ref()
        .is_some_and(|a| a.review.contains(&sandpit_policy::ReviewEvent::Network));
    if reviewed {
        return "to sandpit's DNS responder only: adversary.review includes \"network\", and the reviewer sees only the proxy's connections".into();
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
    {
        Ok(_) => format!(
            "to public addresses, relayed from a TUN device in the sandbox (network.mode = \"unrestricted\", {})",
            mode.origin.location()
        ),
        Err(e) => format!(
            "network.mode = \"unrestricted\" ({}) relays UDP from a TUN device, and /dev/net/tun cannot be opened here ({e}): runs start without the relay, UDP refused as in network.mode = \"filtered\"; make it readable and writable (mode 0666, as most distributions have it) to relay it",
            mode.origin.location()
        ),
    }
}

/// What the policy asks of the kernel layer beyond files (Linux): the loopback lines,
/// the process limit and where UDP goes.
fn policy_lines(
    args: &CheckArgs,
    program: &str,
    kernel: &crate::sandbox::KernelSupport,
) -> (Vec<String>, Option<String>, Option<String>) {
    #[cfg(target_os = "linux")]
    return match load(&args.policy, Some(program), scratch_root().join("RUN")) {
        Ok(l) => {
            let n = &l.policy.limits.processes;
            let void = crate::sandbox::linux::process_limit_void(kernel.user_namespaces);
            let limit = match (n.value, void) {
                (0, _) => format!(
                    "no process limit (limits.processes = 0, {})",
                    n.origin.location()
                ),
                (_, Some(why)) => format!(
                    "no process limit: {why} (limits.processes, {})",
                    n.origin.location()
                ),
                (v, None) => format!(
                    "at most {v} processes and threads in the sandbox (limits.processes, {})",
                    n.origin.location()
                ),
            };
            let m = &l.policy.limits.memory;
            let memory = match (m.value, crate::sandbox::linux::memory::probe()) {
                (0, _) => "no memory limit (limits.memory = 0".to_string(),
                (v, Ok(_)) if kernel.user_namespaces => format!(
                    "memory at most {} for the run (cgroup; limits.memory",
                    crate::sandbox::linux::memory::size(v)
                ),
                (v, why) => format!(
                    "at most {} of data per process (RLIMIT_DATA, no cgroup: {}; limits.memory",
                    crate::sandbox::linux::memory::size(v),
                    why.err().unwrap_or_else(|| "no namespaces".into())
                ),
            };
            (
                crate::sandbox::linux::loopback::describe(&l.policy),
                Some(format!(
                    "{limit}; {memory}, {}); when memory runs out the sandbox is killed first (oom_score_adj 1000)",
                    m.origin.location()
                )),
                Some(udp_line(&l.policy)),
            )
        }
        Err(e) => (vec![format!("the policy does not load: {e}")], None, None),
    };
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (args, program, kernel);
        (vec![], None, None)
    }
}

#[derive(Debug, serde::Serialize)]
struct SeatbeltReport {
    sbpl: String,
    params: Vec<(String, String)>,
    sandbox_exec_args: Vec<String>,
}

fn seatbelt_report(args: &CheckArgs, program: &str) -> anyhow::Result<SeatbeltReport> {
    let loaded = load(&args.policy, Some(program), scratch_root().join("RUN"))?;
    let command: Vec<std::ffi::OsString> = args.command.iter().map(Into::into).collect();
    let offline = loaded.policy.network.mode.value == sandpit_policy::NetMode::Offline;
    let control = (args.control_socket.as_deref()).map(sandpit_policy::path::resolve_existing);
    let input = crate::run::plan::seatbelt_input(&loaded.policy, !offline, &command, args.gui)?
        .bind(Some(args.proxy_port), None, control, []);
    let profile = seatbelt::compile(&input)?;
    Ok(SeatbeltReport {
        sandbox_exec_args: profile.sandbox_exec_args(),
        sbpl: profile.sbpl,
        params: profile.params,
    })
}

pub fn run(args: CheckArgs) -> anyhow::Result<i32> {
    let program = args
        .command
        .first()
        .context("sandpit check: no command given")?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let cwd = std::env::current_dir().context("sandpit check: current directory")?;
    let inspection = match inspect::inspect(program, &path, &cwd, Host::current()) {
        Ok(i) => i,
        Err(e @ inspect::Error::NotFound { .. }) => {
            eprintln!("sandpit check: {e}");
            return Ok(super::EXIT_USAGE);
        }
        Err(e) => return Err(e).context("sandpit check"),
    };
    let kernel = crate::sandbox::probe();
    let choice = choose_mode(&inspection, &kernel);
    let seatbelt = if args.seatbelt {
        Some(seatbelt_report(&args, program)?)
    } else {
        None
    };
    let (loopback, limits, udp) = policy_lines(&args, program, &kernel);
    let loaded = load(&args.policy, Some(program), scratch_root().join("RUN")).ok();
    let agents = loaded
        .as_ref()
        .map(|l| inspect::agent_programs(&inspection, &l.policy))
        .unwrap_or_default();
    let mode = mode_line(&choice, loaded.as_ref().map(|l| &l.policy));
    if args.json {
        let report = Report {
            inspection: &inspection,
            kernel_support: &kernel,
            choice: &choice,
            seatbelt,
            loopback,
            limits,
            udp,
            agent_programs: agents,
            mode_line: mode,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", human(&inspection, &kernel, &choice, &mode));
        for a in &agents {
            let held = if a.interposition {
                "every layer holds it"
            } else {
                "the interposer cannot load into it: the kernel layer and the proxy hold \
                 it, and the interposer what it spawns; the variables it keeps \
                 (env.agent) reach those commands"
            };
            println!(
                "{:<15}{} ({}): {held}",
                "agent program:",
                a.path.display(),
                a.format
            );
        }
        for l in &loopback {
            println!("{:<15}{l}", "loopback:");
        }
        if let Some(l) = &limits {
            println!("{:<15}{l}", "limits:");
        }
        if let Some(l) = &udp {
            println!("{:<15}{l}", "udp:");
        }
        if let Some(sb) = seatbelt {
            println!("\nseatbelt profile (proxy port {}):", args.proxy_port);
            print!("{}", sb.sbpl);
            println!("\nseatbelt parameters:");
            for (k, v) in &sb.params {
                println!("  {k}={v}");
            }
        }
    }
    Ok(0)
}

fn describe_kernel(i: &Inspection, k: &KernelSupport) -> String {
    match i.host.os {
        inspect::Os::Linux => {
            let ll = match k.landlock_abi {
                Some(v) => format!("Landlock ABI {v}"),
                None => "Landlock unavailable".into(),
            };
            format!(
                "{ll}; user namespaces {}; seccomp {}",
                if k.user_namespaces { "yes" } else { "no" },
                if k.seccomp { "yes" } else { "no" }
            )
        }
        inspect::Os::Macos => {
            if k.seatbelt {
                "Seatbelt".into()
            } else {
                "Seatbelt unavailable".into()
            }
        }
        inspect::Os::Other => "none on this operating system".into(),
    }
}

fn human(i: &Inspection, k: &KernelSupport, c: &ModeChoice, mode: &str) -> String {
    let mut out = String::new();
    let line = |out: &mut String, label: &str, text: &str| {
        out.push_str(&format!("{label:<15}{text}\n"));
    };
    line(
        &mut out,
        "binary:",
        &format!("{} ({})", i.binary.display(), i.format.describe()),
    );
    for hop in &i.shebangs {
        let shebang = match &hop.argument {
            Some(a) => format!("#!{} {a}", hop.interpreter.display()),
            None => format!("#!{}", hop.interpreter.display()),
        };
        let via = match &hop.resolved_via_env {
            Some(r) => format!(
                "{}: {shebang} → {} (launched directly, not through env)",
                hop.script.display(),
                r.display()
            ),
            None => format!("{}: {shebang}", hop.script.display()),
        };
        line(&mut out, "  script:", &via);
    }
    if i.launch.len() > 1 {
        let argv: Vec<String> = i.launch.iter().map(|p| p.display().to_string()).collect();
        line(&mut out, "  launched as:", &argv.join(" "));
    }
    for n in &i.notes {
        line(&mut out, "  note:", n);
    }
    if c.interposition {
        line(&mut out, "interposition:", "supported");
    } else {
        line(&mut out, "interposition:", "not supported");
    }
    for r in &c.reasons {
        line(&mut out, "  because:", r);
    }
    line(&mut out, "kernel layer:", &describe_kernel(i, k));
    line(&mut out, "mode:", mode);
    for f in &c.fallthrough {
        line(
            &mut out,
            "falls through:",
            &format!("{} → {}", f.what, f.covered_by),
        );
    }
    out
}
