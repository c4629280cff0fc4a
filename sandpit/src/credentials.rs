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
use bytes::Bytes;
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
    /// Each sentinel (pattern `i` is `list[i]`'s).
    sentinels: Patterns,
    /// Each real value long enough to mask, and its encoded forms ([`mask_forms`]),
    /// each with what replaces it.
    values: Patterns,
    longest_sentinel: usize,
}

/// Byte patterns found leftmost-longest, each with its credential and what replaces
/// it; and, for streams, what a chunk's end may be the start of.
struct Patterns {
    ac: AhoCorasick,
    pats: Vec<Vec<u8>>,
    /// The credential (index into `Secrets::list`) of each pattern.
    owner: Vec<usize>,
    /// What replaces each pattern (masks; empty for sentinels, whose replacement
    /// depends on the host).
    with: Vec<Vec<u8>>,
    /// Patterns by their first byte.
    by_first: Vec<Vec<usize>>,
    longest: usize,
}

impl Patterns {
    fn new(found: Vec<(Vec<u8>, usize, Vec<u8>)>) -> Result<Patterns, CredentialError> {
        let mut pats = vec![];
        let mut owner = vec![];
        let mut with = vec![];
        for (p, o, w) in found {
            if p.is_empty() || pats.contains(&p) {
                continue;
            }
            pats.push(p);
            owner.push(o);
            with.push(w);
        }
        let ac = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(&pats)
            .map_err(|e| CredentialError::Authority(format!("matching sentinels: {e}")))?;
        let mut by_first = vec![vec![]; 256];
        for (i, p) in pats.iter().enumerate() {
            by_first[usize::from(p[0])].push(i);
        }
        let longest = pats.iter().map(Vec::len).max().unwrap_or(0);
        Ok(Patterns {
            ac,
            pats,
            owner,
            with,
            by_first,
            longest,
        })
    }

    /// The length of the longest end of `buf` that is the start (not the whole) of
    /// some pattern: what a stream holds back until the next chunk.
    fn partial_end(&self, buf: &[u8]) -> usize {
        let from = buf.len().saturating_sub(self.longest.saturating_sub(1));
        for i in from..buf.len() {
            let tail = &buf[i..];
            if self.by_first[usize::from(tail[0])]
                .iter()
                .any(|&p| self.pats[p].len() > tail.len() && self.pats[p].starts_with(tail))
            {
                return tail.len();
            }
        }
        0
    }

    /// One chunk of a stream (`carry`: what the last chunk held back) with each
    /// match that `with` gives a replacement for replaced; the end that may be the
    /// start of a match is held back in `carry` unless `last`. The result is the
    /// same whatever the chunks (a match split across two is found); a match
    /// starting before the held end is complete in the chunk, since no longer
    /// pattern could start there.
    fn stream<'a>(
        &'a self,
        carry: &mut Vec<u8>,
        chunk: Bytes,
        last: bool,
        mut with: impl FnMut(usize) -> Result<Option<&'a [u8]>, Leak>,
    ) -> Result<Bytes, Leak> {
        let buf = if carry.is_empty() {
            chunk
        } else {
            let mut b = std::mem::take(carry);
            b.extend_from_slice(&chunk);
            Bytes::from(b)
        };
        let cut = if last {
            buf.len()
        } else {
            buf.len() - self.partial_end(&buf)
        };
        let mut out: Option<Vec<u8>> = None;
        let mut done = 0;
        let mut end = cut;
        for m in self.ac.find_iter(&buf[..]) {
            if m.start() >= cut {
                break;
            }
            if let Some(r) = with(m.pattern().as_usize())? {
                let o = out.get_or_insert_with(|| Vec::with_capacity(buf.len() + 64));
                o.extend_from_slice(&buf[done..m.start()]);
                o.extend_from_slice(r);
                done = m.end();
            }
            end = end.max(m.end());
        }
        carry.extend_from_slice(&buf[end..]);
        Ok(match out {
            None => buf.slice(..end),
            Some(mut o) => {
                o.extend_from_slice(&buf[done..end]);
                Bytes::from(o)
            }
        })
    }
}

