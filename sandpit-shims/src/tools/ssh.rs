//! ssh, scp, sftp: the destination, -p/-P and `-o Port=`, `-o HostName=`, forwards
//! (-L/-R/-W targets are judged, -D is refused), and everything that could route the
//! connection somewhere sandpit did not judge (ProxyCommand, ProxyJump/-J, config
//! files via -F or Include, hostname canonicalization, tun devices, -S programs).
use super::Analysis;
use crate::addr::{self, Dest};
use crate::getopt::{Spec, Tok};
use crate::Ctx;

const SSH: Spec = Spec {
    short_arg: "BbcDEeFIiJLlmOoPpQRSWw",
    long_arg: &[],
    long_flag: &[],
    stop_at_operand: true,
    abbreviations: false,
};

const SCP: Spec = Spec {
    short_arg: "cDFiJloPSX",
    long_arg: &[],
    long_flag: &[],
    stop_at_operand: false,
    abbreviations: false,
};

const SFTP: Spec = Spec {
    short_arg: "BbcDFiJloPRSsX",
    long_arg: &[],
    long_flag: &[],
    stop_at_operand: false,
    abbreviations: false,
};

/// Connection settings gathered from options, applied to every host at the end.
#[derive(Default)]
pub struct SshState {
    pub hosts: Vec<(String, String)>, // (host text, argument)
    pub ports: Vec<(u16, String)>,
}

impl SshState {
    /// Record one `[user@]host` destination.
    pub fn host(&mut self, spec: &str, arg: &str, a: &mut Analysis) {
        match addr::strip_user(spec, arg).and_then(|h| addr::clean_host(h, arg)) {
            Ok(h) => self.hosts.push((h, arg.to_string())),
            Err(e) => a.refusals.push(e),
        }
    }

    fn port(&mut self, p: &str, arg: &str, a: &mut Analysis) {
        match addr::parse_port(p, arg) {
            Ok(p) => self.ports.push((p, arg.to_string())),
            Err(e) => a.refusals.push(e),
        }
    }

    /// Emit every (host, port) pair: each host must be allowed on each named port.
    pub fn finish(self, a: &mut Analysis) {
        if self.hosts.is_empty() {
            return;
        }
        a.ssh_tunnel = true;
        let ports: Vec<u16> = if self.ports.is_empty() {
            vec![22]
        } else {
            self.ports.iter().map(|p| p.0).collect()
        };
        for (h, arg) in &self.hosts {
            for p in &ports {
                a.dest(Dest {
                    host: h.clone(),
                    port: Some(*p),
                    arg: arg.clone(),
                });
            }
        }
    }

    /// Judge one `-o key=value` (or `key value`) setting.
    pub fn option(&mut self, kv: &str, a: &mut Analysis) {
        let kv = kv.trim_start();
        let split = kv
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(kv.len());
        let key = kv[..split].to_ascii_lowercase();
        let value = kv[split..]
            .trim_start()
            .trim_start_matches('=')
            .trim()
            .trim_matches('"');
        let off = |v: &str| {
            matches!(
                v.to_ascii_lowercase().as_str(),
                "none" | "no" | "false" | ""
            )
        };
        match key.as_str() {
            "port" => self.port(value, kv, a),
            "hostname" => {
                if value.contains('%') {
                    a.refuse(kv, "HostName with % tokens cannot be judged");
                } else {
                    self.host(value, kv, a);
                }
            }
            "proxycommand" | "proxyjump" if !off(value) => a.refuse(
                kv,
                "ProxyCommand/ProxyJump are refused: sandpit supplies the tunnel itself",
            ),
            "include" | "match" => {
                a.refuse(kv, "config includes and Match blocks cannot be judged")
            }
            "canonicalizehostname" if !off(value) => a.refuse(
                kv,
                "hostname canonicalization can change the host after sandpit judged it",
            ),
            "canonicaldomains" => a.refuse(
                kv,
                "hostname canonicalization can change the host after sandpit judged it",
            ),
            "dynamicforward" => a.refuse(kv, "dynamic forwarding (SOCKS) reaches any host"),
            "tunnel" if !off(value) => a.refuse(kv, "tun/tap forwarding reaches any host"),
            "localforward" | "remoteforward" => {
                // "[bind:]port host:hostport" — the target is the last word.
                match value.split_whitespace().last() {
                    Some(t) if value.split_whitespace().count() >= 2 => forward_target(t, kv, a),
                    _ => a.refuse(kv, "forwarding without a fixed target reaches any host"),
                }
            }
            _ => {}
        }
    }

    /// Options shared by ssh, scp and sftp. Returns false when not handled.
    fn common(&mut self, tok: &Tok, a: &mut Analysis) -> bool {
        match tok {
            Tok::Short('o', Some(v)) => self.option(v, a),
            Tok::Short('F', Some(v)) => {
                if v != "/dev/null" && v != "none" {
                    a.refuse(&format!("-F {v}"), "an ssh config file cannot be judged");
                }
            }
            Tok::Short('J', Some(v)) => {
                if !v.eq_ignore_ascii_case("none") {
                    a.refuse(
                        &format!("-J {v}"),
                        "ProxyJump is refused: sandpit supplies the tunnel itself",
                    );
                }
            }
            Tok::MissingValue(v) => a.refuse(v, "option is missing its value"),
            _ => return false,
        }
        true
    }
}

/// A forward target `host:port`, `[v6]:port` or a unix socket path.
fn forward_target(t: &str, arg: &str, a: &mut Analysis) {
    if t.starts_with('/') {
        return; // unix socket on the other side
    }
    a.add(addr::host_port(t, None, arg).and_then(|d| {
        if d.port.is_none() {
            Err(addr::Refusal::new(arg, "forward target without port"))
        } else {
            Ok(d)
        }
    }));
}

