#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Hold under exhaustion: a workload that misbehaves inside `sandpit run` (as the
//! unprivileged test user) — a fork bomb, a memory balloon, a disk filler, a
//! connection flood, slow-loris clients on the proxy, a denial flood, a terminal
//! flood — must not take the launcher down with it. For each:
//! - the positive control: while the abuse runs, a new connection to an allowed
//!   host through sandpit's proxy is answered within a generous bound;
//! - the run ends when asked: SIGTERM to sandpit ends it and every process of the
//!   sandbox within a bound;
//! - the audit log reads back whole (every line a record, the start and the exit
//!   logged), and counts what it did not write.
//!
//! Hosts: `allowed.test` and `control.test` map to loopback sinks through sandpit's
//! own `[network.resolve]`; `blocked.test` to one that must receive nothing. The
//! bounds are generous on purpose (CI shares two cores); figures go in
//! `bench/exhaustion.sh`.
mod common;

use common::sink::Sink;
use common::{text, TestHome};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// How long the positive control may take while the abuse runs.
const CONTROL_BOUND: Duration = Duration::from_secs(20);
/// How long the run may take to end after SIGTERM.
const TERM_BOUND: Duration = Duration::from_secs(30);

/// Waits `delay` seconds (the abuse is under way by then), then fetches
/// `http://control.test:PORT/` through the proxy sandpit gives every run
/// (`HTTP_PROXY`), and writes `ok SECONDS` or `fail WHY` to `control.out`.
/// Then it waits to be ended with the run.
const CONTROL_PY: &str = r#"
import os, sys, time, urllib.request
port, delay = int(sys.argv[1]), float(sys.argv[2])
time.sleep(delay)
t = time.monotonic()
try:
    with urllib.request.urlopen("http://control.test:%d/" % port, timeout=60) as r:
        body = r.read().decode()
    res = "ok %.3f %s" % (time.monotonic() - t, body)
except Exception as e:
    res = "fail %.3f %r" % (time.monotonic() - t, e)
with open("control.tmp", "w") as f:
    f.write(res)
os.rename("control.tmp", "control.out")
while True:
    time.sleep(60)
"#;

struct World {
    h: TestHome,
    control: Sink,
    allowed: Sink,
    blocked: Sink,
}

impl World {
    /// A test HOME whose config allows `allowed.test` and `control.test`, with
    /// `limits` under `[limits]`.
    fn new(limits: &str) -> World {
        // Under /var/tmp: a HOME under /tmp keeps the host's /tmp (read-only) in the
        // sandbox instead of a private one.
        let h = TestHome::new_in("/var/tmp");
        let control = Sink::start("127.0.0.2", "control");
        let allowed = Sink::start("127.0.0.2", "allowed");
        let blocked = Sink::start("127.0.0.3", "blocked");
        h.write(
            &h.home().join(".sandpit/config.toml"),
            &format!(
                "[network]\nallow = [\"control.test:{}\", \"allowed.test:{}\"]\n\
                 [network.resolve]\n\"control.test\" = \"127.0.0.2\"\n\
                 \"allowed.test\" = \"127.0.0.2\"\n\"blocked.test\" = \"127.0.0.3\"\n\
                 [limits]\n{limits}",
                control.port, allowed.port
            ),
        );
        h.write(&h.workspace().join("control.py"), CONTROL_PY);
        World {
            h,
            control,
            allowed,
            blocked,
        }
    }

    /// A file in the workspace, owned by the test user.
    fn file(&self, name: &str, contents: &str) {
        self.h.write(&self.h.workspace().join(name), contents);
    }

    /// `sandpit run [flags] -- sh -c '<control> & <abuse> & wait'`: the control starts
    /// first, then the abuse; neither ends on its own.
    fn start(&self, flags: &[&str], abuse: &str, stdio: Option<std::os::fd::OwnedFd>) -> Child {
        self.start_in(flags, abuse, stdio, None)
    }

    /// [`World::start`], the launcher first moved into `cgroup` (delegated to the
    /// test user, see [`Delegated`]).
    fn start_in(
        &self,
        flags: &[&str],
        abuse: &str,
        stdio: Option<std::os::fd::OwnedFd>,
        cgroup: Option<&Path>,
    ) -> Child {
        let ws = self.h.workspace();
        let script = format!(
            "python3 {}/control.py {} 3 & {abuse} & wait",
            ws.display(),
            self.control.port
        );
        let mut c = match cgroup {
            None => self.h.sandpit(),
            Some(_) => {
                // Held until this (root) process has moved it: `read` waits for a line.
                let mut c = self.h.command("sh");
                c.args(["-c", "read _ && exec \"$0\" \"$@\""])
                    .arg(common::sandpit_bin());
                c
            }
        };
        c.arg("run").args(flags).args(["--", "sh", "-c", &script]);
        if let Some(cg) = cgroup {
            use std::io::Write;
            c.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = c.spawn().unwrap();
            std::fs::write(cg.join("cgroup.procs"), child.id().to_string()).unwrap();
            child.stdin.take().unwrap().write_all(b"go\n").unwrap();
            return child;
        }
        match stdio {
            Some(fd) => {
                let out = fd.try_clone().unwrap();
                let err = fd.try_clone().unwrap();
                c.stdin(Stdio::from(fd))
                    .stdout(Stdio::from(out))
                    .stderr(Stdio::from(err));
            }
            None => {
                c.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
            }
        }
        c.spawn().unwrap()
    }

