//! TLS termination for the hosts of `[credentials]` (docs/credentials.md).
//!
//! A connection the proxy decided for an inject host, whose ClientHello names that
//! host, is answered with a leaf certificate for the name signed by the run's CA
//! ([`Inject`], made at start, its key only in the launcher's memory, the CA
//! constrained to the inject hosts by name constraints). The upstream connection is
//! TLS verified against the system's roots and `network.tls.extra_roots`. HTTP/1.1
//! flows in between, request by request: every request must name the decided host;
//! in its head (the query and every header, inside `Basic` credentials too; never the
//! path) — and, for credentials with `body = true`, in the body, streamed — the
//! sentinels of that host's credentials become their real values; a sentinel of any
//! other credential denies the request. The server is asked for `identity` encoding;
//! real values in the responses, and their base64, hex and percent-encoded forms, go
//! back as sentinels, in a body decoded first when the server compressed it all the
//! same (`proxy/encoding.rs`), across chunk boundaries.
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use hyper::header::{
    HeaderValue, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, HOST, PROXY_AUTHORIZATION,
    TRANSFER_ENCODING,
};
use hyper::{Request, Response, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, GeneralSubtree, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, NameConstraints,
};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::net::TcpStream;
use tokio::sync::Mutex as AsyncMutex;

use super::decide::Verdict;
use super::io::{Io, Prefixed};
use super::Proxy;
use super::Way;
use crate::credentials::{Carry, CredentialError, Leak, Secrets};
use sandpit_policy::host::{parse_authority, Host};

/// Largest body held whole (a request's sent with its new length, a response's
/// masked and sent with its new length); a longer one is streamed through the
/// same substitution (a request to a host with a `body = true` credential then
/// goes chunked: its length may change).
pub const MAX_BODY: usize = 1024 * 1024;

type Error = super::encoding::Error;
type Body = BoxBody<Bytes, Error>;

fn respond(code: u16, body: String) -> Response<Body> {
    super::forward::respond(code, body).map(|b| b.map_err(Error::from).boxed())
}

fn full(b: Bytes) -> Body {
    Full::new(b).map_err(|n| match n {}).boxed()
}

/// The run's certificate authority and credentials.
pub struct Inject {
    pub secrets: Secrets,
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    ca_pem: String,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
    upstream: Arc<ClientConfig>,
    provider: Arc<CryptoProvider>,
}

impl std::fmt::Debug for Inject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inject")
            .field("secrets", &self.secrets)
            .finish_non_exhaustive()
    }
}

fn authority_err(e: impl std::fmt::Display) -> CredentialError {
    CredentialError::Authority(e.to_string())
}

/// Validity of the run's certificates: from a day ago (clocks drift) to 30 days on.
fn validity(p: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::days(1);
    p.not_after = now + time::Duration::days(30);
}

impl Inject {
    /// A new CA for `secrets`' hosts (name-constrained to them), and the client
    /// configuration that verifies upstream servers against `roots`.
    pub fn new(
        secrets: Secrets,
        roots: Vec<CertificateDer<'static>>,
    ) -> Result<Inject, CredentialError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut hosts: Vec<String> = secrets.iter().flat_map(|s| s.hosts.clone()).collect();
        hosts.sort();
        hosts.dedup();
        let key = KeyPair::generate().map_err(authority_err)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(
            DnType::CommonName,
            format!(
                "sandpit run CA {}",
                crate::sys::random_hex(4).map_err(authority_err)?
            ),
        );
        params
            .distinguished_name
            .push(DnType::OrganizationName, "sandpit (per-run, credentials)");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.name_constraints = Some(NameConstraints {
            permitted_subtrees: hosts
                .iter()
                .map(|h| GeneralSubtree::DnsName(h.clone()))
                .collect(),
            excluded_subtrees: vec![],
        });
        validity(&mut params);
        let cert = params.self_signed(&key).map_err(authority_err)?;
        let ca_der = cert.der().clone();
        let ca_pem = cert.pem();
        let issuer = Issuer::new(params, key);

