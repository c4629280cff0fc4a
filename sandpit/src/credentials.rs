//! Credential injection (`[credentials.NAME]`, docs/credentials.md): the sandbox's
//! variable holds a per-run **sentinel**; the launcher reads the real value from the
//! credential's `source` before the command starts and keeps it in its own memory.
//! The proxy ([`crate::proxy::mitm`]) puts the real value in place of the sentinel in
//! requests to the credential's hosts (TLS terminated there alone) and denies a
//! sentinel seen going anywhere else.
//!
//! No real value is ever formatted: [`Secret`]'s `Debug` leaves it out, and every
//! error names the credential, its rule and the source, never what was read.
use std::path::{Path, PathBuf};

use aho_corasick::AhoCorasick;
use sandpit_policy::{CredentialSource, Policy};

/// What a sentinel starts with: recognisable in a log or a bug report.
pub const SENTINEL_PREFIX: &str = "sandpit-sentinel-";

/// Real values shorter than this are not masked in responses (a short value would
/// match ordinary text).
const MIN_MASKED: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("credentials.{name} ({rule}): {why}; the command was not started. {hint}")]
    Source {
        name: String,
        rule: String,
        why: String,
        hint: String,
    },
    #[error("network.tls: {0}; the command was not started")]
    Roots(String),
    #[error("the run's certificate authority: {0}; the command was not started")]
    Authority(String),
    #[error("{0}; the command was not started")]
    Setup(String),
}

impl CredentialError {
    /// A mistake in the configuration or the user's environment (a source that
    /// cannot be read, a bad root): exit 2, as the policy's errors.
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            CredentialError::Source { .. } | CredentialError::Roots(_)
        )
    }
}

/// `[credentials]` as a run carries it out, decided before any value is read (the
/// run plan holds it; `sandpit plan` lists it): which variables hold a sentinel,
/// where the run's CA and bundle are written, and the variables that point the
/// sandbox's TLS clients at them. `launch` reads the values and writes the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Each credential: its name, the sandbox variable that holds its sentinel and
    /// the hosts its real value goes to.
    pub sentinels: Vec<(String, String, Vec<String>)>,
    /// The run's CA certificate, in the run directory (read-only inside).
    pub ca: PathBuf,
    /// The system's roots and the run's CA, beside it.
    pub bundle: PathBuf,
    /// The variables that point TLS clients at them ([`ca_env`]).
    pub ca_env: Vec<(String, String)>,
}

impl Plan {
    /// The plan for `policy`'s credentials in a run whose directory is `run_dir`;
    /// `own_proxy`: the run's connections go through sandpit's own proxy, which
    /// alone can put the real values in. Fails where the run could not keep its
    /// promise: another proxy, or a file to mask without Linux's mount namespace.
    pub fn new(
        policy: &Policy,
        run_dir: &Path,
        own_proxy: bool,
    ) -> Result<Option<Plan>, CredentialError> {
        if policy.credentials.is_empty() {
            return Ok(None);
        }
        if !own_proxy && policy.network.mode.value != sandpit_policy::NetMode::Offline {
            return Err(CredentialError::Setup(
                "[credentials] needs sandpit's own proxy, and --proxy-socket names another".into(),
            ));
        }
        if cfg!(not(target_os = "linux")) {
            if let Some(c) = policy.credentials.iter().find(|c| c.file.is_some()) {
                return Err(CredentialError::Setup(format!(
                    "credentials.{}.file ({}): masking a file needs Linux's mount namespace; remove the key",
                    c.name,
                    c.file.as_deref().unwrap_or(Path::new("")).display()
                )));
            }
        }
        let ca = run_dir.join("credentials-ca.pem");
        let bundle = run_dir.join("credentials-bundle.pem");
        let text = |p: &Path| {
            p.to_str().map(str::to_string).ok_or_else(|| {
                CredentialError::Setup(format!(
                    "the run directory {} is not valid UTF-8, and TLS clients could not be pointed at the run's CA there",
                    run_dir.display()
                ))
            })
        };
        let ca_env = ca_env(&text(&bundle)?, &text(&ca)?);
        Ok(Some(Plan {
            sentinels: (policy.credentials.iter())
                .map(|c| (c.name.clone(), c.env.clone(), c.hosts.clone()))
                .collect(),
            ca,
            bundle,
            ca_env,
        }))
    }
}

