//! curl: URL operands, --url, proxies (-x/--proxy/--preproxy/--socks*), --resolve,
//! --connect-to, --doh-url, --dns-servers, config files (-K and the default curlrc)
//! and the alt-svc cache.
use super::Analysis;
use crate::addr::{self, NoScheme};
use crate::getopt::{Spec, Tok};
use crate::Ctx;

const SPEC: Spec = Spec {
    short_arg: "EKCbcdDFPHhmoQreXTUYyztuAwx",
    long_arg: &[
        // From `curl --help all` (7.88) plus options added since.
        "abstract-unix-socket",
        "alt-svc",
        "aws-sigv4",
        "cacert",
        "capath",
        "cert",
        "cert-type",
        "ciphers",
        "config",
        "connect-timeout",
        "connect-to",
        "continue-at",
        "cookie",
        "cookie-jar",
        "create-file-mode",
        "crlfile",
        "curves",
        "data",
        "data-ascii",
        "data-binary",
        "data-raw",
        "data-urlencode",
        "delegation",
        "dns-interface",
        "dns-ipv4-addr",
        "dns-ipv6-addr",
        "dns-servers",
        "doh-url",
        "dump-header",
        "egd-file",
        "engine",
        "etag-compare",
        "etag-save",
        "expect100-timeout",
        "form",
        "form-string",
        "ftp-account",
        "ftp-alternative-to-user",
        "ftp-method",
        "ftp-port",
        "ftp-ssl-ccc-mode",
        "happy-eyeballs-timeout-ms",
        "header",
        "help",
        "hostpubmd5",
        "hostpubsha256",
        "hsts",
        "interface",
        "json",
        "keepalive-time",
        "key",
        "key-type",
        "krb",
        "libcurl",
        "limit-rate",
        "local-port",
        "login-options",
        "mail-auth",
        "mail-from",
        "mail-rcpt",
        "max-filesize",
        "max-redirs",
        "max-time",
        "netrc-file",
        "noproxy",
        "oauth2-bearer",
        "output",
        "output-dir",
        "parallel-max",
        "pass",
        "pinnedpubkey",
        "proto",
        "proto-default",
        "proto-redir",
        "proxy-cacert",
        "proxy-capath",
        "proxy-cert",
        "proxy-cert-type",
        "proxy-ciphers",
        "proxy-crlfile",
        "proxy-header",
        "proxy-key",
        "proxy-key-type",
        "proxy-pass",
        "proxy-pinnedpubkey",
        "proxy-service-name",
        "proxy-tls13-ciphers",
        "proxy-tlsauthtype",
        "proxy-tlspassword",
        "proxy-tlsuser",
        "proxy-user",
        "proxy1.0",
        "pubkey",
        "quote",
        "random-file",
        "range",
        "rate",
        "referer",
        "request",
        "request-target",
        "resolve",
        "retry",
        "retry-delay",
        "retry-max-time",
        "sasl-authzid",
        "service-name",
        "socks4",
        "socks4a",
        "socks5",
        "socks5-gssapi-service",
        "socks5-hostname",
        "speed-limit",
        "speed-time",
        "stderr",
        "telnet-option",
        "tftp-blksize",
        "time-cond",
        "tls-max",
        "tls13-ciphers",
        "tlsauthtype",
        "tlspassword",
        "tlsuser",
        "trace",
        "trace-ascii",
        "unix-socket",
        "upload-file",
        "url",
        "url-query",
        "user",
        "user-agent",
        "write-out",
        "proxy",
        "preproxy",
        "variable",
        "ipfs-gateway",
        "ech",
        "ip-tos",
        "vlan-priority",
        "trace-config",
        "haproxy-clientip",
        "sigalgs",
        "ssl-sessions",
        "knownhosts",
        "etag-compare",
        "etag-save",
        "expand-url",
        "upload-flags",
        "proxy-tls13-ciphers",
    ],
    long_flag: &[
        "anyauth",
        "append",
        "basic",
        "cert-status",
        "compressed",
        "compressed-ssh",
        "create-dirs",
        "crlf",
        "digest",
        "disable",
        "disable-eprt",
        "disable-epsv",
        "disallow-username-in-url",
        "doh-cert-status",
        "doh-insecure",
        "fail",
        "fail-early",
        "fail-with-body",
        "false-start",
        "form-escape",
        "ftp-create-dirs",
        "ftp-pasv",
        "ftp-pret",
        "ftp-skip-pasv-ip",
        "ftp-ssl-ccc",
        "ftp-ssl-control",
        "get",
        "globoff",
        "haproxy-protocol",
        "head",
        "http0.9",
        "http1.0",
        "http1.1",
        "http2",
        "http2-prior-knowledge",
        "http3",
        "http3-only",
        "ignore-content-length",
        "include",
        "insecure",
        "ipv4",
        "ipv6",
        "junk-session-cookies",
        "list-only",
        "location",
        "location-trusted",
        "mail-rcpt-allowfails",
        "manual",
        "metalink",
        "negotiate",
        "netrc",
        "netrc-optional",
        "next",
        "no-alpn",
        "no-buffer",
        "no-clobber",
        "no-keepalive",
        "no-npn",
        "no-progress-meter",
        "no-sessionid",
        "ntlm",
        "ntlm-wb",
        "parallel",
        "parallel-immediate",
        "path-as-is",
        "post301",
        "post302",
        "post303",
        "progress-bar",
        "proxy-anyauth",
        "proxy-basic",
        "proxy-digest",
        "proxy-insecure",
        "proxy-negotiate",
        "proxy-ntlm",
        "proxy-ssl-allow-beast",
        "proxy-ssl-auto-client-cert",
        "proxy-tlsv1",
        "proxytunnel",
        "raw",
        "remote-header-name",
        "remote-name",
        "remote-name-all",
        "remote-time",
        "remove-on-error",
        "retry-all-errors",
        "retry-connrefused",
        "sasl-ir",
        "show-error",
        "silent",
        "socks5-basic",
        "socks5-gssapi",
        "socks5-gssapi-nec",
        "ssl",
        "ssl-allow-beast",
        "ssl-auto-client-cert",
        "ssl-no-revoke",
        "ssl-reqd",
        "ssl-revoke-best-effort",
        "sslv2",
        "sslv3",
        "styled-output",
        "suppress-connect-headers",
        "tcp-fastopen",
        "tcp-nodelay",
        "tftp-no-options",
        "tlsv1",
        "tlsv1.0",
        "tlsv1.1",
        "tlsv1.2",
        "tlsv1.3",
        "tr-encoding",
        "trace-time",
        "use-ascii",
        "verbose",
        "version",
        "xattr",
    ],
    stop_at_operand: false,
    abbreviations: true,
};

