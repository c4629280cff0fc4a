//! A scripted model server for driving real agents in tests: a loopback HTTP/1.1
//! server that speaks OpenAI Chat Completions (`POST …/chat/completions`, tool calls,
//! streaming SSE), OpenAI Responses (`POST …/responses`, `function_call` items,
//! streaming SSE), Anthropic Messages (`POST …/messages`, `tool_use` blocks,
//! streaming SSE) and the Gemini API (`POST …/models/M:streamGenerateContent`,
//! `:generateContent` and `:countTokens`, `functionCall` parts, streaming SSE),
//! answers each request with the next step of a script, and records every request
//! body so a test can read what the agent sent back (its tool results).
//!
//! The step is chosen by the number of assistant turns already in the request's
//! history, not by a request counter: an agent that retries, or asks a side question
//! (a title, a summary) with a short history, gets a consistent answer. A
//! text-protocol agent that puts canned assistant turns in its history (aider: worked
//! examples, an "Ok." after each output it adds) counts only the turns that hold the
//! script's own replies ([`ModelServer::start_counting_replies`]).
#![allow(dead_code)]
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// One model turn.
#[derive(Clone, Debug)]
pub enum Step {
    /// A tool call: the tool's name and its arguments.
    Tool(&'static str, Value),
    /// Plain assistant text (a text-protocol agent parses commands out of it).
    Text(String),
}

/// One recorded request.
#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    pub body: Value,
    /// The step of the script it was answered with (past the end: the final text).
    pub step: usize,
}

pub struct ModelServer {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Request>>>,
    steps: usize,
}

impl ModelServer {
    /// Listen on `ip:0` and answer with `script`; past its end, a final text turn.
    pub fn start(ip: &str, script: Vec<Step>) -> ModelServer {
        ModelServer::start_with(ip, script, false)
    }

    /// As [`ModelServer::start`], the step chosen by the number of the script's own
    /// text replies in the history.
    pub fn start_counting_replies(ip: &str, script: Vec<Step>) -> ModelServer {
        ModelServer::start_with(ip, script, true)
    }

