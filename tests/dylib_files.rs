//! The interposer's file hooks, judged by their effect: the canary never reaches any
//! output, files outside the writable roots stay unchanged, and the positive
//! controls next to each denial succeed.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod dylib_common;

use dylib_common::*;
use std::os::unix::fs::PermissionsExt;

const EACCES: i32 = libc::EACCES;

#[test]
fn probe_reads_the_canary_without_the_interposer() {
    let p = Pit::new("");
    let o = probe_bare(
        &p,
        &["read", p.home().join(".ssh/id_rsa").to_str().unwrap()],
    );
    assert!(
        o.stdout.contains(CANARY),
        "the probe must work bare: {}",
        o.all()
    );
}

#[test]
fn blocked_reads_fail_with_eacces_in_every_spelling() {
    let p = Pit::new("");
    let home = p.home();
    let ws = p.ws();
    std::os::unix::fs::symlink(home.join(".ssh"), ws.join("innocent")).unwrap();
    p.h.give_to_test_user(&ws.join("innocent"));
    let secret = home.join(".ssh/id_rsa");
    let s = secret.to_str().unwrap().to_string();
    let spellings = [
        s.clone(),
        "../.ssh/id_rsa".to_string(),
        format!("{}//.ssh/./id_rsa", home.display()),
        format!("{}/../project/../.ssh/id_rsa", ws.display()),
        format!("/proc/self/root{s}"),
        "/proc/self/cwd/../.ssh/id_rsa".to_string(),
        "innocent/id_rsa".to_string(),
    ];
    for sp in &spellings {
        for op in ["read", "read64", "opath"] {
            let o = probe_in(&p, &[op, sp]);
            assert!(
                !o.all().contains(CANARY),
                "{op} {sp}: canary leaked: {}",
                o.all()
            );
            assert_eq!(errno_of(&o), Some(EACCES), "{op} {sp}: {}", o.all());
        }
        let o = probe_in(&p, &["freopen", sp, "r"]);
        assert!(!o.all().contains(CANARY), "freopen {sp}: {}", o.all());
        assert_eq!(errno_of(&o), Some(EACCES), "freopen {sp}: {}", o.all());
        let o = probe_in(&p, &["fopen", sp, "r"]);
        assert!(!o.all().contains(CANARY), "fopen {sp}: {}", o.all());
        assert_eq!(errno_of(&o), Some(EACCES), "fopen {sp}: {}", o.all());
    }
    let o = probe_in(&p, &["openat", home.to_str().unwrap(), ".ssh/id_rsa"]);
    assert_eq!(errno_of(&o), Some(EACCES), "openat: {}", o.all());
    // Relative to a directory fd, as judged from that directory's path: through a
    // symlink in the workspace refused, a plain workspace file read.
    let ws_dir = ws.to_str().unwrap();
    let o = probe_in(&p, &["openat", ws_dir, "innocent/id_rsa"]);
    assert!(!o.all().contains(CANARY), "openat via link: {}", o.all());
    assert_eq!(errno_of(&o), Some(EACCES), "openat via link: {}", o.all());
    let o = probe_in(&p, &["openat", ws_dir, "ok.txt"]);
    assert!(
        o.stdout.contains("workspace-data"),
        "openat ok.txt: {}",
        o.all()
    );
    let o = probe_in(&p, &["opendir", home.join(".ssh").to_str().unwrap()]);
    assert_eq!(errno_of(&o), Some(EACCES), "opendir: {}", o.all());
    // The denial names the rule and how to allow it.
    let o = probe_in(&p, &["read", &s]);
    assert!(
        o.stderr
            .contains("sandpit: blocked read of ~/.ssh/id_rsa (files.block_read \"~/.ssh\" in ")
            && o.stderr.contains("allow_read"),
        "{}",
        o.stderr
    );
    // Repeats in one process print one line.
    let o = run(p.cmd("python3").args([
        "-c",
        &format!("for _ in range(5):\n    try: open({s:?})\n    except PermissionError: pass"),
    ]));
    assert_eq!(
        o.stderr.matches("blocked read of ~/.ssh/id_rsa").count(),
        1,
        "{}",
        o.stderr
    );
    // Real programs: cat, sh, python3.
    for (prog, args) in [
        ("cat", vec![s.clone()]),
        (
            "sh",
            vec!["-c".into(), "cat ~/.ssh/id_rsa; cat innocent/id_rsa".into()],
        ),
        (
            "python3",
            vec!["-c".into(), format!("print(open({s:?}).read())")],
        ),
    ] {
        let o = run(p.cmd(prog).args(&args));
        assert!(!o.all().contains(CANARY), "{prog}: {}", o.all());
        assert_ne!(o.code, Some(0), "{prog}: {}", o.all());
    }
    // Positive controls: the workspace reads fine through every path.
    for op in ["read", "read64", "opath"] {
        let o = probe_in(&p, &[op, "ok.txt"]);
        assert!(o.stdout.contains("workspace-data"), "{op}: {}", o.all());
    }
    let o = probe_in(&p, &["fopen", "ok.txt", "r"]);
    assert!(o.stdout.contains("workspace-data"), "{}", o.all());
    let o = run(p.cmd("cat").arg("ok.txt"));
    assert_eq!(o.stdout, "workspace-data");
    let o = run(p
        .cmd("python3")
        .args(["-c", "print(open('ok.txt').read())"]));
    assert!(o.stdout.contains("workspace-data"), "{}", o.all());
}

