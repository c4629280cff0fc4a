//! Kernel layer, processes: ptrace/signals/process_vm on host processes, capabilities,
//! TIOCSTI, nested user namespaces, descendants outliving the run, exit status and signal
//! propagation, the terminal, and failing closed. Each probe is first shown to work
//! without sandpit.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod kernel_support;

use common::{ppid, spawn_ready, TestHome};
use kernel_support::*;
use std::process::Stdio;

const PROC_PY: &str = r#"
import ctypes, os, signal, sys, time
libc = ctypes.CDLL("libc.so.6", use_errno=True)
host = int(sys.argv[1])
def err(): return os.strerror(ctypes.get_errno())
# A host process (not ours to touch).
try:
    os.kill(host, signal.SIGTERM); print("host-kill:ok")
except OSError as e:
    print("host-kill:" + e.strerror)
r = libc.ptrace(16, host, 0, 0)
print("host-ptrace:" + ("ok" if r == 0 else err()))
if r == 0: libc.ptrace(17, host, 0, 0)
# Our own child: signals work inside, ptrace and process_vm_readv do not.
c = os.fork()
if c == 0:
    time.sleep(60); os._exit(0)
r = libc.ptrace(16, c, 0, 0)
print("child-ptrace:" + ("ok" if r == 0 else err()))
if r == 0:
    os.waitpid(c, 0); libc.ptrace(17, c, 0, 0)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