        let mut store = RootCertStore::empty();
        let (_added, _ignored) = store.add_parsable_certificates(roots);
        if store.is_empty() {
            return Err(CredentialError::Roots(
                "no usable root certificate to verify the credentials' hosts with".into(),
            ));
        }
        let mut upstream = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(authority_err)?
            .with_root_certificates(store)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Inject {
            secrets,
            issuer,
            ca_der,
            ca_pem,
            leaves: Mutex::default(),
            upstream: Arc::new(upstream),
            provider,
        })
    }

    /// The CA certificate (PEM): what the sandbox trusts.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Whether TLS to `host` is terminated.
    pub fn terminates(&self, host: &Host) -> bool {
        matches!(host, Host::Name(n) if self.secrets.inject_host(n))
    }

    /// The server configuration presenting a leaf for `name`, made once per name.
    fn server_config(&self, name: &str) -> Result<Arc<ServerConfig>, String> {
        if let Some(c) = self.leaves.lock().ok().and_then(|l| l.get(name).cloned()) {
            return Ok(c);
        }
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut p = CertificateParams::new(vec![name.to_string()]).map_err(|e| e.to_string())?;
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, name);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.use_authority_key_identifier_extension = true;
        validity(&mut p);
        let leaf = p.signed_by(&key, &self.issuer).map_err(|e| e.to_string())?;
        let chain = vec![leaf.der().clone(), self.ca_der.clone()];
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut cfg = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, der)
            .map_err(|e| e.to_string())?;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        let cfg = Arc::new(cfg);
        if let Ok(mut l) = self.leaves.lock() {
            l.insert(name.to_string(), cfg.clone());
        }
        Ok(cfg)
    }
}

/// One terminated connection.
struct Conn {
    proxy: Arc<Proxy>,
    inject: Arc<Inject>,
    way: Way,
    host: Host,
    name: String,
    port: u16,
    /// The upstream HTTP/1.1 connection; made again when the server closed it.
    sender: AsyncMutex<Option<hyper::client::conn::http1::SendRequest<Body>>>,
}

