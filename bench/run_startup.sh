#!/usr/bin/env bash
# Kernel-layer benchmarks for `sandpit run` (issue 4). Prints ratios against the bare
# command measured in the same run; no pass/fail thresholds here (goals in comments).
#   1. `sandpit run -- /bin/true` median            (goal <= 8 ms), for the glibc
#      build (`cargo build`) and the static one (.ci/build-static.sh; NO_STATIC=1
#      skips it)
#   2. open+close per call, every layer on vs bare  (goal <= 1.10x) at path depths
#   3. start time in a 300k-file workspace vs empty (goal <= 1.05x)
#   4. where the start of `sandpit run -- /bin/true` goes: the median of each step's
#      time (SANDPIT_TIMING=1) over RUNS runs
#   5. start-up of a 200 MB program (an agent's size: /bin/true with 200 MB appended)
#      vs /bin/true, both under `sandpit run` (inspecting the program must not
#      cost its size)
#   6. process start inside a run: a shell starting /bin/true 500 times, bare, under
#      `sandpit run --kernel-only` and under every layer; per process (no goal: the
#      interposer's share of every fork+exec an agent makes)
#   7. the placeholders' spares and trash on vs off (they keep ~720 lines only if
#      this says they pay)
# Usage: bench/run_startup.sh [RUNS]   (builds the release binary first)
# SECTIONS="1 2 3" picks sections (default: all).
# As root the sandboxed side runs as uid 65534 like the tests. FILES=300000 overrides
# the big workspace's size. BENCH_RESULT=1 adds `RESULT name value unit` lines
# (bench/report.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-200}
FILES=${FILES:-300000}
cargo build --release -p sandpit -q
BIN=$PWD/target/release/sandpit
# The static launcher too (section 1), where .ci/build-static.sh can build it.
STATIC=""
if [[ " ${SECTIONS:-1} " == *" 1 "* ]] && [ -z "${NO_STATIC:-}" ]; then
  STATIC=$(bash .ci/build-static.sh) || {
    echo "(no static launcher: .ci/build-static.sh failed; section 1 measures the glibc build only)"
    STATIC=""
  }
fi
LAUNCHERS=("$BIN")
if [ -n "$STATIC" ]; then LAUNCHERS+=("$STATIC"); fi
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
# One run extracts the interposer into this fresh HOME; after ~2 s its verification
# stamp is written (src/inject), as on any machine where sandpit has run before.
for b in "${LAUNCHERS[@]}"; do
  (cd "$HOME/empty" && "${AS[@]}" "$b" run -- /bin/true >/dev/null 2>&1)
done
sleep 2.1
for b in "${LAUNCHERS[@]}"; do
  (cd "$HOME/empty" && "${AS[@]}" "$b" run -- /bin/true >/dev/null 2>&1)
done

# Interleaved timing of two commands (A then B, RUNS times, so load drift hits both
# alike), each started by bench/spawn_pair.c with fork+exec (as uid 65534 when run as
# root): no interpreter or setpriv in the timed path. Prints "A_wall B_wall A_cpu
# B_cpu": medians in ms; cpu = user+sys of the command and what it waited for.
cc -O2 -o "$WORK/spawn_pair" bench/spawn_pair.c
RUN_UID=-1
if [ "$(id -u)" = 0 ]; then RUN_UID=65534; fi
pair_ms() {
  local da=$1 db=$2; shift 2
  "$WORK/spawn_pair" "$RUNS" "$RUN_UID" "$da" "$db" "$@"
}
result() { if [ -n "${BENCH_RESULT:-}" ]; then echo "RESULT $*"; fi; }
ratio() { python3 -c "print(f'{$1/$2:.2f}x')"; }

SECTIONS=${SECTIONS:-1 2 3 4 5 6 7}
has() { [[ " $SECTIONS " == *" $1 "* ]]; }
if has 1; then
echo "== 1. sandpit run -- /bin/true ($RUNS runs each, interleaved, medians)"
read -r bw sw bc sc < <(pair_ms "$HOME/empty" "$HOME/empty" /bin/true --vs-- "$BIN" run -- /bin/true)
echo "bare /bin/true:            wall ${bw} ms, cpu ${bc} ms"
echo "sandpit run -- /bin/true:  wall ${sw} ms, cpu ${sc} ms   (goal <= 8 ms; overhead wall $(python3 -c "print(f'{$sw-$bw:.2f}')") ms)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
result run_true_bare "$bw" ms
result run_true_sandpit "$sw" ms
if [ -n "$STATIC" ]; then
  read -r bw2 tw _ tc < <(pair_ms "$HOME/empty" "$HOME/empty" /bin/true --vs-- "$STATIC" run -- /bin/true)
  echo "static launcher (musl, static-pie; .ci/build-static.sh), same command:"
  echo "sandpit run -- /bin/true:  wall ${tw} ms, cpu ${tc} ms   (bare /bin/true in these rounds: ${bw2} ms)"
  result run_true_static_bare "$bw2" ms
  result run_true_static "$tw" ms
