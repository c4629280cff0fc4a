//! End-to-end tests of the PATH shims and `sandpit exec`: real shim directories
//! (symlinks and scripts) pointing at the built binary, fake tools that record every
//! run in a marker file, a real policy snapshot, run as the unprivileged test user.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use common::stderr;

use common::TestHome;
use sandpit_policy::{Layer, LoadOptions, Source};
use sandpit_shims::ShimKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const POLICY: &str = r#"
[network]
allow = ["good.test", "*.good.test", "10.1.2.3", "ssh.test:22", "ssh.test:2222"]
block = ["bad.good.test"]

[exec]
block = ["curl --data", 're:nc\s+-e', "base64 -d"]
"#;

const FAKE_TOOLS: &[&str] = &[
    "curl", "wget", "nc", "ssh", "scp", "sftp", "rsync", "socat", "dig", "git", "telnet", "nmap",
    "base64",
];

struct Fx {
    h: TestHome,
    /// What the shims point at: the sandpit binary, or the small shim binary.
    target: PathBuf,
    bin: PathBuf,
    shims: PathBuf,
    snapshot: PathBuf,
    marker: PathBuf,
}

fn write_exe(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The small `sandpit-shim` binary, extracted by the launcher into `h`'s state
/// directory the way `sandpit run --shims` does.
fn install_small_shim(h: &TestHome) -> PathBuf {
    let out = h
        .sandpit()
        .args(["exec", "--install-shim"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let p = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(p.ends_with("sandpit-shim") && p.is_file(), "{p:?}");
    p
}

impl Fx {
    fn new(kind: ShimKind) -> Fx {
        Fx::build(kind, false)
    }

    /// Symlink shims to the small shim binary (what `sandpit run --shims` makes).
    fn small() -> Fx {
        Fx::build(ShimKind::Symlink, true)
    }

    /// The three kinds of shim directory.
    fn every_kind() -> [Fx; 3] {
        [
            Fx::new(ShimKind::Symlink),
            Fx::new(ShimKind::Script),
            Fx::small(),
        ]
    }

    fn build(kind: ShimKind, small: bool) -> Fx {
        let h = TestHome::new();
        let target = if small {
            install_small_shim(&h)
        } else {
            common::sandpit_bin()
        };
        let root = h.dir.path().to_path_buf();
        let bin = root.join("bin");
        let shims = root.join("shims");
        let state = root.join("state");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        for d in [&bin, &state] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let marker = h.workspace().join("ran.log");
        for t in FAKE_TOOLS {
            // git's config query (sandpit reading the repository's remotes) is not
            // a run of the tool.
            let skip = if *t == "git" {
                "case \"$*\" in *'config --list -z'*) exit 0;; esac\n"
            } else {
                ""
            };
            write_exe(
                &bin.join(t),
                &format!(
                    "#!/bin/sh\n{skip}printf '%s %s\\n' \"$(basename \"$0\")\" \"$*\" >> '{}'\necho \"pid=$$\"\n",
                    marker.display()
                ),
            );
        }
        let ctx = sandpit_policy::Context {
            home: h.home(),
            workspace: h.workspace(),
            scratch: root.join("scratch"),
            state_dir: state.clone(),
        };
        let mut opts = LoadOptions::new(ctx);
        opts.user = Some(Source::new(Layer::User, "/test/config.toml", POLICY));
        let policy = sandpit_policy::load(&opts).unwrap();
        let snapshot = state.join("policy.snapshot");
        std::fs::write(&snapshot, policy.snapshot()).unwrap();
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
        let patterns: Vec<String> = policy
            .exec
            .block
            .iter()
            .map(|r| r.value.source.clone())
            .collect();
        let made = sandpit_shims::build_shim_dir(&shims, &target, &patterns, &path, kind).unwrap();
        for t in FAKE_TOOLS {
            assert!(made.contains(&t.to_string()), "no shim for {t}: {made:?}");
        }
        Fx {
            h,
            target,
            bin,
            shims,
            snapshot,
            marker,
        }
    }

    fn path(&self) -> String {
        format!(
            "{}:{}:/usr/local/bin:/usr/bin:/bin",
            self.shims.display(),
            self.bin.display()
        )
    }

    /// `tool args…` the way the agent runs it: by name, through PATH.
    fn cmd_with_path(&self, path: &str, tool: &str, args: &[&str]) -> Command {
        let mut c = self.h.command("/usr/bin/env");
        c.arg(tool)
            .args(args)
            .env("PATH", path)
            .env("SANDPIT_SNAPSHOT", &self.snapshot)
            .env("SANDPIT_SHIM_DIR", &self.shims)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, tool: &str, args: &[&str]) -> Output {
        self.cmd_with_path(&self.path(), tool, args)
            .output()
            .unwrap()
    }

    /// What the fake tools recorded since the last call (and forget it).
    fn take_ran(&self) -> String {
        let s = std::fs::read_to_string(&self.marker).unwrap_or_default();
        let _ = std::fs::remove_file(&self.marker);
        s
    }
}

/// (tool, args, allowed)
const CASES: &[(&str, &[&str], bool)] = &[
    // curl: combined short flags, --opt=value, --opt value, --, proxies, resolve.
    ("curl", &["-sSL", "https://good.test/x"], true),
    ("curl", &["-sSLo", "out", "http://evil.test"], false),
    ("curl", &["-sSoout", "http://api.good.test"], true),
    ("curl", &["--url=https://good.test"], true),
    ("curl", &["--url=https://evil.test"], false),
    (
        "curl",
        &["-x", "evil.test:3128", "https://good.test"],
        false,
    ),
    (
        "curl",
        &["--proxy=http://good.test:3128", "https://good.test"],
        true,
    ),
    (
        "curl",
        &[
            "--resolve",
            "good.test:443:203.0.113.9",
            "https://good.test",
        ],
        false,
    ),
    (
        "curl",
        &[
            "--connect-to",
            "good.test:443:evil.test:443",
            "https://good.test",
        ],
        false,
    ),
    ("curl", &["--", "evil.test"], false),
    ("curl", &["https://bad.good.test"], false),
    ("curl", &["https://GOOD.test./"], true),
    ("curl", &["http://good.test@evil.test/"], false),
    ("curl", &["--data", "x", "https://good.test"], false),
    ("curl", &["-K", "-"], false),
    ("curl", &["--version"], true),
    // wget
    ("wget", &["-qO-", "https://good.test"], true),
    ("wget", &["-qO-", "https://evil.test"], false),
    (
        "wget",
        &["-e", "https_proxy=evil.test:1", "https://good.test"],
        false,
    ),
    ("wget", &["--execute=use_proxy=on", "good.test"], true),
    ("wget", &["-i", "-"], false),
    // nc
    ("nc", &["-zv", "good.test", "80"], true),
    ("nc", &["-zv", "evil.test", "80"], false),
    ("nc", &["-w3", "10.1.2.3", "443"], true),
    ("nc", &["-e", "/bin/sh", "good.test", "80"], false),
    ("nc", &["-x", "evil.test:1080", "good.test", "80"], false),
    ("nc", &["-lp", "8080"], true),
    // ssh, scp, sftp, rsync
    ("ssh", &["-p", "2222", "u@ssh.test"], true),
    ("ssh", &["-p", "2223", "ssh.test"], false),
    ("ssh", &["-vp22", "ssh.test", "uptime"], true),
    ("ssh", &["ssh.test", "-p", "2223"], false),
    (
        "ssh",
        &["-o", "ProxyCommand=nc evil.test 22", "ssh.test"],
        false,
    ),
    ("ssh", &["-J", "good.test", "ssh.test"], false),
    ("ssh", &["-oHostName=evil.test", "ssh.test"], false),
    ("ssh", &["-F", "/tmp/x", "ssh.test"], false),
    ("ssh", &["evil.test", "ls"], false),
    ("ssh", &["--", "ssh.test", "-p", "2223"], true),
    ("scp", &["f", "u@ssh.test:/x"], true),
    ("scp", &["-P", "2223", "f", "ssh.test:x"], false),
    ("scp", &["-rP2222", "ssh.test:x", "."], true),
    ("scp", &["f", "evil.test:x"], false),
    ("sftp", &["-P", "2222", "ssh.test"], true),
    ("sftp", &["evil.test"], false),
    ("rsync", &["-av", "d/", "u@ssh.test:d/"], true),
    (
        "rsync",
        &["-av", "-e", "ssh -p 2223", "d/", "ssh.test:d/"],
        false,
    ),
    (
        "rsync",
        &["-a", "--rsh=ssh -p 2222", "ssh.test:d/", "."],
        true,
    ),
    ("rsync", &["evil.test::m", "."], false),
    // socat
    ("socat", &["-", "TCP:good.test:443"], true),
    ("socat", &["-", "TCP4:evil.test:443"], false),
    ("socat", &["-", "OPENSSL:evil.test:443,verify=0"], false),
    // dig
    ("dig", &["@10.1.2.3", "x.test"], true),
    ("dig", &["@evil.test", "x.test"], false),
    ("dig", &["+short", "x.test"], true),
    // git
    ("git", &["clone", "https://good.test/r.git"], true),
    ("git", &["clone", "--depth=1", "git@evil.test:r.git"], false),
    (
        "git",
        &["clone", "-b", "main", "--", "ssh://git@ssh.test/r"],
        true,
    ),
    (
        "git",
        &[
            "-c",
            "http.proxy=evil.test:3128",
            "clone",
            "https://good.test/r",
        ],
        false,
    ),
    ("git", &["clone", "ext::sh -c touch% /tmp/x"], false),
    ("git", &["status"], true),
    // telnet, nmap, an exec.block command
    ("telnet", &["good.test", "80"], true),
    ("telnet", &["evil.test"], false),
    ("telnet", &[], false),
    ("nmap", &["-p", "80", "good.test"], true),
    ("nmap", &["10.0.0.0/24"], false),
    ("base64", &["-d"], false),
    ("base64", &["--version"], true),
];

fn check_cases(fx: &Fx) {
    let mut failures = Vec::new();
    for (tool, args, allowed) in CASES {
        let out = fx.run(tool, args);
        let ran = fx.take_ran();
        let err = stderr(&out);
        if *allowed {
            let want = format!("{tool} {}\n", args.join(" "));
            if !out.status.success() || ran != want {
                failures.push(format!(
                    "{tool} {args:?}: expected to run; status {:?}, ran {ran:?}, stderr {err}",
                    out.status.code()
                ));
            }
        } else if out.status.code() != Some(126)
            || !ran.is_empty()
            || err.lines().count() != 1
            || !err.starts_with("sandpit: ")
        {
            failures.push(format!(
                "{tool} {args:?}: expected blocked (126, nothing run, one line); status {:?}, ran {ran:?}, stderr {err}",
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn shims_judge_each_tools_argument_forms_symlink() {
    check_cases(&Fx::new(ShimKind::Symlink));
}

#[test]
fn shims_judge_each_tools_argument_forms_script() {
    check_cases(&Fx::new(ShimKind::Script));
}

#[test]
fn small_shim_judges_each_tools_argument_forms() {
    check_cases(&Fx::small());
}

#[test]
fn blocked_reason_names_the_rule() {
    for fx in [Fx::new(ShimKind::Symlink), Fx::small()] {
        blocked_reason_names_the_rule_with(&fx);
    }
}

fn blocked_reason_names_the_rule_with(fx: &Fx) {
    let out = fx.run("curl", &["https://bad.good.test/"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(126), "{err}");
    assert!(
        err.contains("network.block \"bad.good.test\" in /test/config.toml:"),
        "{err}"
    );
    let out = fx.run("curl", &["--data", "x", "https://good.test"]);
    let err = stderr(&out);
    assert!(
        err.contains("exec.block \"curl --data\" in /test/config.toml:"),
        "{err}"
    );
    assert!(fx.take_ran().is_empty());
    // Positive control: the same tool to an allowed host runs.
    assert!(fx.run("curl", &["https://good.test/"]).status.success());
    assert_eq!(fx.take_ran(), "curl https://good.test/\n");
}

#[test]
fn exec_replaces_the_process() {
    for fx in Fx::every_kind() {
        let kind = &fx.target;
        let child = fx
            .cmd_with_path(&fx.path(), "curl", &["https://good.test"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // /usr/bin/env execs the shim, which execs sandpit, which execs the tool:
        // one process throughout.
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("pid={pid}"),
            "{kind:?}"
        );
    }
}

#[test]
fn loop_guard_shim_dir_twice_and_through_a_symlink() {
    for fx in Fx::every_kind() {
        let kind = &fx.target;
        let alias = fx.h.dir.path().join("shims-alias");
        std::os::unix::fs::symlink(&fx.shims, &alias).unwrap();
        let path = format!(
            "{s}:{a}:{s}:{b}:/usr/bin:/bin",
            s = fx.shims.display(),
            a = alias.display(),
            b = fx.bin.display()
        );
        let out = fx
            .cmd_with_path(&path, "curl", &["https://good.test"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{kind:?}: {}", stderr(&out));
        assert_eq!(fx.take_ran(), "curl https://good.test\n");
        // Even without SANDPIT_SHIM_DIR the shims themselves are recognised.
        let out = fx
            .cmd_with_path(&path, "curl", &["https://good.test"])
            .env_remove("SANDPIT_SHIM_DIR")
            .output()
            .unwrap();
        assert!(out.status.success(), "{kind:?}: {}", stderr(&out));
        assert_eq!(fx.take_ran(), "curl https://good.test\n");
    }
}

#[test]
fn tool_missing_from_path_is_a_clear_error_not_a_loop() {
    for fx in Fx::every_kind() {
        let kind = &fx.target;
        // Only shim directories on PATH: the real curl is nowhere.
        let alias = fx.h.dir.path().join("shims-alias");
        std::os::unix::fs::symlink(&fx.shims, &alias).unwrap();
        let path = format!("{}:{}", fx.shims.display(), alias.display());
        let out = fx
            .cmd_with_path(&path, "curl", &["https://good.test"])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(127), "{kind:?}: {err}");
        assert!(err.contains("curl: command not found on PATH"), "{err}");
        assert!(fx.take_ran().is_empty());
    }
}

#[test]
fn sandpit_exec_subcommand_judges_and_runs() {
    let fx = Fx::new(ShimKind::Symlink);
    let mut c = fx.h.command(common::sandpit_bin());
    c.args(["exec", "curl", "-sS", "https://evil.test"])
        .env("PATH", fx.path())
        .env("SANDPIT_SNAPSHOT", &fx.snapshot)
        .env("SANDPIT_SHIM_DIR", &fx.shims);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(fx.take_ran().is_empty());
    let mut c = fx.h.command(common::sandpit_bin());
    c.args(["exec", "curl", "-sS", "https://good.test"])
        .env("PATH", fx.path())
        .env("SANDPIT_SNAPSHOT", &fx.snapshot)
        .env("SANDPIT_SHIM_DIR", &fx.shims);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fx.take_ran(), "curl -sS https://good.test\n");
}

#[test]
fn unreadable_snapshot_fails_closed() {
    for fx in [Fx::new(ShimKind::Symlink), Fx::small()] {
        unreadable_snapshot_fails_closed_with(&fx);
    }
    // The small shim has no configuration of its own: without a snapshot (outside
    // `sandpit run`) it refuses.
    let fx = Fx::small();
    let out = fx
        .cmd_with_path(&fx.path(), "curl", &["https://good.test"])
        .env_remove("SANDPIT_SNAPSHOT")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(126), "{err}");
    assert!(err.contains("SANDPIT_SNAPSHOT is not set"), "{err}");
    assert!(fx.take_ran().is_empty());
}

fn unreadable_snapshot_fails_closed_with(fx: &Fx) {
    let out = fx
        .cmd_with_path(&fx.path(), "curl", &["https://good.test"])
        .env("SANDPIT_SNAPSHOT", fx.h.dir.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(fx.take_ran().is_empty());
    let bogus = fx.h.workspace().join("bogus");
    std::fs::write(&bogus, "sandpit-policy-v5\n{").unwrap();
    let out = fx
        .cmd_with_path(&fx.path(), "curl", &["https://good.test"])
        .env("SANDPIT_SNAPSHOT", &bogus)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(fx.take_ran().is_empty());
}

#[test]
fn a_wrapper_that_calls_itself_through_the_shim_stops() {
    for fx in [Fx::new(ShimKind::Symlink), Fx::small()] {
        a_wrapper_that_calls_itself_through_the_shim_stops_with(&fx);
    }
}

fn a_wrapper_that_calls_itself_through_the_shim_stops_with(fx: &Fx) {
    // A "curl" earlier on PATH than the real one that runs `curl` again by name.
    let wrap = fx.h.dir.path().join("wrap");
    std::fs::create_dir_all(&wrap).unwrap();
    std::fs::set_permissions(&wrap, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_exe(&wrap.join("curl"), "#!/bin/sh\nexec curl \"$@\"\n");
    let path = format!(
        "{}:{}:{}",
        fx.shims.display(),
        wrap.display(),
        fx.bin.display()
    );
    let out = fx
        .cmd_with_path(&path, "curl", &["https://good.test"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(126), "{err}");
    assert!(err.contains("nested 32 deep"), "{err}");
    assert!(fx.take_ran().is_empty());
}

#[test]
fn ssh_family_gets_sandpits_proxy_command_first() {
    for fx in [Fx::new(ShimKind::Symlink), Fx::small()] {
        ssh_family_gets_sandpits_proxy_command_first_with(&fx);
    }
}

fn ssh_family_gets_sandpits_proxy_command_first_with(fx: &Fx) {
    let bin = &fx.target;
    let want_pc = format!("ProxyCommand='{}' exec --connect %h %p", bin.display());
    for (tool, args) in [
        ("ssh", vec!["-p", "2222", "u@ssh.test", "uptime"]),
        ("scp", vec!["f", "u@ssh.test:/x"]),
        ("sftp", vec!["ssh.test"]),
    ] {
        let out = fx
            .cmd_with_path(&fx.path(), tool, &args)
            .env("SANDPIT_PROXY_URL", "http://sandpit:tok@127.0.0.1:9")
            .output()
            .unwrap();
        assert!(out.status.success(), "{tool}: {}", stderr(&out));
        assert_eq!(
            fx.take_ran(),
            format!("{tool} -o {want_pc} {}\n", args.join(" ")),
            "{tool}"
        );
    }
    // Not an ssh tool: nothing added.
    let out = fx
        .cmd_with_path(&fx.path(), "curl", &["https://good.test"])
        .env("SANDPIT_PROXY_URL", "http://sandpit:tok@127.0.0.1:9")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(fx.take_ran(), "curl https://good.test\n");
}
