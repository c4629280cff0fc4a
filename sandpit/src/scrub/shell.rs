//! Shell startup files without the assignments and exports of withheld variables
//! (pure; docs/run.md "Shell startup files"). The text is read as the shell would
//! split it into simple commands — quotes, `$(…)`, backquotes, `${…}`, arrays,
//! here-documents and comments taken whole — and only the words that assign or
//! export a variable the caller names are touched: removed, or given another value
//! (a credential's sentinel). Everything else is left byte for byte. A command left
//! with nothing to do becomes `:` (fish: `true`), so the syntax around it holds.
//!
//! What is caught: `NAME=…` (alone, before a command, or in a file sourced under
//! `set -a`), `export`, `declare`/`typeset`/`readonly`/`local` with `-x` or
//! without, zsh's `NAME=(…)`, fish's `set [-gxU…] NAME …` and `export NAME=…`, and
//! fish's universal variables file (`SETUVAR [--export] NAME:value`). What a line
//! builds at run time (`eval "$(tool init)"`, `read NAME < file`, `printf -v`) is not
//! text to read here.

/// What becomes of one variable's assignments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    Keep,
    /// Every assignment and export of it removed.
    Remove,
    /// Its assignments get this value instead (a sentinel: `[A-Za-z0-9_.-]` only).
    Value(String),
}

/// Which shell reads the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Dialect {
    /// sh, bash, zsh, ksh.
    Posix,
    Fish,
    /// fish's universal variables (`~/.config/fish/fish_variables`).
    FishVariables,
}

/// A scrubbed file: its text, and the paths its `.`/`source` lines name as written
/// (quotes removed; `~` and `$HOME` not expanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scrubbed {
    pub text: String,
    pub changed: bool,
    pub sourced: Vec<String>,
}

/// `text` as `dialect` reads it, with each variable's assignments as `fate` says.
pub fn scrub(text: &str, dialect: Dialect, fate: &dyn Fn(&str) -> Fate) -> Scrubbed {
    let mut edits = vec![];
    let mut sourced = vec![];
    match dialect {
        Dialect::FishVariables => fish_variables(text, fate, &mut edits),
        Dialect::Posix | Dialect::Fish => {
            let fish = dialect == Dialect::Fish;
            for cmd in commands(text.as_bytes(), fish) {
                command(text, &cmd, fish, fate, &mut edits, &mut sourced);
            }
        }
    }
    let changed = !edits.is_empty();
    Scrubbed {
        text: apply(text, edits),
        changed,
        sourced,
    }
}

/// Whether `s` is a shell variable name.
pub fn is_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// One word of a command: its span and its text with quotes and escapes removed
/// (substitutions kept as written).
#[derive(Debug, Clone)]
struct Word {
    start: usize,
    end: usize,
    lit: String,
    /// The word began with a quote or escape (`"A=b"`): not an assignment in
    /// command position.
    quoted_start: bool,
}

type Edit = (usize, usize, String);

fn apply(text: &str, mut edits: Vec<Edit>) -> String {
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (s, e, r) in edits {
        if s < last {
            continue; // overlapping: the first wins (never produced)
        }
        out.push_str(&text[last..s]);
        out.push_str(&r);
        last = e;
    }
    out.push_str(&text[last..]);
    out
}

/// Words that begin a compound command or join two: skipped at a command's start.
const POSIX_LEAD: &[&str] = &[
    "then",
    "do",
    "else",
    "elif",
    "if",
    "while",
    "until",
    "!",
    "{",
    "time",
    "coproc",
    // Precommand modifiers: `builtin export X=…` exports as `export X=…` does.
    "builtin",
    "command",
    "noglob",
    "nocorrect",
];
const FISH_LEAD: &[&str] = &[
    "begin", "if", "else", "while", "not", "and", "or", "!", "command", "builtin",
];

/// The `NAME` of `NAME=…`/`NAME+=…`, and where its value starts in `s`.
fn assignment(s: &str) -> Option<(&str, usize)> {
    let eq = s.find('=')?;
    let name = s[..eq].strip_suffix('+').unwrap_or(&s[..eq]);
    // `NAME[i]=` sets one element of an array.
    let base = name.split_once('[').map_or(name, |(b, _)| b);
    is_name(base).then_some((base, eq + 1))
}

