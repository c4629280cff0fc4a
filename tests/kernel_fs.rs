//! Kernel layer, files: masked credential paths cannot be read by any route, and
//! nothing outside the writable roots (or protected inside them) can be written by
//! any syscall family. Every probe first runs without sandpit to show it works.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod kernel_support;

use common::{spawn_ready, TestHome};
use kernel_support::*;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// A HOME with credentials holding the canary, a normal file, and a symlink to the
/// key planted in the workspace beforehand.
fn home_with_secrets() -> TestHome {
    let h = TestHome::new();
    let home = h.home();
    h.write(&home.join(".ssh/id_rsa"), CANARY);
    h.write(&home.join(".aws/credentials"), CANARY);
    h.write(&home.join(".netrc"), CANARY);
    h.write(&home.join(".config/gh/hosts.yml"), CANARY);
    h.write(&home.join("notes.txt"), "NORMAL");
    std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), h.workspace().join("planted-link"))
        .unwrap();
    let py = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/kernel_support/rawread.py"),
    )
    .unwrap();
    h.write(&h.workspace().join("rawread.py"), &py);
    h
}

const READ_SCRIPT: &str = r#"
H=$HOME
cat $H/.ssh/id_rsa
cat ../.ssh/id_rsa
cat $H/./.ssh//id_rsa
cat $H/project/../.ssh/id_rsa
cat /proc/self/root$H/.ssh/id_rsa
cat /proc/self/cwd/../.ssh/id_rsa
cat planted-link
ln -s $H/.ssh/id_rsa new-link; cat new-link
ln $H/.ssh/id_rsa hard-link; cat hard-link
cp $H/.ssh/id_rsa copied; cat copied
cat $H/.netrc $H/.aws/credentials $H/.config/gh/hosts.yml
ls -la $H/.ssh $H/.aws
grep -r CANARY $H 2>/dev/null
python3 rawread.py $H/.ssh/id_rsa $H/.netrc
echo CONTROL-$(cat $H/notes.txt)
"#;

#[test]
fn masked_credentials_are_unreadable_by_path_tricks_links_and_raw_syscalls() {
    let control = home_with_secrets();
    let out = bare(&control, READ_SCRIPT);
    let t = text(&out);
    // Each route works without the sandbox.
    for route in ["raw-abs", "raw-dirfd", "raw-opath"] {
        assert!(
            t.contains(&format!(
                "{route} {}/.ssh/id_rsa: {CANARY}",
                control.home().display()
            )),
            "{route} bare: {t}"
        );
    }
    assert!(
        t.matches(CANARY).count() >= 12,
        "bare run should read the canary: {t}"
    );

    let h = home_with_secrets();
    let out = sandboxed(&h, READ_SCRIPT);
    let t = text(&out);
    assert!(
        !t.contains(CANARY),
        "canary leaked through the sandbox: {t}"
    );
    assert!(t.contains("CONTROL-NORMAL"), "positive control failed: {t}");
    assert!(t.contains("Permission denied"), "{t}");
    // The file masks and links left nothing behind on the host either.
    assert!(!h.workspace().join("hard-link").exists());
    let copied = h.workspace().join("copied");
    assert!(std::fs::read_to_string(&copied)
        .map(|s| !s.contains(CANARY))
        .unwrap_or(true));
}

/// Python that makes the interposer ask for the cwd (a relative read of `here.txt`)
/// and can then move it with a raw `chdir`, which the interposer does not see.
const RAW_CHDIR: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
SYS_chdir = {"x86_64": 80, "aarch64": 49}[os.uname().machine]
open("here.txt").close()
"#;

/// The interposer remembers the cwd between relative opens (sandpit-dylib/src/cwd.rs)
/// and cannot see a raw `chdir`: a relative read after one is judged against the old
/// cwd (the workspace, where `.ssh/id_rsa` would be allowed) and let through to the
/// kernel, whose mask on `~/.ssh` must then refuse it. Every layer on.
#[test]
fn a_read_judged_against_a_stale_cwd_meets_the_kernel_layer() {
    const SCRIPT: &str = r#"
r = libc.syscall(SYS_chdir, os.environ["HOME"].encode())
print("raw chdir:", r, os.getcwd())
try:
    print("stale-cwd:", open(".ssh/id_rsa").read())
except OSError as e:
    print("stale-cwd:", e.strerror)
print("control:", open("notes.txt").read())
"#;
    let run = |h: &TestHome, sandboxed: bool| {
        h.write(&h.workspace().join("here.txt"), "x");
        let mut c = if sandboxed {
            let mut c = h.sandpit();
            c.args([
                "run",
                "--",
                "python3",
                "-c",
                &format!("{RAW_CHDIR}{SCRIPT}"),
            ]);
            c
        } else {
            let mut c = h.command("python3");
            c.args(["-c", &format!("{RAW_CHDIR}{SCRIPT}")]);
            c
        };
        text(&c.output().unwrap())
    };
    let control = home_with_secrets();
    let t = run(&control, false);
    assert!(t.contains(&format!("stale-cwd: {CANARY}")), "bare: {t}");

    let h = home_with_secrets();
    let t = run(&h, true);
    let home = h.home();
    assert!(
        t.contains(&format!("raw chdir: 0 {}", home.display())),
        "{t}"
    );
    assert!(!t.contains(CANARY), "canary leaked: {t}");
    assert!(t.contains("stale-cwd: Permission denied"), "{t}");
    assert!(t.contains("control: NORMAL"), "positive control: {t}");
    // The interposer let it through (it judged the workspace's `.ssh/id_rsa`): the
    // refusal above is the kernel layer's. With the cwd asked afresh it would have
    // refused first and said so.
    assert!(!t.contains("blocked read"), "{t}");
}

