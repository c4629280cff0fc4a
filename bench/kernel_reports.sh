#!/usr/bin/env bash
# The kernel layer's refusal reports (seccomp notifier, docs/kernel.md "Refusals of
# the kernel layer alone"): what every path call pays for them. Prints medians and
# ratios measured in this run, the notifier on vs off, both under
# `sandpit run --kernel-only` (SANDPIT_KERNEL_REPORTS=1/0), and the bare command.
#   1. open+close of one file, 100k times (wall ns per call, bench/open_loop.c)
#   2. an open-heavy workload: `find /usr -type f | head -n 20000 | xargs cat`
#      (wall ms)
#   3. `sandpit run --kernel-only -- /bin/true` (wall ms; the filter's set-up and
#      the launcher's thread)
# Usage: bench/kernel_reports.sh [ROUNDS]   (builds the release binary first;
# BIN=path skips the build). As root the sandboxed side runs as uid 65534 like the
# tests. BENCH_RESULT=1 adds `RESULT name value unit` lines (bench/report.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
if [ -z "${BIN:-}" ]; then
  cargo build --release -p sandpit -q
  BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/sandpit
fi
WORK=$(mktemp -d /var/tmp/sandpit-bench-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/home/ws"
cc -O2 -o "$WORK/home/ws/open_loop" bench/open_loop.c
echo data > "$WORK/home/ws/file"
AS=()
if [ "$(id -u)" = 0 ]; then
  chown -R 65534:65534 "$WORK"
  AS=(setpriv --reuid 65534 --regid 65534 --clear-groups)
fi
export HOME=$WORK/home
unset XDG_RUNTIME_DIR
export PATH=/usr/local/bin:/usr/bin:/bin
cd "$HOME/ws"
"${AS[@]}" "$BIN" run --kernel-only -- /bin/true >/dev/null 2>&1
sleep 2.1
now() { date +%s%N; }
# run WHICH CMD…: bare, off (no notifier) or on, as the test user.
run() {
  local which=$1; shift
  case $which in
    bare) "${AS[@]}" "$@" ;;
    off) SANDPIT_KERNEL_REPORTS=0 "${AS[@]}" "$BIN" run --kernel-only -- "$@" 2>/dev/null ;;
    on) SANDPIT_KERNEL_REPORTS=1 "${AS[@]}" "$BIN" run --kernel-only -- "$@" 2>/dev/null ;;
  esac
}
median() { python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
ratio() { python3 -c "print(f'{$1/$2:.2f}x')"; }
result() { if [ -n "${BENCH_RESULT:-}" ]; then echo "RESULT $1 $2 $3"; fi; }

echo "== 1. open+close, 100k calls, wall ns per call ($ROUNDS rounds, interleaved, medians)"
declare -A OPEN=([bare]="" [off]="" [on]="")
for _ in $(seq "$ROUNDS"); do
  for w in bare off on; do
    OPEN[$w]+=" $(run $w ./open_loop file 100000)"
  done
done
b=$(median ${OPEN[bare]}); f=$(median ${OPEN[off]}); o=$(median ${OPEN[on]})
echo "bare ${b} ns, kernel-only ${f} ns ($(ratio "$f" "$b")), with reports ${o} ns ($(ratio "$o" "$b")); reports vs none $(ratio "$o" "$f")"
result kernel_reports_open_ns "$o" ns
result kernel_reports_open_ratio "$(python3 -c "print(round($o/$f,2))")" x

echo "== 2. find /usr -type f | head -n 20000 | xargs cat ($ROUNDS rounds, wall ms, medians)"
W='find /usr -type f 2>/dev/null | head -n 20000 | xargs cat >/dev/null 2>&1; true'
declare -A CAT=([bare]="" [off]="" [on]="")
for _ in $(seq "$ROUNDS"); do
  for w in bare off on; do
    t0=$(now); run $w sh -c "$W"; t1=$(now)
    CAT[$w]+=" $(( (t1 - t0) / 1000000 ))"
  done
done
b=$(median ${CAT[bare]}); f=$(median ${CAT[off]}); o=$(median ${CAT[on]})
echo "bare ${b} ms, kernel-only ${f} ms ($(ratio "$f" "$b")), with reports ${o} ms ($(ratio "$o" "$b")); reports vs none $(ratio "$o" "$f")"
result kernel_reports_cat_ratio "$(python3 -c "print(round($o/$f,2))")" x

echo "== 3. sandpit run --kernel-only -- /bin/true ($ROUNDS x 5 runs, wall ms, medians)"
declare -A START=([off]="" [on]="")
for _ in $(seq $((ROUNDS * 5))); do
  for w in off on; do
    t0=$(now); run $w /bin/true; t1=$(now)
    START[$w]+=" $(python3 -c "print(($t1 - $t0) / 1e6)")"
  done
done
f=$(median ${START[off]}); o=$(median ${START[on]})
echo "without reports ${f} ms, with ${o} ms ($(ratio "$o" "$f"))"
result kernel_reports_start_ms "$o" ms