/// Terminate the client's TLS (its ClientHello, already checked against `host`, is
/// in `pending`), verify the server's, and carry HTTP/1.1 between them.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn serve<S: Io>(
    proxy: &Proxy,
    inject: &Arc<Inject>,
    way: Way,
    client: S,
    pending: BytesMut,
    upstream: TcpStream,
    host: &Host,
    port: u16,
) {
    let hs = host.to_string();
    let Host::Name(name) = host else { return };
    let cfg = match inject.server_config(name) {
        Ok(c) => c,
        Err(e) => {
            proxy.deny(
                way,
                &hs,
                port,
                format!("making a certificate for {hs}: {e}"),
            );
            return;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    let io = Prefixed::new(pending.freeze(), client);
    let tls = match tokio::time::timeout(proxy.cfg.handshake_timeout, acceptor.accept(io)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            proxy.deny(way, &hs, port, format!("{}TLS with the client for {hs} (a credential's host, terminated by sandpit) failed: {e}; the client must trust the run's CA (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS)", crate::audit::ALLOWED_BUT));
            return;
        }
        Err(_) => {
            proxy.deny(way, &hs, port, "TLS handshake with the client timed out");
            return;
        }
    };
    let me = Arc::new(Conn {
        proxy: Arc::new(Proxy {
            decide: proxy.decide.clone(),
            resolver: proxy.resolver.clone(),
            audit: proxy.audit.clone(),
            cfg: proxy.cfg.clone(),
            // The tunnel was admitted under the run's connection limits when it
            // was made; the requests carried in it are not connections of their own.
            limits: super::limits::Limits::new(None, None),
        }),
        inject: inject.clone(),
        way,
        host: host.clone(),
        name: name.clone(),
        port,
        sender: AsyncMutex::new(None),
    });
    let first = match me.upstream_tls(upstream).await {
        Ok(s) => s,
        Err(why) => {
            let mut tls = tls;
            let v = Verdict::deny(None, why);
            proxy.record(way, &hs, port, None, &v);
            use tokio::io::AsyncWriteExt;
            let body = format!("sandpit: {}\n", v.reason);
            let _ = tls
                .write_all(&super::conn::simple_response(502, "Bad Gateway", &body))
                .await;
            let _ = tls.shutdown().await;
            return;
        }
    };
    *me.sender.lock().await = Some(first);
    let svc_me = me.clone();
    let svc = hyper::service::service_fn(move |req| {
        let me = svc_me.clone();
        async move { Ok::<_, std::convert::Infallible>(me.forward(req).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(proxy.cfg.handshake_timeout)
        .keep_alive(true)
        .serve_connection(TokioIo::new(tls), svc)
        .await;
}

impl Conn {
    /// TLS to the server over `tcp`, verified for the decided name; then HTTP/1.1.
    async fn upstream_tls(
        &self,
        tcp: TcpStream,
    ) -> Result<hyper::client::conn::http1::SendRequest<Body>, String> {
        let sn = ServerName::try_from(self.name.clone())
            .map_err(|e| format!("{} is no TLS server name: {e}", self.name))?;
        let connector = tokio_rustls::TlsConnector::from(self.inject.upstream.clone());
        let tls = match tokio::time::timeout(
            self.proxy.cfg.handshake_timeout,
            connector.connect(sn, tcp),
        )
        .await
        {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                return Err(format!(
                    "{}TLS to {}:{} could not be verified: {e}; sandpit trusts the system's roots and network.tls.extra_roots",
                    crate::audit::ALLOWED_BUT,
                    self.name, self.port
                ))
            }
            Err(_) => {
                return Err(format!(
                    "{}TLS to {}:{} timed out",
                    crate::audit::ALLOWED_BUT,
                    self.name,
                    self.port
                ))
            }
        };
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("upstream {}: {e}", self.name))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    fn leak(&self, leak: &Leak) -> Response<Body> {
        let v = Verdict::deny(Some(leak.rule.clone()), leak.reason(&self.name));
        self.proxy.record(self.way, &self.name, self.port, None, &v);
        respond(403, super::conn::forbidden_body(&self.name, self.port, &v))
    }

    fn refuse(&self, why: String) -> Response<Body> {
        let r = self.proxy.deny(self.way, &self.name, self.port, why);
        respond(403, format!("sandpit: {}\n", r.reason()))
    }

    async fn forward(&self, req: Request<Incoming>) -> Response<Body> {
        let secrets = &self.inject.secrets;
        if req.method() == hyper::Method::CONNECT {
            return self.refuse(format!(
                "CONNECT inside the connection to {} (terminated by sandpit)",
                self.name
            ));
        }
        // Every request names the decided host (as in a checked tunnel).
        let named = req
            .headers()
            .get(HOST)
            .map(|v| v.as_bytes().to_vec())
            .or_else(|| {
                req.uri()
                    .authority()
                    .map(|a| a.as_str().as_bytes().to_vec())
            });
        if let Some(n) = named {
            let same = std::str::from_utf8(&n)
                .ok()
                .and_then(|s| parse_authority(s).ok())
                .is_some_and(|(h, _)| h == self.host);
            if !same {
                return self.refuse(format!(
                    "HTTP request for {:?} inside a connection decided for {}",
                    String::from_utf8_lossy(&n),
                    self.name
                ));
            }
        }
        // [network.http]: method and path, decided on the request as the sandbox
        // wrote it (sentinels, never real values, in the reason).
        let target0 = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        let v = self.proxy.decide.http(
            req.method().as_str(),
            "https",
            &self.host,
            self.port,
            &target0,
        );
        if !v.allow {
            self.proxy.record(self.way, &self.name, self.port, None, &v);
            return respond(403, super::conn::forbidden_body(&self.name, self.port, &v));
        }
        let (mut parts, body) = req.into_parts();
        match rewrite_head(secrets, &self.name, &mut parts) {
            Ok(()) => {}
            Err(Refusal::Leak(l)) => return self.leak(&l),
            Err(Refusal::Bad(why)) => return self.refuse(why),
        }
        // The body: held whole when it is at most MAX_BODY long, else streamed.
        let leaked: Arc<Mutex<Option<Leak>>> = Arc::default();
        let body = match collect_bounded(body).await {
            Err(e) => return self.refuse(format!("reading the request body: {e}")),
            Ok(Collected::Whole(b)) => {
                let b = match secrets.body_to_host(&self.name, &b) {
                    Err(l) => return self.leak(&l),
                    Ok(Some(nb)) => Bytes::from(nb),
                    Ok(None) => b,
                };
                parts.headers.remove(TRANSFER_ENCODING);
                if !b.is_empty() || parts.headers.contains_key(CONTENT_LENGTH) {
                    parts
                        .headers
                        .insert(CONTENT_LENGTH, HeaderValue::from(b.len()));
                }
                full(b)
            }
            Ok(Collected::Long(prefix, rest)) => {
                if secrets.body_host(&self.name) {
                    // Its length may change: sent chunked.
                    parts.headers.remove(CONTENT_LENGTH);
                }
                ToHost {
                    inner: Chained {
                        prefix: prefix.into(),
                        rest,
                    },
                    inject: self.inject.clone(),
                    host: self.name.clone(),
                    carry: Carry::default(),
                    leaked: leaked.clone(),
                    done: false,
                }
                .boxed()
            }
        };
        let req = Request::from_parts(parts, body);
        let mut guard = self.sender.lock().await;
        let usable = match guard.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !usable {
            // The server closed the connection: decide and dial again.
            let tcp = match self
                .proxy
                .decide_and_dial(self.way, &self.host, self.port)
                .await
            {
                Ok(t) => t,
                Err(r) => return respond(502, format!("sandpit: {}\n", r.reason())),
            };
            match self.upstream_tls(tcp).await {
                Ok(s) => *guard = Some(s),
                Err(why) => {
                    let v = Verdict::deny(None, why);
                    self.proxy.record(self.way, &self.name, self.port, None, &v);
                    return respond(502, format!("sandpit: {}\n", v.reason));
                }
            }
        }
        let Some(sender) = guard.as_mut() else {
            return respond(502, "sandpit: no upstream connection\n".into());
        };
        let resp = sender.send_request(req).await;
        if let Some(l) = leaked.lock().ok().and_then(|mut l| l.take()) {
            // A sentinel of another credential in a streamed body: the bytes
            // before it went, it did not; the request was cut short.
            return self.leak(&l);
        }
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return respond(502, format!("sandpit: upstream {}: {e}\n", self.name)),
        };
        drop(guard);
        self.masked(resp).await
    }

    /// The response with every real value (and its encoded forms) in its headers and
    /// body replaced by the sentinel: a body of known length up to [`MAX_BODY`] whole
    /// (and sent with its new length), any other streamed (a value split across two
    /// chunks is masked all the same); a compressed body decoded first, one in a
    /// coding sandpit cannot read refused.
    async fn masked(&self, resp: Response<Incoming>) -> Response<Body> {
        let (mut parts, body) = resp.into_parts();
        let secrets = &self.inject.secrets;
        for (_, v) in parts.headers.iter_mut() {
            if let Some(hv) = secrets
                .mask(v.as_bytes())
                .and_then(|nv| HeaderValue::from_bytes(&nv).ok())
            {
                *v = hv;
            }
        }
        let mut codings = vec![];
        for v in parts.headers.get_all(CONTENT_ENCODING) {
            match super::encoding::codings(v.as_bytes()) {
                Ok(c) => codings.extend(c),
                Err(bad) => {
                    return self.refuse_response(format!(
                        "{}the response from {} is encoded with {bad:?}, which sandpit cannot decode to mask the credential in it; it was not passed on (sandpit asks for identity and decodes gzip, deflate, br and zstd)",
                        crate::audit::ALLOWED_BUT,
                        self.name
                    ))
                }
            }
        }
        if !codings.is_empty() && !body.is_end_stream() {
            parts.headers.remove(CONTENT_ENCODING);
            parts.headers.remove(CONTENT_LENGTH);
            let inject = self.inject.clone();
            let mut carry = Carry::default();
            let body = super::encoding::decoded(body, codings, move |b, last| {
                inject.secrets.mask_chunk(&mut carry, b, last)
            });
            return Response::from_parts(parts, body.boxed());
        }
        let known = body
            .size_hint()
            .exact()
            .is_some_and(|n| n <= MAX_BODY as u64);
        let body = if known {
            match collect_bounded(body).await {
                Ok(Collected::Whole(b)) => {
                    // The length changes only when something was masked (a HEAD
                    // answer keeps the length of the body it does not carry).
                    let m = secrets.mask_chunk(&mut Carry::default(), b.clone(), true);
                    if m != b {
                        parts
                            .headers
                            .insert(CONTENT_LENGTH, HeaderValue::from(m.len()));
                    }
                    return Response::from_parts(parts, full(m));
                }
                Ok(Collected::Long(prefix, rest)) => Chained {
                    prefix: prefix.into(),
                    rest,
                },
                Err(e) => return respond(502, format!("sandpit: upstream {}: {e}\n", self.name)),
            }
        } else {
            Chained {
                prefix: Default::default(),
                rest: body,
            }
        };
        // A masked chunk may change the length: hyper frames the body itself.
        parts.headers.remove(CONTENT_LENGTH);
        let body = Masked {
            inner: body,
            inject: self.inject.clone(),
            carry: Carry::default(),
            trailers: None,
            done: false,
        };
        Response::from_parts(parts, body.boxed())
    }

    fn refuse_response(&self, why: String) -> Response<Body> {
        let r = self.proxy.deny(self.way, &self.name, self.port, why);
        respond(502, format!("sandpit: {}\n", r.reason()))
    }
}

/// Why a request head is not sent.
#[derive(Debug)]
pub enum Refusal {
    /// A sentinel of a credential that does not go to the host.
    Leak(Leak),
    /// The head could not carry the real value.
    Bad(String),
}

/// A request head bound for `name` (a host whose TLS sandpit terminates), rewritten
/// in place: each sentinel of `name`'s credentials becomes its real value in the
/// query and every header value (inside `Basic` credentials too: decoded, replaced,
/// encoded again), never in the path, which names what the server stores (a file, a
/// branch); `Proxy-Authorization` is dropped (it is for no server); the server is
/// asked for `identity` encoding, so that the mask reads its answer. A sentinel of
/// another credential anywhere in the head is a [`Refusal::Leak`].
pub fn rewrite_head(
    secrets: &Secrets,
    name: &str,
    parts: &mut hyper::http::request::Parts,
) -> Result<(), Refusal> {
    let target = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target.as_str(), None),
    };
    secrets
        .check_path(name, path.as_bytes())
        .map_err(Refusal::Leak)?;
    let query = match query.map(|q| secrets.to_host(name, q.as_bytes())) {
        Some(Err(l)) => return Err(Refusal::Leak(l)),
        Some(Ok(Some(q))) => Some(String::from_utf8_lossy(&q).into_owned()),
        Some(Ok(None)) | None => None,
    };
    if query.is_some() || parts.uri.authority().is_some() {
        // Rewritten, or absolute form: sent on in origin form.
        let t = match &query {
            Some(q) => format!("{path}?{q}"),
            None => target.clone(),
        };
        parts.uri = Uri::try_from(t)
            .map_err(|_| Refusal::Bad("the request target with the credential is no URI".into()))?;
    }
    parts.headers.remove(PROXY_AUTHORIZATION);
    // Every header, every value of it.
    for (k, v) in parts.headers.iter_mut() {
        let plain = secrets.to_host(name, v.as_bytes()).map_err(Refusal::Leak)?;
        let now = plain.as_deref().unwrap_or(v.as_bytes());
        let basic = secrets.basic_to_host(name, now).map_err(Refusal::Leak)?;
        if let Some(nv) = basic.or(plain) {
            *v = HeaderValue::from_bytes(&nv)
                .map_err(|_| Refusal::Bad(format!("header {k} with the credential is invalid")))?;
        }
    }
    parts
        .headers
        .insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    Ok(())
}

/// A request head as bytes, parsed as hyper parses it on a terminated connection
/// (httparse), through [`rewrite_head`]: `Ok(None)` when it is no complete head (or
/// one hyper would refuse). For the fuzz target `proxy_mitm_head`.
pub fn rewrite_head_bytes(
    secrets: &Secrets,
    name: &str,
    data: &[u8],
) -> Result<Option<hyper::http::request::Parts>, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let (Ok(httparse::Status::Complete(_)), Some(method), Some(path)) =
        (req.parse(data), req.method, req.path)
    else {
        return Ok(None);
    };
    let mut b = Request::builder().method(method).uri(path);
    for h in req.headers.iter() {
        b = b.header(h.name, h.value);
    }
    let Ok(r) = b.body(()) else {
        return Ok(None);
    };
    let (mut parts, ()) = r.into_parts();
    rewrite_head(secrets, name, &mut parts)?;
    Ok(Some(parts))
}