/// In fallback mode (no namespaces) protected paths inside the workspace are the
/// interposer's alone: a relative write after a raw `chdir` it cannot see must be
/// judged where it lands (`.git/hooks`), not against the cwd it remembers.
#[test]
fn a_relative_write_after_an_unseen_chdir_is_judged_where_it_lands() {
    const SCRIPT: &str = r#"
print("raw chdir:", libc.syscall(SYS_chdir, b".git"))
try:
    open("hooks/pre-commit", "w").write("evil")
    print("hook: written")
except OSError as e:
    print("hook:", e.strerror)
os.chdir("..")
open("fine.txt", "w").write("ok")
print("control: written")
"#;
    let h = home_with_secrets();
    h.write(&h.workspace().join("here.txt"), "x");
    h.write(&h.workspace().join(".git/hooks/README"), "hooks");
    let out = h
        .sandpit()
        .args([
            "run",
            "--allow-degraded",
            "--",
            "python3",
            "-c",
            &format!("{RAW_CHDIR}{SCRIPT}"),
        ])
        .env("SANDPIT_FORCE_FALLBACK", "1")
        .output()
        .unwrap();
    let t = text(&out);
    assert!(t.contains("DEGRADED"), "{t}");
    assert!(t.contains("raw chdir: 0"), "{t}");
    assert!(t.contains("hook: Permission denied"), "{t}");
    assert!(!h.workspace().join(".git/hooks/pre-commit").exists(), "{t}");
    assert!(t.contains("control: written"), "positive control: {t}");
    assert_eq!(
        content(&h.workspace().join("fine.txt")).as_deref(),
        Some("ok")
    );
}

#[test]
fn static_binary_and_io_uring_cannot_read_masked_files() {
    let control = home_with_secrets();
    let st = build_probe(&control, "static_read", true);
    let ur = build_probe(&control, "uring_read", false);
    let key = control.home().join(".ssh/id_rsa");
    let script = format!(
        "{} {k}; {} {k}",
        st.display(),
        ur.display(),
        k = key.display()
    );
    let t = text(&bare(&control, &script));
    assert!(
        t.contains(&format!("static-read {}:{CANARY}", key.display())),
        "bare static: {t}"
    );
    // The io_uring probe must work without sandpit, unless the machine is declared
    // to lack io_uring (kernel.io_uring_disabled).
    if !common::machine_lacks("io_uring") {
        assert!(
            t.contains(&format!("uring-read:{CANARY}")),
            "bare io_uring: {t}"
        );
    }

    let h = home_with_secrets();
    build_probe(&h, "static_read", true);
    build_probe(&h, "uring_read", false);
    let key = h.home().join(".ssh/id_rsa");
    let notes = h.home().join("notes.txt");
    let script = format!(
        "./static_read {k} {n}; ./uring_read {k}; ./uring_read {n}",
        k = key.display(),
        n = notes.display()
    );
    let t = text(&sandboxed(&h, &script));
    assert!(!t.contains(CANARY), "canary leaked: {t}");
    assert!(
        t.contains(&format!("static-open {}: Permission denied", key.display())),
        "{t}"
    );
    assert!(
        t.contains(&format!("static-read {}:NORMAL", notes.display())),
        "control: {t}"
    );
    // io_uring is refused outright (seccomp), whatever the file.
    assert_eq!(
        t.matches("io_uring_setup: Function not implemented")
            .count(),
        2,
        "{t}"
    );
}

/// One line per operation: `name:ok` or `name:<errno text>`.
const WRITE_PY: &str = r#"
import os, sys
T = sys.argv[1]          # directory under attack
def mk(n):                # a fresh file of ours in the current directory
    open(n, "w").write("MINE"); return n
def tryit(name, f):
    try:
        f(); print(f"{name}:ok")
    except OSError as e:
        print(f"{name}:{e.strerror}")
tryit("open-trunc", lambda: open(f"{T}/existing.txt", "w").write("PWNED"))
tryit("append", lambda: open(f"{T}/existing.txt", "a").write("PWNED"))
tryit("creat", lambda: os.close(os.open(f"{T}/new.txt", os.O_CREAT | os.O_WRONLY, 0o644)))
tryit("mkdir", lambda: os.mkdir(f"{T}/newdir"))
tryit("rename-in", lambda: os.rename(mk("s1"), f"{T}/renamed.txt"))
tryit("rename-over", lambda: os.rename(mk("s2"), f"{T}/existing.txt"))
tryit("link", lambda: os.link(mk("s3"), f"{T}/hardlink.txt"))
tryit("symlink", lambda: os.symlink("/etc/passwd", f"{T}/symlink.txt"))
tryit("truncate", lambda: os.truncate(f"{T}/existing.txt", 0))
tryit("chmod", lambda: os.chmod(f"{T}/existing.txt", 0o777))
tryit("utime", lambda: os.utime(f"{T}/existing.txt", (0, 0)))
tryit("unlink", lambda: os.unlink(f"{T}/existing.txt"))
tryit("mknod-fifo", lambda: os.mkfifo(f"{T}/fifo"))
"#;

fn setup_write_target(h: &TestHome, dir: &std::path::Path) {
    h.write(&dir.join("existing.txt"), "ORIGINAL");
    h.write(&h.workspace().join("mine.txt"), "MINE");
    h.write(&h.workspace().join("attack.py"), WRITE_PY);
}

fn assert_target_untouched(dir: &std::path::Path, before_mtime: i64) {
    let f = dir.join("existing.txt");
    assert_eq!(content(&f).as_deref(), Some("ORIGINAL"));
    let m = std::fs::metadata(&f).unwrap();
    assert_eq!(m.mode() & 0o777, 0o644, "mode changed");
    assert_eq!(m.mtime(), before_mtime, "mtime changed");
    for n in [
        "new.txt",
        "newdir",
        "renamed.txt",
        "hardlink.txt",
        "symlink.txt",
        "fifo",
    ] {
        assert!(
            std::fs::symlink_metadata(dir.join(n)).is_err(),
            "{n} was created"
        );
    }
}