#[test]
fn writes_outside_the_workspace_leave_no_effect() {
    let p = Pit::new("");
    let outside = p.h.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).unwrap();
    let victim = outside.join("victim");
    std::fs::write(&victim, "original").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o666)).unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    std::fs::File::options()
        .write(true)
        .open(&victim)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let subdir = outside.join("sub");
    std::fs::create_dir(&subdir).unwrap();
    std::fs::set_permissions(&subdir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let v = victim.to_str().unwrap();
    let new = outside.join("new");
    let n = new.to_str().unwrap();
    let sd = subdir.to_str().unwrap();
    // Without the interposer these would succeed (the directory is 0777): show it
    // for one of them, on a copy.
    let o = probe_bare(&p, &["write", outside.join("bare").to_str().unwrap()]);
    assert!(
        o.stdout.starts_with("ok"),
        "bare write must work: {}",
        o.all()
    );

    let ws_file = p.ws().join("ok.txt");
    let w = ws_file.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["write", v],
        vec!["creat", v],
        vec!["append", v],
        vec!["truncate", v],
        vec!["chmod", v],
        vec!["fchmodat", v],
        vec!["utimes", v],
        vec!["mkfifo", n],
        vec!["fopen", v, "w"],
        vec!["fopen", v, "a"],
        vec!["write", n],
        vec!["mkdir", n],
        vec!["symlink", "/etc/passwd", n],
        vec!["link", w, n],
        vec!["rename", w, n],
        vec!["renameat2", w, n],
        vec!["rename", v, "moved"],
        vec!["unlink", v],
        vec!["rmdir", sd],
    ];
    for c in &cases {
        let o = probe_in(&p, c);
        assert_eq!(errno_of(&o), Some(EACCES), "{c:?}: {}", o.all());
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");
    assert_eq!(
        std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777,
        0o666
    );
    assert_eq!(
        std::fs::metadata(&victim).unwrap().modified().unwrap(),
        old,
        "mtime changed"
    );
    assert!(
        !new.exists() && new.symlink_metadata().is_err(),
        "new name created"
    );
    assert!(subdir.is_dir());
    assert!(!p.ws().join("moved").exists());
    assert_eq!(std::fs::read_to_string(&ws_file).unwrap(), "workspace-data");
    // Shell redirection and python too.
    let o = run(p.cmd("sh").args(["-c", &format!("echo pwned > {v}")]));
    assert_ne!(o.code, Some(0), "{}", o.all());
    let o = run(p
        .cmd("python3")
        .args(["-c", &format!("open({v:?}, 'w').write('pwned')")]));
    assert_ne!(o.code, Some(0), "{}", o.all());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");

    // Positive controls inside the workspace, through the same calls.
    for c in [
        vec!["write", "a"],
        vec!["creat", "b"],
        vec!["fopen", "c", "w"],
        vec!["mkdir", "d"],
        vec!["rmdir", "d"],
        vec!["symlink", "a", "e"],
        vec!["link", "a", "f"],
        vec!["rename", "f", "g"],
        vec!["chmod", "a"],
        vec!["utimes", "a"],
        vec!["mkfifo", "fifo"],
        vec!["truncate", "a"],
        vec!["unlink", "g"],
    ] {
        let o = probe_in(&p, &c);
        assert!(o.stdout.starts_with("ok"), "{c:?}: {}", o.all());
    }
    assert!(p.ws().join("a").exists() && p.ws().join("c").exists() && !p.ws().join("g").exists());
    // Writes to /dev/null (a device, not a file) stay possible.
    let o = run(p.cmd("sh").args(["-c", "echo x > /dev/null && echo fine"]));
    assert_eq!(o.stdout.trim(), "fine", "{}", o.all());
}