fn command(
    text: &str,
    words: &[Word],
    fish: bool,
    fate: &dyn Fn(&str) -> Fate,
    edits: &mut Vec<Edit>,
    sourced: &mut Vec<String>,
) {
    let lead = if fish { FISH_LEAD } else { POSIX_LEAD };
    let mut k = 0;
    while k < words.len() && lead.contains(&words[k].lit.as_str()) && !words[k].quoted_start {
        k += 1;
    }
    let words = &words[k..];
    if words.is_empty() {
        return;
    }
    let nothing = if fish { "true" } else { ":" };
    let mut mine: Vec<Edit> = vec![];
    // Prefix assignments (POSIX): `A=1 B=2 cmd` or `A=1` alone.
    let mut k = 0;
    let mut kept = 0;
    let mut removed = None;
    if !fish {
        while k < words.len() && !words[k].quoted_start {
            let raw = &text[words[k].start..words[k].end];
            let Some((name, _)) = assignment(raw) else {
                break;
            };
            match fate(name) {
                Fate::Keep => kept += 1,
                Fate::Remove => {
                    removed = Some(mine.len());
                    mine.push((words[k].start, words[k].end, String::new()));
                }
                Fate::Value(v) => {
                    kept += 1;
                    mine.push((words[k].start, words[k].end, format!("{name}={v}")));
                }
            }
            k += 1;
        }
    }
    let rest = &words[k..];
    // After an assignment a reserved word is a command's name (`A= ! B=x` runs `!`
    // with the argument `B=x`); with the assignment gone it would be reserved again
    // (`! B=x` assigns B). A neutral assignment keeps the command as it was.
    if let (0, Some(i), Some(first)) = (kept, removed, rest.first()) {
        if lead.contains(&first.lit.as_str()) && !first.quoted_start {
            mine[i].2 = "SANDPIT_SCRUBBED=".into();
        }
    }
    let mut meaningful = kept > 0;
    if let Some(first) = rest.first() {
        let args = &rest[1..];
        match first.lit.as_str() {
            "export" | "declare" | "typeset" | "readonly" | "local" => {
                let mut any = false;
                for w in args {
                    if w.lit.starts_with('-') || w.lit.starts_with('+') {
                        continue;
                    }
                    let (name, has_value) = match assignment(&w.lit) {
                        Some((n, _)) => (n, true),
                        None if is_name(&w.lit) => (w.lit.as_str(), false),
                        None => {
                            any = true;
                            continue;
                        }
                    };
                    match fate(name) {
                        Fate::Keep => any = true,
                        Fate::Remove => mine.push((w.start, w.end, String::new())),
                        Fate::Value(v) => {
                            any = true;
                            if has_value {
                                mine.push((w.start, w.end, format!("{name}={v}")));
                            }
                        }
                    }
                }
                // `export` alone would print every exported variable.
                meaningful |= any;
            }
            "set" if fish => {
                meaningful = true;
                let mut i = 0;
                let mut options_done = false;
                let mut erase_or_query = false;
                while i < args.len() {
                    let l = args[i].lit.as_str();
                    if !options_done && l == "--" {
                        options_done = true;
                    } else if !options_done && l.starts_with('-') && l.len() > 1 {
                        let long = l.starts_with("--");
                        if (long && matches!(l, "--erase" | "--query"))
                            || (!long && l[1..].contains(['e', 'q']))
                        {
                            erase_or_query = true;
                        }
                    } else {
                        break;
                    }
                    i += 1;
                }
                if let (Some(nw), false) = (args.get(i), erase_or_query) {
                    let name = nw.lit.split_once('[').map_or(nw.lit.as_str(), |(b, _)| b);
                    match fate(name) {
                        Fate::Keep => {}
                        Fate::Remove => meaningful = false,
                        Fate::Value(v) => {
                            if let (Some(a), Some(b)) = (args.get(i + 1), args.last()) {
                                mine.push((a.start, b.end, v));
                            }
                        }
                    }
                }
                if !meaningful {
                    mine.push((first.start, rest[rest.len() - 1].end, nothing.into()));
                    edits.extend(mine);
                    return;
                }
            }
            "." | "source" => {
                meaningful = true;
                if let Some(p) = args.first() {
                    sourced.push(p.lit.clone());
                }
            }
            "function" if !fish => {
                meaningful = true;
                // `function f { …`: the body's first command follows the brace.
                if let Some(b) = args.iter().position(|w| w.lit == "{") {
                    command(text, &args[b + 1..], fish, fate, edits, sourced);
                }
            }
            _ => meaningful = true,
        }
    }
    if mine.is_empty() {
        return;
    }
    if !meaningful {
        let end = words[words.len() - 1].end;
        edits.push((words[0].start, end, nothing.into()));
        return;
    }
    edits.extend(mine);
}