    /// The positive control's answer: fetched through the proxy while the abuse
    /// ran, within the bound.
    fn assert_control(&self, child: &mut Child, what: &str) -> f64 {
        let path = self.h.workspace().join("control.out");
        let start = Instant::now();
        while !path.exists() {
            if let Some(s) = child.try_wait().unwrap() {
                panic!("{what}: the run ended ({s}) before the control answered");
            }
            assert!(
                start.elapsed() < Duration::from_secs(3) + CONTROL_BOUND + Duration::from_secs(30),
                "{what}: no answer from the control"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let res = std::fs::read_to_string(&path).unwrap();
        let mut parts = res.splitn(3, ' ');
        let (verdict, secs, rest) = (
            parts.next().unwrap(),
            parts.next().unwrap().parse::<f64>().unwrap(),
            parts.next().unwrap_or(""),
        );
        assert_eq!(verdict, "ok", "{what}: the control failed: {res}");
        assert_eq!(rest, "sink:control", "{what}: {res}");
        assert!(
            secs < CONTROL_BOUND.as_secs_f64(),
            "{what}: the control took {secs} s"
        );
        eprintln!("{what}: control answered in {secs:.3} s");
        secs
    }

    /// SIGTERM to sandpit: it ends, with every process of the sandbox, within the
    /// bound. Returns its stderr (when piped).
    fn terminate(&self, mut child: Child, what: &str) -> String {
        let mut err = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(e) = err.as_mut() {
                let _ = e.read_to_string(&mut s);
            }
            s
        });
        let mut out = child.stdout.take();
        std::thread::spawn(move || {
            if let Some(o) = out.as_mut() {
                let _ = std::io::copy(o, &mut std::io::sink());
            }
        });
        // SAFETY: kill with integer arguments, to the launcher this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let start = Instant::now();
        if !common::wait_for(TERM_BOUND.as_secs(), || child.try_wait().unwrap().is_some()) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: sandpit still ran {TERM_BOUND:?} after SIGTERM");
        }
        let status = child.wait().unwrap();
        eprintln!(
            "{what}: the run ended {:.3} s after SIGTERM ({status})",
            start.elapsed().as_secs_f64()
        );
        // Every process of the sandbox is gone (their command lines name the
        // workspace, which is this test's alone).
        let ws = self.h.workspace().display().to_string();
        common::wait_for(10, || processes_naming(&ws).is_empty());
        let left = processes_naming(&ws);
        assert!(
            left.is_empty(),
            "{what}: processes of the sandbox outlived the run: {left:?}"
        );
        reader.join().unwrap()
    }

    /// The run's audit log: every line a record, starting with `start` and holding
    /// the `exit`.
    fn log(&self, what: &str) -> Vec<Value> {
        let recs = self.log_lines(what);
        assert!(
            recs.iter()
                .any(|r| r["action"] == "exit" && r["layer"] == "launcher"),
            "{what}: no exit record"
        );
        recs
    }

    /// The run's audit log: every line a record, starting with `start`.
    fn log_lines(&self, what: &str) -> Vec<Value> {
        let dir = self.h.home().join(".sandpit/logs");
        let logs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        assert_eq!(logs.len(), 1, "{what}: {logs:?}");
        let recs = records(&logs[0]);
        assert_eq!(recs[0]["action"], "start", "{what}: {:?}", recs[0]);
        recs
    }
}

/// Every line of a log, parsed (a line that is no record fails the test).
fn records(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: not a record ({e}): {l}", p.display(), i + 1))
        })
        .collect()
}

/// Pids whose command line contains `needle`.
fn processes_naming(needle: &str) -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let c = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            c.contains(needle).then_some((p, c))
        })
        .filter(|(p, _)| *p != std::process::id())
        .collect()
}

/// Records past `limits.audit_bytes` the log says it counted, by subject
/// (`layer action decision`).
fn summarised(recs: &[Value], subject: &str) -> u64 {
    recs.iter()
        .filter(|r| r["action"] == "summarised" && r["subject"] == subject)
        .map(|r| {
            let reason = r["reason"].as_str().unwrap();
            reason.split(' ').next().unwrap().parse::<u64>().unwrap()
        })
        .sum()
}

#[test]
fn a_fork_bomb_stops_at_the_process_limit_and_the_run_still_ends() {
    let w = World::new("processes = 300\n");
    w.file("bomb.sh", "b() { b & b & wait; }\nwhile :; do b; done\n");
    let ws = w.h.workspace();
    let mut child = w.start(
        &[],
        &format!("sh {}/bomb.sh 2>/dev/null", ws.display()),
        None,
    );
    w.assert_control(&mut child, "fork bomb");
    // The bomb reached its limit: hundreds of processes, never more than allowed.
    let n = processes_naming(&format!("{}/bomb.sh", ws.display())).len();
    assert!(n > 50 && n <= 300, "fork bomb: {n} processes");
    let err = w.terminate(child, "fork bomb");
    let _ = err;
    w.log("fork bomb");
}

/// CPU seconds process `pid` has used (its threads, user and system), from
/// `/proc/PID/stat`.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start with the state;
    // utime and stime are fields 14 and 15 of the whole line.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf with a constant name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(ticks as f64 / hz as f64)
}

