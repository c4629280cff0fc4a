//! The pathname Unix sockets programs on this machine have bound, from the kernel's
//! socket table of the launcher's network namespace: the sockets a read-only mount
//! does not protect, found without walking a directory.
//!
//! The table is asked for over `NETLINK_SOCK_DIAG` (`UNIX_DIAG`, with each socket's
//! name attribute): a name comes as its bytes and their count, so a path holding a
//! newline or any other byte is taken whole. `/proc/net/unix` prints the path raw to
//! the end of its line, so a newline in a path cuts it short there; it is read only
//! where the kernel has no `UNIX_DIAG` (`CONFIG_UNIX_DIAG` off), and then a line
//! that is no entry (the rest of a path that held a newline) is an error, not a
//! socket left out.
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// `SOCK_DIAG_BY_FAMILY`: the request and answer type of socket diagnostics.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
/// `UDIAG_SHOW_NAME`: each answer carries the socket's name.
const UDIAG_SHOW_NAME: u32 = 0x1;
/// The name attribute of an answer.
const UNIX_DIAG_NAME: u16 = 0;
/// `struct nlmsghdr`, `struct unix_diag_msg`.
const NLMSG_HDR: usize = 16;
const UNIX_DIAG_MSG: usize = 16;

/// The dump request: every Unix socket of the namespace, in every state, with its
/// name (`struct unix_diag_req` after the netlink header).
pub fn diag_request(seq: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(NLMSG_HDR + 24);
    m.extend_from_slice(&((NLMSG_HDR + 24) as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel fills it in
    m.push(libc::AF_UNIX as u8); // sdiag_family
    m.push(0); // sdiag_protocol
    m.extend_from_slice(&0u16.to_ne_bytes()); // pad
    m.extend_from_slice(&u32::MAX.to_ne_bytes()); // udiag_states: all
    m.extend_from_slice(&0u32.to_ne_bytes()); // udiag_ino: any
    m.extend_from_slice(&UDIAG_SHOW_NAME.to_ne_bytes());
    m.extend_from_slice(&[0xff; 8]); // udiag_cookie: none (INET_DIAG_NOCOOKIE)
    m
}

/// What one read of the dump's answer holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DiagChunk {
    /// Absolute paths the sockets in it are bound at (abstract and unnamed
    /// sockets, and relative paths, are left out).
    pub paths: Vec<PathBuf>,
    /// The dump ended here (`NLMSG_DONE`).
    pub done: bool,
}

/// Why an answer gives no table.
#[derive(Debug, PartialEq, Eq)]
pub enum DiagError {
    /// The kernel's error number (`ENOENT`: no `UNIX_DIAG` in this kernel).
    Kernel(i32),
    /// A length that does not add up.
    Malformed(String),
}

impl std::fmt::Display for DiagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiagError::Kernel(e) => write!(f, "{}", std::io::Error::from_raw_os_error(*e)),
            DiagError::Malformed(m) => f.write_str(m),
        }
    }
}

/// Parse one read of the answer to [`diag_request`]: a run of netlink messages.
/// Any malformed length, or an error the kernel reports, is an error: a table
/// read in part would leave sockets unmasked.
pub fn parse_diag(buf: &[u8]) -> Result<DiagChunk, DiagError> {
    let bad = DiagError::Malformed;
    let mut out = DiagChunk::default();
    let mut rest = buf;
    while !rest.is_empty() {
        if rest.len() < NLMSG_HDR {
            return Err(bad(format!(
                "a netlink header cut short ({} bytes)",
                rest.len()
            )));
        }
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        if len < NLMSG_HDR || len > rest.len() {
            return Err(bad(format!(
                "a netlink message of {len} bytes where {} are left",
                rest.len()
            )));
        }
        let body = &rest[NLMSG_HDR..len];
        match kind {
            NLMSG_DONE => {
                out.done = true;
                return Ok(out);
            }
            NLMSG_ERROR => {
                let code = body
                    .get(..4)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .ok_or_else(|| bad("an error message cut short".into()))?;
                // An acknowledgement (0) ends nothing a dump waits for: an error.
                return Err(DiagError::Kernel(code.saturating_neg()));
            }
            SOCK_DIAG_BY_FAMILY => {
                if body.len() < UNIX_DIAG_MSG {
                    return Err(bad("a socket's answer cut short".into()));
                }
                if let Some(p) = name_attr(&body[UNIX_DIAG_MSG..])? {
                    out.paths.push(p);
                }
            }
            _ => {}
        }
        // Messages are aligned to 4 bytes; the last may end unpadded.
        rest = &rest[len.next_multiple_of(4).min(rest.len())..];
    }
    Ok(out)
}