/// Options whose value is a proxy address.
const PROXY_OPTS: &[&str] = &[
    "proxy",
    "preproxy",
    "proxy1.0",
    "socks4",
    "socks4a",
    "socks5",
    "socks5-hostname",
];

const MAX_CONFIG_DEPTH: usize = 4;

pub fn analyze(args: &[String], ctx: &dyn Ctx, a: &mut Analysis, depth: usize) {
    if depth == 0 && !matches!(args.first().map(String::as_str), Some("-q" | "--disable")) {
        default_curlrc(ctx, a);
    }
    let mut urls: Vec<String> = Vec::new();
    let mut proto_default = "http".to_string();
    let mut connect_ports: Vec<(String, u16)> = Vec::new();
    for tok in SPEC.tokenize(args) {
        match tok {
            Tok::Operand(u) => urls.push(u),
            Tok::Short('x', Some(v)) => a.proxy(&v),
            Tok::Short('K', Some(v)) => config(&v, ctx, a, depth),
            Tok::Long(name, Some(v)) => match name {
                "url" => urls.push(v),
                "config" => config(&v, ctx, a, depth),
                "proto-default" => proto_default = v.to_ascii_lowercase(),
                "resolve" => resolve(&v, a),
                "connect-to" => connect_to(&v, a, &mut connect_ports),
                "doh-url" | "ipfs-gateway" => a.add_opt(
                    addr::parse_url(&v, NoScheme::NotUrl, false)
                        .and_then(|d| d.ok_or_else(|| addr::Refusal::new(&v, "not a network URL")))
                        .map(Some),
                ),
                "dns-servers" => {
                    for s in v.split(',') {
                        a.add(addr::host_port(s.trim(), Some(53), &v));
                    }
                }
                "alt-svc" if ctx.read_file(&v).is_some_and(|c| !c.trim().is_empty()) => {
                    a.refuse(&v, "an alt-svc cache can send requests to other hosts");
                }
                n if PROXY_OPTS.contains(&n) => a.proxy(&v),
                _ => {}
            },
            Tok::UnknownLong(name, Some(v)) if v.contains("://") => {
                let _ = name;
                a.url(&v, "http");
            }
            _ => {}
        }
    }
    let first_dest = a.dests.len();
    for u in &urls {
        a.add_opt(addr::parse_url(u, NoScheme::Assume(&proto_default), true));
    }
    // --connect-to ::HOST2: with an empty first host: the URL hosts on a new port.
    let url_hosts: Vec<String> = a.dests[first_dest..]
        .iter()
        .map(|d| d.host.clone())
        .collect();
    for (arg, port) in connect_ports {
        for h in &url_hosts {
            a.dest(addr::Dest {
                host: h.clone(),
                port: Some(port),
                arg: arg.clone(),
            });
        }
    }
}

