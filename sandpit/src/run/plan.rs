//! The run plan: every decision about one run, made once and without side effects
//! (it reads the filesystem, the environment and the program; it makes, binds and
//! starts nothing). Every layer of the run is configured from it, and `explain`
//! judges with the same effective policy ([`effective`]).
use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Result};
use sandpit_policy::{NetMode, Policy, ReviewEvent};

use super::Request;

/// What the plan depends on that is not configuration: the machine, and the paths
/// and ports the run has chosen (not yet made) for itself.
pub struct Facts<'a> {
    pub support: &'a crate::sandbox::KernelSupport,
    /// The Linux kernel layer's mode (namespaces, or the Landlock-only fallback).
    #[cfg(target_os = "linux")]
    pub mode: crate::sandbox::linux::Mode,
    /// The launcher's current directory, canonical.
    pub cwd: PathBuf,
    /// The run's directory `<state>/run/<id>/` (the snapshot, the sockets the layers
    /// report to; read-only inside).
    pub run_dir: PathBuf,
    /// The port the proxy appears on inside the sandbox.
    pub proxy_port: u16,
}

/// Whether the interposer goes into the command, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interposition {
    On,
    Off(String),
}

/// Whose proxy the run's connections go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proxy {
    /// None: the network is off.
    None,
    /// sandpit's own, on these unix sockets (proxy, DNS responder), bound at start.
    Own { socket: PathBuf, dns: PathBuf },
    /// Someone else's (`--proxy-socket`, `--dns-socket`).
    External {
        socket: PathBuf,
        dns: Option<PathBuf>,
    },
}

/// Everything one run does, decided before anything is made.
pub struct RunPlan {
    /// The one effective policy: built-in default, profile, user, project and flags,
    /// then git's and other VCS' protected files, the package caches, the private
    /// /tmp and learn mode. Every layer is derived from it, nothing changes it after.
    pub policy: Policy,
    pub profile: Option<String>,
    pub sources: Vec<(sandpit_policy::Layer, String)>,
    pub command: Vec<OsString>,
    pub interposer: Interposition,
    /// Agent programs (behind a wrapper script) the interposer cannot enter.
    pub static_agent: Vec<PathBuf>,
    /// The kernel has Landlock (Linux), which hides `files.agent_read` from what the
    /// agent spawns.
    pub landlock: bool,
    /// What the kernel layer refuses alone is reported with its rule (Linux: the
    /// launcher's seccomp notifier, `sandbox/linux/notify.rs`): where a program of
    /// the run lacks the interposer, which would otherwise have reported it.
    pub kernel_refusals_reported: bool,
    pub shims: bool,
    pub proxy: Proxy,
    /// UDP to public addresses relayed by the launcher (`network.mode =
    /// "unrestricted"` without network review).
    pub udp_relay: bool,
    /// sandpit's package cache for this workspace, when granted.
    pub caches: Option<PathBuf>,
    /// Variables the command gets besides the layers' own: the caches', `env.set`'s.
    pub env: Vec<(String, String)>,
    /// This process's variables that never enter the sandbox.
    pub withheld: Vec<String>,
    /// `[credentials]`: the variables that hold sentinels, the run's CA.
    pub credentials: Option<crate::credentials::Plan>,
    /// What the agent's own configuration changed about its keys
    /// ([`crate::agentkeys::settle`]), said at start.
    pub notes: Vec<String>,
    /// The filtering SSH agent (`sshagent/`), when the run has one.
    pub ssh_agent: Option<crate::sshagent::Plan>,
    /// An agent's state directories the run makes on a fresh home, top first, each
    /// with the `files.allow_write` entry that wants it.
    pub state_dirs: Vec<(PathBuf, String)>,
    /// Shell startup files and `.env` files with secrets to take out: shown as
    /// scrubbed copies (Linux namespace mode), else unreadable (`files.block_read`
    /// entries of [`SCRUBBED`] in the policy).
    pub scrubbed: crate::scrub::Found,
    /// The Linux kernel layer's input.
    #[cfg(target_os = "linux")]
    pub kernel: crate::sandbox::linux::Input,
    /// The Seatbelt profile's input, but for the ports and sockets the run binds.
    #[cfg(target_os = "macos")]
    pub seatbelt: crate::sandbox::macos::seatbelt::Input,
}

