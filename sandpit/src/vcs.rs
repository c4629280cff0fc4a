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
//! (`sandpit_policy::runlater::Kind::File`), with no placeholder standing in its name.
//! Subversion and Bazaar keep no commands in a working copy, and are left alone.
use std::path::{Path, PathBuf};

use sandpit_policy::Policy;

/// (control directory at the workspace's top, its files that name commands; none:
/// the whole directory).
pub const DIRS: &[(&str, &[&str])] = &[
    // `hgrc-not-shared` is read on every command too; `requires` and `sharedpath`
    // can point hg at another repository's `hgrc` (a share).
    (
        ".hg",
        &["hgrc", "hgrc-not-shared", "requires", "sharedpath"],
    ),
    // The repository config, the legacy workspace config, and the git repository
    // jj runs git against when it is not colocated (its config and hooks).
    (
        ".jj",
        &[
            "repo/config.toml",
            "workspace-config.toml",
            "repo/store/git_target",
            "repo/store/git/config",
            "repo/store/git/hooks",
        ],
    ),
    ("_darcs", &["prefs/defaults"]),
    (".fossil-settings", &[]),
];

/// Checkout files that name a repository elsewhere (fossil's, whose repository
/// database carries command settings): one cannot be made where none exists; one
/// that exists stays writable, as the tool writes it on every command.
pub const ABSENT_ONLY: &[&str] = &[".fslckout", "_FOSSIL_"];

/// What [`DIRS`] asks to protect in `workspace`, as it is now.
fn targets(workspace: &Path) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = ABSENT_ONLY
        .iter()
        .map(|f| (workspace.join(f), (*f).to_string()))
        .filter(|(p, _)| p.symlink_metadata().is_err())
        .collect();
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
    // Several files under one missing directory name it once.
    out.dedup();
    out
}

/// Add [`DIRS`]' files to `files.block_write`, each with its own origin, unless a
/// rule holds them already.
pub fn protect(policy: &mut Policy) {
    for (path, entry) in targets(&policy.context.workspace) {
        crate::gitcfg::block_write(policy, path, &entry, ORIGIN);
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
        assert_eq!(
            names(ws),
            [
                ".fslckout",
                "_FOSSIL_",
                ".hg",
                ".jj",
                "_darcs",
                ".fossil-settings"
            ]
        );
        std::fs::write(ws.join(".fslckout"), "").unwrap();
        std::fs::write(ws.join("_FOSSIL_"), "").unwrap();
        std::fs::create_dir_all(ws.join(".hg")).unwrap();
        std::fs::create_dir_all(ws.join(".jj/repo")).unwrap();
        std::fs::create_dir_all(ws.join("_darcs")).unwrap();
        std::fs::create_dir_all(ws.join(".fossil-settings")).unwrap();
        assert_eq!(
            names(ws),
            [
                ".hg/hgrc",
                ".hg/hgrc-not-shared",
                ".hg/requires",
                ".hg/sharedpath",
                ".jj/repo/config.toml",
                ".jj/workspace-config.toml",
                ".jj/repo/store",
                "_darcs/prefs",
                ".fossil-settings"
            ]
        );
        // A linked jj workspace: `.jj/repo` is a file.
        std::fs::remove_dir(ws.join(".jj/repo")).unwrap();
        std::fs::write(ws.join(".jj/repo"), "/elsewhere/.jj/repo").unwrap();
        let n = names(ws);
        assert_eq!(
            n[4..7],
            [".jj/repo", ".jj/workspace-config.toml", ".jj/repo"]
        );
    }
}