/// `-L [bind:]port:host:hostport` / `-R …`: judge `host:hostport`.
fn forward_spec(spec: &str, flag: char, a: &mut Analysis) {
    let arg = format!("-{flag} {spec}");
    // Split on colons outside brackets.
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in spec.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ':' if depth == 0 => {
                parts.push(&spec[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&spec[start..]);
    match parts.len() {
        // port:host:hostport or bind:port:host:hostport
        3 | 4 => {
            let n = parts.len();
            let target = format!("{}:{}", parts[n - 2], parts[n - 1]);
            forward_target(&target, &arg, a);
        }
        // port:/socket or /socket:/socket — unix sockets.
        2 if parts[1].starts_with('/') => {}
        _ if flag == 'R' => a.refuse(&arg, "dynamic remote forwarding reaches any host"),
        _ => a.refuse(&arg, "forwarding spec cannot be judged"),
    }
}

pub fn ssh(args: &[String], _ctx: &dyn Ctx, a: &mut Analysis) {
    let mut st = SshState::default();
    ssh_into(args, &mut st, a);
    st.finish(a);
}

/// Parse ssh arguments into `st` (also used for rsync's `-e "ssh …"`).
pub fn ssh_into(args: &[String], st: &mut SshState, a: &mut Analysis) {
    let mut toks = SSH.tokenize(args);
    let mut dest: Option<String> = None;
    // ssh takes options again after the destination, until the command starts.
    if let Some(i) = toks.iter().position(|t| matches!(t, Tok::Operand(_))) {
        let rest: Vec<String> = toks[i + 1..]
            .iter()
            .filter_map(|t| match t {
                Tok::Operand(s) => Some(s.clone()),
                _ => None,
            })
            .collect();
        if let Tok::Operand(d) = &toks[i] {
            dest = Some(d.clone());
        }
        toks.truncate(i);
        // An explicit "--" before the destination ends option parsing for good.
        let dashdash_before = args
            .iter()
            .take_while(|w| Some(*w) != dest.as_ref())
            .any(|w| w == "--");
        if !dashdash_before {
            for t in SSH.tokenize(&rest) {
                if matches!(t, Tok::Operand(_)) {
                    break;
                }
                toks.push(t);
            }
        }
    }
    for t in &toks {
        if st.common(t, a) {
            continue;
        }
        match t {
            Tok::Short('p', Some(v)) => st.port(v, &format!("-p {v}"), a),
            Tok::Short('D', Some(v)) => a.refuse(
                &format!("-D {v}"),
                "dynamic forwarding (SOCKS) reaches any host",
            ),
            Tok::Short(c @ ('L' | 'R'), Some(v)) => forward_spec(v, *c, a),
            Tok::Short('W', Some(v)) => forward_target(v, &format!("-W {v}"), a),
            Tok::Short('w', Some(v)) => {
                a.refuse(&format!("-w {v}"), "tun/tap forwarding reaches any host")
            }
            _ => {}
        }
    }
    if let Some(d) = dest {
        if let Some(rest) = d.strip_prefix("ssh://") {
            let authority = rest.split('/').next().unwrap_or(rest);
            match addr::strip_user(authority, &d) {
                Ok(hp) => {
                    let (h, p) = addr::split_host_port(hp);
                    if let Some(p) = p {
                        st.port(p, &d, a);
                    }
                    st.host(h, &d, a);
                }
                Err(e) => a.refusals.push(e),
            }
        } else {
            st.host(&d, &d, a);
        }
    }
}

/// An scp/sftp remote operand: `scp://[user@]host[:port]/path`, `sftp://…` or
/// `[user@]host:path`.
fn remote_operand(op: &str, st: &mut SshState, a: &mut Analysis, bare_is_host: bool) {
    for scheme in ["scp://", "sftp://"] {
        if let Some(rest) = op.strip_prefix(scheme) {
            let authority = rest.split('/').next().unwrap_or(rest);
            match addr::strip_user(authority, op) {
                Ok(hp) => {
                    let (h, p) = addr::split_host_port(hp);
                    if let Some(p) = p.filter(|p| !p.is_empty()) {
                        st.port(p, op, a);
                    }
                    st.host(h, op, a);
                }
                Err(e) => a.refusals.push(e),
            }
            return;
        }
    }
    match addr::scp_like_host(op) {
        Some(h) => st.host(h, op, a),
        None if bare_is_host => st.host(op, op, a),
        None => {}
    }
}

pub fn scp(args: &[String], _ctx: &dyn Ctx, a: &mut Analysis) {
    let mut st = SshState::default();
    for t in SCP.tokenize(args) {
        if st.common(&t, a) {
            continue;
        }
        match t {
            Tok::Short('P', Some(v)) => st.port(&v, &format!("-P {v}"), a),
            Tok::Short('S', Some(v)) => a.refuse(
                &format!("-S {v}"),
                "a custom connection program cannot be judged",
            ),
            Tok::Operand(op) => remote_operand(&op, &mut st, a, false),
            _ => {}
        }
    }
    st.finish(a);
}

pub fn sftp(args: &[String], _ctx: &dyn Ctx, a: &mut Analysis) {
    let mut st = SshState::default();
    let mut seen_dest = false;
    for t in SFTP.tokenize(args) {
        if st.common(&t, a) {
            continue;
        }
        match t {
            Tok::Short('P', Some(v)) => st.port(&v, &format!("-P {v}"), a),
            Tok::Short('S', Some(v)) => a.refuse(
                &format!("-S {v}"),
                "a custom connection program cannot be judged",
            ),
            Tok::Operand(op) if !seen_dest => {
                seen_dest = true;
                remote_operand(&op, &mut st, a, true);
            }
            _ => {}
        }
    }
    st.finish(a);
}