#[test]
fn writes_outside_the_workspace_fail_by_every_syscall_family() {
    // Control: the same attack on a directory of ours succeeds without sandpit.
    let control = TestHome::new();
    let target = control.home().join("outside");
    std::fs::create_dir_all(&target).unwrap();
    control.give_to_test_user(&target);
    setup_write_target(&control, &target);
    let t = text(&bare(
        &control,
        &format!("python3 attack.py {}", target.display()),
    ));
    assert!(
        !t.contains(":Read-only") && t.matches(":ok").count() == 13,
        "bare: {t}"
    );

    let h = TestHome::new();
    let target = h.home().join("outside");
    std::fs::create_dir_all(&target).unwrap();
    h.give_to_test_user(&target);
    setup_write_target(&h, &target);
    let mtime = std::fs::metadata(target.join("existing.txt"))
        .unwrap()
        .mtime();
    // Positive control in the same run: the same attack inside the workspace works.
    let inner = h.workspace().join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    h.give_to_test_user(&inner);
    h.write(&inner.join("existing.txt"), "ORIGINAL");
    let script = format!(
        "python3 attack.py {t}; echo ===; python3 attack.py {i}",
        t = target.display(),
        i = inner.display()
    );
    let out = sandboxed(&h, &script);
    let t = text(&out);
    let (outside, inside) = t.split_once("===").unwrap();
    assert_eq!(outside.matches(":ok").count(), 0, "a write escaped: {t}");
    assert!(
        outside.matches(":Read-only file system").count() >= 11,
        "{t}"
    );
    assert_eq!(
        inside.matches(":ok").count(),
        13,
        "control inside workspace: {t}"
    );
    assert_target_untouched(&target, mtime);
    // Other places outside: /etc, the state dir, HOME itself.
    h.write(&h.home().join(".sandpit/state"), "STATE");
    let t = text(&sandboxed(
        &h,
        "touch /etc/sandpit-x; touch $HOME/.bashrc; touch $HOME/.sandpit/x; echo ok > $HOME/f; mkdir /usr/x",
    ));
    assert_eq!(t.matches("Read-only file system").count(), 5, "{t}");
    assert!(!h.home().join(".bashrc").exists() && !h.home().join("f").exists());
}

#[test]
fn protected_paths_in_the_workspace_stay_unwritable_even_if_missing() {
    let h = TestHome::new();
    let ws = h.workspace();
    h.write(&ws.join(".git/config"), "[core]\n");
    h.write(&ws.join(".git/description"), "desc");
    h.write(&ws.join("x"), "payload");
    let script = r#"
echo evil > .git/config
echo '[alias]' >> .git/config
mv .git .git-moved
rm -f .git/config
mkdir -p .git/hooks
echo 'curl evil' > .git/hooks/pre-commit
echo evil > .sandpit.toml
mv x .sandpit.toml
ln x .mcp.json
mkdir -p .claude && echo '{}' > .claude/settings.json
echo fine > .git/description && echo DESC-OK
echo fine > ok.txt && echo WS-OK
"#;
    // Control: without sandpit every one of these works.
    let control = TestHome::new();
    let cws = control.workspace();
    control.write(&cws.join(".git/config"), "[core]\n");
    control.write(&cws.join("x"), "payload");
    bare(&control, script);
    assert!(cws.join(".git-moved").exists() || cws.join(".git/hooks/pre-commit").exists());
    assert!(cws.join(".sandpit.toml").exists());

    let out = sandboxed(&h, script);
    let t = text(&out);
    assert!(
        t.contains("DESC-OK") && t.contains("WS-OK"),
        "positive control: {t}"
    );
    assert_eq!(
        content(&ws.join(".git/config")).as_deref(),
        Some("[core]\n"),
        "{t}"
    );
    assert!(
        ws.join(".git").is_dir() && !ws.join(".git-moved").exists(),
        "{t}"
    );
    assert!(!ws.join(".git/hooks").exists(), "{t}");
    assert!(
        !ws.join(".sandpit.toml").exists(),
        "placeholder left or file created: {t}"
    );
    assert!(
        !ws.join(".mcp.json").exists() && !ws.join(".claude").exists(),
        "{t}"
    );
    assert_eq!(content(&ws.join("x")).as_deref(), Some("payload"));
    assert_eq!(content(&ws.join("ok.txt")).as_deref(), Some("fine\n"));
}

#[test]
fn degraded_mode_refuses_reads_of_credentials_with_landlock() {
    let h = home_with_secrets();
    build_probe(&h, "static_read", true);
    let script = format!(
        "{READ_SCRIPT}\n./static_read $HOME/.ssh/id_rsa $HOME/notes.txt; echo ok > in.txt && echo WS-OK"
    );
    let out = sandpit_cmd(&h, &["--allow-degraded"], &script)
        .env("SANDPIT_FORCE_FALLBACK", "1")
        .output()
        .unwrap();
    let t = text(&out);
    assert!(t.contains("DEGRADED"), "{t}");
    assert!(!t.contains(CANARY), "canary leaked in degraded mode: {t}");
    assert!(
        t.contains("CONTROL-NORMAL") && t.contains("static-read") && t.contains(":NORMAL"),
        "positive control: {t}"
    );
    assert!(t.contains("WS-OK"), "{t}");
}

