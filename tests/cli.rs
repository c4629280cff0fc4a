#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

#[test]
fn help_exits_zero_and_unknown_subcommand_is_usage_error() {
    let out = std::process::Command::new(common::sandpit_bin())
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = std::process::Command::new(common::sandpit_bin())
        .arg("frobnicate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn test_user_is_unprivileged() {
    let h = common::TestHome::new();
    let out = h.command("id").output().unwrap();
    let id = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{id}");
    if common::is_root() {
        assert!(id.starts_with("uid=65534"), "{id}");
        assert!(!id.contains("(root)"), "supplementary groups kept: {id}");
    }
}
