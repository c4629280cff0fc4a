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
    a
}

#[cfg(test)]
mod tests;
