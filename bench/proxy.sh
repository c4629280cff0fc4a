#!/usr/bin/env bash
# Proxy benchmark vs direct loopback, measured in the same run:
#   100 MB throughput (goal >= 0.85x), added latency per new connection (goal <= 0.3 ms),
#   and 2,000 concurrent tunnels with the proxy's memory and open fds.
# Knobs: BENCH_MB, BENCH_ROUNDS, BENCH_LATENCY_N, BENCH_CONCURRENT.
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cargo build --release -q -p sandpit --example proxy_bench
exec target/release/examples/proxy_bench
