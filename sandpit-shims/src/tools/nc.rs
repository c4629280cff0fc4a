//! nc/ncat/netcat (`host port…`, proxies), telnet and ftp (`host [port]`, URLs).
//! The variants disagree on a few letters; where they do, the reading that judges
//! more words wins, because a port read as a host is refused, never let through.
use super::Analysis;
use crate::addr::{self, Dest};
use crate::getopt::{Spec, Tok};

const NC: Spec = Spec {
    // OpenBSD, traditional and ncat letters that take a value.
    short_arg: "IiMmOPpsTVWwXxcegGoq",
    long_arg: &[
        "sh-exec",
        "exec",
        "lua-exec",
        "max-conns",
        "wait",
        "idle-timeout",
        "output",
        "hex-dump",
        "source",
        "source-port",
        "proxy",
        "proxy-type",
        "proxy-auth",
        "proxy-dns",
        "allow",
        "allowfile",
        "deny",
        "denyfile",
        "ssl-cert",
        "ssl-key",
        "ssl-trustfile",
        "ssl-ciphers",
        "ssl-servername",
        "ssl-alpn",
        "delay",
    ],
    long_flag: &[
        "append-output",
        "send-only",
        "recv-only",
        "chat",
        "talk",
        "broker",
        "keep-open",
        "listen",
        "udp",
        "sctp",
        "telnet",
        "nodns",
        "crlf",
        "verbose",
        "version",
        "help",
        "ssl",
        "ssl-verify",
        "vsock",
        "zero",
        "unixsock",
        "no-shutdown",
    ],
    stop_at_operand: false,
    abbreviations: true,
};

const MAX_PORTS: usize = 64;

fn ports_for(host: &str, ports: &[String], a: &mut Analysis) {
    let arg = format!("{host} {}", ports.join(" "));
    let host = match addr::clean_host(host, &arg) {
        Ok(h) => h,
        Err(e) => {
            a.refusals.push(e);
            return;
        }
    };
    if ports.is_empty() {
        a.dest(Dest {
            host,
            port: None,
            arg,
        });
        return;
    }
    for p in ports {
        match addr::port_list(p, MAX_PORTS, &arg) {
            Ok(list) => {
                for port in list {
                    a.dest(Dest {
                        host: host.clone(),
                        port: Some(port),
                        arg: arg.clone(),
                    });
                }
            }
            Err(e) => a.refusals.push(e),
        }
    }
}

fn proxy_addr(v: &str, a: &mut Analysis) {
    a.add(addr::host_port(v, None, v));
}

/// `is_ncat`: nmap's ncat, where `-x` names a hex-dump file, not a proxy.
pub fn nc(args: &[String], is_ncat: bool, a: &mut Analysis) {
    let mut listen = false;
    let mut unix = false;
    let mut operands = Vec::new();
    for t in NC.tokenize(args) {
        match t {
            Tok::Operand(o) => operands.push(o),
            Tok::Short('l', None) | Tok::Long("listen", _) => listen = true,
            Tok::Short('U', None) | Tok::Long("unixsock", _) | Tok::Long("vsock", _) => unix = true,
            Tok::Short('x', Some(v)) if !is_ncat => proxy_addr(&v, a),
            Tok::Short('g', Some(v)) => a.add(addr::host_port(&v, None, &v)),
            Tok::Long("proxy", Some(v)) => proxy_addr(&v, a),
            Tok::MissingValue(v) => a.refuse(&v, "option is missing its value"),
            _ => {}
        }
    }
    if listen || unix {
        // A listener or a unix socket names no outbound destination. (Binding is the
        // kernel layer's business.)
        return;
    }
    let mut it = operands.into_iter();
    if let Some(host) = it.next() {
        let ports: Vec<String> = it.collect();
        ports_for(&host, &ports, a);
    }
}

const TELNET: Spec = Spec {
    short_arg: "beklnSX",
    long_arg: &[],
    long_flag: &[],
    stop_at_operand: false,
    abbreviations: false,
};

pub fn telnet(args: &[String], a: &mut Analysis) {
    let ops: Vec<String> = TELNET
        .tokenize(args)
        .into_iter()
        .filter_map(|t| match t {
            Tok::Operand(o) => Some(o),
            _ => None,
        })
        .collect();
    if args
        .iter()
        .any(|a| a == "-h" || a == "--help" || a == "--version" || a == "-V")
    {
        return;
    }
    match ops.split_first() {
        None => a.refuse(
            "telnet",
            "interactive telnet can open any host; name the host on the command line",
        ),
        Some((h, rest)) => {
            if rest.is_empty() {
                ports_for(h, &["23".to_string()], a)
            } else {
                ports_for(h, &rest[..1], a)
            }
        }
    }
}

const FTP: Spec = Spec {
    short_arg: "oPqrsTu",
    long_arg: &[],
    long_flag: &[],
    stop_at_operand: false,
    abbreviations: false,
};

pub fn ftp(args: &[String], a: &mut Analysis) {
    let mut hosts = Vec::new();
    let mut port: Option<String> = None;
    for t in FTP.tokenize(args) {
        match t {
            Tok::Short('u', Some(v)) => a.url(&v, "ftp"),
            Tok::Short('P', Some(v)) => port = Some(v),
            Tok::Operand(o) => {
                if addr::split_scheme(&o).is_some() {
                    a.url(&o, "ftp");
                } else {
                    hosts.push(o);
                }
            }
            _ => {}
        }
    }
    if args
        .iter()
        .any(|a| a == "--help" || a == "--version" || a == "-h")
    {
        return;
    }
    if hosts.is_empty() && a.dests.is_empty() && a.refusals.is_empty() {
        a.refuse(
            "ftp",
            "interactive ftp can open any host; name the host on the command line",
        );
        return;
    }
    // ftp host [port]; tnftp also takes several URLs or `user@host:path`.
    let mut it = hosts.into_iter();
    if let Some(h) = it.next() {
        let p = it.next().or(port).unwrap_or_else(|| "21".to_string());
        let h = match addr::strip_user(&h, &h) {
            Ok(x) => addr::scp_like_host(x).unwrap_or(x).to_string(),
            Err(e) => {
                a.refusals.push(e);
                return;
            }
        };
        ports_for(&h, &[p], a);
    }
}
