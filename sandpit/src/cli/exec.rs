//! `sandpit exec TOOL ARGS…`: the re-entry point of the PATH shims, and
//! `sandpit exec --connect HOST PORT`, the ProxyCommand that tunnels ssh through
//! sandpit's proxy. The work is `sandpit_shims::exec`, shared with the small
//! `sandpit-shim` binary that `sandpit run --shims` links the shims to; the launcher
//! adds only the layered configuration for calls outside `sandpit run` (no
//! `SANDPIT_SNAPSHOT`), and the hidden helpers below.
use sandpit_policy::Policy;
use std::ffi::OsString;
use std::path::PathBuf;

pub use sandpit_shims::exec::{
    DEPTH_VAR, EXIT_BLOCKED, EXIT_NOT_FOUND, PROXY_URL_VAR, SHIM_DIR_VAR, SNAPSHOT_VAR,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Tunnel stdin/stdout to HOST PORT through sandpit's proxy (ssh ProxyCommand).
    #[arg(long, num_args = 2, value_names = ["HOST", "PORT"], conflicts_with = "argv")]
    pub connect: Option<Vec<String>>,
    /// Write the snapshot of the layered policy (as `sandpit run` would) to FILE and
    /// exit: for benchmarks and debugging.
    #[arg(long, value_name = "FILE", hide = true, conflicts_with_all = ["argv", "connect"])]
    pub write_snapshot: Option<PathBuf>,
    /// Extract the small shim binary (as `sandpit run --shims` does) into the state
    /// directory and print its path: for benchmarks and tests.
    #[arg(long, hide = true, conflicts_with_all = ["argv", "connect", "write_snapshot"])]
    pub install_shim: bool,
    /// The tool and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "TOOL"
    )]
    pub argv: Vec<OsString>,
}

/// The layered configuration, for `sandpit exec` outside `sandpit run` (slow, but
/// the same rules).
fn layered(tool: &str) -> Result<Policy, String> {
    crate::config::load(
        &crate::config::PolicyArgs::default(),
        Some(tool),
        crate::config::scratch_root(),
    )
    .map(|l| l.policy)
    .map_err(|e| format!("cannot load the policy: {e}"))
}

pub fn execute(a: Args) -> anyhow::Result<i32> {
    if let Some(c) = a.connect {
        return Ok(sandpit_shims::exec::connect(&c[0], &c[1], &layered));
    }
    if a.write_snapshot.is_some() || a.install_shim {
        let loaded = crate::config::load(
            &crate::config::PolicyArgs::default(),
            None,
            crate::config::scratch_root(),
        )?;
        if let Some(out) = a.write_snapshot {
            std::fs::write(&out, loaded.policy.snapshot())?;
        } else {
            let shim = crate::inject::install_shim(
                &loaded.policy.context.state_dir,
                crate::inject::Stamps::for_policy(&loaded.policy),
            )?;
            println!("{}", shim.path.display());
        }
        return Ok(0);
    }
    let mut it = a.argv.into_iter();
    let Some(tool) = it.next() else {
        return Err(crate::cli::UsageError("sandpit exec: name a TOOL".into()).into());
    };
    Ok(sandpit_shims::exec::run_tool(&tool, it.collect(), &layered))
}

/// Called first thing by `cli::main`: `TOOL …` through an argv[0] symlink, or
/// `sandpit exec TOOL …` without building the whole clap parser. `None`: not for us
/// (`--connect` and the hidden flags go through clap).
pub fn fast_path() -> Option<i32> {
    sandpit_shims::exec::dispatch(&layered, false)
}