/// One credential of this run.
pub struct Secret {
    pub name: String,
    /// The sandbox's variable.
    pub env: String,
    pub sentinel: String,
    value: Vec<u8>,
    /// Canonical host names the real value may go to.
    pub hosts: Vec<String>,
    /// `credentials.NAME "source" in FILE:LINE:COL`.
    pub rule: String,
    /// `file`: the path and its contents with the sentinel in place of the value.
    pub masked_file: Option<(PathBuf, String)>,
    /// `body = true`: replaced in request bodies too.
    pub body: bool,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("env", &self.env)
            .field("sentinel", &self.sentinel)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Secret {
    pub fn goes_to(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h == host)
    }
}

/// A sentinel found where it must not go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    pub name: String,
    pub rule: String,
}

impl Leak {
    /// The audit reason (also the 403's).
    pub fn reason(&self, host: &str) -> String {
        format!(
            "sentinel for credential {} sent to {host}: the real value goes only to the credential's hosts, over TLS; something tried to send it elsewhere",
            self.name
        )
    }
}

/// Every credential of a run, with matchers for their sentinels and real values.
pub struct Secrets {
    list: Vec<Secret>,
    sentinels: AhoCorasick,
    /// Real values long enough to mask (index into `masked`).
    values: AhoCorasick,
    masked: Vec<usize>,
    longest_sentinel: usize,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.list).finish()
    }
}

impl Secrets {
    /// Read every credential's real value and make its sentinel. Fails (naming the
    /// credential and its rule) when a source cannot be read or gives nothing usable.
    pub fn load(policy: &Policy) -> Result<Option<Secrets>, CredentialError> {
        if policy.credentials.is_empty() {
            return Ok(None);
        }
        let mut list = vec![];
        // A `command:` source runs on the host: never with anything the sandbox
        // of this run (or of a run before) could have left (hostcmd.rs).
        let writable = crate::hostcmd::Writable::of(policy);
        for c in &policy.credentials {
            let rule = c.origin.to_string();
            let err = |why: String, hint: &str| CredentialError::Source {
                name: c.name.clone(),
                rule: rule.clone(),
                why,
                hint: hint.to_string(),
            };
            let value = read_source(&c.source, &writable).map_err(|(why, hint)| err(why, hint))?;
            let value = trim_newline(value);
            if value.is_empty() {
                return Err(err(
                    format!("{} gave an empty value", c.source),
                    "put the secret there, or remove the credential",
                ));
            }
            if value.iter().any(|&b| b < 0x20 || b == 0x7f) {
                return Err(err(
                    format!("the value from {} holds a line break or another control character, which cannot go into an HTTP header", c.source),
                    "give the bare secret, on one line",
                ));
            }
            let hex = crate::sys::random_hex(16).map_err(|e| {
                err(
                    format!("making its sentinel: reading /dev/urandom: {e}"),
                    "sandpit needs /dev/urandom",
                )
            })?;
            let sentinel = format!("{SENTINEL_PREFIX}{}-{hex}", c.name);
            let masked_file = match &c.file {
                None => None,
                Some(p) => Some(mask_file(p, &value, &sentinel).map_err(|why| {
                    err(
                        why,
                        "point credentials.NAME.file at the file that holds this value, or remove the key",
                    )
                })?),
            };
            list.push(Secret {
                name: c.name.clone(),
                env: c.env.clone(),
                sentinel,
                value,
                hosts: c.hosts.clone(),
                rule,
                masked_file,
                body: c.body,
            });
        }
        Secrets::new(list).map(Some)
    }

    /// Secrets from parts (tests, benches).
    #[allow(clippy::type_complexity)]
    pub fn from_parts(
        parts: Vec<(String, String, String, Vec<u8>, Vec<String>)>,
    ) -> Result<Secrets, CredentialError> {
        let list = parts
            .into_iter()
            .map(|(name, env, sentinel, value, hosts)| Secret {
                rule: format!("credentials.{name}"),
                masked_file: None,
                body: true,
                name,
                env,
                sentinel,
                value,
                hosts,
            })
            .collect();
        Secrets::new(list)
    }

