//! `[[network.program]]`: a host only the programs named may reach, enforced by the
//! proxy with the kernel's word on who connected (the process holding the client's
//! socket), for dynamic and static programs, with every layer and with the kernel
//! layer alone. A listener on 127.0.0.1 stands for `code.test` (sandpit's own
//! resolver maps the name); only `fetchgit` may reach it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod kernel_support;

use common::sink::Sink;
use common::TestHome;
use kernel_support::build_probe;
use std::path::{Path, PathBuf};

/// The programs of the test: the same probe under the allowed name and another.
struct Programs {
    /// `fetchgit`, dynamic and static, where the sandbox cannot write.
    dyn_allowed: PathBuf,
    static_allowed: PathBuf,
    /// The probe under its own name, in the workspace.
    dyn_other: PathBuf,
    static_other: PathBuf,
    /// A copy named `fetchgit` planted in the workspace (writable).
    planted: PathBuf,
}

fn programs(h: &TestHome) -> Programs {
    let static_built = build_probe(h, "net_probe", true);
    let static_other = h.workspace().join("net_probe_static");
    std::fs::rename(&static_built, &static_other).unwrap();
    let dyn_other = build_probe(h, "net_probe", false);
    let place = |from: &Path, dir: &str| -> PathBuf {
        let d = h.home().join(dir);
        std::fs::create_dir_all(&d).unwrap();
        let to = d.join("fetchgit");
        std::fs::copy(from, &to).unwrap();
        to
    };
    let planted = h.workspace().join("fetchgit");
    std::fs::copy(&static_other, &planted).unwrap();
    h.give_to_test_user(&planted);
    Programs {
        dyn_allowed: place(&dyn_other, "dyn"),
        static_allowed: place(&static_other, "static"),
        dyn_other,
        static_other,
        planted,
    }
}

fn config(port: u16, programs: &str) -> String {
    format!(
        "[network]\nallow = [\"code.test\"]\n\n[network.resolve]\n\"code.test\" = \"127.0.0.1\"\n\n\
         [[network.program]]\nname = \"fetchgit only\"\nprograms = [{programs}]\nhosts = [\"code.test:{port}\"]\n"
    )
}

/// python3 sends the interposer's handshake line itself (with the run's token,
/// which every process in the sandbox has) and then a request: the proxy must not
/// take the line's word for anything the kernel can say.
const FORGE_PY: &str = r#"
import os, socket, sys
u = os.environ["HTTP_PROXY"][len("http://"):]
creds, hostport = u.rsplit("@", 1)
token = creds.split(":", 1)[1]
host, port = hostport.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(("SANDPIT/1 %s 127.0.0.1:%s code.test\n" % (token, sys.argv[1])).encode()
          + b"GET / HTTP/1.0\r\nHost: code.test\r\n\r\n")
try:
    print("FORGE", s.recv(200))
except OSError as e:
    print("FORGE error", e)
"#;

/// Plain HTTP through the proxy (urllib reads HTTP_PROXY).
const URLLIB_PY: &str = r#"
import sys, urllib.request
try:
    print("URLLIB", urllib.request.urlopen("http://code.test:%s/" % sys.argv[1], timeout=5).read())
except Exception as e:
    print("URLLIB error", e)
"#;

fn line<'a>(out: &'a str, tag: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{tag} ")))
        .unwrap_or_else(|| panic!("no line {tag:?} in:\n{out}"))
}

