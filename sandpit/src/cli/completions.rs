//! `sandpit completions bash|zsh|fish`: shell completion scripts, generated from the
//! same definitions the parser uses.
use clap::CommandFactory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to generate for.
    pub shell: clap_complete::Shell,
}

pub fn execute(args: Args) -> anyhow::Result<i32> {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "sandpit", &mut std::io::stdout());
    Ok(0)
}
