#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `sandpit wrap BIN` (a launcher script) and `sandpit wrap FILE.desktop` (a desktop
//! entry whose Exec runs under sandpit), parsed back and run.
mod common;

use common::{sandpit_bin, TestHome};
use sandpit::cli::wrap::parse_exec;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const CANARY: &str = "CANARY-wrap-linux-0b9e";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn sandpit_path() -> String {
    std::fs::canonicalize(sandpit_bin())
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn wraps_a_binary_in_a_launcher_script() {
    let h = TestHome::new();
    h.write(&h.home().join(".ssh/id_rsa"), CANARY);
    // The agent's own directory, as on a machine where it is installed.
    h.write(&h.home().join(".codex/config.toml"), "");
    let tool = h.home().join("bin/tool");
    h.write(
        &tool,
        "#!/bin/sh\nprintf 'tool:'; for a in \"$@\"; do printf ' [%s]' \"$a\"; done; echo\ncat ~/.ssh/id_rsa\necho made > made-by-tool\necho x > ~/escaped\n",
    );
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The probe works unsandboxed (as the same user, in a scratch copy of the home).
    let o = h
        .command(&tool)
        .current_dir(h.workspace())
        .output()
        .unwrap();
    assert!(text(&o.stdout).contains(CANARY));
    std::fs::remove_file(h.home().join("escaped")).unwrap();
    std::fs::remove_file(h.workspace().join("made-by-tool")).unwrap();

    let o = h
        .sandpit()
        .args(["wrap"])
        .arg(&tool)
        .args(["--profile", "codex"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let launcher = h.home().join("bin/tool-sandpit");
    assert_eq!(text(&o.stdout).trim(), launcher.to_str().unwrap());
    let script = std::fs::read_to_string(&launcher).unwrap();
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(
        script.contains(&format!(
            "exec {} run --profile codex -- {} \"$@\"",
            sandpit_path(),
            tool.display()
        )),
        "{script}"
    );
    assert_eq!(
        std::fs::metadata(&launcher).unwrap().permissions().mode() & 0o777,
        0o755
    );

    // Run from the project: the tool runs confined, arguments intact.
    let o = h
        .command(&launcher)
        .args(["one two", "x'y"])
        .output()
        .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(out.contains("tool: [one two] [x'y]"), "{out}{err}");
    assert!(
        err.contains("sandpit: layers: kernel") && err.contains("[profile codex]"),
        "{err}"
    );
    assert!(!out.contains(CANARY), "{out}");
    assert!(h.workspace().join("made-by-tool").exists(), "{err}");
    assert!(!h.home().join("escaped").exists());

    // Run from $HOME it refuses (the home would become the writable workspace).
    let o = h.command(&launcher).current_dir(h.home()).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("project directory"),
        "{}",
        text(&o.stderr)
    );

    // Never overwrites; --output picks the path.
    let o = h.sandpit().args(["wrap"]).arg(&tool).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&launcher).unwrap(), script);
    // A bare name is looked up on PATH; the launcher names the absolute path.
    let by_name = h.home().join("by-name");
    let o = h
        .sandpit()
        .args(["wrap", "tool", "--output"])
        .arg(&by_name)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", h.home().join("bin").display()),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(std::fs::read_to_string(&by_name)
        .unwrap()
        .contains(&format!(" -- {} \"$@\"", tool.display())));
    let other = h.home().join("tool-launcher");
    let o = h
        .sandpit()
        .args(["wrap"])
        .arg(&tool)
        .arg("--output")
        .arg(&other)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(other.is_file());
}

const DESKTOP: &str = r#"[Desktop Entry]
Type=Application
Name=My Editor
Name[de]=Mein Editor
Comment=Edits things
TryExec=/opt/My Editor/bin/editor
Exec="/opt/My Editor/bin/editor" --new-window %U
Icon=editor
DBusActivatable=true
Actions=new;

[Desktop Action new]
Name=New Window
Exec="/opt/My Editor/bin/editor" --title "a \\"quoted\\" \\$title" %f

[X-Other Group]
Exec=left alone
"#;

fn entry_lines<'a>(text: &'a str, group: &str) -> Vec<&'a str> {
    let mut inside = false;
    let mut v = vec![];
    for l in text.lines() {
        if l.starts_with('[') {
            inside = l == group;
        } else if inside {
            v.push(l);
        }
    }
    v
}