/// The launcher's CPU time over wall time while `busy` holds, sampled every
/// 100 ms from a thread: (CPU seconds, wall seconds) between the first and the last
/// sample taken while the flood ran.
struct CpuSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(Instant, f64)>>,
}

impl CpuSampler {
    fn start(pid: u32) -> CpuSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let theirs = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut out = vec![];
            while !theirs.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(c) = cpu_seconds(pid) {
                    out.push((Instant::now(), c));
                }
                // The sampling interval: samples while the run lasts.
                std::thread::sleep(Duration::from_millis(100));
            }
            out
        });
        CpuSampler { stop, thread }
    }

    /// CPU and wall seconds between the first sample at or after `from` and the
    /// last one.
    fn finish(self, from: Instant) -> (f64, f64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let s = self.thread.join().unwrap();
        let first = s.iter().find(|(t, _)| *t >= from).unwrap();
        let last = s.last().unwrap();
        (last.1 - first.1, (last.0 - first.0).as_secs_f64())
    }
}

/// A denial flood: `N` denied opens of `~/.ssh/id_rsa` by one Python process, with
/// every layer (the interposer reports each denial to the audit socket) or with the
/// kernel layer alone (the launcher's notifier reads each stopped open). Returns the
/// run's log and stderr, and the launcher's CPU and wall seconds while it ran.
fn denial_flood(w: &World, flags: &[&str], what: &str) -> (Vec<Value>, String, f64, f64) {
    w.h.write(&w.h.home().join(".ssh/id_rsa"), "CANARY-exhaustion");
    w.file(
        "deny.py",
        &format!(
            "import os\nn = 0\nfor i in range({FLOOD}):\n    try:\n        open(os.path.expanduser('~/.ssh/id_rsa')).read()\n    except OSError:\n        n += 1\nopen('deny.tmp', 'w').write(str(n))\nos.rename('deny.tmp', 'deny.out')\n"
        ),
    );
    let ws = w.h.workspace();
    let mut child = w.start(
        flags,
        &format!("python3 {}/deny.py 2>/dev/null", ws.display()),
        None,
    );
    // The flood starts with the run; the first second (the launcher's own start)
    // is left out of the figure.
    let sampler = CpuSampler::start(child.id());
    let from = Instant::now() + Duration::from_secs(1);
    w.assert_control(&mut child, what);
    let out = ws.join("deny.out");
    common::wait_until(300, format!("{what}: the flood to end"), || out.exists());
    let (cpu, wall) = sampler.finish(from);
    eprintln!(
        "{what}: the launcher used {cpu:.2} s of CPU in {wall:.2} s ({:.0}% of one core)",
        100.0 * cpu / wall
    );
    // Every open was refused: the canary never came through.
    assert_eq!(std::fs::read_to_string(&out).unwrap(), FLOOD.to_string());
    let err = w.terminate(child, what);
    (w.log(what), err, cpu, wall)
}

/// Denied opens in [`denial_flood`].
const FLOOD: usize = 100_000;

/// The interposer's denials of `~/.ssh/id_rsa` in `recs`: (written, summarised past
/// limits.audit_bytes, counted as not delivered or past the socket's bound).
fn accounted(recs: &[Value]) -> (u64, u64, u64) {
    let logged = recs
        .iter()
        .filter(|r| {
            r["layer"] == "interposer"
                && r["decision"] == "deny"
                && r["subject"].as_str().unwrap().ends_with("/.ssh/id_rsa")
        })
        .count() as u64;
    let counted = summarised(recs, "interposer read deny");
    // Past the socket's own bound (one launcher record), or never delivered (the
    // library's `lost` counts).
    let dropped: u64 = recs
        .iter()
        .filter(|r| r["layer"] == "launcher" && r["action"] == "other")
        .filter_map(|r| {
            let reason = r["reason"].as_str()?;
            reason
                .contains("were not logged")
                .then(|| reason.split(' ').next().unwrap().parse::<u64>().unwrap())
        })
        .sum();
    let lost: u64 = dropped
        + recs
            .iter()
            .filter(|r| r["layer"] == "interposer" && r["action"] == "lost")
            .map(|r| r["subject"].as_str().unwrap().parse::<u64>().unwrap())
            .sum::<u64>();
    (logged, counted, lost)
}

#[test]
fn a_denial_flood_is_logged_whole_or_counted() {
    let w = World::new("");
    let (recs, err, _, _) = denial_flood(&w, &[], "denial flood");
    // Nothing filled the private /tmp: no line says so.
    assert!(!err.contains("to limits.tmp_bytes ="), "{err}");
    let (logged, counted, lost) = accounted(&recs);
    eprintln!("denial flood: {logged} logged, {counted} summarised, {lost} not logged");
    assert!(
        logged + counted + lost >= FLOOD as u64,
        "denial flood: {logged} logged + {counted} summarised + {lost} counted as lost < {FLOOD}"
    );
}

/// limits.launcher_cpu in the flood tests: a tenth of a core. Unlimited, the
/// launcher took 42% of a core for the interposer's flood and 49% for the kernel
/// layer's (debug build, this 2-core machine).
const SHARE: u64 = 10;

