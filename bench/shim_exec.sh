#!/usr/bin/env bash
# Cost of the PATH shims: `curl --version` bare vs through `sandpit exec`, an argv[0]
# symlink to the small `sandpit-shim` binary (what `sandpit run --shims` makes), an
# argv[0] symlink to the sandpit launcher and an sh script, interleaved in one run.
# Usage: bench/shim_exec.sh [ITERATIONS]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-300}
cargo build --release -q -p sandpit
SANDPIT=$PWD/target/release/sandpit
REAL=$(command -v curl) || { echo "curl is not installed" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/small" "$WORK/link" "$WORK/script" "$WORK/home/.sandpit"
# A policy with the usual shape: a few hosts and exec patterns, one of them a regex.
cat > "$WORK/home/.sandpit/config.toml" <<'TOML'
[network]
allow = ["api.anthropic.com", "*.githubusercontent.com", "registry.npmjs.org:443", "crates.io", "static.crates.io"]
block = ["pastebin.com"]
[exec]
block = ["curl --data", "base64 -d", 're:nc\s+-e', 're:bash\s+-i']
TOML
HOME=$WORK/home "$SANDPIT" exec --write-snapshot "$WORK/snapshot"
SHIM=$(HOME=$WORK/home "$SANDPIT" exec --install-shim)
ln -s "$SHIM" "$WORK/small/curl"
ln -s "$SANDPIT" "$WORK/link/curl"
printf '#!/bin/sh\n# sandpit-shim\nexec %q exec curl "$@"\n' "$SANDPIT" > "$WORK/script/curl"
chmod 755 "$WORK/script/curl"
export SANDPIT_SNAPSHOT=$WORK/snapshot
BASE_PATH=$PATH

declare -A total=([true]=0 [bare]=0 [exec]=0 [small]=0 [link]=0 [script]=0)
run() { # name, command…
  local name=$1; shift
  local t0=${EPOCHREALTIME/./}
  "$@" > /dev/null
  local t1=${EPOCHREALTIME/./}
  total[$name]=$(( total[$name] + t1 - t0 ))
}
# Warm the page cache.
for _ in 1 2 3; do
  "$REAL" --version >/dev/null; "$SANDPIT" exec curl --version >/dev/null
  PATH=$WORK/small:$BASE_PATH SANDPIT_SHIM_DIR=$WORK/small curl --version >/dev/null
done
for ((i = 0; i < N; i++)); do
  run true /bin/true
  run bare "$REAL" --version
  run exec "$SANDPIT" exec curl --version
  PATH=$WORK/small:$BASE_PATH SANDPIT_SHIM_DIR=$WORK/small run small curl --version
  PATH=$WORK/link:$BASE_PATH SANDPIT_SHIM_DIR=$WORK/link run link curl --version
  PATH=$WORK/script:$BASE_PATH SANDPIT_SHIM_DIR=$WORK/script run script curl --version
done
ms() { awk -v t="$1" -v n="$N" 'BEGIN { printf "%.3f", t / n / 1000 }'; }
bare=$(ms "${total[bare]}")
printf '%-36s %8s ms/run   (process start-up on this machine)\n' "/bin/true" "$(ms "${total[true]}")"
printf '%-36s %8s ms/run\n' "bare curl --version" "$bare"
for k in exec small link script; do
  v=$(ms "${total[$k]}")
  label=$k
  case $k in
    exec) label="sandpit exec curl --version" ;;
    small) label="shim: symlink to sandpit-shim" ;;
    link) label="shim: symlink to sandpit" ;;
    script) label="shim: sh script" ;;
  esac
  printf '%-36s %8s ms/run   added %s ms (x%s)\n' "$label" "$v" \
    "$(awk -v a="$v" -v b="$bare" 'BEGIN { printf "%+.3f", a - b }')" \
    "$(awk -v a="$v" -v b="$bare" 'BEGIN { printf "%.2f", a / b }')"
done
small=$(ms "${total[small]}")
awk -v l="$small" -v b="$bare" -v t="$(ms "${total[true]}")" 'BEGIN {
  printf "the sandpit-shim link adds %.2f process start-ups (/bin/true) on this machine\n", (l - b) / t }'
echo "($N interleaved runs each; goal: added <= 1 ms)"

# CPU time (user+sys of the commands, from the shell's `times`): what a shim costs
# in work, less sensitive than wall time to a loaded machine's scheduling delays.
children_us() { # the children's user+sys in a saved `times` output, in µs
  tail -1 "$1" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); s += p[1] * 60 + p[2] }; printf "%d", s * 1e6 }'
}
declare -A cpu
cpu_run() { # name, command…: N runs in a row
  local name=$1; shift
  times > "$WORK/t0"
  for ((j = 0; j < N; j++)); do "$@" > /dev/null; done
  times > "$WORK/t1"
  cpu[$name]=$(( $(children_us "$WORK/t1") - $(children_us "$WORK/t0") ))
}
cpu_run true /bin/true
cpu_run bare "$REAL" --version
cpu_run exec "$SANDPIT" exec curl --version
PATH=$WORK/small:$BASE_PATH SANDPIT_SHIM_DIR=$WORK/small cpu_run small curl --version
PATH=$WORK/link:$BASE_PATH SANDPIT_SHIM_DIR=$WORK/link cpu_run link curl --version
cbare=$(ms "${cpu[bare]}")
printf '\nCPU (user+sys)\n'
printf '%-36s %8s ms/run\n' "/bin/true" "$(ms "${cpu[true]}")"
printf '%-36s %8s ms/run\n' "bare curl --version" "$cbare"
for k in exec small link; do
  v=$(ms "${cpu[$k]}")
  case $k in
    exec) label="sandpit exec curl --version" ;;
    small) label="shim: symlink to sandpit-shim" ;;
    link) label="shim: symlink to sandpit" ;;
  esac
  printf '%-36s %8s ms/run   added %s ms\n' "$label" "$v" \
    "$(awk -v a="$v" -v b="$cbare" 'BEGIN { printf "%+.3f", a - b }')"
done
echo "($N runs each; CPU time has the clock tick's resolution over the whole batch)"
# Machine-readable lines for bench/report.sh.
if [ -n "${BENCH_RESULT:-}" ]; then for k in bare exec small link script; do echo "RESULT shim_$k $(ms "${total[$k]}") ms"; done; fi
