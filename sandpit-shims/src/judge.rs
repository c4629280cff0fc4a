//! Deciding a whole shimmed command: `exec.block` first, then everything the
//! arguments name, against the network policy. Pure: `sandpit exec` supplies the
//! policy and a [`Ctx`]; tests supply their own.
use crate::{analyze, Ctx};
use sandpit_policy::matchers::command_line;
use sandpit_policy::{decide, Decision, Policy, Request, ReviewEvent};

/// The literal a `re:` pattern must contain for it to match at all: its leading
/// word, when the pattern has no alternation and the word is not quantified
/// (`nc\s+-e` needs "nc"). `None`: no cheap check, compile and run the regex.
pub fn required_literal(pattern: &str) -> Option<String> {
    let re = pattern.strip_prefix("re:")?;
    let re = re.strip_prefix('^').unwrap_or(re);
    if re.contains('|') {
        return None;
    }
    let word: String = re
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .collect();
    let rest = &re[word.len()..];
    // A quantifier applies to the last character, which is then optional.
    let word = if rest.starts_with(['*', '?', '{']) {
        let mut w = word;
        w.pop();
        w
    } else {
        word
    };
    let word = word.trim_end().to_ascii_lowercase();
    (word.len() >= 2).then_some(word)
}

/// What `sandpit exec` should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Run the real tool. `ssh_tunnel`: the tool speaks ssh itself and every host it
    /// names was allowed, so the caller supplies the ProxyCommand.
    Run { ssh_tunnel: bool },
    /// Do not run it; the one line for stderr.
    Blocked(String),
}

/// The decisions `judge` needs; implemented for [`Policy`], and by tests.
pub trait Judge {
    /// `Ok(())` or the reason line naming the rule.
    fn exec(&self, argv: &[String]) -> Result<(), String>;
    /// `port: None` means the command leaves the port open: every port must be
    /// allowed.
    fn connect(&self, host: &str, port: Option<u16>) -> Result<(), String>;
}

impl Judge for Policy {
    fn exec(&self, argv: &[String]) -> Result<(), String> {
        // Cheap checks first: substring patterns, then only the regexes whose
        // required literal is present (or that have none). Only a match, or a
        // configured reviewer, goes to `decide` for the verdict and its wording.
        let line = command_line(argv);
        let ascii = line.is_ascii();
        let hit = self.exec.block.iter().any(|r| {
            let p = &r.value;
            if !p.is_regex() {
                return p.matches(&line);
            }
            match required_literal(&p.source) {
                Some(lit) if ascii && !line.contains(&lit) => false,
                _ => p.matches(&line),
            }
        });
        let review = self
            .adversary
            .as_ref()
            .is_some_and(|a| a.review.contains(&ReviewEvent::Exec));
        if !hit && !review {
            return Ok(());
        }
        let v = decide(self, &Request::Exec(argv));
        match v.decision {
            Decision::Allow => Ok(()),
            Decision::Deny => Err(v.reason),
            // The adversary lives in the launcher; a shim cannot ask it (yet), so a
            // command that needs review does not run.
            Decision::Review => Err(format!(
                "{}, and the shim cannot reach the reviewer: not run",
                v.reason
            )),
        }
    }

    fn connect(&self, host: &str, port: Option<u16>) -> Result<(), String> {
        let ports: Vec<u16> = match port {
            Some(p) => vec![p],
            None => {
                // Port 0 matches only port-less rules; also try every port a rule
                // names so a port-specific block is not missed.
                let mut v = vec![0];
                v.extend(
                    self.network
                        .block
                        .iter()
                        .chain(self.network.allow.iter())
                        .filter_map(|r| r.value.port),
                );
                v.sort_unstable();
                v.dedup();
                v
            }
        };
        for p in ports {
            let v = decide(self, &Request::Connect { host, port: p });
            if v.decision != Decision::Allow {
                let reason = if port.is_none() && p == 0 {
                    format!(
                        "{} (the command does not fix the port, so any port must be allowed)",
                        v.reason.replacen(":0", "", 1)
                    )
                } else {
                    v.reason
                };
                return Err(reason);
            }
        }
        Ok(())
    }
}

/// Decide `tool args…`.
pub fn judge(j: &dyn Judge, tool: &str, args: &[String], ctx: &dyn Ctx) -> Outcome {
    let mut argv = Vec::with_capacity(args.len() + 1);
    argv.push(tool.to_string());
    argv.extend(args.iter().cloned());
    if let Err(reason) = j.exec(&argv) {
        return Outcome::Blocked(format!("sandpit: {reason}"));
    }
    let a = analyze(tool, args, ctx);
    if let Some(r) = a.refusals.first() {
        return Outcome::Blocked(format!(
            "sandpit: {tool}: refused `{}`: {} (sandpit's {tool} shim cannot judge it, so the command did not run)",
            r.arg, r.reason
        ));
    }
    for d in &a.dests {
        if let Err(reason) = j.connect(&d.host, d.port) {
            return Outcome::Blocked(format!("sandpit: {tool} `{}`: {reason}", d.arg));
        }
    }
    Outcome::Run {
        ssh_tunnel: a.ssh_tunnel && !a.dests.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_literals() {
        assert_eq!(required_literal("re:nc\\s+-e").as_deref(), Some("nc"));
        assert_eq!(
            required_literal("re:^base64 -d").as_deref(),
            Some("base64 -d")
        );
        assert_eq!(required_literal("re:curls?\\s").as_deref(), Some("curl"));
        assert_eq!(required_literal("re:nc|ncat"), None);
        assert_eq!(required_literal("re:(?i)x"), None);
        assert_eq!(required_literal("re:a*b"), None);
        assert_eq!(required_literal("curl --data"), None);
    }
}
