//! Build script of the `sandpit` launcher (lives at the workspace root so the tree
//! shows it). It builds the interposition cdylib (`sandpit-dylib`) with a nested
//! `cargo build` — its own target dir under OUT_DIR, the same profile and target,
//! the caller's toolchain/linker environment forwarded so cross builds for apple
//! targets (cargo-zigbuild) keep working — and exposes its bytes to the launcher
//! through `$OUT_DIR/dylib.rs` (`include_bytes!`).
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
        "sandpit-shims/Cargo.toml",
        "sandpit-shims/src",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }

    let apple = target.contains("apple");
    let (built, name) = if apple {
        ("libsandpit_dylib.dylib", "libsandpit.dylib")
    } else {
        ("libsandpit_dylib.so", "libsandpit.so")
    };
    let embedded = out.join(name);

    // `cargo clippy` only checks: no binary is produced, so nothing is embedded and
    // no linker for the target is needed (the macOS cross-check lints without one).
    println!("cargo:rerun-if-env-changed=RUSTC_WORKSPACE_WRAPPER");
    let checking = env::var("RUSTC_WORKSPACE_WRAPPER")
        .map(|w| w.contains("clippy-driver"))
        .unwrap_or(false);
    if checking {
        if let Err(e) = std::fs::write(&embedded, b"") {
            eprintln!("build.rs: write {}: {e}", embedded.display());
            exit(1)
        }
        write_source(&out, &embedded, name);
        return;
    }

    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "-p", "sandpit-dylib", "--lib", "--target", &target])
        .arg("--target-dir")
        .arg(&target_dir);
    if release {
        cmd.arg("--release");
    }
    // Our own target dir; clippy's wrapper is for the outer build only; the rest of
    // the environment (RUSTC, CARGO_ENCODED_RUSTFLAGS, linker and CC variables set by
    // cargo-zigbuild, the jobserver) is forwarded as is.
    for k in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(k);
    }
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("build.rs: building sandpit-dylib failed ({s})");
            exit(1)
        }
        Err(e) => {
            eprintln!("build.rs: cannot run cargo: {e}");
            exit(1)
        }
    }

    let built = target_dir
        .join(&target)
        .join(if release { "release" } else { "debug" })
        .join(built);
    if let Err(e) = std::fs::copy(&built, &embedded) {
        eprintln!("build.rs: copy {}: {e}", built.display());
        exit(1)
    }
    write_source(&out, &embedded, name);
}

/// `$OUT_DIR/dylib.rs`: the embedded bytes, their SHA-256 (computed here, so a run
/// never hashes the library) and the name they are extracted under.
fn write_source(out: &Path, embedded: &Path, name: &str) {
    let bytes = match std::fs::read(embedded) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("build.rs: read {}: {e}", embedded.display());
            exit(1)
        }
    };
    let hash: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let src = format!(
        "/// The interposition library, as built for this target.\n\
         pub const DYLIB: &[u8] = include_bytes!({:?});\n\
         /// Hex SHA-256 of [`DYLIB`]: the directory it is extracted to.\n\
         pub const DYLIB_SHA256: &str = {:?};\n\
         /// The file name it is extracted under.\n\
         pub const DYLIB_FILE_NAME: &str = {:?};\n",
        embedded.display().to_string(),
        hash,
        name
    );
    if let Err(e) = std::fs::write(out.join("dylib.rs"), src) {
        eprintln!("build.rs: write dylib.rs: {e}");
        exit(1)
    }
}
