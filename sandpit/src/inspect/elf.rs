//! ELF: interpreter present or static, class and machine, Go.
use super::{Arch, Blocker, Format, Host, Os};

const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;

fn machine_name(m: u16) -> String {
    match m {
        EM_X86_64 => "x86_64".into(),
        EM_AARCH64 => "aarch64".into(),
        3 => "i386".into(),
        40 => "arm".into(),
        other => format!("machine {other}"),
    }
}

fn library_of(host: Host) -> Option<(u8, u16, &'static str)> {
    match host.arch {
        Arch::X86_64 => Some((64, EM_X86_64, "x86_64 (64-bit)")),
        Arch::Aarch64 => Some((64, EM_AARCH64, "aarch64 (64-bit)")),
        Arch::Other => None,
    }
}

/// glibc's loaders are `ld-linux-<arch>.so.N` (`ld-linux.so.2` on i386), wherever
/// they live (`/lib64`, `/lib`, a Nix store path).
fn is_glibc_loader(interp: &str) -> bool {
    let name = interp.rsplit('/').next().unwrap_or(interp);
    name.starts_with("ld-linux")
}

pub(super) fn analyze(
    e: &goblin::elf::Elf,
    host: Host,
    blockers: &mut Vec<Blocker>,
    notes: &mut Vec<String>,
) -> Format {
    let class = if e.is_64 { 64 } else { 32 };
    let machine = e.header.e_machine;
    let go = e.section_headers.iter().any(|sh| {
        matches!(
            e.shdr_strtab.get_at(sh.sh_name),
            Some(".note.go.buildid") | Some(".go.buildinfo")
        )
    });
    let interpreter = e.interpreter.map(String::from);
    if host.os != Os::Linux {
        blockers.push(Blocker::ForeignFormat {
            format: "ELF".into(),
        });
    } else {
        match library_of(host) {
            Some((lclass, lmachine, lname)) if lclass != class || lmachine != machine => {
                blockers.push(Blocker::ArchMismatch {
                    binary: format!("{} ({class}-bit)", machine_name(machine)),
                    library: lname.into(),
                });
            }
            None => blockers.push(Blocker::ArchMismatch {
                binary: machine_name(machine),
                library: "none for this architecture".into(),
            }),
            _ => {}
        }
        match &interpreter {
            None => blockers.push(Blocker::StaticElf),
            Some(i) if !is_glibc_loader(i) => blockers.push(Blocker::ForeignLoader {
                interpreter: i.clone(),
            }),
            Some(_) => {}
        }
        if go {
            blockers.push(Blocker::GoRawSyscalls);
        }
    }
    if e.header.e_type == goblin::elf::header::ET_DYN && interpreter.is_none() {
        notes.push("static-pie or shared object without an interpreter".into());
    }
    Format::Elf {
        class,
        machine: machine_name(machine),
        interpreter,
        go,
    }
}
