//! Plain HTTP proxy requests (absolute form), served by hyper: every request on the
//! connection — pipelined or kept alive — is decided on its own and sent over a fresh
//! upstream connection to exactly the address sandpit resolved.
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, HOST};
use hyper::{Request, Response, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};

use super::conn::{forbidden_body, Refusal};
use super::decide::Verdict;
use super::io::{Io, Prefixed};
use super::Proxy;
use super::Way;
use sandpit_policy::host::parse_authority;

type Body = BoxBody<Bytes, hyper::Error>;

pub(crate) async fn serve<S: Io>(proxy: Arc<Proxy>, io: Prefixed<S>, need_token: bool) {
    let p = proxy.clone();
    let svc = hyper::service::service_fn(move |req| {
        let p = p.clone();
        async move { Ok::<_, Infallible>(forward(&p, req, need_token).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(proxy.cfg.handshake_timeout)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

/// sandpit's own answer `code` with a plain-text `body`, marked as sandpit's
/// (`x-sandpit-denied`); the TLS-terminating side (`mitm.rs`) answers the same way.
pub(crate) fn respond(code: u16, body: String) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).map_err(|n| match n {}).boxed());
    *resp.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert("x-sandpit-denied", HeaderValue::from_static("1"));
    if code == 407 {
        h.insert(
            "proxy-authenticate",
            HeaderValue::from_static("Basic realm=\"sandpit\""),
        );
    }
    resp
}

fn bad(code: u16, why: &str) -> Response<Body> {
    respond(code, format!("sandpit: {why}\n"))
}

fn forbidden(host: &str, port: u16, v: &Verdict) -> Response<Body> {
    respond(403, forbidden_body(host, port, v))
}

async fn forward(proxy: &Proxy, mut req: Request<Incoming>, need_token: bool) -> Response<Body> {
    if need_token {
        let auth = req
            .headers()
            .get("proxy-authorization")
            .and_then(|v| v.to_str().ok());
        if !proxy.proxy_auth_ok(auth) {
            return bad(407, "this proxy belongs to another run");
        }
    }
    if req.method() == hyper::Method::CONNECT {
        return bad(
            400,
            "CONNECT must be the first request on its own connection",
        );
    }
    let uri = req.uri().clone();
    if uri.scheme_str() != Some("http") {
        return bad(
            400,
            "send absolute-form http:// requests, or CONNECT for anything else",
        );
    }
    let Some(authority) = uri.authority().map(|a| a.as_str().to_string()) else {
        return bad(400, "request URI has no host");
    };
    let host = match parse_authority(&authority) {
        Ok((h, _)) => h,
        Err(e) => {
            let r = proxy.deny(Way::HttpProxy, &authority, 0, e.to_string());
            return forbidden(&authority, 0, &Verdict::deny(None, r.reason().to_string()));
        }
    };
    let port = uri.port_u16().unwrap_or(80);
    if let Some(hv) = req.headers().get(HOST) {
        let same = hv
            .to_str()
            .ok()
            .and_then(|s| parse_authority(s).ok())
            .map(|(h, _)| h)
            .is_some_and(|h| h == host);
        if !same {
            let why = format!("request URI host {host} and Host header {hv:?} disagree");
            let r = proxy.deny(Way::HttpProxy, &host.to_string(), port, why);
            return forbidden(
                &host.to_string(),
                port,
                &Verdict::deny(None, r.reason().to_string()),
            );
        }
    }
    // Plain HTTP never carries a real value: a sentinel in the request is an attempt
    // to send one (to this host or any other).
    let uri_text = uri.to_string();
    let leak = proxy.leak_in(uri_text.as_bytes()).or_else(|| {
        req.headers()
            .iter()
            .filter(|(k, _)| *k != "proxy-authorization")
            .find_map(|(_, v)| proxy.leak_in(v.as_bytes()))
    });
    if let Some(leak) = leak {
        let hs = host.to_string();
        let v = Verdict::deny(Some(leak.rule.clone()), leak.reason(&hs));
        proxy.record(Way::HttpProxy, &hs, port, None, &v);
        return forbidden(&hs, port, &v);
    }
    let target = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let v = proxy
        .decide
        .http(req.method().as_str(), "http", &host, port, target);
    if !v.allow {
        let hs = host.to_string();
        proxy.record(Way::HttpProxy, &hs, port, None, &v);
        return forbidden(&hs, port, &v);
    }
    let upstream = match proxy.decide_and_dial(Way::HttpProxy, &host, port).await {
        Ok(u) => u,
        Err(Refusal::Policy(v)) => return forbidden(&host.to_string(), port, &v),
        Err(Refusal::Unreachable(why)) => return bad(502, &why),
        Err(Refusal::Limit(v)) => return bad(503, &v.reason),
    };
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(x) => x,
            Err(e) => return bad(502, &format!("upstream: {e}")),
        };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    match Uri::builder().path_and_query(path).build() {
        Ok(u) => *req.uri_mut() = u,
        Err(_) => return bad(400, "bad request path"),
    }
    let h = req.headers_mut();
    h.remove("proxy-authorization");
    h.remove("proxy-connection");
    if !h.contains_key(HOST) {
        if let Ok(v) = HeaderValue::from_str(&authority) {
            h.insert(HOST, v);
        }
    }
    match sender.send_request(req).await {
        Ok(resp) => resp.map(|b| b.boxed()),
        Err(e) => bad(502, &format!("upstream: {e}")),
    }
}
