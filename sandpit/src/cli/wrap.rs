//! `sandpit wrap TARGET [--profile P] [--output PATH] [--workspace DIR]`: a launcher
//! that runs TARGET under `sandpit run`. The launcher embeds the absolute path of
//! this sandpit binary; the original is only read, never changed; an existing output
//! is never overwritten.
//!
//! - `App.app` → `App (sandpit).app` beside it (or in `--output DIR`): Info.plist
//!   carried over with `CFBundleExecutable` (and the identifier and name) changed, the
//!   icon copied, and an executable script running the original bundle's executable
//!   with `sandpit run --gui` (the Seatbelt GUI allowance); ad-hoc signed on macOS.
//! - `FILE.desktop` → a desktop entry (default `NAME-sandpit.desktop` beside it) whose
//!   `Exec` lines (main and actions) and `TryExec` run under sandpit, field codes
//!   (`%f`, `%U`, …) kept, quoting per the Desktop Entry Specification.
//! - any other file → a shell script (default `BIN-sandpit` beside it).
//!
//! Apps and desktop entries are started from a desktop session whose working
//! directory is `/` or `$HOME`, so their launcher names a workspace: `--workspace`,
//! default `~/Sandpit/NAME` (created). A wrapped binary uses the directory it is run
//! from; `sandpit run` itself refuses `/`, the home and a directory holding it
//! (`config::check_workspace`), before it prints anything else.
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cli::UsageError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// An `.app` bundle, a `.desktop` file, or an executable.
    pub target: PathBuf,
    /// Agent profile the launcher runs with.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Where to write: a directory for an `.app` (the bundle goes inside), the file
    /// to create otherwise (or a directory to create it in).
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// The project directory the wrapped program may write to.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub fn execute(args: Args) -> Result<i32> {
    let mut target = std::path::absolute(&args.target).context("target path")?;
    if !target.exists() {
        // A bare command name: found on PATH, as the shell would.
        let bare = args.target.to_str().filter(|t| !t.contains('/'));
        let cwd = std::env::current_dir().context("current directory")?;
        let path = std::env::var_os("PATH").unwrap_or_default();
        match bare.and_then(|t| crate::inspect::which(t, &path, &cwd)) {
            Some(found) => target = found,
            None => return Err(UsageError(format!("{} does not exist", target.display())).into()),
        }
    }
    if let Some(p) = &args.profile {
        if p.is_empty() || p.contains(['/', '\0']) {
            return Err(UsageError(format!("bad profile name {p:?}")).into());
        }
    }
    let sandpit = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("finding the sandpit binary")?;
    let workspace = match &args.workspace {
        Some(w) => Some(std::path::absolute(w).context("workspace path")?),
        None => None,
    };
    let w = Wrap {
        sandpit,
        profile: args.profile.clone(),
        workspace,
    };
    let is = |ext: &str| target.extension().is_some_and(|e| e == ext);
    let out = if is("app") && target.is_dir() {
        w.app(&target, args.output.as_deref())?
    } else if is("desktop") {
        w.desktop(&target, args.output.as_deref())?
    } else {
        w.binary(&target, args.output.as_deref())?
    };
    println!("{}", out.display());
    Ok(0)
}

struct Wrap {
    sandpit: PathBuf,
    profile: Option<String>,
    workspace: Option<PathBuf>,
}

/// `name` of `path` without its extension.
fn stem(path: &Path) -> Result<String> {
    path.file_stem()
        .and_then(|s| s.to_str())
        .map(str::to_string)
        .ok_or_else(|| UsageError(format!("{} has no usable name", path.display())).into())
}

fn refuse_existing(out: &Path) -> Result<()> {
    if out.symlink_metadata().is_ok() {
        return Err(UsageError(format!(
            "{} already exists; sandpit wrap never overwrites (remove it or pass --output)",
            out.display()
        ))
        .into());
    }
    Ok(())
}

/// `out` given as a directory (existing) → `dir/default_name`; as a path → itself.
fn output_file(output: Option<&Path>, beside: &Path, default_name: &str) -> Result<PathBuf> {
    let p = match output {
        Some(o) if o.is_dir() => o.join(default_name),
        Some(o) => o.to_path_buf(),
        None => beside.join(default_name),
    };
    Ok(std::path::absolute(p)?)
}

/// A shell word: single-quoted unless plainly safe.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn utf8(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| UsageError(format!("{} is not valid UTF-8", p.display())).into())
}