/// What one stream (a request or response body) holds back between its chunks:
/// the end of a chunk that may be the start of a sentinel or a real value.
#[derive(Debug, Default)]
pub struct Carry(Vec<u8>);

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
        let sentinels = Patterns::new(
            (list.iter().enumerate())
                .map(|(i, s)| (s.sentinel.as_bytes().to_vec(), i, vec![]))
                .collect(),
        )?;
        let values = Patterns::new(
            (list.iter().enumerate())
                .filter(|(_, s)| s.value.len() >= MIN_MASKED)
                .flat_map(|(i, s)| {
                    mask_forms(&s.value, s.sentinel.as_bytes())
                        .into_iter()
                        .map(move |(p, w)| (p, i, w))
                })
                .collect(),
        )?;
        let longest_sentinel = list.iter().map(|s| s.sentinel.len()).max().unwrap_or(0);
        Ok(Secrets {
            list,
            sentinels,
            values,
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
        (self.sentinels.ac.find(data))
            .map(|m| self.leak(self.sentinels.owner[m.pattern().as_usize()]))
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
        for m in self.sentinels.ac.find_iter(data) {
            let i = self.sentinels.owner[m.pattern().as_usize()];
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

    /// [`Secrets::body_to_host`] for one chunk of a request body streamed to `host`
    /// (`carry`: the stream's; `last`: its end): a sentinel split across two chunks
    /// is replaced (or found) all the same.
    pub fn body_chunk_to_host(
        &self,
        host: &str,
        carry: &mut Carry,
        chunk: Bytes,
        last: bool,
    ) -> Result<Bytes, Leak> {
        let p = &self.sentinels;
        p.stream(&mut carry.0, chunk, last, |m| {
            let s = &self.list[p.owner[m]];
            if !s.goes_to(host) {
                return Err(self.leak(p.owner[m]));
            }
            Ok(s.body.then_some(s.value.as_slice()))
        })
    }

    /// Whether some credential of `host` has `body = true` (a request body to it may
    /// change length).
    pub fn body_host(&self, host: &str) -> bool {
        self.list.iter().any(|s| s.body && s.goes_to(host))
    }

    /// An `Authorization: Basic` value bound for `host` (`user:password` in base64,
    /// what git sends for `https://x-access-token:TOKEN@host/`): a sentinel in the user
    /// or the password replaced as in [`Secrets::to_host`], and encoded again.
    /// `Ok(None)`: not Basic, or no sentinel in it.
    pub fn basic_to_host(&self, host: &str, value: &[u8]) -> Result<Option<Vec<u8>>, Leak> {
        use base64::Engine;
        let Some(b64) = value
            .get(..6)
            .filter(|s| s.eq_ignore_ascii_case(b"basic "))
            .map(|_| value[6..].trim_ascii())
        else {
            return Ok(None);
        };
        let lenient = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let Ok(plain) = lenient.decode(b64) else {
            return Ok(None);
        };
        Ok(self.to_host(host, &plain)?.map(|p| {
            let mut v = b"Basic ".to_vec();
            v.extend_from_slice(
                base64::engine::general_purpose::STANDARD
                    .encode(p)
                    .as_bytes(),
            );
            v
        }))
    }

    /// `data` coming back from a terminated host with every real value — and its
    /// base64, hex and percent-encoded forms ([`mask_forms`]) — replaced by its
    /// sentinel (a server that echoes the key does not hand it to the sandbox);
    /// `None`: none in it.
    pub fn mask(&self, data: &[u8]) -> Option<Vec<u8>> {
        let out = self.mask_chunk(&mut Carry::default(), Bytes::copy_from_slice(data), true);
        (out[..] != *data).then(|| out.to_vec())
    }

    /// [`Secrets::mask`] for one chunk of a response body (`carry`: the stream's;
    /// `last`: its end): a value split across two chunks is masked all the same.
    pub fn mask_chunk(&self, carry: &mut Carry, chunk: Bytes, last: bool) -> Bytes {
        let p = &self.values;
        match p.stream(&mut carry.0, chunk, last, |m| {
            Ok(Some(p.with[m].as_slice()))
        }) {
            Ok(b) => b,
            // The mask never refuses.
            Err(_) => Bytes::new(),
        }
    }
}

/// RFC 3986's unreserved characters: what every percent-encoder leaves as it is.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// At most this many of a value's distinct reserved characters are tried encoded and
/// not (2^n percent-encoded forms); beyond, the forms with all or none encoded.
const PERCENT_CHOICES: usize = 5;

/// The forms of `value` a response may carry it in, each with what replaces it:
/// - the value itself → the sentinel;
/// - its hex, lower and upper case → the sentinel's, in the same case;
/// - its base64 (standard and URL-safe alphabets) at each of the three alignments a
///   value inside a longer base64 string can have: the characters that encode only
///   the value's bits (those shared with a neighbouring byte are left, at most 4
///   bits at each end) → the same characters of the sentinel cut or repeated to the
///   value's length, so what surrounds them still decodes;
/// - its percent-encodings (upper and lower case escapes, every byte or only the
///   reserved ones, and each choice of which reserved characters are escaped, as
///   encoders differ on `/`, `:`, `+`, `=`; a space as `+` too) → the sentinel,
///   which needs no escape.
pub fn mask_forms(value: &[u8], sentinel: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    use base64::Engine;
    let mut forms = vec![(value.to_vec(), sentinel.to_vec())];
    let hex = |d: &[u8], upper: bool| -> Vec<u8> {
        let digits: &[u8; 16] = if upper {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        d.iter()
            .flat_map(|b| [digits[usize::from(b >> 4)], digits[usize::from(b & 15)]])
            .collect()
    };
    for upper in [false, true] {
        forms.push((hex(value, upper), hex(sentinel, upper)));
    }
    let filler: Vec<u8> = sentinel.iter().copied().cycle().take(value.len()).collect();
    for engine in [
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for k in 0..3usize {
            // Character i holds bits [6i, 6i+6); the value's are [8k, 8k+8n).
            let first = (8 * k).div_ceil(6);
            let end = (8 * (k + value.len())) / 6;
            let enc = |d: &[u8]| {
                let mut all = vec![0u8; k];
                all.extend_from_slice(d);
                engine.encode(all).into_bytes()
            };
            let (v, f) = (enc(value), enc(&filler));
            if end > first + 4 {
                forms.push((v[first..end].to_vec(), f[first..end].to_vec()));
            }
        }
    }
    // Percent-encodings.
    let mut reserved: Vec<u8> = value.iter().copied().filter(|&b| !unreserved(b)).collect();
    reserved.sort_unstable();
    reserved.dedup();
    let choices: Vec<u32> = if reserved.len() <= PERCENT_CHOICES {
        (0..(1u32 << reserved.len())).collect()
    } else {
        vec![0, 1]
    };
    let escape = |b: u8, upper: bool| {
        let mut e = vec![b'%'];
        e.extend(hex(&[b], upper));
        e
    };
    for upper in [false, true] {
        // Every byte escaped.
        forms.push((
            value.iter().flat_map(|&b| escape(b, upper)).collect(),
            sentinel.to_vec(),
        ));
        for &set in &choices {
            let escaped = |b: u8| match reserved.iter().position(|&r| r == b) {
                Some(_) if reserved.len() > PERCENT_CHOICES => set != 0,
                Some(i) => set & (1 << i) != 0,
                None => false,
            };
            for plus in [false, true] {
                let form: Vec<u8> = value
                    .iter()
                    .flat_map(|&b| match b {
                        b' ' if plus && escaped(b) => vec![b'+'],
                        b if escaped(b) => escape(b, upper),
                        b => vec![b],
                    })
                    .collect();
                forms.push((form, sentinel.to_vec()));
            }
        }
    }
    forms
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

    /// `data` through a stream cut at `cuts`.
    fn streamed(s: &Secrets, data: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut carry = Carry::default();
        let mut out = vec![];
        let mut from = 0;
        for &c in cuts {
            out.extend_from_slice(&s.mask_chunk(
                &mut carry,
                Bytes::copy_from_slice(&data[from..c]),
                false,
            ));
            from = c;
        }
        out.extend_from_slice(&s.mask_chunk(
            &mut carry,
            Bytes::copy_from_slice(&data[from..]),
            true,
        ));
        out
    }

    #[test]
    fn a_value_split_across_chunks_is_masked_as_whole() {
        let s = secrets();
        let data = b"x sk-real-openai-value y ghp_realgithubvalue z sk-real-openai-v";
        let whole = s.mask(data).unwrap();
        assert_eq!(
            whole,
            b"x sandpit-sentinel-openai-aaaa y sandpit-sentinel-gh-bbbb z sk-real-openai-v"
        );
        for a in 0..data.len() {
            for b in a..data.len() {
                assert_eq!(streamed(&s, data, &[a, b]), whole, "cut at {a}, {b}");
            }
        }
        // Nothing that could start a value is held back past the end of a chunk.
        let mut carry = Carry::default();
        let out = s.mask_chunk(&mut carry, Bytes::from_static(b"data: {}\n\n"), false);
        assert_eq!(&out[..], b"data: {}\n\n");
    }

    #[test]
    fn a_sentinel_split_across_body_chunks_is_replaced_or_refused() {
        let s = secrets();
        let data = b"k=sandpit-sentinel-openai-aaaa&x=1";
        for cut in 0..data.len() {
            let mut carry = Carry::default();
            let mut out = vec![];
            for (chunk, last) in [(&data[..cut], false), (&data[cut..], true)] {
                let o = s
                    .body_chunk_to_host(
                        "api.openai.com",
                        &mut carry,
                        Bytes::copy_from_slice(chunk),
                        last,
                    )
                    .unwrap();
                out.extend_from_slice(&o);
            }
            assert_eq!(out, b"k=sk-real-openai-value&x=1", "cut at {cut}");
            let mut carry = Carry::default();
            let first = s.body_chunk_to_host(
                "api.github.com",
                &mut carry,
                Bytes::copy_from_slice(&data[..cut]),
                false,
            );
            let leak = first.and_then(|_| {
                s.body_chunk_to_host(
                    "api.github.com",
                    &mut carry,
                    Bytes::copy_from_slice(&data[cut..]),
                    true,
                )
            });
            assert_eq!(leak.unwrap_err().name, "openai", "cut at {cut}");
        }
    }

    #[test]
    fn basic_credentials_are_decoded_replaced_and_encoded_again() {
        use base64::Engine;
        let s = secrets();
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let v = format!("Basic {}", b64("x-access-token:sandpit-sentinel-gh-bbbb"));
        let out = s
            .basic_to_host("api.github.com", v.as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            format!("Basic {}", b64("x-access-token:ghp_realgithubvalue")).as_bytes()
        );
        // In the user too, case-insensitive scheme.
        let v = format!("basic {}", b64("sandpit-sentinel-gh-bbbb:x"));
        assert!(s
            .basic_to_host("api.github.com", v.as_bytes())
            .unwrap()
            .is_some());
        // Another credential's sentinel: a leak; no sentinel, or not Basic: nothing.
        let v = format!("Basic {}", b64("u:sandpit-sentinel-openai-aaaa"));
        assert!(s.basic_to_host("api.github.com", v.as_bytes()).is_err());
        assert_eq!(
            s.basic_to_host("api.github.com", format!("Basic {}", b64("u:p")).as_bytes())
                .unwrap(),
            None
        );
        assert_eq!(
            s.basic_to_host("api.github.com", b"Bearer abc").unwrap(),
            None
        );
    }

    #[test]
    fn encoded_forms_are_masked_at_every_alignment() {
        use base64::Engine;
        let s = secrets();
        let value = b"sk-real-openai-value";
        for engine in [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::URL_SAFE,
        ] {
            for k in 0..3 {
                let mut d = b"abc"[..k].to_vec();
                d.extend_from_slice(value);
                d.extend_from_slice(b" and more");
                let enc = engine.encode(&d);
                let out = s.mask(enc.as_bytes()).expect("masked");
                assert_eq!(out.len(), enc.len());
                let back = engine.decode(&out).unwrap();
                assert!(!back.windows(value.len()).any(|w| w == value), "k={k}");
                // The middle decodes to the sentinel's start.
                assert!(
                    back.windows(8)
                        .any(|w| w == b"ntinel-o" || w == b"-sentine"),
                    "k={k}: {back:?}"
                );
            }
        }
        let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
        let out = s.mask(hex.as_bytes()).unwrap();
        let want: String = b"sandpit-sentinel-openai-aaaa"
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(out, want.as_bytes());
        assert!(s.mask(hex.to_ascii_uppercase().as_bytes()).is_some());
        let all: String = value.iter().map(|b| format!("%{b:02X}")).collect();
        assert_eq!(
            s.mask(all.as_bytes()).unwrap(),
            b"sandpit-sentinel-openai-aaaa"
        );
        // Reserved characters: each encoder's choice of which to escape.
        let t = Secrets::from_parts(vec![(
            "t".into(),
            "T".into(),
            "sandpit-sentinel-t-cccc".into(),
            b"a/b+c=d:e secret".to_vec(),
            vec!["h.test".into()],
        )])
        .unwrap();
        for form in [
            "a%2Fb%2Bc%3Dd%3Ae%20secret",
            "a/b%2Bc%3Dd%3Ae%20secret",
            "a/b%2bc%3dd%3ae+secret",
            "a/b+c=d:e%20secret",
        ] {
            assert_eq!(
                t.mask(form.as_bytes()).unwrap(),
                b"sandpit-sentinel-t-cccc",
                "{form}"
            );
        }
    }
}
