#!/usr/bin/env bash
# Proxy benchmark vs direct loopback, measured in the same run:
#   1. the proxy alone (sandpit/examples/proxy_bench.rs): 100 MB throughput
#      (goal >= 0.85x), added latency per new connection (goal <= 0.3 ms), and 2,000
#      concurrent tunnels with the proxy's memory and open fds;
#   2. the real path inside `sandpit run` (curl -> listener in the network namespace ->
#      the launcher's bridge relay -> the proxy's unix socket -> the server): curl's
#      own download speed of 100 MB under `sandpit run` vs bare curl, the server on
#      127.0.0.2 named allowed.test through `[network.resolve]`; with socat installed,
#      also bare curl through a socat TCP relay (the reference the issue quotes),
#      measured in the same rounds.
# Knobs: BENCH_MB, BENCH_ROUNDS, BENCH_LATENCY_N, BENCH_CONCURRENT; SECTIONS="1 2".
# BENCH_RESULT=1 adds machine-readable `RESULT name value unit` lines (bench/report.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
SECTIONS=${SECTIONS:-1 2}
has() { [[ " $SECTIONS " == *" $1 "* ]]; }
cargo build --release -q -p sandpit --example proxy_bench
cargo build --release -q -p sandpit
BENCH=$PWD/target/release/examples/proxy_bench
BIN=$PWD/target/release/sandpit

if has 1; then
  "$BENCH"
fi

has 2 || exit 0
MB=${BENCH_MB:-100}
ROUNDS=${BENCH_ROUNDS:-9}
WORK=$(mktemp -d /var/tmp/sandpit-bench-XXXXXX)
SERVER=
SOCAT=
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null
  [ -n "$SOCAT" ] && kill "$SOCAT" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
coproc SRV { exec "$BENCH" http 127.0.0.2:0 "$MB"; }
SERVER=$SRV_PID
read -r ADDR <&"${SRV[0]}"
PORT=${ADDR##*:}
if command -v socat >/dev/null; then
  SOCAT_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.3", 0)); print(s.getsockname()[1])')
  socat "TCP-LISTEN:$SOCAT_PORT,bind=127.0.0.3,reuseaddr,fork" "TCP:127.0.0.2:$PORT" &
  SOCAT=$!
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.3/$SOCAT_PORT") 2>/dev/null && break; sleep 0.1; done
fi
mkdir -p "$WORK/home/.sandpit" "$WORK/home/project"
printf '[network]\nallow = ["allowed.test"]\n[network.resolve]\n"allowed.test" = "127.0.0.2"\n' \
  > "$WORK/home/.sandpit/config.toml"
AS=()
if [ "$(id -u)" = 0 ]; then
  chown -R 65534:65534 "$WORK"
  AS=(setpriv --reuid 65534 --regid 65534 --clear-groups)
fi
# curl's own download speed (bytes/s), so sandpit's start-up is not counted.
speed() { # url, command prefix…
  local url=$1; shift
  (cd "$WORK/home/project" && "${AS[@]}" env -i HOME="$WORK/home" PATH=/usr/local/bin:/usr/bin:/bin \
    "$@" curl -s -o /dev/null -w "%{speed_download}\n" "$url" 2>/dev/null)
}
echo
echo "== sandpit run: curl downloads $MB MB (curl's speed; median of $ROUNDS, interleaved) =="
declare -A v=()
for ((i = 0; i < ROUNDS; i++)); do
  v[bare]+=" $(speed "http://127.0.0.2:$PORT/" )"
  if [ -n "$SOCAT" ]; then v[socat]+=" $(speed "http://127.0.0.3:$SOCAT_PORT/")"; fi
  v[proxy]+=" $(speed "http://allowed.test:$PORT/" "$BIN" run --)"
  v[transparent]+=" $(speed "http://allowed.test:$PORT/" "$BIN" run -- env -u http_proxy -u HTTP_PROXY -u ALL_PROXY -u all_proxy)"
done
python3 - "${v[bare]}" "${v[proxy]}" "${v[transparent]}" ${SOCAT:+"${v[socat]}"} <<'PY'
import os, sys
med = lambda s: sorted(map(float, s.split()))[len(s.split()) // 2]
rows = [("bare curl (direct to 127.0.0.2)", None),
        ("sandpit run, HTTP_PROXY (forwarded)", "run_http_proxy"),
        ("sandpit run, no proxy env (transparent)", "run_transparent"),
        ("socat TCP relay (reference, no sandbox)", "run_socat")]
bare = [float(x) for x in sys.argv[1].split()]
for (label, key), s in zip(rows, sys.argv[1:]):
    vals = [float(x) for x in s.split()]
    m = med(s) / 2**20
    ratios = sorted(a / b for a, b in zip(vals, bare))
    r = ratios[len(ratios) // 2]
    print(f"{label:>42}: {m:8.0f} MB/s   ratio {r:.2f}x (rounds {ratios[0]:.2f}..{ratios[-1]:.2f})")
    if os.environ.get("BENCH_RESULT"):
        print(f"RESULT {key or 'run_bare'} {m:.1f} MB/s")
        print(f"RESULT {key or 'run_bare'}_ratio {r:.3f} x")
PY