remote = iovec(ctypes.cast(ctypes.pointer(ctypes.c_int(0)), ctypes.c_void_p), 8)
n = libc.process_vm_readv(c, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
print("process_vm_readv:" + ("ok" if n >= 0 else err()))
os.kill(c, signal.SIGKILL); os.waitpid(c, 0); print("own-child-kill:ok")
"#;

fn victim(h: &TestHome) -> std::process::Child {
    h.command("sleep").arg("300").spawn().unwrap()
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

#[test]
fn host_processes_cannot_be_signalled_traced_or_read() {
    let control = TestHome::new();
    control.write(&control.workspace().join("p.py"), PROC_PY);
    let mut v = victim(&control);
    let t = text(&bare(&control, &format!("python3 p.py {}", v.id())));
    let _ = v.wait();
    assert!(
        t.contains("host-kill:ok") && t.contains("child-ptrace:ok"),
        "bare: {t}"
    );
    assert!(t.contains("process_vm_readv:ok"), "bare: {t}");

    let h = TestHome::new();
    h.write(&h.workspace().join("p.py"), PROC_PY);
    let mut v = victim(&h);
    let t = text(&sandboxed(&h, &format!("python3 p.py {}", v.id())));
    assert!(alive(v.id()), "host process was killed: {t}");
    let _ = v.kill();
    let _ = v.wait();
    assert!(t.contains("host-kill:No such process"), "{t}");
    assert!(
        !t.contains("host-ptrace:ok") && !t.contains("child-ptrace:ok"),
        "{t}"
    );
    assert!(t.contains("child-ptrace:Operation not permitted"), "{t}");
    assert!(
        t.contains("process_vm_readv:Operation not permitted"),
        "{t}"
    );
    assert!(t.contains("own-child-kill:ok"), "positive control: {t}");
}

const TIOCSTI_PY: &str = r#"
import fcntl, os, termios
os.setsid()
m, s = os.openpty()
name = os.ttyname(s)
ctty = os.open(name, os.O_RDWR)          # becomes our controlling terminal
for req, label in [(termios.TIOCSTI, "tiocsti")]:
    try:
        fcntl.ioctl(ctty, req, b"Z"); print(label + ":ok")
    except OSError as e:
        print(label + ":" + e.strerror)
os.set_blocking(m, False)
try: print("injected:" + os.read(m, 100).decode(errors="replace").strip())
except BlockingIOError: print("injected:")
print("winsize:" + str(len(fcntl.ioctl(ctty, termios.TIOCGWINSZ, b"\0" * 8))))
"#;

#[test]
fn tiocsti_is_refused_other_tty_ioctls_work() {
    let control = TestHome::new();
    control.write(&control.workspace().join("t.py"), TIOCSTI_PY);
    let t = text(&bare(&control, "python3 t.py"));
    assert!(t.contains("tiocsti:ok"), "bare: {t}");

    let h = TestHome::new();
    h.write(&h.workspace().join("t.py"), TIOCSTI_PY);
    let t = text(&sandboxed(&h, "python3 t.py"));
    assert!(t.contains("tiocsti:Operation not permitted"), "{t}");
    assert!(
        t.contains("winsize:8"),
        "positive control (TIOCGWINSZ): {t}"
    );
}

const CAPS_PY: &str = r#"
import ctypes
libc = ctypes.CDLL("libc.so.6", use_errno=True)
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"):
        print(key + "=" + value.strip())
print("securebits=" + str(libc.prctl(27, 0, 0, 0, 0)))  # PR_GET_SECUREBITS
"#;

/// The command holds no capability in any set, not even in its bounding set, cannot
/// gain privileges on exec (no_new_privs), and its securebits are locked so that a
/// uid 0 of its namespace would regain nothing by exec or setuid.
#[test]
fn the_command_holds_no_capabilities_and_cannot_regain_them() {
    let control = TestHome::new();
    control.write(&control.workspace().join("c.py"), CAPS_PY);
    let t = text(&bare(&control, "python3 c.py"));
    assert!(
        t.contains("CapInh=") && t.contains("NoNewPrivs="),
        "bare: {t}"
    );
    assert!(
        !t.contains("CapBnd=0000000000000000"),
        "bare: the host's bounding set is not empty: {t}"
    );
    assert!(t.contains("securebits=0"), "bare: {t}");

    let h = TestHome::new();
    h.write(&h.workspace().join("c.py"), CAPS_PY);
    let t = text(&sandboxed(&h, "python3 c.py"));
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(t.contains(&format!("{set}=0000000000000000")), "{set}: {t}");
    }
    assert!(t.contains("NoNewPrivs=1"), "{t}");
    // NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE, each with its lock.
    assert!(t.contains("securebits=207"), "{t}");
}

#[test]
fn nested_user_namespaces_and_mounts_are_refused() {
    let script = "unshare -Ur sh -c 'echo NESTED-OK'; unshare -Urm sh -c 'mount -t tmpfs x /tmp && echo MOUNT-OK'; echo DONE";
    let control = TestHome::new();
    let t = text(&bare(&control, script));
    assert!(
        t.contains("NESTED-OK") && t.contains("MOUNT-OK"),
        "bare: {t}"
    );
    let h = TestHome::new();
    let t = text(&sandboxed(&h, script));
    assert!(!t.contains("NESTED-OK") && !t.contains("MOUNT-OK"), "{t}");
    assert!(t.contains("DONE"), "{t}");
}

/// `isolation.nested_user_namespaces` (the user's own config) lets a program make
/// the namespaces and `chroot` its own sandbox needs (Chromium's, Electron's), for a
/// dynamic and a static program alike; what those namespaces' capabilities would
/// buy stays refused: a mount, reading a credential.
#[test]
fn nested_user_namespaces_only_when_the_user_asks_and_they_buy_nothing() {
    let h = TestHome::new();
    let key = h.home().join(".ssh/id_rsa");
    h.write(&key, CANARY);
    let static_probe = h.workspace().join("userns_probe_static");
    std::fs::rename(build_probe(&h, "userns_probe", true), &static_probe).unwrap();
    let dynamic = build_probe(&h, "userns_probe", false);
    let script = format!(
        "for p in {} {}; do echo \"== $p\"; $p {}; done",
        dynamic.display(),
        static_probe.display(),
        key.display()
    );
    // Each probe's steps, in order, as one line.
    let steps = |t: &str| -> Vec<String> {
        t.split("== ")
            .skip(1)
            .map(|part| {
                part.lines()
                    .skip(1)
                    .filter(|l| !l.starts_with("content"))
                    .map(|l| l.split(" FAIL").next().unwrap_or(l).replace(" OK", "+"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    let out = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let t = out(&bare(&h, &script));
    assert_eq!(steps(&t), ["userns+ read+ mount+ chroot+"; 2], "bare: {t}");
    assert!(t.contains(CANARY), "bare: {t}");

    let o = sandboxed(&h, &script);
    assert_eq!(
        steps(&out(&o)),
        ["userns"; 2],
        "off by default: {}",
        text(&o)
    );

    h.user_config("[isolation]\nnested_user_namespaces = true\n");
    let o = sandboxed(&h, &script);
    let t = text(&o);
    assert_eq!(steps(&out(&o)), ["userns+ read mount chroot+"; 2], "{t}");
    assert!(!t.contains(CANARY), "{t}");
    assert!(
        t.contains("new user namespaces and chroot allowed (isolation.nested_user_namespaces)"),
        "the start-up line says so: {t}"
    );

    // A project file cannot ask for it: the run does not start.
    h.user_config("");
    h.write(
        &h.workspace().join(".sandpit.toml"),
        "[isolation]\nnested_user_namespaces = true\n",
    );
    let o = sandboxed(&h, "echo STARTED");
    let t = text(&o);
    assert!(!o.status.success() && !t.contains("STARTED"), "{t}");
    assert!(
        t.contains(".sandpit.toml:1") && t.contains("[isolation]"),
        "{t}"
    );
}

fn daemons_with_tag(tag: &str) -> Vec<u32> {
    let mut found = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&c).contains(tag) {
                found.push(pid);
            }
        }
    }
    found
}

#[test]
fn setsid_and_double_forked_descendants_die_with_the_run() {
    let tag = format!("4242.{}", std::process::id());
    let script = format!(
        "setsid sleep {tag}1 >/dev/null 2>&1 & (sh -c 'nohup sleep {tag}2 >/dev/null 2>&1 &') ; \
         python3 -c 'import os,time\nif os.fork()==0:\n os.setsid()\n if os.fork()==0: os.execvp(\"sleep\",[\"sleep\",\"{tag}3\"])\n os._exit(0)' >/dev/null 2>&1; \
         sleep 0.2; echo started"
    );
    // Control: without sandpit they outlive the shell.
    let control = TestHome::new();
    let out = bare(&control, &script);
    assert!(text(&out).contains("started"));
    let survivors = daemons_with_tag(&tag);
    for p in &survivors {
        // SAFETY: killing the control run's own leftovers.
        unsafe { libc::kill(*p as i32, libc::SIGKILL) };
    }
    assert_eq!(survivors.len(), 3, "bare run should leave 3 daemons");

    let h = TestHome::new();
    let out = sandboxed(&h, &script);
    assert!(text(&out).contains("started"), "{}", text(&out));
    let survivors = daemons_with_tag(&tag);
    for p in &survivors {
        // SAFETY: cleaning up after a failing assertion.
        unsafe { libc::kill(*p as i32, libc::SIGKILL) };
    }
    assert!(
        survivors.is_empty(),
        "descendants outlived the run: {survivors:?}"
    );
}

/// Degraded mode (no pid namespace): the launcher, a child subreaper, kills what is
/// left. A detached chain of 150 processes, each the parent of the next, used to
/// outlive it: it killed one level per round, for at most 100 rounds.
#[test]
fn a_detached_chain_deeper_than_a_hundred_dies_with_a_degraded_run() {
    const DEPTH: usize = 150;
    let tag = format!("4343.{}", std::process::id());
    // Each level starts the next in the background and becomes a tagged `sleep` (the
    // same pid, so it stays the next one's parent); the last one says it is there.
    let chain = format!(
        "n=$1
if [ \"$n\" -gt 0 ]; then sh \"$0\" $((n - 1)) & else : > chain-done; fi
exec sleep {tag}
"
    );
    let script = format!(
        "(setsid sh chain-{tag}.sh {} >/dev/null 2>&1 &); \
         while [ ! -e chain-done ]; do sleep 0.05; done; echo started",
        DEPTH - 1
    );
    let kill_all = |pids: &[u32]| {
        for p in pids {
            // SAFETY: killing the tagged processes this test started.
            unsafe { libc::kill(*p as i32, libc::SIGKILL) };
        }
    };
    // Control: without sandpit the whole chain outlives the shell.
    let control = TestHome::new();
    control.write(&control.workspace().join(format!("chain-{tag}.sh")), &chain);
    let out = bare(&control, &script);
    assert!(text(&out).contains("started"), "{}", text(&out));
    let survivors = daemons_with_tag(&tag);
    kill_all(&survivors);
    assert_eq!(
        survivors.len(),
        DEPTH,
        "bare run should leave the whole chain"
    );

    let h = TestHome::new();
    h.write(&h.workspace().join(format!("chain-{tag}.sh")), &chain);
    let out = sandpit_cmd(&h, &["--allow-degraded"], &script)
        .env("SANDPIT_FORCE_FALLBACK", "1")
        .output()
        .unwrap();
    let t = text(&out);
    assert!(t.contains("DEGRADED") && t.contains("started"), "{t}");
    let survivors = daemons_with_tag(&tag);
    kill_all(&survivors);
    assert!(
        survivors.is_empty(),
        "{} of {DEPTH} outlived the run: {t}",
        survivors.len()
    );
}

/// Forks sleeping children until `argv[1]` exist or a fork fails; prints how many
/// it made and the error that stopped it (`None` when none did).
const FORKER: &str = "python3 -c 'import os,sys,time
kids, err = [], None
for _ in range(int(sys.argv[1])):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno; break
    if pid == 0:
        time.sleep(5); os._exit(0)
    kids.append(pid)
print(\"forked\", len(kids), \"errno\", err)
for k in kids: os.kill(k, 9)
'";

fn forked(t: &str) -> (usize, String) {
    let l = t
        .lines()
        .find(|l| l.starts_with("forked "))
        .unwrap_or_else(|| panic!("no result line: {t}"));
    let w: Vec<&str> = l.split_whitespace().collect();
    (w[1].parse().unwrap(), w[3].to_string())
}

/// Exhaustion: a fork bomb stops at `limits.processes`, which the kernel counts in
/// the sandbox's own user namespace — the same user's processes outside do not use
/// it up — while a workload under the limit runs whole.
#[test]
fn a_fork_bomb_stops_at_the_process_limit() {
    let control = TestHome::new();
    let (n, err) = forked(&text(&bare(&control, &format!("{FORKER} 100"))));
    assert_eq!(
        (n, err.as_str()),
        (100, "None"),
        "the forker must work bare"
    );

    let h = TestHome::new();
    h.user_config("[limits]\nprocesses = 40\n");
    // The limit is in force before anything is forked against it.
    let t = text(&sandboxed(&h, "true"));
    assert!(t.contains("at most 40 processes and threads"), "{t}");
    // 50 processes of the test user outside the sandbox, more than its limit.
    let mut outside: Vec<_> = (0..50)
        .map(|_| h.command("sleep").arg("30").spawn().unwrap())
        .collect();
    let bomb = sandboxed(&h, &format!("{FORKER} 150"));
    let under = sandboxed(&h, &format!("{FORKER} 20"));
    for c in &mut outside {
        let _ = c.kill();
        let _ = c.wait();
    }
    let t = text(&bomb);
    let (n, err) = forked(&t);
    assert!((20..40).contains(&n), "the bomb made {n} processes: {t}");
    assert_eq!(err, libc::EAGAIN.to_string(), "{t}");
    let t = text(&under);
    assert_eq!(forked(&t), (20, "None".to_string()), "under the limit: {t}");
    // `sandpit check` names the limit and the line that set it.
    let t = text(&h.sandpit().args(["check", "--", "sh"]).output().unwrap());
    assert!(
        t.contains(
            "limits:        at most 40 processes and threads in the sandbox (limits.processes, "
        ) && t.contains(".sandpit/config.toml:2:13)"),
        "{t}"
    );

    // The default limit is in force without any configuration (or the hard limit
    // the machine already sets, if lower).
    let mut hard = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `hard` is a valid out-parameter.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut hard) }, 0);
    let want = hard.rlim_max.min(8192);
    let d = TestHome::new();
    let t = text(&sandboxed(
        &d,
        "python3 -c 'import resource; print(\"nproc\", resource.getrlimit(resource.RLIMIT_NPROC))'",
    ));
    assert!(t.contains(&format!("nproc ({want}, {want})")), "{t}");
}

/// A memory flood ends the sandbox, not the user's other programs: everything in it
/// is the OOM killer's first choice (`oom_score_adj` 1000, inherited by every
/// descendant), while the same user's processes outside keep their score.
#[test]
fn the_sandbox_is_the_oom_killers_first_choice() {
    let h = TestHome::new();
    let score = "cat /proc/self/oom_score_adj; sh -c 'sh -c \"cat /proc/self/oom_score_adj\"'";
    let t = text(&bare(&h, score));
    assert_eq!(
        t.split_whitespace().collect::<Vec<_>>(),
        ["0", "0"],
        "bare: {t}"
    );
    let t = text(&sandboxed(&h, score));
    let scores: Vec<&str> = t.lines().filter(|l| !l.starts_with("sandpit:")).collect();
    assert_eq!(scores, ["1000", "1000"], "{t}");
    let t = text(&h.sandpit().args(["check", "--", "sh"]).output().unwrap());
    assert!(
        t.contains("when memory runs out the sandbox is killed first (oom_score_adj 1000)"),
        "{t}"
    );
}

#[test]
fn exit_status_and_signals_propagate() {
    let h = TestHome::new();
    assert_eq!(sandboxed(&h, "exit 7").status.code(), Some(7));
    assert_eq!(sandboxed(&h, "kill -9 $$").status.code(), Some(137));
    let (mut child, mut lines) = spawn_ready(
        sandpit_cmd(
            &h,
            &[],
            "trap 'echo got-term; exit 42' TERM; echo ready; while :; do sleep 0.05; done",
        ),
        Stdio::null(),
    );
    // SAFETY: signalling the sandpit process we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "got-term");
    assert_eq!(status.code(), Some(42));
}

const OTHER_TTY_PY: &str = r#"
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY)
    os.write(fd, b"INJECTED\n"); print("other-tty:ok")
except OSError as e:
    print("other-tty:" + e.strerror)
m, s = os.openpty()
os.write(s, b"own\n"); print("openpty:" + os.read(m, 10).decode().strip())
"#;

/// Another terminal of the same user (a shell in another window, an ssh session)
/// outside the sandbox: the sandbox must neither type into it, read its keystrokes
/// nor change its settings. It sees a devpts of its own, where it can still make
/// terminals.
#[test]
fn the_users_other_terminals_are_out_of_reach() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let (mut master, slave, name) = common::user_terminal();
    // SAFETY: master is our own descriptor.
    unsafe { libc::fcntl(master.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let mut typed = || {
        let mut b = [0u8; 256];
        let n = master.read(&mut b).unwrap_or(0);
        String::from_utf8_lossy(&b[..n]).into_owned()
    };
    let script = format!("python3 t.py {}", name.display());
    let control = TestHome::new();
    control.write(&control.workspace().join("t.py"), OTHER_TTY_PY);
    let t = text(&bare(&control, &script));
    assert!(t.contains("other-tty:ok"), "bare: {t}");
    assert!(typed().contains("INJECTED"), "bare: {t}");

    let h = TestHome::new();
    h.write(&h.workspace().join("t.py"), OTHER_TTY_PY);
    let t = text(&sandboxed(&h, &script));
    let seen = typed();
    drop(slave);
    assert!(t.contains("other-tty:No such file or directory"), "{t}");
    assert!(!seen.contains("INJECTED"), "{seen:?}: {t}");
    assert!(t.contains("openpty:own"), "positive control: {t}");
}

/// A virtual console the user is logged in on is the user's (login hands it over):
/// the sandbox's own `/dev` has no console to open.
#[test]
fn the_users_virtual_consoles_are_out_of_reach() {
    use std::os::unix::fs::{chown, MetadataExt, PermissionsExt};
    let vt = std::path::Path::new("/dev/tty5");
    let Ok(m) = std::fs::metadata(vt) else {
        assert!(
            common::machine_lacks("vt"),
            "/dev/tty5 is missing (SANDPIT_MACHINE_LACKS=vt)"
        );
        return;
    };
    assert!(
        common::is_root(),
        "the test hands a console to the test user"
    );
    /// Gives the console back to its owner, however the test ends.
    struct Restore(u32, u32, u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            let vt = std::path::Path::new("/dev/tty5");
            let _ = chown(vt, Some(self.0), Some(self.1));
            let _ = std::fs::set_permissions(vt, std::fs::Permissions::from_mode(self.2));
        }
    }
    let _restore = Restore(m.uid(), m.gid(), m.mode() & 0o7777);
    chown(vt, Some(common::TEST_UID), None).unwrap();
    std::fs::set_permissions(vt, std::fs::Permissions::from_mode(0o620)).unwrap();
    let script = "python3 -c 'import os; os.open(\"/dev/tty5\", os.O_WRONLY | os.O_NOCTTY); print(\"vt:open\")'";
    let control = TestHome::new();
    let t = text(&bare(&control, script));
    assert!(t.contains("vt:open"), "bare: {t}");
    let h = TestHome::new();
    let t = text(&sandboxed(&h, script));
    assert!(!t.contains("vt:open"), "{t}");
    assert!(t.contains("No such file or directory"), "{t}");
}

#[test]
fn terminal_is_usable_inside() {
    let h = TestHome::new();
    let inner = format!(
        "{} run -- sh -c 'test -t 0 && test -t 1 && echo TTY-OK; stty size; printf \"%s\\n\" typed-line | cat; echo via-dev-tty > /dev/tty && echo DEVTTY-OK; python3 -c \"import os; print(\\\"ctty-pgrp:\\\", os.tcgetpgrp(0) == os.getpgrp())\"'",
        common::sandpit_bin().display()
    );
    let out = h
        .command("script")
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let t = text(&out);
    assert!(t.contains("TTY-OK"), "{t}");
    assert!(t.contains("typed-line"), "{t}");
    // A controlling terminal of its own: /dev/tty works, the command is in its
    // foreground process group.
    assert!(t.contains("via-dev-tty") && t.contains("DEVTTY-OK"), "{t}");
    assert!(t.contains("ctty-pgrp: True"), "{t}");
}

#[test]
fn missing_layer_fails_closed_and_names_the_flag() {
    let h = TestHome::new();
    let out = sandpit_cmd(&h, &[], "touch ran")
        .env("SANDPIT_FORCE_FALLBACK", "1")
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(125), "{t}");
    assert!(
        t.contains("--allow-degraded") && t.contains("not started"),
        "{t}"
    );
    assert!(!h.workspace().join("ran").exists());
    // Positive control: the same command runs in the full mode.
    let out = sandpit_cmd(&h, &[], "touch ran").output().unwrap();
    assert!(
        out.status.success() && h.workspace().join("ran").exists(),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("kernel layer: namespaces"),
        "{}",
        text(&out)
    );
}

