//! Binary inspection: can sandpit's interposition library load into this program?
//!
//! `inspect` follows shebangs to the program the kernel really runs, maps it, parses
//! it with goblin (ELF or Mach-O, fat or thin) and lists every reason the loader
//! would refuse or ignore the preload variable. [`choose_mode`] turns that and the
//! kernel's capabilities into the mode a run uses. Everything after reading the files
//! is pure and takes the host platform as a value, so Mach-O rules are tested on
//! Linux.
#![forbid(unsafe_code)]
pub mod codesign;
mod elf;
mod macho;
mod mode;
mod shebang;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

pub use mode::{choose_mode, Fallthrough, Mode, ModeChoice};
pub use shebang::{parse_shebang, Shebang};

/// Errors of inspection.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{name}: not found in PATH")]
    NotFound { name: String },
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: shebang chain deeper than {max} interpreters")]
    TooDeep { path: PathBuf, max: usize },
}

pub type Result<T> = std::result::Result<T, Error>;

/// Operating system of the host that will run the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    Linux,
    Macos,
    Other,
}

/// CPU architecture of the host (and of the interposition library sandpit carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    X86_64,
    Aarch64,
    Other,
}

/// The platform a binary is judged for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Host {
    pub os: Os,
    pub arch: Arch,
}

impl Host {
    /// The platform sandpit was built for.
    pub fn current() -> Host {
        let os = if cfg!(target_os = "linux") {
            Os::Linux
        } else if cfg!(target_os = "macos") {
            Os::Macos
        } else {
            Os::Other
        };
        let arch = if cfg!(target_arch = "x86_64") {
            Arch::X86_64
        } else if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::Other
        };
        Host { os, arch }
    }
}

/// Why the interposition library cannot load into (or cannot see) the program.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Blocker {
    /// ELF without a program interpreter: nothing reads LD_PRELOAD.
    StaticElf,
    /// A dynamic loader other than glibc's (musl, Android's linker): the
    /// interposition library is built against glibc and cannot load there.
    ForeignLoader { interpreter: String },
    /// A Go program on Linux makes its system calls directly, not through libc.
    GoRawSyscalls,
    /// setuid/setgid: the loader runs in secure mode and drops the preload.
    /// On Linux `no_new_privs` (set by the kernel layer) ignores the bit instead.
    SetId { setuid: bool, setgid: bool },
    /// File capabilities (security.capability): secure mode, like setuid.
    FileCapabilities,
    /// The binary is for another OS than the host.
    ForeignFormat { format: String },
    /// No slice or class matches the library sandpit carries.
    ArchMismatch { binary: String, library: String },
    /// macOS: under a SIP-protected location; dyld strips DYLD_* variables.
    SipLocation { path: String },
    /// macOS: Apple platform binary (CodeDirectory platform field set).
    PlatformBinary,
    /// macOS: hardened runtime without the entitlements that let DYLD_INSERT_LIBRARIES
    /// through and let a library signed by someone else load.
    HardenedRuntime { missing: Vec<String> },
    /// macOS: library validation required by the CodeDirectory flags.
    LibraryValidation,
    /// macOS: the CS_RESTRICT code-signing flag.
    CsRestrict,
    /// macOS: a `__RESTRICT` segment (`__restrict` section).
    RestrictSegment,
    /// macOS: the slice that runs is arm64e and the library is arm64.
    Arm64e,
    /// Not a program sandpit can read: unknown format or unreadable.
    Unknown { detail: String },
}

impl Blocker {
    /// `no_new_privs` (always set by the Linux kernel layer) makes the kernel ignore
    /// setuid/setgid bits and file capabilities, so the loader is not in secure mode.
    pub fn lifted_by_no_new_privs(&self) -> bool {
        matches!(self, Blocker::SetId { .. } | Blocker::FileCapabilities)
    }

