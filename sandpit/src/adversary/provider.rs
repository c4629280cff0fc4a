//! The three wire formats: Anthropic Messages, OpenAI Chat Completions and the
//! Gemini API.
//!
//! - Anthropic: `POST {endpoint}/v1/messages` (default endpoint
//!   `https://api.anthropic.com`; an endpoint already ending in `/v1` is not given a
//!   second one), headers `x-api-key` and `anthropic-version: 2023-06-01`, body
//!   `{model, max_tokens, system, messages: [{role: "user", content}]}`; the answer
//!   is the concatenated `text` blocks of `content`; `stop_reason: "refusal"` is a
//!   refusal.
//! - OpenAI-compatible (OpenAI, Ollama, llama.cpp, vLLM): `POST
//!   {endpoint}/chat/completions` (default endpoint `https://api.openai.com/v1`; an
//!   endpoint with no path, such as `http://127.0.0.1:11434`, gets
//!   `/v1/chat/completions`), header `Authorization: Bearer <key>` when a key is
//!   set, body `{model, max_tokens, messages: [{role: "system"}, {role: "user"}]}`;
//!   the answer is `choices[0].message.content`; a non-null `message.refusal` or
//!   `finish_reason: "content_filter"` is a refusal.
//! - Gemini: `POST {endpoint}/v1beta/models/{model}:generateContent` (default endpoint
//!   `https://generativelanguage.googleapis.com`; an endpoint ending in `/v1beta` is
//!   not given a second one), header `x-goog-api-key`, body `{systemInstruction,
//!   contents: [{role: "user", parts: [{text}]}], generationConfig}`; the answer is the
//!   concatenated `text` parts of `candidates[0].content`; a `promptFeedback.blockReason`
//!   or a `finishReason` of `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`
//!   or `SPII` is a refusal.
use super::AdversaryError;
use sandpit_policy::Provider;
use serde_json::{json, Value};

/// Tokens the model may use for its one-line answer.
pub const MAX_TOKENS: u32 = 256;
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Gemini's budget, thinking included.
pub const GEMINI_MAX_TOKENS: u32 = 4096;

const ANTHROPIC_DEFAULT: &str = "https://api.anthropic.com";
const OPENAI_DEFAULT: &str = "https://api.openai.com/v1";
const GEMINI_DEFAULT: &str = "https://generativelanguage.googleapis.com";

/// The URL a review is POSTed to (Gemini names the model in it).
pub fn url(
    provider: Provider,
    endpoint: Option<&str>,
    model: &str,
) -> Result<String, AdversaryError> {
    let base = match provider {
        Provider::Anthropic => endpoint.unwrap_or(ANTHROPIC_DEFAULT),
        Provider::Openai => endpoint.unwrap_or(OPENAI_DEFAULT),
        Provider::Gemini => endpoint.unwrap_or(GEMINI_DEFAULT),
    };
    if provider == Provider::Gemini
        && (model.is_empty()
            || !model
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)))
    {
        return Err(AdversaryError::Endpoint(format!(
            "adversary.model {model:?} cannot be part of a Gemini URL: use its name, such as \"gemini-2.5-flash\""
        )));
    }
    let parsed = reqwest::Url::parse(base)
        .map_err(|e| AdversaryError::Endpoint(format!("{base:?}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(AdversaryError::Endpoint(format!(
            "{base:?} is not an http(s) URL with a host"
        )));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(AdversaryError::Endpoint(format!(
            "{base:?}: give the base URL, without a query or fragment"
        )));
    }
    let base = base.trim_end_matches('/');
    let path_empty = matches!(parsed.path(), "" | "/");
    Ok(match provider {
        Provider::Anthropic if base.ends_with("/v1") => format!("{base}/messages"),
        Provider::Anthropic => format!("{base}/v1/messages"),
        Provider::Openai if path_empty => format!("{base}/v1/chat/completions"),
        Provider::Openai => format!("{base}/chat/completions"),
        Provider::Gemini if base.ends_with("/v1beta") => {
            format!("{base}/models/{model}:generateContent")
        }
        Provider::Gemini => format!("{base}/v1beta/models/{model}:generateContent"),
    })
}

