//! Which `host:port` destinations the user's `known_hosts` gives a host key: plain
//! names, `[host]:port`, patterns (`*`, `?`, `!negated`) and hashed names
//! (`|1|salt|hash`, HMAC-SHA1 of the name under the salt). A hashed name hides the
//! host, so it is tried against the candidates the caller names (the hosts the
//! policy allows). Pure: the caller reads the files.
use hmac::{Hmac, Mac};
use ssh_key::known_hosts::{HostPatterns, KnownHosts, Marker};
use ssh_key::public::KeyData;

/// One destination: a host as written in `known_hosts` (lowercase) and a port.
pub type Destination = (String, u16);

/// The entries of one or more `known_hosts` texts.
#[derive(Default)]
pub struct Known {
    entries: Vec<Entry>,
}

struct Entry {
    revoked: bool,
    key: KeyData,
    names: Names,
}

enum Names {
    Patterns(Vec<String>),
    Hashed { salt: Vec<u8>, hash: [u8; 20] },
}

/// The name ssh hashes and writes for `host:port`: `host` on port 22,
/// `[host]:port` otherwise.
pub fn written(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

/// A written name (`host`, `[host]:port`) as a destination.
fn destination(name: &str) -> Option<Destination> {
    match name.strip_prefix('[') {
        Some(rest) => {
            let (host, port) = rest.split_once("]:")?;
            Some((host.to_ascii_lowercase(), port.parse().ok()?))
        }
        None => Some((name.to_ascii_lowercase(), 22)),
    }
}

/// ssh's pattern match: `*` any run, `?` one character, case-insensitive.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob(&pattern[1..], name) || (!name.is_empty() && glob(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => glob(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p.eq_ignore_ascii_case(n) => glob(&pattern[1..], &name[1..]),
        _ => false,
    }
}

fn is_pattern(p: &str) -> bool {
    p.contains(['*', '?'])
}

impl Known {
    /// Parse a `known_hosts` text and add its entries. Lines that do not parse
    /// (an unknown key type, `@cert-authority` keys, which sign host certificates,
    /// not sessions) are skipped: they vouch for no plain host key.
    pub fn add(&mut self, text: &str) {
        for line in text.lines() {
            let Some(Ok(e)) = KnownHosts::new(line).next() else {
                continue;
            };
            let revoked = match e.marker() {
                None => false,
                Some(Marker::Revoked) => true,
                Some(Marker::CertAuthority) => continue,
            };
            let names = match e.host_patterns() {
                HostPatterns::Patterns(p) => Names::Patterns(p.clone()),
                HostPatterns::HashedName { salt, hash } => Names::Hashed {
                    salt: salt.clone(),
                    hash: *hash,
                },
            };
            self.entries.push(Entry {
                revoked,
                key: e.public_key().key_data().clone(),
                names,
            });
        }
    }

