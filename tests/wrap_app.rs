#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `sandpit wrap App.app` on a synthetic bundle: the launcher bundle's Info.plist
//! parsed back, its executable runs the original under `sandpit run`, the icon is
//! kept, the original is byte-identical afterwards, and nothing is overwritten. The
//! launcher asks for the GUI allowance (`run --gui`), and carries no signature of
//! the original's (off macOS it is unsigned, and wrap says so).
mod common;

use common::{sandpit_bin, TestHome};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const INFO: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>CFBundleExecutable</key><string>Demo</string>
  <key>CFBundleIdentifier</key><string>com.example.demo</string>
  <key>CFBundleName</key><string>Demo</string>
  <key>CFBundleIconFile</key><string>AppIcon</string>
  <key>CFBundlePackageType</key><string>APPL</string>
  <key>LSMinimumSystemVersion</key><string>12.0</string>
</dict>
</plist>
"#;

const ICON: &[u8] = b"icns\x00\x00\x00\x10fake-icon-bytes";
const CANARY: &str = "CANARY-wrap-app-51c2";

/// A bundle whose executable prints its arguments and tries to read a secret.
fn bundle(h: &TestHome, dir: &Path) -> PathBuf {
    let app = dir.join("Demo.app");
    h.write(&app.join("Contents/Info.plist"), INFO);
    h.write(&app.join("Contents/PkgInfo"), "APPL????");
    h.write(
        &app.join("Contents/MacOS/Demo"),
        "#!/bin/sh\nprintf 'demo ran:'; for a in \"$@\"; do printf ' [%s]' \"$a\"; done; echo\ncat ~/.ssh/id_rsa\necho \"cwd=$PWD\"\n",
    );
    std::fs::set_permissions(
        app.join("Contents/MacOS/Demo"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    h.write(&app.join("Contents/Resources/AppIcon.icns"), "");
    std::fs::write(app.join("Contents/Resources/AppIcon.icns"), ICON).unwrap();
    h.write(&app.join("Contents/Resources/big.dat"), "other resource");
    // The original's seal: it hashes the original executable, so a copy of it in
    // the launcher bundle would make the launcher look tampered with.
    h.write(
        &app.join("Contents/_CodeSignature/CodeResources"),
        "<plist><dict><key>files</key><dict/></dict></plist>",
    );
    h.write(&h.home().join(".ssh/id_rsa"), CANARY);
    // The agent's own directory, as on a machine where it is installed.
    h.write(&h.home().join(".codex/config.toml"), "");
    app
}

/// Every file under `dir` with its bytes and mode.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let md = std::fs::symlink_metadata(&p).unwrap();
        if md.is_dir() {
            m.extend(snapshot(&p));
        } else {
            m.insert(
                p.clone(),
                (std::fs::read(&p).unwrap(), md.permissions().mode()),
            );
        }
    }
    m
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn wraps_a_bundle_beside_it_and_runs_it_under_sandpit() {
    let h = TestHome::new();
    let apps = h.home().join("Applications");
    let app = bundle(&h, &apps);
    let before = snapshot(&app);

    let o = h
        .sandpit()
        .args(["wrap"])
        .arg(&app)
        .args(["--profile", "codex"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = apps.join("Demo (sandpit).app");
    assert_eq!(text(&o.stdout).trim(), out.to_str().unwrap());
    // The signature: never the original's; here (no codesign off macOS) none at
    // all, and wrap says so with the command that seals it on the Mac.
    assert!(
        !out.join("Contents/_CodeSignature").exists(),
        "the original's signature was copied into the launcher bundle"
    );
    assert!(
        text(&o.stderr).contains(&format!(
            "{} is not signed (codesign exists only on macOS); on the Mac run: codesign --force --sign - '{}'",
            out.display(),
            out.display()
        )),
        "{}",
        text(&o.stderr)
    );

    // Info.plist parsed back: the executable name changed, the rest carried over.
    let info = plist::Value::from_file(out.join("Contents/Info.plist")).unwrap();
    let d = info.as_dictionary().unwrap();
    let s = |k: &str| d.get(k).and_then(|v| v.as_string()).unwrap().to_string();
    assert_eq!(s("CFBundleExecutable"), "Demo-sandpit");
    assert_eq!(s("CFBundleIdentifier"), "com.example.demo.sandpit");
    assert_eq!(s("CFBundleName"), "Demo (sandpit)");
    assert_eq!(s("CFBundleIconFile"), "AppIcon");
    assert_eq!(s("LSMinimumSystemVersion"), "12.0");
    assert_eq!(s("CFBundlePackageType"), "APPL");
    // The icon is kept; the launcher's executable exists and is executable.
    assert_eq!(
        std::fs::read(out.join("Contents/Resources/AppIcon.icns")).unwrap(),
        ICON
    );
    assert_eq!(
        std::fs::read(out.join("Contents/PkgInfo")).unwrap(),
        b"APPL????"
    );
    let exe = out.join("Contents/MacOS/Demo-sandpit");
    assert_eq!(
        std::fs::metadata(&exe).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let script = std::fs::read_to_string(&exe).unwrap();
    let bin = std::fs::canonicalize(sandpit_bin()).unwrap();
    assert!(
        script.contains(&format!(
            "exec {} run --gui --profile codex --workspace ",
            bin.display()
        )),
        "{script}"
    );
    assert!(
        script.contains(app.join("Contents/MacOS/Demo").to_str().unwrap()),
        "{script}"
    );
    // The default workspace was made for it.
    let ws = h.home().join("Sandpit/Demo");
    assert!(ws.is_dir());
    h.give_to_test_user(&ws);

    // The original is untouched.
    assert_eq!(snapshot(&app), before);

    // The profile the launcher's `run --gui` gets on a Mac: the GUI allowance with
    // the original bundle's identifier for its own data; without --gui, neither.
    let demo = app.join("Contents/MacOS/Demo");
    let o = h
        .sandpit()
        .args(["check", "--seatbelt", "--gui", "--"])
        .arg(&demo)
        .output()
        .unwrap();
    let profile = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        profile.contains("\"com.apple.windowserver.active\"")
            && profile.contains("APP_ID_0=com.example.demo")
            && profile.lines().any(|l| {
                // The home's spelling as Seatbelt sees it (/tmp is /private/tmp).
                l.trim().starts_with("APP_DATA_0=/")
                    && l.ends_with(&format!(
                        "{}/Library/Containers/com.example.demo",
                        h.home().display()
                    ))
            }),
        "{profile}"
    );
    let o = h
        .sandpit()
        .args(["check", "--seatbelt", "--"])
        .arg(&demo)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let plain = text(&o.stdout);
    assert!(
        !plain.contains("windowserver") && !plain.contains("APP_ID_0"),
        "{plain}"
    );

    // Launching it runs the original executable under sandpit, arguments intact.
    let o = h.command(&exe).args(["a b", "it's", ""]).output().unwrap();
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(
        stdout.contains("demo ran: [a b] [it's] []"),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains("sandpit: layers: kernel") && stderr.contains("[profile codex]"),
        "{stderr}"
    );
    assert!(
        !stdout.contains(CANARY),
        "the wrapped app read the secret: {stdout}"
    );
    assert!(
        stdout.contains(&format!("cwd={}", ws.display())),
        "{stdout}"
    );

    // Never overwrites: a second wrap fails and leaves the launcher as it was.
    let launcher_before = snapshot(&out);
    let o = h.sandpit().args(["wrap"]).arg(&app).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("already exists"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(snapshot(&out), launcher_before);
    assert_eq!(snapshot(&app), before);
}

#[test]
fn output_dir_and_workspace_flags_and_bad_bundles() {
    let h = TestHome::new();
    let app = bundle(&h, &h.home().join("src"));
    let dest = h.home().join("dest");
    let ws = h.workspace();
    let o = h
        .sandpit()
        .args(["wrap"])
        .arg(&app)
        .arg("--output")
        .arg(&dest)
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = dest.join("Demo (sandpit).app");
    let script = std::fs::read_to_string(out.join("Contents/MacOS/Demo-sandpit")).unwrap();
    assert!(
        script.contains(&format!("--workspace {} --", ws.display())),
        "{script}"
    );
    assert!(!script.contains("--profile"), "{script}");
    assert!(script.contains(" run --gui --workspace "), "{script}");
    assert!(!h.home().join("src/Demo (sandpit).app").exists());

    // A bundle without CFBundleExecutable is refused, and nothing is left behind.
    let bad = h.home().join("Bad.app");
    h.write(
        &bad.join("Contents/Info.plist"),
        &INFO.replace("CFBundleExecutable", "NotIt"),
    );
    let o = h.sandpit().args(["wrap"]).arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("CFBundleExecutable"),
        "{}",
        text(&o.stderr)
    );
    assert!(!h.home().join("Bad (sandpit).app").exists());
}
