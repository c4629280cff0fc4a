//! Paths as the kernel will see them, built in fixed stack buffers (no allocation):
//! relative to the cwd or a directory fd, `.`/`..`/`//` folded, symlinks resolved.
use libc::c_int;
use std::mem::MaybeUninit;

pub const MAX: usize = libc::PATH_MAX as usize;
/// Symlinks followed before giving up, as the kernel does.
const MAX_HOPS: u32 = 40;

/// A NUL-terminated path in a stack buffer. The buffer is left uninitialised past
/// the NUL (a 4 KiB memset per call would dominate the cost of a hooked `open`).
pub struct PBuf {
    buf: [MaybeUninit<u8>; MAX + 1],
    len: usize,
}

impl Default for PBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl PBuf {
    #[inline(always)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> PBuf {
        // SAFETY: an array of MaybeUninit needs no initialisation.
        let buf = unsafe { MaybeUninit::<[MaybeUninit<u8>; MAX + 1]>::uninit().assume_init() };
        let mut b = PBuf { buf, len: 0 };
        b.buf[0] = MaybeUninit::new(0);
        b
    }
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes are always initialised.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast(), self.len) }
    }
    /// NUL-terminated.
    #[inline]
    pub fn as_ptr(&self) -> *const libc::c_char {
        self.buf.as_ptr().cast()
    }
    fn raw(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr().cast()
    }
    /// Empty.
    #[inline]
    pub fn clear(&mut self) {
        self.assume(0);
    }
    /// The kernel's answer to `getcwd`; `ENOENT` for a cwd outside this mount
    /// namespace, which has no path here (it reads `(unreachable)/…`).
    pub fn getcwd(&mut self) -> Result<(), c_int> {
        // SAFETY: the buffer is MAX+1 bytes and getcwd writes at most `size` bytes,
        // NUL included.
        let p = unsafe { libc::getcwd(self.raw().cast(), MAX + 1) };
        if p.is_null() {
            return Err(crate::sys::errno());
        }
        // SAFETY: getcwd wrote a NUL-terminated string.
        let n = unsafe { libc::strlen(p) };
        self.assume(n);
        if self.as_bytes().first() != Some(&b'/') {
            return Err(libc::ENOENT);
        }
        Ok(())
    }
    /// Take `n` bytes written into the buffer by C code as the content.
    fn assume(&mut self, n: usize) {
        self.len = n.min(MAX);
        self.buf[self.len] = MaybeUninit::new(0);
    }
    #[inline]
    pub fn set(&mut self, s: &[u8]) -> Result<(), c_int> {
        self.len = 0;
        self.append(s)
    }
    /// Append raw bytes.
    #[inline]
    pub fn append(&mut self, s: &[u8]) -> Result<(), c_int> {
        if self.len + s.len() > MAX {
            return Err(libc::ENAMETOOLONG);
        }
        // SAFETY: bounds checked above; `s` cannot overlap our own buffer mutably.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.raw().add(self.len), s.len()) };
        self.len += s.len();
        self.buf[self.len] = MaybeUninit::new(0);
        Ok(())
    }
    /// Append `/comp`.
    #[inline]
    pub fn push(&mut self, comp: &[u8]) -> Result<(), c_int> {
        if !(self.len == 1 && self.as_bytes()[0] == b'/') {
            self.append(b"/")?;
        }
        self.append(comp)
    }
    /// Drop the last component (`/` stays `/`).
    pub fn pop(&mut self) {
        let b = self.as_bytes();
        let mut n = b.len();
        while n > 1 && b[n - 1] != b'/' {
            n -= 1;
        }
        if n > 1 {
            n -= 1;
        }
        self.len = n;
        self.buf[n] = MaybeUninit::new(0);
    }
}

