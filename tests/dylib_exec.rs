//! The interposer's exec hooks: blocked command lines are refused through every
//! way of starting a program (judged by effect: the marker file the command would
//! create is absent), withheld variables never reach children, and children stay
//! hooked even when the parent drops the preload.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod dylib_common;

use dylib_common::*;
use std::path::Path;

/// A policy blocking one command line whose effect is a marker file.
const POLICY: &str =
    "[exec]\nblock = [\"touch forbidden-marker\"]\n[env]\nwithhold = [\"*_TOKEN\"]\n";

#[test]
fn blocked_command_is_refused_by_every_exec_entry_point() {
    let p = Pit::new(POLICY);
    let marker = p.ws().join("forbidden-marker");
    // Bare, the probe can run it (the probe and the command work).
    let o = probe_bare(
        &p,
        &["execv", "/usr/bin/touch", "touch", "forbidden-marker"],
    );
    assert!(marker.exists(), "bare execv must work: {}", o.all());
    std::fs::remove_file(&marker).unwrap();

    let touch = "/usr/bin/touch";
    let cases: Vec<Vec<&str>> = vec![
        vec!["execv", touch, "touch", "forbidden-marker"],
        vec!["execvp", "touch", "touch", "forbidden-marker"],
        vec!["execve-empty-env", touch, "touch", "forbidden-marker"],
        vec!["execl", touch, "forbidden-marker"],
        vec!["execlp", "touch", "forbidden-marker"],
        vec!["execle", touch, "forbidden-marker"],
        vec!["fexecve", touch, "touch", "forbidden-marker"],
        vec!["execveat", touch, "touch", "forbidden-marker"],
        vec!["execvpe", "touch", "touch", "forbidden-marker"],
        vec!["posix_spawn", touch, "touch", "forbidden-marker"],
        vec!["posix_spawnp", "touch", "touch", "forbidden-marker"],
        // argv[0] forged: the program path is judged too.
        vec!["execv", touch, "ls", "forbidden-marker"],
    ];
    for c in &cases {
        let o = probe_in(&p, c);
        assert!(
            !marker.exists(),
            "{c:?} ran the blocked command: {}",
            o.all()
        );
        // posix_spawn returns the error; the probe prints it like errno.
        assert_eq!(errno_of(&o), Some(libc::EACCES), "{c:?}: {}", o.all());
        assert!(
            o.stderr.contains("blocked command `")
                && o.stderr.contains("exec.block \"touch forbidden-marker\""),
            "{c:?}: {}",
            o.stderr
        );
    }
    for c in [
        vec!["system", "touch forbidden-marker"],
        vec!["popen", "touch forbidden-marker"],
    ] {
        let o = probe_in(&p, &c);
        assert!(!marker.exists(), "{c:?}: {}", o.all());
    }
    for (prog, args) in [
        ("sh", vec!["-c", "touch forbidden-marker"]),
        (
            "sh",
            vec![
                "-c",
                "T=touch; $T  FORBIDDEN-marker; touch forbidden-marker",
            ],
        ),
        (
            "python3",
            vec![
                "-c",
                "import subprocess; subprocess.run(['touch', 'forbidden-marker'])",
            ],
        ),
        (
            "python3",
            vec!["-c", "import os; os.system('touch forbidden-marker')"],
        ),
        (
            "python3",
            vec![
                "-c",
                "import os; os.posix_spawnp('touch', ['touch', 'forbidden-marker'], {})",
            ],
        ),
    ] {
        let o = run(p.cmd(prog).args(&args));
        assert!(!marker.exists(), "{prog} {args:?}: {}", o.all());
    }

    // Positive controls: other command lines run through the same entry points.
    for (i, c) in [
        vec!["execv", touch, "touch", "allowed-0"],
        vec!["execvp", "touch", "touch", "allowed-1"],
        vec!["execl", touch, "allowed-2"],
        vec!["execlp", "touch", "allowed-3"],
        vec!["execle", touch, "allowed-4"],
        vec!["posix_spawn", touch, "touch", "allowed-5"],
        vec!["posix_spawnp", "touch", "touch", "allowed-6"],
        vec!["system", "touch allowed-7"],
        vec!["popen", "touch allowed-8"],
        vec!["fexecve", touch, "touch", "allowed-9"],
        vec!["execveat", touch, "touch", "allowed-10"],
        vec!["execvpe", "touch", "touch", "allowed-11"],
    ]
    .iter()
    .enumerate()
    {
        let o = probe_in(&p, c);
        assert!(
            p.ws().join(format!("allowed-{i}")).exists(),
            "{c:?}: {}",
            o.all()
        );
    }
    let o = run(p.cmd("python3").args([
        "-c",
        "import subprocess; subprocess.run(['touch', 'allowed-py'])",
    ]));
    assert!(p.ws().join("allowed-py").exists(), "{}", o.all());
}

