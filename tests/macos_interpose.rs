//! The macOS interposer as dyld will see it: cross-build `sandpit-dylib` for both
//! Apple targets with cargo-zigbuild (into `target/macos-interpose`, apart from the
//! test's own target dir), read each dylib with goblin and check that its
//! `__DATA,__interpose` section binds every hooked symbol to libSystem's own
//! definition, with this library's replacement beside it.
//!
//! Cross-built, not run: this proves what the binary asks dyld to do, not what a
//! Mac then does. Needs zig and cargo-zigbuild; without them the test fails unless
//! `SANDPIT_MACHINE_LACKS` names `zig`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use goblin::mach::MachO;

/// Every libSystem symbol the interposer replaces on both Apple targets.
const HOOKED: &[&str] = &[
    // files
    "open",
    "open$NOCANCEL",
    "openat",
    "openat$NOCANCEL",
    "creat",
    "creat$NOCANCEL",
    "open_dprotected_np",
    "openat_dprotected_np",
    "guarded_open_np",
    "guarded_open_dprotected_np",
    "openat_authenticated_np",
    "fopen",
    "fopen$DARWIN_EXTSN",
    "freopen",
    "opendir",
    "truncate",
    "rename",
    "renameat",
    "renamex_np",
    "renameatx_np",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "unlink",
    "unlinkat",
    "rmdir",
    "mkdir",
    "mkdirat",
    "chmod",
    "fchmodat",
    "chown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "lutimes",
    "utimensat",
    "mknod",
    "mknodat",
    "mkfifo",
    "mkfifoat",
    "clonefile",
    "clonefileat",
    "fclonefileat",
    "exchangedata",
    // network
    "connect",
    "connect$NOCANCEL",
    "connectx",
    "bind",
    "listen",
    "sendto",
    "sendto$NOCANCEL",
    "sendmsg",
    "sendmsg$NOCANCEL",
    "getaddrinfo",
    "gethostbyname",
    "gethostbyname2",
    "freeaddrinfo",
    // exec
    "execve",
    "execv",
    "execvp",
    "execvP",
    "execl",
    "execle",
    "execlp",
    "posix_spawn",
    "posix_spawnp",
    "posix_spawn_file_actions_addopen",
    "system",
    "system$NOCANCEL",
    "popen",
    "popen$DARWIN_EXTSN",
];

/// x86_64 programs call the 64-bit-inode variants; arm64 has none.
const X86_64_ONLY: &[&str] = &["opendir$INODE64"];

/// C-variadic functions: the replacement is the C trampoline, not a Rust hook.
const VARIADIC: &[&str] = &[
    "open",
    "open$NOCANCEL",
    "openat",
    "openat$NOCANCEL",
    "open_dprotected_np",
    "openat_dprotected_np",
    "guarded_open_np",
    "guarded_open_dprotected_np",
    "execl",
    "execle",
    "execlp",
];

/// Implemented wholly in C (no Rust hook body with fixed arguments).
const C_ONLY: &[&str] = &["execl", "execle", "execlp"];

const TARGETS: &[&str] = &["aarch64-apple-darwin", "x86_64-apple-darwin"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// zig (on PATH or as the `ziglang` Python package) and cargo-zigbuild.
fn zig_missing() -> Option<String> {
    let ok = |c: &mut Command| c.output().map(|o| o.status.success()).unwrap_or(false);
    let zig = ok(Command::new("zig").arg("version"))
        || ok(Command::new("python3").args(["-m", "ziglang", "version"]));
    if !zig {
        return Some("zig (neither `zig` nor `python3 -m ziglang`) is not installed".into());
    }
    if !ok(Command::new("cargo-zigbuild").arg("--version")) {
        return Some("cargo-zigbuild is not installed".into());
    }
    None
}

/// Build the dylib for both Apple targets; the paths of the two libraries.
fn build() -> Option<Vec<(String, PathBuf)>> {
    if let Some(why) = zig_missing() {
        if common::machine_lacks("zig") {
            eprintln!("SANDPIT_MACHINE_LACKS names zig: not checking the macOS interposer ({why})");
            return None;
        }
        panic!(
            "{why}: the macOS interposer cannot be cross-built \
             (pip install ziglang cargo-zigbuild; rustup target add {}), \
             or set SANDPIT_MACHINE_LACKS=zig",
            TARGETS.join(" ")
        );
    }
    let target_dir = root().join("target").join("macos-interpose");
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root())
        .args(["zigbuild", "-p", "sandpit-dylib", "--lib"])
        .arg("--target-dir")
        .arg(&target_dir);
    for t in TARGETS {
        cmd.args(["--target", t]);
    }
    // The outer cargo's settings are for the test build, not this one.
    for k in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(k);
    }
    let out = cmd.output().expect("run cargo zigbuild");
    assert!(
        out.status.success(),
        "cargo zigbuild -p sandpit-dylib failed (is `rustup target add {}` done?):\n{}",
        TARGETS.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        TARGETS
            .iter()
            .map(|t| {
                let p = target_dir
                    .join(t)
                    .join("debug")
                    .join("libsandpit_dylib.dylib");
                assert!(p.is_file(), "{} was not built", p.display());
                (t.to_string(), p)
            })
            .collect(),
    )
}

/// One tuple of the interpose section, as the binary records it.
#[derive(Debug)]
struct Tuple {
    /// The symbol the replacement slot points at.
    replacement: Option<String>,
    /// The import bound into the replacee slot, and its library.
    replacee: Option<(String, String)>,
}