/// A request body streamed to `host`: each chunk through
/// [`Secrets::body_chunk_to_host`]; a sentinel of another credential ends it in an
/// error (the request is cut short before the sentinel) and is kept in `leaked`.
struct ToHost<B> {
    inner: B,
    inject: Arc<Inject>,
    host: String,
    carry: Carry,
    leaked: Arc<Mutex<Option<Leak>>>,
    done: bool,
}

impl<B> hyper::body::Body for ToHost<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Error>,
{
    type Data = Bytes;
    type Error = Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let me = &mut *self;
        loop {
            if me.done {
                return Poll::Ready(None);
            }
            let (chunk, last) = match std::task::ready!(Pin::new(&mut me.inner).poll_frame(cx)) {
                Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => (d, false),
                    // Trailers of a streamed request are dropped.
                    Err(_) => continue,
                },
                None => (Bytes::new(), true),
            };
            me.done = last;
            match me
                .inject
                .secrets
                .body_chunk_to_host(&me.host, &mut me.carry, chunk, last)
            {
                Ok(out) if out.is_empty() => continue,
                Ok(out) => return Poll::Ready(Some(Ok(Frame::data(out)))),
                Err(l) => {
                    me.done = true;
                    if let Ok(mut slot) = me.leaked.lock() {
                        *slot = Some(l.clone());
                    }
                    return Poll::Ready(Some(Err(l.reason(&me.host).into())));
                }
            }
        }
    }
}

