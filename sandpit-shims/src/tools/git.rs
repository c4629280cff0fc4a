//! git: remote URLs (any scheme, scp-like `user@host:path`), remote names resolved
//! through the repository's configuration (with `url.*.insteadOf` rewriting), `-c`
//! / `--config-env` / `GIT_CONFIG_*` settings that carry destinations (proxies,
//! remote URLs) or replace the transport (core.sshCommand, core.gitProxy,
//! GIT_SSH_COMMAND…), aliases, and remote helpers (`ext::`, `fd::`, `x::`: refused).
//!
//! ssh transports run `ssh` from PATH, which is the ssh shim: it judges the host
//! again and supplies the tunnel. An absolute or customised ssh is refused.
use super::ssh::{ssh_into, SshState};
use super::Analysis;
use crate::addr::{self, Dest, NoScheme};
use crate::getopt::{Spec, Tok};
use crate::Ctx;

/// Subcommands that talk to a remote.
const NETWORK: &[&str] = &[
    "clone",
    "fetch",
    "pull",
    "push",
    "ls-remote",
    "remote",
    "archive",
    "submodule",
    "request-pull",
    "fetch-pack",
    "send-pack",
    "http-fetch",
    "http-push",
    "bundle",
];

/// Builtins that never touch the network (aliases cannot shadow them).
const LOCAL: &[&str] = &[
    "add",
    "am",
    "apply",
    "bisect",
    "blame",
    "branch",
    "cat-file",
    "check-ignore",
    "checkout",
    "cherry",
    "cherry-pick",
    "clean",
    "commit",
    "commit-tree",
    "config",
    "describe",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "for-each-ref",
    "format-patch",
    "fsck",
    "gc",
    "grep",
    "hash-object",
    "help",
    "init",
    "log",
    "ls-files",
    "ls-tree",
    "merge",
    "merge-base",
    "mv",
    "notes",
    "prune",
    "range-diff",
    "read-tree",
    "rebase",
    "reflog",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-ref",
    "stash",
    "status",
    "switch",
    "tag",
    "update-index",
    "update-ref",
    "var",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
    "symbolic-ref",
    "sparse-checkout",
    "maintenance",
    "stripspace",
    "mktree",
    "mktag",
    "count-objects",
    "verify-commit",
    "verify-tag",
    "name-rev",
];

const GLOBAL: Spec = Spec {
    short_arg: "cC",
    long_arg: &[
        "git-dir",
        "work-tree",
        "namespace",
        "config-env",
        "super-prefix",
        "attr-source",
        "list-cmds",
    ],
    long_flag: &[
        "paginate",
        "no-pager",
        "bare",
        "no-replace-objects",
        "literal-pathspecs",
        "glob-pathspecs",
        "noglob-pathspecs",
        "icase-pathspecs",
        "no-optional-locks",
        "exec-path",
        "html-path",
        "man-path",
        "info-path",
        "version",
        "help",
        "no-advice",
    ],
    stop_at_operand: true,
    abbreviations: false,
};

const SUB: Spec = Spec {
    short_arg: "objucsXtmo",
    long_arg: &[
        "origin",
        "branch",
        "upload-pack",
        "reference",
        "reference-if-able",
        "separate-git-dir",
        "depth",
        "deepen",
        "shallow-since",
        "shallow-exclude",
        "jobs",
        "config",
        "template",
        "filter",
        "server-option",
        "bundle-uri",
        "ref-format",
        "refmap",
        "negotiation-tip",
        "submodule-prefix",
        "recurse-submodules-default",
        "repo",
        "receive-pack",
        "exec",
        "push-option",
        "strategy",
        "strategy-option",
        "sort",
        "cleanup",
        "remote",
        "output",
        "prefix",
        "format",
        "track",
        "master",
        "name",
    ],
    long_flag: &[
        "all",
        "multiple",
        "prune",
        "tags",
        "no-tags",
        "quiet",
        "verbose",
        "force",
        "dry-run",
        "mirror",
        "bare",
        "no-checkout",
        "single-branch",
        "no-single-branch",
        "recursive",
        "recurse-submodules",
        "no-recurse-submodules",
        "rebase",
        "no-rebase",
        "ff-only",
        "set-upstream",
        "follow-tags",
        "atomic",
        "heads",
        "refs",
        "get-url",
        "push",
        "add",
        "delete",
        "progress",
        "no-progress",
        "shallow-submodules",
        "also-filter-submodules",
        "local",
        "no-local",
        "no-hardlinks",
        "shared",
        "sparse",
        "porcelain",
        "force-with-lease",
        "signed",
        "unshallow",
        "update-shallow",
        "append",
        "stdin",
        "init",
        "remote-submodules",
    ],
    stop_at_operand: false,
    abbreviations: true,
};

const MAX_ALIAS_DEPTH: usize = 4;

