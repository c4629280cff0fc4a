//! Build script of the `sandpit` launcher (lives at the workspace root so the tree
//! shows it). It builds the interposition cdylib (`sandpit-dylib`) with a nested
//! `cargo build` — its own target dir under OUT_DIR, the same profile and target,
//! the caller's toolchain/linker environment forwarded so cross builds for apple
//! targets (cargo-zigbuild) keep working — and exposes its bytes to the launcher
//! through `$OUT_DIR/dylib.rs` (`include_bytes!`). The same nested build makes the
//! small `sandpit-shim` binary (from `sandpit-shims`) that the PATH shims link to,
//! embedded the same way.
use sha2::Digest;
use std::env;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

fn var(k: &str) -> String {
    match env::var(k) {
        Ok(v) => v,
        Err(_) => {
            eprintln!("build.rs: {k} is not set");
            exit(1)
        }
    }
}

fn main() {
    let out = PathBuf::from(var("OUT_DIR"));
    let manifest = PathBuf::from(var("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().unwrap_or(Path::new(".")).to_path_buf();
    let target = var("TARGET");
    let release = var("PROFILE") == "release";
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = out.join("dylib-target");

    for p in [
        "build.rs",
        "Cargo.lock",
        "sandpit-dylib/Cargo.toml",
        "sandpit-dylib/build.rs",
        "sandpit-dylib/src",
        "sandpit-dylib/csrc",
        "sandpit-policy/Cargo.toml",
        "sandpit-policy/src",
        "sandpit-review/Cargo.toml",
        "sandpit-review/src",
        "sandpit-shims/Cargo.toml",
        "sandpit-shims/src",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }

    if target.contains("-linux-gnu") {
        // The launcher, too, links the unwinder in instead of loading libgcc_s.so,
        // whose constructor's `cpuid` probing traps under virtualisation (see
        // sandpit-dylib/build.rs).
        println!("cargo:rustc-link-lib=static:-bundle,+whole-archive=gcc_eh");
    }

    let apple = target.contains("apple");
    let (built, name) = if apple {
        ("libsandpit_dylib.dylib", "libsandpit.dylib")
    } else {
        ("libsandpit_dylib.so", "libsandpit.so")
    };
    let embedded = out.join(name);
    let embedded_shim = out.join("sandpit-shim");

    // `cargo clippy` only checks: no binary is produced, so nothing is embedded and
    // no linker for the target is needed (the macOS cross-check lints without one).
    println!("cargo:rerun-if-env-changed=RUSTC_WORKSPACE_WRAPPER");
    let checking = env::var("RUSTC_WORKSPACE_WRAPPER")
        .map(|w| w.contains("clippy-driver"))
        .unwrap_or(false);
    if checking {
        for f in [&embedded, &embedded_shim] {
            if let Err(e) = std::fs::write(f, b"") {
                eprintln!("build.rs: write {}: {e}", f.display());
                exit(1)
            }
        }
        write_source(&out, &embedded, name, &embedded_shim);
        return;
    }

    // The interposer, then the shim binary in the same target dir (its dependencies
    // are built once, with the same flags). On Linux the shim is linked static and
    // not position-independent (flags for the final binary only, via `cargo
    // rustc`): no dynamic loader, no libgcc_s, and none of the ~10k start-up
    // relocations a PIE of this size has — each touches a page. That halves its
    // start-up cost (bench/shim_exec.sh). It also never loads the interposer (a
    // static binary ignores LD_PRELOAD); the tool it execs does.
    let mut dylib = Command::new(&cargo);
    dylib.args(["build", "-p", "sandpit-dylib", "--lib"]);
    let mut shim = Command::new(&cargo);
    shim.args(["rustc", "-p", "sandpit-shims", "--bin", "sandpit-shim"]);
    // On glibc Linux the shim is built for musl when that target is installed
    // (.ci/install adds it): musl's start-up skips glibc's CPU-feature probing
    // (cpuid, which traps under virtualisation) — about 0.35 ms less per shimmed
    // command on this project's machines. Without it, glibc linked static.
    let shim_target = musl_sibling(&target).unwrap_or_else(|| target.clone());
    // A launcher built for musl (`--target <arch>-unknown-linux-musl`: static, so its
    // own start skips the dynamic loader and glibc's CPU-feature probing) still
    // injects a glibc interposer: the programs it runs load through glibc's loader.
    let dylib_target = gnu_sibling(&target).unwrap_or_else(|| target.clone());
    for (what, mut cmd, for_target) in [
        ("sandpit-dylib", dylib, &dylib_target),
        ("sandpit-shim", shim, &shim_target),
    ] {
        cmd.current_dir(&root)
            .args(["--target", for_target])
            .arg("--target-dir")
            .arg(&target_dir);
        if release {
            cmd.arg("--release");
        }
        if what == "sandpit-shim" && target.contains("-linux-") {
            // Without debug info: the launcher embeds it and hashes it on every
            // run with shims (30 MB in a debug build otherwise).
            cmd.args([
                "--",
                "-C",
                "relocation-model=static",
                "-C",
                "target-feature=+crt-static",
                "-C",
                "strip=debuginfo",
            ]);
        }
        // Our own target dir; clippy's wrapper is for the outer build only; the rest
        // of the environment (RUSTC, CARGO_ENCODED_RUSTFLAGS, linker and CC variables
        // set by cargo-zigbuild, the jobserver) is forwarded as is.
        for k in [
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET_DIR",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_PRIMARY_PACKAGE",
        ] {
            cmd.env_remove(k);
        }
        if *for_target != target {
            // The outer build's rustflags are for its own target (a musl launcher's
            // `-C relocation-model=…`), not for the glibc interposer built beside it.
            cmd.env_remove("CARGO_ENCODED_RUSTFLAGS");
        }
        if what == "sandpit-shim" && target.contains("-linux-") {
            // The shim's flags below say all it is: a static launcher's static-pie
            // flags (in CARGO_ENCODED_RUSTFLAGS or the target's own variable) would
            // make it position-independent, with start-up relocations.
            cmd.env_remove("CARGO_ENCODED_RUSTFLAGS")
                .env_remove(format!(
                    "CARGO_TARGET_{}_RUSTFLAGS",
                    for_target.to_uppercase().replace('-', "_")
                ));
        }
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("build.rs: building {what} failed ({s})");
                exit(1)
            }
            Err(e) => {
                eprintln!("build.rs: cannot run cargo: {e}");
                exit(1)
            }
        }
    }

    let profile = if release { "release" } else { "debug" };
    for (from, to) in [
        (
            target_dir.join(&dylib_target).join(profile).join(built),
            &embedded,
        ),
        (
            target_dir
                .join(&shim_target)
                .join(profile)
                .join("sandpit-shim"),
            &embedded_shim,
        ),
    ] {
        if let Err(e) = std::fs::copy(&from, to) {
            eprintln!("build.rs: copy {}: {e}", from.display());
            exit(1)
        }
    }
    write_source(&out, &embedded, name, &embedded_shim);
}