/// The policy a run enforces, from the policy as loaded: learn mode from the flag,
/// and, where the kernel layer gives the run private `/tmp` and `/dev/shm` (Linux
/// namespace mode), writing there allowed as the kernel allows it. Not when HOME or
/// the state dir lies beneath (the kernel plan brings them back read-only there,
/// and an allow of the whole tmpfs would let the interposer pass writes the kernel
/// then refuses unexplained). `sandpit explain` judges with this same policy.
pub fn effective(loaded: Policy, private_tmp: bool, learn: bool) -> Policy {
    let mut p = loaded;
    p.learn = learn;
    crate::sshagent::effective(&mut p);
    if private_tmp {
        for dir in ["/tmp", "/dev/shm"] {
            let ctx = &p.context;
            if ctx.home.starts_with(dir) || ctx.state_dir.starts_with(dir) {
                continue;
            }
            let mut origin = sandpit_policy::Origin::builtin("files.allow_write", dir);
            origin.file = sandpit_policy::PRIVATE_TMPFS.into();
            p.files.allow_write.push(sandpit_policy::Rule {
                value: PathBuf::from(dir),
                origin,
            });
        }
    }
    p
}

/// The Seatbelt profile's input (macOS) for a run of `policy`, decided with the
/// rest of the plan: the policy's files, connections through sandpit's proxy
/// unless the plan has none (`proxy`), the run's scratch directory writable, and
/// with `gui` the allowance a desktop app needs (its bundle found from `command`).
/// The ports and the layers' sockets are the applier's, once bound
/// (`seatbelt::Input::bind`). `sandpit check --seatbelt` compiles the same input.
pub fn seatbelt_input(
    policy: &Policy,
    proxy: bool,
    command: &[OsString],
    gui: bool,
) -> Result<crate::sandbox::macos::seatbelt::Input> {
    use crate::sandbox::macos::{bundle, seatbelt};
    let mut input = seatbelt::Input::from_policy(policy, 0);
    if !proxy {
        input.network = seatbelt::Network::Offline;
    }
    let scratch = &policy.context.scratch;
    if !input.allow_write.contains(scratch) {
        input.allow_write.push(scratch.clone());
    }
    if gui {
        input.gui = Some(bundle::gui_allowance(command, &policy.context.home, |p| {
            !sandpit_policy::decide(policy, &sandpit_policy::Request::Write(p)).is_denied()
        })?);
    }
    Ok(input)
}

/// The origin file of the `files.block_read` entries a run adds for the startup
/// and `.env` files it would show scrubbed, where it cannot (no mount namespace).
pub const SCRUBBED: &str =
    "holds withheld variables or secrets, and without a mount namespace no scrubbed copy can be shown";

/// The origin file of the rule refusing the `.env` files past the run's bounded
/// search (`sandpit_policy::Files::dotenv_beyond`).
pub const DOTENV_BEYOND: &str = "the run's .env search stopped at its bound";

/// The origin file of the `files.block_write` entries a run adds for the files it
/// shows as scrubbed copies (read-only mounts).
pub const SCRUBBED_COPY: &str =
    "shown as a read-only copy without its withheld variables and secrets";

/// Whether the run shows scrubbed copies of files (a mount namespace), rather than
/// hiding those files.
pub fn shows_copies(facts: &Facts) -> bool {
    #[cfg(target_os = "linux")]
    return facts.mode == crate::sandbox::linux::Mode::Namespaces;
    #[cfg(not(target_os = "linux"))]
    {
        let _ = facts;
        false
    }
}

/// The startup and `.env` files of this run with secrets in them; hidden in
/// `policy` where the run cannot show copies (`copies` false). `sandpit explain`
/// judges with the policy this leaves.
pub fn scrub(policy: &mut Policy, copies: bool) -> crate::scrub::Found {
    let found = crate::scrub::discover(policy);
    if found.dotenv_walk_stopped {
        // The interposer refuses the `.env` files the search did not reach.
        let mut origin = sandpit_policy::Origin::builtin("files.dotenv", "**/.env");
        origin.file = DOTENV_BEYOND.into();
        policy.files.dotenv_beyond = Some(sandpit_policy::DotenvBeyond {
            origin,
            seen: found.dotenv_seen.clone(),
        });
    }
    if copies {
        // The copy is read-only: every layer says so, with this reason.
        for c in &found.copies {
            let mut origin =
                sandpit_policy::Origin::builtin("files.block_write", &c.path.to_string_lossy());
            origin.file = SCRUBBED_COPY.into();
            policy.files.block_write.push(sandpit_policy::Rule {
                value: c.path.clone(),
                origin,
            });
        }
    } else {
        for c in &found.copies {
            let mut origin =
                sandpit_policy::Origin::builtin("files.block_read", &c.path.to_string_lossy());
            origin.file = SCRUBBED.into();
            policy.files.block_read.push(sandpit_policy::Rule {
                value: c.path.clone(),
                origin,
            });
        }
    }
    found
}