/// Write a new file (never replacing one) with `mode`.
fn create(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    // The umask may have narrowed the mode; executables must stay executable.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

impl Wrap {
    /// `sandpit run [--gui] [--profile P] [--workspace W] --`.
    fn run_prefix(&self, workspace: Option<&Path>, gui: bool) -> Result<Vec<String>> {
        let mut v = vec![utf8(&self.sandpit)?.to_string(), "run".to_string()];
        if gui {
            // A wrapped app draws windows: the Seatbelt GUI allowance (macOS).
            v.push("--gui".into());
        }
        if let Some(p) = &self.profile {
            v.push("--profile".into());
            v.push(p.clone());
        }
        if let Some(w) = workspace {
            v.push("--workspace".into());
            v.push(utf8(w)?.to_string());
        }
        v.push("--".into());
        Ok(v)
    }

    /// The workspace of a GUI launcher: `--workspace`, else `~/Sandpit/NAME`.
    fn gui_workspace(&self, name: &str) -> Result<PathBuf> {
        let w = match &self.workspace {
            Some(w) => w.clone(),
            None => crate::config::home()?.join("Sandpit").join(name),
        };
        std::fs::create_dir_all(&w)
            .with_context(|| format!("creating workspace {}", w.display()))?;
        Ok(w)
    }

    /// The launcher script body for `program` (run with the script's arguments).
    fn script(&self, program: &Path, workspace: Option<&Path>, gui: bool) -> Result<String> {
        let mut words: Vec<String> = self
            .run_prefix(workspace, gui)?
            .iter()
            .map(|w| sh_quote(w))
            .collect();
        words.push(sh_quote(utf8(program)?));
        let mut s = format!(
            "#!/bin/sh\n# Written by `sandpit wrap`: runs {} under sandpit.\n",
            program.display()
        );
        s.push_str(&format!("exec {} \"$@\"\n", words.join(" ")));
        Ok(s)
    }

    fn binary(&self, target: &Path, output: Option<&Path>) -> Result<PathBuf> {
        let name = target
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| UsageError(format!("{} has no usable name", target.display())))?;
        let beside = target.parent().unwrap_or(Path::new("/"));
        let out = output_file(output, beside, &format!("{name}-sandpit"))?;
        refuse_existing(&out)?;
        let body = self.script(target, self.workspace.as_deref(), false)?;
        create(&out, body.as_bytes(), 0o755)?;
        Ok(out)
    }

    fn app(&self, bundle: &Path, output: Option<&Path>) -> Result<PathBuf> {
        let name = stem(bundle)?;
        let contents = bundle.join("Contents");
        let info_path = contents.join("Info.plist");
        let mut info = plist::Value::from_file(&info_path)
            .with_context(|| format!("reading {}", info_path.display()))?;
        let dict = info
            .as_dictionary_mut()
            .ok_or_else(|| UsageError(format!("{} is not a dictionary", info_path.display())))?;
        let exe = dict
            .get("CFBundleExecutable")
            .and_then(|v| v.as_string())
            .ok_or_else(|| {
                UsageError(format!("{} has no CFBundleExecutable", info_path.display()))
            })?
            .to_string();
        if exe.is_empty() || exe.contains('/') {
            bail!(UsageError(format!(
                "CFBundleExecutable {exe:?} is not a file name"
            )));
        }
        let program = std::fs::canonicalize(contents.join("MacOS").join(&exe))
            .with_context(|| format!("the bundle's executable {exe}"))?;
        let out_dir = match output {
            Some(o) => std::path::absolute(o)?,
            None => bundle.parent().unwrap_or(Path::new("/")).to_path_buf(),
        };
        let out = out_dir.join(format!("{name} (sandpit).app"));
        refuse_existing(&out)?;
        let workspace = self.gui_workspace(&name)?;
        let new_exe = format!("{exe}-sandpit");
        dict.insert(
            "CFBundleExecutable".into(),
            plist::Value::String(new_exe.clone()),
        );
        if let Some(id) = dict.get("CFBundleIdentifier").and_then(|v| v.as_string()) {
            // Another identifier, so the system keeps the two apps apart.
            let id = format!("{id}.sandpit");
            dict.insert("CFBundleIdentifier".into(), plist::Value::String(id));
        }
        for k in ["CFBundleName", "CFBundleDisplayName"] {
            if let Some(n) = dict.get(k).and_then(|v| v.as_string()) {
                let n = format!("{n} (sandpit)");
                dict.insert(k.into(), plist::Value::String(n));
            }
        }
        let icons: Vec<String> = ["CFBundleIconFile"]
            .iter()
            .filter_map(|k| dict.get(k).and_then(|v| v.as_string()).map(str::to_string))
            .collect();
        std::fs::create_dir_all(out_dir.as_path())?;
        std::fs::create_dir(&out).with_context(|| format!("creating {}", out.display()))?;
        let built = (|| -> Result<()> {
            let c = out.join("Contents");
            std::fs::create_dir_all(c.join("MacOS"))?;
            std::fs::create_dir_all(c.join("Resources"))?;
            let mut xml = vec![];
            info.to_writer_xml(&mut xml).context("writing Info.plist")?;
            create(&c.join("Info.plist"), &xml, 0o644)?;
            if let Ok(pkg) = std::fs::read(contents.join("PkgInfo")) {
                create(&c.join("PkgInfo"), &pkg, 0o644)?;
            }
            let script = self.script(&program, Some(&workspace), true)?;
            create(&c.join("MacOS").join(&new_exe), script.as_bytes(), 0o755)?;
            // The icon, and the asset catalog that holds modern ones.
            let res = contents.join("Resources");
            let mut files: Vec<String> = vec!["Assets.car".into()];
            for i in icons {
                if Path::new(&i).extension().is_none() {
                    files.push(format!("{i}.icns"));
                }
                files.push(i);
            }
            for f in files {
                if f.contains('/') {
                    continue;
                }
                let src = res.join(&f);
                if src.is_file() {
                    let bytes = std::fs::read(&src)?;
                    create(&c.join("Resources").join(&f), &bytes, 0o644)?;
                }
            }
            Ok(())
        })();
        if let Err(e) = built.and_then(|()| sign(&out)) {
            let _ = std::fs::remove_dir_all(&out);
            return Err(e);
        }
        Ok(out)
    }

    fn desktop(&self, file: &Path, output: Option<&Path>) -> Result<PathBuf> {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let name = stem(file)?;
        let beside = file.parent().unwrap_or(Path::new("/"));
        let out = output_file(output, beside, &format!("{name}-sandpit.desktop"))?;
        refuse_existing(&out)?;
        let workspace = self.gui_workspace(&name)?;
        let prefix = self.run_prefix(Some(&workspace), false)?;
        let body = rewrite_desktop(&text, &prefix, utf8(&self.sandpit)?)?;
        create(&out, body.as_bytes(), 0o755)?;
        Ok(out)
    }
}

