//! `sandpit plan [--json] [RUN FLAGS] -- CMD ARGS…`: what `sandpit run` would do
//! with the same flags, planned exactly as the run plans it (`crate::run`), with
//! nothing made or started: the effective policy's sources, each layer's part, the
//! paths the kernel layer makes writable, read-only and unreadable, the network,
//! and the environment withheld.
use anyhow::Result;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub run: crate::run::Request,
}

pub fn execute(args: Args) -> Result<i32> {
    #[cfg(target_os = "linux")]
    let (plan, line) = crate::run::linux::dry_run(&args.run)?;
    #[cfg(target_os = "macos")]
    let (plan, line) = crate::run::macos::dry_run(&args.run)?;
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let (plan, line): (crate::run::RunPlan, Option<String>) =
        anyhow::bail!("sandpit plan: this platform's kernel layer is not implemented yet");
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&crate::run::to_json(&plan, line.as_deref()))?
        );
    } else {
        print!("{}", crate::run::to_text(&plan, line.as_deref()));
    }
    Ok(0)
}