    fn new(list: Vec<Secret>) -> Result<Secrets, CredentialError> {
        let build = |pats: Vec<&[u8]>| {
            AhoCorasick::new(pats)
                .map_err(|e| CredentialError::Authority(format!("matching sentinels: {e}")))
        };
        let sentinels = build(list.iter().map(|s| s.sentinel.as_bytes()).collect())?;
        let masked: Vec<usize> = (0..list.len())
            .filter(|&i| list[i].value.len() >= MIN_MASKED)
            .collect();
        let values = build(masked.iter().map(|&i| list[i].value.as_slice()).collect())?;
        let longest_sentinel = list.iter().map(|s| s.sentinel.len()).max().unwrap_or(0);
        Ok(Secrets {
            list,
            sentinels,
            values,
            masked,
            longest_sentinel,
        })
    }

    /// The masked files: (path, contents with sentinels).
    pub fn masked_files(&self) -> impl Iterator<Item = (&str, &PathBuf, &String)> {
        self.list
            .iter()
            .filter_map(|s| s.masked_file.as_ref().map(|(p, c)| (s.name.as_str(), p, c)))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Secret> {
        self.list.iter()
    }

    /// The longest sentinel's length.
    pub fn longest_sentinel(&self) -> usize {
        self.longest_sentinel
    }

    /// The sandbox's variables: each credential's `env` = its sentinel.
    pub fn child_env(&self) -> Vec<(String, String)> {
        self.list
            .iter()
            .map(|s| (s.env.clone(), s.sentinel.clone()))
            .collect()
    }

    /// Whether `host` (canonical) is some credential's host: the proxy terminates
    /// TLS for it.
    pub fn inject_host(&self, host: &str) -> bool {
        self.list.iter().any(|s| s.goes_to(host))
    }

    /// The first sentinel in `data`, whoever's it is.
    pub fn any_sentinel(&self, data: &[u8]) -> Option<Leak> {
        self.sentinels
            .find(data)
            .map(|m| self.leak(m.pattern().as_usize()))
    }

    fn leak(&self, i: usize) -> Leak {
        let s = &self.list[i];
        Leak {
            name: s.name.clone(),
            rule: s.rule.clone(),
        }
    }

    /// `data` bound for `host` over a terminated connection: every sentinel of a
    /// credential of `host` replaced by its real value (`Ok(None)`: none in it). A
    /// sentinel of a credential that does not go to `host` is a [`Leak`].
    pub fn to_host(&self, host: &str, data: &[u8]) -> Result<Option<Vec<u8>>, Leak> {
        self.replace(host, data, None)
    }

    /// [`Secrets::to_host`] for a request body: only the credentials with `body =
    /// true` are replaced; the others' sentinels stay as they are (still a leak when
    /// bound for another credential's host).
    pub fn body_to_host(&self, host: &str, data: &[u8]) -> Result<Option<Vec<u8>>, Leak> {
        self.replace(host, data, Some(false))
    }

    /// [`Secrets::to_host`] for a request path: no sentinel is replaced there (a path
    /// names what the server stores: a file, a branch), but one bound for another
    /// credential's host is still a [`Leak`].
    pub fn check_path(&self, host: &str, data: &[u8]) -> Result<(), Leak> {
        self.replace(host, data, Some(true)).map(drop)
    }

    /// `skip`: `None` replaces every sentinel of `host`'s credentials; `Some(false)`
    /// those with `body = true`; `Some(true)` none.
    fn replace(
        &self,
        host: &str,
        data: &[u8],
        skip: Option<bool>,
    ) -> Result<Option<Vec<u8>>, Leak> {
        let mut out: Option<Vec<u8>> = None;
        let mut last = 0;
        for m in self.sentinels.find_iter(data) {
            let i = m.pattern().as_usize();
            let s = &self.list[i];
            if !s.goes_to(host) {
                return Err(self.leak(i));
            }
            match skip {
                Some(true) => continue,
                Some(false) if !s.body => continue,
                _ => {}
            }
            let o = out.get_or_insert_with(|| Vec::with_capacity(data.len() + 64));
            o.extend_from_slice(&data[last..m.start()]);
            o.extend_from_slice(&s.value);
            last = m.end();
        }
        Ok(out.map(|mut o| {
            o.extend_from_slice(&data[last..]);
            o
        }))
    }

    /// `data` coming back from a terminated host with every real value replaced by
    /// its sentinel (a server that echoes the key does not hand it to the sandbox);
    /// `None`: none in it.
    pub fn mask(&self, data: &[u8]) -> Option<Vec<u8>> {
        let mut out: Option<Vec<u8>> = None;
        let mut last = 0;
        for m in self.values.find_iter(data) {
            let s = &self.list[self.masked[m.pattern().as_usize()]];
            let o = out.get_or_insert_with(|| Vec::with_capacity(data.len()));
            o.extend_from_slice(&data[last..m.start()]);
            o.extend_from_slice(s.sentinel.as_bytes());
            last = m.end();
        }
        out.map(|mut o| {
            o.extend_from_slice(&data[last..]);
            o
        })
    }
}

/// `path` (links resolved) and its text with every `value` replaced by `sentinel`;
/// the error (never holding the value) when it cannot be read, is not text, or does
/// not hold the value.
fn mask_file(path: &Path, value: &[u8], sentinel: &str) -> Result<(PathBuf, String), String> {
    let real =
        std::fs::canonicalize(path).map_err(|e| format!("its file {}: {e}", path.display()))?;
    let text =
        std::fs::read(&real).map_err(|e| format!("reading its file {}: {e}", real.display()))?;
    let text = String::from_utf8(text)
        .map_err(|_| format!("its file {} is not UTF-8 text", real.display()))?;
    let value = std::str::from_utf8(value)
        .map_err(|_| "its value is not UTF-8, so it cannot be masked in a text file".to_string())?;
    if !text.contains(value) {
        return Err(format!(
            "its file {} does not hold the value read from the source",
            real.display()
        ));
    }
    Ok((real, text.replace(value, sentinel)))
}

fn trim_newline(mut v: Vec<u8>) -> Vec<u8> {
    while matches!(v.last(), Some(b'\n' | b'\r')) {
        v.pop();
    }
    v
}

/// Read a source; the error is (why, what to do), never the value. A command runs
/// as every program the launcher starts on the host (hostcmd.rs): `/bin/sh -c
/// CMD` in `/`, its `PATH` without the writable roots of the run.
fn read_source(
    src: &CredentialSource,
    writable: &crate::hostcmd::Writable,
) -> Result<Vec<u8>, (String, &'static str)> {
    match src {
        CredentialSource::Env(name) => match std::env::var_os(name) {
            Some(v) => Ok(std::os::unix::ffi::OsStringExt::into_vec(v)),
            None => Err((
                format!(
                    "the variable {name} (source env:{name}) is not set in sandpit's environment"
                ),
                "export it before `sandpit run`, or change the credential's source",
            )),
        },
        CredentialSource::File(path) => std::fs::read(path).map_err(|e| {
            (
                format!("reading {} (source file:): {e}", path.display()),
                "create the file with the secret in it, or change the credential's source",
            )
        }),
        CredentialSource::Command(cmd) => {
            let out = crate::hostcmd::command("/bin/sh", writable)
                .map_err(|e| {
                    (
                        format!("running `sh -c {cmd:?}`: {e}"),
                        "keep the programs a credential command runs outside the directories the sandbox can write",
                    )
                })?
                .arg("-c")
                .arg(cmd)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::inherit())
                .output()
                .map_err(|e| {
                    (
                        format!("running `sh -c {cmd:?}`: {e}"),
                        "check the command, or change the credential's source",
                    )
                })?;
            if !out.status.success() {
                return Err((
                    format!("`sh -c {cmd:?}` failed ({})", out.status),
                    "run it yourself in / to see why (sandpit runs it there, its PATH without the directories the sandbox can write; docs/credentials.md), or change the credential's source",
                ));
            }
            Ok(out.stdout)
        }
    }
}

