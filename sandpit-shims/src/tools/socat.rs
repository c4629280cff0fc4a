//! socat: both addresses (and both halves of `a!!b` dual addresses). Connecting
//! address types name `host:port`; SOCKS and PROXY types name a proxy too; listeners,
//! files, pipes and programs name nothing. Unknown address types are refused.
use super::Analysis;
use crate::addr::{self, Dest};

/// Options that take the next word as value.
const ARG_OPTS: &[&str] = &["-b", "-t", "-T", "-L", "-W", "-lf", "-lp", "-r", "-R", "-S"];

const HOST_PORT: &[&str] = &[
    "tcp",
    "tcp4",
    "tcp6",
    "tcp-connect",
    "tcp4-connect",
    "tcp6-connect",
    "udp",
    "udp4",
    "udp6",
    "udp-connect",
    "udp4-connect",
    "udp6-connect",
    "udp-sendto",
    "udp4-sendto",
    "udp6-sendto",
    "udp-datagram",
    "udp4-datagram",
    "udp6-datagram",
    "sctp",
    "sctp4",
    "sctp6",
    "sctp-connect",
    "sctp4-connect",
    "sctp6-connect",
    "dccp",
    "dccp4",
    "dccp6",
    "dccp-connect",
    "dccp4-connect",
    "dccp6-connect",
    "openssl",
    "ssl",
    "openssl-connect",
    "openssl-dtls-client",
    "dtls",
    "udplite",
    "udplite4",
    "udplite6",
    "udplite-connect",
    "udplite-sendto",
    "udplite-datagram",
];

const HOST_ONLY: &[&str] = &[
    "ip-sendto",
    "ip4-sendto",
    "ip6-sendto",
    "ip-datagram",
    "ip4-datagram",
    "ip6-datagram",
];

const LOCAL: &[&str] = &[
    "tcp-listen",
    "tcp4-listen",
    "tcp6-listen",
    "udp-listen",
    "udp4-listen",
    "udp6-listen",
    "udp-recv",
    "udp4-recv",
    "udp6-recv",
    "udp-recvfrom",
    "udp4-recvfrom",
    "udp6-recvfrom",
    "sctp-listen",
    "sctp4-listen",
    "sctp6-listen",
    "dccp-listen",
    "dccp4-listen",
    "dccp6-listen",
    "openssl-listen",
    "ssl-listen",
    "openssl-dtls-server",
    "dtls-l",
    "ip-recv",
    "ip4-recv",
    "ip6-recv",
    "ip-recvfrom",
    "ip4-recvfrom",
    "ip6-recvfrom",
    "udplite-listen",
    "udplite-recv",
    "udplite-recvfrom",
    "unix",
    "unix-connect",
    "unix-listen",
    "unix-send",
    "unix-sendto",
    "unix-recv",
    "unix-recvfrom",
    "unix-client",
    "local",
    "abstract",
    "abstract-connect",
    "abstract-listen",
    "abstract-send",
    "abstract-sendto",
    "abstract-recv",
    "abstract-recvfrom",
    "abstract-client",
    "stdio",
    "stdin",
    "stdout",
    "stderr",
    "open",
    "create",
    "creat",
    "gopen",
    "fd",
    "pipe",
    "exec",
    "system",
    "shell",
    "pty",
    "readline",
    "file",
    "tun",
    "interface",
    "posixmq-read",
    "posixmq-receive",
    "posixmq-send",
    "posixmq-bidirectional",
    "socketpair",
    "accept-fd",
    "namedpipe",
    "fifo",
    "echo",
];

pub fn analyze(args: &[String], a: &mut Analysis) {
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        i += 1;
        if w.starts_with('-') && w != "-" && !w.contains(':') {
            if ARG_OPTS.contains(&w.as_str()) {
                i += 1;
            }
            continue;
        }
        for half in w.split("!!") {
            address(half, w, a);
        }
    }
}

/// Split off one colon-separated field, honouring `[v6]` brackets.
fn field(s: &str) -> (&str, Option<&str>) {
    if s.starts_with('[') {
        if let Some(end) = s.find(']') {
            return (&s[..=end], s[end + 1..].strip_prefix(':'));
        }
    }
    match s.split_once(':') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    }
}

fn address(addr_text: &str, arg: &str, a: &mut Analysis) {
    // Address options follow the first comma (outside brackets).
    let (main, opts) = match addr_text.find(',') {
        Some(i) => (&addr_text[..i], &addr_text[i + 1..]),
        None => (addr_text, ""),
    };
    let opt = |name: &str| {
        opts.split(',').find_map(|o| {
            let (k, v) = o.split_once('=')?;
            k.eq_ignore_ascii_case(name).then_some(v)
        })
    };
    let (kw, params) = match main.split_once(':') {
        Some((k, p)) => (k.to_ascii_lowercase(), Some(p)),
        None => (main.to_ascii_lowercase(), None),
    };
    if HOST_PORT.contains(&kw.as_str()) {
        let Some(p) = params else {
            a.refuse(arg, "socat address without host:port");
            return;
        };
        a.add(addr::host_port(p, None, arg));
    } else if HOST_ONLY.contains(&kw.as_str()) {
        let (h, _proto) = field(params.unwrap_or(""));
        a.add(addr::clean_host(h, arg).map(|host| Dest {
            host,
            port: None,
            arg: arg.into(),
        }));
    } else if matches!(
        kw.as_str(),
        "socks4" | "socks4a" | "socks5" | "socks5-connect" | "socks"
    ) {
        let (proxy, rest) = field(params.unwrap_or(""));
        let port = opt("socksport").unwrap_or("1080");
        a.add(addr::host_port(&format!("{proxy}:{port}"), None, arg));
        if let Some(rest) = rest {
            a.add(addr::host_port(rest, None, arg));
        }
    } else if matches!(kw.as_str(), "proxy" | "proxy-connect") {
        let (proxy, rest) = field(params.unwrap_or(""));
        let port = opt("proxyport").unwrap_or("8080");
        a.add(addr::host_port(&format!("{proxy}:{port}"), None, arg));
        match rest {
            Some(rest) => a.add(addr::host_port(rest, None, arg)),
            None => a.refuse(arg, "socat PROXY address without target"),
        }
    } else if LOCAL.contains(&kw.as_str()) || kw == "-" {
    } else if params.is_none() {
        // A bare word is a file name (GOPEN), unless it names a network type.
    } else {
        a.refuse(arg, format!("socat address type `{kw}` cannot be judged"));
    }
}
