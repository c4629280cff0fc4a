//! The control directories of version-control systems other than git, held like
//! `.git`: each tool runs commands its configuration there names, outside the
//! sandbox, the next time the user runs it in the workspace. Mercurial runs
//! `[hooks]` on any command (`pre-status` too), jj runs its fix tools, editors and
//! signing programs from the repository's config, darcs runs `posthook`s from its
//! defaults, and fossil reads versioned settings from `.fossil-settings/`.
//!
//! A directory that exists keeps working for its tool: only the files that name
//! commands are held. One that does not exist cannot be made (a workspace that is
//! no repository must not become one whose hooks the user's tool then runs): it is
//! held like the single-file configs tools read whenever they exist
//! (`plan::READ_IF_PRESENT`), with no placeholder standing in its name.
//! Subversion and Bazaar keep no commands in a working copy, and are left alone.
use std::path::{Path, PathBuf};

use sandpit_policy::{Origin, Policy, Rule};

/// (control directory at the workspace's top, its files that name commands; none:
/// the whole directory).
pub const DIRS: &[(&str, &[&str])] = &[
    (".hg", &["hgrc"]),
    (".jj", &["repo/config.toml"]),
    ("_darcs", &["prefs/defaults"]),
    (".fossil-settings", &[]),
];

/// What [`DIRS`] asks to protect in `workspace`, as it is now.
fn targets(workspace: &Path) -> Vec<(PathBuf, String)> {
    let mut out = vec![];
    for (dir, files) in DIRS {
        let d = workspace.join(dir);
        if files.is_empty() || !d.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            out.push((d, (*dir).to_string()));
            continue;
        }
        for f in *files {
            // The nearest part of the file's path that is no directory: a linked jj
            // workspace's `.jj/repo` is a file naming the repository elsewhere.
            let mut p = d.clone();
            let mut shown = (*dir).to_string();
            for part in Path::new(f).components() {
                p.push(part);
                shown = format!("{shown}/{}", part.as_os_str().to_string_lossy());
                if !p.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                    break;
                }
            }
            out.push((p, shown));
        }
    }
    out
}

/// Add [`DIRS`]' files to `files.block_write`, each with its own origin, unless a
/// rule holds them already.
pub fn protect(policy: &mut Policy) {
    for (path, entry) in targets(&policy.context.workspace) {
        if policy
            .files
            .block_write
            .iter()
            .any(|r| path.starts_with(&r.value))
        {
            continue;
        }
        let mut origin = Origin::builtin("files.block_write", &entry);
        origin.file = ORIGIN.into();
        policy.files.block_write.push(Rule {
            value: path,
            origin,
        });
    }
}

/// How [`protect`]'s rules name their origin.
pub const ORIGIN: &str = "other version control (sandpit)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_directories_whole_present_ones_by_their_command_files() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path();
        let names = |ws: &Path| -> Vec<String> {
            targets(ws)
                .into_iter()
                .map(|(p, shown)| {
                    assert_eq!(p, ws.join(&shown));
                    shown
                })
                .collect()
        };
        assert_eq!(names(ws), [".hg", ".jj", "_darcs", ".fossil-settings"]);
        std::fs::create_dir_all(ws.join(".hg")).unwrap();
        std::fs::create_dir_all(ws.join(".jj/repo")).unwrap();
        std::fs::create_dir_all(ws.join("_darcs")).unwrap();
        std::fs::create_dir_all(ws.join(".fossil-settings")).unwrap();
        assert_eq!(
            names(ws),
            [
                ".hg/hgrc",
                ".jj/repo/config.toml",
                "_darcs/prefs",
                ".fossil-settings"
            ]
        );
        // A linked jj workspace: `.jj/repo` is a file.
        std::fs::remove_dir(ws.join(".jj/repo")).unwrap();
        std::fs::write(ws.join(".jj/repo"), "/elsewhere/.jj/repo").unwrap();
        assert_eq!(names(ws)[1], ".jj/repo");
    }
}