/// Everything the configuration says about remotes and transports.
#[derive(Default)]
struct Config {
    pairs: Vec<(String, String)>, // lowercased key (except subsection), value
    complete: bool,               // read from git itself (false: only -c seen)
}

impl Config {
    fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
    /// The URLs of remote `name`; empty when there is no such remote.
    fn remote_urls(&self, name: &str, push: bool) -> Vec<String> {
        let mut v: Vec<String> = self
            .get_all(&format!("remote.{name}.url"))
            .map(str::to_string)
            .collect();
        if push {
            v.extend(
                self.get_all(&format!("remote.{name}.pushurl"))
                    .map(str::to_string),
            );
        }
        v
    }
    fn all_remote_urls(&self) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| {
                let k = k.to_ascii_lowercase();
                k.starts_with("remote.") && (k.ends_with(".url") || k.ends_with(".pushurl"))
            })
            .map(|(_, v)| v.clone())
            .collect()
    }
    /// Apply the longest matching `url.<base>.insteadOf` (and pushInsteadOf).
    fn rewrite(&self, url: &str, push: bool) -> String {
        let mut best: Option<(usize, String)> = None;
        for (k, v) in &self.pairs {
            let lower = k.to_ascii_lowercase();
            let Some(rest) = k.strip_prefix("url.").or_else(|| k.strip_prefix("URL.")) else {
                continue;
            };
            let base = if lower.ends_with(".insteadof") {
                &rest[..rest.len() - ".insteadof".len()]
            } else if push && lower.ends_with(".pushinsteadof") {
                &rest[..rest.len() - ".pushinsteadof".len()]
            } else {
                continue;
            };
            if url.starts_with(v.as_str()) && best.as_ref().is_none_or(|(l, _)| v.len() > *l) {
                best = Some((v.len(), format!("{base}{}", &url[v.len()..])));
            }
        }
        best.map(|b| b.1).unwrap_or_else(|| url.to_string())
    }
}

/// Split `key=value` as `git -c` does (no `=` means boolean true).
fn kv(s: &str) -> (String, String) {
    match s.split_once('=') {
        Some((k, v)) => (k.to_string(), v.to_string()),
        None => (s.to_string(), "true".to_string()),
    }
}

/// Parse GIT_CONFIG_PARAMETERS: `'key'='value' 'key=value' …` with `'\''` escapes.
fn config_parameters(s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    let mut pending_eq = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '\\' => cur.push(chars.next()?),
            '=' => {
                words.push(std::mem::take(&mut cur));
                pending_eq = true;
            }
            c if c.is_whitespace() => {
                if pending_eq {
                    let k = words.pop()?;
                    out.push((k, std::mem::take(&mut cur)));
                    pending_eq = false;
                } else if !cur.is_empty() {
                    out.push(kv(&std::mem::take(&mut cur)));
                }
            }
            c => cur.push(c),
        }
    }
    if pending_eq {
        let k = words.pop()?;
        out.push((k, cur));
    } else if !cur.is_empty() {
        out.push(kv(&cur));
    }
    Some(out)
}

pub fn analyze(args: &[String], ctx: &dyn Ctx, a: &mut Analysis) {
    analyze_depth(args, ctx, a, 0);
}

