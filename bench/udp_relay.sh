#!/usr/bin/env bash
# UDP through sandpit's relay (network.mode = "unrestricted", docs/kernel.md): round
# trips per second of a 64-byte datagram between a static client and an echo server,
# inside `sandpit run --kernel-only` against the same client run bare, alternating,
# in a network namespace of the script's own (the server at 1.2.3.4 on its loopback;
# nothing leaves the machine). Prints the medians and their ratio.
# Needs root (the namespace; the runs drop to uid 65534). Knobs: SANDPIT (default
# target/release/sandpit), BENCH_N (round trips per run, 20000), BENCH_ROUNDS (7).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "udp_relay.sh: run as root (it makes a network namespace)" >&2; exit 1; }
SANDPIT=$(realpath "${SANDPIT:-target/release/sandpit}")
N=${BENCH_N:-20000}
NS=sandpit-bench-udp-$$
W=$(mktemp -d /tmp/sandpit-bench-udp.XXXXXX)
ECHO=
cleanup() {
  [ -n "$ECHO" ] && kill "$ECHO" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" addr add 1.2.3.4/32 dev lo
mkdir -p "$W/home/project" "$W/home/.sandpit"
cc -O2 -static -o "$W/home/project/udp_rtt" bench/udp_rtt.c
printf '[network]\nmode = "unrestricted"\n' > "$W/home/.sandpit/config.toml"
chown -R 65534:65534 "$W"
ip netns exec "$NS" "$W/home/project/udp_rtt" echo 1.2.3.4 5353 &
ECHO=$!
# As the unprivileged user, with /dev/net/tun open to it (as distributions have it).
as_user() {
  ip netns exec "$NS" sh -c 'mount -t tmpfs -o mode=0755 bench /dev/net &&
    mknod -m 0666 /dev/net/tun c 10 200 && cd "$0" && exec "$@"' "$W/home/project" \
    setpriv --reuid=65534 --regid=65534 --clear-groups -- \
    env -i HOME="$W/home" PATH=/usr/bin:/bin "$@"
}
for _ in $(seq "${BENCH_ROUNDS:-7}"); do
  echo "bare $(as_user ./udp_rtt client 1.2.3.4 5353 "$N")"
  echo "relay $(as_user "$SANDPIT" run --kernel-only -- ./udp_rtt client 1.2.3.4 5353 "$N" 2>/dev/null)"
done | tee "$W/out"
python3 - "$W/out" "$N" <<'PY'
import statistics, sys
rtt = {"bare": [], "relay": []}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3 and f[1] == "RTT":
        rtt[f[0]].append(float(f[2]))
bare, relay = statistics.median(rtt["bare"]), statistics.median(rtt["relay"])
print(f"== {sys.argv[2]} round trips of 64 bytes, medians of {len(rtt['bare'])} alternating rounds")
print(f"bare              {bare:9.0f} round trips/s")
print(f"through the relay {relay:9.0f} round trips/s  ({relay / bare:.2f}x bare)")
print(f"RESULT udp_relay_rtt {relay} per s")
print(f"RESULT udp_relay_rtt_bare {bare} per s")
print(f"RESULT udp_relay_rtt_ratio {relay / bare} x")
PY