/// The default variable holding the API key, when `api_key_env` is not set.
pub fn default_key_env(provider: Provider) -> &'static str {
    match provider {
        Provider::Anthropic => "ANTHROPIC_API_KEY",
        Provider::Openai => "OPENAI_API_KEY",
        Provider::Gemini => "GEMINI_API_KEY",
    }
}

/// The JSON body of a review request.
pub fn body(provider: Provider, model: &str, system: &str, user: &str) -> Value {
    match provider {
        Provider::Anthropic => json!({
            "model": model,
            "max_tokens": MAX_TOKENS,
            "system": system,
            "messages": [{"role": "user", "content": user}],
        }),
        Provider::Openai => json!({
            "model": model,
            "max_tokens": MAX_TOKENS,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        }),
        Provider::Gemini => json!({
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [{"text": user}]}],
            // Gemini 2.5 counts its thinking in this budget: 256 left thinking
            // models with no answer (finishReason MAX_TOKENS, no parts).
            "generationConfig": {"maxOutputTokens": GEMINI_MAX_TOKENS},
        }),
    }
}

/// Headers besides `content-type: application/json`.
pub fn headers(provider: Provider, key: Option<&str>) -> Vec<(&'static str, String)> {
    match (provider, key) {
        (Provider::Anthropic, Some(k)) => vec![
            ("x-api-key", k.to_string()),
            ("anthropic-version", ANTHROPIC_VERSION.to_string()),
        ],
        (Provider::Anthropic, None) => {
            vec![("anthropic-version", ANTHROPIC_VERSION.to_string())]
        }
        (Provider::Openai, Some(k)) => vec![("authorization", format!("Bearer {k}"))],
        (Provider::Gemini, Some(k)) => vec![("x-goog-api-key", k.to_string())],
        (Provider::Openai | Provider::Gemini, None) => vec![],
    }
}

