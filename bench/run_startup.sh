#!/usr/bin/env bash
# Kernel-layer benchmarks for `sandpit run` (issue 4). Prints ratios against the bare
# command measured in the same run; no pass/fail thresholds here (goals in comments).
#   1. `sandpit run -- /bin/true` median            (goal <= 8 ms)
#   2. open+close per call, every layer on vs bare  (goal <= 1.10x) at path depths
#   3. start time in a 300k-file workspace vs empty (goal <= 1.05x)
# Usage: bench/run_startup.sh [RUNS]   (builds the release binary first)
# As root the sandboxed side runs as uid 65534 like the tests. FILES=300000 overrides
# the big workspace's size.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-200}
FILES=${FILES:-300000}
cargo build --release -p sandpit -q
BIN=$PWD/target/release/sandpit
WORK=$(mktemp -d /var/tmp/sandpit-bench-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/home/empty" "$WORK/home/big" "$WORK/home/ws"
cc -O2 -o "$WORK/home/ws/openclose" bench/openclose.c
AS=()
if [ "$(id -u)" = 0 ]; then
  chown -R 65534:65534 "$WORK"
  AS=(setpriv --reuid 65534 --regid 65534 --clear-groups)
fi
export HOME=$WORK/home
unset XDG_RUNTIME_DIR
export PATH=/usr/local/bin:/usr/bin:/bin

# median wall time in ms of RUNS runs of a command, run from directory $1
median_ms() {
  local dir=$1; shift
  python3 - "$dir" "$RUNS" "$@" <<'PY'
import os, subprocess, sys, time
d, n, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
ts = []
for _ in range(n):
    t = time.perf_counter()
    subprocess.run(cmd, cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    ts.append((time.perf_counter() - t) * 1000)
ts.sort()
print(f"{ts[len(ts)//2]:.2f}")
PY
}
ratio() { python3 -c "print(f'{$1/$2:.2f}x')"; }

echo "== 1. sandpit run -- /bin/true ($RUNS runs, median)"
bare=$(median_ms "$HOME/empty" "${AS[@]}" /bin/true)
sp=$(median_ms "$HOME/empty" "${AS[@]}" "$BIN" run -- /bin/true)
echo "bare /bin/true:            ${bare} ms"
echo "sandpit run -- /bin/true:  ${sp} ms   (goal <= 8 ms; overhead $(python3 -c "print(f'{$sp-$bare:.2f}')") ms)"

echo "== 2. open+close per call (ns), every layer on vs bare"
N=200000
for depth in 1 4 8 16; do
  p="$HOME/ws"; for i in $(seq 1 $((depth - 1))); do p="$p/d$i"; done
  mkdir -p "$p"; echo x > "$p/f"
  [ "$(id -u)" = 0 ] && chown -R 65534:65534 "$HOME/ws"
  for mode in r w; do
    b=$(cd "$HOME/ws" && "${AS[@]}" ./openclose "$p/f" $N $mode)
    s=$(cd "$HOME/ws" && "${AS[@]}" "$BIN" run -- ./openclose "$p/f" $N $mode 2>/dev/null)
    echo "depth $depth ($( [ $mode = r ] && echo read ' ' || echo write)): bare ${b} ns, sandboxed ${s} ns, ratio $(ratio "$s" "$b")   (goal <= 1.10x)"
  done
done
# A read-only system path, outside every writable root.
b=$("${AS[@]}" "$HOME/ws/openclose" /usr/include/stdio.h $N r)
s=$(cd "$HOME/ws" && "${AS[@]}" "$BIN" run -- ./openclose /usr/include/stdio.h $N r 2>/dev/null)
echo "/usr/include/stdio.h (read): bare ${b} ns, sandboxed ${s} ns, ratio $(ratio "$s" "$b")"

echo "== 3. start time, ${FILES}-file workspace vs empty"
python3 - "$HOME/big" "$FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per = 1000
for i in range(0, n, per):
    d = os.path.join(root, f"dir{i // per}")
    os.makedirs(d, exist_ok=True)
    for j in range(per):
        open(os.path.join(d, f"f{j}"), "w").close()
PY
[ "$(id -u)" = 0 ] && chown -R 65534:65534 "$HOME/big"
empty=$(median_ms "$HOME/empty" "${AS[@]}" "$BIN" run -- /bin/true)
big=$(median_ms "$HOME/big" "${AS[@]}" "$BIN" run -- /bin/true)
echo "empty workspace: ${empty} ms, ${FILES}-file workspace: ${big} ms, ratio $(ratio "$big" "$empty")   (goal <= 1.05x)"