fn tuples(bytes: &[u8]) -> Vec<Tuple> {
    let macho = MachO::parse(bytes, 0).expect("parse Mach-O");
    assert!(macho.is_64, "not a 64-bit Mach-O");
    assert_eq!(
        macho.header.filetype,
        goblin::mach::header::MH_DYLIB,
        "not a dylib"
    );

    let mut section = None;
    for seg in macho.segments.iter() {
        for (s, data) in seg.sections().expect("sections") {
            if s.name().unwrap_or("") == "__interpose" {
                assert_eq!(s.segname().unwrap(), "__DATA", "__interpose outside __DATA");
                section = Some((s.addr, data.to_vec()));
            }
        }
    }
    let (addr, data) = section.expect("no __DATA,__interpose section: nothing is interposed");
    assert!(
        !data.is_empty() && data.len() % 16 == 0,
        "__interpose is {} bytes, not a whole number of 16-byte tuples",
        data.len()
    );

    // Binds by the address of the pointer they fill.
    let binds: BTreeMap<u64, (String, String)> = macho
        .imports()
        .expect("imports (dyld bind info)")
        .into_iter()
        .map(|i| (i.address, (i.name.to_string(), i.dylib.to_string())))
        .collect();
    // Defined symbols by address (section symbols only).
    let mut defined: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for s in macho.symbols() {
        let (name, nl) = s.expect("symbol");
        if nl.n_type & goblin::mach::symbols::N_TYPE == goblin::mach::symbols::N_SECT {
            defined
                .entry(nl.n_value)
                .or_default()
                .push(name.to_string());
        }
    }

    data.chunks(16)
        .enumerate()
        .map(|(i, t)| {
            let slot = addr + 16 * i as u64;
            let value = u64::from_le_bytes(t[..8].try_into().unwrap());
            assert!(
                !binds.contains_key(&slot),
                "tuple {i}: the replacement slot is bound to an import, not to this library"
            );
            let replacement = defined
                .get(&value)
                .and_then(|names| names.iter().find(|n| n.starts_with("_sandpit_")).cloned());
            Tuple {
                replacement,
                replacee: binds.get(&(slot + 8)).cloned(),
            }
        })
        .collect()
}

#[test]
fn interpose_section_binds_every_hook_to_libsystem() {
    let Some(built) = build() else { return };
    for (target, path) in built {
        let bytes = std::fs::read(&path).unwrap();
        if target.starts_with("aarch64") {
            // arm64 macOS loads no unsigned code: zig's linker signs ad hoc.
            let macho = MachO::parse(&bytes, 0).unwrap();
            assert!(
                macho.load_commands.iter().any(|lc| matches!(
                    lc.command,
                    goblin::mach::load_command::CommandVariant::CodeSignature(_)
                )),
                "{target}: the dylib has no code signature; arm64 macOS would refuse to load it"
            );
        }
        let tuples = tuples(&bytes);
        let mut want: BTreeSet<&str> = HOOKED.iter().copied().collect();
        if target.starts_with("x86_64") {
            want.extend(X86_64_ONLY);
        }

        let mut seen = BTreeSet::new();
        for (i, t) in tuples.iter().enumerate() {
            let (import, dylib) = t
                .replacee
                .as_ref()
                .unwrap_or_else(|| panic!("{target}: tuple {i} has no import bound as replacee"));
            let sym = import
                .strip_prefix('_')
                .unwrap_or_else(|| panic!("{target}: import {import} is not a C symbol"));
            assert!(
                dylib.contains("libSystem"),
                "{target}: {sym} is bound to {dylib}, not libSystem"
            );
            assert!(
                seen.insert(sym.to_string()),
                "{target}: {sym} is interposed twice"
            );
            let prefix = if VARIADIC.contains(&sym) {
                "_sandpit_c_"
            } else {
                "_sandpit_hook_"
            };
            let expected = format!("{prefix}{sym}");
            assert_eq!(
                t.replacement.as_deref(),
                Some(expected.as_str()),
                "{target}: the replacement for {sym} is not {expected}"
            );
        }
        let seen: BTreeSet<&str> = seen.iter().map(String::as_str).collect();
        let missing: Vec<_> = want.difference(&seen).collect();
        let extra: Vec<_> = seen.difference(&want).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{target}: interposed symbols differ from the hook list\n  missing: {missing:?}\n  unexpected: {extra:?}"
        );
        eprintln!(
            "{target}: {} tuples, each binding libSystem's symbol to sandpit's replacement",
            tuples.len()
        );
    }
}

/// Every Rust hook's own call to the original goes to libSystem (an import), never
/// back into this library: a replacement that called itself would recurse forever.
#[test]
fn originals_are_imported_from_libsystem() {
    let Some(built) = build() else { return };
    for (target, path) in built {
        let bytes = std::fs::read(&path).unwrap();
        let macho = MachO::parse(&bytes, 0).unwrap();
        let exports: BTreeSet<String> = macho
            .exports()
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        for sym in HOOKED {
            assert!(
                !exports.contains(&format!("_{sym}")),
                "{target}: the dylib exports _{sym} itself (its own calls would reach the hook)"
            );
            assert!(
                C_ONLY.contains(sym) || exports.contains(&format!("_sandpit_hook_{sym}")),
                "{target}: no exported hook body _sandpit_hook_{sym}"
            );
        }
        let imports: BTreeSet<String> = macho
            .imports()
            .unwrap()
            .into_iter()
            .filter(|i| i.dylib.contains("libSystem"))
            .map(|i| i.name.to_string())
            .collect();
        for sym in HOOKED {
            assert!(
                imports.contains(&format!("_{sym}")),
                "{target}: _{sym} is not imported from libSystem"
            );
        }
    }
}
