//! wget: URL operands, -B/--base, -i/--input-file, --config, -e/--execute wgetrc
//! commands (proxies, input, base) and the default wgetrc files.
use super::Analysis;
use crate::getopt::{Spec, Tok};
use crate::Ctx;

const SPEC: Spec = Spec {
    short_arg: "eoaiBtOTwQPUlARDIXn",
    long_arg: &[
        "accept",
        "accept-regex",
        "append-output",
        "backups",
        "base",
        "bind-address",
        "body-data",
        "body-file",
        "ca-certificate",
        "ca-directory",
        "certificate",
        "certificate-type",
        "ciphers",
        "compression",
        "config",
        "connect-timeout",
        "crl-file",
        "cut-dirs",
        "default-page",
        "directory-prefix",
        "dns-timeout",
        "domains",
        "exclude-directories",
        "exclude-domains",
        "execute",
        "follow-tags",
        "ftp-password",
        "ftp-user",
        "header",
        "http-password",
        "http-user",
        "ignore-tags",
        "include-directories",
        "input-file",
        "level",
        "limit-rate",
        "load-cookies",
        "local-encoding",
        "method",
        "output-document",
        "output-file",
        "password",
        "pinnedpubkey",
        "post-data",
        "post-file",
        "prefer-family",
        "private-key",
        "private-key-type",
        "progress",
        "proxy-password",
        "proxy-user",
        "quota",
        "read-timeout",
        "referer",
        "regex-type",
        "reject",
        "reject-regex",
        "rejected-log",
        "remote-encoding",
        "report-speed",
        "restrict-file-names",
        "retry-on-http-error",
        "save-cookies",
        "secure-protocol",
        "start-pos",
        "timeout",
        "tries",
        "use-askpass",
        "user",
        "user-agent",
        "wait",
        "waitretry",
        "warc-dedup",
        "warc-file",
        "warc-header",
        "warc-max-size",
        "warc-tempdir",
        "hsts-file",
        "max-redirect",
        "method",
        "proxy",
        "dns-servers",
        "bind-dns-address",
    ],
    long_flag: &[
        "adjust-extension",
        "ask-password",
        "auth-no-challenge",
        "background",
        "backup-converted",
        "content-disposition",
        "content-on-error",
        "continue",
        "convert-file-only",
        "convert-links",
        "debug",
        "delete-after",
        "follow-ftp",
        "force-directories",
        "force-html",
        "ftps-clear-data-connection",
        "ftps-fallback-to-ftp",
        "ftps-implicit",
        "ftps-resume-ssl",
        "help",
        "https-only",
        "ignore-case",
        "ignore-length",
        "inet4-only",
        "inet6-only",
        "keep-session-cookies",
        "mirror",
        "no-cache",
        "no-check-certificate",
        "no-clobber",
        "no-config",
        "no-cookies",
        "no-directories",
        "no-dns-cache",
        "no-glob",
        "no-host-directories",
        "no-hsts",
        "no-http-keep-alive",
        "no-if-modified-since",
        "no-iri",
        "no-netrc",
        "no-parent",
        "no-passive-ftp",
        "no-proxy",
        "no-remove-listing",
        "no-use-server-timestamps",
        "no-verbose",
        "no-warc-compression",
        "no-warc-digests",
        "no-warc-keep-log",
        "page-requisites",
        "preserve-permissions",
        "protocol-directories",
        "quiet",
        "random-wait",
        "recursive",
        "relative",
        "retr-symlinks",
        "retry-connrefused",
        "save-headers",
        "server-response",
        "show-progress",
        "span-hosts",
        "spider",
        "strict-comments",
        "timestamping",
        "trust-server-names",
        "unlink",
        "verbose",
        "version",
        "warc-cdx",
        "xattr",
    ],
    stop_at_operand: false,
    abbreviations: true,
};

pub fn analyze(args: &[String], ctx: &dyn Ctx, a: &mut Analysis) {
    let mut read_default_config = true;
    let toks = SPEC.tokenize(args);
    if toks.iter().any(|t| matches!(t, Tok::Long("no-config", _))) {
        read_default_config = false;
    }
    for tok in toks {
        match tok {
            Tok::Operand(u) => a.url(&u, "http"),
            Tok::Short('e', Some(v)) | Tok::Long("execute", Some(v)) => command(&v, ctx, a),
            Tok::Short('i', Some(v)) | Tok::Long("input-file", Some(v)) => input(&v, ctx, a),
            Tok::Short('B', Some(v)) | Tok::Long("base", Some(v)) => a.url(&v, "http"),
            Tok::Long("config", Some(v)) => {
                read_default_config = false;
                match ctx.read_file(&v) {
                    Some(text) => wgetrc(&text, ctx, a),
                    None => a.refuse(&v, "config file cannot be read, so it cannot be judged"),
                }
            }
            Tok::Long("dns-servers", Some(v)) => {
                for s in v.split(',') {
                    a.add(crate::addr::host_port(s.trim(), Some(53), &v));
                }
            }
            Tok::UnknownLong(_, Some(v)) if v.contains("://") => a.url(&v, "http"),
            _ => {}
        }
    }
    if read_default_config {
        let mut files = vec!["/etc/wgetrc".to_string()];
        if let Some(f) = ctx.env("WGETRC") {
            files.push(f);
        } else if let Some(h) = ctx.env("HOME") {
            files.push(format!("{h}/.wgetrc"));
        }
        for f in files {
            if let Some(text) = ctx.read_file(&f) {
                wgetrc(&text, ctx, a);
            }
        }
    }
}

fn input(v: &str, ctx: &dyn Ctx, a: &mut Analysis) {
    if v == "-" {
        a.refuse(
            "-i -",
            "a URL list read from standard input cannot be judged",
        );
    } else if crate::addr::split_scheme(v).is_some() {
        a.url(v, "http");
        a.refuse(v, "a URL list fetched from the network cannot be judged");
    } else {
        match ctx.read_file(v) {
            Some(text) => {
                for line in text.lines() {
                    let l = line.trim();
                    if !l.is_empty() {
                        a.url(l, "http");
                    }
                }
            }
            None => a.refuse(v, "URL list cannot be read, so it cannot be judged"),
        }
    }
}

fn wgetrc(text: &str, ctx: &dyn Ctx, a: &mut Analysis) {
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        command(l, ctx, a);
    }
}

/// One wgetrc command `name = value`. Names ignore case, `-` and `_`.
fn command(cmd: &str, ctx: &dyn Ctx, a: &mut Analysis) {
    let Some((name, value)) = cmd.split_once('=') else {
        return; // wget rejects it
    };
    let name: String = name
        .trim()
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let value = value.trim();
    match name.as_str() {
        "httpproxy" | "httpsproxy" | "ftpproxy" => a.proxy(value),
        "input" => input(value, ctx, a),
        "base" => a.url(value, "http"),
        "dnsservers" => {
            for s in value.split(',') {
                a.add(crate::addr::host_port(s.trim(), Some(53), cmd));
            }
        }
        _ => {}
    }
}