/// Where the system's CA bundle usually is, first found wins (after the launcher's
/// own `SSL_CERT_FILE`).
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/ssl/cert.pem",
    "/usr/local/etc/openssl/cert.pem",
    "/opt/homebrew/etc/openssl@3/cert.pem",
];

/// The system CA bundle: its path and text.
pub fn system_bundle() -> Result<(PathBuf, String), CredentialError> {
    let own = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    for p in own
        .iter()
        .map(PathBuf::as_path)
        .chain(SYSTEM_BUNDLES.iter().map(Path::new))
    {
        if let Ok(text) = std::fs::read_to_string(p) {
            if text.contains("-----BEGIN CERTIFICATE-----") {
                return Ok((p.to_path_buf(), text));
            }
        }
    }
    Err(CredentialError::Roots(format!(
        "no system CA bundle found (looked at $SSL_CERT_FILE and {}); credentials need one to verify their hosts",
        SYSTEM_BUNDLES.join(", ")
    )))
}

/// The roots the proxy trusts for the hosts it terminates: the system bundle's and
/// those of `network.tls.extra_roots` (each file must hold at least one).
pub fn upstream_roots(
    policy: &Policy,
    system_pem: &str,
) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>, CredentialError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let mut roots: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(system_pem.as_bytes())
            .filter_map(Result::ok)
            .collect();
    for r in &policy.network.tls.extra_roots {
        let text = std::fs::read(&r.value).map_err(|e| {
            CredentialError::Roots(format!(
                "reading {} ({}): {e}; fix the path or remove the entry",
                r.value.display(),
                r.origin
            ))
        })?;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&text)
            .collect::<Result<_, _>>()
            .map_err(|e| {
                CredentialError::Roots(format!(
                    "{} ({}) is not a PEM file of certificates: {e}",
                    r.value.display(),
                    r.origin
                ))
            })?;
        if certs.is_empty() {
            return Err(CredentialError::Roots(format!(
                "{} ({}) holds no certificate (-----BEGIN CERTIFICATE-----)",
                r.value.display(),
                r.origin
            )));
        }
        roots.extend(certs);
    }
    Ok(roots)
}

