//! One parser per tool family. Each walks the tokenized argument vector and records
//! every destination it names and everything it cannot judge.
use crate::addr::{self, Dest, NoScheme, Refusal};
use crate::Ctx;

pub mod curl;
pub mod dns;
pub mod git;
pub mod nc;
pub mod nmap;
pub mod rsync;
pub mod socat;
pub mod ssh;
pub mod wget;

/// What the parsers found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Analysis {
    pub dests: Vec<Dest>,
    pub refusals: Vec<Refusal>,
    /// The tool speaks ssh itself (ssh, scp, sftp): `sandpit exec` supplies the
    /// ProxyCommand that tunnels it through the proxy.
    pub ssh_tunnel: bool,
}

impl Analysis {
    pub fn dest(&mut self, d: Dest) {
        self.dests.push(d);
    }
    pub fn refuse(&mut self, arg: &str, reason: impl Into<String>) {
        self.refusals.push(Refusal::new(arg, reason));
    }
    pub fn add(&mut self, r: addr::Res<Dest>) {
        match r {
            Ok(d) => self.dests.push(d),
            Err(e) => self.refusals.push(e),
        }
    }
    pub fn add_opt(&mut self, r: addr::Res<Option<Dest>>) {
        match r {
            Ok(Some(d)) => self.dests.push(d),
            Ok(None) => {}
            Err(e) => self.refusals.push(e),
        }
    }
    /// A URL where a missing scheme means `scheme`.
    pub fn url(&mut self, s: &str, scheme: &str) {
        self.add_opt(addr::parse_url(s, NoScheme::Assume(scheme), false));
    }
    /// A proxy specification `[scheme://]host[:port]` (default port 1080).
    pub fn proxy(&mut self, s: &str) {
        if s.is_empty() {
            return; // "" disables the proxy
        }
        match addr::split_scheme(s) {
            Some(_) => self.add_opt(addr::parse_url(s, NoScheme::NotUrl, false)),
            None => self.add(addr::host_port(
                addr::strip_user(s, s)
                    .map(|x| x.split('/').next().unwrap_or(x))
                    .unwrap_or(s),
                Some(1080),
                s,
            )),
        }
    }
    pub fn merge(&mut self, other: Analysis) {
        self.dests.extend(other.dests);
        self.refusals.extend(other.refusals);
        self.ssh_tunnel |= other.ssh_tunnel;
    }
}

/// The variable naming sandpit's own proxy (set by `sandpit run`).
pub const SANDPIT_PROXY_URL: &str = "SANDPIT_PROXY_URL";

/// The `host:port` part of a proxy URL, for comparing spellings.
fn proxy_authority(u: &str) -> &str {
    let rest = addr::split_scheme(u).map(|(_, r)| r).unwrap_or(u);
    let authority = rest.split('/').next().unwrap_or(rest);
    authority.rsplit_once('@').map(|x| x.1).unwrap_or(authority)
}

/// Proxy variables in the environment (curl, wget, git honour them): each names a
/// destination unless it is sandpit's own proxy.
pub fn env_proxies(ctx: &dyn Ctx, a: &mut Analysis) {
    let ours = ctx.env(SANDPIT_PROXY_URL);
    let ours = ours.as_deref().map(proxy_authority);
    for var in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "ftp_proxy",
        "FTP_PROXY",
    ] {
        let Some(v) = ctx.env(var) else { continue };
        if v.is_empty() || Some(proxy_authority(&v)) == ours {
            continue;
        }
        let before = a.dests.len();
        a.proxy(&v);
        for d in &mut a.dests[before..] {
            d.arg = format!("{var}={v}");
        }
    }
}

/// Analyze `args` (without the program name) as tool `tool` would read them.
pub fn analyze(tool: &str, args: &[String], ctx: &dyn Ctx) -> Analysis {
    let mut a = Analysis::default();
    match tool {
        "curl" => curl::analyze(args, ctx, &mut a, 0),
        "wget" | "wget2" => wget::analyze(args, ctx, &mut a),
        "nc" | "netcat" | "nc.openbsd" | "nc.traditional" => nc::nc(args, false, &mut a),
        "ncat" => nc::nc(args, true, &mut a),
        "telnet" => nc::telnet(args, &mut a),
        "ftp" | "tnftp" | "lftp" => nc::ftp(args, &mut a),
        "ssh" => ssh::ssh(args, ctx, &mut a),
        "scp" => ssh::scp(args, ctx, &mut a),
        "sftp" => ssh::sftp(args, ctx, &mut a),
        "rsync" => rsync::analyze(args, ctx, &mut a),
        "socat" => socat::analyze(args, &mut a),
        "dig" => dns::dig(args, ctx, &mut a, 0),
        "nslookup" => dns::nslookup(args, &mut a),
        "host" => dns::host(args, &mut a),
        "nmap" => nmap::analyze(args, &mut a),
        "git" => git::analyze(args, ctx, &mut a),
        _ => {}
    }
    if matches!(tool, "curl" | "wget" | "wget2" | "git") {
        env_proxies(ctx, &mut a);
    }
    a
}

#[cfg(test)]
mod tests;