    /// One line a user can act on.
    pub fn describe(&self) -> String {
        match self {
            Blocker::StaticElf => "statically linked: no dynamic loader reads LD_PRELOAD".into(),
            Blocker::ForeignLoader { interpreter } => format!(
                "dynamic loader {interpreter} is not glibc's: the glibc-built interposition library cannot load"
            ),
            Blocker::GoRawSyscalls => {
                "Go program: on Linux it makes system calls directly, bypassing libc hooks".into()
            }
            Blocker::SetId { setuid, setgid } => format!(
                "{}: the loader runs in secure mode and ignores the preload variable",
                match (setuid, setgid) {
                    (true, true) => "setuid and setgid",
                    (true, false) => "setuid",
                    _ => "setgid",
                }
            ),
            Blocker::FileCapabilities => {
                "file capabilities (security.capability): the loader runs in secure mode".into()
            }
            Blocker::ForeignFormat { format } => {
                format!("{format} binary: does not run on this host")
            }
            Blocker::ArchMismatch { binary, library } => format!(
                "binary is {binary}, the interposition library is {library}: it cannot load"
            ),
            Blocker::SipLocation { path } => {
                format!("{path} is under a SIP-protected location: dyld strips DYLD_* variables")
            }
            Blocker::PlatformBinary => {
                "Apple platform binary: dyld ignores DYLD_INSERT_LIBRARIES".into()
            }
            Blocker::HardenedRuntime { missing } => format!(
                "hardened runtime without {}: dyld ignores or refuses the library",
                missing.join(" and ")
            ),
            Blocker::LibraryValidation => {
                "library validation required: a library not signed by the same team is refused"
                    .into()
            }
            Blocker::CsRestrict => {
                "CS_RESTRICT signature flag: dyld ignores DYLD_* variables".into()
            }
            Blocker::RestrictSegment => "__RESTRICT segment: dyld ignores DYLD_* variables".into(),
            Blocker::Arm64e => {
                "arm64e slice: the interposition library is arm64 and cannot load".into()
            }
            Blocker::Unknown { detail } => format!("not an executable sandpit can read: {detail}"),
        }
    }
}

/// One interpreter hop of a shebang chain.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Hop {
    /// The script.
    pub script: PathBuf,
    /// The interpreter the kernel runs, as written.
    pub interpreter: PathBuf,
    /// The rest of the `#!` line.
    pub argument: Option<String>,
    /// `#!/usr/bin/env X`: X resolved through PATH. sandpit launches it directly so
    /// the (possibly SIP-protected) `env` never sits between sandpit and the program.
    pub resolved_via_env: Option<PathBuf>,
}

/// The binary format and what was read from it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "format", rename_all = "snake_case")]
pub enum Format {
    Elf {
        class: u8,
        machine: String,
        interpreter: Option<String>,
        go: bool,
    },
    MachO {
        /// Every architecture slice (one for a thin binary).
        slices: Vec<Slice>,
        /// The slice the host would run, when one matches.
        runs: Option<usize>,
        fat: bool,
    },
    Unknown,
}

/// One Mach-O architecture slice.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Slice {
    pub arch: String,
    pub signature: Option<codesign::Signature>,
    pub restrict_segment: bool,
}

/// What `sandpit check` knows about a program.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Inspection {
    /// What the user asked to run.
    pub requested: String,
    /// The file the kernel executes in the end (after shebangs), canonical.
    pub binary: PathBuf,
    /// The shebang hops from the requested file to `binary`.
    pub shebangs: Vec<Hop>,
    /// The argv prefix sandpit should exec instead of `requested` (differs when an
    /// `env` hop was resolved), followed by the user's arguments.
    pub launch: Vec<PathBuf>,
    pub format: Format,
    pub host: Host,
    /// Empty: the interposition library loads.
    pub blockers: Vec<Blocker>,
    /// Facts that do not block interposition but a user may want to know.
    pub notes: Vec<String>,
}

impl Inspection {
    pub fn interposition_supported(&self) -> bool {
        self.blockers.is_empty()
    }
}

/// What the file system says about a file, gathered once so the analysis is pure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileFacts {
    pub setuid: bool,
    pub setgid: bool,
    /// `security.capability` is set.
    pub file_caps: bool,
}

