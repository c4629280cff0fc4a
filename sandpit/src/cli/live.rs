//! `sandpit allow HOST [--run RUN]` and `sandpit deny HOST [--run RUN]`: change the
//! network rules of a running run at once, through its launcher's control socket
//! (`crate::control`). Exit 0 when the change took effect, 1 when the run refused
//! it (the message says why), 2 when no run answered.
use crate::control::{self, Op};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A host name, `*.example.com`, or an address; `:PORT` for one port.
    pub host: String,
    /// The run to change (an id or a unique prefix); default: the latest running run.
    #[arg(long)]
    pub run: Option<String>,
}

pub fn execute(op: Op, args: Args) -> anyhow::Result<i32> {
    let state = crate::config::state_dir(&crate::config::home()?);
    match control::request(&state, args.run.as_deref(), op, &args.host) {
        Ok(m) => {
            println!("sandpit: {m}");
            Ok(0)
        }
        Err(m) if m.starts_with("no running run") || m.contains("names more than one") => {
            Err(crate::cli::UsageError(format!(
                "{m}; hint: `sandpit log --list` shows the runs and which are still running; without --run the latest running run is changed"
            ))
            .into())
        }
        Err(m) => {
            eprintln!("sandpit: {} {}: {m}", op.as_str(), args.host);
            Ok(1)
        }
    }
}
