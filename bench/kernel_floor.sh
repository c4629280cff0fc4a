#!/usr/bin/env bash
# The floor under #4's open+close goal: what seccomp and Landlock cost by themselves
# (bench/kernel_floor.c: a one-rule filter, a domain handling one right), with
# nothing of sandpit's, against the bare loop in the same run. Best of 7 alternating
# rounds, depth-4 path. sandpit's kernel layer must install both, so its open+close
# ratio cannot go below the `seccomp + Landlock` row here.
set -euo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -o "$W/kernel_floor" bench/kernel_floor.c
mkdir -p "$W/d1/d2/d3"
echo x > "$W/d1/d2/d3/f"
N=200000
declare -A best
for _ in 1 2 3 4 5 6 7; do
  for m in n s l t sl; do
    v=$("$W/kernel_floor" "$W/d1/d2/d3/f" $N $m | cut -d' ' -f2)
    best[$m]=$(python3 -c "import sys; a=sys.argv[1]; print(sys.argv[2] if not a else min(float(a), float(sys.argv[2])))" "${best[$m]:-}" "$v")
  done
done
echo "== open+close per call (CPU ns), kernel mechanisms alone (best of 7 alternating rounds)"
row() { # label mode key
  printf '%-58s %7.1f ns  %.2fx\n' "$1" "${best[$2]}" "$(python3 -c "print(${best[$2]}/${best[n]})")"
  echo "RESULT floor_$3 ${best[$2]} ns"
}
row "bare" n bare
row "seccomp, one rule (verdict cached by the kernel)" s seccomp
row "Landlock, one handled right no open asks for" l landlock
row "Landlock handling TRUNCATE (every open walks the path)" t truncate
row "seccomp + Landlock, both minimal" sl both
