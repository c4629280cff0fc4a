//! The proxy's and resolver's parsers alone, in nanoseconds per call (median of
//! `BENCH_ROUNDS` rounds of `BENCH_N` calls): a TLS ClientHello → SNI (whole, and
//! split over 7-byte records), a DNS query parsed, its answer built, that answer
//! parsed back. Run by `bench/parsers.sh`; `BENCH_RESULT=1` adds `RESULT` lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::hint::black_box;
use std::time::Instant;

use sandpit::dns::message::{answer, build_query, parse_answer, parse_query, RCODE_NOERROR};
use sandpit::proxy::sni::{build_client_hello, parse};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn time(name: &str, n: usize, rounds: usize, mut f: impl FnMut()) {
    let mut per: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    per.sort_by(f64::total_cmp);
    let median = per[per.len() / 2];
    println!("{name:<28} {median:>9.1} ns");
    if std::env::var_os("BENCH_RESULT").is_some() {
        println!("RESULT parse_{name} {median:.1} ns");
    }
}

fn main() {
    let n = env("BENCH_N", 200_000);
    let rounds = env("BENCH_ROUNDS", 7);
    let hello = build_client_hello(Some("registry.npmjs.org"), false);
    let mut split = Vec::new();
    for chunk in hello[5..].chunks(7) {
        split.extend_from_slice(&[0x16, 3, 1]);
        split.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
        split.extend_from_slice(chunk);
    }
    let q = build_query(0x1234, "registry.npmjs.org", 1).unwrap_or_default();
    let parsed = parse_query(&q).ok();
    let ans = parsed
        .as_ref()
        .map(|p| answer(p, RCODE_NOERROR, &["127.0.0.2".parse().unwrap()], 60))
        .unwrap_or_default();
    time("sni_whole", n, rounds, || {
        black_box(parse(black_box(&hello)));
    });
    time("sni_split_records", n, rounds, || {
        black_box(parse(black_box(&split)));
    });
    time("dns_parse_query", n, rounds, || {
        black_box(parse_query(black_box(&q)).ok());
    });
    if let Some(p) = &parsed {
        time("dns_answer", n, rounds, || {
            black_box(answer(
                black_box(p),
                RCODE_NOERROR,
                &["127.0.0.2".parse().unwrap()],
                60,
            ));
        });
    }
    time("dns_parse_answer", n, rounds, || {
        black_box(parse_answer(black_box(&ans), 0x1234).ok());
    });
}
