//! Proxy benchmark, against direct loopback in the same run (see bench/proxy.sh):
//! 100 MB throughput, added latency per new connection (CONNECT, SOCKS5,
//! transparent), and N concurrent tunnels with the proxy process's memory and fds.
//!
//! The proxy runs in a child process (`proxy_bench serve`) so its memory and file
//! descriptors are measured alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use sandpit::dns::{Resolver, Upstream};
use sandpit::proxy::decide::policy_from_toml;
use sandpit::proxy::{NullSink, Proxy, ProxyConfig};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "bench-token";
const MB: usize = 1024 * 1024;

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let serving = args.get(1).map(String::as_str) == Some("serve");
    if args.get(1).map(String::as_str) == Some("http") {
        // `proxy_bench http ADDR MB`: an HTTP server answering every GET with MB of
        // zeros, for bench/proxy.sh's `sandpit run -- curl` section.
        let addr: SocketAddr = args
            .get(2)
            .and_then(|a| a.parse().ok())
            .expect("http ADDR MB");
        let mb = args.get(3).and_then(|m| m.parse().ok()).unwrap_or(100);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(http_server(addr, mb * MB));
        return;
    }
    // The proxy's runtime: BENCH_PROXY_THREADS workers (0 = current-thread runtime).
    let threads = if serving {
        env_usize("BENCH_PROXY_THREADS", 2)
    } else {
        2
    };
    let rt = if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .unwrap();
    if serving {
        rt.block_on(serve(args.get(2).map(String::as_str) != Some("copies")));
    } else {
        rt.block_on(run());
    }
}

async fn serve(splice: bool) {
    let policy = policy_from_toml(
        "[network]\nallow = [\"allowed.test\"]\n[network.resolve]\n\"allowed.test\" = \"127.0.0.2\"\n",
    )
    .unwrap();
    let cfg = ProxyConfig {
        token: Some(TOKEN.into()),
        max_connections: 8192,
        splice,
        ..ProxyConfig::default()
    };
    let proxy = Proxy::new(
        Arc::new(policy),
        Arc::new(Resolver::new(Upstream::Nothing)),
        Arc::new(NullSink),
        cfg,
    );
    let running = proxy
        .serve_tcp("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    println!("{}", running.local_addr().unwrap());
    // Serve until stdin closes (the parent exits).
    let mut line = String::new();
    let _ = tokio::io::BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await;
    drop(running);
}

async fn http_server(addr: SocketAddr, size: usize) {
    let l = TcpListener::bind(addr).await.unwrap();
    println!("{}", l.local_addr().unwrap());
    loop {
        let Ok((mut s, _)) = l.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let h =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n");
            if s.write_all(h.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![0u8; 256 * 1024];
            let mut sent = 0;
            while sent < size {
                let n = chunk.len().min(size - sent);
                if s.write_all(&chunk[..n]).await.is_err() {
                    return;
                }
                sent += n;
            }
            let _ = s.shutdown().await;
        });
    }
}

/// Sink: counts bytes until EOF, answers "k"; or echoes when the first byte is 'e'.
async fn sink() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 * 1024];
                let Ok(n) = s.read(&mut buf).await else {
                    return;
                };
                if n > 0 && buf[0] == b'e' {
                    // Echo mode.
                    if s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if s.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(_) => return,
                    }
                }
                let _ = s.write_all(b"k").await;
            });
        }
    });
    addr
}

fn auth() -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("sandpit:{TOKEN}"))
    )
}

#[derive(Clone, Copy)]
enum Via {
    Direct,
    Connect,
    Socks,
    Transparent,
}

async fn open(via: Via, proxy: SocketAddr, sink: SocketAddr) -> TcpStream {
    match via {
        Via::Direct => {
            let s = TcpStream::connect(sink).await.unwrap();
            s.set_nodelay(true).unwrap();
            s
        }
        Via::Connect => {
            let mut s = TcpStream::connect(proxy).await.unwrap();
            s.set_nodelay(true).unwrap();
            let req = format!(
                "CONNECT allowed.test:{} HTTP/1.1\r\nProxy-Authorization: {}\r\n\r\n",
                sink.port(),
                auth()
            );
            s.write_all(req.as_bytes()).await.unwrap();
            let mut head = [0u8; 39]; // "HTTP/1.1 200 Connection established\r\n\r\n"
            s.read_exact(&mut head).await.unwrap();
            assert!(
                head.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&head)
            );
            s
        }
        Via::Socks => {
            let mut s = TcpStream::connect(proxy).await.unwrap();
            s.set_nodelay(true).unwrap();
            let mut msg = vec![5, 1, 2, 1, 7];
            msg.extend_from_slice(b"sandpit");
            msg.push(TOKEN.len() as u8);
            msg.extend_from_slice(TOKEN.as_bytes());
            msg.extend_from_slice(&[5, 1, 0, 3, 12]);
            msg.extend_from_slice(b"allowed.test");
            msg.extend_from_slice(&sink.port().to_be_bytes());
            s.write_all(&msg).await.unwrap();
            let mut rep = [0u8; 2 + 2 + 10];
            s.read_exact(&mut rep).await.unwrap();
            assert_eq!(rep[5], 0, "socks reply");
            s
        }
        Via::Transparent => {
            let mut s = TcpStream::connect(proxy).await.unwrap();
            s.set_nodelay(true).unwrap();
            let line = sandpit::proxy::transparent::render(Some(TOKEN), sink, Some("allowed.test"));
            s.write_all(line.as_bytes()).await.unwrap();
            s
        }
    }
}