/// Seal the new bundle with an ad-hoc signature (`codesign --sign -`): macOS then
/// sees one consistent app whose Info.plist and resources are hashed, and the
/// launcher script carries the signature in its extended attributes. The
/// original's signature is never copied (it would not match). A bundle that cannot
/// be signed, or whose signature does not verify, is removed.
#[cfg(target_os = "macos")]
fn sign(bundle: &Path) -> Result<()> {
    const CODESIGN: &str = "/usr/bin/codesign";
    // As every program sandpit runs on the host (hostcmd.rs): in `/`, nothing in
    // its environment that loads code (DYLD_INSERT_LIBRARIES, …). No run exists
    // here, so no writable root either.
    let writable = crate::hostcmd::Writable::default();
    let run = |args: &[&str]| -> Result<()> {
        let o = crate::hostcmd::command(CODESIGN, &writable)?
            .args(args)
            .arg(bundle)
            .output()
            .with_context(|| format!("running {CODESIGN}"))?;
        if !o.status.success() {
            bail!(
                "{CODESIGN} {} {}: {}",
                args.join(" "),
                bundle.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        Ok(())
    };
    run(&["--force", "--sign", "-", "--timestamp=none"])?;
    run(&["--verify", "--strict"])
}

/// Off macOS there is no `codesign`: the bundle is left unsigned, and wrap says so
/// with the command that signs it on the Mac.
#[cfg(not(target_os = "macos"))]
fn sign(bundle: &Path) -> Result<()> {
    eprintln!(
        "sandpit: {} is not signed (codesign exists only on macOS); on the Mac run: codesign --force --sign - {}",
        bundle.display(),
        sh_quote(utf8(bundle)?)
    );
    Ok(())
}

/// Rewrite a desktop entry: every `Exec` in `[Desktop Entry]` and `[Desktop Action
/// …]` groups gets `prefix` in front, `TryExec` names `try_exec`, the name says
/// sandpit, D-Bus activation (which would bypass Exec) is turned off.
pub fn rewrite_desktop(text: &str, prefix: &[String], try_exec: &str) -> Result<String> {
    let mut out = String::new();
    let mut group = String::new();
    let mut saw_exec = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            group = t.trim_end().to_string();
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let ours = group == "[Desktop Entry]" || group.starts_with("[Desktop Action ");
        let kv = t
            .split_once('=')
            .map(|(k, v)| (k.trim_end(), v.trim_start()));
        match kv {
            Some(("Exec", v)) if ours => {
                let argv =
                    parse_exec(v).map_err(|e| UsageError(format!("Exec in {group}: {e}")))?;
                if argv.is_empty() {
                    bail!(UsageError(format!("Exec in {group} is empty")));
                }
                let mut all = prefix.to_vec();
                all.extend(argv);
                out.push_str(&format!("Exec={}\n", format_exec(&all)));
                saw_exec = true;
            }
            Some(("TryExec", _)) if group == "[Desktop Entry]" => {
                out.push_str(&format!("TryExec={}\n", escape_string(try_exec)));
            }
            Some(("DBusActivatable", _)) if group == "[Desktop Entry]" => {
                out.push_str("DBusActivatable=false\n");
            }
            Some((k, v))
                if group == "[Desktop Entry]" && (k == "Name" || k.starts_with("Name[")) =>
            {
                out.push_str(&format!("{k}={v} (sandpit)\n"));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    if !saw_exec {
        bail!(UsageError(
            "the desktop entry has no Exec line to wrap".into()
        ));
    }
    Ok(out)
}

/// Undo the string-type escapes (`\s \n \t \r \\`).
fn unescape_string(v: &str) -> String {
    let mut out = String::new();
    let mut it = v.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('s') => out.push(' '),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// The string-type escapes for a value.
fn escape_string(v: &str) -> String {
    let mut out = String::new();
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// An `Exec` value as arguments: string escapes undone, then the Exec quoting
/// (double quotes; inside them `\"`, `` \` ``, `\$`, `\\`). Field codes stay as
/// written (`%f`, `%%`), since the launcher that reads our entry expands them.
pub fn parse_exec(value: &str) -> std::result::Result<Vec<String>, String> {
    let v = unescape_string(value);
    let mut args = vec![];
    let mut cur = String::new();
    let mut in_arg = false;
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_arg {
                    args.push(std::mem::take(&mut cur));
                    in_arg = false;
                }
            }
            '"' => {
                in_arg = true;
                loop {
                    match chars.next() {
                        None => return Err("unterminated quote".into()),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '`' | '$' | '\\')) => cur.push(e),
                            Some(o) => {
                                cur.push('\\');
                                cur.push(o);
                            }
                            None => return Err("unterminated quote".into()),
                        },
                        Some(o) => cur.push(o),
                    }
                }
            }
            c => {
                in_arg = true;
                cur.push(c);
            }
        }
    }
    if in_arg {
        args.push(cur);
    }
    Ok(args)
}

