//! What one connection to the sandbox's agent socket may ask: the pure decision
//! for each message of the agent protocol (draft-miller-ssh-agent), with the state
//! one connection carries (the session it was last bound to). The server
//! (`super::serve`) reads and writes the frames and talks to the real agent.
//!
//! Allowed: listing the identities; a session bind (`session-bind@openssh.com`)
//! for the user's authentication (not forwarding), whose host key signed the
//! session ID and is a known host key of a destination the policy allows; and a
//! signature over an SSH user-authentication request (`publickey`, or
//! `publickey-hostbound-v00@openssh.com` naming the bound host key) for the
//! session this connection was last bound to, with the key it names. Everything
//! else is refused: adding, removing, locking, other extensions, signing other data
//! (`ssh-keygen -Y sign`, a commit signature, a login to another session).
use signature::Verifier as _;
use ssh_agent_lib::proto::extension::SessionBind;
use ssh_agent_lib::proto::{Request, SignRequest};
use ssh_encoding::{Decode, Encode};
use ssh_key::public::KeyData;

/// OpenSSH's limit for one message.
pub const MAX_MESSAGE: usize = 256 * 1024;
/// `SSH_AGENT_FAILURE`.
pub const FAILURE: u8 = 5;
/// `SSH_AGENT_SUCCESS`.
pub const SUCCESS: u8 = 6;
const SESSION_BIND: &str = "session-bind@openssh.com";
const USERAUTH_REQUEST: u8 = 50;
const HOSTBOUND: &[u8] = b"publickey-hostbound-v00@openssh.com";

/// What the server does with one message.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Hand the message as it is to the real agent and its answer back.
    Forward,
    /// A session bound to `destination`: tell the real agent too (its own
    /// destination constraints see it), answer success whatever it says.
    Bound { destination: String },
    /// A signature allowed for a login to `destination`: forward it.
    Sign { destination: String },
    /// Answer failure; the reason is for the audit.
    Refuse(String),
}

/// Where a host key may be trusted: the allowed destination whose known host key
/// it is (`host:port`), or why there is none.
pub trait HostKeys {
    fn allowed(&self, key: &KeyData) -> Result<String, String>;
}

struct Bound {
    session_id: Vec<u8>,
    host_key: Vec<u8>,
    destination: String,
}

/// One client connection's state.
#[derive(Default)]
pub struct Connection {
    last: Option<Bound>,
}

fn blob(e: &impl Encode) -> Option<Vec<u8>> {
    let mut out = vec![];
    e.encode(&mut out).ok()?;
    Some(out)
}

/// An SSH_MSG_USERAUTH_REQUEST for the `publickey` method with a signature, as a
/// client asks its agent to sign it (RFC 4252 §7; OpenSSH's `hostbound` variant
/// adds the server's host key). `None` for anything else.
#[derive(Debug, PartialEq, Eq)]
pub struct Userauth {
    pub session_id: Vec<u8>,
    pub key: Vec<u8>,
    pub host_key: Option<Vec<u8>>,
}

pub fn parse_userauth(mut data: &[u8]) -> Option<Userauth> {
    let r = &mut data;
    let session_id = Vec::<u8>::decode(r).ok()?;
    if u8::decode(r).ok()? != USERAUTH_REQUEST {
        return None;
    }
    let _user = Vec::<u8>::decode(r).ok()?;
    if Vec::<u8>::decode(r).ok()? != b"ssh-connection" {
        return None;
    }
    let method = Vec::<u8>::decode(r).ok()?;
    let hostbound = method == HOSTBOUND;
    if method != b"publickey" && !hostbound {
        return None;
    }
    if u8::decode(r).ok()? == 0 {
        return None;
    }
    let _algorithm = Vec::<u8>::decode(r).ok()?;
    let key = Vec::<u8>::decode(r).ok()?;
    let host_key = match hostbound {
        true => Some(Vec::<u8>::decode(r).ok()?),
        false => None,
    };
    (!session_id.is_empty() && r.is_empty()).then_some(Userauth {
        session_id,
        key,
        host_key,
    })
}

/// A request's name in refusals.
fn name(req: &Request) -> &'static str {
    match req {
        Request::RequestIdentities => "list identities",
        Request::SignRequest(_) => "sign",
        Request::AddIdentity(_) | Request::AddIdConstrained(_) => "add an identity",
        Request::RemoveIdentity(_) => "remove an identity",
        Request::RemoveAllIdentities => "remove all identities",
        Request::AddSmartcardKey(_) | Request::AddSmartcardKeyConstrained(_) => {
            "add a smartcard key"
        }
        Request::RemoveSmartcardKey(_) => "remove a smartcard key",
        Request::Lock(_) => "lock the agent",
        Request::Unlock(_) => "unlock the agent",
        Request::Extension(_) => "extension",
    }
}

