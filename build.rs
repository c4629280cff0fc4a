//! Build script of the `sandpit` launcher (lives at the workspace root so the tree
//! shows it). It will build the interposition cdylib and embed its bytes.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