/// One pass over an absolute path: `(clean, has_dotdot)`. Clean means no empty or
/// `.` components and no trailing `/` (`/` itself is clean) — the spelling
/// [`join`] would produce.
pub fn scan(p: &[u8]) -> (bool, bool) {
    let n = p.len();
    let mut clean = !(n > 1 && p[n - 1] == b'/');
    let mut dotdot = false;
    for i in 0..n {
        if p[i] != b'/' {
            continue;
        }
        let at = |k: usize| p.get(i + k).copied();
        match at(1) {
            Some(b'/') => clean = false,
            Some(b'.') => match at(2) {
                None | Some(b'/') => clean = false,
                Some(b'.') if matches!(at(3), None | Some(b'/')) => dotdot = true,
                _ => {}
            },
            _ => {}
        }
    }
    (clean, dotdot)
}

fn is_clean(path: &[u8]) -> bool {
    scan(path).0
}

/// True if `path` has a `..` component.
pub fn has_dotdot(path: &[u8]) -> bool {
    path.split(|&b| b == b'/').any(|c| c == b"..")
}

/// The absolute directory `dirfd` names (`AT_FDCWD`: the cwd).
pub fn base_dir(dirfd: c_int, out: &mut PBuf) -> Result<(), c_int> {
    if dirfd == libc::AT_FDCWD {
        #[cfg(target_os = "linux")]
        return crate::cwd::get(out);
        #[cfg(not(target_os = "linux"))]
        return out.getcwd();
    }
    let n = fd_path(dirfd, out)?;
    if n.first() != Some(&b'/') {
        return Err(libc::ENOTDIR);
    }
    Ok(())
}

/// The path behind `fd` (Linux: its `/proc/self/fd/N` link read).
#[cfg(not(target_os = "macos"))]
fn fd_path(fd: c_int, out: &mut PBuf) -> Result<&[u8], c_int> {
    let mut link = PBuf::new();
    fd_link(fd, &mut link)?;
    readlink(&link, out)
}

/// The path behind `fd` (macOS: `fcntl(F_GETPATH)`).
#[cfg(target_os = "macos")]
fn fd_path(fd: c_int, out: &mut PBuf) -> Result<&[u8], c_int> {
    // SAFETY: `out` has MAX+1 bytes of room.
    let n = unsafe { crate::sys::fd_path(fd, out.raw().cast(), MAX + 1) }?;
    out.assume(n);
    Ok(out.as_bytes())
}

/// `/proc/self/fd/N` for `fd`, without allocating.
pub fn fd_link(fd: c_int, out: &mut PBuf) -> Result<(), c_int> {
    if fd < 0 {
        return Err(libc::EBADF);
    }
    let mut digits = [0u8; 12];
    let mut i = digits.len();
    let mut v = fd as u32;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.set(b"/proc/self/fd")?;
    out.push(&digits[i..])
}

/// readlink `link` into `out`, returning the target bytes.
fn readlink<'a>(link: &PBuf, out: &'a mut PBuf) -> Result<&'a [u8], c_int> {
    // SAFETY: `link` is NUL-terminated; `out` has MAX bytes of room.
    let n = unsafe { libc::readlink(link.as_ptr(), out.raw().cast(), MAX) };
    if n < 0 {
        return Err(crate::sys::errno());
    }
    let n = n as usize;
    if n >= MAX {
        return Err(libc::ENAMETOOLONG);
    }
    out.assume(n);
    Ok(out.as_bytes())
}

/// Fold `path` lexically onto `base` (absolute) into `out`.
pub fn lexical(base: &[u8], path: &[u8], out: &mut PBuf) -> Result<(), c_int> {
    if path.first() == Some(&b'/') {
        out.set(b"/")?;
    } else {
        out.set(b"/")?;
        fold(base, out)?;
    }
    fold(path, out)
}