async fn throughput(via: Via, proxy: SocketAddr, sink: SocketAddr, total: usize) -> f64 {
    let mut s = open(via, proxy, sink).await;
    let chunk = vec![0u8; 256 * 1024];
    let t = Instant::now();
    let mut sent = 0;
    while sent < total {
        let n = chunk.len().min(total - sent);
        s.write_all(&chunk[..n]).await.unwrap();
        sent += n;
    }
    s.shutdown().await.unwrap();
    let mut k = [0u8; 1];
    s.read_exact(&mut k).await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    total as f64 / MB as f64 / secs
}

/// Mean microseconds for: open, send "e", read the echo.
async fn latency(via: Via, proxy: SocketAddr, sink: SocketAddr, n: usize) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        let mut s = open(via, proxy, sink).await;
        s.write_all(b"e").await.unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).await.unwrap();
    }
    t.elapsed().as_secs_f64() * 1e6 / n as f64
}

async fn spawn_proxy(mode: &str) -> (tokio::process::Child, u32, SocketAddr) {
    let me = std::env::current_exe().unwrap();
    let mut child = tokio::process::Command::new(me)
        .args(["serve", mode])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).await.unwrap();
    (child, pid, line.trim().parse().unwrap())
}

/// User + system CPU time of `pid`, in milliseconds.
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks * 10.0
}

