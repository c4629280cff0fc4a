#!/usr/bin/env bash
# One table for every performance goal named in the issues: each benchmark script runs
# with BENCH_RESULT=1 (so it adds `RESULT name value unit` lines to what it prints),
# and the table shows goal, measured, the bare command measured in the same run, the
# ratio, and bubblewrap where it is installed. Not part of the test suite.
#   #3 bench/open_close.sh   #4 bench/run_startup.sh, bench/kernel_floor.sh
#   #5 bench/proxy.sh, bench/relay_floor.sh
#   #7 bench/shim_exec.sh    #8 bench/adversary.sh    the audit session: bench/run_audit.sh
#   #29 bench/credentials.sh (a terminated credential host beside a pass-through one)
# Usage: bench/report.sh            full runs (about 8 minutes on 2 cores)
#        REPORT_QUICK=1 bench/report.sh   fewer rounds (a smoke test of the report)
# Each script's full output is kept in $REPORT_DIR (default: a fresh /var/tmp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIR=${REPORT_DIR:-$(mktemp -d /var/tmp/sandpit-report-XXXXXX)}
mkdir -p "$DIR"
: > "$DIR/results"
export BENCH_RESULT=1
if [ -n "${REPORT_QUICK:-}" ]; then
  STARTUP_RUNS=20 SHIM_N=30 AUDIT_N=10 BWRAP_RUNS=20
  export BENCH_ROUNDS=2 BENCH_LATENCY_N=100 BENCH_CONCURRENT=2000 FILES=30000 ITERS=20000
else
  STARTUP_RUNS=200 SHIM_N=300 AUDIT_N=50 BWRAP_RUNS=200
fi

step() { # name, command…: run it, keep its output, collect its RESULT lines
  local name=$1; shift
  echo "== $name: $*" >&2
  if ! "$@" > "$DIR/$name.log" 2>&1; then
    echo "   $name failed; its output: $DIR/$name.log" >&2
  fi
  grep '^RESULT ' "$DIR/$name.log" >> "$DIR/results" || true
}

cargo build --release -q -p sandpit
step open_close bench/open_close.sh
step run_startup bench/run_startup.sh "$STARTUP_RUNS"
step kernel_floor bench/kernel_floor.sh
step proxy bench/proxy.sh
step relay_floor bench/relay_floor.sh
step shim_exec bench/shim_exec.sh "$SHIM_N"
step adversary bench/adversary.sh
step run_audit bench/run_audit.sh "$ROOT/target/release/sandpit" "$AUDIT_N"
step credentials bench/credentials.sh

# bubblewrap, where installed: the same two measurements as #4 (start-up of /bin/true,
# open+close at workspace depth 4), interleaved with the bare command.
if command -v bwrap > /dev/null; then
  echo "== bwrap" >&2
  W=$(mktemp -d /var/tmp/sandpit-bwrap-XXXXXX)
  mkdir -p "$W/d1/d2/d3" && echo x > "$W/d1/d2/d3/f"
  cc -O2 -o "$W/openclose" bench/openclose.c
  cc -O2 -o "$W/spawn_pair" bench/spawn_pair.c
  AS=()
  RUN_UID=-1
  if [ "$(id -u)" = 0 ]; then
    chown -R 65534:65534 "$W"
    AS=(setpriv --reuid 65534 --regid 65534 --clear-groups)
    RUN_UID=65534
  fi
  BW=("$(command -v bwrap)" --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind "$W" "$W"
    --unshare-all --die-with-parent --new-session --)
  # Started the way bench/run_startup.sh starts `sandpit run` (bench/spawn_pair.c).
  if read -r bare boxed _ _ < <("$W/spawn_pair" "$BWRAP_RUNS" "$RUN_UID" "$W" "$W" /bin/true --vs-- "${BW[@]}" /bin/true); then
    echo "RESULT bwrap_true_bare $bare ms" >> "$DIR/results"
    echo "RESULT bwrap_true $boxed ms" >> "$DIR/results"
  else
    echo "   bwrap start-up failed" >&2
  fi
  python3 - "$W" "${AS[@]}" -- "${BW[@]}" <<'PY' >> "$DIR/results" || echo "   bwrap failed" >&2