/// A response body streamed to the client: each chunk through
/// [`Secrets::mask_chunk`], the trailers' values masked.
struct Masked<B> {
    inner: B,
    inject: Arc<Inject>,
    carry: Carry,
    trailers: Option<hyper::HeaderMap>,
    done: bool,
}

impl<B> hyper::body::Body for Masked<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Error>,
{
    type Data = Bytes;
    type Error = Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let me = &mut *self;
        loop {
            if me.done {
                return Poll::Ready(me.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            let (chunk, last) = match std::task::ready!(Pin::new(&mut me.inner).poll_frame(cx)) {
                Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => (d, false),
                    Err(f) => {
                        if let Ok(mut t) = f.into_trailers() {
                            for (_, v) in t.iter_mut() {
                                if let Some(hv) = (me.inject.secrets.mask(v.as_bytes()))
                                    .and_then(|nv| HeaderValue::from_bytes(&nv).ok())
                                {
                                    *v = hv;
                                }
                            }
                            me.trailers = Some(t);
                        }
                        (Bytes::new(), true)
                    }
                },
                None => (Bytes::new(), true),
            };
            me.done = last;
            let out = me.inject.secrets.mask_chunk(&mut me.carry, chunk, last);
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
        }
    }
}

enum Collected {
    Whole(Bytes),
    Long(Vec<Bytes>, Incoming),
}

