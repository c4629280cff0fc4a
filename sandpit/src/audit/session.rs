//! One run's audit session, as `sandpit run` uses it: [`Session::start`] before the
//! kernel plan is applied (it creates the log, the run directory under
//! `~/.sandpit/run/`, the interposer's socket and, when asked, the interposer's
//! policy snapshot), [`Session::child_env`] for the child, [`Session::finish`] after
//! the command exits (exit record, summary on stderr, learned draft).
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::socket::Listener;
use super::{learn, private_dir, summary, AuditError, AuditLog, Decision, Layer, Record};

/// `sandpit run` flags of this module.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunOptions {
    /// Learn mode: the interposer records what it would deny instead of denying it
    /// (the kernel layer still holds), and a draft policy of what the run needed is
    /// written to ~/.sandpit/learned/RUN.toml.
    #[arg(long)]
    pub learn: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error("a run id needs random bytes: {0}")]
    RunId(String),
    #[error("interposer: {0}")]
    Inject(#[from] crate::inject::InjectError),
    #[error("interposer: the value of {0} is not valid UTF-8 (the home directory's path?)")]
    NotUtf8(String),
    #[error("{0}; the command was not started (fix or remove [telemetry] in the file named)")]
    Telemetry(#[from] super::otlp::ExportError),
}

pub struct Session {
    log: Arc<AuditLog>,
    listener: Option<Listener>,
    audit_sock: Option<PathBuf>,
    run_dir: PathBuf,
    env: Vec<(String, String)>,
    learn: bool,
    home: PathBuf,
    state_dir: PathBuf,
    /// Why refusals of this run may go unrecorded (the interposer is off, or the
    /// agent itself is static): said when the command fails with none recorded.
    unrecorded: Option<String>,
    /// `limits.launcher_cpu`, which the audit socket's reader and the kernel
    /// layer's refusal reports pace themselves on.
    launcher_cpu: Arc<crate::cpu::Share>,
    /// Lines said again after the summary ([`Session::note_at_end`]).
    end_notes: Vec<String>,
    /// The run-later files the end of the run reports on when they changed
    /// (`sandpit_policy::runlater`, [`Treatment::Reported`]), as they were at start.
    ///
    /// [`Treatment::Reported`]: sandpit_policy::runlater::Treatment::Reported
    reported: Vec<(
        PathBuf,
        Option<Stamp>,
        &'static sandpit_policy::runlater::Entry,
    )>,
    /// The policy's context: where the registry's files are for this run.
    context: sandpit_policy::Context,
}

/// What a file was at the start of the run, enough to tell that it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stamp(p: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).ok()?;
    Some(Stamp {
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

impl Session {
    /// Open the log for a run of `argv` under `policy`.
    pub fn start(
        policy: &sandpit_policy::Policy,
        opts: &RunOptions,
        argv: &[OsString],
    ) -> Result<Session, SessionError> {
        let run = super::new_run_id().map_err(|e| SessionError::RunId(e.to_string()))?;
        Self::start_as(policy, opts, argv, run)
    }

    /// [`Session::start`] for the run id `run` ([`super::new_run_id`]) the run was
    /// planned with: its directory is [`super::run_dir`].
    pub fn start_as(
        policy: &sandpit_policy::Policy,
        opts: &RunOptions,
        argv: &[OsString],
        run: String,
    ) -> Result<Session, SessionError> {
        let ctx = &policy.context;
        // Checked before the log exists: a bad endpoint stops the run with nothing made.
        let target = super::otlp::Target::from_policy(policy)?;
        let mut log = AuditLog::create(&ctx.state_dir, &run)?.with_policy(policy.clone());
        if let Some(t) = target {
            log = log.with_exporter(super::otlp::Exporter::new(t, &run));
        }
        let log = Arc::new(log);
        let limits = &policy.limits;
        super::prune_logs(
            &ctx.state_dir,
            limits.logs_days.value,
            limits.logs_bytes.value,
            log.path(),
        );
        let runs = ctx.state_dir.join("run");
        private_dir(&runs)?;
        remove_stale_runs(&runs);
        let run_dir = super::run_dir(&ctx.state_dir, &run);
        // On Linux one of the placeholders' spares (made ahead in the state directory,
        // `sandbox/linux/spare.rs`), renamed into place: a `mkdir` on a disk mounted
        // `-o discard` waits for the device.
        #[cfg(target_os = "linux")]
        if crate::sandbox::linux::Spares::new(Some(ctx.state_dir.clone()))
            .make(&run_dir)
            .is_ok()
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o700))
                .map_err(super::io(&run_dir))?;
        }
        private_dir(&run_dir)?;
        let mut s = Session {
            log,
            listener: None,
            audit_sock: None,
            run_dir,
            env: vec![],
            learn: opts.learn,
            home: ctx.home.clone(),
            state_dir: ctx.state_dir.clone(),
            unrecorded: None,
            launcher_cpu: crate::cpu::Share::new(&policy.limits.launcher_cpu),
            reported: sandpit_policy::runlater::reported(ctx)
                .into_iter()
                .map(|(p, e)| {
                    let st = stamp(&p);
                    (p, st, e)
                })
                .collect(),
            context: ctx.clone(),
            end_notes: vec![],
        };
        let shown: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut start = Record::new(
            &run,
            Layer::Launcher,
            "start",
            shown.join(" "),
            Decision::Info,
        );
        start.program = shown.first().cloned();
        start.argv = shown;
        let mut notes = vec![];
        // The socket is there for every run, so any layer inside (the interposer,
        // `sandpit exec` shims) can report; SANDPIT_AUDIT names it.
        let sock = s.run_dir.join("audit.sock");
        match Listener::start(&sock, s.log.clone(), Some(s.launcher_cpu.clone())) {
            Ok(l) => {
                s.listener = Some(l);
                s.audit_sock = Some(sock);
            }
            Err(e) => {
                eprintln!("sandpit: warning: denials inside the sandbox will not be logged: {e}");
                notes.push(format!("no audit socket: {e}"));
            }
        }
        if let Some(p) = s.audit_sock.as_ref().and_then(|p| p.to_str()) {
            s.env
                .push((crate::inject::AUDIT_VAR.to_string(), p.to_string()));
        }
        if opts.learn {
            // The interposer records instead of denying: the launcher's snapshot says
            // so (`Policy::learn`, set by the caller), never the environment.
            notes.push(
                "learn mode (would-be denials recorded and allowed; the kernel layer still denies)"
                    .into(),
            );
        }
        start.reason = notes.join("; ");
        s.log.record(start);
        Ok(s)
    }

    pub fn run(&self) -> &str {
        self.log.run()
    }

    /// Record what the layers inside report while the command runs (a thread of its
    /// own; started after the sandbox's processes are forked). Until then, and at
    /// [`Session::finish`], reports wait queued on the socket.
    pub fn listen(&self) {
        if let Some(x) = self.log.exporter() {
            x.start();
        }
        if let Some(Err(e)) = self.listener.as_ref().map(Listener::read) {
            eprintln!("sandpit: warning: denials inside the sandbox are logged only when the run ends: {e}");
        }
    }
    /// The socket layers inside the sandbox report denials to.
    /// `<state>/run/<id>`: this run's private directory, removed when the session ends.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    pub fn audit_socket(&self) -> Option<PathBuf> {
        self.audit_sock.clone()
    }
    pub fn log_path(&self) -> &Path {
        self.log.path()
    }
    /// What the reviewer calls with each verdict: a `reviewer` record in the log.
    pub fn verdict_recorder(&self) -> Arc<super::VerdictRecorder> {
        let log = self.log.clone();
        Arc::new(
            move |action: &str, subject: &[String], v: &sandpit_policy::Verdict| {
                log.record(super::reviewer_record(log.run(), action, subject, v))
            },
        )
    }

    /// How the OTLP export masks secrets (`[telemetry]`; the launcher's glue builds
    /// it from the reviewer's redactor). Without one nothing is exported.
    pub fn set_export_masker(&self, m: super::otlp::MaskerFactory) {
        if let Some(x) = self.log.exporter() {
            x.set_masker(m);
        }
    }

    /// The run's share of the launcher's CPU (`limits.launcher_cpu`), for the
    /// threads that do work the sandbox asks for unasked (the refusal reports).
    pub fn launcher_cpu(&self) -> Arc<crate::cpu::Share> {
        self.launcher_cpu.clone()
    }

    /// Say `line` again after the run's summary (the variables withheld from the
    /// agent, with the line that gives one back: where a failing agent's user
    /// looks).
    pub fn note_at_end(&mut self, line: String) {
        self.end_notes.push(line);
    }

    /// The log, as the proxy's and DNS responder's audit sink.
    pub fn sink(&self) -> Arc<AuditLog> {
        self.log.clone()
    }

    /// Record which kernel layer the run got (the start-up line).
    /// A file the run left that the user's tools would run code from, moved aside by
    /// the launcher to `to`.
    pub fn quarantined(&self, path: &Path, to: &Path, why: &str) {
        let mut r = Record::new(
            self.log.run(),
            Layer::Launcher,
            "quarantine",
            path.display().to_string(),
            Decision::Deny,
        );
        r.reason = format!("moved to {}: {why}", to.display());
        self.log.record(r);
    }

    /// Why some refusals of this run go unrecorded, if they may
    /// (`launch::Prepared::unrecorded`).
    pub fn set_unrecorded(&mut self, why: Option<String>) {
        self.unrecorded = why;
    }

    pub fn kernel_layer(&self, line: &str) {
        let mut r = Record::new(
            self.log.run(),
            Layer::Kernel,
            "setup",
            String::new(),
            Decision::Info,
        );
        r.reason = line.to_string();
        self.log.record(r);
    }

    /// Record each reported run-later file the run created or changed (a `write`
    /// record of the launcher's, naming the registry); returns them.
    fn record_reported(&self) -> Vec<summary::Changed> {
        let mut out = vec![];
        for (p, before, e) in &self.reported {
            let now = stamp(p);
            if now == *before {
                continue;
            }
            let how = match (before, now) {
                (None, Some(_)) => "created",
                (Some(_), None) => "removed",
                _ => "changed",
            };
            let mut r = Record::new(
                self.log.run(),
                Layer::Launcher,
                "write",
                p.display().to_string(),
                Decision::Info,
            );
            r.rule = Some(super::RuleRef {
                file: sandpit_policy::runlater::ORIGIN.into(),
                key: "runlater".into(),
                entry: e.path.into(),
                line: 0,
                col: 0,
            });
            r.reason = format!(
                "the run {how} a file the host runs later: {} ({}); it runs when you run the \
                 project, review it first",
                e.tool, e.runs
            );
            self.log.record(r);
            out.push(summary::Changed {
                path: p.clone(),
                how,
                entry: e,
            });
        }
        out
    }

    /// Variables to add to the child's environment.
    pub fn child_env(&self) -> Vec<(String, String)> {
        self.env.clone()
    }

    /// Log the exit, print the summary, write the learned draft. `exit` is the
    /// command's status (`None`: it did not run).
    pub fn finish(mut self, exit: Option<i32>) {
        if let Some(l) = self.listener.take() {
            l.finish();
        }
        if let Some(line) = self.log.close_summarised() {
            eprintln!("{line}");
        }
        // Recorded and said once: the limit slowed the workload.
        if let Some(line) = self.launcher_cpu.reached_line() {
            let mut r = Record::new(
                self.log.run(),
                Layer::Launcher,
                "limit",
                "limits.launcher_cpu".into(),
                Decision::Info,
            );
            r.reason = line.trim_start_matches("sandpit: ").to_string();
            self.log.record(r);
            eprintln!("{line}");
        }
        let changed = self.record_reported();
        let mut r = Record::new(
            self.log.run(),
            Layer::Launcher,
            "exit",
            exit.map(|c| c.to_string())
                .unwrap_or_else(|| "not started".into()),
            Decision::Info,
        );
        r.reason = match exit {
            Some(c) => format!("the command exited with status {c}"),
            None => "the command did not start".into(),
        };
        self.log.record(r);
        self.finish_export();
        let denials = self.log.denials();
        if let Some(text) = summary::render(&self.home, self.log.run(), self.log.path(), &denials) {
            eprint!("{text}");
        }
        if let Some(line) = summary::runlater_line(&self.context, &denials, &changed) {
            eprintln!("{line}");
        }
        for n in &self.end_notes {
            eprintln!("{n}");
        }
        // A failure with nothing recorded, where the kernel layer refuses unseen:
        // the user is told where the refusal may be, not left with silence.
        if let (Some(c), true, Some(why)) = (exit, denials.is_empty(), &self.unrecorded) {
            if c != 0 {
                // On Linux the launcher's notifier reports the paths the kernel
                // layer refuses (sandbox/linux/notify.rs); Seatbelt's are unseen.
                let unseen = if cfg!(target_os = "linux") {
                    "the kernel layer reports the paths it refuses, not what else it holds \
                     back (a masked file read as empty or missing, an unreachable address)"
                } else {
                    "what the kernel layer refuses alone is not recorded (a read-only file \
                     system, a masked file read as empty or missing, an unreachable address)"
                };
                eprintln!(
                    "sandpit: the command exited with status {c} and no layer recorded a \
                     refusal; {why}: {unseen}. `sandpit explain read|write|connect …` says \
                     what the policy allows"
                );
            }
        }
        if self.learn {
            let text = learn::draft(&self.home, self.log.run(), &denials);
            match learn::write(&self.state_dir, self.log.run(), &text) {
                Ok(p) => eprintln!(
                    "sandpit: learned draft policy: {} (review it; use with --config {})",
                    p.display(),
                    p.display()
                ),
                Err(e) => eprintln!("sandpit: warning: could not write the learned draft: {e}"),
            }
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

impl Session {
    /// Send what is left to the collector (bounded), then record and say what was
    /// not exported: one line, once.
    fn finish_export(&self) {
        let Some(x) = self.log.exporter() else {
            return;
        };
        let out = x.finish();
        let mut r = Record::new(
            self.log.run(),
            Layer::Launcher,
            "telemetry",
            out.endpoint.clone(),
            Decision::Info,
        );
        r.reason = format!(
            "{} records exported over OTLP, {} not",
            out.exported, out.lost
        );
        if let Some(line) = out.line(self.log.path()) {
            eprintln!("{line}");
            r.reason = line.trim_start_matches("sandpit: telemetry: ").to_string();
        }
        // Local only: the exporter is closed.
        self.log.record(r);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(l) = self.listener.take() {
            l.finish();
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

/// Remove run directories left by launchers that no longer exist (killed with
/// SIGKILL, a crash): named `<time>-<pid>`, and that pid is gone.
fn remove_stale_runs(runs: &Path) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.rsplit_once('-'))
            .and_then(|(_, p)| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sandpit_policy::{Context, Layer as L, LoadOptions, Source};

    /// The default policy plus `user` for a fake home under `dir`.
    pub fn policy(dir: &Path, user: &str) -> sandpit_policy::Policy {
        let home = dir.join("home");
        std::fs::create_dir_all(home.join("project")).unwrap();
        let ctx = Context {
            home: home.clone(),
            workspace: home.join("project"),
            scratch: dir.join("scratch"),
            state_dir: home.join(".sandpit"),
        };
        let mut o = LoadOptions::new(ctx);
        o.user = Some(Source::new(
            L::User,
            home.join(".sandpit/config.toml").display().to_string(),
            user,
        ));
        sandpit_policy::load(&o).unwrap()
    }

    #[test]
    fn reports_are_logged_while_the_command_runs_once_listening() {
        let d = tempfile::tempdir().unwrap();
        let p = policy(d.path(), "");
        let s = Session::start(&p, &RunOptions::default(), &["true".into()]).unwrap();
        let sock = s.run_dir.join("audit.sock");
        let logged = |n: usize| crate::audit::read_log(s.log_path()).unwrap().len() == n;
        // Before `listen`, a report waits queued (the launcher is about to fork).
        crate::audit::socket::send(&sock, "shims", "exec", "sandpit: blocked", &["curl", "a"]);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(logged(1), "only the start record before listening");
        s.listen();
        crate::audit::socket::send(&sock, "shims", "exec", "sandpit: blocked", &["curl", "b"]);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !logged(3) {
            assert!(
                std::time::Instant::now() < until,
                "reports not logged while running"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let log = s.log_path().to_path_buf();
        s.finish(Some(0));
        let subjects: Vec<String> = crate::audit::read_log(&log)
            .unwrap()
            .into_iter()
            .map(|r| r.subject)
            .collect();
        assert_eq!(subjects[1..3], ["curl a", "curl b"], "in the order sent");
    }

    #[test]
    fn session_logs_start_and_exit_and_cleans_up() {
        let d = tempfile::tempdir().unwrap();
        let p = policy(d.path(), "");
        let s = Session::start(&p, &RunOptions::default(), &["true".into()]).unwrap();
        let log = s.log_path().to_path_buf();
        let run_dir = s.run_dir.clone();
        assert!(run_dir.is_dir());
        let sock = run_dir.join("audit.sock");
        assert_eq!(
            s.child_env(),
            vec![(
                "SANDPIT_AUDIT".to_string(),
                sock.to_str().unwrap().to_string()
            )]
        );
        // What a layer inside sends arrives in the log, with its layer.
        crate::audit::socket::send(&sock, "shims", "exec", "sandpit: blocked", &["curl", "x"]);
        s.finish(Some(0));
        assert!(!run_dir.exists());
        let recs = crate::audit::read_log(&log).unwrap();
        assert_eq!(recs.len(), 3, "{recs:#?}");
        assert_eq!(
            (recs[0].action.as_str(), recs[2].action.as_str()),
            ("start", "exit")
        );
        assert_eq!(recs[2].subject, "0");
        assert_eq!(
            (recs[1].layer, recs[1].subject.as_str()),
            (Layer::Shims, "curl x")
        );
    }
}