/// Variables that point TLS clients at the run's CA: a bundle (the system's roots
/// plus the run's CA) for those that replace the default roots, the CA alone for
/// those that add to them (`NODE_EXTRA_CA_CERTS`).
pub fn ca_env(bundle: &str, ca: &str) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = (sandpit_policy::CA_BUNDLE_ENV.iter())
        .map(|k| (k.to_string(), bundle.to_string()))
        .collect();
    env.push((sandpit_policy::CA_ADD_ENV.into(), ca.into()));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Secrets {
        Secrets::from_parts(vec![
            (
                "openai".into(),
                "OPENAI_API_KEY".into(),
                "sandpit-sentinel-openai-aaaa".into(),
                b"sk-real-openai-value".to_vec(),
                vec!["api.openai.com".into()],
            ),
            (
                "gh".into(),
                "GH_TOKEN".into(),
                "sandpit-sentinel-gh-bbbb".into(),
                b"ghp_realgithubvalue".to_vec(),
                vec!["api.github.com".into()],
            ),
        ])
        .unwrap()
    }

    #[test]
    fn sentinels_become_values_only_for_their_hosts() {
        let s = secrets();
        let head = b"Authorization: Bearer sandpit-sentinel-openai-aaaa, again sandpit-sentinel-openai-aaaa";
        let out = s.to_host("api.openai.com", head).unwrap().unwrap();
        assert_eq!(
            out,
            b"Authorization: Bearer sk-real-openai-value, again sk-real-openai-value"
        );
        assert_eq!(s.to_host("api.openai.com", b"nothing here").unwrap(), None);
        let leak = s.to_host("api.github.com", head).unwrap_err();
        assert_eq!(leak.name, "openai");
        assert!(s.any_sentinel(b"x sandpit-sentinel-gh-bbbb").is_some());
        assert!(s.any_sentinel(b"sandpit-sentinel-gh-bbb").is_none());
    }

    #[test]
    fn real_values_are_masked_back() {
        let s = secrets();
        assert_eq!(
            s.mask(b"{\"key\":\"sk-real-openai-value\"}").unwrap(),
            b"{\"key\":\"sandpit-sentinel-openai-aaaa\"}"
        );
        assert_eq!(s.mask(b"clean"), None);
        assert!(!format!("{s:?}").contains("real"));
    }
}