/// Read a request body whole when it is at most [`MAX_BODY`] bytes; otherwise the
/// part read so far and the rest.
async fn collect_bounded(mut body: Incoming) -> Result<Collected, hyper::Error> {
    if body.is_end_stream() {
        return Ok(Collected::Whole(Bytes::new()));
    }
    if body.size_hint().lower() > MAX_BODY as u64 {
        return Ok(Collected::Long(vec![], body));
    }
    let mut parts: Vec<Bytes> = vec![];
    let mut size = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        if let Ok(d) = frame.into_data() {
            size += d.len();
            parts.push(d);
            if size > MAX_BODY {
                return Ok(Collected::Long(parts, body));
            }
        }
        // Trailers are dropped: the body is sent with a length.
    }
    let mut all = BytesMut::with_capacity(size);
    for p in parts {
        all.extend_from_slice(&p);
    }
    Ok(Collected::Whole(all.freeze()))
}

/// A body whose first frames were read already.
struct Chained {
    prefix: std::collections::VecDeque<Bytes>,
    rest: Incoming,
}

impl hyper::body::Body for Chained {
    type Data = Bytes;
    type Error = hyper::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(b) = self.prefix.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.prefix.is_empty() && self.rest.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        let pre: u64 = self.prefix.iter().map(|b| b.len() as u64).sum();
        let r = self.rest.size_hint();
        let mut h = SizeHint::new();
        h.set_lower(r.lower() + pre);
        if let Some(u) = r.upper() {
            h.set_upper(u + pre);
        }
        h
    }
}

