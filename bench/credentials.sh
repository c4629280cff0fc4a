#!/usr/bin/env bash
# Credential injection (docs/credentials.md): a host sandpit terminates TLS for
# against a TLS host it passes through, inside `sandpit run`, same server, same run
# (the last line: the terminated path as a ratio of the pass-through one):
#   - throughput: curl downloads BENCH_MB over HTTPS (curl's own speed, so sandpit's
#     start-up is not counted), median of BENCH_ROUNDS, interleaved;
#   - latency: BENCH_LATENCY_N sequential HTTPS requests on new connections (each a
#     full handshake; on the terminated host two of them) from one curl, median
#     time_total per request. Every client loads a CA bundle of the same size.
# The server is `openssl s_server -WWW` on 127.0.0.2 with a test CA; inject.test and
# passthru.test both name it through [network.resolve]; inject.test is a
# credential's host. Bare = the same curl outside the sandbox, to 127.0.0.2.
# BENCH_RESULT=1 adds `RESULT name value unit` lines (bench/report.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${BENCH_MB:-100}
ROUNDS=${BENCH_ROUNDS:-5}
N=${BENCH_LATENCY_N:-50}
cargo build --release -q -p sandpit
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/sandpit
WORK=$(mktemp -d /var/tmp/sandpit-bench-cred-XXXXXX)
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/home/.sandpit" "$WORK/home/project" "$WORK/www"
cd "$WORK"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=bench-ca -keyout ca.key -out home/ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=bench \
  -keyout srv.key -out srv.csr 2>/dev/null
printf 'subjectAltName=DNS:inject.test,DNS:passthru.test,IP:127.0.0.2\n' > ext
openssl x509 -req -in srv.csr -CA home/ca.pem -CAkey ca.key -CAcreateserial -days 2 \
  -extfile ext -out srv.pem 2>/dev/null
# Every client loads a bundle of the same size (the system's roots and one CA): with
# OpenSSL, loading ~150 roots costs each new connection tens of milliseconds.
SYSTEM=""
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
  [ -f "$f" ] && SYSTEM=$f && break
done
cat $SYSTEM home/ca.pem > home/bundle.pem
# BENCH_CONTENT=random: random bytes (the mask's matcher finds candidates
# everywhere) instead of zeros.
if [ "${BENCH_CONTENT:-zero}" = random ]; then
  head -c $((MB * 1024 * 1024)) /dev/urandom > www/big
else
  head -c $((MB * 1024 * 1024)) /dev/zero > www/big
fi
echo small > www/small
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0)); print(s.getsockname()[1])')
(cd www && exec openssl s_server -quiet -WWW -accept "127.0.0.2:$PORT" -cert ../srv.pem -key ../srv.key) &
SERVER=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.2/$PORT") 2>/dev/null && break; sleep 0.1; done
cat > home/.sandpit/config.toml <<EOF
[network]
allow = ["inject.test:$PORT", "passthru.test:$PORT"]
[network.resolve]
"inject.test" = "127.0.0.2"
"passthru.test" = "127.0.0.2"
[network.tls]
extra_roots = ["~/ca.pem"]
[credentials.bench]
env = "BENCH_TOKEN"
source = "env:BENCH_REAL_TOKEN"
hosts = ["inject.test"]
EOF
AS=()
if [ "$(id -u)" = 0 ]; then
  chown -R 65534:65534 "$WORK"
  AS=(setpriv --reuid 65534 --regid 65534 --clear-groups)
fi
inside() { # command… run as the test user, in the project, with the bench's HOME
  (cd "$WORK/home/project" && "${AS[@]}" env -i HOME="$WORK/home" PATH=/usr/local/bin:/usr/bin:/bin \
    BENCH_REAL_TOKEN=real-value-0123456789 "$@")
}
# The terminated host is trusted through the run's bundle (CURL_CA_BUNDLE inside: the
# system's roots and the run's CA); the others through the system's roots and the test CA.
speed() { # url, cacert option…, then the prefix
  local url=$1 ca=$2; shift 2
  inside "$@" sh -c 'curl -s '"$ca"' -o /dev/null -H "Authorization: Bearer $BENCH_TOKEN" \
    -w "%{speed_download}\n" "$0"' "$url" 2>/dev/null || echo 0
}
lat() { # host, cacert option…, then the prefix: median seconds per new-connection request
  local host=$1 ca=$2; shift 2
  local urls=()
  for _ in $(seq "$N"); do urls+=("https://$host:$PORT/small"); done
  inside "$@" sh -c 'curl -s '"$ca"' -H "Authorization: Bearer $BENCH_TOKEN" -H "Connection: close" \
    -o /dev/null -w "%{time_total}\n" "$@"' sh "${urls[@]}" \
    | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
CA="--cacert $WORK/home/bundle.pem"
declare -A v=()
for ((i = 0; i < ROUNDS; i++)); do
  v[bare]+=" $(speed "https://127.0.0.2:$PORT/big" "$CA")"
  v[passthru]+=" $(speed "https://passthru.test:$PORT/big" "$CA" "$BIN" run --)"
  v[inject]+=" $(speed "https://inject.test:$PORT/big" "" "$BIN" run --)"
done
lb=$(lat 127.0.0.2 "$CA")
lp=$(lat passthru.test "$CA" "$BIN" run --)
li=$(lat inject.test "" "$BIN" run --)
python3 - "${v[bare]}" "${v[passthru]}" "${v[inject]}" "$lb" "$lp" "$li" "$MB" "$N" <<'PY'
import os, sys
med = lambda s: sorted(map(float, s.split()))[len(s.split()) // 2]
bare, passthru, inject = (med(s) / 2**20 for s in sys.argv[1:4])
lb, lp, li = (float(x) * 1000 for x in sys.argv[4:7])
mb, n = sys.argv[7], sys.argv[8]
print(f"== HTTPS download {mb} MB (curl's speed, median) and {n} new-connection requests (median) ==")
for label, tp, l in (("bare curl, direct", bare, lb),
                     ("sandpit run, pass-through TLS host", passthru, lp),
                     ("sandpit run, terminated (credential) host", inject, li)):
    print(f"{label:>44}: {tp:8.0f} MB/s ({tp / bare:.2f}x)   {l:6.2f} ms/request ({l - lb:+.2f} ms)")
# The terminated path against the pass-through one: decrypting, scanning (the
# mask's patterns: the value, its hex, base64 and percent forms, streamed) and
# encrypting again.
print(f"{'terminated / pass-through':>44}: {inject / passthru:8.2f}x throughput, {li - lp:+.2f} ms/request")
if os.environ.get("BENCH_RESULT"):
    for k, tp, l in (("bare", bare, lb), ("passthru", passthru, lp), ("inject", inject, li)):
        print(f"RESULT cred_tp_{k} {tp:.1f} MB/s")
        print(f"RESULT cred_lat_{k} {l:.3f} ms")
    print(f"RESULT cred_tp_inject_vs_passthru {inject / passthru:.3f} x")
PY