/// Whether this platform's kernel layer gives the run a private `/tmp`.
#[cfg(target_os = "linux")]
pub fn private_tmp(mode: crate::sandbox::linux::Mode) -> bool {
    mode == crate::sandbox::linux::Mode::Namespaces
}

/// Plan a run of `req` under the configuration `loaded`.
pub fn plan(req: &Request, loaded: crate::config::Loaded, facts: &Facts) -> Result<RunPlan> {
    #[cfg(target_os = "linux")]
    let private = private_tmp(facts.mode);
    #[cfg(not(target_os = "linux"))]
    let private = false;
    let mut policy = effective(loaded.policy, private, req.audit.learn);
    // The agent's keys the command line points at a custom provider (aider's
    // `--openai-api-base`): bound, or left to the agent, as its configuration's.
    let mut notes = loaded.notes;
    if let Some(p) = loaded.profile.as_deref() {
        notes.extend(crate::agentkeys::settle_args(
            &mut policy,
            p,
            &req.command,
            &|v| std::env::var_os(v).and_then(|x| x.into_string().ok()),
        ));
    }
    let ssh_agent = crate::sshagent::plan(&mut policy, &facts.run_dir);
    crate::timing::mark("policy made effective");
    let scrubbed = scrub(&mut policy, shows_copies(facts));
    crate::timing::mark("startup and .env files looked through");
    let policy = policy;
    let reviewed = policy
        .adversary
        .as_ref()
        .is_some_and(|a| a.review.contains(&ReviewEvent::Network));
    // Loopback services are relayed straight to the host port, past the proxy where
    // the reviewer sits: asking for network review with them would review nothing
    // for those connections.
    #[cfg(target_os = "linux")]
    {
        let direct = crate::sandbox::linux::loopback::services(&policy);
        if reviewed && !direct.is_empty() {
            let entries: Vec<&str> = direct.iter().map(|l| l.entry.as_str()).collect();
            bail!(
                "adversary.review includes \"network\", but the loopback services in \
                 network.allow ({}) are relayed directly to this machine's port, where the \
                 reviewer does not see them; the command was not started. Remove them from \
                 network.allow or \"network\" from adversary.review",
                entries.join(", ")
            );
        }
    }
    if cfg!(target_os = "macos") && (req.proxy_socket.is_some() || req.dns_socket.is_some()) {
        bail!("--proxy-socket and --dns-socket are not supported on macOS (no network bridge)");
    }
    if req.proxy_socket.is_none() && req.dns_socket.is_some() {
        bail!("--dns-socket needs --proxy-socket (sandpit's own proxy has its own resolver)");
    }

    // The program, inspected as `sandpit check` does: the interposer unless it cannot
    // load there (static, foreign loader, Go, …) or the user chose --kernel-only. A
    // program that cannot be inspected (not found) gets the interposer: the stricter
    // choice; the exec then fails on its own.
    let inspection = req.command.first().and_then(|c| c.to_str()).and_then(|p| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        crate::inspect::inspect(p, &path, &facts.cwd, crate::inspect::Host::current()).ok()
    });
    let interposer = if req.kernel_only {
        Interposition::Off("--kernel-only".into())
    } else {
        match inspection
            .as_ref()
            .map(|i| crate::inspect::choose_mode(i, facts.support))
        {
            Some(c) if !c.interposition => Interposition::Off(c.reasons.join("; ")),
            _ => Interposition::On,
        }
    };
    let static_agent: Vec<PathBuf> = inspection
        .as_ref()
        .map(|i| {
            crate::inspect::agent_programs(i, &policy)
                .into_iter()
                .filter(|a| !a.interposition)
                .map(|a| a.path)
                .collect()
        })
        .unwrap_or_default();
    // SANDPIT_KERNEL_REPORTS=1 turns the reports on for every run, =0 off (the
    // benchmark's A/B, bench/kernel_reports.sh); they cost a round trip to the
    // launcher on every path call, which the interposer's own reports make moot.
    let kernel_refusals_reported = cfg!(target_os = "linux")
        && match std::env::var("SANDPIT_KERNEL_REPORTS").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => matches!(interposer, Interposition::Off(_)) || !static_agent.is_empty(),
        };

    let proxy = match (&req.proxy_socket, policy.network.mode.value) {
        (Some(s), _) => Proxy::External {
            socket: std::path::absolute(s)?,
            dns: req
                .dns_socket
                .as_deref()
                .map(std::path::absolute)
                .transpose()?,
        },
        // Filtered and unrestricted alike: every connection goes through the proxy,
        // which lifts host filtering for the latter and nothing else.
        (None, NetMode::Offline) => Proxy::None,
        (None, _) => {
            let (_, socket, dns) = crate::launch::socket_paths(&policy.context.scratch);
            Proxy::Own { socket, dns }
        }
    };
    // What only sandpit's own proxy can do: enforce `https://` rules (it
    // terminates TLS for the credentials' hosts alone), review connections, put
    // the credentials' real values in.
    if let Some(r) = policy.unenforceable_http() {
        return Err(crate::launch::LaunchError::Http(r.origin.to_string()).into());
    }
    let own_proxy = matches!(proxy, Proxy::Own { .. });
    if reviewed
        && matches!(proxy, Proxy::External { .. })
        && policy.network.mode.value != NetMode::Offline
    {
        return Err(crate::launch::LaunchError::Adversary(
            "adversary.review includes \"network\", but connections do not go through \
             sandpit's proxy (--proxy-socket names another)"
                .into(),
        )
        .into());
    }
    let credentials = crate::credentials::Plan::new(&policy, &facts.run_dir, own_proxy)?;
    // Not with network review: the reviewer sees only the proxy's connections
    // (`sandpit_policy::decide_datagram` refuses UDP then).
    let udp_relay =
        policy.network.mode.value == NetMode::Unrestricted && !reviewed && proxy != Proxy::None;

    #[cfg(target_os = "linux")]
    let caches = crate::caches::granted(&policy).then(|| crate::caches::dir(&policy.context));
    #[cfg(not(target_os = "linux"))]
    let caches: Option<PathBuf> = None;
    // `env.set`'s variables, then the package cache's, which replace any of the
    // same name: the cache is the one directory of its kind the sandbox may write.
    // (The loader refused the names the launcher sets later.)
    let mut env: Vec<(String, String)> = (policy.env.set.iter())
        .map(|r| (r.value.name.clone(), r.value.value.clone()))
        .collect();
    for (k, v) in caches
        .as_deref()
        .map(crate::caches::env)
        .unwrap_or_default()
    {
        crate::launch::set_env(&mut env, k, v);
    }
    let state_dirs = crate::launch::state_dirs(&policy);
    let shims = req.shims || policy.shims.enabled;

    #[cfg(target_os = "linux")]
    let kernel = {
        let will_exist: Vec<PathBuf> = caches
            .iter()
            .cloned()
            .chain(state_dirs.iter().map(|(d, _)| d.clone()))
            .collect();
        let bridge = match &proxy {
            Proxy::None => None,
            Proxy::Own { socket, dns } => {
                Some((socket.clone(), facts.proxy_port, Some(dns.clone())))
            }
            Proxy::External { socket, dns } => {
                Some((socket.clone(), facts.proxy_port, dns.clone()))
            }
        };
        super::input::plan_input(
            &policy,
            facts.mode,
            bridge,
            udp_relay,
            facts.cwd.clone(),
            &will_exist,
            &facts.run_dir,
        )?
    };

    #[cfg(target_os = "macos")]
    let seatbelt = seatbelt_input(&policy, proxy != Proxy::None, &req.command, req.gui)?;

    // Once: the kernel input lists the same variables (`launch::withheld_env`).
    #[cfg(target_os = "linux")]
    let withheld = kernel.env_withheld.clone();
    #[cfg(not(target_os = "linux"))]
    let withheld = crate::launch::withheld_env(&policy);
    Ok(RunPlan {
        withheld,
        policy,
        profile: loaded.profile,
        sources: loaded.sources,
        command: req.command.clone(),
        interposer,
        static_agent,
        landlock: cfg!(target_os = "linux") && facts.support.landlock_abi.is_some(),
        kernel_refusals_reported,
        shims,
        proxy,
        udp_relay,
        caches,
        env,
        credentials,
        notes,
        ssh_agent,
        state_dirs,
        scrubbed,
        #[cfg(target_os = "linux")]
        kernel,
        #[cfg(target_os = "macos")]
        seatbelt,
    })
}