const MACHO_MAGICS: &[[u8; 4]] = &[
    [0xfe, 0xed, 0xfa, 0xce],
    [0xce, 0xfa, 0xed, 0xfe],
    [0xfe, 0xed, 0xfa, 0xcf],
    [0xcf, 0xfa, 0xed, 0xfe],
    [0xca, 0xfe, 0xba, 0xbe],
];

fn unknown(blockers: &mut Vec<Blocker>, detail: String) -> Format {
    blockers.push(Blocker::Unknown { detail });
    Format::Unknown
}

/// Judge one binary's bytes (no shebang) for `host`. Pure.
pub fn analyze_binary(
    path: &Path,
    bytes: &[u8],
    facts: &FileFacts,
    host: Host,
) -> (Format, Vec<Blocker>, Vec<String>) {
    let mut blockers = vec![];
    let mut notes = vec![];
    let magic = bytes.get(..4).unwrap_or_default();
    let format = if magic == b"\x7fELF" {
        match elf::parse(bytes) {
            Ok(e) => elf::analyze(&e, host, &mut blockers, &mut notes),
            Err(e) => unknown(&mut blockers, format!("malformed ELF: {e}")),
        }
    } else if MACHO_MAGICS.iter().any(|m| magic == m) {
        match goblin::mach::Mach::parse(bytes) {
            Ok(m) => macho::analyze(path, bytes, &m, host, &mut blockers, &mut notes),
            Err(e) => unknown(&mut blockers, format!("malformed Mach-O: {e}")),
        }
    } else {
        unknown(&mut blockers, "neither ELF, Mach-O nor a #! script".into())
    };
    if facts.setuid || facts.setgid {
        blockers.push(Blocker::SetId {
            setuid: facts.setuid,
            setgid: facts.setgid,
        });
    }
    if facts.file_caps {
        blockers.push(Blocker::FileCapabilities);
    }
    (format, blockers, notes)
}

/// The deepest shebang chain followed (Linux allows four interpreter levels).
pub const MAX_SHEBANG_DEPTH: usize = 4;

pub use crate::sys::which;

/// `m`: the program's metadata, as it was mapped.
fn facts(path: &Path, m: &std::fs::Metadata) -> FileFacts {
    use std::os::unix::fs::PermissionsExt;
    let mode = m.permissions().mode();
    FileFacts {
        setuid: mode & 0o4000 != 0,
        setgid: mode & 0o2000 != 0,
        file_caps: matches!(xattr::get(path, "security.capability"), Ok(Some(v)) if !v.is_empty()),
    }
}

/// Inspect `program` as `sandpit run` would start it, with this PATH and cwd.
pub fn inspect(program: &str, path_env: &OsStr, cwd: &Path, host: Host) -> Result<Inspection> {
    let first = which(program, path_env, cwd).ok_or_else(|| Error::NotFound {
        name: program.to_string(),
    })?;
    let mut current = canonicalize(&first)?;
    let mut shebangs = vec![];
    // The argv prefix: [interpreter, interp-arg?, script] as sandpit will exec it.
    let mut launch = vec![first.clone()];
    loop {
        let mapped = crate::sys::Mapped::open(&current).map_err(|source| Error::Read {
            path: current.clone(),
            source,
        })?;
        let bytes = mapped.bytes();
        let Some(sb) = parse_shebang(bytes) else {
            let (format, blockers, notes) =
                analyze_binary(&current, bytes, &facts(&current, mapped.metadata()), host);
            return Ok(Inspection {
                requested: program.to_string(),
                binary: current,
                shebangs,
                launch,
                format,
                host,
                blockers,
                notes,
            });
        };
        if shebangs.len() >= MAX_SHEBANG_DEPTH {
            return Err(Error::TooDeep {
                path: current,
                max: MAX_SHEBANG_DEPTH,
            });
        }
        let interp = PathBuf::from(&sb.interpreter);
        let mut hop = Hop {
            script: current.clone(),
            interpreter: interp.clone(),
            argument: sb.argument.clone(),
            resolved_via_env: None,
        };
        let mut prefix: Vec<PathBuf> = vec![];
        let next = match sb.env_target() {
            Some((target, rest)) => {
                let resolved = which(&target, path_env, cwd).ok_or(Error::NotFound {
                    name: target.clone(),
                })?;
                hop.resolved_via_env = Some(resolved.clone());
                prefix.push(resolved.clone());
                prefix.extend(rest.into_iter().map(PathBuf::from));
                resolved
            }
            None => {
                prefix.push(interp.clone());
                prefix.extend(sb.argument.iter().map(PathBuf::from));
                interp
            }
        };
        shebangs.push(hop);
        prefix.append(&mut launch);
        launch = prefix;
        current = canonicalize(&next)?;
    }
}