/// Characters that make an Exec argument need quotes.
const RESERVED: &[char] = &[
    ' ', '\t', '\n', '"', '\'', '\\', '>', '<', '~', '|', '&', ';', '$', '*', '?', '#', '(', ')',
    '`',
];

/// Arguments as an `Exec` value (quoted where needed, then string-escaped).
pub fn format_exec(argv: &[String]) -> String {
    let words: Vec<String> = argv
        .iter()
        .map(|a| {
            if !a.is_empty() && !a.contains(RESERVED) {
                a.clone()
            } else {
                let mut q = String::from("\"");
                for c in a.chars() {
                    if matches!(c, '"' | '`' | '$' | '\\') {
                        q.push('\\');
                    }
                    q.push(c);
                }
                q.push('"');
                q
            }
        })
        .collect();
    escape_string(&words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_quoting_round_trips() {
        let cases: &[&[&str]] = &[
            &["/usr/bin/app", "%U"],
            &[
                "/opt/My App/bin/app",
                "--title=a \"b\"",
                "$HOME",
                "back\\slash",
                "%f",
            ],
            &["a`b", "semi;colon", "", "100%%"],
        ];
        for c in cases {
            let v: Vec<String> = c.iter().map(|s| s.to_string()).collect();
            assert_eq!(
                parse_exec(&format_exec(&v)).unwrap(),
                v,
                "{}",
                format_exec(&v)
            );
        }
        // Per the spec, a literal backslash inside quotes is `\\\\` in the file.
        assert_eq!(
            parse_exec(r#""/opt/a b/x" "c\\\\d" %F"#).unwrap(),
            vec!["/opt/a b/x", "c\\d", "%F"]
        );
        assert_eq!(format_exec(&["/a b".into(), "%U".into()]), "\"/a b\" %U");
        assert!(parse_exec("\"open").is_err());
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(sh_quote("/usr/bin/x"), "/usr/bin/x");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
        assert_eq!(sh_quote(""), "''");
    }
}