/// The absolute path in the attributes of one answer, if it has one.
fn name_attr(mut attrs: &[u8]) -> Result<Option<PathBuf>, DiagError> {
    let mut found = None;
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]);
        if len < 4 || len > attrs.len() {
            return Err(DiagError::Malformed(format!(
                "an attribute of {len} bytes where {} are left",
                attrs.len()
            )));
        }
        if kind == UNIX_DIAG_NAME {
            // `sun_path` as bound: a pathname up to its terminating NUL (which a
            // pathname cannot hold otherwise); an abstract name starts with NUL.
            let name = &attrs[4..len];
            let name = name.split(|&b| b == 0).next().unwrap_or_default();
            if name.first() == Some(&b'/') {
                found = Some(PathBuf::from(OsStr::from_bytes(name)));
            }
        }
        attrs = &attrs[len.next_multiple_of(4).min(attrs.len())..];
    }
    Ok(found)
}

/// The bound paths, sorted, each once.
fn tidy(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    paths
}

/// Absolute paths bound in `table` (the text of `/proc/net/unix`), each once, in
/// order. Abstract names (`@…`) and relative paths (bound against a working
/// directory the table does not show) are left out. A line that is no entry (the
/// rest of a path that held a newline, printed raw) is an error: that path is not
/// in the table whole.
pub fn parse(table: &[u8]) -> Result<Vec<PathBuf>, String> {
    let mut out = vec![];
    for (i, line) in table.split(|&b| b == b'\n').enumerate().skip(1) {
        if line.is_empty() {
            continue;
        }
        // `Num: RefCount Protocol Flags Type St Inode Path`: the inode is padded
        // with spaces, and the path runs to the end of the line (spaces and all).
        let mut rest = trim_spaces(line);
        let mut fields = 0;
        while fields < 7 {
            let Some(end) = rest.iter().position(|&b| b == b' ') else {
                break;
            };
            if fields == 0 && !rest[..end].ends_with(b":") {
                break;
            }
            rest = trim_spaces(&rest[end..]);
            fields += 1;
        }
        // An unnamed socket's line ends after its inode.
        if fields < 6 || (fields == 6 && !rest.iter().all(u8::is_ascii_digit)) {
            return Err(format!(
                "/proc/net/unix line {}: not a socket entry (a socket path that held a newline)",
                i + 1
            ));
        }
        if fields == 7 && rest.first() == Some(&b'/') {
            out.push(PathBuf::from(OsStr::from_bytes(rest)));
        }
    }
    Ok(tidy(out))
}

fn trim_spaces(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&c| c != b' ').unwrap_or(b.len());
    &b[start..]
}

/// Every path the kernel's socket table of this network namespace names: from
/// `UNIX_DIAG`, else (no such module in this kernel) `/proc/net/unix`.
pub fn table() -> Result<Vec<PathBuf>, String> {
    match diag() {
        Ok(paths) => Ok(tidy(paths)),
        // No UNIX_DIAG handler (CONFIG_UNIX_DIAG off, or the module missing).
        Err(DiagError::Kernel(libc::ENOENT)) => {
            let text = std::fs::read("/proc/net/unix")
                .map_err(|e| format!("reading /proc/net/unix: {e}"))?;
            parse(&text).map_err(|e| {
                format!("{e}; this kernel has no sock_diag for Unix sockets (load the unix_diag module: modprobe unix_diag), and /proc/net/unix cannot name that socket whole")
            })
        }
        Err(e) => Err(format!("reading the host's socket table (sock_diag): {e}")),
    }
}

/// The paths of the `UNIX_DIAG` dump.
fn diag() -> Result<Vec<PathBuf>, DiagError> {
    let io = |e: std::io::Error| DiagError::Kernel(e.raw_os_error().unwrap_or(libc::EIO));
    let fd = super::sys::netlink_sock_diag().map_err(io)?;
    use std::os::fd::AsFd;
    super::sys::send(fd.as_fd(), &diag_request(1)).map_err(io)?;
    // Large enough for the kernel's largest dump message batch (it fills up to
    // the reader's buffer, 32 KiB at most).
    let mut buf = vec![0u8; 64 * 1024];
    let mut paths = vec![];
    loop {
        let n = super::sys::recv(fd.as_fd(), &mut buf).map_err(io)?;
        if n == 0 {
            return Err(DiagError::Malformed(
                "the dump ended without its end".into(),
            ));
        }
        let chunk = parse_diag(&buf[..n])?;
        paths.extend(chunk.paths);
        if chunk.done {
            return Ok(paths);
        }
    }
}

/// The sockets bound on this machine that are still sockets at the path they were
/// bound at (a socket file removed and replaced by a regular file is no socket).
/// A table that cannot be read whole is an error: a socket it left out would not
/// be masked.
pub fn bound() -> Result<Vec<PathBuf>, String> {
    Ok(table()?.into_iter().filter(|p| is_socket(p)).collect())
}