/// Two runs in one workspace: the first run's placeholders must not be removed while
/// a second run still relies on them (removing a mountpoint unmounts it there).
#[test]
fn concurrent_runs_keep_each_others_protected_placeholders() {
    use std::process::Stdio;
    let h = TestHome::new();
    let ws = h.workspace();
    let start = |script: &str| spawn_ready(sandpit_cmd(&h, &[], script), Stdio::piped());
    let (first, _) = start("echo ready; while [ ! -e go1 ]; do sleep 0.05; done");
    let (second, mut second_out) = start(
        "echo ready; while [ ! -e go2 ]; do sleep 0.05; done; \
         echo evil > .sandpit.toml 2>&1 || echo WRITE-REFUSED; echo evil > .mcp.json || echo WRITE-REFUSED",
    );
    h.write(&ws.join("go1"), "");
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success());
    h.write(&ws.join("go2"), "");
    let second = second.wait_with_output().unwrap();
    let rest: Vec<String> = second_out.by_ref().map(|l| l.unwrap()).collect();
    assert!(second.status.success(), "{rest:?}");
    assert_eq!(
        rest,
        vec!["WRITE-REFUSED", "WRITE-REFUSED"],
        "{}",
        text(&second)
    );
    for f in [".sandpit.toml", ".mcp.json"] {
        let c = content(&ws.join(f)).unwrap_or_default();
        assert!(!c.contains("evil"), "{f} was written");
    }
}

/// A workspace that is a linked worktree or a submodule checkout has a `.git` file
/// naming its repository. Rewritten (`gitdir: evil`), it would point the user's git at
/// a repository the sandbox made, whose config runs code (`core.fsmonitor`): it is
/// read-only, while git inside still works through it.
#[test]
fn a_workspaces_gitfile_cannot_be_redirected() {
    let script = "git status --porcelain >/dev/null && echo STATUS-OK; \
                  printf 'gitdir: evil\\n' > .git && echo REWRITTEN; \
                  echo x > other && echo WS-OK";
    let gitfile = |h: &TestHome| {
        let repo = h.home().join("repo");
        let o = h
            .command("git")
            .args(["init", "-q", "--separate-git-dir"])
            .arg(&repo)
            .arg(h.workspace())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        std::fs::read_to_string(h.workspace().join(".git")).unwrap()
    };
    let control = TestHome::new();
    gitfile(&control);
    let t = text(&bare(&control, script));
    assert!(t.contains("REWRITTEN"), "bare: {t}");

    let h = TestHome::new();
    let before = gitfile(&h);
    let t = text(&sandboxed(&h, script));
    assert!(
        t.contains("STATUS-OK") && t.contains("WS-OK"),
        "positive control: {t}"
    );
    assert!(!t.contains("REWRITTEN"), "{t}");
    assert_eq!(
        std::fs::read_to_string(h.workspace().join(".git")).unwrap(),
        before
    );
}

