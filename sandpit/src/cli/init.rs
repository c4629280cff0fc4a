//! `sandpit init [--project]`: write a commented starter config. Never overwrites.
use crate::config::{home, state_dir};
use std::io::Write;
use std::path::PathBuf;

/// The starter user config (`examples/config.toml`).
pub const USER_TEMPLATE: &str = include_str!("../../../examples/config.toml");
/// The starter project file (`examples/project.sandpit.toml`).
pub const PROJECT_TEMPLATE: &str = include_str!("../../../examples/project.sandpit.toml");

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write the project's .sandpit.toml in the current directory instead of
    /// ~/.sandpit/config.toml.
    #[arg(long)]
    pub project: bool,
    /// Print the starter config instead of writing it.
    #[arg(long)]
    pub print: bool,
}

pub fn execute(args: Args) -> anyhow::Result<i32> {
    let text = if args.project {
        PROJECT_TEMPLATE
    } else {
        USER_TEMPLATE
    };
    if args.print {
        print!("{text}");
        return Ok(0);
    }
    let target: PathBuf = if args.project {
        std::env::current_dir()?.join(".sandpit.toml")
    } else {
        let dir = state_dir(&home()?);
        std::fs::DirBuilder::new().recursive(true).create(&dir)?;
        dir.join("config.toml")
    };
    // create_new: an existing file, or a symlink planted in its place, is never touched.
    let mut f = match std::fs::OpenOptions::new().write(true).create_new(true).open(&target) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(crate::cli::UsageError(format!(
                "{} already exists; sandpit init never overwrites. Edit it, or see the starter with `sandpit init --print{}`",
                target.display(),
                if args.project { " --project" } else { "" }
            ))
            .into())
        }
        Err(e) => return Err(anyhow::Error::new(e).context(format!("cannot create {}", target.display()))),
    };
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    eprintln!(
        "sandpit: wrote {}; check it with `sandpit config`",
        target.display()
    );
    Ok(0)
}