/// `SETUVAR [--export] NAME:value` lines.
fn fish_variables(text: &str, fate: &dyn Fn(&str) -> Fate, edits: &mut Vec<Edit>) {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        let Some(rest) = body.strip_prefix("SETUVAR ") else {
            continue;
        };
        let (export, rest) = match rest.strip_prefix("--export ") {
            Some(r) => ("--export ", r),
            None => ("", rest),
        };
        let Some((name, _)) = rest.split_once(':') else {
            continue;
        };
        match fate(name) {
            Fate::Keep => {}
            Fate::Remove => edits.push((start, start + body.len(), String::new())),
            Fate::Value(v) => edits.push((
                start,
                start + body.len(),
                format!("SETUVAR {export}{name}:{v}"),
            )),
        }
    }
}

/// The simple commands of `b`, each as its words.
fn commands(b: &[u8], fish: bool) -> Vec<Vec<Word>> {
    let mut out = vec![];
    let mut cmd: Vec<Word> = vec![];
    let mut heredocs: Vec<(Vec<u8>, bool)> = vec![];
    // The next word is a redirection's target (not a command word); Some(tabs)
    // when it is a here-document's delimiter.
    let mut target: Option<Option<bool>> = None;
    let mut i = 0;
    let n = b.len();
    let flush = |cmd: &mut Vec<Word>, out: &mut Vec<Vec<Word>>| {
        if !cmd.is_empty() {
            out.push(std::mem::take(cmd));
        }
    };
    while i < n {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\r' => i += 1,
            b'\\' if b.get(i + 1) == Some(&b'\n') => i += 2,
            b'#' => {
                while i < n && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\n' => {
                flush(&mut cmd, &mut out);
                i += 1;
                for (delim, tabs) in heredocs.drain(..) {
                    while i < n {
                        let e = b[i..].iter().position(|&x| x == b'\n').map_or(n, |p| i + p);
                        let mut line = &b[i..e];
                        if tabs {
                            while let [b'\t', r @ ..] = line {
                                line = r;
                            }
                        }
                        i = (e + 1).min(n);
                        if line == delim.as_slice() || line.strip_suffix(b"\r") == Some(&delim) {
                            break;
                        }
                    }
                }
            }
            b';' | b'&' | b'|' => {
                flush(&mut cmd, &mut out);
                i += 1;
            }
            b'(' | b')' if !fish => {
                flush(&mut cmd, &mut out);
                i += 1;
            }
            b'<' | b'>' => {
                // A redirection: `<<` and `<<-` start a here-document, `<<<` is a
                // here-string; `>&2`, `<&0`, `>|`, `<>`, `&>` take a target.
                let mut j = i + 1;
                if c == b'<' && b.get(j) == Some(&b'<') {
                    j += 1;
                    if b.get(j) == Some(&b'<') {
                        target = Some(None);
                        i = j + 1;
                        continue;
                    }
                    let tabs = b.get(j) == Some(&b'-');
                    if tabs {
                        j += 1;
                    }
                    target = Some(Some(tabs));
                    i = j;
                    continue;
                }
                while j < n && matches!(b[j], b'>' | b'&' | b'|') {
                    j += 1;
                }
                target = Some(None);
                i = j;
            }
            _ => {
                let (w, end) = word(b, i, fish);
                i = end;
                match target.take() {
                    Some(Some(tabs)) => heredocs.push((w.lit.into_bytes(), tabs)),
                    Some(None) => {}
                    None => cmd.push(w),
                }
            }
        }
    }
    flush(&mut cmd, &mut out);
    out
}

