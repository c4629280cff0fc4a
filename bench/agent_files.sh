#!/usr/bin/env bash
# What hiding the agent's login costs (`files.agent_read`): each command the agent
# spawns takes a Landlock layer in the interposer's constructor, after listing the
# directories on the way to the hidden files. Inside one `sandpit run`, the agent
# (sh) starts N programs one after the other: /bin/true (dynamic: the layer taken
# in its constructor) and `sh -c true` (a shell and its child: the child inherits
# the layer and takes none). Mean microseconds per start, for
#   - --profile codex (files.agent_read: ~/.codex/auth.json);
#   - the same profile with the entry as a plain allow_read (no layer);
#   - sh with no sandbox (the floor).
# The home holds HOME_ENTRIES files (default 200): the layer lists the home.
# Rounds are interleaved; medians of BENCH_ROUNDS (default 5). N: BENCH_STARTS (300).
# Usage: bench/agent_files.sh   (BIN=... picks the sandpit binary)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p sandpit
  BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/sandpit
fi
ROUNDS=${BENCH_ROUNDS:-5}
N=${BENCH_STARTS:-300}
ENTRIES=${HOME_ENTRIES:-200}
WORK=$(mktemp -d /var/tmp/sandpit-bench-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
H=$WORK/home
mkdir -p "$H/.sandpit/profiles" "$H/project" "$H/.codex"
echo '{"OPENAI_API_KEY": "sk-bench"}' > "$H/.codex/auth.json"
for ((i = 0; i < ENTRIES; i++)); do : > "$H/.file$i"; done
# The codex profile with its login as a plain carve-out: every process reads it.
sed 's/^agent_read = /allow_read = /' profiles/codex.toml > "$H/.sandpit/profiles/plain.toml"
cat > "$H/project/starts.sh" <<'SH'
n=$1; shift
t0=$(date +%s%N)
i=0
while [ $i -lt $n ]; do "$@"; i=$((i + 1)); done
t1=$(date +%s%N)
echo $(( (t1 - t0) / n / 1000 ))
SH
AS=()
if [ "$(id -u)" = 0 ]; then
  chown -R 65534:65534 "$WORK"
  AS=(setpriv --reuid 65534 --regid 65534 --clear-groups)
fi
measure() { # what to start, then the command prefix…
  local what=$1; shift
  # $what is split on purpose: a program and its arguments.
  # shellcheck disable=SC2086
  (cd "$H/project" && "${AS[@]}" env -i HOME="$H" PATH=/usr/local/bin:/usr/bin:/bin \
    "$@" sh starts.sh "$N" $what 2>/dev/null)
}
declare -A v=()
for ((i = 0; i < ROUNDS; i++)); do
  for what in "/bin/true" "sh -c true"; do
    k=${what// /_}
    v[bare_$k]+=" $(measure "$what")"
    v[plain_$k]+=" $(measure "$what" "$BIN" run --profile plain --)"
    v[hidden_$k]+=" $(measure "$what" "$BIN" run --profile codex --)"
  done
done
python3 - "$N" "$ROUNDS" "$ENTRIES" \
  "${v[bare_/bin/true]}" "${v[plain_/bin/true]}" "${v[hidden_/bin/true]}" \
  "${v[bare_sh_-c_true]}" "${v[plain_sh_-c_true]}" "${v[hidden_sh_-c_true]}" <<'PY'
import sys
n, rounds, entries = sys.argv[1:4]
med = lambda s: sorted(map(float, s.split()))[len(s.split()) // 2]
v = [med(a) for a in sys.argv[4:10]]
print("== us per program start, median of %s rounds of %s (home of %s entries) ==" % (rounds, n, entries))
for name, (bare, plain, hidden) in (("/bin/true", v[0:3]), ("sh -c true", v[3:6])):
    print("%-11s bare %6.0f   sandpit, login readable %6.0f (%.2fx)   agent_read %6.0f (%.2fx bare, %.2fx readable, +%.0f us)"
          % (name, bare, plain, plain / bare, hidden, hidden / bare, hidden / plain, hidden - plain))
PY
