//! dig (`@server`, -p, +tls/+https, -f batch files), nslookup and host (the server
//! operand). Queries to the configured resolver name no destination: sandpit
//! answers DNS itself.
use super::Analysis;
use crate::addr::{self, Dest};
use crate::getopt::{Spec, Tok};
use crate::Ctx;

const DIG: Spec = Spec {
    short_arg: "bcfkpqtxy",
    long_arg: &[],
    long_flag: &[],
    stop_at_operand: false,
    abbreviations: false,
};

fn server(s: &str, ports: &[u16], arg: &str, a: &mut Analysis) {
    match addr::clean_host(s, arg) {
        Ok(host) => {
            for p in ports {
                a.dest(Dest {
                    host: host.clone(),
                    port: Some(*p),
                    arg: arg.to_string(),
                });
            }
        }
        Err(e) => a.refusals.push(e),
    }
}

pub fn dig(args: &[String], ctx: &dyn Ctx, a: &mut Analysis, depth: usize) {
    let mut servers = Vec::new();
    let mut port: Option<u16> = None;
    let mut transport_port = 53;
    for t in DIG.tokenize(args) {
        match t {
            Tok::Operand(o) => {
                if let Some(s) = o.strip_prefix('@') {
                    servers.push(s.to_string());
                } else if let Some(opt) = o.strip_prefix('+') {
                    let name = opt.split('=').next().unwrap_or("").to_ascii_lowercase();
                    if name == "tls" || name.starts_with("tls-") && !name.contains("ca") {
                        transport_port = 853;
                    } else if name == "https" || name == "https-get" || name == "https-post" {
                        transport_port = 443;
                    } else if name.starts_with("http-plain") {
                        transport_port = 80;
                    }
                }
            }
            Tok::Short('p', Some(v)) => match addr::parse_port(&v, &format!("-p {v}")) {
                Ok(p) => port = Some(p),
                Err(e) => a.refusals.push(e),
            },
            Tok::Short('f', Some(v)) => {
                if depth > 0 || v == "-" {
                    a.refuse(
                        &format!("-f {v}"),
                        "nested or standard-input batch files cannot be judged",
                    );
                    continue;
                }
                match ctx.read_file(&v) {
                    Some(text) => {
                        for line in text.lines() {
                            let words: Vec<String> =
                                line.split_whitespace().map(str::to_string).collect();
                            dig(&words, ctx, a, depth + 1);
                        }
                    }
                    None => a.refuse(
                        &format!("-f {v}"),
                        "batch file cannot be read, so it cannot be judged",
                    ),
                }
            }
            _ => {}
        }
    }
    let p = port.unwrap_or(transport_port);
    for s in servers {
        server(&s, &[p], &format!("@{s}"), a);
    }
}

pub fn nslookup(args: &[String], a: &mut Analysis) {
    let mut port = 53;
    let mut ops = Vec::new();
    for w in args {
        if w.starts_with('-') && w != "-" {
            if let Some(p) = w.strip_prefix("-port=").or_else(|| w.strip_prefix("-po=")) {
                match addr::parse_port(p, w) {
                    Ok(p) => port = p,
                    Err(e) => a.refusals.push(e),
                }
            }
            if matches!(w.as_str(), "-version" | "-h" | "-help") {
                return;
            }
        } else {
            ops.push(w.clone());
        }
    }
    match ops.as_slice() {
        [] => a.refuse(
            "nslookup",
            "interactive nslookup can switch to any server; name the query on the command line",
        ),
        [name, ..] if name == "-" => a.refuse(
            "nslookup -",
            "interactive nslookup can switch to any server",
        ),
        [_] => {}
        [_, srv, ..] => server(srv, &[port], srv, a),
    }
}

const HOST: Spec = Spec {
    short_arg: "cNpRtWmy",
    long_arg: &[],
    long_flag: &[],
    stop_at_operand: false,
    abbreviations: false,
};

pub fn host(args: &[String], a: &mut Analysis) {
    let mut port = 53;
    let mut ops = Vec::new();
    for t in HOST.tokenize(args) {
        match t {
            Tok::Operand(o) => ops.push(o),
            Tok::Short('p', Some(v)) => match addr::parse_port(&v, &format!("-p {v}")) {
                Ok(p) => port = p,
                Err(e) => a.refusals.push(e),
            },
            _ => {}
        }
    }
    if let Some(srv) = ops.get(1) {
        server(srv, &[port], srv, a);
    }
}
