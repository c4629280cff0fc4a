#![no_main]
//! The filtering SSH agent's parsers on hostile input (what the sandbox writes to
//! its agent socket): every message decides without panicking, and a message is
//! only forwarded to the user's agent when it lists identities. Signing needs a
//! session bound to a known host key, which no host here vouches for; the
//! user-authentication parser and `known_hosts` parsing take any bytes.
use libfuzzer_sys::fuzz_target;
use sandpit::sshagent::{filter, known_hosts, Connection, HostKeys, Step};

struct NoHost;
impl HostKeys for NoHost {
    fn allowed(&self, _: &ssh_key::public::KeyData) -> Result<String, String> {
        Err("no host".into())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut c = Connection::default();
    for msg in data.split(|b| *b == 0xff) {
        match c.step(msg, &NoHost) {
            Step::Forward => assert_eq!(msg, [11u8]),
            Step::Sign { .. } | Step::Bound { .. } => panic!("signed or bound without a host"),
            Step::Refuse(_) => {}
        }
    }
    let _ = filter::parse_userauth(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let mut k = known_hosts::Known::default();
        k.add(text);
    }
});
