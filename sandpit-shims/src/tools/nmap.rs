//! nmap: every target on every port of `-p` (the default port set leaves the port
//! open), `-b` FTP relays, `-sI` zombies, `--proxies`, `--dns-servers`. Target lists
//! (`-iL`, `-iR`, `--resume`), ranges, CIDR blocks, wildcards and scripts beyond the
//! default set are refused: they reach hosts the command line does not name.
use super::Analysis;
use crate::addr::{self, Dest};

/// Options (single- or double-dash) that take the next word as value.
const ARG_OPTS: &[&str] = &[
    "p",
    "e",
    "S",
    "D",
    "g",
    "b",
    "T",
    "oN",
    "oX",
    "oS",
    "oG",
    "oA",
    "oM",
    "oH",
    "iL",
    "iR",
    "sI",
    "M",
    "exclude",
    "excludefile",
    "dns-servers",
    "top-ports",
    "port-ratio",
    "script",
    "script-args",
    "script-args-file",
    "script-trace-file",
    "proxies",
    "proxy",
    "data",
    "data-string",
    "data-length",
    "ttl",
    "spoof-mac",
    "max-retries",
    "host-timeout",
    "scan-delay",
    "max-scan-delay",
    "min-rate",
    "max-rate",
    "min-hostgroup",
    "max-hostgroup",
    "min-parallelism",
    "max-parallelism",
    "min-rtt-timeout",
    "max-rtt-timeout",
    "initial-rtt-timeout",
    "source-port",
    "mtu",
    "ip-options",
    "stylesheet",
    "datadir",
    "servicedb",
    "versiondb",
    "exclude-ports",
    "version-intensity",
    "scanflags",
    "resume",
    "script-timeout",
    "max-os-tries",
    "script-help",
    "script-updatedb",
    "ssl-cert",
];

const MAX_PORTS: usize = 1024;

pub fn analyze(args: &[String], a: &mut Analysis) {
    let mut ports: Option<Vec<u16>> = None;
    let mut targets = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let w = &args[i];
        i += 1;
        if options_done || !w.starts_with('-') || w == "-" {
            targets.push(w.clone());
            continue;
        }
        if w == "--" {
            options_done = true;
            continue;
        }
        let body = w.trim_start_matches('-');
        let (name, attached) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (body.to_string(), None),
        };
        // -p80, -T4, -oNfile: a known one- or two-letter option with the value glued.
        let (name, value) = if ARG_OPTS.contains(&name.as_str()) {
            let v = match attached {
                Some(v) => Some(v),
                None if i < args.len() => {
                    i += 1;
                    Some(args[i - 1].clone())
                }
                None => None,
            };
            (name, v)
        } else if let Some(p) = ["oN", "oX", "oS", "oG", "oA", "oM", "iL", "iR", "sI"]
            .iter()
            .find(|p| name.len() > 2 && name.starts_with(**p))
        {
            (p.to_string(), Some(name[2..].to_string()))
        } else if name.len() > 1
            && name
                .get(..1)
                .is_some_and(|f| ["p", "e", "S", "D", "g", "b", "T"].contains(&f))
            && !w.starts_with("--")
        {
            (name[..1].to_string(), Some(name[1..].to_string()))
        } else {
            (name, attached)
        };
        let Some(v) = value else {
            continue;
        };
        match name.as_str() {
            "p" => match addr::port_list(v.trim_matches(['[', ']']), MAX_PORTS, &format!("-p {v}"))
            {
                Ok(list) => ports.get_or_insert_with(Vec::new).extend(list),
                Err(e) => a.refusals.push(e),
            },
            "iL" | "iR" | "resume" => a.refuse(w, "target lists cannot be judged"),
            "b" => {
                let hp = addr::strip_user(&v, &v).unwrap_or(&v);
                a.add(addr::host_port(hp, Some(21), &v));
            }
            "sI" => a.add(addr::host_port(&v, None, &v)),
            "proxies" | "proxy" => {
                for p in v.split(',') {
                    a.add_opt(
                        addr::parse_url(p, addr::NoScheme::NotUrl, false).and_then(|d| {
                            d.map(Some)
                                .ok_or_else(|| addr::Refusal::new(p, "proxy must be a URL"))
                        }),
                    );
                }
            }
            "dns-servers" => {
                for s in v.split(',') {
                    a.add(addr::host_port(s, Some(53), &v));
                }
            }
            "script" if !v.split(',').all(|s| matches!(s, "default" | "version")) => {
                a.refuse(
                    &format!("--script {v}"),
                    "nmap scripts can reach hosts the command line does not name",
                );
            }
            _ => {}
        }
    }
    for t in targets {
        if t.contains(['/', '*', ','])
            || (t.contains('-')
                && t.split('.').count() == 4
                && t.split('.')
                    .all(|o| o.chars().all(|c| c.is_ascii_digit() || c == '-')))
        {
            a.refuse(
                &t,
                "target ranges and networks cannot be judged host by host",
            );
            continue;
        }
        match addr::clean_host(&t, &t) {
            Ok(host) => match &ports {
                Some(ps) => {
                    for p in ps {
                        a.dest(Dest {
                            host: host.clone(),
                            port: Some(*p),
                            arg: t.clone(),
                        });
                    }
                }
                None => a.dest(Dest {
                    host,
                    port: None,
                    arg: t.clone(),
                }),
            },
            Err(e) => a.refusals.push(e),
        }
    }
}
