//! Which app bundle a program belongs to, for the GUI allowance: the program is
//! `X.app/Contents/MacOS/NAME` and `X.app/Contents/Info.plist` names the bundle
//! identifier its container and preferences are filed under.
//!
//! Reads files but runs nothing, so it builds and is unit-tested everywhere.
#![forbid(unsafe_code)]
use std::path::Path;

/// The `CFBundleIdentifier` of the bundle whose executable `program` is, or `None`
/// when it is no bundle's executable (or the bundle has no readable identifier:
/// the run then gets the GUI services without any app data of its own).
pub fn app_id_of(program: &Path) -> Option<String> {
    let macos = program.parent()?;
    let contents = macos.parent()?;
    let bundle = contents.parent()?;
    if macos.file_name()? != "MacOS"
        || contents.file_name()? != "Contents"
        || bundle.extension()? != "app"
    {
        return None;
    }
    let info = plist::Value::from_file(contents.join("Info.plist")).ok()?;
    info.as_dictionary()?
        .get("CFBundleIdentifier")?
        .as_string()
        .map(str::to_string)
}

/// The GUI allowance for `command`: the app data of the bundle its program (followed
/// through symlinks) is the executable of — a wrapped app's launcher names the
/// original bundle's executable — for the user whose home is `home`. Not when
/// `writable` (the policy: may the sandbox write this path?) says the bundle's
/// `Info.plist` may be written from inside: the sandbox could then name any app's
/// identifier (Terminal's, whose preferences run commands) and be given its data.
/// The app then gets the GUI services without data of its own.
pub fn gui_allowance(
    command: &[std::ffi::OsString],
    home: &Path,
    writable: impl Fn(&Path) -> bool,
) -> super::Result<super::seatbelt::Gui> {
    let id = command
        .first()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .filter(|p| {
            let info = p
                .parent()
                .and_then(Path::parent)
                .map(|c| c.join("Info.plist"));
            !info.is_some_and(|i| writable(&i))
        })
        .and_then(|p| app_id_of(&p));
    let app = match id {
        Some(id) => Some(super::seatbelt::App::new(&id, home)?),
        None => None,
    };
    Ok(super::seatbelt::Gui { app })
}

/// Tests: an app bundle `Demo.app` in `dir` whose `Info.plist` names
/// `com.example.demo`, with an empty executable; its path.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn demo_app(dir: &Path) -> std::path::PathBuf {
    let app = dir.join("Demo.app/Contents");
    std::fs::create_dir_all(app.join("MacOS")).unwrap();
    std::fs::write(
        app.join("Info.plist"),
        "<?xml version=\"1.0\"?><plist version=\"1.0\"><dict>\
         <key>CFBundleIdentifier</key><string>com.example.demo</string></dict></plist>",
    )
    .unwrap();
    let exe = app.join("MacOS/Demo");
    std::fs::write(&exe, "").unwrap();
    exe
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn finds_the_identifier_of_a_bundle_executable_only() {
        let d = tempfile::tempdir().unwrap();
        let exe = demo_app(d.path());
        let app = d.path().join("Demo.app/Contents");
        assert_eq!(app_id_of(&exe).as_deref(), Some("com.example.demo"));
        // Not the executable's place in a bundle: no identifier.
        assert_eq!(app_id_of(&app.join("Resources/tool")), None);
        assert_eq!(app_id_of(&d.path().join("Demo/Contents/MacOS/Demo")), None);
        assert_eq!(app_id_of(Path::new("/usr/bin/true")), None);
        // The allowance names the app only where the sandbox cannot rewrite its
        // Info.plist (else it could claim another app's identifier and data).
        let command = [exe.clone().into_os_string()];
        let home = d.path().join("home");
        let plist = std::fs::canonicalize(app.join("Info.plist")).unwrap();
        let fixed = gui_allowance(&command, &home, |_| false).unwrap();
        assert_eq!(fixed.app.as_ref().map(|a| a.id()), Some("com.example.demo"));
        let writable = gui_allowance(&command, &home, |p| p == plist).unwrap();
        assert!(writable.app.is_none(), "{writable:?}");
        // A bundle without a readable Info.plist: none either.
        std::fs::write(app.join("Info.plist"), "not a plist").unwrap();
        assert_eq!(app_id_of(&exe), None);
    }
}