/// The word starting at `i` and where it ends.
fn word(b: &[u8], start: usize, fish: bool) -> (Word, usize) {
    let n = b.len();
    let mut i = start;
    let mut lit: Vec<u8> = vec![];
    let quoted_start = matches!(b[i], b'\'' | b'"' | b'\\' | b'`' | b'$');
    while i < n {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\r' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' => break,
            b')' if !fish => break,
            b'(' if !fish => {
                // `NAME=(…)` (an array) or `@(…)`-style globs: part of the word.
                if lit.last() == Some(&b'=')
                    || matches!(lit.last(), Some(b'@' | b'!' | b'?' | b'*' | b'+'))
                {
                    let e = balanced(b, i + 1, b')', fish);
                    lit.extend_from_slice(&b[i..e]);
                    i = e;
                } else {
                    break;
                }
            }
            b'(' => {
                let e = balanced(b, i + 1, b')', fish);
                lit.extend_from_slice(&b[i..e]);
                i = e;
            }
            b'\\' => {
                if let Some(&x) = b.get(i + 1) {
                    if x != b'\n' {
                        lit.push(x);
                    }
                    i += 2;
                } else {
                    i += 1;
                }
            }
            b'\'' => {
                let e = single(b, i + 1, fish);
                lit.extend_from_slice(&b[i + 1..e.saturating_sub(1).max(i + 1)]);
                i = e;
            }
            b'"' => {
                let e = double(b, i + 1, fish);
                lit.extend_from_slice(&b[i + 1..e.saturating_sub(1).max(i + 1)]);
                i = e;
            }
            b'`' if !fish => {
                let e = backquote(b, i + 1);
                lit.extend_from_slice(&b[i..e]);
                i = e;
            }
            b'$' if !fish && matches!(b.get(i + 1), Some(b'(' | b'{')) => {
                let close = if b[i + 1] == b'(' { b')' } else { b'}' };
                let e = balanced(b, i + 2, close, fish);
                lit.extend_from_slice(&b[i..e]);
                i = e;
            }
            b'$' if fish && b.get(i + 1) == Some(&b'(') => {
                let e = balanced(b, i + 2, b')', fish);
                lit.extend_from_slice(&b[i..e]);
                i = e;
            }
            _ => {
                lit.push(c);
                i += 1;
            }
        }
    }
    let end = i.max(start + 1).min(n);
    (
        Word {
            start,
            end,
            lit: String::from_utf8_lossy(&lit).into_owned(),
            quoted_start,
        },
        end,
    )
}

/// After the closing `'` (or the end).
fn single(b: &[u8], mut i: usize, fish: bool) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' if fish => i += 2,
            b'\'' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// After the closing `"` (or the end).
fn double(b: &[u8], mut i: usize, fish: bool) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            b'`' if !fish => i = backquote(b, i + 1),
            b'$' if matches!(b.get(i + 1), Some(b'('))
                || (!fish && b.get(i + 1) == Some(&b'{')) =>
            {
                let close = if b[i + 1] == b'(' { b')' } else { b'}' };
                i = balanced(b, i + 2, close, fish);
            }
            _ => i += 1,
        }
    }
    b.len()
}