/// Join `path` onto `base` (absolute) into `out`, dropping empty and `.`
/// components but keeping `..`: what `..` means depends on symlinks before it, so
/// only [`resolve`] may apply it.
pub fn join(base: &[u8], path: &[u8], out: &mut PBuf) -> Result<(), c_int> {
    if path.first() == Some(&b'/') && is_clean(path) {
        // Already in canonical spelling (the common case): one copy.
        return out.set(path);
    }
    out.set(b"/")?;
    if path.first() != Some(&b'/') {
        for comp in base
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
        {
            out.push(comp)?;
        }
    }
    for comp in path
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
    {
        out.push(comp)?;
    }
    // A trailing `/` (or `/.`) means "must be a directory": keep it for the kernel.
    let dir_suffix = path.ends_with(b"/") || path.ends_with(b"/.") || path == b".";
    if dir_suffix && out.as_bytes() != b"/" {
        out.append(b"/")?;
    }
    Ok(())
}

fn fold(path: &[u8], out: &mut PBuf) -> Result<(), c_int> {
    for comp in path.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => out.pop(),
            c => out.push(c)?,
        }
    }
    Ok(())
}

/// What a resolved path turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Does not exist (the tail was folded lexically).
    Missing,
    Dir,
    File,
    /// Character device, FIFO or socket: writing to it changes no file.
    Special,
    /// A `/proc` magic link to something that is not a path (pipe, socket,
    /// anonymous inode): there is no file to judge.
    NotAPath,
    /// The final component was not followed (`O_NOFOLLOW`, `unlink`, …).
    Unfollowed,
}

