//! rsync: `[user@]host:path` (over the remote shell), `host::module` and
//! `rsync://host[:port]/module` (daemon, --port), the remote shell (-e/--rsh,
//! RSYNC_RSH: only ssh, whose options are judged like ssh's), RSYNC_PROXY, and
//! RSYNC_CONNECT_PROG (refused).
use super::ssh::{ssh_into, SshState};
use super::Analysis;
use crate::addr;
use crate::getopt::{Spec, Tok};
use crate::Ctx;

const SPEC: Spec = Spec {
    short_arg: "eBfTM@",
    long_arg: &[
        "rsh",
        "rsync-path",
        "filter",
        "exclude",
        "exclude-from",
        "include",
        "include-from",
        "files-from",
        "block-size",
        "backup-dir",
        "suffix",
        "chmod",
        "chown",
        "usermap",
        "groupmap",
        "max-delete",
        "max-size",
        "min-size",
        "max-alloc",
        "partial-dir",
        "timeout",
        "contimeout",
        "compare-dest",
        "copy-dest",
        "link-dest",
        "compress-choice",
        "zc",
        "compress-level",
        "zl",
        "skip-compress",
        "checksum-choice",
        "cc",
        "log-file",
        "log-file-format",
        "out-format",
        "log-format",
        "password-file",
        "bwlimit",
        "write-batch",
        "only-write-batch",
        "read-batch",
        "protocol",
        "iconv",
        "temp-dir",
        "address",
        "port",
        "sockopts",
        "outbuf",
        "info",
        "debug",
        "stop-after",
        "stop-at",
        "time-limit",
        "remote-option",
        "modify-window",
        "config",
        "dparam",
        "early-input",
        "copy-as",
        "checksum-seed",
        "new-compress",
    ],
    long_flag: &[
        "verbose",
        "quiet",
        "checksum",
        "archive",
        "recursive",
        "relative",
        "backup",
        "update",
        "inplace",
        "append",
        "append-verify",
        "dirs",
        "mkpath",
        "links",
        "copy-links",
        "copy-unsafe-links",
        "safe-links",
        "munge-links",
        "copy-dirlinks",
        "keep-dirlinks",
        "hard-links",
        "perms",
        "executability",
        "acls",
        "xattrs",
        "owner",
        "group",
        "devices",
        "specials",
        "times",
        "atimes",
        "open-noatime",
        "crtimes",
        "omit-dir-times",
        "omit-link-times",
        "super",
        "fake-super",
        "sparse",
        "preallocate",
        "dry-run",
        "whole-file",
        "one-file-system",
        "existing",
        "ignore-existing",
        "remove-source-files",
        "delete",
        "delete-before",
        "delete-during",
        "delete-delay",
        "delete-after",
        "delete-excluded",
        "ignore-missing-args",
        "delete-missing-args",
        "ignore-errors",
        "force",
        "partial",
        "delay-updates",
        "prune-empty-dirs",
        "numeric-ids",
        "ignore-times",
        "size-only",
        "fuzzy",
        "compress",
        "cvs-exclude",
        "from0",
        "protect-args",
        "secluded-args",
        "trust-sender",
        "blocking-io",
        "stats",
        "8-bit-output",
        "human-readable",
        "progress",
        "itemize-changes",
        "list-only",
        "ipv4",
        "ipv6",
        "version",
        "help",
        "daemon",
        "no-motd",
        "detach",
        "no-detach",
    ],
    stop_at_operand: false,
    abbreviations: true,
};

pub fn analyze(args: &[String], ctx: &dyn Ctx, a: &mut Analysis) {
    let mut rsh: Option<String> = ctx.env("RSYNC_RSH");
    let mut port: Option<u16> = None;
    let mut ops = Vec::new();
    if ctx.env("RSYNC_CONNECT_PROG").is_some() {
        a.refuse("RSYNC_CONNECT_PROG", "a connect program cannot be judged");
    }
    if let Some(p) = ctx.env("RSYNC_PROXY") {
        a.add(addr::host_port(&p, None, "RSYNC_PROXY"));
    }
    for t in SPEC.tokenize(args) {
        match t {
            Tok::Operand(o) => ops.push(o),
            Tok::Short('e', Some(v)) | Tok::Long("rsh", Some(v)) => rsh = Some(v),
            Tok::Long("port", Some(v)) => match addr::parse_port(&v, &format!("--port={v}")) {
                Ok(p) => port = Some(p),
                Err(e) => a.refusals.push(e),
            },
            Tok::Long("daemon", _) => return, // serving, not connecting
            Tok::MissingValue(v) => a.refuse(&v, "option is missing its value"),
            _ => {}
        }
    }
    let mut shell = SshState::default();
    let mut uses_shell = false;
    for o in &ops {
        if let Some(rest) = o.strip_prefix("rsync://") {
            let authority = rest.split('/').next().unwrap_or(rest);
            match addr::strip_user(authority, o) {
                Ok(hp) => a.add(addr::host_port(hp, Some(port.unwrap_or(873)), o)),
                Err(e) => a.refusals.push(e),
            }
            continue;
        }
        let Some(prefix) = addr::scp_like_host(o) else {
            continue;
        };
        let daemon = o[prefix.len()..].starts_with("::");
        if daemon && rsh.is_none() {
            match addr::strip_user(prefix, o) {
                Ok(h) => a.add(addr::host_port(h, Some(port.unwrap_or(873)), o)),
                Err(e) => a.refusals.push(e),
            }
        } else {
            uses_shell = true;
            shell.host(prefix, o, a);
        }
    }
    if uses_shell {
        let words: Vec<String> = rsh
            .as_deref()
            .unwrap_or("ssh")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let prog = words.first().map(|w| w.rsplit('/').next().unwrap_or(w));
        if prog != Some("ssh") {
            a.refuse(
                rsh.as_deref().unwrap_or(""),
                "only ssh can be judged as rsync's remote shell",
            );
            return;
        }
        // Judge ssh's own options; the operands' hosts are the destinations.
        let mut opts_only = SshState::default();
        ssh_into(&words[1..], &mut opts_only, a);
        shell.ports = opts_only.ports;
        shell.hosts.extend(opts_only.hosts);
        shell.finish(a);
        // rsync runs `ssh` from PATH, which is the ssh shim: no tunnel flag here.
        a.ssh_tunnel = false;
    }
}