fi
fi

if has 2; then
echo "== 2. open+close per call (CPU ns), every layer on vs bare (best of 7 alternating rounds)"
N=100000
best() { python3 -c "import sys; print(min(map(float, sys.argv[1:])))" "$@"; }
oc() { # label path mode [result-key [cwd]]
  local bs=() ss=() dir=${5:-$HOME/ws}
  for _ in 1 2 3 4 5 6 7; do
    bs+=("$(cd "$dir" && "${AS[@]}" "$HOME/ws/openclose" "$2" $N "$3")")
    ss+=("$(cd "$dir" && "${AS[@]}" "$BIN" run --workspace "$HOME/ws" -- "$HOME/ws/openclose" "$2" $N "$3" 2>/dev/null)")
  done
  local b s; b=$(best "${bs[@]}"); s=$(best "${ss[@]}")
  echo "$1: bare ${b} ns, sandboxed ${s} ns, ratio $(ratio "$s" "$b")   (goal <= 1.10x)"
  if [ -n "${4:-}" ]; then result "run_oc_${4}_bare" "$b" ns; result "run_oc_${4}_sandpit" "$s" ns; fi
}
for depth in 1 4 8 16; do
  p="$HOME/ws"; for i in $(seq 1 $((depth - 1))); do p="$p/d$i"; done
  mkdir -p "$p"; echo x > "$p/f"
  [ "$(id -u)" = 0 ] && chown -R 65534:65534 "$HOME/ws"
  oc "workspace depth $depth, O_RDONLY" "$p/f" r "d${depth}_r"
  oc "workspace depth $depth, O_WRONLY" "$p/f" w "d${depth}_w"
done
# Relative to the cwd, as build tools and git name most files.
oc "relative path (cwd at depth 4), O_RDONLY" f r rel_r "$HOME/ws/d1/d2/d3"
oc "relative path (cwd at depth 4), O_WRONLY" f w rel_w "$HOME/ws/d1/d2/d3"
# Outside every writable root: the read-only host view.
oc "/usr/include/stdio.h, O_RDONLY" /usr/include/stdio.h r host_r
fi

if has 4; then
echo "== 4. start-up steps of sandpit run -- /bin/true (SANDPIT_TIMING=1, medians of $RUNS runs)"
for _ in $(seq "$RUNS"); do
  (cd "$HOME/empty" && SANDPIT_TIMING=1 "${AS[@]}" "$BIN" run -- /bin/true 2>&1 >/dev/null | grep '^sandpit: timing ') || true
done | python3 -c '
import re, statistics, sys
steps = {}
for line in sys.stdin:
    m = re.match(r"sandpit: timing ([0-9.]+) ms (.*) \(pid [0-9]+\)$", line)
    if m:
        steps.setdefault(m.group(2), []).append(float(m.group(1)))
prev = 0.0
for step, v in sorted(steps.items(), key=lambda kv: statistics.median(kv[1])):
    at = statistics.median(v)
    print(f"{at:8.2f} ms  +{at - prev:5.2f}  {step}")
    prev = at
'
fi

if has 5; then
echo "== 5. start-up of a 200 MB program vs /bin/true, both under sandpit run ($((RUNS / 4 + 1)) runs each)"
mkdir -p "$HOME/prog"
cp /bin/true "$HOME/prog/big-true"
truncate -s +200M "$HOME/prog/big-true"
[ "$(id -u)" = 0 ] && chown -R 65534:65534 "$HOME/prog"
read -r tw gw _ _ < <(RUNS=$((RUNS / 4 + 1)) pair_ms "$HOME/prog" "$HOME/prog" "$BIN" run -- /bin/true --vs-- "$BIN" run -- ./big-true)
echo "sandpit run -- /bin/true: ${tw} ms; sandpit run -- 200 MB program: ${gw} ms; ratio $(ratio "$gw" "$tw")"
result run_big_program_small "$tw" ms
result run_big_program "$gw" ms
rm -rf "$HOME/prog"
fi

