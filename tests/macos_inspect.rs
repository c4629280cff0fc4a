//! Binary inspection and mode choice on real binaries: Mach-O fixtures built with zig
//! and signed with rcodesign (tests/fixtures/macho/make.sh), ELF fixtures built with
//! zig, shebang chains in a temporary PATH, and `sandpit check` end to end.
//!
//! The Mach-O rules are judged for a macOS host given as a value: nothing here runs
//! on a Mac, and nothing here claims what a Mac does.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sandpit::inspect::{
    analyze_binary, choose_mode, inspect, Arch, Blocker, FileFacts, Format, Host, Inspection, Mode,
    Os,
};
use sandpit::sandbox::KernelSupport;

const MAC_ARM: Host = Host {
    os: Os::Macos,
    arch: Arch::Aarch64,
};
const MAC_X86: Host = Host {
    os: Os::Macos,
    arch: Arch::X86_64,
};
const LINUX_X86: Host = Host {
    os: Os::Linux,
    arch: Arch::X86_64,
};

fn fixture(dir: &str, name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(dir)
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Judge fixture `name` as if it were installed at `at` on `host`.
fn judge(dir: &str, name: &str, at: &str, host: Host, facts: FileFacts) -> Inspection {
    let bytes = fixture(dir, name);
    let (format, blockers, notes) = analyze_binary(Path::new(at), &bytes, &facts, host);
    Inspection {
        requested: at.into(),
        binary: at.into(),
        shebangs: vec![],
        launch: vec![at.into()],
        format,
        host,
        blockers,
        notes,
    }
}

fn macho(name: &str, at: &str, host: Host) -> Inspection {
    judge("macho", name, at, host, FileFacts::default())
}

fn seatbelt() -> KernelSupport {
    KernelSupport {
        seatbelt: true,
        ..KernelSupport::default()
    }
}

fn landlock() -> KernelSupport {
    KernelSupport {
        landlock_abi: Some(4),
        user_namespaces: true,
        seccomp: true,
        seatbelt: false,
    }
}

#[test]
fn adhoc_program_outside_sip_gets_full_mode() {
    let i = macho("adhoc-arm64", "/Users/me/bin/tool", MAC_ARM);
    assert_eq!(i.blockers, vec![], "{:?}", i.notes);
    assert!(
        i.notes.iter().any(|n| n.contains("ad-hoc")),
        "{:?}",
        i.notes
    );
    let m = choose_mode(&i, &seatbelt());
    assert_eq!(m.mode, Mode::Full);
    assert!(m.interposition && m.fallthrough.is_empty());
    // The same bytes from Homebrew's /usr/local: still outside SIP.
    let i = macho("adhoc-arm64", "/usr/local/bin/tool", MAC_ARM);
    assert_eq!(choose_mode(&i, &seatbelt()).mode, Mode::Full);
}

#[test]
fn sip_location_falls_back_to_kernel_mode() {
    for at in [
        "/usr/bin/tool",
        "/bin/tool",
        "/sbin/tool",
        "/System/Library/tool",
    ] {
        let i = macho("adhoc-arm64", at, MAC_ARM);
        assert_eq!(
            i.blockers,
            vec![Blocker::SipLocation { path: at.into() }],
            "{at}"
        );
        let m = choose_mode(&i, &seatbelt());
        assert_eq!(m.mode, Mode::Kernel);
        assert!(!m.interposition);
        assert!(m.reasons[0].contains("SIP"), "{:?}", m.reasons);
        assert!(!m.fallthrough.is_empty());
    }
}

#[test]
fn hardened_runtime_needs_both_entitlements() {
    let i = macho(
        "hardened-arm64",
        "/Applications/X.app/Contents/MacOS/x",
        MAC_ARM,
    );
    assert_eq!(
        i.blockers,
        vec![Blocker::HardenedRuntime {
            missing: vec![
                "com.apple.security.cs.allow-dyld-environment-variables".into(),
                "com.apple.security.cs.disable-library-validation".into()
            ]
        }]
    );
    assert_eq!(choose_mode(&i, &seatbelt()).mode, Mode::Kernel);

    let i = macho("hardened-dyld-only-arm64", "/opt/x", MAC_ARM);
    assert_eq!(
        i.blockers,
        vec![Blocker::HardenedRuntime {
            missing: vec!["com.apple.security.cs.disable-library-validation".into()]
        }]
    );

    let i = macho("hardened-entitled-arm64", "/opt/x", MAC_ARM);
    assert_eq!(i.blockers, vec![]);
    assert_eq!(choose_mode(&i, &seatbelt()).mode, Mode::Full);
    let Format::MachO { slices, .. } = &i.format else {
        panic!("{:?}", i.format)
    };
    let sig = slices[0].signature.as_ref().unwrap();
    assert!(
        sig.flags & 0x10000 != 0,
        "hardened runtime flag {:#x}",
        sig.flags
    );
}

#[test]
fn restrict_flag_segment_library_validation_platform_arm64e() {
    let cases: &[(&str, Blocker)] = &[
        ("cs-restrict-arm64", Blocker::CsRestrict),
        ("library-validation-arm64", Blocker::LibraryValidation),
        ("restrict-segment-arm64", Blocker::RestrictSegment),
        ("platform-arm64", Blocker::PlatformBinary),
        ("arm64e", Blocker::Arm64e),
    ];
    for (name, want) in cases {
        let i = macho(name, "/opt/x", MAC_ARM);
        assert_eq!(&i.blockers, &vec![want.clone()], "{name}");
        assert_eq!(choose_mode(&i, &seatbelt()).mode, Mode::Kernel, "{name}");
    }
}

#[test]
fn unsigned_is_noted_not_blocked() {
    let i = macho("unsigned-x86_64", "/opt/x", MAC_X86);
    assert_eq!(i.blockers, vec![]);
    assert!(
        i.notes.iter().any(|n| n.contains("unsigned")),
        "{:?}",
        i.notes
    );
    let Format::MachO { slices, .. } = &i.format else {
        panic!()
    };
    assert_eq!(slices[0].signature, None);
}

#[test]
fn universal_binaries_are_judged_by_the_slice_that_runs() {
    let arm = macho("universal-hardened", "/opt/x", MAC_ARM);
    let Format::MachO { slices, runs, fat } = &arm.format else {
        panic!()
    };
    assert!(*fat);
    let arches: Vec<&str> = slices.iter().map(|s| s.arch.as_str()).collect();
    assert_eq!(arches, vec!["x86_64", "arm64"]);
    assert_eq!(*runs, Some(1));
    assert!(matches!(
        arm.blockers[..],
        [Blocker::HardenedRuntime { .. }]
    ));

    let x86 = macho("universal-hardened", "/opt/x", MAC_X86);
    let Format::MachO { runs, .. } = &x86.format else {
        panic!()
    };
    assert_eq!(*runs, Some(0));
    assert!(matches!(
        x86.blockers[..],
        [Blocker::HardenedRuntime { .. }]
    ));

    let ok = macho("universal-adhoc", "/opt/x", MAC_ARM);
    assert_eq!(ok.blockers, vec![]);
    assert!(ok.notes.iter().any(|n| n.contains("universal")));
}

#[test]
fn thin_binary_for_the_other_arch_is_a_mismatch() {
    let i = macho("adhoc-x86_64", "/opt/x", MAC_ARM);
    assert!(
        matches!(&i.blockers[..], [Blocker::ArchMismatch { .. }]),
        "{:?}",
        i.blockers
    );
    assert!(i.notes.iter().any(|n| n.contains("Rosetta")));
    let i = macho("adhoc-x86_64", "/opt/x", MAC_X86);
    assert_eq!(i.blockers, vec![]);
    let i = macho("hardened-x86_64", "/opt/x", MAC_X86);
    assert!(matches!(&i.blockers[..], [Blocker::HardenedRuntime { .. }]));
}

#[test]
fn setuid_blocks_on_macos_but_is_lifted_by_no_new_privs_on_linux() {
    let suid = FileFacts {
        setuid: true,
        ..FileFacts::default()
    };
    let mac = judge("macho", "adhoc-arm64", "/opt/x", MAC_ARM, suid.clone());
    assert_eq!(
        mac.blockers,
        vec![Blocker::SetId {
            setuid: true,
            setgid: false
        }]
    );
    assert_eq!(choose_mode(&mac, &seatbelt()).mode, Mode::Kernel);

    let linux = judge("elf", "dynamic-x86_64", "/opt/x", LINUX_X86, suid);
    let m = choose_mode(&linux, &landlock());
    assert_eq!(m.mode, Mode::Full, "{:?}", m.reasons);
    assert!(m.reasons[0].contains("no_new_privs"));
    // Without a kernel layer nothing sets no_new_privs: the bit blocks, and the run
    // is refused anyway.
    let m = choose_mode(&linux, &KernelSupport::default());
    assert_eq!(m.mode, Mode::Refuse);
    assert!(!m.interposition);

    let caps = FileFacts {
        file_caps: true,
        ..FileFacts::default()
    };
    let linux = judge("elf", "dynamic-x86_64", "/opt/x", LINUX_X86, caps);
    assert_eq!(linux.blockers, vec![Blocker::FileCapabilities]);
    assert_eq!(choose_mode(&linux, &landlock()).mode, Mode::Full);
}

#[test]
fn elf_rules() {
    let i = judge(
        "elf",
        "dynamic-x86_64",
        "/usr/bin/x",
        LINUX_X86,
        FileFacts::default(),
    );
    assert_eq!(i.blockers, vec![]);
    assert!(matches!(
        &i.format,
        Format::Elf {
            interpreter: Some(_),
            class: 64,
            go: false,
            ..
        }
    ));
    assert_eq!(choose_mode(&i, &landlock()).mode, Mode::Full);

    let i = judge(
        "elf",
        "static-x86_64",
        "/x",
        LINUX_X86,
        FileFacts::default(),
    );
    assert_eq!(i.blockers, vec![Blocker::StaticElf]);
    let m = choose_mode(&i, &landlock());
    assert_eq!(m.mode, Mode::Kernel);
    assert!(m.fallthrough.iter().any(|f| f.covered_by.contains("proxy")));

    let i = judge("elf", "dynamic-i386", "/x", LINUX_X86, FileFacts::default());
    assert!(
        matches!(&i.blockers[..], [Blocker::ArchMismatch { .. }]),
        "{:?}",
        i.blockers
    );
    let i = judge(
        "elf",
        "dynamic-aarch64",
        "/x",
        LINUX_X86,
        FileFacts::default(),
    );
    assert!(matches!(&i.blockers[..], [Blocker::ArchMismatch { .. }]));

    let i = judge(
        "elf",
        "go-marked-x86_64",
        "/x",
        LINUX_X86,
        FileFacts::default(),
    );
    assert_eq!(i.blockers, vec![Blocker::GoRawSyscalls]);

    // ELF on a Mac host, Mach-O on a Linux host: foreign.
    let i = judge("elf", "dynamic-x86_64", "/x", MAC_X86, FileFacts::default());
    assert!(matches!(&i.blockers[..], [Blocker::ForeignFormat { .. }]));
    let i = macho("adhoc-x86_64", "/x", LINUX_X86);
    assert!(matches!(&i.blockers[..], [Blocker::ForeignFormat { .. }]));
}

#[test]
fn no_kernel_layer_means_refuse() {
    let i = macho("adhoc-arm64", "/opt/x", MAC_ARM);
    let m = choose_mode(&i, &KernelSupport::default());
    assert_eq!(m.mode, Mode::Refuse);
    assert!(
        m.interposition,
        "the interposer would load; the run is refused anyway"
    );
    // Landlock support says nothing about a Mac.
    assert_eq!(choose_mode(&i, &landlock()).mode, Mode::Refuse);
}

fn write_exec(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn shebang_env_is_resolved_through_path_and_launched_directly() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // `interp` is a real ELF program; `tool` says `#!/usr/bin/env interp -u`.
    write_exec(&bin.join("interp"), &fixture("elf", "static-x86_64"));
    write_exec(&bin.join("tool"), b"#!/usr/bin/env interp -u\nprint('x')\n");
    let path = std::env::join_paths([&bin, Path::new("/usr/bin"), Path::new("/bin")]).unwrap();
    let i = inspect("tool", &path, d.path(), LINUX_X86).unwrap();
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap();
    assert_eq!(i.binary, canon(&bin.join("interp")));
    assert_eq!(i.shebangs.len(), 1);
    assert_eq!(i.shebangs[0].interpreter, PathBuf::from("/usr/bin/env"));
    assert_eq!(i.shebangs[0].resolved_via_env, Some(bin.join("interp")));
    assert_eq!(
        i.launch,
        vec![bin.join("interp"), PathBuf::from("-u"), bin.join("tool")]
    );
    // The interpreter decides, not env: a static interpreter blocks interposition.
    assert_eq!(i.blockers, vec![Blocker::StaticElf]);

    // Two hops: tool2 → #!/usr/bin/env wrapper → #!<dir>/interp.
    write_exec(
        &bin.join("wrapper"),
        format!("#!{}\n", bin.join("interp").display()).as_bytes(),
    );
    write_exec(&bin.join("tool2"), b"#!/usr/bin/env wrapper\n");
    let i = inspect("tool2", &path, d.path(), LINUX_X86).unwrap();
    assert_eq!(i.shebangs.len(), 2);
    assert_eq!(
        i.launch,
        vec![bin.join("interp"), bin.join("wrapper"), bin.join("tool2")]
    );

    // A loop of scripts ends in an error, not a hang.
    write_exec(
        &bin.join("a"),
        format!("#!{}\n", bin.join("b").display()).as_bytes(),
    );
    write_exec(
        &bin.join("b"),
        format!("#!{}\n", bin.join("a").display()).as_bytes(),
    );
    assert!(inspect("a", &path, d.path(), LINUX_X86).is_err());
    // A missing env target is reported, not guessed.
    write_exec(&bin.join("c"), b"#!/usr/bin/env no-such-interpreter-xyz\n");
    assert!(inspect("c", &path, d.path(), LINUX_X86).is_err());
}

#[test]
fn sandpit_check_reports_mode_and_fallthrough() {
    let h = common::TestHome::new();
    let bin = h.home().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    h.give_to_test_user(&bin);
    write_exec(&bin.join("static-tool"), &fixture("elf", "static-x86_64"));
    write_exec(&bin.join("dyn-tool"), &fixture("elf", "dynamic-x86_64"));
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let no_landlock = common::machine_lacks("landlock");

    let out = h
        .sandpit()
        .env("PATH", &path)
        .args(["check", "--json", "--", "static-tool", "--flag"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        v["mode"],
        if no_landlock { "refuse" } else { "kernel" },
        "{stdout}"
    );
    assert_eq!(v["interposition"], false);
    let kinds: Vec<&str> = v["inspection"]["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"static_elf"), "{stdout}");
    assert_eq!(v["inspection"]["format"]["format"], "elf");
    assert!(v["kernel_support"]["landlock_abi"].is_number() != no_landlock);

    let out = h
        .sandpit()
        .env("PATH", &path)
        .args(["check", "--", "static-tool"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("interposition: not supported"), "{text}");
    assert!(text.contains("statically linked"), "{text}");
    if !no_landlock {
        assert!(text.contains("mode:          kernel"), "{text}");
        assert!(text.contains("falls through:"), "{text}");
    }

    // Positive control: a dynamic program of this machine's architecture.
    if cfg!(target_arch = "x86_64") {
        let out = h
            .sandpit()
            .env("PATH", &path)
            .args(["check", "--json", "--", "dyn-tool"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["interposition"], true, "{v}");
        assert_eq!(v["mode"], if no_landlock { "refuse" } else { "full" });
    }

    let out = h
        .sandpit()
        .env("PATH", &path)
        .args(["check", "--", "no-such-program-xyz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sandpit_check_prints_the_seatbelt_profile_of_the_policy() {
    let h = common::TestHome::new();
    let out = h
        .sandpit()
        .args([
            "check",
            "--seatbelt",
            "--proxy-port",
            "41234",
            "--json",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let sb = &v["seatbelt"];
    let sbpl = sb["sbpl"].as_str().unwrap();
    assert!(sbpl.contains("(allow network-outbound (remote tcp \"localhost:41234\"))"));
    let params: Vec<(String, String)> = serde_json::from_value(sb["params"].clone()).unwrap();
    // Seatbelt spells paths the macOS way (/tmp → /private/tmp), even on Linux.
    let has = |prefix: &str, value: &Path| {
        let value = sandpit::sandbox::macos::seatbelt::canonical(value).unwrap();
        params
            .iter()
            .any(|(k, v)| k.starts_with(prefix) && *v == value)
    };
    let ws = std::fs::canonicalize(h.workspace()).unwrap();
    let home = std::fs::canonicalize(h.home()).unwrap();
    assert!(has("WRITABLE_ROOT_", &ws), "{params:?}");
    assert!(has("READ_DENY_", &home.join(".ssh")), "{params:?}");
    assert!(has("WRITE_DENY_", &ws.join(".git/hooks")), "{params:?}");
    assert!(has("WRITE_DENY_", &home.join(".sandpit")), "{params:?}");
    // No path is spliced into the text.
    assert!(!sbpl.contains("sandpit-test-"));
    let args: Vec<String> = serde_json::from_value(sb["sandbox_exec_args"].clone()).unwrap();
    assert_eq!(args[0], "-p");
    assert_eq!(args[1], sbpl);
    assert_eq!(args.len(), 2 + params.len());

    // Without --seatbelt nothing about the policy is loaded or printed.
    let out = h
        .sandpit()
        .args(["check", "--json", "--", "true"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("seatbelt").is_none());
}

/// Corrupted binaries (flipped bytes, truncation) are judged, never a panic: the
/// inspector reads files the agent may have written.
#[test]
fn corrupted_binaries_never_panic() {
    let mut seed: u64 = 0x5eed_1234_abcd_0001;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let names = [
        ("macho", "universal-hardened"),
        ("macho", "hardened-entitled-arm64"),
        ("macho", "restrict-segment-arm64"),
        ("elf", "dynamic-x86_64"),
        ("elf", "static-x86_64"),
    ];
    let mut judged = 0;
    for (dir, name) in names {
        let original = fixture(dir, name);
        for round in 0..300 {
            let mut bytes = original.clone();
            if round % 10 == 0 {
                let cut = (next() as usize) % bytes.len();
                bytes.truncate(cut);
            }
            // Flip bytes in the headers and load commands, where parsers decide sizes
            // and offsets, and anywhere in the file.
            for _ in 0..(1 + next() % 8) {
                if bytes.is_empty() {
                    break;
                }
                let span = if next() % 2 == 0 {
                    bytes.len().min(4096)
                } else {
                    bytes.len()
                };
                let at = (next() as usize) % span;
                bytes[at] = next() as u8;
            }
            for host in [MAC_ARM, LINUX_X86] {
                let (_, blockers, _) =
                    analyze_binary(Path::new("/opt/x"), &bytes, &FileFacts::default(), host);
                let _ = blockers;
                judged += 1;
            }
            let _ = sandpit::inspect::codesign::parse(&bytes);
        }
    }
    assert_eq!(judged, 5 * 300 * 2);
}