    /// The destinations `key` is the known host key of. Names written in the file
    /// count as they are; patterns and hashed names count for the `candidates`
    /// they match. A key marked `@revoked` anywhere has none.
    pub fn destinations(&self, key: &KeyData, candidates: &[Destination]) -> Vec<Destination> {
        let mine: Vec<&Entry> = self.entries.iter().filter(|e| &e.key == key).collect();
        if mine.iter().any(|e| e.revoked) {
            return vec![];
        }
        let mut out: Vec<Destination> = vec![];
        let mut push = |d: Destination| {
            if !out.contains(&d) {
                out.push(d);
            }
        };
        for e in mine {
            match &e.names {
                Names::Hashed { salt, hash } => {
                    for (host, port) in candidates {
                        let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(salt) else {
                            continue;
                        };
                        mac.update(written(host, *port).as_bytes());
                        if mac.verify_slice(hash).is_ok() {
                            push((host.clone(), *port));
                        }
                    }
                }
                Names::Patterns(patterns) => {
                    let (negated, positive): (Vec<&String>, Vec<&String>) =
                        patterns.iter().partition(|p| p.starts_with('!'));
                    let excluded = |d: &Destination| {
                        let name = written(&d.0, d.1);
                        negated
                            .iter()
                            .any(|n| glob(&n.as_bytes()[1..], name.as_bytes()))
                    };
                    for p in positive {
                        if is_pattern(p) {
                            for c in candidates {
                                if glob(p.as_bytes(), written(&c.0, c.1).as_bytes()) && !excluded(c)
                                {
                                    push(c.clone());
                                }
                            }
                        } else if let Some(d) = destination(p) {
                            if !excluded(&d) {
                                push(d);
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use base64::Engine as _;

    const ED_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHhM6VifnlocEXLilXQUun8WInLVnp9ja6HUAx4Ovizz";
    const ED_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP6kS+yjoyQgSMUwrGmYb1S+Iy3lOlDrCFm+uHOAEZmk";

    fn key(line: &str) -> KeyData {
        ssh_key::PublicKey::from_openssh(line)
            .unwrap()
            .key_data()
            .clone()
    }

    fn hashed(name: &str, salt: &[u8]) -> String {
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(salt).unwrap();
        mac.update(name.as_bytes());
        let b64 = base64::engine::general_purpose::STANDARD;
        format!(
            "|1|{}|{}",
            b64.encode(salt),
            b64.encode(mac.finalize().into_bytes())
        )
    }

    fn d(h: &str, p: u16) -> Destination {
        (h.to_string(), p)
    }

    #[test]
    fn plain_names_and_bracketed_ports_give_their_destinations() {
        let mut k = Known::default();
        k.add(&format!(
            "# comment\n\ngit.example,192.0.2.7 {ED_A}\n[Git.Example]:2222 {ED_A}\nother.example {ED_B}\n"
        ));
        assert_eq!(
            k.destinations(&key(ED_A), &[]),
            [
                d("git.example", 22),
                d("192.0.2.7", 22),
                d("git.example", 2222)
            ]
        );
        assert_eq!(k.destinations(&key(ED_B), &[]), [d("other.example", 22)]);
        // A key no line names has no destination.
        let mut none = Known::default();
        none.add(&format!("other.example {ED_B}\n"));
        assert!(none
            .destinations(&key(ED_A), &[d("git.example", 22)])
            .is_empty());
    }

    #[test]
    fn hashed_names_match_only_the_candidate_they_hash() {
        let mut k = Known::default();
        k.add(&format!(
            "{} {ED_A}\n{} {ED_A}\n",
            hashed("git.example", b"0123456789abcdefghij"),
            hashed("[git.example]:2222", b"saltsaltsaltsaltsalt")
        ));
        let cands = [
            d("git.example", 22),
            d("git.example", 2222),
            d("evil.example", 22),
        ];
        assert_eq!(
            k.destinations(&key(ED_A), &cands),
            [d("git.example", 22), d("git.example", 2222)]
        );
        // Another key under the same hashed names: nothing.
        assert!(k.destinations(&key(ED_B), &cands).is_empty());
        // No candidates: a hashed name gives nothing.
        assert!(k.destinations(&key(ED_A), &[]).is_empty());
    }

    #[test]
    fn patterns_negations_revocations_and_ca_lines() {
        let mut k = Known::default();
        k.add(&format!("*.example,!bad.example {ED_A}\n"));
        let cands = [
            d("git.example", 22),
            d("bad.example", 22),
            d("git.other", 22),
        ];
        assert_eq!(k.destinations(&key(ED_A), &cands), [d("git.example", 22)]);

        let mut r = Known::default();
        r.add(&format!("git.example {ED_A}\n@revoked * {ED_A}\n"));
        assert!(r.destinations(&key(ED_A), &cands).is_empty());

        let mut ca = Known::default();
        ca.add(&format!("@cert-authority *.example {ED_A}\ngarbage line\n"));
        assert!(ca.destinations(&key(ED_A), &cands).is_empty());
    }

    #[test]
    fn globs_are_ssh_s() {
        assert!(glob(b"*.example", b"git.EXAMPLE"));
        assert!(glob(b"git?.example", b"git1.example"));
        assert!(!glob(b"git?.example", b"git.example"));
        assert!(!glob(b"*.example", b"git.example.evil"));
        assert!(glob(b"[git.example]:*", b"[git.example]:2222"));
    }
}