impl RunPlan {
    /// What `files.agent_read` comes to in this run, for its layers line: the
    /// interposer tells the agent from the commands it spawns (and has the kernel
    /// hide the files from those, `sandpit-dylib`'s `hide`); without it nothing can.
    pub fn agent_files(&self) -> Option<String> {
        let files = &self.policy.files.agent_read;
        if files.is_empty() {
            return None;
        }
        let list: Vec<&str> = files.iter().map(|r| r.origin.entry.as_str()).collect();
        let list = list.join(", ");
        let every = |why: &str| {
            format!("weaker: {list} (files.agent_read) readable by every process of the run: {why}")
        };
        Some(if cfg!(not(target_os = "linux")) {
            every("this system cannot tell the agent from the commands it spawns")
        } else if let Some(why) = self.interposer_off() {
            every(&format!(
                "without the interposer ({why}) the agent cannot be told from the commands it spawns"
            ))
        } else if !self.landlock {
            format!("weaker: {list} (files.agent_read) hidden from what the agent spawns by the interposer alone: without Landlock a static program or a raw system call reads them")
        } else if !self.static_agent.is_empty() {
            format!("{list} for the agent only (files.agent_read), but for a static program its static agent program starts itself")
        } else {
            // A bare name (gemini's `node`) makes any such program the agent starts
            // itself (an MCP server) the agent too.
            let named: Vec<&str> = (self.policy.env.agent_programs.iter())
                .map(|r| r.value.as_str())
                .filter(|v| !v.contains('/'))
                .collect();
            match named.is_empty() {
                true => format!("{list} for the agent only (files.agent_read)"),
                false => format!(
                    "{list} for the agent only (files.agent_read), and for every {} the agent starts itself (env.agent_programs)",
                    named.join(", ")
                ),
            }
        })
    }