/// Resolve `abs` like the kernel's path walk into `out`. Existing components are
/// resolved physically (symlinks and `/proc` magic links read with readlink); once a
/// component is missing the rest is folded lexically. With `follow_final` false the
/// last component is not followed (a trailing `/` still forces it).
pub fn resolve(abs: &[u8], follow_final: bool, out: &mut PBuf) -> Result<Kind, c_int> {
    let mut pend = PBuf::new();
    let mut next = PBuf::new();
    let mut target = PBuf::new();
    pend.set(abs)?;
    out.set(b"/")?;
    let mut pos = 0usize;
    let mut hops = 0u32;
    let mut missing = false;
    let mut kind = Kind::Dir;
    loop {
        let p = pend.as_bytes();
        while pos < p.len() && p[pos] == b'/' {
            pos += 1;
        }
        if pos >= p.len() {
            break;
        }
        let end = p[pos..]
            .iter()
            .position(|&b| b == b'/')
            .map_or(p.len(), |e| pos + e);
        let trailing_slash = end < p.len();
        let is_last = p[end..].iter().all(|&b| b == b'/');
        let comp_start = pos;
        pos = end;
        let comp = &pend.as_bytes()[comp_start..end];
        if comp == b"." {
            continue;
        }
        if comp == b".." {
            out.pop();
            kind = Kind::Dir;
            continue;
        }
        out.push(comp)?;
        if missing {
            kind = Kind::Missing;
            continue;
        }
        if is_last && !follow_final && !trailing_slash {
            kind = Kind::Unfollowed;
            break;
        }
        // SAFETY: zeroed stat is a valid out-parameter; `out` is NUL-terminated.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::lstat(out.as_ptr(), &mut st) } != 0 {
            missing = true;
            kind = Kind::Missing;
            continue;
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => {
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(libc::ELOOP);
                }
                let t = readlink(out, &mut target)?;
                let in_proc = out.as_bytes().starts_with(b"/proc/");
                if t.first() != Some(&b'/') && in_proc && t.contains(&b':') {
                    if is_last {
                        kind = Kind::NotAPath;
                        break;
                    }
                    return Err(libc::ENOTDIR);
                }
                out.pop();
                if t.first() == Some(&b'/') {
                    out.set(b"/")?;
                }
                let rest = &pend.as_bytes()[pos..];
                next.set(t)?;
                next.append(b"/")?;
                next.append(rest)?;
                std::mem::swap(&mut pend, &mut next);
                pos = 0;
            }
            libc::S_IFDIR => kind = Kind::Dir,
            libc::S_IFREG => kind = Kind::File,
            _ => kind = Kind::Special,
        }
    }
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn lex(base: &str, p: &str) -> String {
        let mut o = PBuf::new();
        lexical(base.as_bytes(), p.as_bytes(), &mut o).unwrap();
        String::from_utf8(o.as_bytes().to_vec()).unwrap()
    }

    fn res(p: &std::path::Path, follow: bool) -> (String, Kind) {
        use std::os::unix::ffi::OsStrExt;
        let mut o = PBuf::new();
        let k = resolve(p.as_os_str().as_bytes(), follow, &mut o).unwrap();
        (String::from_utf8(o.as_bytes().to_vec()).unwrap(), k)
    }

    #[test]
    fn lexical_folding() {
        assert_eq!(lex("/a/b", "c"), "/a/b/c");
        assert_eq!(lex("/a/b", "../c"), "/a/c");
        assert_eq!(lex("/a/b", "//x/./y//z/"), "/x/y/z");
        assert_eq!(lex("/", "../../.."), "/");
        let mut o = PBuf::new();
        join(b"/a/b", b"./../c//./d/", &mut o).unwrap();
        assert_eq!(o.as_bytes(), b"/a/b/../c/d/");
        for (p, want) in [
            ("/x/y", "/x/y"),
            ("/x//y", "/x/y"),
            ("/x/./y", "/x/y"),
            ("/x/.", "/x/"),
            ("/x/", "/x/"),
            ("/x/..", "/x/.."),
            ("/.hidden/.x", "/.hidden/.x"),
            ("/", "/"),
            ("//", "/"),
        ] {
            join(b"/base", p.as_bytes(), &mut o).unwrap();
            assert_eq!(o.as_bytes(), want.as_bytes(), "{p}");
        }
        assert!(has_dotdot(b"a/../b"));
        assert_eq!(scan(b"/a/b"), (true, false));
        assert_eq!(scan(b"/a/../b"), (true, true));
        assert_eq!(scan(b"/a/.."), (true, true));
        assert_eq!(scan(b"/a/..b/.c"), (true, false));
        assert_eq!(scan(b"/a//b"), (false, false));
        assert_eq!(scan(b"/a/./b"), (false, false));
        assert_eq!(scan(b"/a/"), (false, false));
        assert_eq!(scan(b"/"), (true, false));
        assert!(!has_dotdot(b"a/..b"));
    }

    #[test]
    fn resolves_symlinks_and_dotdot_physically() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("secret/deep")).unwrap();
        std::fs::write(root.join("secret/key"), "k").unwrap();
        std::fs::create_dir(root.join("ws")).unwrap();
        symlink(root.join("secret/deep"), root.join("ws/link")).unwrap();
        symlink("../secret/key", root.join("ws/rel")).unwrap();
        symlink("loop", root.join("ws/loop")).unwrap();
        let r = root.display().to_string();
        assert_eq!(
            res(&root.join("ws/link/../key"), true),
            (format!("{r}/secret/key"), Kind::File)
        );
        assert_eq!(
            res(&root.join("ws/rel"), true),
            (format!("{r}/secret/key"), Kind::File)
        );
        assert_eq!(
            res(&root.join("ws/rel"), false),
            (format!("{r}/ws/rel"), Kind::Unfollowed)
        );
        assert_eq!(
            res(&root.join("ws/link/new/x"), true),
            (format!("{r}/secret/deep/new/x"), Kind::Missing)
        );
        let mut o = PBuf::new();
        assert_eq!(
            resolve(
                root.join("ws/loop").to_str().unwrap().as_bytes(),
                true,
                &mut o
            ),
            Err(libc::ELOOP)
        );
        // /proc/self/root is a magic link to "/".
        let via_proc = std::path::PathBuf::from(format!("/proc/self/root{r}/ws/rel"));
        assert_eq!(res(&via_proc, true).0, format!("{r}/secret/key"));
    }
}
