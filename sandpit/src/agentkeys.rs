//! The agent's model keys as the run carries them (docs/credentials.md, "The
//! agents' keys"): an agent profile binds its provider keys to the provider's hosts
//! as `[credentials]`; this module adds what the agent's own **user-level**
//! configuration and environment say about custom providers (codex's
//! `model_providers`, pi's `models.json`, opencode's `provider`, the base-URL
//! variables of claude, gemini and litellm), and sets aside each credential whose
//! source is missing (unless `required = true`). Never a project file: a cloned
//! repository could point a provider at its own host.
//!
//! Decided once, when the configuration is loaded ([`crate::config::load`]): `sandpit
//! plan`, `config`, `explain` and the run see the same policy.
#![forbid(unsafe_code)]
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sandpit_policy::{
    canonical_host, parse_authority, Credential, CredentialSource, Host, HostPattern, Layer,
    Origin, Policy, Rule,
};

/// One custom provider the agent's configuration names: the variable its key is
/// read from, its base URL, and where that was said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    /// For the credential's name: `codex-NAME`.
    pub name: String,
    pub key_var: String,
    pub base_url: String,
    pub origin: Origin,
}

/// Where a base URL sends the key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// HTTPS to a name: the proxy terminates TLS there and puts the key in.
    Tls(String, u16),
    /// Plain HTTP, or an address: the proxy cannot put a real value in there.
    Clear(&'static str),
    Bad(String),
}