fn analyze_depth(args: &[String], ctx: &dyn Ctx, a: &mut Analysis, depth: usize) {
    let toks = GLOBAL.tokenize(args);
    let mut global_args: Vec<String> = Vec::new();
    let mut own_cfg: Vec<(String, String)> = Vec::new();
    let mut rest: Vec<String> = Vec::new();
    let mut seen_sub = false;
    for t in toks {
        if seen_sub {
            if let Tok::Operand(o) = t {
                rest.push(o);
            }
            continue;
        }
        match t {
            Tok::Short('c', Some(v)) => {
                own_cfg.push(kv(&v));
                global_args.extend(["-c".to_string(), v]);
            }
            Tok::Short('C', Some(v)) => global_args.extend(["-C".to_string(), v]),
            Tok::Long("config-env", Some(v)) => {
                if let Some((k, var)) = v.split_once('=') {
                    match ctx.env(var) {
                        Some(val) => own_cfg.push((k.to_string(), val)),
                        None => a.refuse(&v, "--config-env names an unset variable"),
                    }
                }
                global_args.push(format!("--config-env={v}"));
            }
            Tok::Long(n @ ("git-dir" | "work-tree" | "namespace"), Some(v)) => {
                global_args.push(format!("--{n}={v}"))
            }
            Tok::Operand(o) => {
                seen_sub = true;
                rest.push(o);
            }
            Tok::MissingValue(v) => a.refuse(&v, "option is missing its value"),
            _ => {}
        }
    }
    // Everything after the subcommand, verbatim (the tokenizer stopped there).
    let sub_index = args.len() - rest.len();
    let Some(sub) = args.get(sub_index).cloned() else {
        return;
    };
    let sub_args = &args[sub_index + 1..];
    if LOCAL.contains(&sub.as_str()) {
        return;
    }
    // Environment-supplied configuration.
    if let Some(n) = ctx
        .env("GIT_CONFIG_COUNT")
        .and_then(|n| n.parse::<usize>().ok())
    {
        for i in 0..n.min(1000) {
            if let (Some(k), Some(v)) = (
                ctx.env(&format!("GIT_CONFIG_KEY_{i}")),
                ctx.env(&format!("GIT_CONFIG_VALUE_{i}")),
            ) {
                own_cfg.push((k, v));
            }
        }
    }
    if let Some(p) = ctx.env("GIT_CONFIG_PARAMETERS") {
        match config_parameters(&p) {
            Some(list) => own_cfg.extend(list),
            None => a.refuse(
                "GIT_CONFIG_PARAMETERS",
                "cannot be parsed, so it cannot be judged",
            ),
        }
    }
    let cfg = match ctx.git_config(&global_args) {
        Some(pairs) => Config {
            pairs: pairs.into_iter().chain(own_cfg).collect(),
            complete: true,
        },
        None => Config {
            pairs: own_cfg,
            complete: false,
        },
    };
    if !NETWORK.contains(&sub.as_str()) {
        // Perhaps an alias.
        if let Some(alias) = cfg.get_all(&format!("alias.{sub}")).last() {
            if alias.starts_with('!') {
                return; // a shell command: what it runs goes through the shims again
            }
            if depth >= MAX_ALIAS_DEPTH {
                a.refuse(&sub, "aliases nested too deeply");
                return;
            }
            let mut expanded = global_args.clone();
            expanded.extend(alias.split_whitespace().map(str::to_string));
            expanded.extend(sub_args.iter().cloned());
            analyze_depth(&expanded, ctx, a, depth + 1);
        }
        return;
    }
    transport_settings(&cfg, ctx, a);
    let push = sub == "push" || sub == "send-pack" || sub == "http-push";
    let toks = SUB.tokenize(sub_args);
    let mut ops: Vec<String> = Vec::new();
    let mut all = false;
    for t in toks {
        match t {
            Tok::Operand(o) => ops.push(o),
            Tok::Long("all", _) | Tok::Long("multiple", _) => all = true,
            Tok::Long("repo", Some(v)) => ops.insert(0, v),
            Tok::Long("bundle-uri", Some(v)) => a.url(&v, "https"),
            Tok::Short('c', Some(v)) | Tok::Long("config", Some(v)) if sub == "clone" => {
                let (k, val) = kv(&v);
                judge_setting(&k, &val, false, a);
            }
            Tok::Long("remote", Some(v)) if sub == "archive" => repo(&v, &cfg, push, a),
            Tok::MissingValue(v) => a.refuse(&v, "option is missing its value"),
            _ => {}
        }
    }
    match sub.as_str() {
        "clone" => {
            if let Some(u) = ops.first() {
                repo(u, &cfg, false, a);
            }
        }
        "fetch" | "pull" | "push" | "ls-remote" | "fetch-pack" | "send-pack" => {
            if all && sub == "fetch" {
                for u in cfg.all_remote_urls() {
                    url(&cfg.rewrite(&u, push), a);
                }
                if !cfg.complete {
                    a.refuse("--all", "the repository's remotes could not be read");
                }
            } else if let Some(r) = ops.first() {
                repo(r, &cfg, push, a);
            } else {
                // The default remote: judge every configured remote.
                for u in cfg.all_remote_urls() {
                    url(&cfg.rewrite(&u, push), a);
                }
                if !cfg.complete {
                    a.refuse(&sub, "the repository's remotes could not be read");
                }
            }
        }
        "http-fetch" | "http-push" => {
            for o in &ops {
                if addr::split_scheme(o).is_some() {
                    url(o, a);
                }
            }
        }
        "remote" => match ops.first().map(String::as_str) {
            Some("add") => {
                if let Some(u) = ops.get(2) {
                    url(&cfg.rewrite(u, false), a);
                }
            }
            Some("set-url") => {
                if let Some(u) = ops.get(2) {
                    url(&cfg.rewrite(u, false), a);
                }
            }
            Some("update") | Some("prune") | Some("show") => {
                for u in cfg.all_remote_urls() {
                    url(&cfg.rewrite(&u, false), a);
                }
                if !cfg.complete {
                    a.refuse("remote", "the repository's remotes could not be read");
                }
            }
            _ => {}
        },
        // update/sync/foreach read .gitmodules; the child git processes they start
        // reach the proxy, which judges them.
        "submodule" if ops.first().map(String::as_str) == Some("add") => {
            if let Some(u) = ops.get(1) {
                url(&cfg.rewrite(u, false), a);
            }
        }
        "request-pull" => {
            if let Some(u) = ops.get(1) {
                repo(u, &cfg, false, a);
            }
        }
        "bundle" => {}
        _ => {}
    }
}