fn backquote(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'`' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// After the `close` that balances an opening just before `i` (quotes inside
/// taken whole), or the end.
fn balanced(b: &[u8], mut i: usize, close: u8, fish: bool) -> usize {
    let open = if close == b')' { b'(' } else { b'{' };
    let mut depth = 1usize;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'\'' => i = single(b, i + 1, fish),
            b'"' => i = double(b, i + 1, fish),
            b'`' if !fish => i = backquote(b, i + 1),
            x if x == open => {
                depth += 1;
                i += 1;
            }
            x if x == close => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fate(name: &str) -> Fate {
        match name {
            "GH_TOKEN" | "SECRET_X" => Fate::Remove,
            "OPENAI_API_KEY" => Fate::Value("sandpit-sentinel-openai-aa".into()),
            _ => Fate::Keep,
        }
    }

    fn posix(t: &str) -> String {
        scrub(t, Dialect::Posix, &fate).text
    }

    fn fish(t: &str) -> String {
        scrub(t, Dialect::Fish, &fate).text
    }

    #[test]
    fn posix_assignments_and_exports_of_withheld_names_go() {
        let cases = [
            ("export GH_TOKEN=ghp_abc\n", ":\n"),
            (
                "export GH_TOKEN='ghp abc' EDITOR=vim\n",
                "export  EDITOR=vim\n",
            ),
            ("declare -x GH_TOKEN=\"ghp_abc\"\n", ":\n"),
            ("builtin export GH_TOKEN=ghp_abc\n", "builtin :\n"),
            // The fuzz target's find: a reserved word after a removed assignment
            // stays a command's name, not the start of a new assignment.
            (
                "GH_TOKEN= ! GH_TOKEN=(x\n",
                "SANDPIT_SCRUBBED= ! GH_TOKEN=(x\n",
            ),
            ("GH_TOKEN=1 if x\n", "SANDPIT_SCRUBBED= if x\n"),
            ("command export GH_TOKEN=ghp_abc\n", "command :\n"),
            (
                "noglob builtin typeset -x GH_TOKEN=1\n",
                "noglob builtin :\n",
            ),
            ("typeset -gx GH_TOKEN=x; echo hi\n", ":; echo hi\n"),
            ("GH_TOKEN=ghp_abc\nexport GH_TOKEN\n", ":\n:\n"),
            ("GH_TOKEN=ghp_abc gh auth status\n", " gh auth status\n"),
            ("export \"GH_TOKEN=ghp abc\"\n", ":\n"),
            (
                "if true; then\n  export GH_TOKEN=$(cat ~/.t)\nfi\n",
                "if true; then\n  :\nfi\n",
            ),
            ("f() { export GH_TOKEN=1; }\n", "f() { :; }\n"),
            ("function f { export GH_TOKEN=1; }\n", "function f { :; }\n"),
            ("GH_TOKEN=(a b)\n", ":\n"),
            ("export GH_TOKEN=`cat x`\n", ":\n"),
            ("export GH_TOKEN=\"$(printf '%s' \"a b\")\"\n", ":\n"),
            (
                "[ -n \"$X\" ] && export GH_TOKEN=1 || true\n",
                "[ -n \"$X\" ] && : || true\n",
            ),
            ("export GH_TOKEN=a\\\nb\n", ":\n"),
            (
                "export OPENAI_API_KEY=sk-real\n",
                "export OPENAI_API_KEY=sandpit-sentinel-openai-aa\n",
            ),
            (
                "OPENAI_API_KEY='sk-real'\n",
                "OPENAI_API_KEY=sandpit-sentinel-openai-aa\n",
            ),
            ("export OPENAI_API_KEY\n", "export OPENAI_API_KEY\n"),
        ];
        for (input, want) in cases {
            assert_eq!(posix(input), want, "{input:?}");
        }
    }

    #[test]
    fn everything_else_is_left_as_it_is() {
        let same = [
            "export EDITOR=vim\nalias ll='ls -l'\n# export GH_TOKEN=in-a-comment\n",
            "echo 'export GH_TOKEN=quoted'\n",
            "cat <<EOF\nexport GH_TOKEN=inside-heredoc\nEOF\nexport EDITOR=vim\n",
            "cat <<-'EOF'\n\tdon't GH_TOKEN=x\n\tEOF\n",
            "PS1='\\u@\\h \\w$ '\n",
            "case $x in a) echo a;; esac\n",
            "unset GH_TOKEN\n",
            "",
            "'unterminated\nexport GH_TOKEN=after\n",
        ];
        for t in same {
            assert_eq!(posix(t), t, "{t:?}");
        }
    }

    #[test]
    fn a_heredoc_does_not_hide_what_follows() {
        let t = "cat <<EOF >/dev/null\n'\nEOF\nexport GH_TOKEN=x\n";
        assert_eq!(posix(t), "cat <<EOF >/dev/null\n'\nEOF\n:\n");
    }

    #[test]
    fn sourced_files_are_listed() {
        let s = scrub(
            "set -a; . ~/.secrets; set +a\nsource \"$HOME/.bashrc.d/x.sh\"\n",
            Dialect::Posix,
            &fate,
        );
        assert_eq!(s.sourced, ["~/.secrets", "$HOME/.bashrc.d/x.sh"]);
        assert!(!s.changed);
    }

    #[test]
    fn fish_set_and_export() {
        let cases = [
            ("set -gx GH_TOKEN ghp_abc\n", "true\n"),
            ("set -x GH_TOKEN (cat ~/.t)\n", "true\n"),
            ("set --global --export GH_TOKEN 'a b' c\n", "true\n"),
            ("and set -Ux GH_TOKEN x\n", "and true\n"),
            (
                "set -gx OPENAI_API_KEY sk-real\n",
                "set -gx OPENAI_API_KEY sandpit-sentinel-openai-aa\n",
            ),
            ("export GH_TOKEN=abc\n", "true\n"),
            ("set -e GH_TOKEN\n", "set -e GH_TOKEN\n"),
            ("set -gx EDITOR vim\n", "set -gx EDITOR vim\n"),
            (
                "if status is-interactive\n  set -gx GH_TOKEN 'it\\'s'\nend\n",
                "if status is-interactive\n  true\nend\n",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(fish(input), want, "{input:?}");
        }
    }

    #[test]
    fn fish_universal_variables() {
        let t = "# This file contains fish universal variable definitions.\nSETUVAR --export GH_TOKEN:ghp_abc\nSETUVAR --export OPENAI_API_KEY:sk\nSETUVAR fish_greeting:hi\n";
        assert_eq!(
            scrub(t, Dialect::FishVariables, &fate).text,
            "# This file contains fish universal variable definitions.\n\nSETUVAR --export OPENAI_API_KEY:sandpit-sentinel-openai-aa\nSETUVAR fish_greeting:hi\n"
        );
    }

    #[test]
    fn scrubbing_twice_changes_nothing_more() {
        for t in [
            "export GH_TOKEN=1 EDITOR=vim; GH_TOKEN=2 x\n",
            "export OPENAI_API_KEY=sk\n",
        ] {
            let once = posix(t);
            let twice = scrub(&once, Dialect::Posix, &fate);
            assert_eq!(twice.text, once);
            assert!(!twice.changed || once.contains("sandpit-sentinel"), "{t:?}");
        }
    }

    /// The fuzz target's property (fuzz/fuzz_targets/scrub_files.rs) on every
    /// prefix of a file full of the hard cases: no panic, nothing left to remove.
    #[test]
    fn every_prefix_of_a_hard_file_scrubs_cleanly() {
        let t = "export GH_TOKEN=\"a $(echo 'b)' \\\"c\\\")\" X=1 # c\ncat <<-'E' >/dev/null\n\tGH_TOKEN=in\n\tE\nf() { GH_TOKEN=(a 'b c') x; }\nfunction g { declare -gx GH_TOKEN=`x \\` y`; }\ncase $a in *) GH_TOKEN=${b:-c};; esac\nset -gx GH_TOKEN (cat 'é\\'x')\nSETUVAR --export GH_TOKEN:v\nOPENAI_API_KEY=1 é\n";
        for d in [Dialect::Posix, Dialect::Fish, Dialect::FishVariables] {
            for (end, _) in t.char_indices() {
                let p = &t[..end];
                let once = scrub(p, d, &fate);
                let again = scrub(&once.text, d, &|n| match fate(n) {
                    Fate::Value(_) => Fate::Keep,
                    f => f,
                });
                assert!(!again.changed, "{d:?} {p:?} -> {:?}", once.text);
                assert_eq!(scrub(&once.text, d, &fate).text, once.text, "{d:?} {p:?}");
                let _ = crate::scrub::dotenv::scrub(p, &|_| None, "s");
            }
        }
    }
}
