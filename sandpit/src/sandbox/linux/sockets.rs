//! The pathname Unix sockets programs on this machine have bound, from the kernel's
//! socket table of the launcher's network namespace (`/proc/net/unix`): the sockets
//! a read-only mount does not protect, found without walking a directory.
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Absolute paths bound in `table` (the text of `/proc/net/unix`), each once, in
/// order. Abstract names (`@…`) and relative paths (bound against a working
/// directory the table does not show) are left out.
pub fn parse(table: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // `Num: RefCount Protocol Flags Type St Inode Path`: the inode is padded
            // with spaces, and the path runs to the end of the line (spaces and all).
            let mut rest = line.trim_start();
            for _ in 0..7 {
                let end = rest.find(' ')?;
                rest = rest[end..].trim_start_matches(' ');
            }
            rest.starts_with('/').then(|| PathBuf::from(rest))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The sockets bound on this machine that are still sockets at the path they were
/// bound at (a socket file removed and replaced by a regular file is no socket).
/// An unreadable table gives none: the masks by location (`/run`, the agents'
/// sockets the environment names) still hold.
pub fn bound() -> Vec<PathBuf> {
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    parse(&table).into_iter().filter(|p| is_socket(p)).collect()
}

/// Whether `path` is a socket bound by a program on this machine now.
pub fn is_bound(path: &Path) -> bool {
    is_socket(path) && bound().iter().any(|b| b == path)
}

/// The sockets `p` names: itself if it is one, those beneath it if it is a
/// directory (links not followed, at most `limit` entries looked at), else none.
/// What `isolation.unix_sockets` brings back inside a mask: never another file.
pub fn named_by(p: &Path, limit: usize) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut todo = vec![p.to_path_buf()];
    let mut seen = 0;
    while let Some(d) = todo.pop() {
        let Ok(m) = std::fs::symlink_metadata(&d) else {
            continue;
        };
        if m.file_type().is_socket() {
            out.push(d);
        } else if m.is_dir() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                seen += 1;
                if seen > limit {
                    break;
                }
                todo.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn is_socket(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths_with_spaces_padding_and_skips_abstract_and_unnamed() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01   123 /run/user/1000/bus\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 45678 /run/user/1000/bus\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 99999 /home/u/my dir/a b.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 11111 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000002 00000000 00000000 0002 01 22222\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 33333 relative.sock\n";
        assert_eq!(
            parse(table),
            [
                PathBuf::from("/home/u/my dir/a b.sock"),
                PathBuf::from("/run/user/1000/bus"),
            ]
        );
        assert!(parse("").is_empty());
    }

    #[test]
    fn a_directory_names_the_sockets_beneath_it_and_no_other_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("a/secret"), "x").unwrap();
        let _l1 = std::os::unix::net::UnixListener::bind(d.path().join("a/s1")).unwrap();
        let _l2 = std::os::unix::net::UnixListener::bind(d.path().join("a/b/s2")).unwrap();
        assert_eq!(
            named_by(&d.path().join("a"), 100),
            [d.path().join("a/b/s2"), d.path().join("a/s1")]
        );
        assert_eq!(
            named_by(&d.path().join("a/s1"), 100),
            [d.path().join("a/s1")]
        );
        assert!(named_by(&d.path().join("a/secret"), 100).is_empty());
        assert!(named_by(&d.path().join("none"), 100).is_empty());
    }

    #[test]
    fn a_listening_socket_is_bound_and_a_file_in_its_place_is_not() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s.sock");
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let path = std::fs::canonicalize(&path).unwrap();
        assert!(bound().contains(&path));
        assert!(is_bound(&path));
        drop(l);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "").unwrap();
        assert!(!is_bound(&path));
    }
}