#[test]
fn degraded_mode_still_confines_writes_and_says_so() {
    let h = TestHome::new();
    h.write(&h.home().join("outside.txt"), "ORIGINAL");
    let out = sandpit_cmd(
        &h,
        &["--allow-degraded"],
        "echo x > $HOME/outside.txt; echo y > /tmp/sandpit-degraded-probe; echo ok > in.txt && echo WS-OK",
    )
    .env("SANDPIT_FORCE_FALLBACK", "1")
    .output()
    .unwrap();
    let t = text(&out);
    assert!(t.contains("DEGRADED") && t.contains("weaker"), "{t}");
    assert!(t.contains("WS-OK"), "positive control: {t}");
    assert_eq!(
        content(&h.home().join("outside.txt")).as_deref(),
        Some("ORIGINAL")
    );
    assert!(!std::path::Path::new("/tmp/sandpit-degraded-probe").exists());
    assert_eq!(t.matches("Permission denied").count(), 2, "{t}");
}

/// An interactive session through a real terminal (`script` allocates it): typed
/// input reaches the command, and Ctrl-C is delivered to it as SIGINT by its own pty.
#[test]
fn interactive_input_and_ctrl_c_reach_the_command() {
    use std::io::{Read, Write};
    let h = TestHome::new();
    let inner = format!(
        "{} run -- sh -c 'read line; echo got-$line-end; trap \"echo INT-CAUGHT; exit 3\" INT; echo waiting; while :; do sleep 0.05; done'; echo EXIT=$?",
        common::sandpit_bin().display()
    );
    let mut child = h
        .command("script")
        .args(["-qefc", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    let mut wait_for = |want: &str, seen: &mut String| {
        let mut b = [0u8; 256];
        while !seen.contains(want) {
            let n = stdout.read(&mut b).unwrap();
            assert!(n > 0, "EOF before {want:?}: {seen}");
            seen.push_str(&String::from_utf8_lossy(&b[..n]));
        }
    };
    stdin.write_all(b"hello\n").unwrap();
    wait_for("waiting", &mut seen);
    stdin.write_all(b"\x03").unwrap();
    wait_for("EXIT=", &mut seen);
    let _ = child.wait();
    assert!(seen.contains("got-hello-end"), "{seen}");
    assert!(
        seen.contains("INT-CAUGHT") && seen.contains("EXIT=3"),
        "{seen}"
    );
}

#[test]
fn the_run_stops_when_its_mount_guard_stops() {
    let h = TestHome::new();
    let tag = format!("31.{}", std::process::id());
    let (mut child, mut lines) = spawn_ready(
        sandpit_cmd(&h, &[], &format!("echo ready; sleep {tag}; echo survived")),
        Stdio::piped(),
    );
    // sleep's parent is the command's shell, whose parent is the sandbox's init,
    // whose parent is the launcher; the launcher's other child is the guard (outside
    // the pid namespace), besides sandpit's tending process, which names itself.
    let argv = format!("sleep\0{tag}\0").into_bytes();
    let find_sleep = || {
        daemons_with_tag(&tag)
            .into_iter()
            .find(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok().as_ref() == Some(&argv))
    };
    let sleep = common::wait_for_some(5, "the sandboxed sleep", find_sleep);
    let shell = ppid(sleep).unwrap();
    let init = ppid(shell).unwrap();
    let launcher = ppid(init).unwrap();
    assert_eq!(launcher, child.id(), "pid 1's parent is the launcher");
    let guards: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|p| *p != init && ppid(*p) == Some(launcher))
        .filter(|p| !common::is_tender(*p))
        .collect();
    assert_eq!(
        guards.len(),
        1,
        "the launcher's children besides init: {guards:?}"
    );
    // SAFETY: killing the guard of the run this test started.
    unsafe { libc::kill(guards[0] as i32, libc::SIGKILL) };
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(125), "{err}");
    assert!(err.contains("the mount guard stopped"), "{err}");
    assert!(lines.next().is_none(), "the command went on");
    assert!(!alive(sleep), "the command outlived its guard");
}