/// `x86_64-unknown-linux-gnu` for `x86_64-unknown-linux-musl` (any arch).
fn gnu_sibling(target: &str) -> Option<String> {
    Some(format!("{}-gnu", target.strip_suffix("-musl")?))
}

/// `x86_64-unknown-linux-musl` for `x86_64-unknown-linux-gnu` (any arch), if the
/// toolchain has its standard library installed.
fn musl_sibling(target: &str) -> Option<String> {
    let musl = format!("{}-musl", target.strip_suffix("-gnu")?);
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let lib = Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(&musl)
        .join("lib");
    lib.is_dir().then_some(musl)
}

/// `$OUT_DIR/dylib.rs`: the embedded bytes of the library and of the shim binary,
/// their SHA-256 (computed here, so a run never hashes them) and the library's name.
fn write_source(out: &Path, embedded: &Path, name: &str, shim: &Path) {
    let hash = |p: &Path| -> String {
        let bytes = match std::fs::read(p) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("build.rs: read {}: {e}", p.display());
                exit(1)
            }
        };
        sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let src = format!(
        "/// The interposition library, as built for this target.\n\
         pub const DYLIB: &[u8] = include_bytes!({:?});\n\
         /// Hex SHA-256 of [`DYLIB`]: the directory it is extracted to.\n\
         pub const DYLIB_SHA256: &str = {:?};\n\
         /// The file name it is extracted under.\n\
         pub const DYLIB_FILE_NAME: &str = {:?};\n\
         /// The small binary the PATH shims link to (`sandpit-shims`' `sandpit-shim`).\n\
         pub const SHIM_BIN: &[u8] = include_bytes!({:?});\n\
         /// Hex SHA-256 of [`SHIM_BIN`].\n\
         pub const SHIM_SHA256: &str = {:?};\n",
        embedded.display().to_string(),
        hash(embedded),
        name,
        shim.display().to_string(),
        hash(shim)
    );
    if let Err(e) = std::fs::write(out.join("dylib.rs"), src) {
        eprintln!("build.rs: write dylib.rs: {e}");
        exit(1)
    }
}
