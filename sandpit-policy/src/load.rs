//! Loading the layered policy: built-in default < agent profile < user file < project
//! file (tighten only) < command-line flags.
use crate::error::{Diagnostic, Error, Result};
use crate::host::{canonical_host, HostError, HostPattern};
use crate::matchers::{validate_env_glob, ExecPattern};
use crate::origin::{Layer, Origin, Rule};
use crate::path::{self, Context};
use crate::{
    Adversary, Credential, CredentialSource, Env, Exec, Files, Http, HttpRule, Isolation, Limits,
    NetMode, Network, OnError, Policy, ProgramRule, Provider, ResolveEntry, ReviewEvent, Shims,
    Telemetry, Tls,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The built-in default policy, shipped as `profiles/default.toml`.
pub const DEFAULT_POLICY: &str = include_str!("../../profiles/default.toml");

/// Agent profiles compiled into sandpit, by name (`profiles/<name>.toml`).
pub const BUILTIN_PROFILES: &[(&str, &str)] = &[
    ("aider", include_str!("../../profiles/aider.toml")),
    ("claude", include_str!("../../profiles/claude.toml")),
    ("codex", include_str!("../../profiles/codex.toml")),
    ("gemini", include_str!("../../profiles/gemini.toml")),
    ("goose", include_str!("../../profiles/goose.toml")),
    ("mini", include_str!("../../profiles/mini.toml")),
    ("opencode", include_str!("../../profiles/opencode.toml")),
    ("pi", include_str!("../../profiles/pi.toml")),
];

/// One policy text and where it came from.
#[derive(Debug, Clone)]
pub struct Source {
    pub layer: Layer,
    /// A path or a name shown in diagnostics and verdicts.
    pub name: String,
    pub text: String,
}

impl Source {
    pub fn new(layer: Layer, name: impl Into<String>, text: impl Into<String>) -> Source {
        Source {
            layer,
            name: name.into(),
            text: text.into(),
        }
    }

    /// Read a file; `Ok(None)` when it does not exist.
    pub fn read(layer: Layer, path: &Path) -> Result<Option<Source>> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(Source::new(layer, path.display().to_string(), text))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(Error::Read {
                path: path.display().to_string(),
                source,
            }),
        }
    }
}

/// Everything [`load`] needs: the directories paths expand against and the sources of
/// each layer that exists.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub context: Context,
    /// Replaces the built-in default when set (tests, `sandpit init` previews).
    pub default: Option<Source>,
    pub profile: Option<Source>,
    pub user: Option<Source>,
    pub project: Option<Source>,
    pub flags: Option<Source>,
}

impl LoadOptions {
    pub fn new(context: Context) -> LoadOptions {
        LoadOptions {
            context,
            default: None,
            profile: None,
            user: None,
            project: None,
            flags: None,
        }
    }
}

// ---------------------------------------------------------------------------------
// The TOML shape. Unknown keys and wrong types are rejected by serde with a span.