/// A command that spins on opening a credential directory the host is about to
/// create can win the moment before the mount guard masks it; the guard then finds
/// the descriptor and stops the run, so the secret written into it is never read.
const SPIN_OPEN_PY: &str = r#"
import os, sys, time
p = os.path.expanduser("~/.azure")
fd, t = None, time.time()
while fd is None and time.time() - t < 8:
    try:
        fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        pass
print("got-fd" if fd is not None else "no-fd", flush=True)
time.sleep(1.5)
if fd is not None:
    for n in os.listdir(fd):
        try:
            print(open(os.open(n, os.O_RDONLY, dir_fd=fd)).read(), flush=True)
        except OSError as e:
            print("read:", e.strerror, flush=True)
"#;

#[test]
fn a_credential_directory_opened_before_the_guard_masks_it_stops_the_run() {
    let canary = "AZURE-CANARY-guard";
    let create = |h: &TestHome| {
        let home = h.home();
        // The test's subject, not a wait: the directory appears while the command
        // already spins on it.
        std::thread::sleep(std::time::Duration::from_millis(700));
        let d = home.join(".azure");
        std::fs::create_dir(&d).unwrap();
        h.give_to_test_user(&d);
        h.write(&d.join("tokens.json"), canary);
    };
    // Control: without sandpit the spinning open gets the directory and reads it.
    let control = TestHome::new();
    control.write(&control.workspace().join("spin.py"), SPIN_OPEN_PY);
    let out = std::thread::scope(|s| {
        s.spawn(|| create(&control));
        control.command("python3").arg("spin.py").output().unwrap()
    });
    assert!(text(&out).contains(canary), "{}", text(&out));

    for _ in 0..3 {
        let h = TestHome::new();
        h.write(&h.workspace().join("spin.py"), SPIN_OPEN_PY);
        let out = std::thread::scope(|s| {
            s.spawn(|| create(&h));
            sandpit_cmd(&h, &[], "exec python3 spin.py")
                .output()
                .unwrap()
        });
        let t = text(&out);
        assert!(!t.contains(canary), "the late secret was read:\n{t}");
        if t.contains("got-fd") {
            // The command won the moment before the mask: the guard saw it.
            assert_eq!(out.status.code(), Some(125), "{t}");
            assert!(
                t.contains("opened inside the sandbox before its mount was back"),
                "{t}"
            );
        } else {
            assert!(t.contains("no-fd"), "{t}");
        }
    }
}