/// A script whose `#!` line names the blocked command runs it without its name on
/// any command line (`#!/usr/bin/touch forbidden-marker` in `mk`: the kernel runs
/// `touch forbidden-marker mk`); so does a script whose interpreter is such a
/// script. Judged by every entry point, found by path or on `PATH`.
#[test]
fn a_script_whose_interpreter_line_is_blocked_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let p = Pit::new(POLICY);
    let marker = p.ws().join("forbidden-marker");
    let script = |name: &str, line: &str| {
        let f = p.ws().join(name);
        std::fs::write(&f, format!("{line}\n")).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        f.display().to_string()
    };
    let mk = script("mk", "#!/usr/bin/touch  forbidden-marker \t");
    let outer = script("outer", &format!("#! {mk}"));
    let ok = script("ok", "#!/usr/bin/touch allowed-script");
    // Five scripts deep, as far as the kernel follows.
    let mut deep = mk.clone();
    for i in 2..=5 {
        deep = script(&format!("deep{i}"), &format!("#!{deep}"));
    }
    // One the caller may run but not read: the kernel runs its line all the same.
    let hidden = script("hidden", "#!/usr/bin/touch forbidden-marker");
    p.h.give_to_test_user(Path::new(&hidden));
    std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o111)).unwrap();
    // A directory of the same name earlier on PATH: the search skips it. A script
    // there whose interpreter is missing: the search goes on past it.
    std::fs::create_dir_all(p.ws().join("first/mk")).unwrap();
    std::fs::create_dir_all(p.ws().join("second")).unwrap();
    script("second/mk", "#!/nonexistent-interpreter");
    let path = format!("{0}/first:{0}/second:{0}:/usr/bin:/bin", p.ws().display());
    let ws = p.ws().display().to_string();
    // Bare, the script runs the command (the probe and the script work).
    let o = run(p
        .bare(probe())
        .args(["execv", &mk, "mk"])
        .current_dir(p.ws()));
    assert!(marker.exists(), "bare: {}", o.all());
    std::fs::remove_file(&marker).unwrap();

    for c in [
        vec!["execv", &mk, "mk"],
        vec!["execv", &outer, "outer"],
        vec!["execvp", "mk", "mk"],
        vec!["posix_spawn", &mk, "mk"],
        vec!["posix_spawnp", "mk", "mk"],
        vec!["posix_spawnp", "outer", "outer"],
        vec!["execv", "mk", "mk"],
        vec!["execv", &deep, "deep5"],
        vec!["execv", &hidden, "hidden"],
        vec!["fexecve", &mk, "mk"],
        vec!["execveat-dir", &ws, "mk", "mk"],
    ] {
        let o = run(p
            .cmd(probe())
            .args(&c)
            .env("PATH", &path)
            .current_dir(p.ws()));
        assert!(
            !marker.exists(),
            "{c:?} ran the blocked command: {}",
            o.all()
        );
        assert_eq!(errno_of(&o), Some(libc::EACCES), "{c:?}: {}", o.all());
    }
    // A full descriptor table: the check cannot open the script, the kernel needs
    // no descriptor to run it.
    let o = run(p
        .cmd("python3")
        .args([
            "-c",
            "import os,resource\nresource.setrlimit(resource.RLIMIT_NOFILE,(64,64))\n\
             try:\n  while True: os.open('/dev/null',os.O_RDONLY)\nexcept OSError: pass\n\
             os.execv('./mk',['./mk'])",
        ])
        .current_dir(p.ws()));
    assert!(!marker.exists(), "a full descriptor table: {}", o.all());
    for sh in ["./mk", "mk", "./outer"] {
        let o = run(p
            .cmd("sh")
            .args(["-c", sh])
            .env("PATH", &path)
            .current_dir(p.ws()));
        assert!(!marker.exists(), "sh -c {sh}: {}", o.all());
    }
    // Positive control: a script naming an allowed command runs.
    let o = run(p
        .cmd(probe())
        .args(["execv", &ok, "ok"])
        .current_dir(p.ws()));
    assert!(p.ws().join("allowed-script").exists(), "{}", o.all());
}