if has 6; then
PROCS=500
echo "== 6. process start inside a run: $PROCS x /bin/true from sh, per process (7 interleaved runs, medians)"
printf 'i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done\n' "$PROCS" > "$HOME/loop.sh"
[ "$(id -u)" = 0 ] && chown 65534:65534 "$HOME/loop.sh"
read -r bw kw _ _ < <(RUNS=7 pair_ms "$HOME/empty" "$HOME/empty" /bin/sh "$HOME/loop.sh" --vs-- "$BIN" run --kernel-only -- /bin/sh "$HOME/loop.sh")
read -r kw2 fw _ _ < <(RUNS=7 pair_ms "$HOME/empty" "$HOME/empty" "$BIN" run --kernel-only -- /bin/sh "$HOME/loop.sh" --vs-- "$BIN" run -- /bin/sh "$HOME/loop.sh")
us() { python3 -c "print(f'{$1 * 1000 / $PROCS:.0f}')"; }
echo "bare: $(us "$bw") us; --kernel-only: $(us "$kw") us (in the second pair: $(us "$kw2") us); every layer: $(us "$fw") us"
echo "the interposer's share: $(python3 -c "print(f'{($fw - $kw2) * 1000 / $PROCS:+.0f}')") us per process"
result proc_bare "$(us "$bw")" us
result proc_kernel_only "$(us "$kw2")" us
result proc_every_layer "$(us "$fw")" us
fi

if has 7; then
# The spares and the trash (sandbox/linux/spare.rs, trash.rs, ~720 lines) exist to
# take mkdir/rmdir of placeholders and run directories off the start and the end of
# a run. Off: a second HOME whose ~/.sandpit/{spare,trash} and scratch root's .trash
# are files, so every placeholder is made and removed in place (the tending process
# is still forked, so this is an upper bound on what removing the code would cost).
echo "== 7. spares and trash on vs off: sandpit run -- /bin/true ($RUNS runs each, interleaved, medians)"
OFF=$WORK/off
mkdir -p "$OFF/home/.sandpit" "$OFF/xdg/sandpit" "$WORK/xdg-on" "$OFF/home/empty"
: > "$OFF/home/.sandpit/spare"; : > "$OFF/home/.sandpit/trash"; : > "$OFF/xdg/sandpit/.trash"
chmod 700 "$OFF/home/.sandpit" "$OFF/xdg" "$OFF/xdg/sandpit" "$WORK/xdg-on"
[ "$(id -u)" = 0 ] && chown -R 65534:65534 "$OFF" "$WORK/xdg-on"
ENV_ON=(/usr/bin/env HOME="$HOME" XDG_RUNTIME_DIR="$WORK/xdg-on")
ENV_OFF=(/usr/bin/env HOME="$OFF/home" XDG_RUNTIME_DIR="$OFF/xdg")
for e in ON OFF; do  # extract the interposer into each home first
  v="ENV_$e[@]"; (cd "$HOME/empty" && "${AS[@]}" "${!v}" "$BIN" run -- /bin/true >/dev/null 2>&1)
done
sleep 2.1
read -r onw offw onc offc < <(pair_ms "$HOME/empty" "$OFF/home/empty" "${ENV_ON[@]}" "$BIN" run -- /bin/true --vs-- "${ENV_OFF[@]}" "$BIN" run -- /bin/true)
echo "spares and trash on:  wall ${onw} ms, cpu ${onc} ms"
echo "off (mkdir/rmdir):    wall ${offw} ms, cpu ${offc} ms   (on/off wall $(ratio "$onw" "$offw"))"
result run_true_spares_on "$onw" ms
result run_true_spares_off "$offw" ms
fi

has 3 || exit 0
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
read -r ew gw ec gc < <(pair_ms "$HOME/empty" "$HOME/big" "$BIN" run -- /bin/true --vs-- "$BIN" run -- /bin/true)
echo "empty workspace: wall ${ew} ms cpu ${ec} ms; ${FILES}-file workspace: wall ${gw} ms cpu ${gc} ms"
echo "ratio wall $(ratio "$gw" "$ew"), cpu $(ratio "$gc" "$ec")   (goal <= 1.05x)"
result run_big_empty "$ew" ms
result run_big_files "$gw" ms