/// `--resolve [+]host:port:addr[,addr]…` (a leading `-` removes an entry).
fn resolve(v: &str, a: &mut Analysis) {
    if v.starts_with('-') {
        return;
    }
    let s = v.trim_start_matches('+');
    let Some((_host, rest)) = split_field(s) else {
        a.refuse(v, "malformed --resolve entry");
        return;
    };
    let Some((port, addrs)) = split_field(rest) else {
        a.refuse(v, "malformed --resolve entry");
        return;
    };
    let port = if port == "*" {
        None
    } else {
        match addr::parse_port(port, v) {
            Ok(p) => Some(p),
            Err(e) => {
                a.refusals.push(e);
                return;
            }
        }
    };
    for ad in addrs.split(',') {
        let ad = ad.trim();
        match addr::clean_host(ad, v) {
            Ok(host) => a.dest(addr::Dest {
                host,
                port,
                arg: v.to_string(),
            }),
            Err(e) => a.refusals.push(e),
        }
    }
}

/// `--connect-to HOST1:PORT1:HOST2:PORT2`: the connection goes to HOST2:PORT2.
fn connect_to(v: &str, a: &mut Analysis, ports: &mut Vec<(String, u16)>) {
    let parsed = split_field(v)
        .and_then(|(_, r)| split_field(r))
        .and_then(|(_, r)| split_field(r));
    let Some((host2, port2)) = parsed else {
        a.refuse(v, "malformed --connect-to entry");
        return;
    };
    let port = if port2.is_empty() {
        None
    } else {
        match addr::parse_port(port2, v) {
            Ok(p) => Some(p),
            Err(e) => {
                a.refusals.push(e);
                return;
            }
        }
    };
    if host2.is_empty() {
        if let Some(p) = port {
            ports.push((v.to_string(), p));
        }
        return;
    }
    match addr::clean_host(host2, v) {
        Ok(host) => a.dest(addr::Dest {
            host,
            port,
            arg: v.to_string(),
        }),
        Err(e) => a.refusals.push(e),
    }
}

/// Split off one colon-separated field, honouring `[v6]` brackets.
fn split_field(s: &str) -> Option<(&str, &str)> {
    if s.starts_with('[') {
        let end = s.find(']')?;
        let rest = s[end + 1..].strip_prefix(':')?;
        return Some((&s[..end + 1], rest));
    }
    s.split_once(':')
}

fn default_curlrc(ctx: &dyn Ctx, a: &mut Analysis) {
    let mut candidates = Vec::new();
    if let Some(d) = ctx.env("CURL_HOME") {
        candidates.push(format!("{d}/.curlrc"));
    }
    if let Some(d) = ctx.env("XDG_CONFIG_HOME") {
        candidates.push(format!("{d}/curlrc"));
        candidates.push(format!("{d}/.curlrc"));
    }
    if let Some(d) = ctx.env("HOME") {
        candidates.push(format!("{d}/.curlrc"));
    }
    for c in candidates {
        if let Some(text) = ctx.read_file(&c) {
            config_text(&text, ctx, a, 1);
            return;
        }
    }
}

fn config(path: &str, ctx: &dyn Ctx, a: &mut Analysis, depth: usize) {
    if path == "-" {
        a.refuse("-K -", "a config read from standard input cannot be judged");
        return;
    }
    if depth >= MAX_CONFIG_DEPTH {
        a.refuse(path, "config files nested too deeply");
        return;
    }
    match ctx.read_file(path) {
        Some(text) => config_text(&text, ctx, a, depth + 1),
        None => a.refuse(path, "config file cannot be read, so it cannot be judged"),
    }
}

/// Turn curl config syntax (`name = value`, `--name value`, `-x value`, quoted
/// values) into an argument vector and analyze it.
fn config_text(text: &str, ctx: &dyn Ctx, a: &mut Analysis, depth: usize) {
    let mut args = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line
            .find(|c: char| c.is_whitespace() || c == '=' || c == ':')
            .unwrap_or(line.len());
        let (name, rest) = line.split_at(name_end);
        let rest = rest
            .trim_start()
            .trim_start_matches(['=', ':'])
            .trim_start();
        let value = if let Some(q) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = q.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('t') => v.push('\t'),
                        Some('n') => v.push('\n'),
                        Some('r') => v.push('\r'),
                        Some('v') => v.push('\u{b}'),
                        Some(o) => v.push(o),
                        None => {}
                    },
                    o => v.push(o),
                }
            }
            v
        } else {
            rest.split_whitespace().next().unwrap_or("").to_string()
        };
        if name.starts_with('-') {
            args.push(name.to_string());
        } else {
            args.push(format!("--{name}"));
        }
        if !value.is_empty() || rest.starts_with('"') {
            args.push(value);
        }
    }
    analyze(&args, ctx, a, depth);
}
