#[test]
fn binary_runs() {
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_sandpit")).status().unwrap();
    assert!(st.success());
}