fn canonicalize(p: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(p).map_err(|source| Error::Read {
        path: p.to_path_buf(),
        source,
    })
}

/// A program a wrapper starts as the agent itself (`env.agent_programs`): a Node
/// script's native binary (codex's, static).
#[derive(Debug, serde::Serialize)]
pub struct AgentProgram {
    pub path: std::path::PathBuf,
    /// As `sandpit check` describes a format (`ELF 64-bit x86_64, static`).
    pub format: String,
    pub interposition: bool,
}

/// Files a package holds at most that are looked at for its agent programs.
const PACKAGE_BUDGET: usize = 20_000;

/// The `env.agent_programs` of the policy that the package of the script asked for
/// holds (the nearest directory above it with a `package.json`, searched to a
/// bounded size), each inspected: a static one gets no interposer, whatever its
/// wrapper gets.
pub fn agent_programs(i: &Inspection, policy: &sandpit_policy::Policy) -> Vec<AgentProgram> {
    use std::os::unix::ffi::OsStrExt;
    let Some(script) = i.shebangs.first().map(|h| &h.script) else {
        return vec![];
    };
    if !policy
        .env
        .agent_programs
        .iter()
        .any(|r| r.value.contains('/'))
    {
        return vec![];
    }
    let Some(root) = script
        .ancestors()
        .skip(1)
        .find(|d| d.join("package.json").is_file())
    else {
        return vec![];
    };
    let (path, cwd) = (std::ffi::OsString::new(), std::path::PathBuf::from("/"));
    let mut found = vec![];
    let mut dirs = vec![root.to_path_buf()];
    let mut budget = PACKAGE_BUDGET;
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            budget = budget.saturating_sub(1);
            if budget == 0 {
                return found;
            }
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => dirs.push(p),
                Ok(t) if t.is_file() => {
                    let matched = policy
                        .env
                        .agent_program(p.as_os_str().as_bytes())
                        .is_some_and(|r| r.value.contains('/'));
                    let Some(p) = matched
                        .then_some(p)
                        .and_then(|p| p.to_str().map(String::from))
                    else {
                        continue;
                    };
                    if let Ok(ins) = inspect(&p, &path, &cwd, i.host) {
                        found.push(AgentProgram {
                            path: ins.binary.clone(),
                            format: ins.format.describe(),
                            interposition: ins.interposition_supported(),
                        });
                    }
                }
                _ => {}
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

impl Format {
    /// How `sandpit check` names it: `ELF 64-bit x86_64, dynamic, loader …`.
    pub fn describe(&self) -> String {
        match self {
            Format::Elf {
                class,
                machine,
                interpreter,
                go,
            } => {
                let link = match interpreter {
                    Some(i) => format!("dynamic, loader {i}"),
                    None => "static".into(),
                };
                format!(
                    "ELF {class}-bit {machine}, {link}{}",
                    if *go { ", Go" } else { "" }
                )
            }
            Format::MachO { slices, runs, fat } => {
                let names: Vec<&str> = slices.iter().map(|s| s.arch.as_str()).collect();
                let runs = runs
                    .and_then(|i| slices.get(i))
                    .map(|s| format!(", runs {}", s.arch))
                    .unwrap_or_default();
                format!(
                    "Mach-O {}{}{runs}",
                    if *fat { "universal " } else { "" },
                    names.join("+")
                )
            }
            Format::Unknown => "unknown format".into(),
        }
    }
}
