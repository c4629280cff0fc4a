//! What the policy crate's tests share: a context whose paths exist nowhere, and the
//! load options of a user config and a project file over it.
#![allow(dead_code)]
use sandpit_policy::{Context, Layer, LoadOptions, Source};

/// Home, workspace, scratch and state directory under paths no machine has.
pub fn ctx() -> Context {
    Context {
        home: "/nonexistent-home/u".into(),
        workspace: "/nonexistent-home/u/proj".into(),
        scratch: "/nonexistent-tmp/run".into(),
        state_dir: "/nonexistent-home/u/.sandpit".into(),
    }
}

/// The built-in default, `user` as `config.toml` and `project` as `.sandpit.toml`.
pub fn options(user: &str, project: Option<&str>) -> LoadOptions {
    let mut o = LoadOptions::new(ctx());
    o.user = Some(Source::new(Layer::User, "config.toml", user));
    o.project = project.map(|p| Source::new(Layer::Project, ".sandpit.toml", p));
    o
}
