//! `#!` lines, the way the kernel reads them.

/// The kernels read at most this many bytes of a script's first line (Linux 256,
/// macOS 512); a longer line is cut.
const MAX_LINE: usize = 512;

/// A parsed `#!interpreter [argument]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shebang {
    pub interpreter: String,
    /// The rest of the line after the interpreter, trimmed (Linux passes it as one
    /// argument; macOS splits it on blanks).
    pub argument: Option<String>,
}

impl Shebang {
    /// For `#!/usr/bin/env [-S] X args…`: X and its arguments. Options of env other
    /// than `-S` (`-i`, `-u NAME`) make the line something else and yield `None`.
    pub fn env_target(&self) -> Option<(String, Vec<String>)> {
        let name = self.interpreter.rsplit('/').next()?;
        if name != "env" {
            return None;
        }
        let arg = self.argument.as_deref()?;
        let mut words: Vec<&str> = arg.split_ascii_whitespace().collect();
        if words.first() == Some(&"-S") {
            words.remove(0);
        } else if let Some(rest) = words.first().and_then(|w| w.strip_prefix("-S")) {
            if rest.is_empty() {
                return None;
            }
            words[0] = rest;
        }
        let first = *words.first()?;
        if first.starts_with('-') || first.contains('=') {
            return None;
        }
        Some((
            first.to_string(),
            words[1..].iter().map(|s| s.to_string()).collect(),
        ))
    }
}

/// Parse the first line of `bytes` when it starts with `#!`.
pub fn parse_shebang(bytes: &[u8]) -> Option<Shebang> {
    let rest = bytes.strip_prefix(b"#!")?;
    let rest = &rest[..rest.len().min(MAX_LINE)];
    let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
    let line = std::str::from_utf8(&rest[..end]).ok()?;
    let line = line.trim_matches(|c: char| c == ' ' || c == '\t' || c == '\r');
    let (interp, arg) = match line.find([' ', '\t']) {
        Some(i) => (&line[..i], Some(line[i..].trim_matches([' ', '\t']))),
        None => (line, None),
    };
    if interp.is_empty() {
        return None;
    }
    Some(Shebang {
        interpreter: interp.to_string(),
        argument: arg.filter(|a| !a.is_empty()).map(String::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_with_argument() {
        let s = parse_shebang(b"#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(s.interpreter, "/bin/sh");
        assert_eq!(s.argument, None);
        let s = parse_shebang(b"#! /usr/bin/python3 -u  \r\n").unwrap();
        assert_eq!(s.interpreter, "/usr/bin/python3");
        assert_eq!(s.argument.as_deref(), Some("-u"));
        assert_eq!(s.env_target(), None);
        assert!(parse_shebang(b"\x7fELF").is_none());
        assert!(parse_shebang(b"#!\n").is_none());
    }

    #[test]
    fn env_forms() {
        let t = |l: &[u8]| parse_shebang(l).unwrap().env_target();
        assert_eq!(t(b"#!/usr/bin/env node\n"), Some(("node".into(), vec![])));
        assert_eq!(
            t(b"#!/usr/bin/env -S python3 -u\n"),
            Some(("python3".into(), vec!["-u".into()]))
        );
        assert_eq!(
            t(b"#!/usr/bin/env -Sbash -e\n"),
            Some(("bash".into(), vec!["-e".into()]))
        );
        assert_eq!(t(b"#!/usr/bin/env -i python3\n"), None);
        assert_eq!(t(b"#!/usr/bin/env FOO=1 python3\n"), None);
        assert_eq!(t(b"#!/usr/bin/env\n"), None);
        assert_eq!(t(b"#!/bin/envy x\n"), None);
    }
}