fn key<'a>(lines: &[&'a str], k: &str) -> &'a str {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(&format!("{k}=")))
        .unwrap_or_else(|| panic!("no {k} in {lines:?}"))
}

#[test]
fn wraps_a_desktop_entry_keeping_field_codes_and_quoting() {
    let h = TestHome::new();
    let file = h.home().join("apps/my-editor.desktop");
    h.write(&file, DESKTOP);
    let ws = h.workspace();
    let o = h
        .sandpit()
        .args(["wrap"])
        .arg(&file)
        .args(["--profile", "claude", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = h.home().join("apps/my-editor-sandpit.desktop");
    assert_eq!(text(&o.stdout).trim(), out.to_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        DESKTOP,
        "original changed"
    );
    let t = std::fs::read_to_string(&out).unwrap();
    let sp = sandpit_path();
    let prefix = |rest: &[&str]| {
        let mut v: Vec<String> = [
            sp.as_str(),
            "run",
            "--profile",
            "claude",
            "--workspace",
            ws.to_str().unwrap(),
            "--",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };

    let main = entry_lines(&t, "[Desktop Entry]");
    let exec = key(&main, "Exec");
    // Parsed back per the spec: field codes kept as their own arguments.
    assert_eq!(
        parse_exec(exec).unwrap(),
        prefix(&["/opt/My Editor/bin/editor", "--new-window", "%U"])
    );
    // And written exactly as the spec quotes it.
    assert_eq!(
        exec,
        format!("{sp} run --profile claude --workspace {} -- \"/opt/My Editor/bin/editor\" --new-window %U", ws.display())
    );
    assert_eq!(key(&main, "TryExec"), sp);
    assert_eq!(key(&main, "Name"), "My Editor (sandpit)");
    assert_eq!(key(&main, "Name[de]"), "Mein Editor (sandpit)");
    assert_eq!(key(&main, "DBusActivatable"), "false");
    assert_eq!(key(&main, "Icon"), "editor");
    assert_eq!(key(&main, "Actions"), "new;");

    let action = entry_lines(&t, "[Desktop Action new]");
    let exec = key(&action, "Exec");
    assert_eq!(
        parse_exec(exec).unwrap(),
        prefix(&[
            "/opt/My Editor/bin/editor",
            "--title",
            "a \"quoted\" $title",
            "%f"
        ])
    );
    assert!(
        exec.ends_with(r#"--title "a \\"quoted\\" \\$title" %f"#),
        "{exec}"
    );
    assert_eq!(
        key(&entry_lines(&t, "[X-Other Group]"), "Exec"),
        "left alone"
    );

    // Never overwrites.
    let o = h.sandpit().args(["wrap"]).arg(&file).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), t);
}

#[test]
fn a_wrapped_desktop_entry_runs_its_program_under_sandpit() {
    let h = TestHome::new();
    h.write(&h.home().join(".ssh/id_rsa"), CANARY);
    let file = h.home().join("cat.desktop");
    h.write(
        &file,
        "[Desktop Entry]\nType=Application\nName=Cat\nExec=/bin/sh -c \"cat \\\\$0; echo ran-in \\\\$PWD\" %f\n",
    );
    let o = h.sandpit().args(["wrap"]).arg(&file).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = std::fs::read_to_string(h.home().join("cat-sandpit.desktop")).unwrap();
    let argv = parse_exec(key(&entry_lines(&t, "[Desktop Entry]"), "Exec")).unwrap();
    // What a desktop launcher does with %f: substitute the file.
    let secret = h.home().join(".ssh/id_rsa");
    let argv: Vec<String> = argv
        .into_iter()
        .map(|a| {
            if a == "%f" {
                secret.to_str().unwrap().to_string()
            } else {
                a
            }
        })
        .collect();
    let ws = h.home().join("Sandpit/cat");
    assert!(ws.is_dir(), "default workspace");
    let o = h
        .command(&argv[0])
        .args(&argv[1..])
        .current_dir(h.home())
        .output()
        .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(err.contains("sandpit: layers: kernel"), "{err}");
    assert!(
        out.contains(&format!("ran-in {}", ws.display())),
        "{out}{err}"
    );
    assert!(!out.contains(CANARY), "{out}");
    assert!(Path::new(&argv[0]).is_absolute());
}