import subprocess, sys
w = sys.argv[1]
rest = sys.argv[2:]
i = rest.index("--")
as_user, bw = rest[:i], rest[i + 1:]
oc = [f"{w}/openclose", f"{w}/d1/d2/d3/f", "100000", "r"]
out = lambda cmd: float(subprocess.run(as_user + cmd, capture_output=True, text=True, check=True).stdout)
b = min(out(oc) for _ in range(7))
s = min(out(bw + oc) for _ in range(7))
print(f"RESULT bwrap_oc_d4_bare {b:.1f} ns")
print(f"RESULT bwrap_oc_d4 {s:.1f} ns")
PY
  rm -rf "$W"
fi

echo >&2
python3 - "$DIR/results" <<'PY'
import sys
r = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) >= 3:
        r[parts[1]] = float(parts[2])
rows = []
def num(v, unit):
    return "—" if v is None else f"{v:.2f} {unit}" if v < 10 else f"{v:.0f} {unit}" if v >= 1000 else f"{v:.1f} {unit}"
def row(issue, what, goal, unit, meas, bare, kind, limit, bwrap=None):
    """kind: 'ratio_le' / 'ratio_ge' (goal on meas/bare), 'add_le' (goal on meas-bare,
    in `unit`), 'abs_le' (goal on meas)."""
    m, b = r.get(meas), r.get(bare) if bare else None
    ratio = f"{m / b:.2f}×" if m is not None and b else "—"
    if m is not None and b is not None and kind == "add_le":
        ratio += f" ({m - b:+.2f} {unit})"
    ok = "?"
    if m is not None:
        if kind == "ratio_le" and b: ok = m / b <= limit
        elif kind == "ratio_ge" and b: ok = m / b >= limit
        elif kind == "add_le" and b is not None: ok = m - b <= limit
        elif kind == "abs_le": ok = m <= limit
        ok = {True: "yes", False: "no"}.get(ok, "?")
    if goal == "—":
        ok = "—"
    bw = "—"
    if bwrap and bwrap[0] in r:
        bv, bb = r[bwrap[0]], r.get(bwrap[1])
        bw = num(bv, unit) + (f" ({bv / bb:.2f}×)" if bb else "")
    rows.append((issue, what, goal, num(m, unit), num(b, unit), ratio, bw, ok))
for d in (2, 4, 10):
    row("#3", f"open+close, interposer, depth {d}", "≤ 1.10×", "ns",
        f"oc_interposer_d{d}_hooked", f"oc_interposer_d{d}_bare", "ratio_le", 1.10)
row("#4", "`sandpit run -- /bin/true`, median (glibc build: `cargo build`)", "≤ 8 ms", "ms",
    "run_true_sandpit", "run_true_bare", "abs_le", 8.0, ("bwrap_true", "bwrap_true_bare"))
row("#4", "`sandpit run -- /bin/true`, median (static build: .ci/build-static.sh)", "≤ 8 ms",
    "ms", "run_true_static", "run_true_static_bare", "abs_le", 8.0)
for d in (1, 4, 8, 16):
    for m, mode in (("r", "O_RDONLY"), ("w", "O_WRONLY")):
        row("#4", f"open+close, every layer, depth {d}, {mode}", "≤ 1.10×", "ns",
            f"run_oc_d{d}_{m}_sandpit", f"run_oc_d{d}_{m}_bare", "ratio_le", 1.10,
            ("bwrap_oc_d4", "bwrap_oc_d4_bare") if (d, m) == (4, "r") else None)
row("#4", "open+close, every layer, /usr (read-only view)", "≤ 1.10×", "ns",
    "run_oc_host_r_sandpit", "run_oc_host_r_bare", "ratio_le", 1.10)
for m, mode in (("r", "O_RDONLY"), ("w", "O_WRONLY")):
    row("#4", f"open+close, every layer, relative path, {mode}", "≤ 1.10×", "ns",
        f"run_oc_rel_{m}_sandpit", f"run_oc_rel_{m}_bare", "ratio_le", 1.10)
for k, label in (("seccomp", "seccomp, one rule"), ("landlock", "Landlock, one handled right"),
                 ("both", "seccomp + Landlock, both minimal")):
    row("#4", f"open+close, kernel mechanism alone, no sandpit: {label}", "—", "ns",
        f"floor_{k}", "floor_bare", "ratio_le", float("inf"))
row("#4", "start-up, big workspace (bare = empty workspace)", "≤ 1.05×", "ms",
    "run_big_files", "run_big_empty", "ratio_le", 1.05)
row("#4", "start-up, 200 MB program (bare = `sandpit run -- /bin/true`)", "—", "ms",
    "run_big_program", "run_big_program_small", "ratio_le", float("inf"))
