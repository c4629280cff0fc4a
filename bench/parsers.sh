#!/usr/bin/env bash
# The proxy's and resolver's parsers alone (sandpit/examples/parse_bench.rs): TLS
# ClientHello → SNI (tls-parser under sandpit's record reassembly) and DNS query /
# answer (hickory-proto), nanoseconds per call, median of BENCH_ROUNDS rounds of
# BENCH_N calls. To compare with another tree, run this script in it: the example
# only uses the parsers' public functions, which kept their signatures.
# BENCH_RESULT=1 adds machine-readable `RESULT name value unit` lines.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sandpit --example parse_bench
"${CARGO_TARGET_DIR:-$PWD/target}/release/examples/parse_bench"