    fn start_with(ip: &str, script: Vec<Step>, replies_only: bool) -> ModelServer {
        let l = TcpListener::bind((ip, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let steps = script.len();
        let (r, script) = (requests.clone(), Arc::new(script));
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                let (r, script) = (r.clone(), script.clone());
                std::thread::spawn(move || serve(s, &r, &script, replies_only));
            }
        });
        ModelServer {
            port,
            requests,
            steps,
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Whether the agent got to the script's last step (it sent back every result
    /// before it).
    pub fn finished(&self) -> bool {
        self.requests().iter().any(|r| r.step + 1 >= self.steps)
    }

    /// Every request body, as text: what the agent sent to the model.
    pub fn sent_text(&self) -> String {
        self.requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The tool results (OpenAI `role: tool` messages and `function_call_output`
    /// items, Anthropic `tool_result` blocks, Gemini `functionResponse` parts) and user
    /// messages of the longest history the agent sent, in order, as text.
    pub fn tool_results(&self) -> Vec<String> {
        let longest = self
            .requests()
            .into_iter()
            .max_by_key(|r| messages(&r.body).len());
        let Some(req) = longest else { return vec![] };
        let mut out = vec![];
        for m in messages(&req.body) {
            let role = m["role"].as_str().unwrap_or("");
            if role == "tool" || role == "user" {
                // Gemini's turns hold `parts`, the others' `content`.
                out.push(content_text(if m["parts"].is_null() {
                    &m["content"]
                } else {
                    &m["parts"]
                }));
            } else if m["type"] == "function_call_output" {
                out.push(content_text(&m["output"]));
            }
        }
        out
    }
}

/// The history: Chat Completions' and Messages' `messages`, Responses' `input`
/// items, or Gemini's `contents`.
fn messages(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .or_else(|| body["input"].as_array())
        .or_else(|| body["contents"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// Whether a history entry is a model turn: an assistant message, a Gemini `model`
/// turn, or a Responses `function_call` item (one a turn: the script calls one tool a
/// turn).
fn is_model_turn(m: &Value) -> bool {
    m["role"] == "assistant" || m["role"] == "model" || m["type"] == "function_call"
}

/// Every string in `v`, in order, one a line.
fn strings(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(strings).collect::<Vec<_>>().join("\n"),
        Value::Object(o) => o.values().map(strings).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// The text in a message's content: a string, or the text of every block (including
/// the content of `tool_result` blocks and the response of Gemini `functionResponse`
/// parts).
pub fn content_text(c: &Value) -> String {
    match c {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b {
                Value::String(s) => s.clone(),
                _ => {
                    let mut t = b["text"].as_str().unwrap_or("").to_string();
                    if !b["content"].is_null() {
                        t.push_str(&content_text(&b["content"]));
                    }
                    t.push_str(&strings(&b["functionResponse"]["response"]));
                    t
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Whether a history entry is one of the script's text replies, sent back.
fn is_scripted_reply(m: &Value, script: &[Step]) -> bool {
    let text = content_text(&m["content"]);
    script
        .iter()
        .any(|s| matches!(s, Step::Text(t) if t.trim() == text.trim()))
}

fn serve(s: TcpStream, requests: &Mutex<Vec<Request>>, script: &[Step], replies_only: bool) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    loop {
        let Some(req) = crate::common::http1::read_request(&mut r) else {
            return;
        };
        let path = req.target;
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let turn = messages(&body)
            .iter()
            .filter(|m| is_model_turn(m) && (!replies_only || is_scripted_reply(m, script)))
            .count();
        requests.lock().unwrap().push(Request {
            path: path.clone(),
            body: body.clone(),
            step: turn,
        });
        // claude-code adds `?beta=true`; the route is the path without its query.
        let route = path.split('?').next().unwrap_or_default();
        let anthropic = route.ends_with("/messages");
        let responses = route.ends_with("/responses");
        let step = script
            .get(turn)
            .cloned()
            .unwrap_or_else(|| Step::Text("All done.".into()));
        let stream = body["stream"].as_bool().unwrap_or(false);
        let model = body["model"].as_str().unwrap_or("scripted").to_string();
        let id = format!("call_{turn}");
        let mut w = &s;
        let ok = if let Some((model, method)) = gemini_route(route) {
            match method {
                "countTokens" => respond(&mut w, 200, "application/json", b"{\"totalTokens\":10}"),
                "streamGenerateContent" => {
                    let v = gemini_response(&step, model);
                    let events = format!("data: {v}\n\n");
                    respond(&mut w, 200, "text/event-stream", events.as_bytes())
                }
                _ => {
                    let v = gemini_response(&step, model);
                    respond(&mut w, 200, "application/json", v.to_string().as_bytes())
                }
            }
        } else if responses {
            // The Responses API streams (codex asks for nothing else).
            let events = responses_stream(&step, &model, &id);
            respond(&mut w, 200, "text/event-stream", events.as_bytes())
        } else if !route.contains("completions") && !anthropic {
            respond(
                &mut w,
                404,
                "application/json",
                b"{\"error\":\"not found\"}",
            )
        } else if stream {
            let events = if anthropic {
                anthropic_stream(&step, &model, &id)
            } else {
                openai_stream(&step, &model, &id)
            };
            respond(&mut w, 200, "text/event-stream", events.as_bytes())
        } else {
            let v = if anthropic {
                anthropic_message(&step, &model, &id)
            } else {
                openai_completion(&step, &model, &id)
            };
            respond(&mut w, 200, "application/json", v.to_string().as_bytes())
        };
        if !ok {
            return;
        }
    }
}

fn respond(w: &mut impl Write, status: u16, ctype: &str, body: &[u8]) -> bool {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\n\r\n",
        if status == 200 { "OK" } else { "Not Found" },
        body.len()
    );
    w.write_all(head.as_bytes()).is_ok() && w.write_all(body).is_ok() && w.flush().is_ok()
}

fn openai_completion(step: &Step, model: &str, id: &str) -> Value {
    let (message, finish) = match step {
        Step::Tool(name, args) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": id, "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}),
            "tool_calls",
        ),
        Step::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
    };
    json!({
        "id": format!("chatcmpl-{id}"), "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    })
}

fn openai_stream(step: &Step, model: &str, id: &str) -> String {
    let chunk = |delta: Value, finish: Value| {
        let v = json!({
            "id": format!("chatcmpl-{id}"), "object": "chat.completion.chunk", "created": 1,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        });
        format!("data: {v}\n\n")
    };
    let mut out = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    let finish = match step {
        Step::Tool(name, args) => {
            out += &chunk(
                json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            );
            out += &chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": args.to_string()}}]}),
                Value::Null,
            );
            "tool_calls"
        }
        Step::Text(t) => {
            out += &chunk(json!({"content": t}), Value::Null);
            "stop"
        }
    };
    out += &chunk(json!({}), json!(finish));
    let usage = json!({
        "id": format!("chatcmpl-{id}"), "object": "chat.completion.chunk", "created": 1,
        "model": model, "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    });
    out += &format!("data: {usage}\n\ndata: [DONE]\n\n");
    out
}

fn responses_stream(step: &Step, model: &str, id: &str) -> String {
    let ev = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap_or(""));
    let resp = format!("resp_{id}");
    let item = match step {
        Step::Tool(name, args) => json!({
            "type": "function_call", "id": format!("fc_{id}"), "call_id": id,
            "name": name, "arguments": args.to_string(), "status": "completed"}),
        Step::Text(t) => json!({
            "type": "message", "id": format!("msg_{id}"), "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]}),
    };
    let mut out = ev(json!({"type": "response.created", "response": {
        "id": resp, "object": "response", "model": model, "status": "in_progress", "output": []}}));
    out += &ev(json!({"type": "response.output_item.added", "output_index": 0, "item": item}));
    out += &ev(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    out += &ev(json!({"type": "response.completed", "response": {
        "id": resp, "object": "response", "model": model, "status": "completed",
        "output": [item],
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20}}}));
    out
}

/// A Gemini API route, `…/models/MODEL:METHOD`: the model and the method.
fn gemini_route(route: &str) -> Option<(&str, &str)> {
    let (_, tail) = route.rsplit_once("/models/")?;
    tail.split_once(':')
}

/// One `GenerateContentResponse`: a `model` turn of one part. Streamed, it is the
/// only event (each event is a whole response; the client joins their parts).
fn gemini_response(step: &Step, model: &str) -> Value {
    let part = match step {
        Step::Tool(name, args) => json!({"functionCall": {"name": name, "args": args}}),
        Step::Text(t) => json!({"text": t}),
    };
    json!({
        "candidates": [{"content": {"role": "model", "parts": [part]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10,
            "totalTokenCount": 20},
        "modelVersion": model
    })
}

fn anthropic_message(step: &Step, model: &str, id: &str) -> Value {
    let (content, stop) = match step {
        Step::Tool(name, args) => (
            json!([{"type": "tool_use", "id": id, "name": name, "input": args}]),
            "tool_use",
        ),
        Step::Text(t) => (json!([{"type": "text", "text": t}]), "end_turn"),
    };
    json!({
        "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 10}
    })
}

fn anthropic_stream(step: &Step, model: &str, id: &str) -> String {
    let ev = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
    let mut out = ev(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    let stop = match step {
        Step::Tool(name, args) => {
            out += &ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            );
            out += &ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": args.to_string()}}),
            );
            "tool_use"
        }
        Step::Text(t) => {
            out += &ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
            );
            out += &ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": t}}),
            );
            "end_turn"
        }
    };
    out += &ev(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    out += &ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 10}}),
    );
    out += &ev("message_stop", json!({"type": "message_stop"}));
    out
}
