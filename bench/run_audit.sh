#!/usr/bin/env bash
# Cost of the audit session in `sandpit run` (log file, audit socket and its reader,
# start/setup/exit records), and of loading the interposer with it: N runs of
# `true` each way, printed per run and as a ratio to the bare command measured in
# the same run. Usage: bench/run_audit.sh [path/to/sandpit] [N]
# As root the runs drop to uid 65534 (like the tests) in a throwaway HOME.
# BENCH_RESULT=1 adds `RESULT name value unit` lines (bench/report.sh).
set -euo pipefail
BIN=${1:-target/release/sandpit}
N=${2:-50}
BIN=$(realpath "$BIN")
H=$(mktemp -d /tmp/sandpit-bench-XXXXXX)
mkdir -p "$H/home/project"
as_user=()
if [ "$(id -u)" = 0 ]; then
	chown -R 65534:65534 "$H"
	as_user=(setpriv --reuid 65534 --regid 65534 --clear-groups)
fi
cd "$H/home/project"
run() { "${as_user[@]}" env -i HOME="$H/home" PATH=/usr/bin:/bin "$@" >/dev/null 2>&1; }
ms() { # label cmd…
	local s e
	s=$(date +%s%N)
	for _ in $(seq "$N"); do run "${@:2}"; done
	e=$(date +%s%N)
	echo $(( (e - s) / N / 1000 ))
}
run "$BIN" run -- true # extract the interposer once
bare=$(ms bare true)
plain=$(ms run "$BIN" run --kernel-only -- true)
inter=$(ms interposer "$BIN" run -- true)
printf '%-36s %8s us/run\n' "bare true" "$bare"
printf '%-36s %8s us/run  (%.1fx bare)\n' "sandpit run --kernel-only -- true" "$plain" "$(echo "$plain / $bare" | bc -l)"
printf '%-36s %8s us/run  (%.1fx bare, %.2fx run)\n' "sandpit run -- true (all layers)" "$inter" \
	"$(echo "$inter / $bare" | bc -l)" "$(echo "$inter / $plain" | bc -l)"
if [ -n "${BENCH_RESULT:-}" ]; then
	printf 'RESULT audit_bare %s us\nRESULT audit_kernel_only %s us\nRESULT audit_all %s us\n' "$bare" "$plain" "$inter"
fi
echo "logs written: $(ls "$H/home/.sandpit/logs" | wc -l)"
rm -rf "$H"