/// Config keys and environment variables that add destinations or replace the
/// transport.
fn transport_settings(cfg: &Config, ctx: &dyn Ctx, a: &mut Analysis) {
    for (k, v) in &cfg.pairs {
        judge_setting(k, v, cfg.complete, a);
    }
    if let Some(cmd) = ctx.env("GIT_SSH_COMMAND") {
        ssh_command(&cmd, "GIT_SSH_COMMAND", a);
    }
    if let Some(prog) = ctx.env("GIT_SSH") {
        if prog.rsplit('/').next() != Some("ssh") || prog.contains('/') {
            a.refuse("GIT_SSH", "only `ssh` from PATH can be judged as git's ssh");
        }
    }
    if ctx.env("GIT_PROXY_COMMAND").is_some() {
        a.refuse("GIT_PROXY_COMMAND", "a proxy command cannot be judged");
    }
}

/// `resolved`: the value comes from git itself, which already followed includes.
fn judge_setting(k: &str, v: &str, resolved: bool, a: &mut Analysis) {
    let lower = k.to_ascii_lowercase();
    let arg = format!("{k}={v}");
    if lower.ends_with(".proxy")
        && (lower.starts_with("http.")
            || lower.starts_with("https.")
            || lower.starts_with("remote."))
    {
        a.proxy(v);
    } else if lower == "core.sshcommand" {
        ssh_command(v, &arg, a);
    } else if lower == "core.gitproxy" || lower == "http.curloptresolve" {
        a.refuse(
            &arg,
            "this setting routes git's connections where sandpit cannot judge",
        );
    } else if !resolved
        && (lower == "include.path"
            || (lower.starts_with("includeif.") && lower.ends_with(".path")))
    {
        a.refuse(&arg, "included config files cannot be judged");
    }
}

/// A replacement ssh command: only `ssh [options]` found on PATH is accepted.
fn ssh_command(cmd: &str, arg: &str, a: &mut Analysis) {
    let words: Vec<String> = cmd.split_whitespace().map(str::to_string).collect();
    if words.first().map(String::as_str) != Some("ssh") {
        a.refuse(
            arg,
            "only `ssh` from PATH can be judged as git's ssh command",
        );
        return;
    }
    let mut st = SshState::default();
    ssh_into(&words[1..], &mut st, a);
    // Hosts named in the command itself are judged; ports apply to git's host too,
    // but the ssh shim judges that connection again.
    st.finish(a);
    a.ssh_tunnel = false;
}

/// A repository argument: a configured remote name, or a URL / path.
fn repo(r: &str, cfg: &Config, push: bool, a: &mut Analysis) {
    let urls = cfg.remote_urls(r, push);
    if !urls.is_empty() {
        for u in urls {
            url(&cfg.rewrite(&u, push), a);
        }
        return;
    }
    let looks_like_name = !r.contains([':', '/', '\\']) && r != "." && r != "..";
    if looks_like_name && !cfg.complete {
        a.refuse(
            r,
            "remote name could not be resolved, so it cannot be judged",
        );
        return;
    }
    url(&cfg.rewrite(r, push), a);
}

/// A git URL: `scheme://…`, `transport::address` (remote helpers: refused),
/// scp-like `[user@]host:path`, or a local path.
pub fn url(u: &str, a: &mut Analysis) {
    if let Some((transport, _)) = u.split_once("::") {
        if !transport.contains(['/', '\\']) && !transport.is_empty() {
            a.refuse(
                u,
                format!("git remote helper `{transport}::` cannot be judged"),
            );
            return;
        }
    }
    if let Some((scheme, _)) = addr::split_scheme(u) {
        match scheme.as_str() {
            "file" => {}
            "http" | "https" | "git" | "ssh" | "git+ssh" | "ssh+git" | "ftp" | "ftps" => {
                a.add_opt(addr::parse_url(u, NoScheme::NotUrl, false))
            }
            other => a.refuse(u, format!("git transport `{other}` cannot be judged")),
        }
        return;
    }
    if let Some(prefix) = addr::scp_like_host(u) {
        match addr::strip_user(prefix, u).and_then(|h| addr::clean_host(h, u)) {
            Ok(host) => a.dest(Dest {
                host,
                port: Some(22),
                arg: u.to_string(),
            }),
            Err(e) => a.refusals.push(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_parameters_both_spellings() {
        let v = config_parameters("'http.proxy'='http://p:1' 'a.b=c'").unwrap_or_default();
        assert_eq!(
            v,
            vec![
                ("http.proxy".into(), "http://p:1".into()),
                ("a.b".into(), "c".into())
            ]
        );
    }
}
