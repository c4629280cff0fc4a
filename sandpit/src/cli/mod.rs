//! One subcommand per file. Exit codes: 0 success, 2 usage or policy error,
//! 125 internal failure; `run`/`exec` pass the child's status through.
use clap::{Parser, Subcommand};

pub mod run;

#[derive(Debug, Parser)]
#[command(
    name = "sandpit",
    version,
    about = "Run AI coding agents inside a sandbox"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command inside the sandbox.
    Run(run::RunArgs),
}

pub const EXIT_USAGE: i32 = 2;
pub const EXIT_INTERNAL: i32 = 125;

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match cli.command {
        Command::Run(args) => match run::run(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("sandpit: {e:#}");
                EXIT_INTERNAL
            }
        },
    }
}
