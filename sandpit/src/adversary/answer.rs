//! The strict parser of the model's answer.
//!
//! Accepted: the first non-empty line starts with the word `ALLOW` or `DENY` (upper
//! case), followed by nothing, or by `:`, `-`, `.` or whitespace and a reason on the
//! same line. Anything else — other words, markdown around the word, `ALLOWED`,
//! lower case, an empty answer — is malformed and goes to `on_error`.
use super::AdversaryError;

/// Longest reason kept (characters).
const MAX_REASON: usize = 400;

/// What the model decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allow(String),
    Deny(String),
}

/// Parse the model's text.
pub fn parse(text: &str) -> Result<Answer, AdversaryError> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or_else(|| AdversaryError::Malformed("the answer is empty".into()))?;
    let (allow, rest) = if let Some(r) = line.strip_prefix("ALLOW") {
        (true, r)
    } else if let Some(r) = line.strip_prefix("DENY") {
        (false, r)
    } else {
        return Err(malformed(line));
    };
    let reason = match rest.chars().next() {
        None => "",
        Some(c) if c.is_whitespace() || matches!(c, ':' | '-' | '.' | ',') => {
            let r = rest.trim_start();
            r.strip_prefix([':', '-', '.', ',']).unwrap_or(r)
        }
        Some(_) => return Err(malformed(line)),
    };
    let reason = clean(reason);
    Ok(if allow {
        Answer::Allow(reason)
    } else {
        Answer::Deny(reason)
    })
}

fn malformed(line: &str) -> AdversaryError {
    AdversaryError::Malformed(format!(
        "the answer does not start with ALLOW or DENY: {:?}",
        clean(line)
    ))
}

/// One line, no control characters (the reason reaches the agent's terminal),
/// bounded length.
fn clean(s: &str) -> String {
    let s: String = s
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_REASON)
        .collect();
    s.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        assert_eq!(parse("ALLOW").unwrap(), Answer::Allow(String::new()));
        assert_eq!(
            parse("\n  DENY: reads ~/.ssh\nmore text").unwrap(),
            Answer::Deny("reads ~/.ssh".into())
        );
        assert_eq!(
            parse("ALLOW - harmless build").unwrap(),
            Answer::Allow("harmless build".into())
        );
        assert_eq!(
            parse("DENY exfiltrates").unwrap(),
            Answer::Deny("exfiltrates".into())
        );
    }

    #[test]
    fn anything_else_is_malformed() {
        for bad in [
            "",
            "  \n ",
            "allow",
            "Allow: fine",
            "ALLOWED",
            "DENYING",
            "**ALLOW**",
            "I think ALLOW",
            "Sure! ALLOW",
            "MAYBE",
            "`ALLOW`",
        ] {
            assert!(
                matches!(parse(bad), Err(AdversaryError::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn reasons_are_one_clean_line() {
        let Answer::Deny(r) = parse("DENY: bad\x1b[2J thing").unwrap() else {
            panic!()
        };
        assert_eq!(r, "bad [2J thing");
        let long = format!("DENY {}", "x".repeat(1000));
        let Answer::Deny(r) = parse(&long).unwrap() else {
            panic!()
        };
        assert_eq!(r.len(), MAX_REASON);
    }
}