fn run(h: &TestHome, kernel_only: bool, script: &str) -> (String, String) {
    let o = h
        .sandpit_run(kernel_only)
        .arg("sh")
        .arg("-c")
        .arg(script)
        .output()
        .unwrap();
    let (out, err) = (common::stdout(&o), common::stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    (out, err)
}

/// The latest run's records, as JSON values.
fn records(h: &TestHome) -> Vec<serde_json::Value> {
    let o = h.sandpit().args(["log", "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    common::stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `sandpit explain connect code.test:PORT --program P`: allowed?
fn explain(h: &TestHome, port: u16, program: &Path) -> bool {
    let o = h
        .sandpit()
        .args(["explain", "--json", "connect", &format!("code.test:{port}")])
        .arg("--program")
        .arg(program)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&common::explained(&o)).unwrap();
    let subject = v["request"].as_str().unwrap();
    // A name is looked up in PATH and links resolved, as the kernel names it.
    let shown = if program.is_absolute() {
        program.display().to_string()
    } else {
        "/".into()
    };
    assert!(subject.contains(&format!(" from {shown}")), "{subject}");
    v["decision"] == "allow"
}

#[test]
fn only_the_named_program_reaches_the_host_dynamic_and_static_in_both_modes() {
    let h = TestHome::new();
    let p = programs(&h);
    let sink = Sink::start("127.0.0.1", "code");
    let port = sink.port;
    h.write(&h.workspace().join("fetch_url.py"), URLLIB_PY);

    // Control: without sandpit every probe reaches the listener.
    let bare = format!(
        "echo \"dyn $({} connect 127.0.0.1 {port})\"; echo \"static $({} connect 127.0.0.1 {port})\"",
        p.dyn_other.display(),
        p.static_other.display()
    );
    let o = h.command("sh").arg("-c").arg(&bare).output().unwrap();
    let out = common::stdout(&o);
    for tag in ["dyn", "static"] {
        assert!(
            line(&out, tag).starts_with("OK HTTP/1.1 200"),
            "bare: {out}"
        );
    }
    assert_eq!(sink.seen().0, 2);

    h.user_config(&config(port, "\"fetchgit\""));
    let cases: [(&str, &Path, bool); 5] = [
        ("dyn-allowed", &p.dyn_allowed, true),
        ("static-allowed", &p.static_allowed, true),
        ("dyn-other", &p.dyn_other, false),
        ("static-other", &p.static_other, false),
        ("planted", &p.planted, false),
    ];
    let mut script = String::new();
    for (tag, prog, _) in &cases {
        script.push_str(&format!(
            "echo \"{tag} $({} proxy code.test {port})\"\n",
            prog.display()
        ));
    }
    script.push_str(&format!("python3 fetch_url.py {port}\n"));

    for kernel_only in [false, true] {
        let mode = if kernel_only {
            "kernel-only"
        } else {
            "default"
        };
        let before = sink.seen().0;
        let (out, err) = run(&h, kernel_only, &script);
        for (tag, _, allowed) in &cases {
            let l = line(&out, tag);
            assert_eq!(
                l.starts_with("OK HTTP/1.1 200"),
                *allowed,
                "{mode} {tag}: {l}\n{out}\n{err}"
            );
        }
        assert!(
            line(&out, "URLLIB").starts_with("error"),
            "{mode}: python3 got through: {out}"
        );
        // Exactly the two allowed connections reached the listener.
        assert_eq!(sink.seen().0 - before, 2, "{mode}: {out}\n{err}");

        // The records name the program, its pid and the rule with file:line.
        let recs = records(&h);
        let denied_from = |needle: &str| {
            recs.iter()
                .find(|r| {
                    r["action"] == "connect"
                        && r["decision"] == "deny"
                        && r["subject"] == format!("code.test:{port}")
                        && r["program"].as_str().is_some_and(|p| p.contains(needle))
                })
                .unwrap_or_else(|| panic!("{mode}: no denial of {needle}: {recs:#?}"))
                .clone()
        };
        for needle in ["python3", "net_probe_static", "/project/fetchgit"] {
            let r = denied_from(needle);
            assert!(r["pid"].as_u64().is_some_and(|p| p > 1), "{mode}: {r}");
            let rule = &r["rule"];
            assert!(
                rule.to_string().contains("network.program")
                    && rule.to_string().contains("config.toml"),
                "{mode}: {r}"
            );
            assert!(
                r["reason"].as_str().unwrap().contains("fetchgit only"),
                "{r}"
            );
        }
        let allowed = recs.iter().find(|r| {
            r["action"] == "connect"
                && r["decision"] == "allow"
                && r["program"] == p.static_allowed.display().to_string()
        });
        assert!(allowed.is_some(), "{mode}: {recs:#?}");
    }

    // `sandpit log` shows who.
    let o = h.sandpit().args(["log", "--denied"]).output().unwrap();
    let text = common::stdout(&o);
    assert!(
        text.contains("by:     pid ") && text.contains("python3"),
        "{text}"
    );

    // explain agrees with the runs.
    for (tag, prog, allowed) in &cases {
        assert_eq!(explain(&h, port, prog), *allowed, "explain {tag}");
    }
    assert!(!explain(&h, port, Path::new("python3")));
}

#[test]
fn a_forged_interposer_handshake_is_judged_by_the_kernels_word() {
    let h = TestHome::new();
    let sink = Sink::start("127.0.0.1", "code");
    let port = sink.port;
    h.write(&h.workspace().join("forge.py"), FORGE_PY);
    let script = format!("python3 forge.py {port}");
    for kernel_only in [false, true] {
        // Control: with python3 among the programs, the same line gets through.
        h.user_config(&config(port, "\"fetchgit\", \"python3*\""));
        let before = sink.seen().0;
        let (out, err) = run(&h, kernel_only, &script);
        assert!(out.contains("FORGE b'HTTP/1.1 200"), "{out}\n{err}");
        assert_eq!(sink.seen().0 - before, 1);

        // fetchgit only: python3's line, however it names the destination, is not.
        h.user_config(&config(port, "\"fetchgit\""));
        let before = sink.seen().0;
        let (out, err) = run(&h, kernel_only, &script);
        assert!(!out.contains("200 OK"), "{out}\n{err}");
        assert_eq!(sink.seen().0 - before, 0, "{out}\n{err}");
        let recs = records(&h);
        assert!(
            recs.iter().any(|r| r["decision"] == "deny"
                && r["reason"]
                    .as_str()
                    .is_some_and(|s| s.contains("transparent"))
                && r["program"].as_str().is_some_and(|p| p.contains("python3"))),
            "{recs:#?}"
        );
    }
}
