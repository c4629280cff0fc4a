#!/usr/bin/env bash
# End-to-end check of sandpit's macOS layers, for a person to run on a Mac.
#
# Nothing in sandpit's CI runs on a Mac: the macOS code is cross-built and its pure
# parts are unit-tested on Linux. This script is how a person with a Mac finds out
# whether the Seatbelt profile and mode selection do on a real kernel what the
# tests on Linux say they should. Report its full output with the issue.
#
# Usage (from the repository root, after `cargo build`):
#   tests/macos/check-on-mac.sh [path/to/sandpit]
# Needs: python3 (Xcode command line tools or Homebrew), curl.
# Network: only 127.0.0.1. Files: a fresh directory under /tmp, removed at the end.
#
# Part 1  `sandpit check`: a SIP binary falls back to kernel mode; sandpit itself
#         (ad-hoc signed, outside SIP) gets full mode.
# Part 2  the Seatbelt profile through /usr/bin/sandbox-exec (the fallback path):
#         denied read, denied write, protected paths, blocked destinations, blocked
#         host launchers (open, osascript, launchctl), each beside a positive control.
# Part 3  `sandpit run` (when it exists on this build): the same attacks through the
#         whole stack, with Seatbelt applied by sandpit itself in the child.
set -u
SANDPIT=${1:-target/debug/sandpit}
SANDPIT=$(cd "$(dirname "$SANDPIT")" && pwd -P)/$(basename "$SANDPIT")
[ "$(uname -s)" = Darwin ] || { echo "this script is for macOS" >&2; exit 2; }
[ -x "$SANDPIT" ] || { echo "no sandpit binary at $SANDPIT (run cargo build)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 2; }

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS  $*"; }
bad() { fail=$((fail + 1)); echo "FAIL  $*"; }

work=$(cd "$(mktemp -d /tmp/sandpit-mac.XXXXXX)" && pwd -P)
pids=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null; done
	chmod -R u+w "$work" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

export HOME="$work/home"
WS="$HOME/project"
mkdir -p "$HOME/.ssh" "$WS/.git/hooks" "$WS/src"
CANARY="sandpit-canary-$RANDOM$RANDOM"
echo "$CANARY" >"$HOME/.ssh/id_ed25519"
echo original >"$HOME/outside.txt"
echo hello >"$WS/src/readme.txt"
echo "[core]" >"$WS/.git/config"
cd "$WS" || exit 2

# Loopback listeners: the "proxy" port and a "blocked destination" port. Each
# records whether anything connected.
listener() { # listener PORTFILE HITFILE
	python3 - "$1" "$2" <<'PY' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("hit\n")
    try:
        c.recv(1024)
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
    finally:
        c.close()
PY
	pids+=($!)
	for _ in $(seq 50); do [ -s "$1" ] && break; sleep 0.1; done
}
listener "$work/proxy.port" "$work/proxy.hits"
listener "$work/other.port" "$work/other.hits"
PROXY_PORT=$(cat "$work/proxy.port")
OTHER_PORT=$(cat "$work/other.port")

echo "== Part 1: sandpit check"
out=$("$SANDPIT" check --json -- /bin/ls)
mode=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["mode"])' <<<"$out")
kinds=$(python3 -c 'import json,sys; print(" ".join(b["kind"] for b in json.load(sys.stdin)["inspection"]["blockers"]))' <<<"$out")
[ "$mode" = kernel ] && ok "/bin/ls: kernel mode ($kinds)" || bad "/bin/ls: mode $mode ($kinds), want kernel"
case " $kinds " in *" sip_location "*) ok "/bin/ls: SIP location reported" ;; *) bad "/bin/ls: no sip_location in: $kinds" ;; esac
out=$("$SANDPIT" check --json -- "$SANDPIT")
mode=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["mode"])' <<<"$out")
[ "$mode" = full ] && ok "sandpit binary: full mode" || bad "sandpit binary: mode $mode, want full: $out"
"$SANDPIT" check -- /bin/ls

echo "== Part 2: the Seatbelt profile through sandbox-exec"
CONTROL="$work/control.sock"
"$SANDPIT" check --seatbelt --json --proxy-port "$PROXY_PORT" --control-socket "$CONTROL" -- /bin/cat >"$work/check.json" ||
	{ bad "sandpit check --seatbelt failed"; exit 1; }