impl Connection {
    /// Decide one message (without its length prefix).
    pub fn step(&mut self, msg: &[u8], hosts: &dyn HostKeys) -> Step {
        let mut rest = msg;
        let req = match Request::decode(&mut rest) {
            Ok(r) => r,
            Err(e) => return Step::Refuse(format!("unreadable or unknown request ({e})")),
        };
        // The message forwarded is the one judged: nothing may trail it.
        if !rest.is_empty() {
            return Step::Refuse(format!("{} with trailing bytes", name(&req)));
        }
        match req {
            Request::RequestIdentities => Step::Forward,
            Request::SignRequest(s) => self.sign(&s),
            Request::Extension(ext) if ext.name == SESSION_BIND => {
                self.bind(ext.details.as_ref(), hosts)
            }
            Request::Extension(ext) => {
                Step::Refuse(format!("extension {:?} is not allowed", ext.name))
            }
            other => Step::Refuse(format!("{}: not allowed in the sandbox", name(&other))),
        }
    }

    fn bind(&mut self, mut details: &[u8], hosts: &dyn HostKeys) -> Step {
        // A refused bind leaves the connection bound to nothing: no later
        // signature counts on an earlier session.
        let last = self.last.take();
        let Ok(bind) = SessionBind::decode(&mut details) else {
            return Step::Refuse("unreadable session bind".into());
        };
        if !details.is_empty() {
            return Step::Refuse("session bind with trailing bytes".into());
        }
        if bind.is_forwarding {
            return Step::Refuse(
                "session bind for agent forwarding: the sandbox's agent is not forwarded".into(),
            );
        }
        if bind
            .host_key
            .verify(&bind.session_id, &bind.signature)
            .is_err()
        {
            return Step::Refuse("session bind whose host key signature does not verify".into());
        }
        let destination = match hosts.allowed(&bind.host_key) {
            Ok(d) => d,
            Err(why) => return Step::Refuse(why),
        };
        let Some(host_key) = blob(&bind.host_key) else {
            return Step::Refuse("session bind host key that cannot be encoded".into());
        };
        drop(last);
        self.last = Some(Bound {
            session_id: bind.session_id,
            host_key,
            destination: destination.clone(),
        });
        Step::Bound { destination }
    }