/// The launcher's CPU over the flood stayed near [`SHARE`]: within 2.5 times it
/// (what else the launcher does — the proxy answering the control, the main
/// thread — is not paced, and a tick of the kernel's accounting is 10 ms), and the
/// run's end said in one line which limit held it back, where it was set and how
/// to raise it, and recorded it.
fn assert_held(what: &str, recs: &[Value], err: &str, cpu: f64, wall: f64) {
    let ratio = cpu / wall;
    assert!(
        ratio < SHARE as f64 * 2.5 / 100.0,
        "{what}: the launcher used {cpu:.2} s of CPU in {wall:.2} s past limits.launcher_cpu = {SHARE}"
    );
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("limits.launcher_cpu"))
        .collect();
    assert_eq!(lines.len(), 1, "{what}: {err}");
    let line = lines[0];
    assert!(
        line.contains(&format!("limits.launcher_cpu = {SHARE} ("))
            && line.contains(".sandpit/config.toml:")
            && line.contains("pacing drops no record")
            && line.contains("raise it under [limits]"),
        "{what}: {line}"
    );
    assert!(
        recs.iter().any(|r| r["layer"] == "launcher"
            && r["action"] == "limit"
            && r["subject"] == "limits.launcher_cpu"),
        "{what}: no limit record"
    );
}

/// A denial flood through the interposer with limits.launcher_cpu low: the audit
/// socket's reader reads later, the interposer's sends wait, the flood slows to
/// the launcher's share; the control is answered meanwhile and every denial is
/// still in the log or counted.
#[test]
fn a_denial_flood_is_held_to_limits_launcher_cpu() {
    let w = World::new(&format!("launcher_cpu = {SHARE}\n"));
    let what = "held denial flood";
    let (recs, err, cpu, wall) = denial_flood(&w, &[], what);
    assert_held(what, &recs, &err, cpu, wall);
    let (logged, counted, lost) = accounted(&recs);
    eprintln!("{what}: {logged} logged, {counted} summarised, {lost} not logged");
    assert!(
        logged + counted + lost >= FLOOD as u64,
        "{what}: {logged} logged + {counted} summarised + {lost} counted as lost < {FLOOD}"
    );
}

/// The same flood under the kernel layer alone (as a static program meets it):
/// the notifier reads each stopped open, and past the share it answers later.
/// The refusal is recorded (once per program and path, by design).
#[test]
fn a_kernel_only_denial_flood_is_held_to_limits_launcher_cpu() {
    let w = World::new(&format!("launcher_cpu = {SHARE}\n"));
    let what = "held kernel-only denial flood";
    let (recs, err, cpu, wall) = denial_flood(&w, &["--kernel-only"], what);
    assert_held(what, &recs, &err, cpu, wall);
    assert!(
        recs.iter().any(|r| r["layer"] == "kernel"
            && r["decision"] == "deny"
            && r["subject"].as_str().unwrap().ends_with("/.ssh/id_rsa")),
        "{what}: the refusal was not recorded"
    );
}

/// A cgroup v2 subtree delegated to the test user the way systemd delegates
/// `user@.service` (the directory and its `cgroup.procs`, `cgroup.subtree_control`
/// and `cgroup.threads` the user's), with the memory controller: where the machine's
/// cgroup v2 root offers it. Removed when dropped.
struct Delegated(PathBuf);