# The argument vector sandbox-exec takes, one element per line is not safe for
# newlines; read it NUL-separated.
python3 -c 'import json,sys; sys.stdout.write("\0".join(json.load(open(sys.argv[1]))["seatbelt"]["sandbox_exec_args"]) + "\0")' \
	"$work/check.json" >"$work/args"
SB=()
while IFS= read -r -d '' a; do SB+=("$a"); done <"$work/args"
sb() { /usr/bin/sandbox-exec "${SB[@]}" "$@"; }

if sb /usr/bin/true; then ok "profile loads (sandbox-exec /usr/bin/true)"; else
	bad "the profile does not load; sandbox-exec said the above"
	echo "$fail failed, $pass passed"; exit 1
fi

# Reads.
out=$(sb /bin/cat "$WS/src/readme.txt" 2>&1)
[ "$out" = hello ] && ok "control: read inside the workspace" || bad "control: read in workspace: $out"
out=$(sb /bin/cat "$HOME/.ssh/id_ed25519" 2>&1)
case "$out" in *"$CANARY"*) bad "read ~/.ssh/id_ed25519: canary leaked" ;; *) ok "denied read of ~/.ssh/id_ed25519" ;; esac
out=$(sb /bin/cat "$HOME/.SSH/ID_ED25519" 2>&1)
case "$out" in *"$CANARY"*) bad "read via other case (~/.SSH): canary leaked" ;; *) ok "denied read via other letter case" ;; esac
ln -s "$HOME/.ssh/id_ed25519" "$WS/link"
out=$(sb /bin/cat "$WS/link" 2>&1)
case "$out" in *"$CANARY"*) bad "read via symlink in workspace: canary leaked" ;; *) ok "denied read via a symlink in the workspace" ;; esac
rm -f "$WS/link"
out=$(sb /bin/ln "$HOME/.ssh/id_ed25519" "$WS/hardlink" 2>&1; cat "$WS/hardlink" 2>/dev/null)
case "$out" in *"$CANARY"*) bad "hard link of a blocked file: canary leaked" ;; *) ok "denied hard link of a blocked file" ;; esac
tmpdir_real=$(cd /tmp && pwd -P)
out=$(sb /bin/cat "/tmp/../$HOME/.ssh/id_ed25519" 2>&1)
case "$out" in *"$CANARY"*) bad "read via /tmp/..: canary leaked" ;; *) ok "denied read via /tmp/.. ($tmpdir_real)" ;; esac

# Writes.
sb /bin/sh -c "echo new > '$WS/src/new.txt'" && [ "$(cat "$WS/src/new.txt")" = new ] &&
	ok "control: write inside the workspace" || bad "control: write inside the workspace failed"
sb /bin/sh -c "echo pwned > '$HOME/outside.txt'" 2>/dev/null
[ "$(cat "$HOME/outside.txt")" = original ] && ok "denied write outside the workspace" || bad "write outside the workspace happened"
sb /bin/sh -c "echo pwned > /tmp/sandpit-mac-escape-$$" 2>/dev/null
[ ! -e "/tmp/sandpit-mac-escape-$$" ] && ok "denied write to /tmp" || { bad "write to /tmp happened"; rm -f "/tmp/sandpit-mac-escape-$$"; }
sb /bin/sh -c "echo 'exit 0' > '$WS/.git/hooks/pre-commit'" 2>/dev/null
[ ! -e "$WS/.git/hooks/pre-commit" ] && ok "denied creating .git/hooks/pre-commit (absent path)" || bad ".git/hooks/pre-commit was created"
sb /bin/sh -c "echo '[core] fsmonitor = evil' >> '$WS/.git/config'" 2>/dev/null
[ "$(cat "$WS/.git/config")" = "[core]" ] && ok "denied appending to .git/config" || bad ".git/config changed"
sb /bin/mv "$WS/.git" "$WS/.git2" 2>/dev/null
[ -d "$WS/.git" ] && [ ! -e "$WS/.git2" ] && ok "denied renaming .git away" || { bad "renamed .git away"; mv "$WS/.git2" "$WS/.git" 2>/dev/null; }
sb /bin/sh -c "echo x > '$WS/.sandpit.toml'" 2>/dev/null
[ ! -e "$WS/.sandpit.toml" ] && ok "denied creating .sandpit.toml" || bad ".sandpit.toml was created"
sb /bin/mkdir -p "$HOME/.sandpit/lib" 2>/dev/null
[ ! -e "$HOME/.sandpit" ] && ok "denied writing sandpit's state dir" || bad "~/.sandpit was created"

