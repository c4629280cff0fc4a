//! One subcommand per file. Exit codes: 0 success, 2 usage or policy error,
//! 125 internal failure; `run`/`exec` pass the child's status through.
#![forbid(unsafe_code)]
use clap::{Parser, Subcommand};

pub mod check;
pub mod completions;
pub mod config;
pub mod exec;
pub mod explain;
pub mod init;
pub mod live;
pub mod log;
pub mod plan;
pub mod run;
pub mod wrap;

#[derive(Debug, Parser)]
#[command(
    name = "sandpit",
    version,
    about = "Run AI coding agents inside a sandbox: no secrets read, no writes outside the project, no blocked commands, no hosts you did not allow"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show which layers a run of BIN gets and why.
    Check(check::CheckArgs),
    /// Run a command inside the sandbox.
    Run(run::RunArgs),
    /// Show what `sandpit run` would do with these flags, nothing started.
    Plan(plan::Args),
    /// Show the effective policy, each entry with the file it came from.
    Config(config::Args),
    /// Say whether an action would be allowed, by which rule, and which layers enforce it.
    Explain(explain::Args),
    /// Write a commented starter config (never overwrites).
    Init(init::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::Args),
    /// Judge TOOL ARGS… against the policy and run it (PATH shims re-enter here).
    Exec(exec::Args),
    /// Show a run's audit log (default: the latest run).
    Log(log::Args),
    /// Make a launcher that runs an app, binary or desktop entry under sandpit.
    Wrap(wrap::Args),
    /// Let a running run reach HOST from now on (until it ends).
    Allow(live::Args),
    /// Refuse HOST to a running run from now on (until it ends).
    Deny(live::Args),
}

pub const EXIT_USAGE: i32 = 2;
pub const EXIT_INTERNAL: i32 = 125;

pub fn main() -> i32 {
    if let Some(code) = exec::fast_path() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    // Commands that only print: a reader that goes away (`sandpit config | head`)
    // ends them quietly, as it ends other tools, instead of a panic on the write.
    // Not `run` or `exec`, whose proxy and shims must outlive a closed pipe.
    if matches!(
        cli.command,
        Command::Check(_)
            | Command::Config(_)
            | Command::Explain(_)
            | Command::Plan(_)
            | Command::Completions(_)
            | Command::Log(_)
    ) {
        crate::sys::default_sigpipe();
    }
    let result = match cli.command {
        Command::Check(a) => check::run(a),
        Command::Config(a) => config::execute(a),
        Command::Explain(a) => explain::execute(a),
        Command::Init(a) => init::execute(a),
        Command::Completions(a) => completions::execute(a),
        Command::Run(a) => run::run(a),
        Command::Plan(a) => plan::execute(a),
        Command::Exec(a) => exec::execute(a),
        Command::Log(a) => log::execute(a),
        Command::Wrap(a) => wrap::execute(a),
        Command::Allow(a) => live::execute(crate::control::Op::Allow, a),
        Command::Deny(a) => live::execute(crate::control::Op::Deny, a),
    };
    match result {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

/// Print an error the way users act on it and pick the exit code: policy and usage
/// problems are 2, anything else is an internal failure (125).
pub fn report(e: &anyhow::Error) -> i32 {
    eprintln!("sandpit: error: {e}");
    let mut source = e.source();
    while let Some(s) = source {
        if !e.to_string().contains(&s.to_string()) {
            eprintln!("  caused by: {s}");
        }
        source = s.source();
    }
    if is_usage(e) {
        EXIT_USAGE
    } else {
        EXIT_INTERNAL
    }
}

fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<crate::config::ConfigError>()
            || c.is::<sandpit_policy::Error>()
            || c.is::<UsageError>()
            || c.downcast_ref::<crate::credentials::CredentialError>()
                .is_some_and(|e| e.is_config())
    })
}

/// A mistake in how the command was called.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