impl Delegated {
    fn new() -> Option<Delegated> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let root = mountinfo.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split_whitespace().collect();
            (right.starts_with("cgroup2 ") && f[3] == "/").then(|| PathBuf::from(f[4]))
        })?;
        let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
        if !controllers.split_whitespace().any(|c| c == "memory") {
            return None;
        }
        assert!(common::is_root(), "delegating a cgroup needs root");
        std::fs::write(root.join("cgroup.subtree_control"), "+memory").unwrap();
        let dir = root.join(format!("sandpit-exhaustion-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        for f in [
            "",
            "cgroup.procs",
            "cgroup.subtree_control",
            "cgroup.threads",
        ] {
            std::os::unix::fs::chown(dir.join(f), Some(common::TEST_UID), Some(common::TEST_GID))
                .unwrap();
        }
        Some(Delegated(dir))
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        // The launcher's leaf and the run's cgroup first (empty by now).
        if let Ok(rd) = std::fs::read_dir(&self.0) {
            for e in rd.flatten() {
                if e.path().is_dir() {
                    let _ = std::fs::remove_dir(e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A memory balloon: 16 MiB at a time, every page touched, until the allocation
/// fails or the kernel ends it (at most 1 GiB, whatever happens). It writes how far
/// it got after each step. `/dev/shm` holds 48 MiB first: with a cgroup those pages
/// count against the run's limit too.
const BALLOON_PY: &str = r#"
import os
held = []
def note(s):
    with open("balloon.tmp", "w") as f:
        f.write(s)
    os.rename("balloon.tmp", "balloon.out")
with open("/dev/shm/fill", "wb") as f:
    for i in range(48):
        f.write(b"\1" * (1 << 20))
try:
    while len(held) < 64:
        held.append(b"\1" * (16 << 20))
        note("held %d" % (len(held) * 16))
    note("capped %d" % (len(held) * 16))
except MemoryError:
    note("refused %d" % (len(held) * 16))
while True:
    os.pause()
"#;

/// limits.memory: the balloon stops below it, the run goes on (the positive
/// control), and ends when asked. With a delegated cgroup v2 memory controller the
/// limit holds for the whole run, `/dev/shm` included; without one (this machine
/// may be cgroup v1 or hybrid) each process's data is bounded and the run says so
/// among its weaker points.
#[test]
fn a_memory_balloon_stops_at_limits_memory() {
    const LIMIT_MIB: u64 = 256;
    let w = World::new(&format!(
        "memory = {}\ntmp_bytes = {}\n",
        LIMIT_MIB << 20,
        64u64 << 20
    ));
    w.file("balloon.py", BALLOON_PY);
    let delegated = Delegated::new();
    let ws = w.h.workspace();
    let mut child = w.start_in(
        &[],
        &format!("python3 {}/balloon.py", ws.display()),
        None,
        delegated.as_ref().map(|d| d.0.as_path()),
    );
    w.assert_control(&mut child, "memory balloon");
    let out = ws.join("balloon.out");
    let start = Instant::now();
    let got = loop {
        let s = std::fs::read_to_string(&out).unwrap_or_default();
        // With a cgroup the kernel ends the balloon: its last note stays "held".
        let settled = s.starts_with("refused") || s.starts_with("capped");
        if settled || (delegated.is_some() && start.elapsed() > Duration::from_secs(15)) {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "balloon: {s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mib: u64 = got.split(' ').nth(1).unwrap().parse().unwrap();
    eprintln!("memory balloon: {got} MiB");
    assert!(
        !got.starts_with("capped"),
        "the balloon was never stopped: {got}"
    );
    let err = w.terminate(child, "memory balloon");
    let layers = err.lines().find(|l| l.contains("layers:")).unwrap_or("");
    match &delegated {
        Some(_) => {
            // Its 48 MiB of /dev/shm counted as well.
            assert!(mib + 48 <= LIMIT_MIB, "balloon: {got}");
            assert!(
                layers.contains("memory at most 256 MiB for the run (cgroup)"),
                "{err}"
            );
        }
        None => {
            assert!(
                got.starts_with("refused") && mib < LIMIT_MIB,
                "balloon: {got}"
            );
            assert!(
                layers.contains("at most 256 MiB of data per process"),
                "{err}"
            );
            assert!(
                layers.contains("weaker: ")
                    && layers.contains("limits.memory bounds each process's data (RLIMIT_DATA)"),
                "{err}"
            );
        }
    }
    w.log("memory balloon");
    // `sandpit check` says the same, with where the limit was set.
    let t = text(&w.h.sandpit().args(["check", "--", "sh"]).output().unwrap());
    let want = match &delegated {
        Some(_) => "memory at most 256 MiB for the run (cgroup; limits.memory, ",
        None => "at most 256 MiB of data per process (RLIMIT_DATA, no cgroup: ",
    };
    assert!(
        t.contains(want) && t.contains(".sandpit/config.toml:"),
        "{t}"
    );
}

/// A disk filler in `$TMPDIR` (the run's scratch dir) and `/tmp`: each is a tmpfs of
/// limits.tmp_bytes, so the filler meets ENOSPC there and the host's disk under the
/// scratch dir gets nothing; the run ends with one line naming both, the limit,
/// where it was set and how to raise it.
#[test]
fn a_disk_filler_in_tmpdir_and_tmp_meets_limits_tmp_bytes() {
    let w = World::new(&format!("tmp_bytes = {}\n", 32u64 << 20));
    w.file(
        "fill.sh",
        "echo \"$TMPDIR\" > tmpdir.out\n\
         dd if=/dev/zero of=\"$TMPDIR/fill\" bs=1M count=4096 2>/dev/null\n\
         dd if=/dev/zero of=/tmp/fill bs=1M count=4096 2>/dev/null\n\
         echo $(stat -c %s \"$TMPDIR/fill\") $(stat -c %s /tmp/fill) > fill.tmp && mv fill.tmp fill.out\n\
         while :; do sleep 1; done\n",
    );
    let ws = w.h.workspace();
    let mut child = w.start(&[], &format!("sh {}/fill.sh", ws.display()), None);
    w.assert_control(&mut child, "disk filler");
    let out = ws.join("fill.out");
    common::wait_until(60, "the filler to end", || out.exists());
    let sizes: Vec<u64> = std::fs::read_to_string(&out)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    eprintln!("disk filler: $TMPDIR and /tmp took {sizes:?} bytes");
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    for s in &sizes {
        assert!(*s > 16 << 20 && *s <= 32 << 20, "{sizes:?}");
    }
    // The scratch dir on the host stayed empty while the run held its tmpfs full.
    let tmpdir = std::fs::read_to_string(ws.join("tmpdir.out")).unwrap();
    let host: Vec<_> = std::fs::read_dir(tmpdir.trim())
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(host.is_empty(), "the host's scratch dir got {host:?}");
    let err = w.terminate(child, "disk filler");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("to limits.tmp_bytes ="))
        .collect();
    assert_eq!(lines.len(), 1, "disk filler: {err}");
    let line = lines[0];
    assert!(
        line.starts_with("sandpit: the run filled /tmp and ")
            && line.contains(&format!(
                "$TMPDIR ({}) to limits.tmp_bytes = 33554432 (",
                tmpdir.trim()
            ))
            && line.contains(".sandpit/config.toml:")
            && line.contains("ENOSPC")
            && line.contains("raise it under [limits]"),
        "disk filler: {line}"
    );
    // /dev/shm, bounded alike, was not filled: not named.
    assert!(!line.contains("/dev/shm"), "disk filler: {line}");
    w.log("disk filler");
}

/// A disk filler in the package cache sandpit mounts (`$PIP_CACHE_DIR`, on the
/// host's disk): each file stops at limits.cache_bytes with EFBIG (RLIMIT_FSIZE, the
/// filler is not killed by SIGXFSZ), the machine keeps answering, the run ends with
/// one line naming the limit, and the next run stops before it starts until the
/// cache is emptied (then it runs: the positive control).
#[test]
fn a_disk_filler_in_the_package_cache_stops_at_limits_cache_bytes() {
    let limit: u64 = 32 << 20;
    let w = World::new(&format!("cache_bytes = {limit}\n"));
    w.file(
        "fill.sh",
        "echo \"$PIP_CACHE_DIR\" > cache.out\n\
         mkdir -p \"$PIP_CACHE_DIR\"\n\
         dd if=/dev/zero of=\"$PIP_CACHE_DIR/fill1\" bs=1M count=4096 2> dd1.err; r1=$?\n\
         dd if=/dev/zero of=\"$PIP_CACHE_DIR/fill2\" bs=1M count=4096 2> dd2.err; r2=$?\n\
         echo $r1 $r2 $(stat -c %s \"$PIP_CACHE_DIR/fill1\" \"$PIP_CACHE_DIR/fill2\") > fill.tmp && mv fill.tmp fill.out\n\
         while :; do sleep 1; done\n",
    );
    let ws = w.h.workspace();
    let mut child = w.start(&[], &format!("sh {}/fill.sh", ws.display()), None);
    w.assert_control(&mut child, "cache filler");
    let out = ws.join("fill.out");
    assert!(
        common::wait_for(60, || out.exists()),
        "the cache filler never ended"
    );
    let fields: Vec<u64> = std::fs::read_to_string(&out)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    eprintln!("cache filler: dd exit codes and file sizes {fields:?}");
    assert_eq!(fields.len(), 4, "{fields:?}");
    // dd failed (not killed by a signal: that would be 128+), each file at the limit.
    assert_eq!(&fields[..2], &[1, 1], "{fields:?}");
    assert_eq!(&fields[2..], &[limit, limit], "{fields:?}");
    let err = std::fs::read_to_string(ws.join("dd1.err")).unwrap();
    assert!(err.contains("File too large"), "{err}");
    // The files are on the host's disk, in the workspace's cache, and no bigger.
    let cache = PathBuf::from(
        std::fs::read_to_string(ws.join("cache.out"))
            .unwrap()
            .trim(),
    );
    assert!(
        cache.starts_with(w.h.home().join(".cache/sandpit")),
        "{cache:?}"
    );
    assert_eq!(std::fs::metadata(cache.join("fill1")).unwrap().len(), limit);
    let stderr = w.terminate(child, "cache filler");
    let line = stderr
        .lines()
        .find(|l| l.contains("limits.cache_bytes"))
        .unwrap_or_else(|| panic!("no line naming limits.cache_bytes in {stderr}"));
    assert!(
        line.contains("[limits]") && line.contains(".sandpit/config.toml:"),
        "{line}"
    );
    w.log("cache filler");
    // The next run stops before it starts, saying why and what to do.
    let o = w.h.sandpit().args(["run", "--", "true"]).output().unwrap();
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("limits.cache_bytes") && t.contains("rm -rf"),
        "{t}"
    );
    // Emptied, the cache lets the run start again.
    std::fs::remove_file(cache.join("fill1")).unwrap();
    std::fs::remove_file(cache.join("fill2")).unwrap();
    let o = w.h.sandpit().args(["run", "--", "true"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

/// Crash consistency: the launcher killed with SIGKILL in the middle of a denial
/// flood leaves a log whose every line is a whole record, the sandbox goes with it,
/// and the next `sandpit log` says the run ended abnormally.
#[test]
fn a_launcher_killed_mid_run_leaves_a_readable_log_that_says_so() {
    let w = World::new("");
    w.h.write(&w.h.home().join(".ssh/id_rsa"), "CANARY-exhaustion");
    w.file(
        "deny.py",
        "import os\nwhile True:\n    try:\n        open(os.path.expanduser('~/.ssh/id_rsa')).read()\n    except OSError:\n        pass\n",
    );
    let ws = w.h.workspace();
    let mut child = w.start(
        &[],
        &format!("python3 {}/deny.py 2>/dev/null", ws.display()),
        None,
    );
    w.assert_control(&mut child, "killed launcher");
    // Kill it once the flood's denials are being written.
    let logs = w.h.home().join(".sandpit/logs");
    let logging = common::wait_for(30, || {
        std::fs::read_dir(&logs)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
            .any(|e| {
                std::fs::read_to_string(e.path())
                    .is_ok_and(|t| t.matches(r#""decision":"deny""#).count() > 100)
            })
    });
    assert!(logging, "killed launcher: no denials reached the log");
    child.kill().unwrap();
    child.wait().unwrap();
    let needle = ws.display().to_string();
    common::wait_for(10, || processes_naming(&needle).is_empty());
    let left = processes_naming(&needle);
    assert!(
        left.is_empty(),
        "processes of the sandbox outlived the killed launcher: {left:?}"
    );
    let recs = w.log_lines("killed launcher");
    let denials = recs.iter().filter(|r| r["decision"] == "deny").count();
    assert!(
        denials > 100,
        "killed launcher: only {denials} denials logged"
    );
    assert!(
        !recs.iter().any(|r| r["action"] == "exit"),
        "killed launcher: an exit record"
    );
    let o = w.h.sandpit().args(["log", "--denied"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let last = out.lines().last().unwrap_or("");
    assert!(last.contains("ended abnormally"), "{last}");
    eprintln!("{last}");
    let o = w.h.sandpit().args(["log", "--list"]).output().unwrap();
    assert!(text(&o).contains("(ended abnormally)"), "{}", text(&o));
}

/// Opens connections through the proxy as fast as it can for `secs` seconds, each
/// with an HTTP CONNECT to `allowed.test` or `blocked.test` (alternately), and
/// closes each without waiting for the answer. Writes the attempts made.
const FLOOD_PY: &str = r#"
import os, socket, sys, time, base64, resource
from urllib.parse import urlsplit
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
u = urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode()
pa, pb, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
heads = [("CONNECT %s HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n" % (h, auth)).encode()
         for h in ("allowed.test:%d" % pa, "blocked.test:%d" % pb)]
n, end = 0, time.monotonic() + secs
while time.monotonic() < end:
    try:
        s = socket.create_connection((u.hostname, u.port), timeout=2)
        s.sendall(heads[n % 2])
        s.close()
    except OSError:
        pass
    n += 1
# Whole or absent: the test reads it as soon as it appears.
open("part-%d" % os.getpid(), "w").write(str(n))
os.rename("part-%d" % os.getpid(), "flood-%d.out" % os.getpid())
while True:
    time.sleep(60)
"#;

#[test]
fn a_connection_flood_leaves_the_proxy_answering() {
    // Well below what the flood makes even on a busy machine (thousands a second).
    let w = World::new("connections_per_second = 50\n");
    w.file("flood.py", FLOOD_PY);
    let ws = w.h.workspace();
    let one = format!(
        "python3 {}/flood.py {} {} 8",
        ws.display(),
        w.allowed.port,
        w.blocked.port
    );
    let mut child = w.start(&[], &format!("{one} & {one}"), None);
    w.assert_control(&mut child, "connection flood");
    // The flood ran at full speed meanwhile.
    let attempts = common::wait_for_some(60, "both floods to end", || {
        let done: Vec<u64> = std::fs::read_dir(&ws)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("flood-"))
            .map(|e| std::fs::read_to_string(e.path()).unwrap().parse().unwrap())
            .collect();
        (done.len() == 2).then(|| done.iter().sum::<u64>())
    });
    eprintln!("connection flood: {attempts} attempts in 8 s");
    let err = w.terminate(child, "connection flood");
    let recs = w.log("connection flood");
    assert_eq!(w.blocked.seen().0, 0, "blocked.test was reached");
    assert!(w.allowed.seen().0 > 0, "allowed.test was never reached");
    // Past limits.connections_per_second the flood's connections to allowed.test
    // were refused, each logged with the limit as its rule, and the user told once.
    let limited = recs
        .iter()
        .filter(|r| r["rule"]["key"] == "limits.connections_per_second")
        .count();
    assert!(limited > 0, "no refusal past limits.connections_per_second");
    eprintln!("connection flood: {limited} refused past limits.connections_per_second");
    eprintln!("{err}");
    assert!(err.contains("limits.connections_per_second"), "{err}");
}

/// Asks sandpit's DNS responder for a fresh name each time (UDP, straight to the
/// nameserver of the sandbox's resolv.conf) for `secs` seconds; writes how many.
const NAMES_PY: &str = r#"
import os, random, socket, struct, sys, time
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
n, end = 0, time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    name = "x%08x.leak.example" % random.getrandbits(32)
    q = struct.pack(">HHHHHH", n & 0xffff, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    try:
        s.sendto(q, (ns, 53))
        s.recv(512)
    except OSError:
        pass
    n += 1
# Whole or absent: the test reads it as soon as it appears.
open("names.tmp", "w").write(str(n))
os.rename("names.tmp", "names.out")
while True:
    time.sleep(60)
"#;

/// The resolver's records are bounded like every other source: a name-lookup flood
/// (the issue's: ~37 MB of log in 8 s) writes at most limits.audit_bytes of log,
/// and the rest is counted, with one line to the user.
#[test]
fn a_name_lookup_flood_is_bounded_by_limits_audit_bytes() {
    const CAP: u64 = 256 << 10;
    let w = World::new(&format!("audit_bytes = {CAP}\n"));
    w.file("names.py", NAMES_PY);
    let ws = w.h.workspace();
    let mut child = w.start(
        &["--kernel-only"],
        &format!("python3 {}/names.py 5", ws.display()),
        None,
    );
    w.assert_control(&mut child, "name flood");
    let out = ws.join("names.out");
    common::wait_until(60, "the name flood to end", || out.exists());
    let asked: u64 = std::fs::read_to_string(&out).unwrap().parse().unwrap();
    let err = w.terminate(child, "name flood");
    let recs = w.log("name flood");
    let logged = recs
        .iter()
        .filter(|r| {
            r["layer"] == "dns" && r["subject"].as_str().unwrap().ends_with(".leak.example")
        })
        .count() as u64;
    let counted = summarised(&recs, "dns resolve deny");
    eprintln!("name flood: {asked} asked, {logged} logged, {counted} counted");
    assert!(counted > 0, "nothing was counted past the limit");
    // Every question reached the log or its count.
    assert!(logged + counted >= asked, "{logged} + {counted} < {asked}");
    let dir = w.h.home().join(".sandpit/logs");
    let size: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    // The cap, and the launcher's own records (start, exit, the counts).
    assert!(size < CAP + (16 << 10), "the log took {size} bytes");
    assert!(err.contains("reached limits.audit_bytes"), "{err}");
}

/// Opens tunnels to `allowed.test` through the proxy, holding them all: writes each
/// answer's status line, then the body of the first refusal, and ends (the tunnels
/// close with it).
const HOARD_PY: &str = r#"
import base64, os, socket, sys, time
from urllib.parse import urlsplit
u = urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode()
held, lines, refusal = [], [], ""
for i in range(int(sys.argv[2])):
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(("CONNECT allowed.test:%s HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n" % (sys.argv[1], auth)).encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        b = s.recv(4096)
        if not b:
            break
        answer += b
    lines.append(answer.split(b"\r\n")[0].decode())
    if not lines[-1].endswith("200 Connection established") and not refusal:
        time.sleep(0.2)
        s.settimeout(2)
        try:
            while True:
                b = s.recv(4096)
                if not b:
                    break
                answer += b
        except OSError:
            pass
        refusal = answer.split(b"\r\n\r\n", 1)[1].decode()
    held.append(s)
with open("hoard.tmp", "w") as f:
    f.write("\n".join(lines) + "\n--\n" + refusal)
os.rename("hoard.tmp", "hoard.out")
"#;

/// limits.connections: past it a new tunnel is refused with a 503 whose body names
/// the limit and how to raise it, while the open ones stay; once they close the
/// places are free again (the control, later); the summary names the limit.
#[test]
fn open_connections_stop_at_limits_connections_with_a_clear_refusal() {
    let w = World::new("connections = 16\n");
    w.file("hoard.py", HOARD_PY);
    let ws = w.h.workspace();
    let mut child = w.start_in(
        &[],
        &format!("python3 {}/hoard.py {} 20", ws.display(), w.allowed.port),
        None,
        None,
    );
    w.assert_control(&mut child, "connection hoarder");
    let out = std::fs::read_to_string(ws.join("hoard.out")).unwrap();
    let (lines, body) = out.split_once("\n--\n").unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 20, "{out}");
    assert!(
        lines[..16]
            .iter()
            .all(|l| l.ends_with("200 Connection established")),
        "{out}"
    );
    assert!(lines[16..].iter().all(|l| l.contains("503")), "{out}");
    assert!(
        body.contains("limits.connections = 16 (") && body.contains("~/.sandpit/config.toml"),
        "{body}"
    );
    let err = w.terminate(child, "connection hoarder");
    assert!(err.contains("the run reached limits.connections"), "{err}");
    let recs = w.log("connection hoarder");
    let refused = recs
        .iter()
        .filter(|r| r["rule"]["key"] == "limits.connections")
        .count();
    assert_eq!(refused, 4, "refusals logged");
}

/// Opens `n` connections to the proxy (across processes, for the descriptor
/// limit) and sends each half a CONNECT head, one byte a second.
const LORIS_PY: &str = r#"
import os, socket, sys, time, resource
from urllib.parse import urlsplit
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
u = urlsplit(os.environ["HTTP_PROXY"])
n = int(sys.argv[1])
socks = []
for i in range(n):
    try:
        s = socket.create_connection((u.hostname, u.port), timeout=5)
        s.sendall(b"CONNECT allowed.test:1 HTTP/1.1\r\n")
        socks.append(s)
    except OSError:
        pass
open("loris-%d.out" % os.getpid(), "w").write(str(len(socks)))
while True:
    for s in socks:
        try:
            s.send(b"X")
        except OSError:
            pass
    time.sleep(1)
"#;

#[test]
fn slow_loris_clients_do_not_starve_the_proxy() {
    let w = World::new("");
    w.file("loris.py", LORIS_PY);
    let ws = w.h.workspace();
    let one = format!("python3 {}/loris.py 2500", ws.display());
    let mut child = w.start(&[], &format!("{one} & {one}"), None);
    w.assert_control(&mut child, "slow loris");
    let held: u64 = std::fs::read_dir(&ws)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("loris-"))
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    eprintln!("slow loris: {held} half-open heads held");
    w.terminate(child, "slow loris");
    w.log("slow loris");
}

#[test]
fn a_terminal_flood_leaves_the_launcher_answering() {
    let w = World::new("");
    let (mut master, slave, _) = common::user_terminal();
    // Drain the terminal as a user's terminal emulator would, as fast as it can.
    let drained = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let d = drained.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            d.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let ws = w.h.workspace();
    w.file("flood.sh", "yes FLOODFLOODFLOODFLOODFLOODFLOOD\n");
    let mut child = w.start(&[], &format!("sh {}/flood.sh", ws.display()), Some(slave));
    w.assert_control(&mut child, "terminal flood");
    assert!(
        drained.load(std::sync::atomic::Ordering::Relaxed) > 1 << 20,
        "the flood never reached the terminal"
    );
    w.terminate(child, "terminal flood");
    w.log("terminal flood");
}
