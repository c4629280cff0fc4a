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

/// The parts of an ELF file [`analyze`] reads: the header, the program headers
/// with the interpreter, the section headers and their names, each read as goblin's
/// full parse reads them. That parse also builds the symbol string table, ~3 ms at
/// every start for a 15 MB binary that keeps its symbols.
pub(super) fn parse(bytes: &[u8]) -> goblin::error::Result<goblin::elf::Elf<'_>> {
    use goblin::elf::section_header::SHN_XINDEX;
    use goblin::elf::{program_header::PT_INTERP, Elf, ProgramHeader, SectionHeader};
    let header = Elf::parse_header(bytes)?;
    let mut e = Elf::lazy_parse(header)?;
    let ctx = goblin::container::Ctx::new(header.container()?, header.endianness()?);
    e.program_headers =
        ProgramHeader::parse(bytes, header.e_phoff as usize, header.e_phnum as usize, ctx)?;
    // The last PT_INTERP, without its NUL (as goblin's parse takes it).
    for ph in e.program_headers.iter().filter(|ph| ph.p_type == PT_INTERP) {
        if ph.p_filesz != 0 {
            let (at, len) = (ph.p_offset as usize, (ph.p_filesz - 1) as usize);
            e.interpreter = bytes
                .get(at..at.saturating_add(len))
                .and_then(|b| std::str::from_utf8(b).ok());
        }
    }
    e.section_headers =
        SectionHeader::parse(bytes, header.e_shoff as usize, header.e_shnum as usize, ctx)?;
    let mut names = header.e_shstrndx as usize;
    if names == SHN_XINDEX as usize {
        names = e
            .section_headers
            .first()
            .map_or(usize::MAX, |sh| sh.sh_link as usize);
    }
    if let Some(sh) = e.section_headers.get(names) {
        sh.check_size(bytes.len())?;
        e.shdr_strtab =
            goblin::strtab::Strtab::parse(bytes, sh.sh_offset as usize, sh.sh_size as usize, 0)?;
    }
    Ok(e)
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

#[cfg(test)]
mod tests {
    /// The light parse reads what goblin's full parse reads, for every ELF fixture,
    /// this test binary (with its symbols) and the host's `/bin/true`.
    #[test]
    fn light_parse_agrees_with_goblin() {
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/elf");
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&fixtures)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.push(std::env::current_exe().unwrap());
        files.push("/bin/true".into());
        assert!(files.len() >= 8, "{files:?}");
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            let full = goblin::elf::Elf::parse(&bytes).unwrap();
            let light = super::parse(&bytes).unwrap();
            let what = f.display();
            assert_eq!(light.header, full.header, "{what}");
            assert_eq!(light.is_64, full.is_64, "{what}");
            assert_eq!(light.interpreter, full.interpreter, "{what}");
            assert_eq!(light.program_headers, full.program_headers, "{what}");
            assert_eq!(light.section_headers, full.section_headers, "{what}");
            let names = |e: &goblin::elf::Elf| -> Vec<Option<String>> {
                e.section_headers
                    .iter()
                    .map(|sh| e.shdr_strtab.get_at(sh.sh_name).map(String::from))
                    .collect()
            };
            assert_eq!(names(&light), names(&full), "{what}");
            assert!(
                names(&full).iter().any(|n| n.as_deref() == Some(".text")),
                "{what}"
            );
        }
    }
}