/// The workspace made a repository, as the test user.
fn git_init(h: &TestHome) {
    let o = h
        .command("git")
        .args(["init", "-q"])
        .arg(h.workspace())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

/// The user's git takes the workspace's own `.git` for its repository (nothing
/// points it elsewhere).
fn assert_git_uses_its_own_repository(h: &TestHome) {
    let o = h
        .command("git")
        .arg("-C")
        .arg(h.workspace())
        .args(["rev-parse", "--git-common-dir"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        ".git",
        "{}",
        text(&o)
    );
}

/// The names in the workspace's `.git` that start with `prefix`.
fn in_git_dir(h: &TestHome, prefix: &str) -> Vec<String> {
    std::fs::read_dir(h.workspace().join(".git"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// `.git/commondir` names the directory git takes its config and hooks from; no
/// placeholder can hold its name (git fails on a directory there). Created past the
/// interposer (here: without it), it is moved aside by the mount guard at once and
/// the run is stopped (an editor running git every few seconds would otherwise
/// follow it while the run lasts); the user's git is not redirected. Other files
/// git writes in `.git` stop nothing.
#[test]
fn a_commondir_the_run_created_is_moved_aside_and_the_run_stopped() {
    let h = TestHome::new();
    let ws = h.workspace();
    git_init(&h);
    let control = sandboxed(
        &h,
        "echo x > .git/FETCH_HEAD && echo y > .git/ORIG_HEAD && echo ref > head && echo FINE",
    );
    assert!(control.status.success(), "{}", text(&control));
    assert!(text(&control).contains("FINE"), "{}", text(&control));
    let start = std::time::Instant::now();
    let script = "mkdir -p .x && printf '../.x\\n' > .git/commondir; sleep 20; echo SURVIVED";
    let out = sandboxed(&h, script);
    let t = text(&out);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(10),
        "the run went on: {t}"
    );
    assert!(!t.contains("SURVIVED"), "{t}");
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("mount guard:") && t.contains(".git/commondir appeared during the run"),
        "{t}"
    );
    assert!(!ws.join(".git/commondir").exists(), "{t}");
    assert!(
        t.contains(".git/commondir was created by the run") && t.contains("moved it to"),
        "{t}"
    );
    let moved = in_git_dir(&h, "commondir.sandpit-quarantine-");
    assert_eq!(moved.len(), 1, "{t}");
    // What the sandbox had written when it was stopped (it may be stopped between
    // creating the file and writing it).
    let kept = std::fs::read_to_string(ws.join(".git").join(&moved[0])).unwrap();
    assert!("../.x\n".starts_with(&kept), "{kept:?}");
    // The user's git works on its own repository again.
    assert_git_uses_its_own_repository(&h);
}

/// The name a file is moved aside to cannot be taken first: the sandbox knows the
/// run's id (its audit socket's path names it), so directories at every name it
/// could guess are in the way, and `commondir` is moved aside all the same, and
/// nothing but it is reported moved.
#[test]
fn a_commondir_is_moved_aside_whatever_names_the_sandbox_takes_first() {
    let h = TestHome::new();
    let ws = h.workspace();
    git_init(&h);
    let script = "run=$(basename \"$(dirname \"$SANDPIT_AUDIT\")\"); \
                  test -n \"$run\" || { echo NO-RUN-ID; exit 1; }; \
                  mkdir -p .git/commondir.sandpit-quarantine-$run/keep \
                  .git/HEAD.sandpit-quarantine-$run/keep \
                  .git/config.worktree.sandpit-quarantine-$run/keep && echo TAKEN && \
                  mkdir -p .x && printf '../.x\\n' > .git/commondir; sleep 20";
    let out = sandboxed(&h, script);
    let t = text(&out);
    assert!(t.contains("TAKEN"), "{t}");
    assert!(!ws.join(".git/commondir").exists(), "{t}");
    let moved = in_git_dir(&h, "commondir.sandpit-quarantine-");
    let files: Vec<&String> = moved
        .iter()
        .filter(|n| ws.join(".git").join(n).is_file())
        .collect();
    assert_eq!(files.len(), 1, "{moved:?} {t}");
    // Only commondir is reported; the names taken in advance are no moves.
    assert_eq!(t.matches("moved it to").count(), 1, "{t}");
    assert_git_uses_its_own_repository(&h);
}

/// The user's own `.git/config.worktree` (git on the host makes one: `git config
/// --worktree`, `git sparse-checkout`) in a repository without
/// `extensions.worktreeConfig`, which git does not read: a run going on meanwhile is
/// not stopped for it; the file is moved aside when the run ends, with a warning that
/// says it may be the user's.
#[test]
fn the_users_own_config_worktree_does_not_stop_a_run() {
    use std::io::Read;
    let h = TestHome::new();
    let ws = h.workspace();
    git_init(&h);
    let c = sandpit_cmd(
        &h,
        &[],
        "echo ready; while [ ! -e go ]; do sleep 0.05; done; echo DONE",
    );
    let (mut run, mut out) = spawn_ready(c, std::process::Stdio::piped());
    h.write(
        &ws.join(".git/config.worktree"),
        "[core]\n\tsparseCheckout = true\n",
    );
    h.write(&ws.join("go"), "");
    let status = run.wait().unwrap();
    let mut err = String::new();
    run.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "the run was stopped: {err}");
    assert_eq!(out.next().unwrap().unwrap(), "DONE");
    assert!(
        err.contains("config.worktree appeared during the run") && err.contains("moved it to"),
        "{err}"
    );
    assert!(!ws.join(".git/config.worktree").exists(), "{err}");
}

/// The guard's move answered: a static program links `commondir` again the moment it
/// is gone and then takes `.git`'s write or search right (it owns `.git`), so that a
/// move made after the guard had stopped, by the unprivileged launcher, would fail.
/// The guard kills the sandbox before it moves anything: nothing is left for the
/// user's git to follow, whatever mode `.git` was left in (second review).
#[test]
fn a_commondir_linked_again_in_a_locked_git_dir_is_still_moved_aside() {
    for mode in ["555", "666", "755"] {
        let h = TestHome::new();
        let ws = h.workspace();
        git_init(&h);
        let pwned = h.home().join("pwned");
        build_probe(&h, "recreate", true);
        let script = format!(
            "mkdir -p .x/objects .x/refs/heads && \
             printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch {}; false\"\\n' > .x/config && \
             printf '../.x\\n' > .git/cd && ./recreate .git/cd .git/commondir .git {mode}",
            pwned.display()
        );
        let t = text(&sandboxed(&h, &script));
        let _ = std::process::Command::new("chmod")
            .arg("755")
            .arg(ws.join(".git"))
            .status();
        assert!(
            ws.join(".git/commondir").symlink_metadata().is_err(),
            "mode {mode}: commondir left: {t}"
        );
        let _ = h.command("git").arg("-C").arg(&ws).arg("status").output();
        assert!(!pwned.exists(), "mode {mode}: the user's git ran it: {t}");
        assert_git_uses_its_own_repository(&h);
    }
}

/// With `extensions.worktreeConfig` on (`git sparse-checkout` sets it) git reads
/// `.git/config.worktree` as config: one the sandbox writes stops the run and is moved
/// aside at once, so the user's git run meanwhile finds nothing (second review).
#[test]
fn a_live_config_worktree_the_sandbox_writes_stops_the_run() {
    let h = TestHome::new();
    let ws = h.workspace();
    git_init(&h);
    let o = h
        .command("git")
        .arg("-C")
        .arg(&ws)
        .args(["config", "extensions.worktreeConfig", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let pwned = h.home().join("pwned");
    let script = format!(
        "printf '[core]\\n\\tfsmonitor = \"touch {}; false\"\\n' > .git/config.worktree; \
         sleep 20; echo SURVIVED",
        pwned.display()
    );
    let t = text(&sandboxed(&h, &script));
    assert!(!t.contains("SURVIVED"), "{t}");
    assert!(!ws.join(".git/config.worktree").exists(), "{t}");
    let _ = h.command("git").arg("-C").arg(&ws).arg("status").output();
    assert!(!pwned.exists(), "the user's git ran it: {t}");
}

/// With its `.git` made unusable (`HEAD` broken), git takes a workspace holding
/// `HEAD`, `objects/` and `refs/` for a bare repository and runs what its `config`
/// names (`core.fsmonitor`) on the user's next `git status`. A `HEAD` the run creates
/// at the top (last, when all the rest is in place) is moved aside by the mount
/// guard at once, and the run is stopped.
#[test]
fn a_bare_repository_made_of_the_workspace_runs_nothing_afterwards() {
    let attack = |h: &TestHome| {
        let ws = h.workspace();
        let pwned = h.home().join("pwned");
        git_init(h);
        let script = format!(
            "echo broken > .git/HEAD; mkdir -p objects refs/heads; \
             printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = {}\\n\\tfsmonitor = \"touch {}; false\"\\n' > config; \
             echo 'ref: refs/heads/master' > HEAD; \
             echo PLANTED; sleep 20; echo SURVIVED",
            ws.display(),
            pwned.display()
        );
        (script, pwned)
    };
    let host_git_status = |h: &TestHome| {
        let _ = h
            .command("git")
            .arg("-C")
            .arg(h.workspace())
            .arg("status")
            .output();
    };
    let control = TestHome::new();
    let (script, pwned) = attack(&control);
    let quick = script.replace("sleep 20; ", "");
    assert!(text(&bare(&control, &quick)).contains("SURVIVED"));
    host_git_status(&control);
    assert!(
        pwned.exists(),
        "control: the layout made the user's git run it"
    );

    let h = TestHome::new();
    let (script, pwned) = attack(&h);
    let t = text(&sandboxed(&h, &script));
    assert!(!t.contains("SURVIVED"), "{t}");
    assert!(
        t.contains("mount guard:") && t.contains("HEAD appeared during the run"),
        "{t}"
    );
    assert!(
        t.contains("HEAD was created by the run") && t.contains("moved it to"),
        "{t}"
    );
    host_git_status(&h);
    assert!(
        !pwned.exists(),
        "the user's git ran the sandbox's config: {t}"
    );
}

/// Runs back to back in a workspace with no repository: a run that plans while the
/// last one is still removing its placeholders (a sealed `.git`) must wait for that,
/// not plan inside a `.git` about to go; it takes the workspace lock before planning.
#[test]
fn back_to_back_runs_wait_for_the_last_ones_placeholders() {
    let h = TestHome::new();
    let ws = h.workspace();
    for i in 0..30 {
        let o = sandpit_cmd(&h, &[], "test -d .git && echo SEALED")
            .output()
            .unwrap();
        assert!(o.status.success(), "run {i}: {}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "SEALED\n", "run {i}");
    }
    for p in [".git", ".mcp.json"] {
        assert!(!ws.join(p).exists(), "{p} left behind");
    }
}

/// Deny-inside-allow: a `block_read` path inside the workspace is masked while the
/// rest of the workspace stays readable and writable; an `allow_read` carve-out inside
/// a masked directory is readable; a secret created on the host during the run inside
/// a masked directory stays invisible.
#[test]
fn precedence_carve_outs_and_secrets_created_during_the_run() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let h = home_with_secrets();
    let ws = h.workspace();
    h.write(&ws.join(".env"), CANARY);
    h.write(&ws.join("src.txt"), "SOURCE");
    h.write(&h.home().join(".config/gh/config.yml"), "GH-CONFIG-PUBLIC");
    h.user_config("[files]\nallow_read = [\"~/.config/gh/config.yml\"]\n");
    let script = "cat .env; cat src.txt; echo; echo more >> src.txt && echo WS-WRITE-OK; \
                  cat $HOME/.config/gh/config.yml; cat $HOME/.config/gh/hosts.yml; \
                  echo; echo ready; while [ ! -e go ]; do sleep 0.05; done; \
                  cat $HOME/.ssh/created-later; ls $HOME/.ssh; echo END";
    let mut child = sandpit_cmd(&h, &["--block-read", ".env"], script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = vec![];
    for l in lines.by_ref() {
        let l = l.unwrap();
        let ready = l.ends_with("ready");
        seen.push(l);
        if ready {
            break;
        }
    }
    // While the command runs, a new secret appears on the host.
    h.write(&h.home().join(".ssh/created-later"), CANARY);
    h.write(&ws.join("go"), "");
    seen.extend(lines.map(|l| l.unwrap()));
    let out = child.wait_with_output().unwrap();
    let all = format!(
        "{}\n{}",
        seen.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(CANARY), "{all}");
    assert!(
        all.contains("SOURCE") && all.contains("WS-WRITE-OK"),
        "{all}"
    );
    assert!(all.contains("GH-CONFIG-PUBLIC"), "carve-out: {all}");
    assert!(all.contains("END"), "{all}");
    assert_eq!(content(&ws.join(".env")).as_deref(), Some(CANARY));
}

/// Every credential location of the default policy (`files.block_read`, the home's
/// entries but macOS's `~/Library`) holds a canary; none of them reaches a dynamic
/// reader with the interposer, nor a static one with raw system calls under the
/// kernel layer alone. A file beside them stays readable (the control), and without
/// sandpit every canary is read (so the list is really planted).
#[test]
fn every_default_credential_location_is_unreadable_by_any_linkage() {
    let t: toml::Table = toml::from_str(sandpit_policy::DEFAULT_POLICY).unwrap();
    let entries: Vec<String> = t["files"]["block_read"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str()?.strip_prefix("~/").map(str::to_string))
        .filter(|e| !e.starts_with("Library/"))
        .collect();
    assert!(entries.len() > 40, "{entries:?}");
    let h = TestHome::new();
    let mut files = vec![];
    for (i, e) in entries.iter().enumerate() {
        // An entry that holds another is a directory: the canary goes inside it.
        let holds_another = entries
            .iter()
            .any(|o| o != e && o.starts_with(&format!("{e}/")));
        let file = if holds_another {
            format!("{e}/canary")
        } else {
            e.clone()
        };
        h.write(&h.home().join(&file), &format!("CRED-CANARY-{i}\n"));
        files.push(h.home().join(&file).display().to_string());
    }
    h.write(&h.home().join("notes.txt"), "CONTROL-OK\n");
    files.push(h.home().join("notes.txt").display().to_string());
    let probe = build_probe(&h, "static_read", true);

    let bare = h.command("cat").args(&files).output().unwrap();
    let bare = String::from_utf8_lossy(&bare.stdout);
    for (i, e) in entries.iter().enumerate() {
        assert!(bare.contains(&format!("CRED-CANARY-{i}\n")), "bare: ~/{e}");
    }
    for (case, kernel_only, reader) in [
        ("cat, interposer", false, PathBuf::from("cat")),
        ("cat, kernel only", true, PathBuf::from("cat")),
        ("static raw reader", true, probe),
    ] {
        let o = h
            .sandpit_run(kernel_only)
            .arg(&reader)
            .args(&files)
            .output()
            .unwrap();
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains("CONTROL-OK"), "{case}: {out}");
        for (i, e) in entries.iter().enumerate() {
            assert!(
                !out.contains(&format!("CRED-CANARY-{i}\n")),
                "{case}: ~/{e} was read"
            );
        }
    }
}

/// A character device the test puts in the host's `/dev` (a copy of `/dev/zero`,
/// mode 0666: a device every user may open, as a camera or a security key can be),
/// removed when dropped.
struct HostDevice(PathBuf);

impl HostDevice {
    fn new() -> HostDevice {
        let p = PathBuf::from(format!("/dev/sandpit-test-{}", std::process::id()));
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path; the tests run as root (common::is_root).
        let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 5)) };
        assert_eq!(r, 0, "mknod {p:?}: {}", std::io::Error::last_os_error());
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
        HostDevice(p)
    }
}

impl Drop for HostDevice {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The sandbox's `/dev` is its own: the usual devices work (null, zero, full,
/// urandom, a new terminal, `/dev/fd`, `/dev/shm`), and no other host device is
/// there, for a dynamic program with the interposer or without it; `files.devices` in
/// the user's config passes one through; a project file may not.
#[test]
fn the_sandbox_has_a_minimal_dev_and_passes_only_named_devices() {
    assert!(
        common::is_root(),
        "the test makes a device node: run as root"
    );
    let dev = HostDevice::new();
    let d = dev.0.display().to_string();
    let h = TestHome::new();
    // Control: on the host the test user reads the device.
    let o = h
        .command("sh")
        .args(["-c", &format!("head -c 3 {d} | wc -c")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "3");
    let script = format!(
        "ls /dev | tr '\\n' ' '; echo\n\
         echo x > /dev/null && echo null-ok\n\
         [ \"$(head -c 5 /dev/zero | wc -c)\" = 5 ] && echo zero-ok\n\
         [ \"$(head -c 5 /dev/urandom | wc -c)\" = 5 ] && echo urandom-ok\n\
         (echo x > /dev/full) 2>/dev/null || echo full-ok\n\
         [ -e /dev/fd/1 ] && echo fd-ok\n\
         echo x > /dev/shm/x && echo shm-ok\n\
         python3 -c 'import pty,os; m,s=pty.openpty(); print(\"pty-ok\", os.ttyname(s))'\n\
         head -c 3 {d} 2>&1 | wc -c\n"
    );
    for kernel_only in [false, true] {
        let o = h
            .sandpit_run(kernel_only)
            .args(["sh", "-c", &script])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let case = format!("kernel only: {kernel_only}");
        let listed = out.lines().next().unwrap_or("");
        assert_eq!(
            listed.trim(),
            "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero",
            "{case}: {out}"
        );
        for ok in [
            "null-ok",
            "zero-ok",
            "urandom-ok",
            "full-ok",
            "fd-ok",
            "shm-ok",
            "pty-ok /dev/pts/0",
        ] {
            assert!(
                out.contains(ok),
                "{case}: {ok} missing: {out}\n{}",
                common::text(&o)
            );
        }
        // `head` read nothing: the device is not there.
        assert!(
            !out.trim_end().ends_with("\n3"),
            "{case}: read the host device: {out}"
        );
        assert!(
            !out.contains(&dev.0.file_name().unwrap().to_string_lossy().to_string()),
            "{case}: {out}"
        );
    }

    // Passed through by the user's own config.
    h.user_config(&format!("[files]\ndevices = [\"{d}\"]\n"));
    let o = h
        .sandpit()
        .args(["run", "--", "sh", "-c", &format!("head -c 3 {d} | wc -c")])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "3",
        "{}",
        common::text(&o)
    );

    // Never through a link (a link in /dev can lead anywhere: /dev/log to /run): the
    // run does not start.
    let link = PathBuf::from(format!("{d}-link"));
    std::os::unix::fs::symlink(&dev.0, &link).unwrap();
    struct Unlink(PathBuf);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _unlink = Unlink(link.clone());
    h.user_config(&format!("[files]\ndevices = [\"{}\"]\n", link.display()));
    let o = h.sandpit().args(["run", "--", "true"]).output().unwrap();
    assert!(!o.status.success(), "{}", common::text(&o));

    // Never by a project file: the run does not start, and the error says where.
    h.write(
        &h.workspace().join(".sandpit.toml"),
        &format!("[files]\ndevices = [\"{d}\"]\n"),
    );
    let o = h.sandpit().args(["run", "--", "true"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains(".sandpit.toml:2"), "{err}");
    assert!(
        err.contains("files.devices cannot be set by a project file"),
        "{err}"
    );
}

/// Globs in path lists (`**/.env`, `~/.config/*/credentials*`, `**/*.pem`): what
/// they match when the run starts is held for every program, a static one with raw
/// system calls included; a match made during the run is held by the interposer.
/// Paths beside the matches stay as they were, and `explain` names the glob.
#[test]
fn globs_hold_what_exists_for_every_program_and_what_appears_for_the_interposer() {
    let h = TestHome::new();
    let (ws, home) = (h.workspace(), h.home());
    let secrets = [
        ws.join(".env"),
        ws.join("a/b/.env"),
        home.join(".config/myapp/credentials.json"),
    ];
    for s in &secrets {
        h.write(s, CANARY);
    }
    h.write(&ws.join("a/.env.example"), "EXAMPLE-OK");
    h.write(&home.join(".config/myapp/settings.json"), "SETTINGS-OK");
    h.write(&ws.join("k/key.pem"), "KEY\n");
    h.write(&ws.join("new/.keep"), "");
    build_probe(&h, "static_read", true);
    build_probe(&h, "static_write", true);
    let listed: Vec<String> = secrets.iter().map(|p| p.display().to_string()).collect();
    let listed = listed.join(" ");
    let script = format!(
        "cat {listed} a/.env.example $HOME/.config/myapp/settings.json 2>/dev/null; echo\n\
         ./static_read {listed}\n\
         (echo evil > k/key.pem) 2>/dev/null && echo WROTE-PEM\n\
         ./static_write k/key.pem k/ok.txt\n\
         (echo NEW > new/.env) 2>/dev/null && echo MADE-ENV\n\
         echo DONE"
    );
    let bare = text(&bare(&h, &script));
    assert!(bare.matches(CANARY).count() >= 6, "bare: {bare}");
    assert!(
        bare.contains("WROTE-PEM") && bare.contains("MADE-ENV"),
        "bare: {bare}"
    );
    // The control wrote them: put them back.
    h.write(&ws.join("k/key.pem"), "KEY\n");
    std::fs::remove_file(ws.join("new/.env")).unwrap();

    h.user_config(
        "[files]\nblock_read = [\"**/.env\", \"~/.config/*/credentials*\"]\n\
         block_write = [\"**/*.pem\"]\n",
    );
    let o = h
        .sandpit_run(false)
        .args(["sh", "-c", &script])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(t.contains("DONE"), "{t}");
    assert!(!t.contains(CANARY), "a secret was read: {t}");
    assert!(
        t.contains("EXAMPLE-OK") && t.contains("SETTINGS-OK"),
        "beside the matches: {t}"
    );
    assert!(!t.contains("WROTE-PEM") && !t.contains("MADE-ENV"), "{t}");
    assert!(t.contains("static-write k/ok.txt: written"), "{t}");
    assert_eq!(
        std::fs::read_to_string(ws.join("k/key.pem")).unwrap(),
        "KEY\n"
    );
    assert!(!ws.join("new/.env").exists(), "{t}");
    let said = h
        .sandpit()
        .args(["explain", "read", "a/b/.env"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&said.stdout);
    assert!(
        said.starts_with("DENY") && said.contains("**/.env"),
        "{said}"
    );
}

/// Every path of the design's stock credential lists (issue 42), one row each: the
/// file written there (or inside the listed directory) and its canary.
const STOCK: &[&str] = &[
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".azure/msal_token_cache.json",
    ".config/gcloud/application_default_credentials.json",
    ".oci/config",
    ".kube/config",
    ".config/gh/hosts.yml",
    ".config/glab-cli/config.yml",
    ".docker/config.json",
    ".config/containers/auth.json",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".gnupg/private-keys-v1.d/k.key",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".npmrc",
    ".yarnrc.yml",
    ".yarnrc",
    ".pypirc",
    ".config/pip/pip.conf",
    ".pip/pip.conf",
    ".config/pypoetry/auth.toml",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".gem/credentials",
    ".vault-token",
    ".password-store/api.gpg",
    ".pi/agent/auth.json",
    ".pi/agent/oauth.json",
];

#[test]
fn every_stock_credential_path_is_unreadable_by_static_and_dynamic_readers() {
    let setup = || {
        let h = TestHome::new();
        for (i, p) in STOCK.iter().enumerate() {
            h.write(&h.home().join(p), &format!("STOCKCANARY{i:02}"));
        }
        h.write(&h.home().join("notes.txt"), "NORMAL");
        h
    };
    let script = |h: &TestHome, reader: &str| {
        let files: Vec<String> = STOCK
            .iter()
            .map(|p| h.home().join(p).display().to_string())
            .collect();
        let notes = h.home().join("notes.txt").display().to_string();
        format!(
            "{reader} {} {notes}; for f in {}; do cat \"$f\"; echo; done; echo CONTROL-$(cat {notes})",
            files.join(" "),
            files.join(" ")
        )
    };
    // Bare: both readers read every row.
    let control = setup();
    build_probe(&control, "static_read", true);
    let t = text(&bare(&control, &script(&control, "./static_read")));
    for (i, p) in STOCK.iter().enumerate() {
        let canary = format!("STOCKCANARY{i:02}");
        assert_eq!(t.matches(&canary).count(), 2, "bare, {p}: {t}");
    }
    // A run with no configuration at all: every layer, no row readable.
    let h = setup();
    build_probe(&h, "static_read", true);
    let o = h
        .sandpit_run(false)
        .args(["sh", "-c", &script(&h, "./static_read")])
        .output()
        .unwrap();
    let t = text(&o);
    for (i, p) in STOCK.iter().enumerate() {
        assert!(
            !t.contains(&format!("STOCKCANARY{i:02}")),
            "~/{p} readable under the defaults: {t}"
        );
        assert!(
            t.contains(&format!("static-open {}: ", h.home().join(p).display())),
            "~/{p}: the static reader was not refused: {t}"
        );
    }
    // The positive control: both readers read an ordinary file of the home.
    assert!(
        t.contains(&format!(
            "static-read {}:NORMAL",
            h.home().join("notes.txt").display()
        )),
        "{t}"
    );
    assert!(t.contains("CONTROL-NORMAL"), "{t}");
}
