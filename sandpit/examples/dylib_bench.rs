//! open+close per call, bare vs under the interposer, at path depths 2, 4 and 10.
//! Run through `bench/open_close.sh` (release build). Prints ns/call and the ratio
//! measured in the same run; the goal is ≤ 1.10× bare.
use anyhow::{bail, Context as _, Result};
use sandpit_policy::{Context, LoadOptions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn measure(bin: &Path, path: &Path, iters: &str, env: &[(String, String)]) -> Result<f64> {
    let out = Command::new(bin)
        .arg(path)
        .arg(iters)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()?;
    if !out.status.success() {
        bail!("bench failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::Builder::new()
        .prefix("sandpit-bench-")
        .tempdir_in("/tmp")?;
    let base = std::fs::canonicalize(dir.path())?;
    let home = base.join("home");
    let ws = home.join("project");
    let state = home.join(".sandpit");
    std::fs::create_dir_all(&ws)?;
    let ctx = Context {
        home: home.clone(),
        workspace: ws.clone(),
        scratch: base.join("scratch"),
        state_dir: state.clone(),
    };
    // The built-in default policy (about 40 credential paths, protected files).
    let policy = sandpit_policy::load(&LoadOptions::new(ctx))?;
    let lib = sandpit::inject::install(&state, sandpit::inject::Stamps::Trusted)?;
    let run = state.join("run");
    std::fs::create_dir_all(&run)?;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700))?;
    let snapshot = run.join("policy.snapshot");
    std::fs::write(&snapshot, policy.snapshot())?;
    std::fs::set_permissions(&snapshot, std::fs::Permissions::from_mode(0o600))?;
    let env: Vec<(String, String)> = sandpit::inject::child_env(
        None,
        &lib,
        &snapshot,
        &state,
        &sandpit::inject::Endpoints::default(),
    )
    .into_iter()
    .map(|(k, v)| {
        (
            k.to_string_lossy().into_owned(),
            v.to_string_lossy().into_owned(),
        )
    })
    .collect();

    let bin = base.join("open_close");
    let st = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(root.join("bench/open_close.c"))
        .status()
        .context("cc")?;
    if !st.success() {
        bail!("compiling bench/open_close.c failed");
    }
    if std::env::var_os("SANDPIT_BENCH_KEEP").is_some() {
        // For profiling: leave the setup in place and print how to run it.
        let kept = dir.keep();
        let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "kept {}: env {} {} PATH ITERS",
            kept.display(),
            vars.join(" "),
            bin.display()
        );
        return Ok(());
    }
    let iters = std::env::var("ITERS").unwrap_or_else(|_| "100000".into());
    println!("open+close per call, best of 7 runs × 5 rounds × {iters} iterations");
    println!(
        "{:>6} {:>10} {:>10} {:>7}",
        "depth", "bare ns", "hooked ns", "ratio"
    );
    for depth in [2usize, 4, 10] {
        // A file `depth` components below `/`: /tmp/<bench>/… as needed.
        let mut p = PathBuf::from("/");
        let mut comps: Vec<String> = base
            .components()
            .skip(1)
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        while comps.len() < depth - 1 {
            comps.push(format!("d{}", comps.len()));
        }
        comps.truncate(depth - 1);
        for c in &comps {
            p.push(c);
        }
        std::fs::create_dir_all(&p)?;
        p.push(format!("f{depth}"));
        std::fs::write(&p, "x")?;
        // Alternate bare and hooked runs and keep the best of each: the machine is
        // shared, and the minimum is the least disturbed measurement.
        let (mut bare, mut hooked) = (f64::MAX, f64::MAX);
        for _ in 0..7 {
            bare = bare.min(measure(&bin, &p, &iters, &[])?);
            hooked = hooked.min(measure(&bin, &p, &iters, &env)?);
        }
        println!(
            "{depth:>6} {bare:>10.1} {hooked:>10.1} {:>6.2}x",
            hooked / bare
        );
        if std::env::var_os("BENCH_RESULT").is_some() {
            // Machine-readable lines for bench/report.sh.
            println!("RESULT oc_interposer_d{depth}_bare {bare:.1} ns");
            println!("RESULT oc_interposer_d{depth}_hooked {hooked:.1} ns");
        }
    }
    Ok(())
}
