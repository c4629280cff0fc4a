#!/usr/bin/env bash
# What attributing each connection to its process costs (`service::peer`, used for
# `[[network.program]]` and for the pid/program of every proxy record): inside one
# `sandpit run`, python3 (a dynamic program: the interposer makes it non-dumpable,
# so the launcher finds its socket with pidfd_getfd) opens N connections one after
# the other through the proxy (HTTP CONNECT, one request, close) to a loopback
# server named code.test; the mean time per connection is printed for
#   - this build, no program rule;
#   - this build, a [[network.program]] entry naming python3 for code.test;
#   - REF (optional first argument): another build of sandpit, e.g. one without
#     attribution (main before it), with the policy without the rule;
#   - python3 straight to the server, no sandbox (the floor).
# Rounds are interleaved; medians of BENCH_ROUNDS (default 5). N: BENCH_CONNS (300).
# Usage: bench/program_rules.sh [REF_SANDPIT]   (BIN=... picks this build's binary)
set -euo pipefail
cd "$(dirname "$0")/.."
REF=${1:-}
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p sandpit
  BIN=$PWD/${CARGO_TARGET_DIR:-target}/release/sandpit
  [ -x "$BIN" ] || BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/sandpit
fi
ROUNDS=${BENCH_ROUNDS:-5}
N=${BENCH_CONNS:-300}
WORK=$(mktemp -d /var/tmp/sandpit-bench-XXXXXX)
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
cat > "$WORK/server.py" <<'PY'
import socket, sys, threading
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 0)); l.listen(512); print(l.getsockname()[1], flush=True)
def serve(c):
    try:
        c.recv(4096); c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
    finally:
        c.close()
while True:
    c, _ = l.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
coproc SRV { exec python3 "$WORK/server.py"; }
SERVER=$SRV_PID
read -r PORT <&"${SRV[0]}"
mkdir -p "$WORK/home/.sandpit" "$WORK/home/project"
cat > "$WORK/home/project/client.py" <<'PY'
import os, socket, sys, time
n, port, how = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if how == "proxy":
    u = os.environ["HTTP_PROXY"][len("http://"):]
    creds, hp = u.rsplit("@", 1)
    import base64
    auth = base64.b64encode(creds.encode()).decode()
    ph, pp = hp.rsplit(":", 1)
t = time.perf_counter()
for _ in range(n):
    if how == "proxy":
        s = socket.create_connection((ph, int(pp)))
        s.sendall(("CONNECT code.test:%d HTTP/1.1\r\nHost: code.test:%d\r\nProxy-Authorization: Basic %s\r\n\r\n" % (port, port, auth)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(4096)
            if not b: sys.exit("proxy closed: %r" % head)
            head += b
        if b" 200 " not in head.split(b"\r\n")[0]: sys.exit("refused: %r" % head)
    else:
        s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.0\r\nHost: code.test\r\n\r\n")
    while s.recv(4096):
        pass
    s.close()
print("%.4f" % ((time.perf_counter() - t) / n * 1000))
PY
base='[network]\nallow = ["code.test"]\n[network.resolve]\n"code.test" = "127.0.0.1"\n'
rule='[[network.program]]\nname = "python only"\nprograms = ["python3*"]\nhosts = ["code.test"]\n'
AS=()
if [ "$(id -u)" = 0 ]; then
  chown -R 65534:65534 "$WORK"
  AS=(setpriv --reuid 65534 --regid 65534 --clear-groups)
fi
measure() { # config text, how, command prefix…
  printf "$1" > "$WORK/home/.sandpit/config.toml"
  local how=$2; shift 2
  (cd "$WORK/home/project" && "${AS[@]}" env -i HOME="$WORK/home" PATH=/usr/local/bin:/usr/bin:/bin \
    "$@" python3 client.py "$N" "$PORT" "$how" 2>/dev/null)
}
declare -A v=()
for ((i = 0; i < ROUNDS; i++)); do
  v[bare]+=" $(measure "$base" direct)"
  v[norule]+=" $(measure "$base" proxy "$BIN" run --)"
  v[rule]+=" $(measure "$base$rule" proxy "$BIN" run --)"
  if [ -n "$REF" ]; then v[ref]+=" $(measure "$base" proxy "$REF" run --)"; fi
done
python3 - "${v[bare]}" "${v[norule]}" "${v[rule]}" "${v[ref]:-}" "$N" "$ROUNDS" <<'PY'
import sys
med = lambda s: sorted(map(float, s.split()))[len(s.split()) // 2] if s.strip() else None
bare, norule, rule, ref = (med(a) for a in sys.argv[1:5])
print("== ms per connection through the proxy, median of %s rounds of %s ==" % (sys.argv[6], sys.argv[5]))
print("python3 direct, no sandbox           %.3f" % bare)
if ref is not None:
    print("REF build, no rule (no attribution)  %.3f" % ref)
print("this build, no rule                  %.3f%s" % (norule, "  (%.2fx REF, +%.3f ms)" % (norule / ref, norule - ref) if ref else ""))
print("this build, [[network.program]] rule %.3f  (%.2fx no rule)" % (rule, rule / norule))
PY
