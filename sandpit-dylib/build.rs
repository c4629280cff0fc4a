//! Compiles the C shims: the variadic exec entry points (both platforms) and, on
//! macOS, the trampolines for the variadic file entry points (`csrc/darwin.c`).
fn main() {
    println!("cargo:rerun-if-changed=csrc/variadic.c");
    println!("cargo:rerun-if-changed=csrc/darwin.c");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let mut b = cc::Build::new();
    b.file("csrc/variadic.c");
    match os.as_str() {
        "linux" => {}
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
