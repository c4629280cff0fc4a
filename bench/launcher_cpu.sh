#!/usr/bin/env bash
# limits.launcher_cpu (docs/run.md "The launcher's own CPU"): what a denial flood
# costs the launcher, and what the limit makes of it. One Python process opens
# ~/.ssh/id_rsa N times (each refused); the launcher's CPU time (utime + stime of
# its /proc/PID/stat, sampled every 50 ms until it exits) over the run's wall time,
# with every layer (the interposer reports each denial to the audit socket) and
# with --kernel-only (the notifier reads each stopped open), for launcher_cpu = 0
# (no limit), the default and 10. Prints the share of one core, the wall time and
# the flood's time against the bare command's.
# Usage: bench/launcher_cpu.sh [path/to/sandpit] [N]
# As root the run drops to uid 65534 (like the tests) in a throwaway HOME.
# BENCH_RESULT=1 adds `RESULT name value unit` lines (bench/report.sh).
set -euo pipefail
BIN=${1:-target/release/sandpit}
N=${2:-100000}
BIN=$(realpath "$BIN")
H=$(mktemp -d /var/tmp/sandpit-bench-XXXXXX)
trap 'rm -rf "$H"' EXIT
mkdir -p "$H/home/project" "$H/home/.sandpit" "$H/home/.ssh"
echo secret >"$H/home/.ssh/id_rsa"
chmod 600 "$H/home/.ssh/id_rsa"
as_user=()
if [ "$(id -u)" = 0 ]; then
	as_user=(setpriv --reuid 65534 --regid 65534 --clear-groups)
	chown -R 65534:65534 "$H"
fi
cat >"$H/home/project/deny.py" <<'EOF'
import os, sys
p = os.path.expanduser("~/.ssh/id_rsa")
for _ in range(int(sys.argv[1])):
    try:
        open(p + ".nope" if len(sys.argv) > 2 else p).close()
    except OSError:
        pass
EOF
cd "$H/home/project"
HZ=$(getconf CLK_TCK)
now() { date +%s%N; }
# The bare flood (opens of a missing file: refused alike, by ENOENT).
t=$(now)
"${as_user[@]}" env -i HOME="$H/home" PATH=/usr/bin:/bin python3 deny.py "$N" bare
BARE=$(( ($(now) - t) / 1000000 ))
echo "bare flood of $N opens: $BARE ms"
result() { if [ -n "${BENCH_RESULT:-}" ]; then echo "RESULT $1 $2 $3"; fi; }
for mode in interposer kernel-only; do
	flags=()
	[ "$mode" = kernel-only ] && flags=(--kernel-only)
	for share in 0 default 10; do
		if [ "$share" = default ]; then
			: >"$H/home/.sandpit/config.toml"
		else
			printf '[limits]\nlauncher_cpu = %s\n' "$share" >"$H/home/.sandpit/config.toml"
		fi
		[ "$(id -u)" = 0 ] && chown 65534:65534 "$H/home/.sandpit/config.toml"
		t=$(now)
		"${as_user[@]}" env -i HOME="$H/home" PATH=/usr/bin:/bin "$BIN" run "${flags[@]}" -- python3 deny.py "$N" 2>"$H/err" &
		pid=$!
		ticks=0
		while stat=$(cat "/proc/$pid/stat" 2>/dev/null); do
			# utime and stime: fields 14 and 15, counted after the command name.
			rest=${stat##*) }
			set -- $rest
			[ "$1" = Z ] && break
			ticks=$(( ${12} + ${13} ))
			sleep 0.05
		done
		wait "$pid" || true
		wall=$(( ($(now) - t) / 1000000 ))
		cpu=$(( ticks * 1000 / HZ ))
		pct=$(python3 -c "print(f'{100*$cpu/$wall:.0f}')")
		line=$(grep -c 'limits.launcher_cpu' "$H/err" || true)
		printf '%-12s launcher_cpu=%-8s launcher %6d ms CPU in %6d ms (%3s%% of a core), %5.1fx the bare flood%s\n' \
			"$mode" "$share" "$cpu" "$wall" "$pct" "$(python3 -c "print($wall/$BARE)")" \
			"$([ "$line" -gt 0 ] && echo ', limit reached' || true)"
		result "launcher_cpu_${mode//-/_}_${share}_percent" "$pct" "%"
	done
done
