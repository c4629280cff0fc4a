//! A getopt-style tokenizer driven by a per-tool option table.
//!
//! It knows which options take a value so that the words that are left are the
//! operands, and it resolves long-option abbreviations the way GNU `getopt_long` and
//! curl do (a unique prefix names the option). Unknown options are handled in the
//! conservative direction: they are assumed to take no value, so the word after them
//! stays an operand and gets judged as a destination.

/// The options one tool understands.
pub struct Spec {
    /// Short letters that take a value (attached `-xVAL` or the next word).
    pub short_arg: &'static str,
    /// Long names (without `--`) that take a value (`--name=VAL` or the next word).
    pub long_arg: &'static [&'static str],
    /// Long names that take no value. Only needed so abbreviations resolve correctly.
    pub long_flag: &'static [&'static str],
    /// Stop option parsing at the first operand (BSD getopt: ssh, scp, nc).
    pub stop_at_operand: bool,
    /// Accept unique prefixes of long names (GNU getopt_long, curl).
    pub abbreviations: bool,
}

/// One parsed word (or part of a word, for clustered short options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A short option with its value when it takes one.
    Short(char, Option<String>),
    /// A long option: its full name from the table, and its value when it takes one.
    Long(&'static str, Option<String>),
    /// A long option not in the table, with an attached `=value` if present.
    UnknownLong(String, Option<String>),
    /// An operand.
    Operand(String),
    /// An option that needs a value but was the last word.
    MissingValue(String),
}

impl Spec {
    fn lookup_long(&self, name: &str) -> Option<(&'static str, bool)> {
        for n in self.long_arg {
            if *n == name {
                return Some((n, true));
            }
        }
        for n in self.long_flag {
            if *n == name {
                return Some((n, false));
            }
        }
        if !self.abbreviations || name.is_empty() {
            return None;
        }
        let mut hit: Option<(&'static str, bool)> = None;
        let all = self
            .long_arg
            .iter()
            .map(|n| (*n, true))
            .chain(self.long_flag.iter().map(|n| (*n, false)));
        for (n, takes) in all {
            if n.starts_with(name) {
                if hit.is_some_and(|(h, _)| h != n) {
                    // Ambiguous: the tool itself rejects it, so nothing runs; treat
                    // as unknown (the conservative direction).
                    return None;
                }
                hit = Some((n, takes));
            }
        }
        hit
    }

    /// Split `args` (without the program name) into tokens.
    pub fn tokenize(&self, args: &[String]) -> Vec<Tok> {
        let mut out = Vec::with_capacity(args.len());
        let mut i = 0;
        let mut options_done = false;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            if options_done || a == "-" || !a.starts_with('-') {
                out.push(Tok::Operand(a.clone()));
                if self.stop_at_operand {
                    options_done = true;
                }
                continue;
            }
            if a == "--" {
                options_done = true;
                continue;
            }
            if let Some(body) = a.strip_prefix("--") {
                let (name, attached) = match body.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (body, None),
                };
                match self.lookup_long(name) {
                    Some((full, true)) => {
                        let v = match attached {
                            Some(v) => Some(v),
                            None => {
                                if i < args.len() {
                                    i += 1;
                                    Some(args[i - 1].clone())
                                } else {
                                    out.push(Tok::MissingValue(a.clone()));
                                    continue;
                                }
                            }
                        };
                        out.push(Tok::Long(full, v));
                    }
                    Some((full, false)) => out.push(Tok::Long(full, attached)),
                    None => out.push(Tok::UnknownLong(name.to_string(), attached)),
                }
                continue;
            }
            // A cluster of short options: -abc, -oVALUE, -o VALUE.
            for (pos, c) in a[1..].char_indices() {
                if self.short_arg.contains(c) {
                    let rest = &a[1 + pos + c.len_utf8()..];
                    if !rest.is_empty() {
                        out.push(Tok::Short(c, Some(rest.to_string())));
                    } else if i < args.len() {
                        out.push(Tok::Short(c, Some(args[i].clone())));
                        i += 1;
                    } else {
                        out.push(Tok::MissingValue(a.clone()));
                    }
                    break;
                }
                out.push(Tok::Short(c, None));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: Spec = Spec {
        short_arg: "ox",
        long_arg: &["output", "proxy", "proxy-user"],
        long_flag: &["silent", "location"],
        stop_at_operand: false,
        abbreviations: true,
    };

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn clusters_attached_and_separate_values() {
        let t = SPEC.tokenize(&s(&["-sLoout", "-x", "p:1", "-xq:2", "u"]));
        assert_eq!(
            t,
            vec![
                Tok::Short('s', None),
                Tok::Short('L', None),
                Tok::Short('o', Some("out".into())),
                Tok::Short('x', Some("p:1".into())),
                Tok::Short('x', Some("q:2".into())),
                Tok::Operand("u".into()),
            ]
        );
    }

    #[test]
    fn long_forms_abbreviations_and_double_dash() {
        let t = SPEC.tokenize(&s(&[
            "--proxy=a",
            "--output",
            "b",
            "--loc",
            "--prox",
            "c",
            "--",
            "-x",
        ]));
        assert_eq!(
            t,
            vec![
                Tok::Long("proxy", Some("a".into())),
                Tok::Long("output", Some("b".into())),
                Tok::Long("location", None),
                // "prox" is ambiguous between proxy and proxy-user.
                Tok::UnknownLong("prox".into(), None),
                Tok::Operand("c".into()),
                Tok::Operand("-x".into()),
            ]
        );
    }

    #[test]
    fn missing_value_is_reported() {
        assert_eq!(
            SPEC.tokenize(&s(&["-x"])),
            vec![Tok::MissingValue("-x".into())]
        );
    }
}
