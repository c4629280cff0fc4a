//! A real client (curl) configured only through the environment the sandbox gets
//! (`proxy::child_env`), and a killed proxy: connections fail, never go direct.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod proxy_support;

use std::process::Output;

use common::text;
use proxy_support::*;

async fn curl(env: &[(String, String)], args: &[&str]) -> Output {
    let mut c = tokio::process::Command::new("curl");
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .args(["-sS", "--max-time", "10"])
        .args(args);
    c.output()
        .await
        .expect("curl must be installed for these tests")
}

/// How curl is pointed at the proxy.
#[derive(Clone, Copy, Debug)]
enum Setup {
    /// The child environment alone (`HTTP_PROXY`, `ALL_PROXY`, …).
    Env,
    /// The child environment, plus `NO_PROXY` naming the blocked host, as an agent
    /// might set it.
    EnvNoProxy,
    /// No environment; `--proxy socks5h://…` from the child environment's
    /// `ALL_PROXY` (SOCKS5 with proxy-side resolution on the same port, same token).
    Socks,
}

/// What curl must come to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ends {
    /// The allowed sink's answer on stdout: a positive control.
    Answered,
    /// A failure, and no sink's answer.
    Fails,
}

/// curl's arguments: `{allowed}` and `{blocked}` are the sinks' URLs, `{blocked_ip}`
/// the blocked sink's as `127.1`.
const CURLS: &[(Setup, &[&str], Ends)] = &[
    // HTTP_PROXY (absolute form).
    (Setup::Env, &["{allowed}"], Ends::Answered),
    (Setup::Env, &["-f", "{blocked}"], Ends::Fails),
    // NO_PROXY set by the agent exempts nothing: curl still asks the proxy, which denies.
    (Setup::EnvNoProxy, &["-f", "{blocked}"], Ends::Fails),
    // CONNECT (-p tunnels plain HTTP through CONNECT).
    (Setup::Env, &["-p", "{allowed}"], Ends::Answered),
    (Setup::Env, &["-p", "-f", "{blocked}"], Ends::Fails),
    (Setup::Socks, &["{allowed}"], Ends::Answered),
    (Setup::Socks, &["{blocked}"], Ends::Fails),
    (Setup::Socks, &["{blocked_ip}"], Ends::Fails),
    (Setup::Env, &["-k", "{blocked_https}"], Ends::Fails),
];

/// The child environment's proxy as a `socks5h://` URL.
fn socks_url(env: &[(String, String)]) -> String {
    env.iter()
        .find(|(k, _)| k == "ALL_PROXY")
        .unwrap()
        .1
        .replacen("http://", "socks5h://", 1)
}

/// Run the rows of `curls` against the sinks on these ports, through the proxy that
/// `env` names, asserting each row's end and naming the row if not.
async fn run_curls(
    env: &[(String, String)],
    allowed_port: u16,
    blocked_port: u16,
    curls: &[(Setup, &[&str], Ends)],
) {
    let urls = [
        ("{allowed}", format!("http://allowed.test:{allowed_port}/")),
        ("{blocked}", format!("http://blocked.test:{blocked_port}/")),
        ("{blocked_ip}", format!("http://127.1:{blocked_port}/")),
        (
            "{blocked_https}",
            format!("https://blocked.test:{blocked_port}/"),
        ),
    ];
    for &(setup, args, ends) in curls {
        let row = format!("{setup:?} curl {args:?}");
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                urls.iter()
                    .find(|(k, _)| k == a)
                    .map_or(a.to_string(), |(_, u)| u.clone())
            })
            .collect();
        let mut env = env.to_vec();
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        let socks = socks_url(&env);
        match setup {
            Setup::Env => {}
            Setup::EnvNoProxy => {
                env.push(("NO_PROXY".into(), "blocked.test".into()));
                env.push(("no_proxy".into(), "blocked.test".into()));
            }
            Setup::Socks => {
                env.clear();
                args.splice(0..0, ["--proxy", socks.as_str()]);
            }
        }
        let o = curl(&env, &args).await;
        let answered = String::from_utf8_lossy(&o.stdout).contains("sink:");
        match ends {
            Ends::Answered => assert!(
                String::from_utf8_lossy(&o.stdout).contains("sink:allowed"),
                "{row}: positive control: {}",
                text(&o)
            ),
            Ends::Fails => {
                assert!(!o.status.success(), "{row}: succeeded: {}", text(&o));
                assert!(!answered, "{row}: a sink answered: {}", text(&o));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_the_child_environment() {
    let w = World::new().await;
    let env = sandpit::proxy::child_env(w.addr, TOKEN);
    run_curls(&env, w.allowed.port(), w.blocked.port(), CURLS).await;

    // HTTPS via CONNECT: curl's own ClientHello carries SNI allowed.test and reaches
    // the sink (which is no TLS server, so curl then fails — the bytes are the point).
    let before = w.allowed.received().len();
    let _ = curl(
        &env,
        &[
            "-k",
            "--max-time",
            "2",
            &format!("https://allowed.test:{}/", w.allowed.port()),
        ],
    )
    .await;
    let got = w.allowed.received();
    assert!(
        find(&got[before..], b"allowed.test").is_some(),
        "SNI reached the allowed sink"
    );

    w.settle().await;
    w.blocked.assert_untouched("curl");
}

/// After the proxy is gone: every way curl knows fails, none goes direct.
const AFTER_THE_PROXY: &[(Setup, &[&str], Ends)] = &[
    (Setup::Env, &["{allowed}"], Ends::Fails),
    (Setup::Env, &["-p", "{allowed}"], Ends::Fails),
    (Setup::Socks, &["{allowed}"], Ends::Fails),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_proxy_fails_closed() {
    let w = World::new().await;
    let env = sandpit::proxy::child_env(w.addr, TOKEN);
    let (allowed_port, blocked_port) = (w.allowed.port(), w.blocked.port());
    run_curls(
        &env,
        allowed_port,
        blocked_port,
        &[(Setup::Env, &["{allowed}"], Ends::Answered)],
    )
    .await;
    let seen = w.allowed.connection_count();

    let World {
        running,
        allowed: allowed_sink,
        blocked,
        ..
    } = w;
    running.shutdown();
    // The listener goes away with the task: wait until a connect is refused.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tokio::net::TcpStream::connect(env_addr(&env)).await.is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the proxy still accepted connections 10 s after its shutdown"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    run_curls(&env, allowed_port, blocked_port, AFTER_THE_PROXY).await;
    assert_eq!(
        allowed_sink.connection_count(),
        seen,
        "nothing went direct after the proxy died"
    );
    blocked.assert_untouched("killed proxy");
}

fn env_addr(env: &[(String, String)]) -> std::net::SocketAddr {
    let v = &env.iter().find(|(k, _)| k == "HTTP_PROXY").unwrap().1;
    v.rsplit('@').next().unwrap().parse().unwrap()
}
