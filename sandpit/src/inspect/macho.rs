//! Mach-O: SIP locations, platform binaries, code-signature flags and entitlements,
//! `__RESTRICT`, fat binaries. These are the conditions under which dyld ignores
//! `DYLD_INSERT_LIBRARIES` or refuses the library it names.
use std::path::Path;

use goblin::mach::load_command::CommandVariant;
use goblin::mach::{Mach, MachO};

use super::codesign::{
    self, CS_REQUIRE_LV, CS_RESTRICT, CS_RUNTIME, ENT_ALLOW_DYLD_ENV, ENT_DISABLE_LV,
};
use super::{Arch, Blocker, Format, Host, Os, Slice};

const CPU_ARCH_ABI64: u32 = 0x0100_0000;
const CPU_TYPE_X86_64: u32 = 7 | CPU_ARCH_ABI64;
const CPU_TYPE_ARM64: u32 = 12 | CPU_ARCH_ABI64;
const CPU_SUBTYPE_MASK: u32 = 0xff00_0000;
const CPU_SUBTYPE_ARM64E: u32 = 2;
const CPU_SUBTYPE_X86_64_H: u32 = 8;

/// Directories System Integrity Protection guards. dyld drops DYLD_* variables for
/// programs loaded from them (they are restricted), so a run keeps its interposer
/// only with a program from elsewhere. `/usr/local` is the documented exception.
pub const SIP_ROOTS: &[&str] = &["/System", "/usr", "/bin", "/sbin", "/Library/Apple"];
const SIP_EXCEPTIONS: &[&str] = &["/usr/local"];

fn under(path: &str, root: &str) -> bool {
    path == root || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/'))
}

/// Is `path` (canonical) under a SIP-protected location?
pub fn sip_protected(path: &Path) -> bool {
    let Some(p) = path.to_str() else {
        return false;
    };
    SIP_ROOTS.iter().any(|r| under(p, r)) && !SIP_EXCEPTIONS.iter().any(|r| under(p, r))
}

fn arch_name(cputype: u32, cpusubtype: u32) -> String {
    let sub = cpusubtype & !CPU_SUBTYPE_MASK;
    match (cputype, sub) {
        (CPU_TYPE_ARM64, CPU_SUBTYPE_ARM64E) => "arm64e".into(),
        (CPU_TYPE_ARM64, _) => "arm64".into(),
        (CPU_TYPE_X86_64, CPU_SUBTYPE_X86_64_H) => "x86_64h".into(),
        (CPU_TYPE_X86_64, _) => "x86_64".into(),
        _ => goblin::mach::constants::cputype::get_arch_name_from_types(cputype, cpusubtype)
            .map(String::from)
            .unwrap_or_else(|| format!("cputype {cputype:#x}")),
    }
}

fn read_slice(bytes: &[u8], m: &MachO) -> Slice {
    let mut signature = None;
    for lc in &m.load_commands {
        if let CommandVariant::CodeSignature(cs) = lc.command {
            let start = cs.dataoff as usize;
            let end = start.saturating_add(cs.datasize as usize);
            if let Some(blob) = bytes.get(start..end) {
                signature = codesign::parse(blob);
            }
        }
    }
    let restrict_segment = m
        .segments
        .iter()
        .any(|s| s.name().map(|n| n == "__RESTRICT").unwrap_or(false));
    Slice {
        arch: arch_name(m.header.cputype, m.header.cpusubtype),
        signature,
        restrict_segment,
    }
}

/// The slice this host's kernel would pick, by preference.
fn pick(slices: &[Slice], host: Host) -> Option<usize> {
    let prefs: &[&str] = match host.arch {
        // Third-party programs run their arm64 slice; arm64e runs when it is the only
        // one (or for Apple's own binaries, which SIP covers anyway).
        Arch::Aarch64 => &["arm64", "arm64e"],
        Arch::X86_64 => &["x86_64h", "x86_64"],
        Arch::Other => &[],
    };
    prefs
        .iter()
        .find_map(|want| slices.iter().position(|s| s.arch == *want))
}