/// The policy's decisions, with one more rule in front: a name that carries a
/// sentinel of this run is neither resolved nor connected to (`sentinel.evil.example`
/// through a wildcard allow would carry it out in a DNS query or a TLS server name).
pub struct SentinelGuard {
    pub inner: Arc<dyn super::Decide>,
    pub inject: Arc<Inject>,
}

impl SentinelGuard {
    fn leak(&self, name: &str) -> Option<Verdict> {
        self.inject
            .secrets
            .any_sentinel(name.as_bytes())
            .map(|l| Verdict::deny(Some(l.rule.clone()), l.reason(name)))
    }
}

impl super::Decide for SentinelGuard {
    fn connect(&self, host: &Host, port: u16) -> Verdict {
        match self.leak(&host.to_string()) {
            Some(v) => v,
            None => self.inner.connect(host, port),
        }
    }
    fn connect_from(
        &self,
        host: &Host,
        port: u16,
        program: Option<&sandpit_policy::Program>,
    ) -> Verdict {
        match self.leak(&host.to_string()) {
            Some(v) => v,
            None => self.inner.connect_from(host, port, program),
        }
    }
    fn lookup(&self, name: &str) -> Verdict {
        match self.leak(name) {
            Some(v) => v,
            None => self.inner.lookup(name),
        }
    }
    fn static_answers(&self, name: &str) -> Option<Vec<std::net::IpAddr>> {
        self.inner.static_answers(name)
    }
    fn names_address(&self, addr: std::net::IpAddr) -> bool {
        self.inner.names_address(addr)
    }
    fn resolved(&self, host: &Host, port: u16, addr: std::net::IpAddr) -> Verdict {
        self.inner.resolved(host, port, addr)
    }
    fn http(&self, method: &str, scheme: &str, host: &Host, port: u16, target: &str) -> Verdict {
        self.inner.http(method, scheme, host, port, target)
    }
}