/// Whether `path` is a socket bound by a program on this machine now (a table that
/// cannot be read counts every socket as one: a run would refuse to start).
pub fn is_bound(path: &Path) -> bool {
    is_socket(path)
        && match bound() {
            Ok(b) => b.iter().any(|b| b == path),
            Err(_) => true,
        }
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
            parse(table.as_bytes()).unwrap(),
            [
                PathBuf::from("/home/u/my dir/a b.sock"),
                PathBuf::from("/run/user/1000/bus"),
            ]
        );
        assert!(parse(b"").unwrap().is_empty());
    }

    #[test]
    fn a_path_cut_by_a_newline_in_proc_net_unix_is_an_error() {
        for rest in ["b.sock", "x y z", "00: 1 2"] {
            let table = format!(
                "Num       RefCount Protocol Flags    Type St Inode Path\n\
                 0000000000000000: 00000002 00000000 00010000 0001 01   123 /tmp/a\n{rest}\n"
            );
            let e = parse(table.as_bytes()).unwrap_err();
            assert!(
                e.contains("line 3") && e.contains("newline"),
                "{rest:?}: {e}"
            );
        }
    }

    /// One `SOCK_DIAG_BY_FAMILY` answer for a socket with `name` (raw `sun_path`
    /// bytes as the kernel gives them), padded as the kernel pads.
    fn answer(name: Option<&[u8]>) -> Vec<u8> {
        let mut body = vec![libc::AF_UNIX as u8, 1, 10, 0];
        body.extend_from_slice(&7u32.to_ne_bytes());
        body.extend_from_slice(&[0; 8]);
        if let Some(n) = name {
            body.extend_from_slice(&((4 + n.len()) as u16).to_ne_bytes());
            body.extend_from_slice(&UNIX_DIAG_NAME.to_ne_bytes());
            body.extend_from_slice(n);
            body.resize(body.len().next_multiple_of(4), 0);
        }
        // Another attribute after it (UNIX_DIAG_VFS) is skipped.
        body.extend_from_slice(&12u16.to_ne_bytes());
        body.extend_from_slice(&1u16.to_ne_bytes());
        body.extend_from_slice(&[1; 8]);
        message(SOCK_DIAG_BY_FAMILY, &body)
    }

    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut m = ((NLMSG_HDR + body.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        m.resize(m.len().next_multiple_of(4), 0);
        m
    }

    #[test]
    fn sock_diag_names_are_taken_whole_whatever_bytes_they_hold() {
        let odd: &[u8] = b"/tmp/d/a\nb \t\x1b[0m\xff\xfe.sock\0";
        let mut buf = answer(Some(b"/run/user/1000/bus\0"));
        buf.extend(answer(Some(odd)));
        buf.extend(answer(Some(b"\0abstract\nname")));
        buf.extend(answer(Some(b"relative.sock\0")));
        buf.extend(answer(None));
        let c = parse_diag(&buf).unwrap();
        assert!(!c.done);
        assert_eq!(
            c.paths,
            [
                PathBuf::from("/run/user/1000/bus"),
                PathBuf::from(OsStr::from_bytes(&odd[..odd.len() - 1])),
            ]
        );
        let mut buf = answer(Some(b"/a"));
        buf.extend(message(NLMSG_DONE, &0i32.to_ne_bytes()));
        buf.extend(answer(Some(b"/after-the-end")));
        let c = parse_diag(&buf).unwrap();
        assert!(c.done);
        assert_eq!(c.paths, [PathBuf::from("/a")]);
    }

    #[test]
    fn a_sock_diag_answer_that_does_not_add_up_is_an_error() {
        let e = parse_diag(&message(NLMSG_ERROR, &(-libc::ENOENT).to_ne_bytes())).unwrap_err();
        assert_eq!(e, DiagError::Kernel(libc::ENOENT));
        let whole = answer(Some(b"/tmp/s"));
        for cut in [1, 15, 17, 20, whole.len() - 4] {
            assert!(
                matches!(parse_diag(&whole[..cut]), Err(DiagError::Malformed(_))),
                "cut at {cut}"
            );
        }
        // An attribute longer than its message.
        let mut bad = whole.clone();
        bad[NLMSG_HDR + UNIX_DIAG_MSG] = 200;
        assert!(matches!(parse_diag(&bad), Err(DiagError::Malformed(_))));
        // A message shorter than its header.
        let mut bad = whole;
        bad[0] = 4;
        bad[1..4].fill(0);
        assert!(matches!(parse_diag(&bad), Err(DiagError::Malformed(_))));
        assert_eq!(diag_request(1).len(), NLMSG_HDR + 24);
    }

    #[test]
    fn the_kernels_table_names_a_socket_whose_path_holds_a_newline() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("a\nb \u{1b}.sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let path = std::fs::canonicalize(&path).unwrap();
        assert!(bound().unwrap().contains(&path));
        assert!(is_bound(&path));
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
        assert!(bound().unwrap().contains(&path));
        assert!(is_bound(&path));
        drop(l);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "").unwrap();
        assert!(!is_bound(&path));
    }
}
