#!/usr/bin/env bash
# Figures behind tests/exhaustion.rs: how fast the proxy answers a new allowed
# connection from inside a run (median and worst of N fetches through HTTP_PROXY)
# while nothing else runs, while 5,000 slow-loris clients hold half-open CONNECT
# heads, and while two processes flood another allowed host with connection attempts
# (past limits.connections_per_second those are refused); and how fast a
# denial flood goes with every denial logged.
# Usage: bench/exhaustion.sh [path/to/sandpit] [N]
# As root the run drops to uid 65534 (like the tests) in a throwaway HOME.
# BENCH_RESULT=1 adds `RESULT name value unit` lines (bench/report.sh).
set -euo pipefail
BIN=${1:-target/release/sandpit}
N=${2:-20}
BIN=$(realpath "$BIN")
H=$(mktemp -d /var/tmp/sandpit-bench-XXXXXX)
mkdir -p "$H/home/project" "$H/home/.sandpit" "$H/home/.ssh"
echo secret >"$H/home/.ssh/id_rsa"
as_user=()
if [ "$(id -u)" = 0 ]; then
	as_user=(setpriv --reuid 65534 --regid 65534 --clear-groups)
fi
# The allowed host: a small HTTP server on loopback, named through sandpit's resolver.
python3 -c '
import http.server, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
socketserver.ThreadingTCPServer.allow_reuse_address = True
s = socketserver.ThreadingTCPServer(("127.0.0.2", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()' >"$H/port" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$H"' EXIT
while [ ! -s "$H/port" ]; do sleep 0.05; done
PORT=$(cat "$H/port")
cat >"$H/home/.sandpit/config.toml" <<EOF
[network]
allow = ["bench.test:$PORT", "flood.test:$PORT"]
[network.resolve]
"bench.test" = "127.0.0.2"
"flood.test" = "127.0.0.2"
EOF
cat >"$H/home/project/bench.py" <<'EOF'
import os, socket, subprocess, sys, time, urllib.request
port, n = int(sys.argv[1]), int(sys.argv[2])
def fetches(label):
    t = []
    for _ in range(n):
        s = time.monotonic()
        urllib.request.urlopen("http://bench.test:%d/" % port, timeout=60).read()
        t.append((time.monotonic() - s) * 1000)
    t.sort()
    print("%-34s median %7.2f ms  worst %7.2f ms" % (label, t[len(t) // 2], t[-1]))
    print("RESULT exhaustion_%s_median %.2f ms" % (label.split()[0], t[len(t) // 2]))
fetches("idle")
loris = subprocess.Popen([sys.executable, "loris.py", "5000"])
while not os.path.exists("loris.ready"):
    time.sleep(0.1)
fetches("slowloris (5000 half-open heads)")
loris.kill()
flood = [subprocess.Popen([sys.executable, "flood.py", str(port)]) for _ in range(2)]
time.sleep(1)
fetches("flood (2 processes connecting)")
for f in flood:
    f.kill()
s, d = time.monotonic(), 0
for _ in range(50000):
    try:
        open(os.path.expanduser("~/.ssh/id_rsa"))
    except OSError:
        d += 1
el = time.monotonic() - s
print("%-34s %7.0f denials/s (each logged)" % ("denial flood", d / el))
print("RESULT exhaustion_denials_per_second %.0f 1/s" % (d / el))
EOF
cat >"$H/home/project/loris.py" <<'EOF'
import os, socket, sys, resource
from urllib.parse import urlsplit
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
u = urlsplit(os.environ["HTTP_PROXY"])
held = []
for _ in range(int(sys.argv[1])):
    try:
        s = socket.create_connection((u.hostname, u.port), timeout=5); s.sendall(b"CONNECT bench.test:1 HTTP/1.1\r\n"); held.append(s)
    except OSError:
        pass
open("loris.ready", "w").write(str(len(held)))
import time
while True:
    time.sleep(60)
EOF
cat >"$H/home/project/flood.py" <<'EOF'
import base64, os, socket, sys
from urllib.parse import urlsplit
u = urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode()
head = ("CONNECT flood.test:%s HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n" % (sys.argv[1], auth)).encode()
while True:
    try:
        s = socket.create_connection((u.hostname, u.port), timeout=2); s.sendall(head); s.close()
    except OSError:
        pass
EOF
[ "$(id -u)" = 0 ] && chown -R 65534:65534 "$H"
cd "$H/home/project"
out=$("${as_user[@]}" env -i HOME="$H/home" PATH=/usr/bin:/bin "$BIN" run -- python3 bench.py "$PORT" "$N" 2>"$H/err")|| { cat "$H/err"; exit 1; }
echo "$out" | grep -v '^RESULT' || true
if [ -n "${BENCH_RESULT:-}" ]; then
	echo "$out" | grep '^RESULT' || true
fi