type Entries = Option<Spanned<Vec<Spanned<String>>>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    files: Option<Spanned<RawFiles>>,
    network: Option<Spanned<RawNetwork>>,
    exec: Option<Spanned<RawExec>>,
    env: Option<Spanned<RawEnv>>,
    adversary: Option<Spanned<RawAdversary>>,
    shims: Option<Spanned<RawShims>>,
    limits: Option<Spanned<RawLimits>>,
    isolation: Option<Spanned<RawIsolation>>,
    credentials: Option<Spanned<BTreeMap<Spanned<String>, Spanned<RawCredential>>>>,
    telemetry: Option<Spanned<RawTelemetry>>,
    ssh: Option<Spanned<RawSsh>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSsh {
    agent: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCredential {
    env: Option<Spanned<String>>,
    source: Option<Spanned<String>>,
    hosts: Entries,
    file: Option<Spanned<String>>,
    body: Option<Spanned<bool>>,
    required: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    extra_roots: Entries,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTelemetry {
    otlp_endpoint: Option<Spanned<String>>,
    headers: Option<Spanned<BTreeMap<Spanned<String>, Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIsolation {
    unix_sockets: Entries,
    nested_user_namespaces: Option<Spanned<bool>>,
    macos_trustd: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFiles {
    block_read: Entries,
    allow_read: Entries,
    block_write: Entries,
    allow_write: Entries,
    agent_read: Entries,
    devices: Entries,
    allow_home_workspace: Option<Spanned<bool>>,
    real_dotenv: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    mode: Option<Spanned<String>>,
    allow: Entries,
    block: Entries,
    allow_local_binding: Option<Spanned<bool>>,
    ask_on_blocked_host: Option<Spanned<bool>>,
    ask_timeout: Option<Spanned<i64>>,
    resolve: Option<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
    tls: Option<Spanned<RawTls>>,
    http: Option<Spanned<RawHttp>>,
    program: Option<Spanned<Vec<Spanned<RawProgram>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProgram {
    name: Option<Spanned<String>>,
    programs: Entries,
    hosts: Entries,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    allow: Entries,
    block: Entries,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExec {
    block: Entries,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnv {
    withhold: Entries,
    agent: Entries,
    agent_programs: Entries,
    set: Option<Spanned<BTreeMap<Spanned<String>, Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdversary {
    provider: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    endpoint: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    rules: Option<Spanned<String>>,
    review: Option<Spanned<Vec<Spanned<String>>>>,
    timeout_ms: Option<Spanned<i64>>,
    on_error: Option<Spanned<String>>,
    cache: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    processes: Option<Spanned<i64>>,
    audit_bytes: Option<Spanned<i64>>,
    tmp_bytes: Option<Spanned<i64>>,
    logs_days: Option<Spanned<i64>>,
    logs_bytes: Option<Spanned<i64>>,
    connections: Option<Spanned<i64>>,
    connections_per_second: Option<Spanned<i64>>,
    memory: Option<Spanned<i64>>,
    cache_bytes: Option<Spanned<i64>>,
    launcher_cpu: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShims {
    enabled: Option<Spanned<bool>>,
    extra: Entries,
}

// ---------------------------------------------------------------------------------

/// Load the effective policy from its layers.
pub fn load(opts: &LoadOptions) -> Result<Policy> {
    let ctx = &opts.context;
    let default = opts.default.clone().unwrap_or_else(|| {
        Source::new(
            Layer::Default,
            "profiles/default.toml (built-in)",
            DEFAULT_POLICY,
        )
    });
    let builtin = opts.default.is_none();
    let mut b = Builder::new(ctx.clone());
    b.apply(&default)?;
    // The files the host runs later (`runlater::REGISTRY`): part of the built-in
    // default, under every other layer.
    if builtin {
        crate::runlater::protect(&mut b.policy, ctx);
    }
    for src in [
        opts.profile.as_ref(),
        opts.user.as_ref(),
        opts.project.as_ref(),
        opts.flags.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        b.apply(src)?;
    }
    Ok(b.finish())
}

/// Parse a single source on its own (for `sandpit init` checks and fuzzing): every
/// validation of a layer runs, as if it were the user file over the default.
pub fn check_source(src: &Source, ctx: &Context) -> Result<()> {
    let mut b = Builder::new(ctx.clone());
    b.apply(&Source::new(
        Layer::Default,
        "built-in default",
        DEFAULT_POLICY,
    ))?;
    b.apply(src)
}

struct Builder {
    ctx: Context,
    policy: Policy,
    /// Where `mode = "unrestricted"` was set, while it is in force.
    unrestricted_at: Option<Origin>,
    /// Symlink lookups shared by every path of every layer.
    resolver: std::cell::RefCell<path::Resolver>,
    /// Each glob's walk, by its value: once per glob, however many layers name it,
    /// and kept with the policy for the kernel layer (`Policy::glob_matches`).
    walks: std::cell::RefCell<BTreeMap<PathBuf, crate::glob::Walk>>,
}

struct Cx<'a> {
    src: &'a Source,
    /// Byte offset where each line starts: a built-in profile's hundreds of origins
    /// each find their line by binary search, not by counting from the top.
    line_starts: Vec<usize>,
}

impl<'a> Cx<'a> {
    fn new(src: &'a Source) -> Cx<'a> {
        let line_starts = std::iter::once(0)
            .chain(src.text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Cx { src, line_starts }
    }

    /// 1-based line and column (in characters) of a byte offset, from the line index.
    fn line_col(&self, offset: usize) -> (u32, u32) {
        let text = &self.src.text;
        let offset = offset.min(text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset);
        let start = self.line_starts[line - 1];
        let col = text.get(start..offset).map_or(0, |l| l.chars().count()) + 1;
        (line as u32, col as u32)
    }

    fn diag(
        &self,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Error {
        let (line, column) = self.line_col(span.start);
        Error::Config(Box::new(Diagnostic {
            file: self.src.name.clone(),
            line,
            column,
            message: message.into(),
            hint: hint.into(),
        }))
    }

    fn origin(&self, key: &str, entry: &str, span: std::ops::Range<usize>) -> Origin {
        let (line, column) = self.line_col(span.start);
        Origin {
            layer: self.src.layer,
            file: self.src.name.clone(),
            key: key.into(),
            entry: entry.into(),
            line,
            column,
        }
    }
}

fn host_hint(e: &HostError) -> &'static str {
    match e {
        HostError::Scheme(_) => "write only the host name, e.g. \"api.example.com\" (add \":443\" to limit the port)",
        HostError::Path(_) => "paths cannot be filtered; allow the host, e.g. \"github.com\"",
        HostError::Wildcard => "use \"*.example.com\" for subdomains; \"*\" alone is `mode = \"unrestricted\"`",
        HostError::Port(_) => "ports are 1-65535, written \"host:443\" or \"[::1]:443\"",
        HostError::UserInfo => "remove the \"user@\" part",
        HostError::Cidr(_) => "write a range as \"10.0.0.0/8\" or \"fd00::/8\"",
        _ => "write a host name (\"api.example.com\"), an address (\"127.0.0.1:8080\", \"[::1]:8080\") or a range (\"10.0.0.0/8\")",
    }
}

impl Builder {
    fn new(ctx: Context) -> Builder {
        let builtin = |k: &str, e: &str| Origin::builtin(k, e);
        Builder {
            ctx,
            resolver: Default::default(),
            walks: Default::default(),
            policy: Policy {
                context: Context {
                    home: PathBuf::new(),
                    workspace: PathBuf::new(),
                    scratch: PathBuf::new(),
                    state_dir: PathBuf::new(),
                },
                files: Files::default(),
                network: Network {
                    mode: Rule {
                        value: NetMode::Filtered,
                        origin: builtin("network.mode", "filtered"),
                    },
                    allow: vec![],
                    block: vec![],
                    allow_local_binding: Rule {
                        value: false,
                        origin: builtin("network.allow_local_binding", "false"),
                    },
                    ask_on_blocked_host: Rule {
                        value: true,
                        origin: builtin("network.ask_on_blocked_host", "true"),
                    },
                    ask_timeout: Rule {
                        value: 30,
                        origin: builtin("network.ask_timeout", "30"),
                    },
                    resolve: vec![],
                    tls: Tls::default(),
                    http: Http::default(),
                    program: vec![],
                },
                exec: Exec::default(),
                env: Env::default(),
                adversary: None,
                shims: Shims::default(),
                limits: Limits::default(),
                isolation: Isolation::default(),
                credentials: vec![],
                credentials_skipped: vec![],
                ssh: crate::Ssh::default(),
                telemetry: Telemetry::default(),
                learn: false,
                glob_matches: Default::default(),
            },
            unrestricted_at: None,
        }
    }

    fn finish(mut self) -> Policy {
        self.policy.context = self.ctx;
        self.policy.glob_matches = crate::glob::Matches::new(self.walks.into_inner());
        self.policy
    }

    fn apply(&mut self, src: &Source) -> Result<()> {
        let cx = Cx::new(src);
        let raw: RawConfig = toml::from_str(&src.text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().to_string();
            let hint = if msg.contains("unknown field") {
                "remove or correct the key; `sandpit init` writes a commented example of every key"
            } else if msg.contains("invalid type") {
                "check the value's type: lists are [\"a\", \"b\"], booleans are true/false"
            } else {
                "fix the TOML syntax at this position"
            };
            cx.diag(span, msg, hint)
        })?;
        let project = src.layer == Layer::Project;
        if let Some(files) = &raw.files {
            self.apply_files(&cx, files.get_ref(), project)?;
        }
        if let Some(net) = &raw.network {
            self.apply_network(&cx, net, project)?;
        }
        if let Some(exec) = &raw.exec {
            for (text, span) in entries(&exec.get_ref().block) {
                let pat = ExecPattern::parse(text).map_err(|m| {
                    cx.diag(span.clone(), format!("exec.block entry {text:?}: {m}"), "a plain entry is a case-insensitive substring of the command line; \"re:\" starts a regex")
                })?;
                push_unique(
                    &mut self.policy.exec.block,
                    pat,
                    cx.origin("exec.block", text, span),
                );
            }
        }
        if let Some(env) = &raw.env {
            self.apply_env_agent(&cx, env.get_ref(), project)?;
            self.apply_env_set(&cx, env.get_ref(), project)?;
            for (text, span) in entries(&env.get_ref().withhold) {
                validate_env_glob(text).map_err(|m| {
                    cx.diag(
                        span.clone(),
                        format!("env.withhold entry {text:?}: {m}"),
                        "write a variable name or a glob such as \"*_TOKEN\" or \"AWS_*\"",
                    )
                })?;
                push_unique(
                    &mut self.policy.env.withhold,
                    text.to_string(),
                    cx.origin("env.withhold", text, span),
                );
            }
        }
        if let Some(adv) = &raw.adversary {
            self.apply_adversary(&cx, adv, project)?;
        }
        if let Some(limits) = &raw.limits {
            self.apply_limits(&cx, limits.get_ref(), project)?;
        }
        if let Some(iso) = &raw.isolation {
            self.apply_isolation(&cx, iso, project)?;
        }
        if let Some(creds) = &raw.credentials {
            self.apply_credentials(&cx, creds, project)?;
        }
        if let Some(t) = &raw.telemetry {
            self.apply_telemetry(&cx, t, project)?;
        }
        if let Some(a) = raw.ssh.as_ref().and_then(|s| s.get_ref().agent.as_ref()) {
            let value = match a.get_ref().as_str() {
                "filtered" => crate::SshAgent::Filtered,
                "off" => crate::SshAgent::Off,
                other => {
                    return Err(cx.diag(
                        a.span(),
                        format!("ssh.agent {other:?} is not \"filtered\" or \"off\""),
                        "write \"filtered\" (the sandbox's agent signs logins to known, allowed hosts only) or \"off\"",
                    ))
                }
            };
            if project && value != crate::SshAgent::Off {
                return Err(cx.diag(
                    a.span(),
                    "a project file can only turn the SSH agent off",
                    "set ssh.agent in ~/.sandpit/config.toml",
                ));
            }
            self.policy.ssh.agent = Some(Rule {
                value,
                origin: cx.origin("ssh.agent", value.as_str(), a.span()),
            });
        }
        if let Some(shims) = &raw.shims {
            let s = shims.get_ref();
            self.switches(
                &cx,
                &[(
                    "shims.enabled",
                    &s.enabled,
                    Some((
                        |on, was| !on && was,
                        "a project file cannot turn shims off",
                        "remove shims.enabled from .sandpit.toml",
                    )),
                    |p| Slot::Flag(&mut p.shims.enabled),
                )],
                project,
            )?;
            for (text, span) in entries(&s.extra) {
                if text.is_empty()
                    || text.contains('/')
                    || text.chars().any(|c| c.is_whitespace() || c.is_control())
                {
                    return Err(cx.diag(
                        span,
                        format!("shims.extra entry {text:?} is not a command name"),
                        "write a bare command name such as \"psql\"",
                    ));
                }
                push_unique(
                    &mut self.policy.shims.extra,
                    text.to_string(),
                    cx.origin("shims.extra", text, span),
                );
            }
        }
        Ok(())
    }

    /// `env.set`: variables the command gets. Not from a project file (a value
    /// there would reach the user's programs: `NODE_OPTIONS`, `PYTHONSTARTUP`),
    /// and never one that sandpit itself sets or the loader obeys.
    fn apply_env_set(&mut self, cx: &Cx, env: &RawEnv, project: bool) -> Result<()> {
        let Some(set) = &env.set else {
            return Ok(());
        };
        if project {
            return Err(cx.diag(
                set.span(),
                "env.set cannot be in a project file: its values would reach every program of the run",
                "set the variable in ~/.sandpit/config.toml if you trust the project with it",
            ));
        }
        for (name, value) in set.get_ref() {
            let n = name.get_ref();
            if let Some(why) = env_set_refusal(n) {
                return Err(cx.diag(
                    name.span(),
                    format!("env.set key {n:?} {why}"),
                    "set another variable, or set it yourself before `sandpit run`",
                ));
            }
            if let Some(c) = self
                .policy
                .credentials
                .iter()
                .find(|c| c.env == *n || c.source_var() == Some(n.as_str()))
            {
                return Err(cx.diag(
                    name.span(),
                    format!(
                        "env.set key {n:?} is credentials.{}'s variable ({})",
                        c.name,
                        c.origin.location()
                    ),
                    "leave the variable to the credential",
                ));
            }
            if value.get_ref().contains('\0') {
                return Err(cx.diag(
                    value.span(),
                    format!("env.set.{n} holds a NUL byte"),
                    "a variable's value cannot hold one",
                ));
            }
            let entry = format!("{n} = {:?}", value.get_ref());
            self.policy.env.set.retain(|r| r.value.name != *n);
            self.policy.env.set.push(Rule {
                value: crate::EnvSet {
                    name: n.clone(),
                    value: value.get_ref().clone(),
                },
                origin: cx.origin("env.set", &entry, name.span()),
            });
        }
        Ok(())
    }

    /// `env.agent` and `env.agent_programs`: what the agent keeps of the withheld
    /// variables. They only give, so a project file may set neither.
    fn apply_env_agent(&mut self, cx: &Cx, env: &RawEnv, project: bool) -> Result<()> {
        for (key, list) in [
            ("agent", &env.agent),
            ("agent_programs", &env.agent_programs),
        ] {
            if let (true, Some(l)) = (project, list) {
                return Err(cx.diag(
                    l.span(),
                    format!("env.{key} cannot be set by a project file: it hands withheld variables to programs"),
                    "set it in ~/.sandpit/config.toml, or leave it to the agent's profile",
                ));
            }
        }
        for (text, span) in entries(&env.agent) {
            validate_env_glob(text).map_err(|m| {
                cx.diag(
                    span.clone(),
                    format!("env.agent entry {text:?}: {m}"),
                    "write a variable name or a glob such as \"OPENAI_API_KEY\" or \"CODEX_*\"",
                )
            })?;
            push_unique(
                &mut self.policy.env.agent,
                text.to_string(),
                cx.origin("env.agent", text, span),
            );
        }
        for (text, span) in entries(&env.agent_programs) {
            let bad = if text.is_empty() || text.contains('\0') {
                Some("an empty name or a NUL byte")
            } else if text.contains('/') && !text.starts_with('/') && !text.starts_with('*') {
                Some("a relative path")
            } else if text.chars().all(|c| c == '*' || c == '/') {
                Some("a pattern that names every program")
            } else {
                None
            };
            if let Some(why) = bad {
                return Err(cx.diag(
                    span,
                    format!("env.agent_programs entry {text:?} is {why}"),
                    "write the program's name (\"codex\") or a glob over its absolute path (\"*/@openai/codex*/codex\")",
                ));
            }
            push_unique(
                &mut self.policy.env.agent_programs,
                text.to_string(),
                cx.origin("env.agent_programs", text, span),
            );
        }
        Ok(())
    }

    /// `[isolation]`: each key only gives, so a project file may set none of them.
    /// A switch set to `false` in a later layer turns it off again.
    fn apply_isolation(
        &mut self,
        cx: &Cx,
        iso: &Spanned<RawIsolation>,
        project: bool,
    ) -> Result<()> {
        if project {
            return Err(cx.diag(
                iso.span(),
                "an [isolation] table cannot be in a project file: each of its keys weakens the sandbox",
                "set the key in ~/.sandpit/config.toml if you trust the project with it",
            ));
        }
        let i = iso.get_ref();
        for r in self.paths(cx, "isolation.unix_sockets", &i.unix_sockets)? {
            if !self
                .policy
                .isolation
                .unix_sockets
                .iter()
                .any(|o| o.value == r.value)
            {
                self.policy.isolation.unix_sockets.push(r);
            }
        }
        // A project file never gets here: the table is refused whole above.
        self.switches(
            cx,
            &[
                (
                    "isolation.nested_user_namespaces",
                    &i.nested_user_namespaces,
                    None,
                    |p| Slot::On(&mut p.isolation.nested_user_namespaces),
                ),
                ("isolation.macos_trustd", &i.macos_trustd, None, |p| {
                    Slot::On(&mut p.isolation.macos_trustd)
                }),
            ],
            project,
        )
    }

    /// `[telemetry]`: the user's own layers only (a project must not redirect the
    /// user's audit records). Each key a later layer sets replaces the earlier value.
    fn apply_telemetry(&mut self, cx: &Cx, t: &Spanned<RawTelemetry>, project: bool) -> Result<()> {
        if project {
            return Err(cx.diag(
                t.span(),
                "a [telemetry] table cannot be in a project file: it would send your audit records where the project says",
                "set it in ~/.sandpit/config.toml",
            ));
        }
        let raw = t.get_ref();
        let mut out = self.policy.telemetry.clone();
        if let Some(e) = &raw.otlp_endpoint {
            let url = e.get_ref().trim_end_matches('/');
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"));
            let host = rest.map(|r| r.split('/').next().unwrap_or(""));
            if host.is_none_or(|h| h.is_empty() || h.contains('@'))
                || url.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(cx.diag(
                    e.span(),
                    format!("telemetry.otlp_endpoint {:?} is not an http(s) URL", e.get_ref()),
                    "write the collector's OTLP/HTTP address, e.g. \"http://127.0.0.1:4318\" (logs go to its /v1/logs)",
                ));
            }
            out.otlp_endpoint = Some(Rule {
                value: url.to_string(),
                origin: cx.origin("telemetry.otlp_endpoint", url, e.span()),
            });
        }
        if let Some(h) = &raw.headers {
            out.headers.clear();
            for (name, value) in h.get_ref() {
                let n = name.get_ref();
                if n.is_empty()
                    || !n
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
                {
                    return Err(cx.diag(
                        name.span(),
                        format!("telemetry.headers: {n:?} is not an HTTP header name"),
                        "write a header name such as \"authorization\"",
                    ));
                }
                if value.get_ref().chars().any(|c| c.is_control()) {
                    return Err(cx.diag(
                        value.span(),
                        format!("telemetry.headers.{n}: the value has a control character"),
                        "write the value on one line, without control characters",
                    ));
                }
                out.headers.push((n.clone(), value.get_ref().clone()));
            }
        }
        self.policy.telemetry = out;
        Ok(())
    }

    fn apply_limits(&mut self, cx: &Cx, l: &RawLimits, project: bool) -> Result<()> {
        // How long the user's own logs are kept is not the project's to say.
        for (key, raw) in [
            ("limits.logs_days", &l.logs_days),
            ("limits.logs_bytes", &l.logs_bytes),
        ] {
            if let (true, Some(v)) = (project, raw) {
                return Err(cx.diag(
                    v.span(),
                    format!("{key} cannot be set by a project file: it decides how long your own logs are kept"),
                    "set it in ~/.sandpit/config.toml",
                ));
            }
        }
        let keys: [LimitKey; 10] = [
            (
                "limits.tmp_bytes",
                &l.tmp_bytes,
                Limits::MIN_TMP_BYTES,
                "bytes",
                |l| &mut l.tmp_bytes,
            ),
            (
                "limits.processes",
                &l.processes,
                Limits::MIN_PROCESSES,
                "processes and threads",
                |l| &mut l.processes,
            ),
            (
                "limits.audit_bytes",
                &l.audit_bytes,
                Limits::MIN_AUDIT_BYTES,
                "bytes",
                |l| &mut l.audit_bytes,
            ),
            ("limits.logs_days", &l.logs_days, 1, "days", |l| {
                &mut l.logs_days
            }),
            (
                "limits.logs_bytes",
                &l.logs_bytes,
                Limits::MIN_AUDIT_BYTES,
                "bytes",
                |l| &mut l.logs_bytes,
            ),
            (
                "limits.connections",
                &l.connections,
                Limits::MIN_CONNECTIONS,
                "connections",
                |l| &mut l.connections,
            ),
            (
                "limits.connections_per_second",
                &l.connections_per_second,
                Limits::MIN_CONNECTIONS_PER_SECOND,
                "connections a second",
                |l| &mut l.connections_per_second,
            ),
            (
                "limits.memory",
                &l.memory,
                Limits::MIN_MEMORY,
                "bytes",
                |l| &mut l.memory,
            ),
            (
                "limits.cache_bytes",
                &l.cache_bytes,
                Limits::MIN_CACHE_BYTES,
                "bytes",
                |l| &mut l.cache_bytes,
            ),
            (
                "limits.launcher_cpu",
                &l.launcher_cpu,
                Limits::MIN_LAUNCHER_CPU,
                "percent of one core",
                |l| &mut l.launcher_cpu,
            ),
        ];
        for (key, raw, min, unit, slot) in keys {
            let current = slot(&mut self.policy.limits).clone();
            if let Some(r) = limit(cx, key, raw, min, unit, &current, project)? {
                *slot(&mut self.policy.limits) = r;
            }
        }
        Ok(())
    }

    /// Boolean keys, in order: each refused where a project file sets it as its row
    /// says, else set with its origin.
    fn switches(&mut self, cx: &Cx, keys: &[SwitchKey], project: bool) -> Result<()> {
        for &(key, raw, narrowing, slot) in keys {
            let Some(b) = raw else {
                continue;
            };
            let on = *b.get_ref();
            if let (true, Some((refused, message, hint))) = (project, narrowing) {
                if refused(on, slot(&mut self.policy).get()) {
                    return Err(cx.diag(b.span(), message, hint));
                }
            }
            slot(&mut self.policy).set(Rule {
                value: on,
                origin: cx.origin(key, &on.to_string(), b.span()),
            });
        }
        Ok(())
    }

    fn paths(&self, cx: &Cx, key: &str, list: &Entries) -> Result<Vec<Rule<PathBuf>>> {
        let mut out = vec![];
        for (text, span) in entries(list) {
            let p = path::expand(text, &self.ctx).map_err(|e| {
                cx.diag(span.clone(), format!("{key} entry {text:?}: {e}"), "write an absolute path, \"~/…\", \"$HOME/…\", \"$TMPDIR/…\" or a path relative to the workspace")
            })?;
            let value = if crate::glob::is_glob(p.as_os_str().as_encoded_bytes()) {
                crate::glob::check(&p).map_err(|m| {
                    cx.diag(span.clone(), format!("{key} entry {text:?}: {m}"), "write * and ? within a component, ** as a whole component: \"~/.config/*/credentials*\", \"**/.env\"")
                })?;
                // The links of the literal part are resolved; the rest is matched as
                // written.
                let prefix = crate::glob::literal_prefix(&p);
                let rest = p.strip_prefix(&prefix).unwrap_or(&p).to_path_buf();
                let value = self.resolver.borrow_mut().resolve(&prefix).join(rest);
                // What it matches now through a link (`~/.config/app` linking to
                // `~/dots/app`) is held where it really is too: every layer judges
                // resolved paths. (Matches made later through a link are not.) A
                // walk past the limit adds nothing here: the kernel layer, which
                // takes the same walk's matches, refuses the run (run/input.rs).
                let mut walks = self.walks.borrow_mut();
                let found = walks
                    .entry(value.clone())
                    .or_insert_with(|| crate::glob::expand(&value, crate::glob::WALK_LIMIT));
                for m in found.iter().flatten() {
                    let real = self.resolver.borrow_mut().resolve(m);
                    if real != *m {
                        out.push(Rule {
                            value: real,
                            origin: cx.origin(key, text, span.clone()),
                        });
                    }
                }
                value
            } else {
                self.resolver.borrow_mut().resolve(&p)
            };
            out.push(Rule {
                value,
                origin: cx.origin(key, text, span),
            });
        }
        Ok(out)
    }

    /// `files.devices`: host devices passed into the sandbox's `/dev`. They only
    /// give, so a project file may name none; each must be a path under `/dev`.
    fn apply_devices(&mut self, cx: &Cx, f: &RawFiles, project: bool) -> Result<()> {
        if let (true, Some(l)) = (project, &f.devices) {
            return Err(cx.diag(
                l.span(),
                "files.devices cannot be set by a project file: it passes host devices into the sandbox",
                "set it in ~/.sandpit/config.toml if you trust the project with the device",
            ));
        }
        for (text, span) in entries(&f.devices) {
            let p = Path::new(text);
            // Written as the kernel names it: absolute, no `.`, `..` or doubled `/`.
            let plain: PathBuf = p.components().collect();
            let under_dev = p.starts_with("/dev")
                && p != Path::new("/dev")
                && plain.as_os_str() == p.as_os_str()
                && p.components().all(|c| {
                    matches!(
                        c,
                        std::path::Component::RootDir | std::path::Component::Normal(_)
                    )
                });
            let special = [
                "/dev/pts",
                "/dev/shm",
                "/dev/ptmx",
                "/dev/fd",
                "/dev/stdin",
                "/dev/stdout",
                "/dev/stderr",
            ]
            .iter()
            .any(|s| p.starts_with(s));
            if !under_dev || special {
                return Err(cx.diag(
                    span,
                    format!("files.devices entry {text:?} is no device under /dev"),
                    "write a host device's path, such as \"/dev/kvm\" or \"/dev/dri\" (the sandbox has its own pts and shm)",
                ));
            }
            if !self.policy.files.devices.iter().any(|r| r.value == p) {
                self.policy.files.devices.push(Rule {
                    value: p.to_path_buf(),
                    origin: cx.origin("files.devices", text, span),
                });
            }
        }
        Ok(())
    }

    fn apply_files(&mut self, cx: &Cx, f: &RawFiles, project: bool) -> Result<()> {
        self.apply_devices(cx, f, project)?;
        if let Some(b) = &f.allow_home_workspace {
            if project {
                return Err(cx.diag(
                    b.span(),
                    "files.allow_home_workspace cannot be set by a project file: it would let a project make your whole home writable",
                    "set it in ~/.sandpit/config.toml, or pass --allow-home-workspace to the one run",
                ));
            }
            let on = *b.get_ref();
            self.policy.files.allow_home_workspace =
                on.then(|| cx.origin("files.allow_home_workspace", "true", b.span()));
        }
        self.switches(
            cx,
            &[(
                "files.real_dotenv",
                &f.real_dotenv,
                Some((
                    |on, _| on,
                    "files.real_dotenv cannot be turned on by a project file: it would show the project's .env secrets to the sandbox",
                    "set it in ~/.sandpit/config.toml if you want the real .env files inside",
                )),
                |p| Slot::On(&mut p.files.real_dotenv),
            )],
            project,
        )?;
        self.apply_agent_read(cx, f, project)?;
        let block_read = self.paths(cx, "files.block_read", &f.block_read)?;
        let block_write = self.paths(cx, "files.block_write", &f.block_write)?;
        let allow_read = self.paths(cx, "files.allow_read", &f.allow_read)?;
        let allow_write = self.paths(cx, "files.allow_write", &f.allow_write)?;
        if project {
            // A project allow_read may narrow the carve-outs, never make one: what
            // the lower layers refuse to read stays refused.
            for r in &allow_read {
                if crate::glob::is_glob(r.value.as_os_str().as_encoded_bytes()) {
                    let span = span_of(cx, &r.origin);
                    return Err(cx.diag(span, format!("files.allow_read entry {:?} is a glob: a project file's carve-outs name paths", r.origin.entry), "write the paths themselves, or move the entry to ~/.sandpit/config.toml"));
                }
                if crate::decide::decide(&self.policy, &crate::Request::Read(&r.value)).is_denied()
                {
                    let span = span_of(cx, &r.origin);
                    return Err(cx.diag(span, format!("files.allow_read entry {:?} widens the policy: your own config and the built-in defaults refuse reading it, and a project file may only narrow", r.origin.entry), format!("move this entry to ~/.sandpit/config.toml if you trust it, or remove it from {}", cx.src.name)));
                }
            }
        }
        let files = &mut self.policy.files;
        for r in block_read {
            push_path_rule(&mut files.block_read, r);
        }
        for r in block_write {
            push_path_rule(&mut files.block_write, r);
        }
        if project {
            // Tighten only: each allow must lie within one the lower layers granted; the
            // project's list then replaces theirs.
            for (new, old, key) in [
                (&allow_read, &files.allow_read, "files.allow_read"),
                (&allow_write, &files.allow_write, "files.allow_write"),
            ] {
                for r in new.iter() {
                    if !old.iter().any(|o| path::is_within(&r.value, &o.value)) {
                        let span = span_of(cx, &r.origin);
                        return Err(cx.diag(span, format!("{key} entry {:?} widens the policy: a project file may only narrow what your own config allows", r.origin.entry), format!("move this entry to ~/.sandpit/config.toml if you trust it, or remove it from {}", cx.src.name)));
                    }
                }
            }
            if f.allow_read.is_some() {
                files.allow_read = allow_read;
            }
            if f.allow_write.is_some() {
                files.allow_write = allow_write;
            }
        } else {
            for r in allow_read {
                push_path_rule(&mut files.allow_read, r);
            }
            for r in allow_write {
                push_path_rule(&mut files.allow_write, r);
            }
        }
        Ok(())
    }

    /// `files.agent_read`: paths (no globs) the agent reads and what it spawns does
    /// not. Each is also an `allow_read` carve-out (a default `block_read` hides the
    /// agents' login files), so a project file, which may only narrow, cannot name one.
    fn apply_agent_read(&mut self, cx: &Cx, f: &RawFiles, project: bool) -> Result<()> {
        if project {
            if let Some((_, span)) = entries(&f.agent_read).next() {
                return Err(cx.diag(span, "files.agent_read makes a file readable to the agent: a project file may only narrow the policy", "set it in ~/.sandpit/config.toml, or leave it to the agent's profile"));
            }
            return Ok(());
        }
        for r in self.paths(cx, "files.agent_read", &f.agent_read)? {
            if crate::glob::is_glob(r.value.as_os_str().as_encoded_bytes()) {
                let span = span_of(cx, &r.origin);
                return Err(cx.diag(
                    span,
                    format!("files.agent_read entry {:?} is a glob", r.origin.entry),
                    "name the agent's files themselves: \"~/.codex/auth.json\"",
                ));
            }
            push_path_rule(&mut self.policy.files.allow_read, r.clone());
            push_path_rule(&mut self.policy.files.agent_read, r);
        }
        Ok(())
    }

    fn hosts(&self, cx: &Cx, key: &str, list: &Entries) -> Result<Vec<Rule<HostPattern>>> {
        let mut out = vec![];
        for (text, span) in entries(list) {
            let pat = HostPattern::parse(text).map_err(|e| {
                cx.diag(
                    span.clone(),
                    format!("{key} entry {text:?}: {e}"),
                    host_hint(&e),
                )
            })?;
            if key == "network.allow" && pat.is_loopback() && pat.port.is_none() {
                return Err(cx.diag(
                    span,
                    format!("{key} entry {text:?} opens every loopback port"),
                    format!("name the port of the one service you mean, e.g. \"{text}:11434\""),
                ));
            }
            out.push(Rule {
                value: pat,
                origin: cx.origin(key, text, span),
            });
        }
        Ok(out)
    }

    fn apply_network(&mut self, cx: &Cx, net: &Spanned<RawNetwork>, project: bool) -> Result<()> {
        let n = net.get_ref();
        if project {
            if let Some(at) = &self.unrestricted_at {
                return Err(cx.diag(net.span(), format!("a project [network] table is not allowed while network.mode = \"unrestricted\" (set in {})", at.location()), "remove [network] from .sandpit.toml, or set mode = \"filtered\" in your own config"));
            }
            if let Some(r) = &n.resolve {
                return Err(cx.diag(
                    r.span(),
                    "network.resolve in a project file would let it point names at local addresses",
                    "move the entries to ~/.sandpit/config.toml",
                ));
            }
            if let Some(t) = &n.tls {
                return Err(cx.diag(
                    t.span(),
                    "network.tls in a project file would let it choose whom sandpit trusts with your credentials",
                    "move the entries to ~/.sandpit/config.toml",
                ));
            }
            if let Some(a) = n.http.as_ref().and_then(|h| h.get_ref().allow.as_ref()) {
                return Err(cx.diag(
                    a.span(),
                    "network.http.allow in a project file could let requests through that your own rules refuse",
                    "a project file may add network.http.block entries; put allow entries in ~/.sandpit/config.toml",
                ));
            }
        }
        // A project file may only turn these off. Checked here, among its other
        // refusals and before the mode: of several errors in one file, the first in
        // this order is the one reported.
        self.switches(
            cx,
            &[
                (
                    "network.allow_local_binding",
                    &n.allow_local_binding,
                    Some((
                        |on, was| on && !was,
                        "a project file may turn network.allow_local_binding off, never on",
                        "set it in ~/.sandpit/config.toml or pass the flag for this run",
                    )),
                    |p| Slot::Rule(&mut p.network.allow_local_binding),
                ),
                (
                    "network.ask_on_blocked_host",
                    &n.ask_on_blocked_host,
                    // Refused even where it is on already.
                    Some((
                        |on, _| on,
                        "a project file may turn network.ask_on_blocked_host off, never on",
                        "remove the line (asking is on by default when a terminal is there) or set it in ~/.sandpit/config.toml",
                    )),
                    |p| Slot::Rule(&mut p.network.ask_on_blocked_host),
                ),
            ],
            project,
        )?;
        if project {
            if let Some(t) = &n.ask_timeout {
                if *t.get_ref() > i64::from(self.policy.network.ask_timeout.value) {
                    return Err(cx.diag(
                        t.span(),
                        format!(
                            "network.ask_timeout = {} is longer than the {} seconds set in {}: a project file may only lower it",
                            t.get_ref(),
                            self.policy.network.ask_timeout.value,
                            self.policy.network.ask_timeout.origin.location()
                        ),
                        "lower it or remove the line",
                    ));
                }
            }
        }
        let mode = match &n.mode {
            None => None,
            Some(m) => Some(match m.get_ref().as_str() {
                "filtered" => NetMode::Filtered,
                "offline" => NetMode::Offline,
                "unrestricted" => NetMode::Unrestricted,
                other => {
                    return Err(cx.diag(
                        m.span(),
                        format!("network.mode {other:?} is not a mode"),
                        "use \"filtered\", \"offline\" or \"unrestricted\"",
                    ))
                }
            }),
        };
        if mode == Some(NetMode::Unrestricted) {
            // Sandlot's meaning: unrestricted removes host filtering and nothing else, and
            // the table that says so says nothing more.
            let others = [
                ("allow", n.allow.as_ref().map(|s| s.span())),
                ("block", n.block.as_ref().map(|s| s.span())),
                (
                    "allow_local_binding",
                    n.allow_local_binding.as_ref().map(|s| s.span()),
                ),
                ("resolve", n.resolve.as_ref().map(|s| s.span())),
                ("tls", n.tls.as_ref().map(|s| s.span())),
                ("http", n.http.as_ref().map(|s| s.span())),
            ];
            if let Some((key, Some(span))) = others.into_iter().find(|(_, s)| s.is_some()) {
                return Err(cx.diag(span, format!("network.{key} cannot be combined with mode = \"unrestricted\""), "unrestricted removes host filtering only; use mode = \"filtered\" with allow/block lists instead"));
            }
        } else if let Some(at) = &self.unrestricted_at {
            // network.program only restricts: it holds in every mode.
            let others = n.allow.is_some()
                || n.block.is_some()
                || n.resolve.is_some()
                || n.tls.is_some()
                || n.http.is_some()
                || n.allow_local_binding.is_some();
            if mode.is_none() && others {
                let key = if n.allow.is_some() {
                    "allow"
                } else if n.block.is_some() {
                    "block"
                } else if n.resolve.is_some() {
                    "resolve"
                } else if n.tls.is_some() {
                    "tls"
                } else if n.http.is_some() {
                    "http"
                } else {
                    "allow_local_binding"
                };
                return Err(cx.diag(net.span(), format!("network.{key} has no effect while network.mode = \"unrestricted\" (set in {})", at.location()), "set mode = \"filtered\" in this table to filter hosts again"));
            }
        }
        if let Some(m) = mode {
            let span = n.mode.as_ref().map(|s| s.span()).unwrap_or(0..0);
            if project && m > self.policy.network.mode.value {
                return Err(cx.diag(
                    span,
                    format!(
                        "network.mode {:?} is looser than {:?} from {}",
                        m.as_str(),
                        self.policy.network.mode.value.as_str(),
                        self.policy.network.mode.origin.location()
                    ),
                    "a project file may only tighten: unrestricted > filtered > offline",
                ));
            }
            self.policy.network.mode = Rule {
                value: m,
                origin: cx.origin("network.mode", m.as_str(), span),
            };
            if m == NetMode::Unrestricted {
                // An agent profile's credentials (its model keys) give way: the
                // user chose no host filtering, and the keys go back to env.agent.
                let profile: Vec<String> = (self.policy.credentials.iter())
                    .filter(|c| c.origin.layer == Layer::Profile && !c.required)
                    .map(|c| c.name.clone())
                    .collect();
                for name in profile {
                    self.policy.skip_credential(
                        &name,
                        format!(
                            "network.mode = \"unrestricted\" ({}) has no filtering proxy to put it in",
                            self.policy.network.mode.origin.location()
                        ),
                    );
                }
                if let Some(c) = self.policy.credentials.first() {
                    let span = span_of(cx, &self.policy.network.mode.origin);
                    return Err(cx.diag(span, format!("network.mode = \"unrestricted\" cannot be combined with [credentials] ({} sets credentials.{})", c.origin.location(), c.name), "credentials are injected by a proxy that filters hosts; use mode = \"filtered\" and allow the credentials' hosts"));
                }
                self.unrestricted_at = Some(self.policy.network.mode.origin.clone());
                self.policy.network.allow.clear();
                self.policy.network.block.clear();
            } else {
                self.unrestricted_at = None;
            }
        }
        let allow = self.hosts(cx, "network.allow", &n.allow)?;
        let block = self.hosts(cx, "network.block", &n.block)?;
        if project && n.allow.is_some() {
            for r in &allow {
                if !self
                    .policy
                    .network
                    .allow
                    .iter()
                    .any(|o| r.value.is_covered_by(&o.value))
                {
                    let span = span_of(cx, &r.origin);
                    return Err(cx.diag(span, format!("network.allow entry {:?} widens the policy: a project file may only narrow the hosts your own config allows", r.origin.entry), format!("move it to ~/.sandpit/config.toml if you trust it, or remove it from {}", cx.src.name)));
                }
            }
            self.policy.network.allow = allow;
        } else {
            for r in allow {
                push_rule(&mut self.policy.network.allow, r);
            }
        }
        for r in block {
            push_rule(&mut self.policy.network.block, r);
        }
        if let Some(list) = &n.program {
            for entry in list.get_ref() {
                self.apply_program(cx, entry)?;
            }
        }
        if let Some(t) = &n.ask_timeout {
            let secs = u32::try_from(*t.get_ref())
                .ok()
                .filter(|s| (1..=3600).contains(s))
                .ok_or_else(|| {
                    cx.diag(
                        t.span(),
                        format!(
                            "network.ask_timeout = {} is not a number of seconds from 1 to 3600",
                            t.get_ref()
                        ),
                        "write the seconds a question waits for its answer, e.g. ask_timeout = 30",
                    )
                })?;
            self.policy.network.ask_timeout = Rule {
                value: secs,
                origin: cx.origin("network.ask_timeout", &secs.to_string(), t.span()),
            };
        }
        if let Some(res) = &n.resolve {
            for (name, addrs) in res.get_ref() {
                let host = canonical_host(name.get_ref()).map_err(|e| {
                    cx.diag(
                        name.span(),
                        format!("network.resolve key {:?}: {e}", name.get_ref()),
                        "keys are host names such as \"allowed.test\"",
                    )
                })?;
                let crate::Host::Name(hname) = host else {
                    return Err(cx.diag(
                        name.span(),
                        format!(
                            "network.resolve key {:?} is an address, not a name",
                            name.get_ref()
                        ),
                        "keys are host names such as \"allowed.test\"",
                    ));
                };
                let list: Vec<Option<&str>> = match addrs.get_ref() {
                    toml::Value::String(a) => vec![Some(a.as_str())],
                    toml::Value::Array(v) => v.iter().map(|x| x.as_str()).collect(),
                    _ => vec![None],
                };
                if list.is_empty() {
                    return Err(cx.diag(
                        addrs.span(),
                        format!("network.resolve.{hname:?} has no address"),
                        "give one address or a list: \"127.0.0.2\" or [\"127.0.0.2\", \"::1\"]",
                    ));
                }
                let mut ips = vec![];
                for a in list {
                    let bad = || {
                        cx.diag(
                            addrs.span(),
                            format!(
                                "network.resolve.{hname:?}: {} is not an IP address",
                                a.map_or_else(|| "the value".to_string(), |a| format!("{a:?}"))
                            ),
                            "write an address such as \"127.0.0.2\" or \"::1\", or a list of them",
                        )
                    };
                    let ip: IpAddr = a
                        .ok_or_else(bad)?
                        .trim_matches(['[', ']'])
                        .parse()
                        .map_err(|_| bad())?;
                    ips.push(crate::host::canonical_ip(ip));
                }
                let entry = format!(
                    "{hname} = {}",
                    ips.iter()
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                self.policy
                    .network
                    .resolve
                    .retain(|r| r.value.name != hname);
                self.policy.network.resolve.push(Rule {
                    value: ResolveEntry {
                        name: hname,
                        addrs: ips,
                    },
                    origin: cx.origin("network.resolve", &entry, name.span()),
                });
            }
        }
        if let Some(h) = &n.http {
            for (key, list) in [("allow", &h.get_ref().allow), ("block", &h.get_ref().block)] {
                for (text, span) in entries(list) {
                    let rule = parse_http_rule(text).map_err(|why| {
                        cx.diag(
                            span.clone(),
                            format!("network.http.{key} entry {text:?}: {why}"),
                            "write METHOD URL: \"GET https://api.github.com/repos/OWNER/**\" (METHOD may be *; in the path * stays within a segment, ** spans segments)",
                        )
                    })?;
                    let slot = if key == "allow" {
                        &mut self.policy.network.http.allow
                    } else {
                        &mut self.policy.network.http.block
                    };
                    push_rule(
                        slot,
                        Rule {
                            value: rule,
                            origin: cx.origin(&format!("network.http.{key}"), text, span),
                        },
                    );
                }
            }
        }
        if let Some(t) = &n.tls {
            for (text, span) in entries(&t.get_ref().extra_roots) {
                let p = path::expand(text, &self.ctx).map_err(|e| {
                    cx.diag(span.clone(), format!("network.tls.extra_roots entry {text:?}: {e}"), "write the path of a PEM file of CA certificates: absolute, \"~/…\" or \"$HOME/…\"")
                })?;
                if crate::glob::is_glob(p.as_os_str().as_encoded_bytes()) {
                    return Err(cx.diag(
                        span,
                        format!("network.tls.extra_roots entry {text:?} is a glob"),
                        "name each PEM file",
                    ));
                }
                if !self
                    .policy
                    .network
                    .tls
                    .extra_roots
                    .iter()
                    .any(|r| r.value == p)
                {
                    self.policy.network.tls.extra_roots.push(Rule {
                        value: p,
                        origin: cx.origin("network.tls.extra_roots", text, span),
                    });
                }
            }
        }
        Ok(())
    }

    /// One `[[network.program]]` entry: its hosts only its programs may reach. It
    /// only restricts (a host must be allowed as well), so a project file may add one.
    fn apply_program(&mut self, cx: &Cx, entry: &Spanned<RawProgram>) -> Result<()> {
        let raw = entry.get_ref();
        let hint = "write [[network.program]] with name = \"…\", programs = [\"git\", \"/usr/lib/git-core/git-remote-https\"] and hosts = [\"github.com\"]";
        let Some(name) = &raw.name else {
            return Err(cx.diag(
                entry.span(),
                "a [[network.program]] entry has no name (shown in its decisions)",
                hint,
            ));
        };
        let shown = name.get_ref().trim();
        if shown.is_empty() || shown.chars().any(char::is_control) {
            return Err(cx.diag(
                name.span(),
                format!(
                    "network.program name {:?} is empty or has a control character",
                    name.get_ref()
                ),
                hint,
            ));
        }
        let mut programs = vec![];
        for (text, span) in entries(&raw.programs) {
            let bad = if text.is_empty() || text.chars().any(char::is_control) {
                Some("empty or has a control character")
            } else if text.contains('/') && !text.starts_with('/') && !text.starts_with('*') {
                Some("a relative path")
            } else if text.chars().all(|c| c == '*' || c == '/' || c == '?') {
                Some("a pattern that names every program")
            } else {
                None
            };
            if let Some(why) = bad {
                return Err(cx.diag(
                    span,
                    format!("network.program {shown:?}: programs entry {text:?} is {why}"),
                    "write the program's name (\"git\") or its absolute path (\"/usr/lib/git-core/git-remote-https\"); globs are allowed",
                ));
            }
            if !programs.iter().any(|p| p == text) {
                programs.push(text.to_string());
            }
        }
        if programs.is_empty() {
            let span = raw.programs.as_ref().map_or(entry.span(), |p| p.span());
            return Err(cx.diag(
                span,
                format!("network.program {shown:?} names no program"),
                hint,
            ));
        }
        let hosts = self.hosts(cx, "network.program.hosts", &raw.hosts)?;
        if hosts.is_empty() {
            let span = raw.hosts.as_ref().map_or(entry.span(), |p| p.span());
            return Err(cx.diag(
                span,
                format!("network.program {shown:?} names no host"),
                hint,
            ));
        }
        let value = ProgramRule {
            name: shown.to_string(),
            programs,
            hosts: hosts.into_iter().map(|h| h.value).collect(),
        };
        let origin = cx.origin("network.program", shown, name.span());
        push_rule(&mut self.policy.network.program, Rule { value, origin });
        Ok(())
    }

    /// `[credentials.NAME]`: a secret the sandbox sees as a sentinel. Only the user's
    /// own layers may define one: a project file would choose where a secret goes
    /// (its hosts) or which secret is read (its source), so it may set none. A later
    /// layer's table of the same name replaces the earlier one whole.
    fn apply_credentials(
        &mut self,
        cx: &Cx,
        creds: &Spanned<BTreeMap<Spanned<String>, Spanned<RawCredential>>>,
        project: bool,
    ) -> Result<()> {
        if project {
            return Err(cx.diag(
                creds.span(),
                "[credentials] cannot be in a project file: it decides which of your secrets are read and where they are sent",
                "define credentials in ~/.sandpit/config.toml",
            ));
        }
        if let Some(at) = &self.unrestricted_at {
            return Err(cx.diag(creds.span(), format!("[credentials] cannot be combined with network.mode = \"unrestricted\" (set in {})", at.location()), "credentials are injected by a proxy that filters hosts; set mode = \"filtered\" and allow the credentials' hosts"));
        }
        for (name, table) in creds.get_ref() {
            let c = self.credential(cx, name, table)?;
            // A lower layer's credential for the same variable (an agent profile's
            // model key) gives way to this one, as one of the same name would.
            let layer = cx.src.layer;
            (self.policy.credentials)
                .retain(|o| !(o.env == c.env && o.name != c.name && o.origin.layer < layer));
            if let Some(other) = self
                .policy
                .credentials
                .iter()
                .find(|o| o.env == c.env && o.name != c.name)
            {
                return Err(cx.diag(
                    table
                        .get_ref()
                        .env
                        .as_ref()
                        .map_or(table.span(), |e| e.span()),
                    format!(
                        "credentials.{}.env {:?} is already credentials.{}'s variable ({})",
                        c.name,
                        c.env,
                        other.name,
                        other.origin.location()
                    ),
                    "give each credential its own variable",
                ));
            }
            let source_var = c.source_var();
            if let Some(n) = [Some(c.env.as_str()), source_var]
                .into_iter()
                .flatten()
                .find(|n| crate::is_ca_env(n))
            {
                return Err(cx.diag(
                    table.span(),
                    format!("credentials.{} uses {n}, which a run with [credentials] sets to its own certificate authority", c.name),
                    "give the credential another variable",
                ));
            }
            if let Some(r) = (self.policy.env.set.iter())
                .find(|r| r.value.name == c.env || Some(r.value.name.as_str()) == source_var)
            {
                return Err(cx.diag(
                    table.span(),
                    format!(
                        "credentials.{} uses {}, which env.set sets ({})",
                        c.name,
                        r.value.name,
                        r.origin.location()
                    ),
                    "remove the variable from env.set, or give the credential another",
                ));
            }
            // The file a real value comes from is unreadable in the sandbox.
            if let CredentialSource::File(p) = &c.source {
                let value = self.resolver.borrow_mut().resolve(p);
                let mut origin = c.origin.clone();
                origin.key = format!("credentials.{}.source", c.name);
                push_path_rule(&mut self.policy.files.block_read, Rule { value, origin });
            }
            // The file masked with the sentinel is readable in the sandbox, even
            // where a block_read (an agent's auth file) would hide it: what shows
            // there is the masked copy.
            if let Some(p) = &c.file {
                let mut origin = c.origin.clone();
                origin.key = format!("credentials.{}.file", c.name);
                push_path_rule(
                    &mut self.policy.files.allow_read,
                    Rule {
                        value: p.clone(),
                        origin,
                    },
                );
            }
            self.policy.credentials.retain(|o| o.name != c.name);
            self.policy.credentials.push(c);
        }
        Ok(())
    }

    fn credential(
        &self,
        cx: &Cx,
        name: &Spanned<String>,
        table: &Spanned<RawCredential>,
    ) -> Result<Credential> {
        let n = name.get_ref();
        if n.is_empty()
            || !n
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(cx.diag(
                name.span(),
                format!("credentials.{n:?}: a credential's name is letters, digits, '_' and '-'"),
                "name it after the service, e.g. [credentials.openai]",
            ));
        }
        let t = table.get_ref();
        let missing = |key: &str, hint: &str| {
            cx.diag(
                table.span(),
                format!("credentials.{n} has no {key}"),
                hint.to_string(),
            )
        };
        let env = t.env.as_ref().ok_or_else(|| {
            missing(
                "env",
                "add env = \"VARIABLE\": the variable the sandbox sees, holding a sentinel",
            )
        })?;
        if !valid_var(env.get_ref()) {
            return Err(cx.diag(
                env.span(),
                format!("credentials.{n}.env {:?} is not a variable name", env.get_ref()),
                "write a name such as \"OPENAI_API_KEY\" (letters, digits, '_', not starting with a digit)",
            ));
        }
        let source = t.source.as_ref().ok_or_else(|| {
            missing(
                "source",
                "add source = \"env:NAME\", \"file:PATH\" or \"command:CMD\": where sandpit reads the real value",
            )
        })?;
        let bad_source = |why: String| {
            cx.diag(
                source.span(),
                format!("credentials.{n}.source {:?}: {why}", source.get_ref()),
                "write \"env:NAME\" (a variable of sandpit's own environment), \"file:PATH\" (\"~/…\" allowed) or \"command:CMD\" (run with sh -c; its output is the value)",
            )
        };
        let src = match source.get_ref().split_once(':') {
            Some(("env", v)) if valid_var(v) => CredentialSource::Env(v.to_string()),
            Some(("env", _)) => return Err(bad_source("not a variable name".into())),
            Some(("file", p)) if !p.is_empty() => CredentialSource::File(
                path::expand(p, &self.ctx).map_err(|e| bad_source(e.to_string()))?,
            ),
            Some(("command", c)) if !c.trim().is_empty() => {
                CredentialSource::Command(c.to_string())
            }
            Some(("file" | "command", _)) => {
                return Err(bad_source("nothing after the ':'".into()))
            }
            _ => return Err(bad_source("unknown scheme".into())),
        };
        let Some(list) = &t.hosts else {
            return Err(missing(
                "hosts",
                "add hosts = [\"api.example.com\"]: the only hosts the real value is sent to",
            ));
        };
        if list.get_ref().is_empty() {
            return Err(cx.diag(
                list.span(),
                format!("credentials.{n}.hosts is empty: the secret could go nowhere"),
                "name the hosts the real value is sent to, e.g. [\"api.openai.com\"]",
            ));
        }
        let mut hosts: Vec<String> = vec![];
        for (text, span) in entries(&t.hosts) {
            let bad = |why: String| {
                cx.diag(
                    span.clone(),
                    format!("credentials.{n}.hosts entry {text:?}: {why}"),
                    "write a host name exactly, without scheme, port, path or wildcard: \"api.openai.com\"",
                )
            };
            if text.contains('*') || text.contains(':') || text.contains('/') {
                return Err(bad("only an exact host name".into()));
            }
            match canonical_host(text) {
                Ok(crate::Host::Name(h)) => {
                    if !hosts.contains(&h) {
                        hosts.push(h);
                    }
                }
                Ok(crate::Host::Ip(_)) => {
                    return Err(bad(
                        "an address, not a name (TLS is verified by name)".into()
                    ))
                }
                Err(e) => return Err(bad(e.to_string())),
            }
        }
        let file = match &t.file {
            None => None,
            Some(f) => {
                let p = path::expand(f.get_ref(), &self.ctx).map_err(|e| {
                    cx.diag(
                        f.span(),
                        format!("credentials.{n}.file {:?}: {e}", f.get_ref()),
                        "write the path of the file that holds the secret: \"~/.codex/auth.json\"",
                    )
                })?;
                if crate::glob::is_glob(p.as_os_str().as_encoded_bytes())
                    || matches!(&src, CredentialSource::File(s) if *s == p)
                {
                    return Err(cx.diag(
                        f.span(),
                        format!("credentials.{n}.file {:?} is a glob or the source itself", f.get_ref()),
                        "name the one file the agent reads; a source file is hidden from the sandbox already",
                    ));
                }
                Some(self.resolver.borrow_mut().resolve(&p))
            }
        };
        Ok(Credential {
            name: n.clone(),
            env: env.get_ref().clone(),
            source: src,
            hosts,
            file,
            body: t.body.as_ref().is_some_and(|b| *b.get_ref()),
            required: t.required.as_ref().is_some_and(|b| *b.get_ref()),
            origin: cx.origin(
                &format!("credentials.{n}"),
                &source.get_ref().clone(),
                name.span(),
            ),
        })
    }

    fn apply_adversary(
        &mut self,
        cx: &Cx,
        adv: &Spanned<RawAdversary>,
        project: bool,
    ) -> Result<()> {
        let a = adv.get_ref();
        if project {
            // A project may add rules for the reviewer to enforce; nothing else.
            let loosening = [
                ("provider", a.provider.as_ref().map(|s| s.span())),
                ("model", a.model.as_ref().map(|s| s.span())),
                ("endpoint", a.endpoint.as_ref().map(|s| s.span())),
                ("api_key_env", a.api_key_env.as_ref().map(|s| s.span())),
                ("review", a.review.as_ref().map(|s| s.span())),
                ("timeout_ms", a.timeout_ms.as_ref().map(|s| s.span())),
                ("on_error", a.on_error.as_ref().map(|s| s.span())),
                ("cache", a.cache.as_ref().map(|s| s.span())),
            ];
            if let Some((key, Some(span))) = loosening.into_iter().find(|(_, s)| s.is_some()) {
                return Err(cx.diag(span, format!("adversary.{key} cannot be set by a project file"), "a project file may only add adversary.rules; set the reviewer up in ~/.sandpit/config.toml"));
            }
            if let (Some(rules), Some(cur)) = (&a.rules, self.policy.adversary.as_mut()) {
                cur.rules = format!("{}\n{}", cur.rules, rules.get_ref())
                    .trim()
                    .to_string();
            }
            return Ok(());
        }
        let mut cur = self.policy.adversary.clone().unwrap_or(Adversary {
            provider: Provider::Anthropic,
            model: String::new(),
            endpoint: None,
            api_key_env: None,
            rules: String::new(),
            review: vec![ReviewEvent::Exec],
            timeout_ms: 10_000,
            on_error: OnError::Deny,
            cache: true,
            origin: cx.origin("adversary", "[adversary]", adv.span()),
        });
        if let Some(p) = &a.provider {
            cur.provider = match p.get_ref().as_str() {
                "anthropic" => Provider::Anthropic,
                "openai" | "ollama" => Provider::Openai,
                "gemini" => Provider::Gemini,
                other => return Err(cx.diag(p.span(), format!("adversary.provider {other:?} is not supported"), "use \"anthropic\", \"openai\" (any OpenAI-compatible endpoint: Ollama, llama.cpp, vLLM) or \"gemini\"")),
            };
        }
        if let Some(m) = &a.model {
            cur.model = m.get_ref().clone();
        }
        if let Some(e) = &a.endpoint {
            let v = e.get_ref();
            if !(v.starts_with("https://") || v.starts_with("http://")) {
                return Err(cx.diag(
                    e.span(),
                    format!("adversary.endpoint {v:?} is not an http(s) URL"),
                    "write the base URL, e.g. \"http://127.0.0.1:11434/v1\"",
                ));
            }
            cur.endpoint = Some(v.clone());
        }
        if let Some(k) = &a.api_key_env {
            if validate_env_glob(k.get_ref()).is_err() || k.get_ref().contains(['*', '?']) {
                return Err(cx.diag(
                    k.span(),
                    format!(
                        "adversary.api_key_env {:?} is not a variable name",
                        k.get_ref()
                    ),
                    "name the variable holding the key, e.g. \"ANTHROPIC_API_KEY\"",
                ));
            }
            cur.api_key_env = Some(k.get_ref().clone());
        }
        if let Some(r) = &a.rules {
            cur.rules = r.get_ref().clone();
        }
        if let Some(rv) = &a.review {
            let mut ev = vec![];
            for e in rv.get_ref() {
                ev.push(match e.get_ref().as_str() {
                    "exec" => ReviewEvent::Exec,
                    "network" => ReviewEvent::Network,
                    "write" => ReviewEvent::Write,
                    other => {
                        return Err(cx.diag(
                            e.span(),
                            format!("adversary.review {other:?} is not an event"),
                            "use any of \"exec\", \"network\", \"write\"",
                        ))
                    }
                });
            }
            cur.review = ev;
        }
        if let Some(t) = &a.timeout_ms {
            let v = *t.get_ref();
            if !(1..=600_000).contains(&v) {
                return Err(cx.diag(
                    t.span(),
                    format!("adversary.timeout_ms {v} is out of range"),
                    "use 1 to 600000 milliseconds",
                ));
            }
            cur.timeout_ms = v as u64;
        }
        if let Some(o) = &a.on_error {
            cur.on_error = match o.get_ref().as_str() {
                "deny" => OnError::Deny,
                "allow" => OnError::Allow,
                other => {
                    return Err(cx.diag(
                        o.span(),
                        format!("adversary.on_error {other:?} is not a choice"),
                        "use \"deny\" (the default) or \"allow\"",
                    ))
                }
            };
        }
        if let Some(c) = &a.cache {
            cur.cache = *c.get_ref();
        }
        if cur.model.is_empty() {
            return Err(cx.diag(
                adv.span(),
                "adversary.model is missing",
                "name the reviewing model, e.g. model = \"claude-haiku-4-5\"",
            ));
        }
        self.policy.adversary = Some(cur);
        Ok(())
    }
}

/// `METHOD scheme://host[:port]/path-glob`.
fn parse_http_rule(text: &str) -> std::result::Result<HttpRule, String> {
    let (method, url) = text
        .split_once(' ')
        .ok_or("a method, one space, then the URL")?;
    let method = match method {
        "*" => None,
        m if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) => Some(m.to_string()),
        m => return Err(format!("{m:?} is not a method (GET, POST, … or *)")),
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("the URL needs its scheme, http:// or https://")?;
    if scheme != "http" && scheme != "https" {
        return Err(format!("scheme {scheme:?}: only http and https"));
    }
    let cut = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(cut);
    let path = if path.is_empty() { "/**" } else { path };
    if path.contains(['?', '#', ' ']) || path.split('/').any(|s| s == "." || s == "..") {
        return Err("the path is a glob without query, fragment, spaces or dot segments".into());
    }
    if authority.contains('*') {
        return Err("the host is exact (no wildcard)".into());
    }
    let (host, port) = crate::host::parse_authority(authority).map_err(|e| e.to_string())?;
    Ok(HttpRule {
        method,
        scheme: scheme.to_string(),
        host: host.to_string(),
        port,
        path: path.to_string(),
    })
}

/// A POSIX environment variable name.
fn valid_var(v: &str) -> bool {
    !v.is_empty()
        && !v.as_bytes()[0].is_ascii_digit()
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn entries(list: &Entries) -> impl Iterator<Item = (&str, std::ops::Range<usize>)> {
    list.iter()
        .flat_map(|l| l.get_ref().iter())
        .map(|s| (s.get_ref().as_str(), s.span()))
}

fn span_of(cx: &Cx, o: &Origin) -> std::ops::Range<usize> {
    // Recover a byte offset from the stored line/column (for diagnostics raised after
    // an entry was converted).
    let mut offset = 0;
    for (i, l) in cx.src.text.split_inclusive('\n').enumerate() {
        if i + 1 == o.line as usize {
            let col: usize = l
                .chars()
                .take(o.column.saturating_sub(1) as usize)
                .map(char::len_utf8)
                .sum();
            return offset + col..offset + col;
        }
        offset += l.len();
    }
    0..0
}

/// Add `r` unless the list has its value already; a later layer restating a value
/// takes it over (its origin is the one that decides against another layer's rule
/// for the same value, e.g. your own block_read against a profile's allow_read).
fn push_rule<T: PartialEq>(list: &mut Vec<Rule<T>>, r: Rule<T>) {
    push_rule_by(list, r, |a, b| a == b)
}

/// Where a boolean key goes: a rule with its origin, a plain flag, or a switch that
/// holds its origin while it is on (`None` when off).
enum Slot<'a> {
    Rule(&'a mut Rule<bool>),
    Flag(&'a mut bool),
    On(&'a mut Option<Origin>),
}

impl Slot<'_> {
    fn get(&self) -> bool {
        match self {
            Slot::Rule(r) => r.value,
            Slot::Flag(b) => **b,
            Slot::On(o) => o.is_some(),
        }
    }

    fn set(self, r: Rule<bool>) {
        match self {
            Slot::Rule(s) => *s = r,
            Slot::Flag(s) => *s = r.value,
            Slot::On(s) => *s = r.value.then_some(r.origin),
        }
    }
}

/// What a project file may not do with a boolean key: whether setting it `on`
/// over what it `was` is refused, with the refusal's message and hint.
type Narrowing<'a> = (fn(bool, bool) -> bool, &'a str, &'a str);

/// A boolean key: its name, its raw value, what a project file may not do with it
/// (`None` where the whole table is refused to a project file), and where it goes.
type SwitchKey<'a> = (
    &'a str,
    &'a Option<Spanned<bool>>,
    Option<Narrowing<'a>>,
    fn(&mut Policy) -> Slot<'_>,
);

/// A `[limits]` key: its name, its raw value, its smallest limit and that limit's
/// unit, and where it goes.
type LimitKey<'a> = (
    &'a str,
    &'a Option<Spanned<i64>>,
    u64,
    &'a str,
    fn(&mut Limits) -> &mut Rule<u64>,
);

/// One `[limits]` value: 0 (no limit) or at least `min` `unit`; a project file may
/// only lower what `current` holds.
fn limit(
    cx: &Cx,
    key: &str,
    raw: &Option<Spanned<i64>>,
    min: u64,
    unit: &str,
    current: &Rule<u64>,
    project: bool,
) -> Result<Option<Rule<u64>>> {
    let Some(n) = raw else {
        return Ok(None);
    };
    let v = *n.get_ref();
    let v = match u64::try_from(v) {
        Ok(v) if v == 0 || v >= min => v,
        _ => {
            return Err(cx.diag(
                n.span(),
                format!("{key} = {v} is not a limit"),
                format!("write 0 (no limit) or at least {min} {unit}"),
            ))
        }
    };
    // 0 is the loosest value, then the larger the looser.
    let looser = |a: u64, b: u64| b != 0 && (a == 0 || a > b);
    if project && looser(v, current.value) {
        return Err(cx.diag(
            n.span(),
            format!(
                "{key} = {v} {} the limit of {} set in {}: a project file may only lower it",
                if v == 0 { "lifts" } else { "raises" },
                current.value,
                current.origin.location()
            ),
            format!(
                "set it in ~/.sandpit/config.toml if you trust it, or remove it from {}",
                cx.src.name
            ),
        ));
    }
    Ok(Some(Rule {
        value: v,
        origin: cx.origin(key, &v.to_string(), n.span()),
    }))
}

/// [`push_rule`] for path lists, comparing bytes: a `Path`'s own `==` walks both
/// paths component by component, and each entry is checked against the whole list.
/// The resolver has normalized every value; two spellings of one path that were not
/// would only keep both entries, which decide the same.
fn push_path_rule(list: &mut Vec<Rule<PathBuf>>, r: Rule<PathBuf>) {
    push_rule_by(list, r, |a, b| a.as_os_str() == b.as_os_str())
}

fn push_rule_by<T>(list: &mut Vec<Rule<T>>, r: Rule<T>, eq: impl Fn(&T, &T) -> bool) {
    match list.iter_mut().find(|x| eq(&x.value, &r.value)) {
        Some(x) if r.origin.layer > x.origin.layer => x.origin = r.origin,
        Some(_) => {}
        None => list.push(r),
    }
}

fn push_unique<T: PartialEq>(list: &mut Vec<Rule<T>>, value: T, origin: Origin) {
    push_rule(list, Rule { value, origin });
}

/// Why `env.set` may not set `name`, if it may not: not a variable name; one that
/// sandpit sets for the run (its own, the proxy's, the credentials' CA, `TMPDIR`,
/// `PATH`, `HOME`); or one the dynamic loader obeys (`LD_*`, `DYLD_*`), which
/// would take the interposer's place.
fn env_set_refusal(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let word = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !word {
        return Some("is not a variable name (letters, digits and _, not starting with a digit)");
    }
    let upper = name.to_ascii_uppercase();
    let loader = ["LD_", "DYLD_"].iter().any(|p| upper.starts_with(p));
    if loader {
        return Some("is read by the dynamic loader, where sandpit's interposer goes");
    }
    let own = upper.starts_with("SANDPIT_")
        || [
            "PATH",
            "HOME",
            "TMPDIR",
            "NO_PROXY",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
        ]
        .contains(&upper.as_str())
        || crate::is_ca_env(name);
    if own {
        return Some("is set by sandpit for the run");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Line and column by counting from the top (what the index replaced).
    fn line_col(text: &str, offset: usize) -> (u32, u32) {
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line as u32, col as u32)
    }

    #[test]
    fn indexed_line_col_agrees_with_counting() {
        let text = "a = 1\n\n[files]\nblock_read = [\"~/.ssh\", \"é/ü\"]\n  x\n";
        let src = Source::new(Layer::User, "t.toml", text);
        let cx = Cx::new(&src);
        for (offset, _) in text.char_indices().chain([(text.len(), ' ')]) {
            assert_eq!(
                cx.line_col(offset),
                line_col(text, offset),
                "offset {offset}"
            );
        }
    }
}