    fn sign(&self, s: &SignRequest) -> Step {
        let Some(auth) = parse_userauth(&s.data) else {
            return Step::Refuse(
                "signing data that is not an SSH login (ssh-keygen -Y sign, a commit, a \
                 token): only logins to allowed hosts are signed"
                    .into(),
            );
        };
        let Some(bound) = &self.last else {
            return Step::Refuse(
                "signing a login for a session never bound to a known, allowed host key".into(),
            );
        };
        if auth.session_id != bound.session_id {
            return Step::Refuse(
                "signing a login for another session than the one bound to a known, allowed host key"
                    .into(),
            );
        }
        if blob(&s.credential).is_none_or(|k| k != auth.key) {
            return Step::Refuse("signing a login that names another key".into());
        }
        if auth.host_key.is_some_and(|h| h != bound.host_key) {
            return Step::Refuse("signing a login that names another host key".into());
        }
        Step::Sign {
            destination: bound.destination.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use ssh_agent_lib::proto::Extension;
    use ssh_key::{PrivateKey, Signature};

    /// The host's key (a test key, made for these tests only).
    const HOST: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACB4TOlYn55aHBFy4pV0FLp/FiJy1Z6fY2uh1AMeDr4s8wAAAJBLXQCYS10A
mAAAAAtzc2gtZWQyNTUxOQAAACB4TOlYn55aHBFy4pV0FLp/FiJy1Z6fY2uh1AMeDr4s8w
AAAEDMz045QDe2nFtp673/tQbL9Gf+/Q6FrrK+rbbSrqRA8XhM6VifnlocEXLilXQUun8W
InLVnp9ja6HUAx4OvizzAAAAB3Jvb3RAdm0BAgMEBQY=
-----END OPENSSH PRIVATE KEY-----
";
    /// The user's public key.
    const USER: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP6kS+yjoyQgSMUwrGmYb1S+Iy3lOlDrCFm+uHOAEZmk";

    fn host() -> PrivateKey {
        PrivateKey::from_openssh(HOST).unwrap()
    }
    fn user() -> KeyData {
        ssh_key::PublicKey::from_openssh(USER)
            .unwrap()
            .key_data()
            .clone()
    }

    /// Trusts the test host's key alone, as `git.test:22`.
    struct OneHost;
    impl HostKeys for OneHost {
        fn allowed(&self, key: &KeyData) -> Result<String, String> {
            if key == host().public_key().key_data() {
                Ok("git.test:22".into())
            } else {
                Err("not a known host".into())
            }
        }
    }

    fn encode(req: Request) -> Vec<u8> {
        let mut out = vec![];
        req.encode(&mut out).unwrap();
        out
    }

    fn bind_by(key: &PrivateKey, sid: &[u8], signed: &[u8], forwarding: bool) -> Vec<u8> {
        let signature: Signature = signature::Signer::try_sign(key, signed).unwrap();
        let bind = SessionBind {
            host_key: key.public_key().key_data().clone(),
            session_id: sid.to_vec(),
            signature,
            is_forwarding: forwarding,
        };
        encode(Request::Extension(Extension::new_message(bind).unwrap()))
    }

    fn bind(sid: &[u8]) -> Vec<u8> {
        bind_by(&host(), sid, sid, false)
    }

    fn string(out: &mut Vec<u8>, s: &[u8]) {
        s.encode(out).unwrap();
    }

    /// The data ssh asks its agent to sign for a `publickey` login.
    fn userauth(sid: &[u8], key: &KeyData, hostbound: Option<&KeyData>) -> Vec<u8> {
        userauth_signed(sid, key, hostbound, 1)
    }

    fn userauth_signed(sid: &[u8], key: &KeyData, hostbound: Option<&KeyData>, sig: u8) -> Vec<u8> {
        let method: &[u8] = if hostbound.is_some() {
            HOSTBOUND
        } else {
            b"publickey"
        };
        userauth_raw(
            sid,
            USERAUTH_REQUEST,
            b"ssh-connection",
            method,
            sig,
            key,
            hostbound,
        )
    }

    fn userauth_raw(
        sid: &[u8],
        msg_type: u8,
        service: &[u8],
        method: &[u8],
        sig: u8,
        key: &KeyData,
        hostbound: Option<&KeyData>,
    ) -> Vec<u8> {
        let mut d = vec![];
        string(&mut d, sid);
        d.push(msg_type);
        string(&mut d, b"git");
        string(&mut d, service);
        string(&mut d, method);
        d.push(sig);
        string(&mut d, b"ssh-ed25519");
        string(&mut d, &blob(key).unwrap());
        if let Some(h) = hostbound {
            string(&mut d, &blob(h).unwrap());
        }
        d
    }

    fn sign(key: &KeyData, data: Vec<u8>) -> Vec<u8> {
        encode(Request::SignRequest(SignRequest {
            credential: key.clone().into(),
            data,
            flags: 0,
        }))
    }

    fn refused(s: Step) -> String {
        match s {
            Step::Refuse(why) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    fn signed(s: Step) -> bool {
        matches!(s, Step::Sign { destination } if destination == "git.test:22")
    }

    #[test]
    fn a_login_to_a_bound_known_host_is_signed() {
        let mut c = Connection::default();
        assert_eq!(
            c.step(&encode(Request::RequestIdentities), &OneHost),
            Step::Forward
        );
        assert_eq!(
            c.step(&bind(b"session-1"), &OneHost),
            Step::Bound {
                destination: "git.test:22".into()
            }
        );
        assert!(signed(c.step(
            &sign(&user(), userauth(b"session-1", &user(), None)),
            &OneHost
        )));
        let hk = host().public_key().key_data().clone();
        assert!(signed(c.step(
            &sign(&user(), userauth(b"session-1", &user(), Some(&hk))),
            &OneHost
        )));
    }

    #[test]
    fn signing_without_a_bind_or_for_another_session_is_refused() {
        let mut c = Connection::default();
        let why = refused(c.step(
            &sign(&user(), userauth(b"session-1", &user(), None)),
            &OneHost,
        ));
        assert!(why.contains("never bound"), "{why}");
        c.step(&bind(b"session-1"), &OneHost);
        let why = refused(c.step(
            &sign(&user(), userauth(b"session-2", &user(), None)),
            &OneHost,
        ));
        assert!(why.contains("another session"), "{why}");
        // The login names another key than the one asked to sign.
        let other = host().public_key().key_data().clone();
        let why = refused(c.step(
            &sign(&user(), userauth(b"session-1", &other, None)),
            &OneHost,
        ));
        assert!(why.contains("another key"), "{why}");
        // A hostbound login naming another host key.
        let why = refused(c.step(
            &sign(&user(), userauth(b"session-1", &user(), Some(&user()))),
            &OneHost,
        ));
        assert!(why.contains("another host key"), "{why}");
        // Only the last bind counts.
        c.step(&bind(b"session-2"), &OneHost);
        refused(c.step(
            &sign(&user(), userauth(b"session-1", &user(), None)),
            &OneHost,
        ));
        assert!(signed(c.step(
            &sign(&user(), userauth(b"session-2", &user(), None)),
            &OneHost
        )));
    }

    #[test]
    fn arbitrary_data_is_never_signed() {
        let mut c = Connection::default();
        c.step(&bind(b"session-1"), &OneHost);
        // What `ssh-keygen -Y sign` asks: an SSHSIG blob.
        let why = refused(c.step(&sign(&user(), b"SSHSIG\0\0\0\x03git...".to_vec()), &OneHost));
        assert!(why.contains("not an SSH login"), "{why}");
        // A login with trailing bytes, without a signature flag, for another service.
        let mut trailing = userauth(b"session-1", &user(), None);
        trailing.push(0);
        refused(c.step(&sign(&user(), trailing), &OneHost));
        assert!(parse_userauth(&userauth_signed(b"session-1", &user(), None, 0)).is_none());
        let d = userauth_signed(b"session-1", &user(), None, 0);
        refused(c.step(&sign(&user(), d), &OneHost));
        assert_eq!(
            parse_userauth(&userauth(b"session-1", &user(), None)),
            Some(Userauth {
                session_id: b"session-1".to_vec(),
                key: blob(&user()).unwrap(),
                host_key: None
            })
        );
        // Each field that makes it a login, changed alone: the message type, the
        // service, the method, an empty session ID.
        let u = user();
        let ok = |sid: &[u8], t: u8, service: &[u8], method: &[u8]| {
            parse_userauth(&userauth_raw(sid, t, service, method, 1, &u, None)).is_some()
        };
        assert!(ok(b"s", USERAUTH_REQUEST, b"ssh-connection", b"publickey"));
        assert!(!ok(
            b"s",
            USERAUTH_REQUEST + 1,
            b"ssh-connection",
            b"publickey"
        ));
        assert!(!ok(b"s", USERAUTH_REQUEST, b"ssh-userauth", b"publickey"));
        assert!(!ok(b"s", USERAUTH_REQUEST, b"ssh-connection", b"hostbased"));
        assert!(!ok(b"", USERAUTH_REQUEST, b"ssh-connection", b"publickey"));
        // The hostbound method without its host key is cut short.
        assert!(!ok(b"s", USERAUTH_REQUEST, b"ssh-connection", HOSTBOUND));
    }

    #[test]
    fn bad_binds_are_refused_and_unbind_the_connection() {
        let mut c = Connection::default();
        c.step(&bind(b"session-1"), &OneHost);
        // Forwarding.
        let why = refused(c.step(
            &bind_by(&host(), b"session-1", b"session-1", true),
            &OneHost,
        ));
        assert!(why.contains("forwarding"), "{why}");
        refused(c.step(
            &sign(&user(), userauth(b"session-1", &user(), None)),
            &OneHost,
        ));
        // A signature over something else than the session ID.
        let why = refused(c.step(
            &bind_by(&host(), b"session-1", b"session-X", false),
            &OneHost,
        ));
        assert!(why.contains("does not verify"), "{why}");
        c.step(&bind(b"session-1"), &OneHost);
        assert!(signed(c.step(
            &sign(&user(), userauth(b"session-1", &user(), None)),
            &OneHost
        )));
        struct NoHost;
        impl HostKeys for NoHost {
            fn allowed(&self, _: &KeyData) -> Result<String, String> {
                Err("the network policy does not allow it".into())
            }
        }
        let why = refused(c.step(&bind(b"session-1"), &NoHost));
        assert!(why.contains("does not allow"), "{why}");
        refused(c.step(
            &sign(&user(), userauth(b"session-1", &user(), None)),
            &OneHost,
        ));
    }

    #[test]
    fn everything_else_is_refused() {
        let mut c = Connection::default();
        for msg in [
            vec![19u8],
            encode(Request::Lock("pw".into())),
            encode(Request::Unlock("pw".into())),
            encode(Request::RemoveIdentity(
                ssh_agent_lib::proto::RemoveIdentity {
                    credential: user().into(),
                },
            )),
            encode(Request::Extension(Extension {
                name: "query".into(),
                details: vec![].into(),
            })),
            vec![200u8],
            vec![11u8, 0],
        ] {
            refused(c.step(&msg, &OneHost));
        }
        // An add, whatever the key: the type alone refuses it.
        let add = ssh_agent_lib::proto::AddIdentity {
            credential: ssh_agent_lib::proto::PrivateCredential::Key {
                privkey: host().key_data().clone(),
                comment: "k".into(),
            },
        };
        let why = refused(c.step(&encode(Request::AddIdentity(add)), &OneHost));
        assert!(why.contains("add an identity"), "{why}");
    }
}