#[test]
fn protected_paths_inside_the_workspace_and_symlink_escapes() {
    let p = Pit::new("");
    let ws = p.ws();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    p.h.give_to_test_user(&ws.join(".git"));
    p.h.give_to_test_user(&ws.join(".git/hooks"));
    // A hook that does not exist yet, and a symlink planted to write outside.
    let outside = p.h.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("escape")).unwrap();
    for c in [
        vec!["write", ".git/hooks/pre-commit"],
        vec!["fopen", ".git/config", "w"],
        vec!["write", ".sandpit.toml"],
        vec!["mkdir", ".vscode"],
        vec!["write", "escape/dropped"],
        vec!["write", "./escape/../escape/dropped"],
    ] {
        let o = probe_in(&p, &c);
        assert_eq!(errno_of(&o), Some(EACCES), "{c:?}: {}", o.all());
    }
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert!(!ws.join(".sandpit.toml").exists());
    assert!(!outside.join("dropped").exists());
    // Positive control: ordinary files next to them.
    let o = probe_in(&p, &["write", ".git/HEAD"]);
    assert!(o.stdout.starts_with("ok"), "{}", o.all());
}

#[test]
fn corrupt_foreign_or_misplaced_snapshot_fails_closed() {
    let p = Pit::new("");
    // Positive control: with the good snapshot the workspace file reads.
    let o = probe_in(&p, &["read", "ok.txt"]);
    assert!(o.stdout.contains("workspace-data"), "{}", o.all());

    p.write_snapshot(b"sandpit-policy-v5\n{ this is not a policy");
    let o = probe_in(&p, &["read", "ok.txt"]);
    assert_eq!(errno_of(&o), Some(libc::EPERM), "{}", o.all());
    assert!(!o.stdout.contains("workspace-data"));
    assert_eq!(
        o.stderr.matches("sandpit: interposer disabled").count(),
        1,
        "exactly one line: {}",
        o.stderr
    );
    let o = run(p.cmd("cat").arg("ok.txt"));
    assert!(!o.stdout.contains("workspace-data"), "{}", o.all());
    assert_ne!(o.code, Some(0));

    // A valid snapshot, or a directory on its way, that others may write is foreign:
    // the snapshot could be swapped.
    for (which, mode) in [("the snapshot", 0o666), ("its directory", 0o770)] {
        let p = Pit::new("");
        let path = match which {
            "the snapshot" => p.snapshot.clone(),
            _ => p.snapshot.parent().unwrap().to_path_buf(),
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let o = probe_in(&p, &["read", "ok.txt"]);
        assert_eq!(errno_of(&o), Some(libc::EPERM), "{which}: {}", o.all());
        assert!(
            o.stderr.contains("writable by group or others"),
            "{which}: {}",
            o.stderr
        );
    }

    // A snapshot outside the state directory is refused even if well-formed.
    let p = Pit::new("");
    let elsewhere = p.ws().join("policy.snapshot");
    std::fs::copy(&p.snapshot, &elsewhere).unwrap();
    p.h.give_to_test_user(&elsewhere);
    let o = run(p
        .cmd(probe())
        .env("SANDPIT_SNAPSHOT", &elsewhere)
        .args(["read", "ok.txt"]));
    assert_eq!(errno_of(&o), Some(libc::EPERM), "{}", o.all());

    // A link inside the state directory to a well-formed snapshot elsewhere, spelt
    // as if it were inside, is not followed.
    let p = Pit::new("");
    let run_dir = p.snapshot.parent().unwrap().to_path_buf();
    let moved = p.scratch.join("run-elsewhere");
    std::fs::rename(&run_dir, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &run_dir).unwrap();
    let o = probe_in(&p, &["read", "ok.txt"]);
    assert_eq!(errno_of(&o), Some(libc::EPERM), "{}", o.all());
    assert!(!o.stdout.contains("workspace-data"));

    // Positive control: the state directory named through a link, the snapshot by
    // its real path, is the same place and loads.
    let p = Pit::new("");
    let link = p.scratch.join("state-link");
    std::os::unix::fs::symlink(&p.state, &link).unwrap();
    let o = run(p
        .cmd(probe())
        .env("SANDPIT_STATE_DIR", &link)
        .args(["read", "ok.txt"]));
    assert!(o.stdout.contains("workspace-data"), "{}", o.all());

    // A FIFO in the snapshot's place fails the check; it must not hang every process
    // (opening it to read would wait for a writer).
    let p = Pit::new("");
    std::fs::remove_file(&p.snapshot).unwrap();
    let fifo = std::ffi::CString::new(p.snapshot.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    p.h.give_to_test_user(&p.snapshot);
    let mut child = p
        .cmd(probe())
        .args(["read", "ok.txt"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if !common::wait_for(20, || child.try_wait().unwrap().is_some()) {
        let _ = child.kill();
        panic!("a process under the interposer hung on a FIFO snapshot");
    }
    let o = child.wait_with_output().unwrap();
    let o = Out {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert_eq!(errno_of(&o), Some(libc::EPERM), "{}", o.all());
    assert!(o.stderr.contains("is not a regular file"), "{}", o.stderr);

    // Missing snapshot variable: fails closed too.
    let o = run(p
        .cmd(probe())
        .env_remove("SANDPIT_SNAPSHOT")
        .args(["read", "ok.txt"]));
    assert_eq!(errno_of(&o), Some(libc::EPERM), "{}", o.all());
}

/// A relative read is judged against the cwd as it is at that moment, however the cwd
/// got there. The interposer remembers the cwd between relative opens: a change made
/// through libc (`chdir`, `fchdir`) or by a vforked child (which shares the parent's
/// memory) after the cwd was asked for once never lets a blocked file through; and a
/// change the interposer cannot see (a raw system call) never turns an allowed read
/// into a denial.
#[test]
fn relative_reads_follow_every_change_of_directory() {
    let p = Pit::new("");
    let (home, ws) = (p.home(), p.ws());
    let (h, w) = (home.to_str().unwrap(), ws.to_str().unwrap());
    p.h.write(&home.join("notes.txt"), "home-notes");
    p.h.write(&ws.join(".ssh/id_rsa"), "workspace-key");
    // Every route works without the interposer.
    for op in ["cd-read", "fcd-read", "rawcd-read"] {
        let o = probe_bare(&p, &[op, h, ".ssh/id_rsa"]);
        assert!(o.stdout.contains(CANARY), "{op} bare: {}", o.all());
    }
    // The probe started in the home directory, bare or under the interposer.
    let from_home =
        |mut c: std::process::Command, args: [&str; 3]| run(c.current_dir(&home).args(args));
    let o = from_home(p.bare(probe()), ["vfork-cd-read", w, ".ssh/id_rsa"]);
    assert!(o.stdout.contains(CANARY), "vfork bare: {}", o.all());

    // From the workspace into the home directory through libc: the blocked key is
    // refused, the file beside it read.
    for op in ["cd-read", "fcd-read"] {
        let o = probe_in(&p, &[op, h, ".ssh/id_rsa"]);
        assert!(
            !o.all().contains(CANARY),
            "{op}: canary leaked: {}",
            o.all()
        );
        assert_eq!(errno_of(&o), Some(EACCES), "{op}: {}", o.all());
        let o = probe_in(&p, &[op, h, "notes.txt"]);
        assert!(o.stdout.contains("ok home-notes"), "{op}: {}", o.all());
    }
    // Writes as well: into the home directory refused (the file there untouched),
    // into a directory of the workspace made.
    let o = probe_bare(&p, &["cd-write", h, "bare.txt"]);
    assert_eq!(o.stdout.trim(), "ok", "cd-write bare: {}", o.all());
    let o = probe_in(&p, &["cd-write", h, "notes.txt"]);
    assert_eq!(errno_of(&o), Some(EACCES), "cd-write: {}", o.all());
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt")).unwrap(),
        "home-notes"
    );
    std::fs::create_dir(ws.join("sub")).unwrap();
    p.h.give_to_test_user(&ws.join("sub"));
    let o = probe_in(
        &p,
        &["cd-write", ws.join("sub").to_str().unwrap(), "new.txt"],
    );
    assert_eq!(o.stdout.trim(), "ok", "cd-write: {}", o.all());
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/new.txt")).unwrap(),
        "written\n"
    );
    // A vforked child moves into the workspace, opens there and execs; its parent,
    // still in the home directory, is judged from there.
    let o = from_home(p.cmd(probe()), ["vfork-cd-read", w, ".ssh/id_rsa"]);
    assert!(
        !o.all().contains(CANARY),
        "vfork: canary leaked: {}",
        o.all()
    );
    assert_eq!(errno_of(&o), Some(EACCES), "vfork: {}", o.all());
    let o = from_home(p.cmd(probe()), ["vfork-cd-read", w, "notes.txt"]);
    assert!(o.stdout.contains("ok home-notes"), "vfork: {}", o.all());
    // From the home directory into the workspace by a raw system call: the
    // workspace's own `.ssh/id_rsa` is read, not refused as the home's would be.
    let o = from_home(p.cmd(probe()), ["rawcd-read", w, ".ssh/id_rsa"]);
    assert!(
        o.stdout.contains("ok workspace-key"),
        "raw chdir: {}",
        o.all()
    );
}

#[test]
fn allowed_calls_keep_the_kernels_answers() {
    // The fast path opens a rewritten absolute path: it must fail exactly where the
    // kernel would (empty path, trailing slash on a file, missing parents, ELOOP).
    let p = Pit::new("");
    std::os::unix::fs::symlink("loop", p.ws().join("loop")).unwrap();
    if common::is_root() {
        std::os::unix::fs::lchown(
            p.ws().join("loop"),
            Some(common::TEST_UID),
            Some(common::TEST_GID),
        )
        .unwrap();
    }
    let cases: Vec<Vec<&str>> = vec![
        vec!["read", ""],
        vec!["read", "ok.txt/"],
        vec!["read", "ok.txt/."],
        vec!["read", "missing/x"],
        vec!["read", "loop"],
        vec!["read", "./ok.txt"],
        vec!["read", "sub/../ok.txt"],
        vec!["write", "newfile/"],
        vec!["write", "ok.txt/x"],
        vec!["mkdir", "ok.txt"],
    ];
    for c in &cases {
        let bare = probe_bare(&p, c);
        let hooked = probe_in(&p, c);
        assert_eq!(
            bare.stdout.lines().next(),
            hooked.stdout.lines().next(),
            "{c:?}: bare {} / hooked {}",
            bare.all(),
            hooked.all()
        );
    }
    assert!(!p.ws().join("newfile").exists());
}

#[test]
fn denials_reach_the_audit_socket() {
    let mut p = Pit::new("");
    let sock = p.h.dir.path().join("audit.sock");
    let rx = std::os::unix::net::UnixDatagram::bind(&sock).unwrap();
    rx.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    p.ends.audit = Some(sock.clone());
    // Positive control: an allowed read sends nothing; then a denied one.
    let o = probe_in(&p, &["read", "ok.txt"]);
    assert!(o.stdout.contains("workspace-data"), "{}", o.all());
    let o = probe_in(
        &p,
        &["read", p.home().join(".ssh/id_rsa").to_str().unwrap()],
    );
    assert_eq!(errno_of(&o), Some(EACCES), "{}", o.all());
    let mut buf = [0u8; 2048];
    let n = rx.recv(&mut buf).unwrap();
    let line = String::from_utf8_lossy(&buf[..n]);
    assert!(
        line.starts_with("sandpit: blocked read of ~/.ssh/id_rsa"),
        "{line}"
    );
    assert!(!line.contains(CANARY));
}