pub(super) fn analyze(
    path: &Path,
    bytes: &[u8],
    mach: &Mach,
    host: Host,
    blockers: &mut Vec<Blocker>,
    notes: &mut Vec<String>,
) -> Format {
    let mut slices = vec![];
    let fat = matches!(mach, Mach::Fat(_));
    match mach {
        Mach::Binary(m) => slices.push(read_slice(bytes, m)),
        Mach::Fat(multi) => match multi.arches() {
            Ok(arches) => {
                for a in arches {
                    let data = a.slice(bytes);
                    match MachO::parse(data, 0) {
                        Ok(m) => slices.push(read_slice(data, &m)),
                        Err(e) => notes.push(format!(
                            "slice {} unreadable: {e}",
                            arch_name(a.cputype, a.cpusubtype)
                        )),
                    }
                }
            }
            Err(e) => blockers.push(Blocker::Unknown {
                detail: format!("fat header: {e}"),
            }),
        },
    }
    let runs = pick(&slices, host);
    if fat {
        let names: Vec<&str> = slices.iter().map(|s| s.arch.as_str()).collect();
        notes.push(format!("universal binary: {}", names.join(", ")));
    }
    if host.os != Os::Macos {
        blockers.push(Blocker::ForeignFormat {
            format: "Mach-O".into(),
        });
        return Format::MachO { slices, runs, fat };
    }
    if sip_protected(path) {
        blockers.push(Blocker::SipLocation {
            path: path.display().to_string(),
        });
    }
    let library = match host.arch {
        Arch::Aarch64 => "arm64",
        Arch::X86_64 => "x86_64",
        Arch::Other => "none",
    };
    let Some(i) = runs else {
        let names: Vec<String> = slices.iter().map(|s| s.arch.clone()).collect();
        if host.arch == Arch::Aarch64 && names.iter().any(|n| n.starts_with("x86_64")) {
            notes.push("x86_64 only: runs under Rosetta 2".into());
        }
        blockers.push(Blocker::ArchMismatch {
            binary: names.join(", "),
            library: library.into(),
        });
        return Format::MachO { slices, runs, fat };
    };
    let slice = &slices[i];
    if slice.arch == "arm64e" {
        blockers.push(Blocker::Arm64e);
    }
    if slice.restrict_segment {
        blockers.push(Blocker::RestrictSegment);
    }
    match &slice.signature {
        None => {
            if host.arch == Arch::Aarch64 {
                notes.push("unsigned: Apple silicon refuses to run unsigned arm64 code".into());
            } else {
                notes.push("unsigned".into());
            }
        }
        Some(sig) => {
            if sig.platform != 0 {
                blockers.push(Blocker::PlatformBinary);
            }
            if sig.has(CS_RESTRICT) {
                blockers.push(Blocker::CsRestrict);
            }
            if sig.has(CS_RUNTIME) {
                let missing: Vec<String> = [ENT_ALLOW_DYLD_ENV, ENT_DISABLE_LV]
                    .iter()
                    .filter(|e| !sig.entitled(e))
                    .map(|e| e.to_string())
                    .collect();
                if missing.is_empty() {
                    notes.push(
                        "hardened runtime, entitled to DYLD variables and foreign libraries".into(),
                    );
                } else {
                    blockers.push(Blocker::HardenedRuntime { missing });
                }
            } else if sig.has(CS_REQUIRE_LV) && !sig.entitled(ENT_DISABLE_LV) {
                blockers.push(Blocker::LibraryValidation);
            }
            if sig.has(codesign::CS_ADHOC) {
                notes.push("ad-hoc signed".into());
            }
            if let Some(id) = &sig.identifier {
                notes.push(format!("signing identifier: {id}"));
            }
        }
    }
    Format::MachO { slices, runs, fat }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sip_locations() {
        for p in [
            "/usr/bin/python3",
            "/bin/sh",
            "/sbin/ping",
            "/System/x",
            "/usr",
            "/Library/Apple/usr/bin/x",
        ] {
            assert!(sip_protected(Path::new(p)), "{p}");
        }
        for p in [
            "/usr/local/bin/node",
            "/usr/local",
            "/opt/homebrew/bin/bash",
            "/Users/me/bin/x",
            "/usrx/y",
            "/binx",
        ] {
            assert!(!sip_protected(Path::new(p)), "{p}");
        }
    }
}
