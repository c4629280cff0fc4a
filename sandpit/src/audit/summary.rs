//! The end-of-run summary: what was denied, grouped, and the exact config lines that
//! would allow each. Nothing here is ever applied; the user copies what they trust.
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::{Decision, Record, RuleRef};

/// What would allow one denial.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fix {
    /// Add `value` to `[table] key`.
    Add {
        table: &'static str,
        key: &'static str,
        value: String,
    },
    /// No config line allows it; why, and what the user could change.
    Note(String),
}

impl Fix {
    /// The TOML lines (or a `#` comment for a note).
    pub fn lines(&self) -> String {
        match self {
            Fix::Add { table, key, value } => {
                format!("[{table}]\n{key} = [{}]", quote(value))
            }
            Fix::Note(n) => format!("# {n}"),
        }
    }
}

/// A TOML basic string on one line: `"`, `\` and every character
/// [`printable`] escapes written as TOML escapes (`\n`, `\u001B`, …), so a
/// value the sandbox chose (a host name holding `"]` and a newline) stays one
/// value of one line, and shows as text on a terminal.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if crate::console::hidden(c) => {
                out.push_str(&format!("\\u{:04X}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub use crate::console::printable;

/// `path` with the home directory written `~`.
pub fn tilde(home: &Path, path: &str) -> String {
    let p = Path::new(path);
    match p.strip_prefix(home) {
        Ok(rest) if home.as_os_str().len() > 1 => {
            if rest.as_os_str().is_empty() {
                "~".into()
            } else {
                format!("~/{}", rest.display())
            }
        }
        _ => path.to_string(),
    }
}

fn removable(r: &RuleRef) -> String {
    if r.line == 0 {
        format!("{} entry {:?} is a built-in default", r.key, r.entry)
    } else {
        format!(
            "remove {} entry {:?} at {}:{}:{} if you trust this",
            r.key, r.entry, r.file, r.line, r.col
        )
    }
}

/// The config lines that would allow `r`, if any.
pub fn fixes(home: &Path, r: &Record) -> Vec<Fix> {
    let add = |table, key, value: String| Fix::Add { table, key, value };
    let key = r.rule.as_ref().map(|x| x.key.as_str()).unwrap_or("");
    let path = tilde(home, &r.subject);
    let is_entry = |x: &RuleRef| {
        let entry = x.entry.trim_end_matches('/');
        entry == path || entry == r.subject
    };
    if r.reason.starts_with(super::ALLOWED_BUT) {
        return vec![Fix::Note(format!(
            "the policy allows {}; it failed outside sandpit ({}), which no config line changes",
            r.subject,
            &r.reason[super::ALLOWED_BUT.len()..]
        ))];
    }
    if key.starts_with("limits.") {
        return vec![Fix::Note(format!(
            "the rules allow it; the run reached {key} (raise it under [limits] in ~/.sandpit/config.toml; 0: no limit)"
        ))];
    }
    if let Some(name) = key.strip_prefix("credentials.") {
        return vec![Fix::Note(format!(
            "a sentinel of credentials.{name} was sent to a host that is not one of its hosts; nothing to allow (the real value goes to its hosts only)"
        ))];
    }
    if key == "network.http.allow" {
        return vec![Fix::Note(
            "network.http.allow names this host and no entry matches the request's method and path; add one (METHOD URL) if it should go".into(),
        )];
    }
    if key == "network.http.block" {
        return vec![Fix::Note(
            "a network.http.block entry matches the request's method and path".into(),
        )];
    }
    if key == "adversary" {
        return vec![Fix::Note(
            "the reviewer (adversary) refused it after the rules allowed it; what it enforces is adversary.rules".into(),
        )];
    }
    match r.action.as_str() {
        "read" | "write" if key == "files.block_read" => {
            let Some(rule) = &r.rule else { return vec![] };
            if is_entry(rule) {
                return vec![Fix::Note(format!(
                    "{path} is itself a files.block_read entry, so no allow_read can carve it out; {}",
                    removable(rule)
                ))];
            }
            let mut v = vec![add("files", "allow_read", path.clone())];
            if r.action == "write" {
                v.push(add("files", "allow_write", path));
            }
            v
        }
        "write" if key == "files.block_write" => match &r.rule {
            Some(rule) => vec![Fix::Note(format!(
                "{path} is protected (code outside the sandbox may run it later); {}",
                removable(rule)
            ))],
            None => vec![],
        },
        "write"
            if ["/proc", "/sys", "/dev"]
                .iter()
                .any(|k| Path::new(&r.subject).starts_with(k)) =>
        {
            // A runtime's probe (Bun opens the kernel's trace_marker): opening a
            // kernel interface is no fix to offer.
            vec![Fix::Note(format!(
                "{path} is a kernel interface; programs that probe it carry on without it"
            ))]
        }
        "write" => {
            // Outside the writable roots: the path if it exists, else its directory.
            let p = Path::new(&r.subject);
            if p.exists() {
                return vec![add("files", "allow_write", path)];
            }
            let dir = p
                .parent()
                .map(|d| tilde(home, &d.display().to_string()))
                .unwrap_or_else(|| "/".into());
            vec![
                add("files", "allow_write", dir.clone()),
                Fix::Note(format!(
                    "{path} does not exist yet and only existing paths can be made writable, so this opens all of {dir}; or create the file first and allow just it"
                )),
            ]
        }
        "connect" => match &r.rule {
            Some(rule) if rule.key == "network.block" => vec![Fix::Note(format!(
                "{} is blocked and block wins over allow; {}",
                r.subject,
                removable(rule)
            ))],
            // Allowed by the host rules, limited to other programs.
            Some(rule) if rule.key == "network.program" => {
                let at = format!("{}:{}", rule.file, rule.line);
                vec![Fix::Note(match &r.program {
                    Some(p) => format!(
                        "{} is limited to the programs of network.program {:?} ({at}); if {p} should reach it, add \"{p}\" to that entry's programs",
                        r.subject, rule.entry
                    ),
                    None => format!(
                        "{} is limited to the programs of network.program {:?} ({at}), and the program that connected could not be identified",
                        r.subject, rule.entry
                    ),
                })]
            }
            Some(rule) if rule.key == "network.mode" => {
                let at = if rule.line == 0 {
                    rule.file.clone()
                } else {
                    format!("{}:{}", rule.file, rule.line)
                };
                vec![Fix::Note(if rule.entry.contains("unrestricted") {
                    // Unrestricted mode refuses what is not a public address.
                    format!(
                        "network.mode is \"unrestricted\" ({at}), which reaches public addresses only; to reach {}, set mode = \"filtered\" and name it in network.allow",
                        r.subject
                    )
                } else {
                    format!(
                        "network.mode is \"offline\" ({at}); set mode = \"filtered\" and allow {}",
                        r.subject
                    )
                })]
            }
            _ => vec![add("network", "allow", r.subject.clone())],
        },
        "resolve" => vec![add("network", "allow", r.subject.clone())],
        // network.allow does not open UDP: only unrestricted mode does, and only to
        // public addresses.
        "udp" => vec![Fix::Note(format!(
            "no network.allow entry opens UDP: beyond sandpit's DNS responder it reaches public addresses only, and only with network.mode = \"unrestricted\" (`sandpit explain udp {}` says why not here)",
            r.subject
        ))],
        "exec" => match &r.rule {
            Some(rule) if rule.key == "exec.block" => {
                vec![Fix::Note(format!(
                    "commands have no allow list; {}",
                    removable(rule)
                ))]
            }
            _ => vec![],
        },
        _ => vec![],
    }
}

/// One group: the same action on the same subject, denied for the same rule.
#[derive(Debug, Clone)]
pub struct Group {
    pub decision: Decision,
    pub action: String,
    pub subject: String,
    pub rule: Option<RuleRef>,
    pub reason: String,
    pub layers: Vec<&'static str>,
    pub count: usize,
    pub fixes: Vec<Fix>,
}

/// Shell and REPL history files under the home (the defaults' `files.block_read`
/// hides them): a shell or REPL reads and writes its history on every start and
/// exit, and the user can do nothing about that refusal, so the summary leaves
/// such reads and writes out (the log keeps them). A name's temporary and lock
/// files (`.zsh_history.LOCK`, `fish_history.Ab12Cd`) too.
pub const HISTORY_FILES: &[&str] = &[
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".ipython/profile_default/history.sqlite",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".irb_history",
    ".pry_history",
    ".rediscli_history",
    ".dbshell",
    ".julia/logs/repl_history.jl",
    ".lesshst",
    ".mongosh/mongosh_repl_history",
];

/// Whether `r` is a read or write of a history file ([`HISTORY_FILES`]).
pub fn is_history(home: &Path, r: &Record) -> bool {
    if !matches!(r.action.as_str(), "read" | "write") {
        return false;
    }
    let Ok(rest) = Path::new(&r.subject).strip_prefix(home) else {
        return false;
    };
    let rest = rest.to_string_lossy();
    HISTORY_FILES.iter().any(|h| {
        rest.strip_prefix(h)
            .is_some_and(|t| t.is_empty() || t.starts_with(['.', '-', '~', '+']))
    })
}

/// Group denials (in first-seen order), but for reads and writes of history
/// files ([`is_history`]).
pub fn group(home: &Path, denials: &[Record]) -> Vec<Group> {
    let mut order: Vec<(String, String, Option<RuleRef>)> = vec![];
    let mut groups: BTreeMap<(String, String, Option<String>), Group> = BTreeMap::new();
    for r in denials
        .iter()
        .filter(|r| r.decision.is_denial() && !is_history(home, r))
    {
        let k = (
            r.action.clone(),
            if r.action == "other" {
                r.reason.clone()
            } else {
                r.subject.clone()
            },
            r.rule.as_ref().map(|x| x.to_string()),
        );
        let g = groups.entry(k.clone()).or_insert_with(|| {
            order.push((k.0.clone(), k.1.clone(), r.rule.clone()));
            Group {
                decision: r.decision,
                action: r.action.clone(),
                subject: r.subject.clone(),
                rule: r.rule.clone(),
                reason: r.reason.clone(),
                layers: vec![],
                count: 0,
                fixes: fixes(home, r),
            }
        });
        g.count += 1;
        if !g.layers.contains(&r.layer.as_str()) {
            g.layers.push(r.layer.as_str());
        }
    }
    order
        .into_iter()
        .filter_map(|(a, s, rule)| groups.remove(&(a, s, rule.map(|x| x.to_string()))))
        .collect()
}

/// A reported run-later file the run created, changed or removed.
#[derive(Debug, Clone)]
pub struct Changed {
    pub path: std::path::PathBuf,
    pub how: &'static str,
    pub entry: &'static sandpit_policy::runlater::Entry,
}

/// Whether a refusal was of a file the host runs later: its rule is the registry's,
/// the launcher's `PATH`, git's configuration or another version-control tool's, or
/// its path is (or lies in) a read-only file of the registry.
fn runlater_refusal(ctx: &sandpit_policy::Context, r: &Record) -> bool {
    use sandpit_policy::runlater;
    if !matches!(r.action.as_str(), "write" | "quarantine") || !r.decision.is_denial() {
        return false;
    }
    let by_rule = r.rule.as_ref().is_some_and(|x| {
        x.key == "files.block_write"
            && (x.file == runlater::ORIGIN
                || x.file == runlater::PATH_ORIGIN
                || x.file.starts_with("git config (")
                || x.file == "other version control (sandpit)")
    });
    by_rule
        || runlater::entry_for(ctx, Path::new(&r.subject))
            .is_some_and(|e| e.treatment == runlater::Treatment::ReadOnly)
}

/// The end-of-run line naming each run-later file the run tried to create or
/// change (`docs/run-later.md`): the refused ones and the reported ones that
/// changed. `None` when there were none.
pub fn runlater_line(
    ctx: &sandpit_policy::Context,
    denials: &[Record],
    changed: &[Changed],
) -> Option<String> {
    let home = &ctx.home;
    let mut items: Vec<String> = vec![];
    let mut seen: Vec<String> = vec![];
    for r in denials.iter().filter(|r| runlater_refusal(ctx, r)) {
        let p = crate::console::printable(&tilde(home, &r.subject));
        if seen.contains(&p) {
            continue;
        }
        seen.push(p.clone());
        let why = sandpit_policy::runlater::entry_for(ctx, Path::new(&r.subject))
            .map(|e| format!("{}: {}", e.tool, e.runs))
            .unwrap_or_else(|| match &r.rule {
                Some(x) => x.file.clone(),
                None => "the host runs it later".into(),
            });
        let what = if r.action == "quarantine" {
            "moved aside"
        } else {
            "refused"
        };
        items.push(format!("{p} ({what}; {})", crate::console::printable(&why)));
    }
    for c in changed {
        let p = crate::console::printable(&tilde(home, &c.path.display().to_string()));
        if seen.contains(&p) {
            continue;
        }
        seen.push(p.clone());
        items.push(format!(
            "{p} ({}; {}: {})",
            c.how, c.entry.tool, c.entry.runs
        ));
    }
    if items.is_empty() {
        return None;
    }
    Some(format!(
        "sandpit: run-later files this run tried to create or change: {} (docs/run-later.md; \
         review the changed ones before you run the project)",
        items.join(", ")
    ))
}

/// Groups shown in full; the rest are counted.
const SHOWN: usize = 20;

/// The summary text, or `None` when nothing was denied.
pub fn render(home: &Path, run: &str, log: &Path, denials: &[Record]) -> Option<String> {
    let groups = group(home, denials);
    if groups.is_empty() {
        return None;
    }
    let learn = groups.iter().all(|g| g.decision == Decision::Learn);
    let total: usize = groups.iter().map(|g| g.count).sum();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sandpit: run {run}: {total} {} ({} distinct); log: {}",
        if learn {
            "would-be denials recorded (learn mode)"
        } else {
            "denials"
        },
        groups.len(),
        tilde(home, &log.display().to_string())
    );
    for g in groups.iter().take(SHOWN) {
        let times = if g.count > 1 {
            format!(" ({}x)", g.count)
        } else {
            String::new()
        };
        let subject = match g.action.as_str() {
            "read" | "write" => tilde(home, &g.subject),
            "other" => g.reason.clone(),
            _ => g.subject.clone(),
        };
        let subject = printable(&subject);
        let _ = writeln!(
            s,
            "  {} {} {subject}{times} [{}]",
            g.decision.as_str(),
            g.action,
            g.layers.join(", ")
        );
        match &g.rule {
            Some(r) => {
                let _ = writeln!(s, "      rule: {}", printable(&r.to_string()));
            }
            None if g.action != "other" => {
                let _ = writeln!(s, "      rule: none (the default for this kind of request)");
            }
            None => {}
        }
        for f in &g.fixes {
            match f {
                Fix::Add { .. } => {
                    let _ = writeln!(s, "      would allow it (add to ~/.sandpit/config.toml):");
                    for l in f.lines().lines() {
                        let _ = writeln!(s, "        {l}");
                    }
                }
                Fix::Note(n) => {
                    let _ = writeln!(s, "      {}", printable(n));
                }
            }
        }
    }
    if groups.len() > SHOWN {
        let _ = writeln!(
            s,
            "  … and {} more: `sandpit log {run} --denied`",
            groups.len() - SHOWN
        );
    }
    let _ = writeln!(
        s,
        "  nothing was changed: review each line before adding it."
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Layer;

    fn rec(action: &str, subject: &str, rule: Option<(&str, &str, u32)>) -> Record {
        let mut r = Record::new(
            "r",
            Layer::Interposer,
            action,
            subject.into(),
            Decision::Deny,
        );
        r.rule = rule.map(|(key, entry, line)| RuleRef {
            file: if line == 0 {
                "built-in default".into()
            } else {
                "/h/.sandpit/config.toml".into()
            },
            key: key.into(),
            entry: entry.into(),
            line,
            col: 3,
        });
        r
    }

    #[test]
    fn fixes_name_exact_lines() {
        let home = Path::new("/h");
        let f = fixes(
            home,
            &rec(
                "read",
                "/h/.ssh/config",
                Some(("files.block_read", "~/.ssh", 0)),
            ),
        );
        assert_eq!(
            f,
            vec![Fix::Add {
                table: "files",
                key: "allow_read",
                value: "~/.ssh/config".into()
            }]
        );
        assert_eq!(f[0].lines(), "[files]\nallow_read = [\"~/.ssh/config\"]");
        let f = fixes(
            home,
            &rec(
                "read",
                "/h/.netrc",
                Some(("files.block_read", "~/.netrc", 0)),
            ),
        );
        assert!(
            matches!(&f[0], Fix::Note(n) if n.contains("built-in default")),
            "{f:?}"
        );
        let f = fixes(home, &rec("connect", "evil.example:443", None));
        assert_eq!(f[0].lines(), "[network]\nallow = [\"evil.example:443\"]");
        // A program rule: adding the host to allow would change nothing.
        let mut limited = rec(
            "connect",
            "code.test:443",
            Some(("network.program", "git only", 7)),
        );
        limited.program = Some("/usr/bin/python3".into());
        let f = fixes(home, &limited);
        assert!(
            matches!(&f[..], [Fix::Note(n)] if n.contains("\"git only\"")
                && n.contains("add \"/usr/bin/python3\" to that entry's programs")),
            "{f:?}"
        );
        // Allowed, and refused by the world: no line to add.
        let mut failed = rec("connect", "api.example:443", None);
        failed.reason = format!("{}resolving api.example failed", crate::audit::ALLOWED_BUT);
        let f = fixes(home, &failed);
        assert!(
            matches!(&f[..], [Fix::Note(n)] if n.contains("the policy allows api.example:443")
                && n.contains("(resolving api.example failed)")),
            "{f:?}"
        );
        let f = fixes(
            home,
            &rec(
                "connect",
                "x.example:443",
                Some(("network.block", "x.example", 4)),
            ),
        );
        assert!(
            matches!(&f[0], Fix::Note(n) if n.contains("config.toml:4:3")),
            "{f:?}"
        );
        let f = fixes(
            home,
            &rec(
                "exec",
                "curl --data x",
                Some(("exec.block", "curl --data", 0)),
            ),
        );
        assert!(matches!(&f[0], Fix::Note(_)));
        // The mode refused it: which mode, and what would reach it.
        for (mode, says) in [
            (
                "offline",
                "network.mode is \"offline\" (/h/.sandpit/config.toml:2)",
            ),
            (
                "unrestricted",
                "reaches public addresses only; to reach 10.0.0.5:80",
            ),
        ] {
            let f = fixes(
                home,
                &rec("connect", "10.0.0.5:80", Some(("network.mode", mode, 2))),
            );
            assert!(
                matches!(&f[..], [Fix::Note(n)] if n.contains(says) && n.contains("mode = \"filtered\"")),
                "{mode}: {f:?}"
            );
        }
        // A kernel interface is not offered.
        let f = fixes(
            home,
            &rec("write", "/sys/kernel/debug/tracing/trace_marker", None),
        );
        assert!(
            matches!(&f[..], [Fix::Note(n)] if n.contains("kernel interface")),
            "{f:?}"
        );
        // A path with a quote is quoted as TOML.
        let f = fixes(home, &rec("write", "/nonexistent-dir/a\"b", None));
        assert_eq!(
            f[0].lines(),
            "[files]\nallow_write = [\"/nonexistent-dir\"]"
        );
        assert!(matches!(&f[1], Fix::Note(n) if n.contains("does not exist yet")));
        for tricky in ["a\"b", "it's", "back\\slash", "new\nline"] {
            let t: toml::Table = toml::from_str(&format!("x = {}", quote(tricky))).unwrap();
            assert_eq!(t["x"].as_str(), Some(tricky));
        }
    }

    /// One line names each run-later file: refused by the registry's rule, by its
    /// path alone (the home not writable), moved aside, or a reported one changed;
    /// other refusals and reads are not named.
    #[test]
    fn runlater_line_names_each_file_once() {
        let ctx = sandpit_policy::Context {
            home: "/h".into(),
            workspace: "/h/p".into(),
            scratch: "/t".into(),
            state_dir: "/h/.sandpit".into(),
        };
        let mut hook = rec("write", "/h/p/.git/hooks/pre-commit", None);
        hook.rule = Some(RuleRef {
            file: sandpit_policy::runlater::ORIGIN.into(),
            key: "files.block_write".into(),
            entry: ".git/hooks".into(),
            line: 0,
            col: 0,
        });
        let denials = vec![
            hook.clone(),
            hook,
            rec("write", "/h/.bashrc", None),
            rec("quarantine", "/h/p/.lefthook-local.yml", None),
            rec("write", "/etc/passwd", None),
            rec("read", "/h/.gitconfig", None),
        ];
        let pkg = sandpit_policy::runlater::entry("package.json").unwrap();
        let changed = vec![Changed {
            path: "/h/p/package.json".into(),
            how: "changed",
            entry: pkg,
        }];
        let line = runlater_line(&ctx, &denials, &changed).unwrap();
        assert_eq!(line.lines().count(), 1, "{line}");
        assert_eq!(
            line.matches("~/p/.git/hooks/pre-commit (refused; git:")
                .count(),
            1,
            "{line}"
        );
        assert!(
            line.contains("~/.bashrc (refused; bash: every interactive shell)"),
            "{line}"
        );
        assert!(
            line.contains("~/p/.lefthook-local.yml (moved aside; lefthook:"),
            "{line}"
        );
        assert!(
            line.contains("~/p/package.json (changed; npm, pnpm, yarn, bun: scripts"),
            "{line}"
        );
        assert!(
            !line.contains("passwd") && !line.contains(".gitconfig"),
            "{line}"
        );
        assert_eq!(
            runlater_line(&ctx, &[rec("write", "/etc/x", None)], &[]),
            None
        );
    }

    #[test]
    fn a_chosen_host_cannot_break_out_of_its_suggested_line() {
        // What the sandbox can send the audit socket as a connection's host.
        let host =
            "x.test\"]\n[files]\nallow_write = [\"~\"]\n#\u{1b}]52;c;YQ==\u{7}\u{9b}2J\u{202e}:443";
        let f = fixes(Path::new("/h"), &rec("connect", host, None));
        let lines = f[0].lines();
        assert_eq!(lines.lines().count(), 2, "{lines}");
        let t: toml::Table = toml::from_str(&lines).unwrap();
        assert_eq!(t.len(), 1, "{lines}");
        assert_eq!(t["network"]["allow"][0].as_str(), Some(host));
        let text = render(
            Path::new("/h"),
            "R",
            Path::new("/l"),
            &[rec("connect", host, None)],
        )
        .unwrap();
        assert!(!text.contains("\n[files]"), "{text}");
        for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
            assert!(!text.contains(c), "{c:?} in {text:?}");
        }
        let v = format!("x = {}", quote(host));
        assert_eq!(v.lines().count(), 1);
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("a\u{1b}[31mb\n"), "a\\x1b[31mb\\x0a");
        let r = rec("read", "/h/x\u{1b}]0;evil\u{7}", None);
        let text = render(Path::new("/h"), "R", Path::new("/l"), &[r]).unwrap();
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
    }

    #[test]
    fn groups_and_renders() {
        let home = Path::new("/h");
        let a = rec(
            "read",
            "/h/.ssh/id_rsa",
            Some(("files.block_read", "~/.ssh", 0)),
        );
        let b = rec("connect", "evil.example:443", None);
        let text = render(
            home,
            "R",
            Path::new("/h/.sandpit/logs/R.jsonl"),
            &[a.clone(), b, a],
        )
        .unwrap();
        assert!(text.contains("3 denials (2 distinct)"), "{text}");
        assert!(
            text.contains("deny read ~/.ssh/id_rsa (2x) [interposer]"),
            "{text}"
        );
        assert!(
            text.contains("rule: files.block_read \"~/.ssh\" in built-in default"),
            "{text}"
        );
        assert!(text.contains("allow_read = [\"~/.ssh/id_rsa\"]"), "{text}");
        assert!(text.contains("log: ~/.sandpit/logs/R.jsonl"), "{text}");
        assert!(render(home, "R", Path::new("/x"), &[]).is_none());
    }

    #[test]
    fn a_shell_writing_its_history_makes_no_summary() {
        let home = Path::new("/h");
        let rule = Some(("files.block_read", "~/.bash_history", 0));
        let quiet = [
            rec("write", "/h/.bash_history", rule),
            rec("read", "/h/.bash_history", rule),
            rec("write", "/h/.zsh_history.LOCK", None),
            rec("write", "/h/.local/share/fish/fish_history.Ab12Cd", None),
        ];
        assert!(render(home, "R", Path::new("/x"), &quiet).is_none());
        // Not a history file: shown.
        let loud = rec("read", "/h/.bash_history_secrets", None);
        let other = rec("read", "/elsewhere/.bash_history", None);
        let text = render(home, "R", Path::new("/x"), &[loud, other]).unwrap();
        assert!(text.contains("2 denials (2 distinct)"), "{text}");
    }
}