#[test]
fn children_stay_hooked_when_the_parent_drops_the_preload() {
    let p = Pit::new(POLICY);
    let secret = p.home().join(".ssh/id_rsa");
    let s = secret.to_str().unwrap();
    let cat = format!("cat {s}");
    // Bare baseline: these commands do print the canary without the interposer.
    let o = run(p.bare("env").args(["-i", "/bin/sh", "-c", &cat]));
    assert!(o.stdout.contains(CANARY), "baseline: {}", o.all());

    let attempts: Vec<(&str, Vec<String>)> = vec![
        (
            "env",
            vec!["-i".into(), "/bin/sh".into(), "-c".into(), cat.clone()],
        ),
        (
            "env",
            vec![
                "-u".into(),
                "LD_PRELOAD".into(),
                "/bin/sh".into(),
                "-c".into(),
                cat.clone(),
            ],
        ),
        (
            "sh",
            vec![
                "-c".into(),
                format!("unset LD_PRELOAD SANDPIT_SNAPSHOT; {cat}"),
            ],
        ),
        (
            "sh",
            vec![
                "-c".into(),
                format!("LD_PRELOAD= SANDPIT_SNAPSHOT=/tmp/x sh -c '{cat}'"),
            ],
        ),
        (
            "python3",
            vec![
                "-c".into(),
                format!("import subprocess; subprocess.run(['cat', {s:?}], env={{}})"),
            ],
        ),
        (
            "python3",
            vec![
                "-c".into(),
                format!("import os; os.posix_spawn('/bin/cat', ['cat', {s:?}], {{}}); os.wait()"),
            ],
        ),
    ];
    for (prog, args) in &attempts {
        let o = run(p.cmd(prog).args(args));
        assert!(!o.all().contains(CANARY), "{prog} {args:?}: {}", o.all());
        assert!(
            o.stderr.contains("blocked read"),
            "{prog} {args:?}: {}",
            o.all()
        );
    }
    // system/popen after unsetenv("LD_PRELOAD") in the caller (the probe does that).
    for op in ["system", "popen"] {
        let o = probe_in(&p, &[op, &cat]);
        assert!(!o.all().contains(CANARY), "{op}: {}", o.all());
    }
    // posix_spawn and execve with an empty environment.
    for c in [
        vec!["posix_spawn", "/bin/cat", "cat", s],
        vec!["execve-empty-env", "/bin/cat", "cat", s],
    ] {
        let o = probe_in(&p, &c);
        assert!(!o.all().contains(CANARY), "{c:?}: {}", o.all());
    }
    // Positive control: the same children still read workspace files.
    let o = run(p.cmd("env").args(["-i", "/bin/sh", "-c", "cat ok.txt"]));
    assert_eq!(o.stdout, "workspace-data", "{}", o.all());
    // And their environment names the library and the snapshot again.
    let o = run(p.cmd("env").args([
        "-i",
        "/bin/sh",
        "-c",
        "echo $LD_PRELOAD; echo $SANDPIT_SNAPSHOT",
    ]));
    assert!(
        o.stdout.contains(p.lib.path.to_str().unwrap()),
        "{}",
        o.all()
    );
    assert!(
        o.stdout.contains(p.snapshot.to_str().unwrap()),
        "{}",
        o.all()
    );
}

#[test]
fn withheld_variables_never_reach_children() {
    let p = Pit::new(POLICY);
    let show = "echo token=${GH_TOKEN:-absent} other=${OTHER_VAR:-absent}";
    // Bare baseline: the variable passes.
    let o = run(p
        .bare("sh")
        .env("GH_TOKEN", CANARY)
        .env("OTHER_VAR", "kept")
        .args(["-c", &format!("sh -c '{show}'")]));
    assert!(o.stdout.contains(CANARY), "baseline: {}", o.all());
    // The hooked process itself may hold it (the agent needs its own key), its
    // children may not — through sh, python subprocess, posix_spawn, system.
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("sh", vec!["-c".into(), format!("sh -c '{show}'")]),
        (
            "python3",
            vec![
                "-c".into(),
                format!("import subprocess; subprocess.run(['sh', '-c', '{show}'])"),
            ],
        ),
        (
            "python3",
            vec!["-c".into(), format!("import os; os.system('{show}')")],
        ),
    ];
    for (prog, args) in &cases {
        let o = run(p
            .cmd(prog)
            .env("GH_TOKEN", CANARY)
            .env("OTHER_VAR", "kept")
            .args(args));
        assert!(!o.all().contains(CANARY), "{prog} {args:?}: {}", o.all());
        assert!(
            o.stdout.contains("token=absent other=kept"),
            "{prog} {args:?}: {}",
            o.all()
        );
    }
}
