//! Compiles the C shim for the variadic exec entry points.
fn main() {
    println!("cargo:rerun-if-changed=csrc/variadic.c");
    cc::Build::new()
        .file("csrc/variadic.c")
        .flag_if_supported("-fvisibility=hidden")
        .warnings(true)
        .compile("sandpit_variadic");
}