/// A user removing one of sandpit's empty placeholders during a run (an unfamiliar
/// empty `.claude` in the project) must not let the command create the protected
/// path on the host: the mount guard makes the placeholder again at once.
#[test]
fn a_removed_placeholder_is_made_again() {
    let script =
        "touch ready; i=0; while [ ! -e go ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
                  mkdir -p .claude; echo '{\"hooks\":1}' > .claude/settings.json; echo done";
    // `guarded`: the run's guard must make the placeholder again before the
    // command goes on.
    let remove = |h: &TestHome, guarded: bool| {
        let ws = h.workspace();
        common::wait_until(10, "the command's `ready`", || ws.join("ready").exists());
        let _ = std::fs::remove_dir(ws.join(".claude"));
        if guarded {
            common::wait_until(10, "the guard to make `.claude` again", || {
                ws.join(".claude").exists()
            });
        }
        std::fs::write(ws.join("go"), "").unwrap();
    };
    // Control: without sandpit the file lands.
    let control = TestHome::new();
    let out = std::thread::scope(|s| {
        s.spawn(|| remove(&control, false));
        bare(&control, script)
    });
    assert!(text(&out).contains("done"), "{}", text(&out));
    assert!(control.workspace().join(".claude/settings.json").exists());

    let h = TestHome::new();
    let out = std::thread::scope(|s| {
        s.spawn(|| remove(&h, true));
        sandboxed(&h, script)
    });
    let t = text(&out);
    assert!(
        !h.workspace().join(".claude/settings.json").exists(),
        "the protected path was created on the host:\n{t}"
    );
    // The placeholder is back while the run lasts and gone after it.
    assert!(t.contains("done"), "{t}");
    assert!(!h.workspace().join(".claude").exists(), "{t}");
}