fn target(url: &str) -> Target {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Target::Bad("no scheme".into());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let (host, port) = match parse_authority(authority) {
        Ok(hp) => hp,
        Err(e) => return Target::Bad(e.to_string()),
    };
    match (scheme.to_ascii_lowercase().as_str(), host) {
        ("https", Host::Name(h)) => Target::Tls(h, port.unwrap_or(443)),
        ("https", Host::Ip(_)) => Target::Clear("an address, where TLS is not verified by name"),
        ("http", _) => Target::Clear("plain HTTP"),
        (s, _) => Target::Bad(format!("scheme {s:?}")),
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (u32, u32) {
    let before = text.get(..offset.min(text.len())).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line as u32, col as u32)
}

fn origin(file: &str, key: &str, entry: &str, at: Option<(u32, u32)>) -> Origin {
    let (line, column) = at.unwrap_or((0, 0));
    Origin {
        layer: Layer::Profile,
        file: file.into(),
        key: key.into(),
        entry: entry.into(),
        line,
        column,
    }
}

/// `path` shown with `~` for the home.
fn shown(home: &Path, path: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

/// A user-level file of the agent: its text, unless it is missing, unreadable or
/// inside the workspace (a project's file is never read here).
fn user_file(path: &Path, workspace: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    if real.starts_with(workspace) {
        return None;
    }
    std::fs::read_to_string(&real).ok()
}

fn valid_var(v: &str) -> bool {
    !v.is_empty()
        && !v.starts_with(|c: char| c.is_ascii_digit())
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// codex: `model_providers.NAME.env_key` and `base_url` in `$CODEX_HOME/config.toml`
/// (else `~/.codex/config.toml`), and `OPENAI_BASE_URL` for its built-in provider.
fn codex(home: &Path, ws: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<Provider> {
    #[derive(serde::Deserialize)]
    struct Cfg {
        #[serde(default)]
        model_providers: BTreeMap<String, Prov>,
    }
    #[derive(serde::Deserialize)]
    struct Prov {
        env_key: Option<toml::Spanned<String>>,
        base_url: Option<toml::Spanned<String>>,
    }
    let mut out = vec![];
    let dir = env("CODEX_HOME")
        .filter(|d| d.starts_with('/'))
        .map_or_else(|| home.join(".codex"), PathBuf::from);
    let path = dir.join("config.toml");
    if let Some(text) = user_file(&path, ws) {
        if let Ok(cfg) = toml::from_str::<Cfg>(&text) {
            let file = shown(home, &path);
            for (name, p) in cfg.model_providers {
                let (Some(k), Some(u)) = (p.env_key, p.base_url) else {
                    continue;
                };
                out.push(Provider {
                    name: format!("codex-{name}"),
                    key_var: k.get_ref().clone(),
                    base_url: u.get_ref().clone(),
                    origin: origin(
                        &file,
                        &format!("model_providers.{name}.base_url"),
                        u.get_ref(),
                        Some(line_col(&text, u.span().start)),
                    ),
                });
            }
        }
    }
    out.extend(from_env(env, "OPENAI_BASE_URL", &["OPENAI_API_KEY"]));
    out
}

/// A base-URL variable of sandpit's environment, for the key variables it serves.
fn from_env(env: &dyn Fn(&str) -> Option<String>, var: &str, keys: &[&str]) -> Vec<Provider> {
    let Some(url) = env(var).filter(|u| !u.is_empty()) else {
        return vec![];
    };
    keys.iter()
        .map(|k| Provider {
            name: format!("{}-base-url", k.to_ascii_lowercase().replace('_', "-")),
            key_var: k.to_string(),
            base_url: url.clone(),
            origin: origin("the environment", var, &url, None),
        })
        .collect()
}

/// A JSON file's providers: `providers_key.NAME` with a base URL at `url_path` and a
/// key variable at `key_path` (`{env:VAR}` or a bare variable name).
fn json_providers(
    home: &Path,
    ws: &Path,
    path: &Path,
    agent: &str,
    providers_key: &str,
    url_path: &[&str],
    key_path: &[&str],
) -> Vec<Provider> {
    let Some(text) = user_file(path, ws) else {
        return vec![];
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return vec![];
    };
    let Some(map) = v.get(providers_key).and_then(|p| p.as_object()) else {
        return vec![];
    };
    let file = shown(home, path);
    let mut out = vec![];
    for (name, p) in map {
        let get = |path: &[&str]| {
            path.iter()
                .try_fold(p, |v, k| v.get(*k))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let (Some(url), Some(key)) = (get(url_path), get(key_path)) else {
            continue;
        };
        let key = match key.strip_prefix("{env:").and_then(|k| k.strip_suffix('}')) {
            Some(k) => k.to_string(),
            None => key,
        };
        if !valid_var(&key) {
            continue;
        }
        let at = text
            .find(&format!("\"{name}\""))
            .map(|i| line_col(&text, i));
        out.push(Provider {
            name: format!("{agent}-{name}"),
            key_var: key,
            base_url: url,
            origin: origin(
                &file,
                &format!("{providers_key}.{name}.{}", url_path.join(".")),
                "",
                at,
            ),
        });
    }
    out
}

/// The custom providers agent `profile`'s own configuration names.
pub fn providers(
    profile: &str,
    home: &Path,
    ws: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<Provider> {
    let litellm = |out: &mut Vec<Provider>| {
        for v in ["OPENAI_API_BASE", "OPENAI_BASE_URL"] {
            out.extend(from_env(env, v, &["OPENAI_API_KEY"]));
        }
        for v in ["ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"] {
            out.extend(from_env(env, v, &["ANTHROPIC_API_KEY"]));
        }
    };
    let mut out = vec![];
    match profile {
        "codex" => out = codex(home, ws, env),
        "claude" => {
            out = from_env(
                env,
                "ANTHROPIC_BASE_URL",
                &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
            )
        }
        "gemini" => {
            out = from_env(
                env,
                "GOOGLE_GEMINI_BASE_URL",
                &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
            )
        }
        "pi" => {
            out = json_providers(
                home,
                ws,
                &home.join(".pi/agent/models.json"),
                "pi",
                "providers",
                &["baseUrl"],
                &["apiKey"],
            )
        }
        "opencode" => {
            let cfg = env("XDG_CONFIG_HOME")
                .filter(|d| d.starts_with('/'))
                .map_or_else(|| home.join(".config"), PathBuf::from)
                .join("opencode/opencode.json");
            out = json_providers(
                home,
                ws,
                &cfg,
                "opencode",
                "provider",
                &["options", "baseURL"],
                &["options", "apiKey"],
            )
        }
        "aider" | "mini" | "goose" => litellm(&mut out),
        _ => {}
    }
    out
}

/// What [`settle`] did that the user should hear of at start-up, besides the
/// skipped credentials (which the policy lists).
pub type Notes = Vec<String>;

/// Bind the custom providers of `profile`'s own configuration, then set aside the
/// credentials whose source is missing (not `required`). `env` reads sandpit's
/// environment (a test passes its own).
pub fn settle(
    policy: &mut Policy,
    profile: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Notes {
    let mut notes = vec![];
    if let Some(p) = profile {
        let home = policy.context.home.clone();
        let ws = policy.context.workspace.clone();
        for prov in providers(p, &home, &ws, env) {
            bind(policy, &prov, &mut notes);
        }
    }
    skip_missing(policy, env);
    notes
}

/// The custom providers the agent's own command line names (aider's
/// `--openai-api-base URL`): the user typed it, no project file.
pub fn from_args(profile: &str, args: &[std::ffi::OsString]) -> Vec<Provider> {
    let flags: &[(&str, &str)] = match profile {
        "aider" => &[
            ("--openai-api-base", "OPENAI_API_KEY"),
            ("--anthropic-api-base", "ANTHROPIC_API_KEY"),
        ],
        _ => &[],
    };
    let args: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    let mut out = vec![];
    for (i, a) in args.iter().enumerate() {
        for (flag, key) in flags {
            let url = match a.strip_prefix(flag) {
                Some("") => args.get(i + 1).copied(),
                Some(v) => v.strip_prefix('='),
                None => None,
            };
            if let Some(url) = url {
                out.push(Provider {
                    name: format!("{profile}-{}", key.to_ascii_lowercase().replace('_', "-")),
                    key_var: key.to_string(),
                    base_url: url.to_string(),
                    origin: origin("the command line", flag, url, None),
                });
            }
        }
    }
    out
}

/// [`settle`] for what the command line adds (`sandpit run`, `sandpit plan`).
pub fn settle_args(
    policy: &mut Policy,
    profile: &str,
    args: &[std::ffi::OsString],
    env: &dyn Fn(&str) -> Option<String>,
) -> Notes {
    let mut notes = vec![];
    for prov in from_args(profile, args) {
        bind(policy, &prov, &mut notes);
    }
    skip_missing(policy, env);
    notes
}

/// Set aside each credential (not `required`) whose source variable is not set
/// (or empty) or whose source file does not exist.
fn skip_missing(policy: &mut Policy, env: &dyn Fn(&str) -> Option<String>) {
    let set = |v: &str| env(v).is_some_and(|x| !x.is_empty());
    let missing: Vec<(String, String)> = (policy.credentials.iter())
        .filter(|c| !c.required)
        .filter_map(|c| match &c.source {
            CredentialSource::Env(v) if !set(v) => {
                Some((c.name.clone(), format!("{v} is not set")))
            }
            CredentialSource::File(f) if !f.exists() => {
                Some((c.name.clone(), format!("{} does not exist", f.display())))
            }
            _ => None,
        })
        .collect();
    for (name, why) in missing {
        policy.skip_credential(&name, why);
    }
}

/// Bind one provider's key to its host: a sentinel inside, the real value for that
/// host alone (the host allowed). A base URL the proxy cannot put a value into
/// (plain HTTP, an address) leaves the key to the agent itself (`env.agent`), and
/// a credential of the agent's profile for it is set aside, saying why.
fn bind(policy: &mut Policy, p: &Provider, notes: &mut Notes) {
    let k = &p.key_var;
    if !valid_var(k)
        || sandpit_policy::is_ca_env(k)
        || policy.env.set_by(k).is_some()
        || (policy.credentials.iter()).any(|c| c.source_var() == Some(k) && c.env != *k)
    {
        return;
    }
    // A credential of the user's own layers for this variable is the user's word.
    if (policy.credentials.iter()).any(|c| c.env == *k && c.origin.layer > Layer::Profile) {
        return;
    }
    match target(&p.base_url) {
        Target::Bad(_) => {}
        Target::Clear(what) => {
            let why = format!(
                "the base URL {} ({}) is {what}, where sandpit's proxy cannot put the real value in; {k} goes to the agent itself (env.agent)",
                p.base_url,
                p.origin.location()
            );
            let names: Vec<String> = (policy.credentials.iter())
                .filter(|c| c.env == *k)
                .map(|c| c.name.clone())
                .collect();
            for n in names {
                policy.skip_credential(&n, why.clone());
            }
            if policy.env.agent_keeps(k).is_none() {
                let mut o = p.origin.clone();
                o.key = "env.agent".into();
                o.entry = k.clone();
                policy.env.agent.push(Rule {
                    value: k.clone(),
                    origin: o,
                });
            }
            if policy.credential_for_env(k).is_none() {
                notes.push(format!(
                    "{k} goes to the agent itself, not to what it runs: the base URL {} ({}) is {what}",
                    p.base_url,
                    p.origin.location()
                ));
            }
        }
        Target::Tls(host, port) => {
            let Ok(Host::Name(host)) = canonical_host(&host) else {
                return;
            };
            if let Some(c) = policy.credentials.iter_mut().find(|c| c.env == *k) {
                if !c.hosts.contains(&host) {
                    c.hosts.push(host.clone());
                }
            } else {
                let name: String = (p.name.chars())
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                            c
                        } else {
                            '-'
                        }
                    })
                    .collect();
                if policy.credentials.iter().any(|c| c.name == name) {
                    return;
                }
                let mut o = p.origin.clone();
                o.key = format!("credentials.{name}");
                o.entry = format!("env:{k}");
                policy.credentials.push(Credential {
                    name,
                    env: k.clone(),
                    source: CredentialSource::Env(k.clone()),
                    hosts: vec![host.clone()],
                    file: None,
                    body: false,
                    required: false,
                    origin: o,
                });
            }
            if policy.network.mode.value == sandpit_policy::NetMode::Filtered {
                if let Ok(pat) = HostPattern::parse(&format!("{host}:{port}")) {
                    if !policy.network.allow.iter().any(|r| r.value == pat) {
                        let mut o = p.origin.clone();
                        o.key = "network.allow".into();
                        o.entry = format!("{host}:{port}");
                        policy.network.allow.push(Rule {
                            value: pat,
                            origin: o,
                        });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_told_apart() {
        assert_eq!(
            target("https://Gateway.Corp.example:8443/v1"),
            Target::Tls("gateway.corp.example".into(), 8443)
        );
        assert_eq!(
            target("https://api.openai.com/v1"),
            Target::Tls("api.openai.com".into(), 443)
        );
        assert!(matches!(
            target("http://127.0.0.1:11434/v1"),
            Target::Clear(_)
        ));
        assert!(matches!(target("https://127.0.0.1/v1"), Target::Clear(_)));
        assert!(matches!(target("http://model.test:80"), Target::Clear(_)));
        assert!(matches!(target("ftp://x"), Target::Bad(_)));
        assert!(matches!(target("x"), Target::Bad(_)));
        assert!(matches!(target("https://u:p@x.example/"), Target::Bad(_)));
    }

    #[test]
    fn codex_providers_are_read_from_the_user_config_only() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        let ws = d.path().join("ws");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::create_dir_all(ws.join(".codex")).unwrap();
        let cfg = "model = \"m\"\n[model_providers.corp]\nname = \"Corp\"\nbase_url = \"https://llm.corp.example/v1\"\nenv_key = \"CORP_LLM_KEY\"\n";
        std::fs::write(home.join(".codex/config.toml"), cfg).unwrap();
        std::fs::write(
            ws.join(".codex/config.toml"),
            cfg.replace("llm.corp", "evil"),
        )
        .unwrap();
        let none = |_: &str| None;
        let p = providers("codex", &home, &ws, &none);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].key_var, "CORP_LLM_KEY");
        assert_eq!(p[0].base_url, "https://llm.corp.example/v1");
        assert_eq!(p[0].origin.line, 4);
        // CODEX_HOME pointing into the workspace is not read.
        let ws_home = ws.join(".codex").display().to_string();
        let into_ws = move |v: &str| (v == "CODEX_HOME").then(|| ws_home.clone());
        assert!(providers("codex", &home, &ws, &into_ws).is_empty());
    }
}
