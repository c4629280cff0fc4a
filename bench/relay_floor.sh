#!/usr/bin/env bash
# The floor under #5's throughput goal: a 100 MB upload relayed through a second
# loopback connection by the simplest relay there is (bench/relay_floor.c: C, one
# blocking thread per direction, no policy, no event loop), against the same upload
# sent directly in the same round. sandpit's proxy relays every connection the same
# way, so its ratio cannot go above the best row here. Three runs of 9 alternating
# rounds; the best ratio of the three is kept for each way.
# Knobs: BENCH_MB (default 100), BENCH_ROUNDS (default 9), FLOOR_RUNS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -o "$W/relay_floor" bench/relay_floor.c -lpthread
MB=${BENCH_MB:-100}
for _ in $(seq "${FLOOR_RUNS:-3}"); do
  "$W/relay_floor" "$MB" "${BENCH_ROUNDS:-9}" | tee -a "$W/out"
  echo
done
python3 - "$W/out" "$MB" <<'PY'
import sys
best = {}
direct = None  # the direct speed of the run being read (each run prints it first)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 10:
        way, speed, ratio, cpu, ceiling = f[0], float(f[1]), float(f[4]), float(f[6]), float(f[9])
        if way == "direct":
            direct = speed
        elif way not in best or ratio > best[way][1]:
            best[way] = (speed, ratio, cpu, ceiling, direct)
labels = {"copy": "relay, read/write through 4 MiB",
          "splice": "relay, splice(2) through a 1 MiB pipe",
          "splice2": "relay, splice(2), pipe drained by a 2nd thread"}
print(f"== {sys.argv[2]} MB upload, minimal C relay vs direct (each way's best run above)")
for way, (speed, ratio, cpu, ceiling, direct) in best.items():
    print(f"{labels[way]:<48} {speed:6.0f} MB/s  {ratio:.2f}x  CPU {cpu:5.1f} ms  ceiling {ceiling:.2f}x"
          f"  (direct in that run: {direct:.0f} MB/s)")
    print(f"RESULT relay_floor_{way} {speed} MB/s")
    print(f"RESULT relay_floor_{way}_direct {direct} MB/s")
    print(f"RESULT relay_floor_{way}_ratio {ratio} x")
PY