    /// Whether the scrubbed files are shown as copies (else they are unreadable).
    pub fn scrubbed_shown(&self) -> bool {
        !(self.policy.files.block_read.iter()).any(|r| r.origin.file == SCRUBBED)
    }

    /// The start-up line's part for the files shown without their secrets, `None`
    /// when there are none and the `.env` search went through.
    pub fn scrubbed_line(&self) -> Option<String> {
        let found = &self.scrubbed;
        let stopped = found.dotenv_walk_stopped.then(|| {
            format!(
                ".env search stopped after {} entries: .env files further in are refused to dynamic programs (a static one reads them)",
                crate::scrub::DOTENV_WALK
            )
        });
        let n = found.copies.len();
        let files = (n > 0).then(|| {
            let s = if n == 1 { "" } else { "s" };
            match self.scrubbed_shown() {
                true => format!("{n} startup or .env file{s} shown without withheld variables and secrets"),
                false => format!("weaker: {n} startup or .env file{s} holding withheld variables or secrets unreadable (no mount namespace to show a scrubbed copy in)"),
            }
        });
        match (files, stopped) {
            (None, None) => None,
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        }
    }

    /// Why the interposer stays out, `None` when it goes in.
    pub fn interposer_off(&self) -> Option<&str> {
        match &self.interposer {
            Interposition::On => None,
            Interposition::Off(why) => Some(why),
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::sandbox::linux::{Mode, Network};
    use clap::Parser;
    use std::path::Path;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: Request,
    }

    fn request(args: &[&str]) -> Request {
        let argv = ["sandpit"].iter().chain(args).chain(&["--", "true"]);
        Cli::try_parse_from(argv).unwrap().run
    }

    /// A home, workspace and state directory in a temporary directory, outside /tmp's
    /// private-tmpfs rule (the temporary directory may lie under /tmp: `home_in`).
    struct Home {
        _dir: tempfile::TempDir,
        ctx: sandpit_policy::Context,
    }

    fn home_in(base: &Path) -> Home {
        let dir = tempfile::tempdir_in(base).unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ctx = sandpit_policy::Context {
            home: root.join("home"),
            workspace: root.join("home/project"),
            scratch: root.join("scratch/run-1"),
            state_dir: root.join("home/.sandpit"),
        };
        for d in [&ctx.workspace, &ctx.scratch, &ctx.state_dir] {
            std::fs::create_dir_all(d).unwrap();
        }
        Home { _dir: dir, ctx }
    }

    fn loaded(h: &Home, user: &str) -> crate::config::Loaded {
        let mut o = sandpit_policy::LoadOptions::new(h.ctx.clone());
        o.user = Some(sandpit_policy::Source::new(
            sandpit_policy::Layer::User,
            "test.toml",
            user,
        ));
        crate::config::Loaded {
            policy: sandpit_policy::load(&o).unwrap(),
            profile: None,
            sources: vec![],
            notes: vec![],
        }
    }

    const SUPPORT: crate::sandbox::KernelSupport = crate::sandbox::KernelSupport {
        landlock_abi: Some(7),
        user_namespaces: true,
        seccomp: true,
        seatbelt: false,
    };

    fn plan_of(h: &Home, user: &str, args: &[&str], mode: Mode) -> Result<RunPlan> {
        let facts = Facts {
            support: &SUPPORT,
            mode,
            cwd: h.ctx.workspace.clone(),
            run_dir: h.ctx.state_dir.join("run/RUN"),
            proxy_port: 3128,
        };
        plan(&request(args), loaded(h, user), &facts)
    }

    fn tmpfs_grants(p: &Policy) -> Vec<PathBuf> {
        p.files
            .allow_write
            .iter()
            .filter(|r| r.origin.file == sandpit_policy::PRIVATE_TMPFS)
            .map(|r| r.value.clone())
            .collect()
    }

    #[test]
    fn the_effective_policy_has_the_private_tmp_only_where_the_kernel_makes_it() {
        let h = home_in(Path::new("/var/tmp"));
        let p = loaded(&h, "").policy;
        assert_eq!(
            tmpfs_grants(&effective(p.clone(), true, false)),
            [PathBuf::from("/tmp"), PathBuf::from("/dev/shm")]
        );
        assert!(tmpfs_grants(&effective(p.clone(), false, false)).is_empty());
        assert!(effective(p.clone(), false, true).learn);
        assert!(!effective(p, false, false).learn);
        assert!(private_tmp(Mode::Namespaces));
        assert!(!private_tmp(Mode::LandlockOnly));
        // HOME under /tmp: the kernel brings it back read-only over the tmpfs, and
        // a grant of all of /tmp would let the interposer pass what the kernel refuses.
        let under = home_in(Path::new("/tmp"));
        let p = effective(loaded(&under, "").policy, true, false);
        assert_eq!(tmpfs_grants(&p), [PathBuf::from("/dev/shm")]);
        // The state directory alone under /tmp (SANDPIT's own there): the same.
        let mut p = loaded(&h, "").policy;
        p.context.state_dir = PathBuf::from("/tmp/sandpit-state");
        assert_eq!(
            tmpfs_grants(&effective(p, true, false)),
            [PathBuf::from("/dev/shm")]
        );
    }

    #[test]
    fn each_network_mode_chooses_its_proxy_and_relay_once() {
        let h = home_in(Path::new("/var/tmp"));
        let ns = Mode::Namespaces;
        let off = plan_of(&h, "[network]\nmode = \"offline\"\n", &[], ns).unwrap();
        assert_eq!(off.proxy, Proxy::None);
        assert!(!off.udp_relay);
        assert!(matches!(off.kernel.network, Network::Offline));

        let filtered = plan_of(&h, "", &[], ns).unwrap();
        let (_, socket, dns) = crate::launch::socket_paths(&h.ctx.scratch);
        assert_eq!(
            filtered.proxy,
            Proxy::Own {
                socket: socket.clone(),
                dns: dns.clone()
            }
        );
        assert!(!filtered.udp_relay);
        match &filtered.kernel.network {
            Network::Proxy {
                socket: s,
                port,
                dns_socket,
                udp,
                ..
            } => {
                assert_eq!(
                    (s, *port, dns_socket.as_ref(), *udp),
                    (&socket, 3128, Some(&dns), false)
                );
            }
            Network::Offline => panic!("filtered mode has a bridge"),
        }

        let open = plan_of(&h, "[network]\nmode = \"unrestricted\"\n", &[], ns).unwrap();
        assert!(open.udp_relay);
        assert!(matches!(
            open.kernel.network,
            Network::Proxy { udp: true, .. }
        ));

        // The reviewer sees only the proxy's connections: no UDP relay with it.
        let reviewed = "[network]\nmode = \"unrestricted\"\n[adversary]\nprovider = \"openai\"\nmodel = \"m\"\nreview = [\"network\"]\n";
        let r = plan_of(&h, reviewed, &[], ns).unwrap();
        assert!(!r.udp_relay);
        assert!(matches!(
            r.kernel.network,
            Network::Proxy { udp: false, .. }
        ));

        let ext = plan_of(&h, "", &["--proxy-socket", "/x/p.sock"], ns).unwrap();
        assert_eq!(
            ext.proxy,
            Proxy::External {
                socket: PathBuf::from("/x/p.sock"),
                dns: None
            }
        );
        let e = plan_of(&h, "", &["--dns-socket", "/x/d.sock"], ns)
            .err()
            .unwrap();
        assert!(e.to_string().contains("--proxy-socket"), "{e}");
    }

    #[test]
    fn credentials_are_planned_without_reading_them_and_need_sandpits_proxy() {
        let h = home_in(Path::new("/var/tmp"));
        let ns = Mode::Namespaces;
        let cfg = "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:SANDPIT_PLAN_TEST_UNSET\"\nhosts = [\"api.openai.com\"]\n";
        let c = plan_of(&h, cfg, &[], ns).unwrap().credentials.unwrap();
        assert_eq!(
            c.sentinels,
            [(
                "openai".to_string(),
                "OPENAI_API_KEY".to_string(),
                vec!["api.openai.com".to_string()]
            )]
        );
        let run = h.ctx.state_dir.join("run/RUN");
        assert_eq!(c.ca, run.join("credentials-ca.pem"));
        assert_eq!(c.bundle, run.join("credentials-bundle.pem"));
        let at = |name: &str| {
            c.ca_env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(at("SSL_CERT_FILE").as_deref(), c.bundle.to_str());
        assert_eq!(at("NODE_EXTRA_CA_CERTS").as_deref(), c.ca.to_str());
        // The source is not set: planning read nothing, and wrote nothing.
        assert!(!c.ca.exists() && !c.bundle.exists());
        assert!(plan_of(&h, "", &[], ns).unwrap().credentials.is_none());
        // Another proxy cannot put the real values in: the plan refuses, as the run.
        let e = plan_of(&h, cfg, &["--proxy-socket", "/x/p.sock"], ns)
            .err()
            .unwrap();
        assert!(e.to_string().contains("needs sandpit's own proxy"), "{e}");
        // Offline, nothing goes out to need it.
        let off = format!("{cfg}[network]\nmode = \"offline\"\n");
        let p = plan_of(&h, &off, &["--proxy-socket", "/x/p.sock"], ns).unwrap();
        assert!(p.credentials.is_some());
    }

    #[test]
    fn what_only_sandpits_proxy_enforces_is_refused_with_another_at_plan_time() {
        let h = home_in(Path::new("/var/tmp"));
        let ns = Mode::Namespaces;
        let ext = ["--proxy-socket", "/x/p.sock"];
        let reviewed =
            "[adversary]\nprovider = \"openai\"\nmodel = \"m\"\nreview = [\"network\"]\n";
        let e = plan_of(&h, reviewed, &ext, ns).err().unwrap();
        assert!(e.to_string().contains("adversary.review"), "{e}");
        assert!(plan_of(&h, reviewed, &[], ns).is_ok());
        let off = format!("{reviewed}[network]\nmode = \"offline\"\n");
        assert!(plan_of(&h, &off, &ext, ns).is_ok());
        // An https:// rule for a host whose TLS sandpit does not terminate.
        let http = "[network.http]\nallow = [\"GET https://api.example.com/**\"]\n";
        let e = plan_of(&h, http, &[], ns).err().unwrap();
        assert!(e.to_string().contains("network.http.allow"), "{e}");
    }

    #[test]
    fn the_seatbelt_input_is_planned_and_only_its_ports_and_sockets_bound_later() {
        use crate::sandbox::macos::seatbelt::{compile, Network};
        let h = home_in(Path::new("/var/tmp"));
        let policy = |cfg: &str| effective(loaded(&h, cfg).policy, false, false);
        let cmd = [OsString::from("true")];
        let filtered = policy("");
        let s = seatbelt_input(&filtered, true, &cmd, false).unwrap();
        assert_eq!(s.network, Network::Proxy { port: 0 });
        assert!(
            s.allow_write.contains(&h.ctx.scratch),
            "{:?}",
            s.allow_write
        );
        assert!(s.allow_write.contains(&h.ctx.workspace));
        assert!(s.protected.contains(&h.ctx.state_dir));
        assert!(s.gui.is_none());
        // Without the proxy it promised, no profile: port 0 is refused.
        assert!(compile(&s.clone().bind(None, None, None, [])).is_err());
        let control = h.ctx.state_dir.join("run/RUN/control.sock");
        let report = h.ctx.state_dir.join("run/RUN/audit.sock");
        let b = s.clone().bind(
            Some(41000),
            Some(41001),
            Some(control.clone()),
            [report.clone()],
        );
        assert_eq!(b.network, Network::Proxy { port: 41000 });
        assert_eq!(b.dns_port, Some(41001));
        assert_eq!(b.control_socket, Some(control));
        assert_eq!(b.report_sockets, [report]);
        assert!(compile(&b).is_ok());
        // Binding changed nothing but the services.
        let back = crate::sandbox::macos::seatbelt::Input {
            network: s.network,
            dns_port: None,
            control_socket: None,
            report_sockets: vec![],
            ..b
        };
        assert_eq!(back, s);
        // Unrestricted goes through the proxy too; a plan without one, and offline
        // mode, have no network, and a port bound later opens none.
        let open = policy("[network]\nmode = \"unrestricted\"\n");
        let s = seatbelt_input(&open, true, &cmd, false).unwrap();
        assert_eq!(s.network, Network::Proxy { port: 0 });
        for (p, proxy) in [
            (&filtered, false),
            (&policy("[network]\nmode = \"offline\"\n"), true),
        ] {
            let s = seatbelt_input(p, proxy, &cmd, false).unwrap();
            let b = s.bind(Some(41000), Some(41001), None, []);
            assert_eq!((b.network, b.dns_port), (Network::Offline, None));
        }
        // The scratch directory is writable even where no rule names it, once.
        let mut bare = filtered.clone();
        bare.files.allow_write.retain(|r| r.value != h.ctx.scratch);
        let s = seatbelt_input(&bare, true, &cmd, false).unwrap();
        let n = |s: &crate::sandbox::macos::seatbelt::Input| {
            s.allow_write
                .iter()
                .filter(|p| **p == h.ctx.scratch)
                .count()
        };
        assert_eq!(n(&s), 1, "{:?}", s.allow_write);
        assert_eq!(n(&seatbelt_input(&filtered, true, &cmd, false).unwrap()), 1);
        // The GUI allowance with --gui (no bundle: the fixed part alone).
        let g = seatbelt_input(&filtered, true, &cmd, true).unwrap();
        assert_eq!(g.gui.map(|g| g.app), Some(None));
        // An app's own data only where the policy keeps the sandbox from rewriting
        // its Info.plist (in the read-only home, not in the workspace).
        let app_in = |dir: &Path| [crate::sandbox::macos::bundle::demo_app(dir).into_os_string()];
        let id = |cmd: &[OsString]| {
            let g = seatbelt_input(&filtered, true, cmd, true)
                .unwrap()
                .gui
                .unwrap();
            g.app.map(|a| a.id().to_string())
        };
        assert_eq!(
            id(&app_in(&h.ctx.home.join("Apps"))).as_deref(),
            Some("com.example.demo")
        );
        assert_eq!(id(&app_in(&h.ctx.workspace)), None);
    }

    #[test]
    fn the_kernel_input_is_the_effective_policy_with_the_run_directory() {
        let h = home_in(Path::new("/var/tmp"));
        let p = plan_of(
            &h,
            "[files]\nallow_write = [\"~/.agent-state\"]\n",
            &[],
            Mode::Namespaces,
        )
        .unwrap();
        let k = &p.kernel;
        // The private /tmp is a tmpfs of the kernel plan's, never a bind of the host's.
        assert!(tmpfs_grants(&p.policy).contains(&PathBuf::from("/tmp")));
        assert!(!k.writable.contains(&PathBuf::from("/tmp")));
        // A state directory the run makes before it starts is bound, though it does
        // not exist while the run is planned (and planning made nothing).
        let state = h.ctx.home.join(".agent-state");
        assert!(
            p.state_dirs.iter().any(|(d, _)| d == &state),
            "{:?}",
            p.state_dirs
        );
        assert!(k.writable.contains(&state), "{:?}", k.writable);
        assert!(!state.exists());
        assert!(k.writable.contains(&h.ctx.workspace));
        // Only this run's directory shows through; other runs' and the logs do not.
        assert!(k.read_allowed.contains(&h.ctx.state_dir.join("run/RUN")));
        for d in ["run", "logs"] {
            assert!(k.read_denied.contains(&h.ctx.state_dir.join(d)), "{d}");
        }
        assert_eq!(k.mode, Mode::Namespaces);
        // The fallback has no private /tmp: neither the policy nor the kernel grants it.
        let f = plan_of(&h, "", &[], Mode::LandlockOnly).unwrap();
        assert!(tmpfs_grants(&f.policy).is_empty());
        assert_eq!(f.kernel.mode, Mode::LandlockOnly);
    }

    #[test]
    fn the_interposer_shims_and_learn_mode_come_from_the_request_and_policy() {
        let h = home_in(Path::new("/var/tmp"));
        let ns = Mode::Namespaces;
        let p = plan_of(&h, "", &[], ns).unwrap();
        assert_eq!(p.interposer, Interposition::On);
        assert_eq!(p.interposer_off(), None);
        assert!(!p.shims && !p.policy.learn);
        // The kernel layer's refusals are reported where no interposer reports them.
        assert!(!p.kernel_refusals_reported);
        let k = plan_of(&h, "", &["--kernel-only", "--shims", "--learn"], ns).unwrap();
        assert_eq!(k.interposer_off(), Some("--kernel-only"));
        assert!(k.shims && k.policy.learn);
        assert!(k.kernel_refusals_reported);
        let s = plan_of(&h, "[shims]\nenabled = true\n", &[], ns).unwrap();
        assert!(s.shims);
        // A program the interposer cannot load into (static): off, and why.
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/elf/static-x86_64");
        let facts = Facts {
            support: &SUPPORT,
            mode: ns,
            cwd: h.ctx.workspace.clone(),
            run_dir: h.ctx.state_dir.join("run/RUN"),
            proxy_port: 3128,
        };
        let argv = ["sandpit", "--", fixture.to_str().unwrap()];
        let req = Cli::try_parse_from(argv).unwrap().run;
        let st = plan(&req, loaded(&h, ""), &facts).unwrap();
        let why = st
            .interposer_off()
            .expect("a static program runs without the interposer");
        assert!(why.contains("static"), "{why}");
        assert!(st.kernel_refusals_reported);
    }
}