row("#4", "process start inside a run, every layer (bare = `--kernel-only`)", "—", "us",
    "proc_every_layer", "proc_kernel_only", "add_le", float("inf"))
proxy_ways = (("connect", "CONNECT"), ("socks5", "SOCKS5"), ("transparent", "transparent"))
proxy_tp_rows = proxy_ways + (("connect_copies_only", "CONNECT, user-space copies only"),)
for k, label in proxy_tp_rows:
    row("#5", f"100 MB through the proxy, {label}", "≥ 0.85×", "MB/s",
        f"proxy_tp_{k}", "proxy_tp_direct", "ratio_ge", 0.85)
for k, label in proxy_tp_rows:
    c = r.get(f"proxy_tp_{k}_ceiling")
    rows.append(("#5", f"best ratio the CPU allows on this machine, {label} (direct's wall "
                 "time over the row's CPU time / cores)", "—",
                 "—" if c is None else f"{c:.2f}×", "—", "—", "—", "—"))
for k, label in (("splice", "splice(2) through a pipe"), ("copy", "read/write through 4 MiB")):
    row("#5", f"100 MB through a minimal C relay, no sandpit: {label}", "—", "MB/s",
        f"relay_floor_{k}", f"relay_floor_{k}_direct", "ratio_ge", 0)
row("#5", "`sandpit run -- curl` 100 MB, HTTP_PROXY", "≥ 0.85×", "MB/s",
    "run_http_proxy", "run_bare", "ratio_ge", 0.85)
row("#5", "`sandpit run -- curl` 100 MB, transparent", "≥ 0.85×", "MB/s",
    "run_transparent", "run_bare", "ratio_ge", 0.85)
row("#5", "socat TCP relay, curl 100 MB (reference, no sandbox)", "—", "MB/s",
    "run_socat", "run_bare", "ratio_ge", 0)
for k, label in proxy_ways:
    row("#5", f"new connection + 1-byte echo, {label}", "≤ +0.3 ms", "us",
        f"proxy_lat_{k}", "proxy_lat_direct", "add_le", 300)
errors = r.get("proxy_load_errors")
rows.append(("#5", "2,000 concurrent tunnels", "no errors, bounded",
             "—" if errors is None else
             f"{r.get('proxy_load_ok', 0):.0f} ok, {errors:.0f} errors, "
             f"{r.get('proxy_load_rss', 0):.0f} MB RSS, {r.get('proxy_load_fds', 0):.0f} fds",
             "—", "—", "—", "—" if errors is None else "yes" if errors == 0 else "no"))
for k, label in (("passthru", "pass-through TLS host"), ("inject", "terminated credential host")):
    row("#29", f"`sandpit run -- curl` HTTPS 100 MB, {label}", "—", "MB/s",
        f"cred_tp_{k}", "cred_tp_bare", "ratio_ge", 0)
for k, label in (("passthru", "pass-through TLS host"), ("inject", "terminated credential host")):
    row("#29", f"HTTPS request on a new connection, {label}", "—", "ms",
        f"cred_lat_{k}", "cred_lat_bare", "add_le", float("inf"))
for k, label in (("small", "shim (`sandpit run --shims`: link to sandpit-shim)"),
                 ("exec", "`sandpit exec curl --version`"), ("link", "link to the launcher"),
                 ("script", "sh script shim")):
    row("#7", label, "≤ +1 ms", "ms", f"shim_{k}", "shim_bare", "add_le", 1.0)
row("#8", "cached verdict through the control socket", "≤ 1 ms", "us",
    "adversary_socket", None, "abs_le", 1000)
row("#8", "`sandpit exec true` with a cached verdict (bare = no adversary)", "≤ +1 ms",
    "us", "adversary_exec_reviewed", "adversary_exec_bare", "add_le", 1000)
row("—", "`sandpit run -- true`, all layers + audit (bare = `true`)", "—", "us",
    "audit_all", "audit_bare", "ratio_le", float("inf"))
row("—", "`sandpit run --kernel-only -- true` (bare = `true`)", "—", "us",
    "audit_kernel_only", "audit_bare", "ratio_le", float("inf"))
head = ("issue", "what", "goal", "measured", "bare, same run", "ratio", "bwrap, same run", "met")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for x in rows:
    print("| " + " | ".join(x) + " |")
PY
echo
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; logs in $DIR"