# Network: only the proxy port is reachable.
out=$(sb /usr/bin/curl -sS --max-time 5 "http://127.0.0.1:$PROXY_PORT/" 2>&1)
[ "$out" = ok ] && ok "control: connect to the proxy port" || bad "control: proxy port unreachable: $out"
sb /usr/bin/curl -sS --max-time 5 "http://127.0.0.1:$OTHER_PORT/" >/dev/null 2>&1
sleep 0.5
[ ! -s "$work/other.hits" ] && ok "blocked destination: the other loopback listener got nothing" ||
	bad "a connection reached the non-proxy listener"
out=$(sb /usr/bin/curl -sS --max-time 5 "http://localhost.invalid:$OTHER_PORT/" 2>&1)
[ $? -ne 0 ] && ok "blocked name resolution outside the proxy ($out)" || bad "name resolved and connected: $out"

# Unix sockets: sandpit's control socket is reachable, another socket is not.
unix_listener() { # unix_listener PATH HITFILE
	python3 - "$1" "$2" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("hit\n")
    c.close()
PY
	pids+=($!)
	for _ in $(seq 50); do [ -S "$1" ] && break; sleep 0.1; done
}
unix_listener "$CONTROL" "$work/control.hits"
unix_listener "$work/other.sock" "$work/othersock.hits"
uconnect='import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])'
sb /usr/bin/python3 -c "$uconnect" "$CONTROL" >/dev/null 2>&1
sleep 0.3
[ -s "$work/control.hits" ] && ok "control: the control socket is reachable" || bad "control: control socket unreachable"
sb /usr/bin/python3 -c "$uconnect" "$work/other.sock" >/dev/null 2>&1
sleep 0.3
[ ! -s "$work/othersock.hits" ] && ok "denied connecting to another unix socket" || bad "reached a unix socket outside the policy"

# Host launchers.
sb /usr/bin/osascript -e 'return 1' >/dev/null 2>&1 && bad "osascript ran" || ok "denied osascript"
sb /usr/bin/open -g -a TextEdit >/dev/null 2>&1 && bad "open ran" || ok "denied open"
sb /bin/launchctl list >/dev/null 2>&1 && bad "launchctl ran" || ok "denied launchctl"

echo "== Part 3: sandpit run (the whole stack)"
if ! "$SANDPIT" run --help >/dev/null 2>&1; then
	bad "this build has no 'sandpit run': Part 3 not checked"
else
	run() { "$SANDPIT" run -- "$@"; }
	out=$(run /bin/cat "$HOME/.ssh/id_ed25519" 2>&1)
	case "$out" in *"$CANARY"*) bad "run: canary leaked" ;; *) ok "run: denied read (SIP /bin/cat: Seatbelt only)" ;; esac
	run /bin/sh -c "echo pwned > '$HOME/outside.txt'" >/dev/null 2>&1
	[ "$(cat "$HOME/outside.txt")" = original ] && ok "run: denied write" || bad "run: write outside happened"
	out=$(run /usr/bin/curl -sS --max-time 5 "http://127.0.0.1:$OTHER_PORT/" 2>&1)
	sleep 0.5
	[ ! -s "$work/other.hits" ] && ok "run: blocked destination got nothing" || bad "run: a connection reached the blocked listener"
	out=$("$SANDPIT" run --block-host blocked.example -- /usr/bin/curl -sS --max-time 5 http://blocked.example/ 2>&1)
	case "$out" in *blocked*|*denied*|*refused*|*403*) ok "run: blocked domain refused ($out)" ;; *) bad "run: blocked domain: $out" ;; esac
	mkdir -p "$work/pybin"
	printf '#!/usr/bin/env python3\nimport os; print(os.environ.get("DYLD_INSERT_LIBRARIES", "none"))\n' >"$work/pybin/showdyld"
	chmod +x "$work/pybin/showdyld"
	"$SANDPIT" check -- "$work/pybin/showdyld"
	out=$(run "$work/pybin/showdyld" 2>&1)
	echo "  DYLD_INSERT_LIBRARIES inside a python run: $out (expect a path when python3 is outside SIP, e.g. Homebrew)"
	run /usr/bin/osascript -e 'return 1' >/dev/null 2>&1 && bad "run: osascript ran" || ok "run: denied osascript"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