/// The model's text from a successful response body.
pub fn answer_text(provider: Provider, body: &[u8]) -> Result<String, AdversaryError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| AdversaryError::Malformed(format!("the response is not JSON: {e}")))?;
    match provider {
        Provider::Anthropic => {
            if v["stop_reason"] == "refusal" {
                return Err(AdversaryError::Refused("stop_reason \"refusal\"".into()));
            }
            let blocks = v["content"].as_array().ok_or_else(|| {
                AdversaryError::Malformed("the response has no `content` array".into())
            })?;
            let text: String = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            Ok(text)
        }
        Provider::Openai => {
            let choice = &v["choices"][0];
            if choice.is_null() {
                return Err(AdversaryError::Malformed(
                    "the response has no `choices`".into(),
                ));
            }
            let msg = &choice["message"];
            if let Some(r) = msg["refusal"].as_str() {
                return Err(AdversaryError::Refused(r.chars().take(200).collect()));
            }
            if choice["finish_reason"] == "content_filter" {
                return Err(AdversaryError::Refused(
                    "finish_reason \"content_filter\"".into(),
                ));
            }
            msg["content"].as_str().map(str::to_string).ok_or_else(|| {
                AdversaryError::Malformed("the response's message has no text content".into())
            })
        }
        Provider::Gemini => {
            if let Some(r) = v["promptFeedback"]["blockReason"].as_str() {
                return Err(AdversaryError::Refused(format!("blockReason {r:?}")));
            }
            let cand = &v["candidates"][0];
            if cand.is_null() {
                return Err(AdversaryError::Malformed(
                    "the response has no `candidates`".into(),
                ));
            }
            if let Some(f) = cand["finishReason"].as_str().filter(|f| {
                [
                    "SAFETY",
                    "RECITATION",
                    "BLOCKLIST",
                    "PROHIBITED_CONTENT",
                    "SPII",
                ]
                .contains(f)
            }) {
                return Err(AdversaryError::Refused(format!("finishReason {f:?}")));
            }
            let parts = cand["content"]["parts"].as_array().ok_or_else(|| {
                AdversaryError::Malformed(match cand["finishReason"].as_str() {
                    Some("MAX_TOKENS") => "the model used its whole token budget without an answer (finishReason MAX_TOKENS): choose a model that thinks less".into(),
                    _ => "the candidate has no `content.parts`".into(),
                })
            })?;
            Ok(parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let a = Provider::Anthropic;
        let o = Provider::Openai;
        let g = Provider::Gemini;
        assert_eq!(
            url(g, None, "gemini-2.5-flash").unwrap(),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            url(g, Some("http://127.0.0.1:9/v1beta/"), "m-1").unwrap(),
            "http://127.0.0.1:9/v1beta/models/m-1:generateContent"
        );
        // The model is part of the path: nothing that would change the URL.
        for bad in ["", "a/b", "m?x=1", "m#f", "a b", "../x"] {
            assert!(url(g, None, bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            url(a, None, "m").unwrap(),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            url(a, Some("http://127.0.0.1:9/"), "m").unwrap(),
            "http://127.0.0.1:9/v1/messages"
        );
        assert_eq!(
            url(a, Some("http://h/v1"), "m").unwrap(),
            "http://h/v1/messages"
        );
        assert_eq!(
            url(o, None, "m").unwrap(),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            url(o, Some("http://127.0.0.1:11434"), "m").unwrap(),
            "http://127.0.0.1:11434/v1/chat/completions"
        );
        assert_eq!(
            url(o, Some("http://127.0.0.1:11434/v1/"), "m").unwrap(),
            "http://127.0.0.1:11434/v1/chat/completions"
        );
        assert_eq!(
            url(o, Some("http://h/api"), "m").unwrap(),
            "http://h/api/chat/completions"
        );
        assert!(url(o, Some("ftp://h"), "m").is_err());
        assert!(url(o, Some("http://h/v1?x=1"), "m").is_err());
    }

    #[test]
    fn gemini_answers_and_refusals() {
        let g = Provider::Gemini;
        let ok = br#"{"candidates":[{"content":{"role":"model","parts":[{"text":"ALLOW "},{"text":"fine"}]},"finishReason":"STOP"}]}"#;
        assert_eq!(answer_text(g, ok).unwrap(), "ALLOW fine");
        let blocked = br#"{"promptFeedback":{"blockReason":"SAFETY"}}"#;
        assert!(matches!(
            answer_text(g, blocked),
            Err(AdversaryError::Refused(_))
        ));
        let safety = br#"{"candidates":[{"content":{"parts":[]},"finishReason":"SAFETY"}]}"#;
        assert!(matches!(
            answer_text(g, safety),
            Err(AdversaryError::Refused(_))
        ));
        assert!(matches!(
            answer_text(g, b"{}"),
            Err(AdversaryError::Malformed(_))
        ));
        let b = body(g, "m", "SYS", "USER");
        assert_eq!(b["systemInstruction"]["parts"][0]["text"], "SYS");
        assert_eq!(b["contents"][0]["parts"][0]["text"], "USER");
        assert_eq!(
            headers(g, Some("k")),
            vec![("x-goog-api-key", "k".to_string())]
        );
    }

    #[test]
    fn answers() {
        let a = br#"{"content":[{"type":"text","text":"ALLOW ok"}],"stop_reason":"end_turn"}"#;
        assert_eq!(answer_text(Provider::Anthropic, a).unwrap(), "ALLOW ok");
        let r = br#"{"content":[],"stop_reason":"refusal"}"#;
        assert!(matches!(
            answer_text(Provider::Anthropic, r),
            Err(AdversaryError::Refused(_))
        ));
        let o = br#"{"choices":[{"message":{"role":"assistant","content":"DENY no","refusal":null},"finish_reason":"stop"}]}"#;
        assert_eq!(answer_text(Provider::Openai, o).unwrap(), "DENY no");
        let o =
            br#"{"choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't"}}]}"#;
        assert!(matches!(
            answer_text(Provider::Openai, o),
            Err(AdversaryError::Refused(_))
        ));
        assert!(matches!(
            answer_text(Provider::Openai, b"{}"),
            Err(AdversaryError::Malformed(_))
        ));
        assert!(matches!(
            answer_text(Provider::Openai, b"<html>"),
            Err(AdversaryError::Malformed(_))
        ));
    }
}