fn proc_status(pid: u32, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .map(|l| l[key.len()..].trim().to_string())
        .unwrap_or_default()
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// `RESULT name value unit` for bench/report.sh, when BENCH_RESULT is set.
fn result(name: &str, value: f64, unit: &str) {
    if std::env::var_os("BENCH_RESULT").is_some() {
        println!("RESULT {name} {value:.3} {unit}");
    }
}

/// "CONNECT, copies only" → "connect_copies_only".
fn key(name: &str) -> String {
    name.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

async fn run() {
    let total = env_usize("BENCH_MB", 100) * MB;
    let rounds = env_usize("BENCH_ROUNDS", 9);
    let lat_n = env_usize("BENCH_LATENCY_N", 500);
    let conc = env_usize("BENCH_CONCURRENT", 2000);

    // The default proxy (bulk through splice(2)), and one that only copies.
    let (mut child, pid, proxy) = spawn_proxy("splice").await;
    let (_copy_child, copy_pid, copy_proxy) = spawn_proxy("copies").await;
    let sink = sink().await;
    println!(
        "proxy pid {pid} at {proxy} (copy-only proxy at {copy_proxy}); sink at {sink}; proxy runtime threads: {}",
        env_usize("BENCH_PROXY_THREADS", 2)
    );

    // Warm up.
    for via in [Via::Direct, Via::Connect] {
        throughput(via, proxy, sink, 8 * MB).await;
        latency(via, proxy, sink, 20).await;
    }

    println!(
        "\n== throughput, {} MB upload, median of {rounds} (interleaved) ==",
        total / MB
    );
    let mut cpu: std::collections::HashMap<&str, f64> = Default::default();
    let mut own = cpu.clone();
    let mut results: Vec<(&str, Via, Vec<f64>)> = vec![
        ("direct", Via::Direct, vec![]),
        ("CONNECT", Via::Connect, vec![]),
        ("SOCKS5", Via::Socks, vec![]),
        ("transparent", Via::Transparent, vec![]),
        ("CONNECT, copies only", Via::Connect, vec![]),
    ];
    for _ in 0..rounds {
        for (name, via, v) in results.iter_mut() {
            let (p, ppid) = if name.contains("copies") {
                (copy_proxy, copy_pid)
            } else {
                (proxy, pid)
            };
            let (before, me) = (cpu_ms(ppid), cpu_ms(std::process::id()));
            v.push(throughput(*via, p, sink, total).await);
            *cpu.entry(name).or_default() += cpu_ms(ppid) - before;
            *own.entry(name).or_default() += cpu_ms(std::process::id()) - me;
        }
    }
    let direct = results[0].2.clone();
    // The bound the CPU puts on each row: a transfer takes at least the CPU time it
    // used (proxy, client and sink) spread over every core; against direct's wall
    // time, that is the best ratio this machine allows the way the row moves bytes.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let direct_ms = (total / MB) as f64 / median(direct.clone()) * 1000.0;
    println!("(ceiling: direct's wall time over the row's CPU time / {cores} cores)");
    for (name, _, v) in &results {
        let m = median(v.clone());
        // Each round's ratio against the direct run measured just before it.
        let ratios: Vec<f64> = v.iter().zip(&direct).map(|(p, d)| p / d).collect();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), r| (l.min(*r), h.max(*r)));
        let c = cpu.get(name).copied().unwrap_or(0.0) / rounds as f64;
        let o = own.get(name).copied().unwrap_or(0.0) / rounds as f64;
        let ceiling = direct_ms / ((c + o) / cores).max(direct_ms);
        println!(
            "{name:>18}: {m:8.0} MB/s   ratio {:.2}x (rounds {lo:.2}..{hi:.2}, ceiling {ceiling:.2}x)   CPU per {} MB: proxy {c:4.0} ms, client+sink {o:4.0} ms",
            median(ratios.clone()),
            total / MB
        );
        result(&format!("proxy_tp_{}_ceiling", key(name)), ceiling, "x");
        result(&format!("proxy_tp_{}", key(name)), m, "MB/s");
        result(
            &format!("proxy_tp_{}_ratio", key(name)),
            median(ratios),
            "x",
        );
    }

    println!("\n== new-connection latency (connect + handshake + 1-byte echo), mean of {lat_n}, median of {rounds} ==");
    let mut lats: Vec<(&str, Via, Vec<f64>)> = vec![
        ("direct", Via::Direct, vec![]),
        ("CONNECT", Via::Connect, vec![]),
        ("SOCKS5", Via::Socks, vec![]),
        ("transparent", Via::Transparent, vec![]),
    ];
    for _ in 0..rounds {
        for (_, via, v) in lats.iter_mut() {
            v.push(latency(*via, proxy, sink, lat_n).await);
        }
    }
    let direct_lat = median(lats[0].2.clone());
    for (name, _, v) in &lats {
        let m = median(v.clone());
        println!(
            "{name:>12}: {m:8.1} us   added {:+.3} ms",
            (m - direct_lat) / 1000.0
        );
        result(&format!("proxy_lat_{}", key(name)), m, "us");
    }

    println!("\n== {conc} concurrent CONNECT tunnels ==");
    let idle_rss = proc_status(pid, "VmRSS:");
    let idle_fds = fds(pid);
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let (hold_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let ready = Arc::new(tokio::sync::Semaphore::new(0));
    for i in 0..conc {
        let mut hold = hold_tx.subscribe();
        let ready = ready.clone();
        tasks.spawn(async move {
            let r = tokio::time::timeout(Duration::from_secs(60), async {
                let mut s = open(Via::Connect, proxy, sink).await;
                let msg = format!("e{i:07}");
                s.write_all(msg.as_bytes()).await?;
                let mut b = vec![0u8; msg.len()];
                s.read_exact(&mut b).await?;
                if b != msg.as_bytes() {
                    return Err(std::io::Error::other("echo mismatch"));
                }
                Ok::<_, std::io::Error>(s)
            })
            .await;
            ready.add_permits(1);
            let ok = matches!(r, Ok(Ok(_)));
            let _s = r;
            let _ = hold.recv().await;
            ok
        });
    }
    let _ = ready.acquire_many(conc as u32).await.unwrap();
    let open_secs = t.elapsed().as_secs_f64();
    let peak_rss = proc_status(pid, "VmRSS:");
    let peak_fds = fds(pid);
    let _ = hold_tx.send(());
    let mut ok = 0;
    while let Some(r) = tasks.join_next().await {
        if matches!(r, Ok(true)) {
            ok += 1;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "opened and echoed {ok}/{conc} in {open_secs:.2} s, errors {}",
        conc - ok
    );
    println!(
        "proxy RSS: idle {idle_rss}, with {conc} open {peak_rss}, VmHWM {}",
        proc_status(pid, "VmHWM:")
    );
    result("proxy_load_ok", ok as f64, "connections");
    result("proxy_load_errors", (conc - ok) as f64, "connections");
    let kb = |v: &str| {
        v.trim_end_matches(" kB")
            .trim()
            .parse::<f64>()
            .unwrap_or(0.0)
    };
    result("proxy_load_rss", kb(&peak_rss) / 1024.0, "MB");
    result("proxy_load_fds", peak_fds as f64, "fds");
    println!(
        "proxy fds: idle {idle_fds}, with {conc} open {peak_fds}, after close {}",
        fds(pid)
    );
    drop(child.stdin.take());
    let _ = child.wait().await;
}
