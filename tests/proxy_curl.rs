//! A real client (curl) configured only through the environment the sandbox gets
//! (`proxy::child_env`), and a killed proxy: connections fail, never go direct.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod proxy_support;

use std::process::Output;

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

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout {}\nstderr {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_the_child_environment() {
    let w = World::new().await;
    let env = sandpit::proxy::child_env(w.addr, TOKEN);
    let allowed = format!("http://allowed.test:{}/", w.allowed.port());
    let blocked = format!("http://blocked.test:{}/", w.blocked.port());

    // HTTP_PROXY (absolute form).
    let o = curl(&env, &[&allowed]).await;
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("sink:allowed"),
        "{}",
        text(&o)
    );
    let o = curl(&env, &["-f", &blocked]).await;
    assert!(!o.status.success(), "{}", text(&o));
    // NO_PROXY set by the agent exempts nothing: curl still asks the proxy, which denies.
    let mut env_np = env.clone();
    env_np.push(("NO_PROXY".into(), "blocked.test".into()));
    env_np.push(("no_proxy".into(), "blocked.test".into()));
    let o = curl(&env_np, &["-f", &blocked]).await;
    assert!(!o.status.success(), "{}", text(&o));

    // CONNECT (-p tunnels plain HTTP through CONNECT).
    let o = curl(&env, &["-p", &allowed]).await;
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("sink:allowed"),
        "{}",
        text(&o)
    );
    let o = curl(&env, &["-p", "-f", &blocked]).await;
    assert!(!o.status.success(), "{}", text(&o));

    // SOCKS5 with proxy-side resolution on the same port (socks5h://, same token).
    let socks = env
        .iter()
        .find(|(k, _)| k == "ALL_PROXY")
        .unwrap()
        .1
        .replacen("http://", "socks5h://", 1);
    let o = curl(&[], &["--proxy", &socks, &allowed]).await;
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("sink:allowed"),
        "{}",
        text(&o)
    );
    let o = curl(&[], &["--proxy", &socks, &blocked]).await;
    assert!(!o.status.success(), "{}", text(&o));
    let o = curl(
        &[],
        &[
            "--proxy",
            &socks,
            &format!("http://127.1:{}/", w.blocked.port()),
        ],
    )
    .await;
    assert!(!o.status.success(), "{}", text(&o));

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
    let o = curl(
        &env,
        &["-k", &format!("https://blocked.test:{}/", w.blocked.port())],
    )
    .await;
    assert!(!o.status.success());

    w.settle().await;
    w.blocked.assert_untouched("curl");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_proxy_fails_closed() {
    let w = World::new().await;
    let env = sandpit::proxy::child_env(w.addr, TOKEN);
    let allowed = format!("http://allowed.test:{}/", w.allowed.port());
    let o = curl(&env, &[&allowed]).await;
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("sink:allowed"),
        "positive control: {}",
        text(&o)
    );
    let seen = w.allowed.connection_count();

    let World {
        running,
        allowed: allowed_sink,
        blocked,
        ..
    } = w;
    running.shutdown();
    // The listener goes away with the task; wait until a connect is refused.
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(env_addr(&env))
            .await
            .is_err()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for args in [vec![allowed.as_str()], vec!["-p", allowed.as_str()]] {
        let o = curl(&env, &args).await;
        assert!(!o.status.success(), "{}", text(&o));
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("sink:"),
            "{}",
            text(&o)
        );
    }
    let socks = env
        .iter()
        .find(|(k, _)| k == "ALL_PROXY")
        .unwrap()
        .1
        .replacen("http://", "socks5h://", 1);
    let o = curl(&[], &["--proxy", &socks, &allowed]).await;
    assert!(!o.status.success(), "{}", text(&o));
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
