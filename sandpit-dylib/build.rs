//! Compiles the C shims: the variadic exec entry points (both platforms) and, on
//! macOS, the trampolines for the variadic file entry points (`csrc/darwin.c`).
fn main() {
    println!("cargo:rerun-if-changed=csrc/variadic.c");
    println!("cargo:rerun-if-changed=csrc/darwin.c");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let mut b = cc::Build::new();
    b.file("csrc/variadic.c");
    match os.as_str() {
        "linux" => {
            if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu") {
                // The unwinder linked in (hidden) instead of libgcc_s.so: that
                // library's constructor probes the CPU with `cpuid`, which traps
                // under virtualisation, in every process the library is loaded
                // into (~0.14 ms per exec here, bench/run_startup.sh). Whole archive,
                // because std's references to it come later on the link line;
                // `--as-needed` then drops libgcc_s.
                println!("cargo:rustc-link-lib=static:+whole-archive=gcc_eh");
            }
        }
        "macos" => {
            b.file("csrc/darwin.c");
        }
        // Other targets build an empty library.
        _ => return,
    }
    b.flag_if_supported("-fvisibility=hidden")
        .warnings(true)
        .compile("sandpit_variadic");
}
