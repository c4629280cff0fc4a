//! Landlock from a `LandlockPlan`: writes confined to the writable roots, signal and
//! abstract-unix-socket scopes where the ABI has them, and (fallback mode) TCP connect
//! limited to the proxy port. Whatever the plan relies on is required: a ruleset the
//! kernel does not fully enforce is an error, never a silent downgrade.
use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use super::plan::LandlockPlan;

/// What Landlock ended up enforcing, for the start-up line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub abi: u32,
    pub scopes: bool,
    pub net: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("Landlock is not available in this kernel")]
    Unavailable,
    #[error("Landlock ABI {have} is too old: {need}")]
    TooOld { have: u32, need: &'static str },
    #[error("Landlock rule for {path}: {source}")]
    Path {
        path: String,
        source: landlock::PathFdError,
    },
    #[error("Landlock: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("Landlock ruleset was not fully enforced ({0:?})")]
    NotEnforced(RulesetStatus),
}

/// Apply `plan` to the calling thread (and so to everything it execs). `abi` is the
/// version the kernel reported; every right asked for is a hard requirement.
/// A rule for an entry listed from a directory of the host (the fallback mode's
/// reads): one that changed since it was listed — gone (Landlock answers EBADFD for
/// a file no longer there), or now a file where it was a directory (EINVAL) — gets
/// none, which only takes access away. Any other refusal stops the setup.
fn grant_listed<T>(added: Result<T, landlock::RulesetError>) -> Result<(), LandlockError> {
    let Err(e) = added else { return Ok(()) };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EBADFD | libc::EINVAL)) {
                return Ok(());
            }
        }
        source = s.source();
    }
    Err(e.into())
}

pub fn apply(plan: &LandlockPlan, abi: Option<u32>) -> Result<Applied, LandlockError> {
    let have = abi.ok_or(LandlockError::Unavailable)?;
    let abi = ABI::from(have as i32);
    // In namespace mode (no TCP connect rules) a refused bind is policy fidelity,
    // not containment: a listener in the sandbox's own network namespace is
    // reachable only from inside. Kernels without TCP rules go without it there.
    let deny_bind = plan.deny_tcp_bind && (have >= 4 || plan.tcp_connect.is_some());
    if (plan.tcp_connect.is_some() || deny_bind) && have < 4 {
        return Err(LandlockError::TooOld {
            have,
            need: "TCP connect rules need ABI 4 (Linux 6.7)",
        });
    }
    let mut write = AccessFs::from_write(abi);
    if !plan.file_open_rights {
        write &= !(AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev);
    }
    let device = (AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev) & write;
    let scopes = have >= 6;
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let mut handled = write;
    if plan.reads.is_some() {
        handled |= read;
    }
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)?;
    if scopes {
        rs = rs.scope(Scope::from_all(abi))?;
    }
    if plan.tcp_connect.is_some() {
        rs = rs.handle_access(AccessNet::ConnectTcp)?;
    }
    if deny_bind {
        rs = rs.handle_access(AccessNet::BindTcp)?;
    }
    let mut created = rs.create()?;
    let fd = |p: &std::path::Path| {
        PathFd::new(p).map_err(|source| LandlockError::Path {
            path: p.display().to_string(),
            source,
        })
    };
    for p in &plan.writable {
        // A single writable file takes only the rights that apply to files (a
        // directory right on a file makes Landlock refuse the rule).
        let access = if p.is_dir() {
            write
        } else {
            write & AccessFs::from_file(abi)
        };
        // A writable file gets no rule when its open rights are not handled.
        if !access.is_empty() {
            created = created.add_rule(PathBeneath::new(fd(p)?, access))?;
        }
    }
    if let Some(reads) = &plan.reads {
        for p in &reads.read {
            // Entries can vanish between listing and here; a missing one needs no rule.
            if let Ok(f) = fd(p) {
                let access = if p.is_dir() {
                    read
                } else {
                    read & AccessFs::from_file(abi)
                };
                grant_listed((&mut created).add_rule(PathBeneath::new(f, access)))?;
            }
        }
        for p in &reads.list_only {
            if let Ok(f) = fd(p) {
                grant_listed((&mut created).add_rule(PathBeneath::new(f, AccessFs::ReadDir)))?;
            }
        }
    }
    for p in plan.devices.iter().filter(|_| !device.is_empty()) {
        let fd = PathFd::new(p).map_err(|source| LandlockError::Path {
            path: p.display().to_string(),
            source,
        })?;
        created = created.add_rule(PathBeneath::new(fd, device))?;
    }
    if deny_bind && plan.bind_ephemeral {
        created = created.add_rule(NetPort::new(0, AccessNet::BindTcp))?;
    }
    if let Some(ports) = &plan.tcp_connect {
        for port in ports {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
    }
    let status = created.restrict_self()?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(LandlockError::NotEnforced(status.ruleset));
    }
    Ok(Applied {
        abi: have,
        scopes,
        net: plan.tcp_connect.is_some(),
    })
}
