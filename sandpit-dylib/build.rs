//! Compiles the C shim for the variadic exec entry points.
fn main() {
    println!("cargo:rerun-if-changed=csrc/variadic.c");
    // The hooks are Linux-only so far (macOS `__interpose` registration is still to
    // come); other targets build an empty library.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    cc::Build::new()
        .file("csrc/variadic.c")
        .flag_if_supported("-fvisibility=hidden")
        .warnings(true)
        .compile("sandpit_variadic");
}
