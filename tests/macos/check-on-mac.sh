#!/usr/bin/env bash
# `cond && ok … || bad …` is if-then-else here: ok and bad only echo and count.
# shellcheck disable=SC2015
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
# Part 3  `sandpit run`: the whole stack, Seatbelt applied by sandpit itself in the
#         child. Denied read, denied write, blocked exec (execv and posix_spawn),
#         blocked domain, a SIP binary falling back to Seatbelt alone — each beside
#         a positive control. Builds a small probe with `cc` (Xcode tools).
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
[ ! -e "$HOME/.sandpit" ] && ok "denied writing sandpit's state dir" || bad "\$HOME/.sandpit was created"

# Network: only the proxy port is reachable.
out=$(sb /usr/bin/curl -sS --max-time 5 "http://127.0.0.1:$PROXY_PORT/" 2>&1)
[ "$out" = ok ] && ok "control: connect to the proxy port" || bad "control: proxy port unreachable: $out"
sb /usr/bin/curl -sS --max-time 5 "http://127.0.0.1:$OTHER_PORT/" >/dev/null 2>&1
sleep 0.5
[ ! -s "$work/other.hits" ] && ok "blocked destination: the other loopback listener got nothing" ||
	bad "a connection reached the non-proxy listener"
if out=$(sb /usr/bin/curl -sS --max-time 5 "http://localhost.invalid:$OTHER_PORT/" 2>&1); then
	bad "name resolved and connected: $out"
else
	ok "blocked name resolution outside the proxy ($out)"
fi

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

echo "== Part 3: sandpit run (the whole stack: Seatbelt applied by sandpit, interposer, proxy)"
# A small probe built here: ad-hoc signed, outside SIP, no hardened runtime, so
# sandpit runs it in full mode (Seatbelt + DYLD interposer). /bin/* programs are
# SIP-protected platform binaries: sandpit runs them with Seatbelt alone.
if ! command -v cc >/dev/null; then
	bad "no C compiler (xcode-select --install): Part 3 not checked"
	echo "$pass passed, $fail failed"
	exit 1
fi
mkdir -p "$work/bin"
cat >"$work/probe.c" <<'C'
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
int main(int argc, char **argv) {
    if (argc == 2) { /* run as `#!/usr/bin/env probe`: argv is [probe, script] */
        const char *v = getenv("DYLD_INSERT_LIBRARIES");
        printf("%s\n", v ? v : "(unset)"); return 0;
    }
    if (argc < 3) return 2;
    const char *op = argv[1], *arg = argv[2];
    if (!strcmp(op, "read")) {
        char buf[256]; int fd = open(arg, O_RDONLY);
        if (fd < 0) { printf("open: %s\n", strerror(errno)); return 1; }
        ssize_t n = read(fd, buf, sizeof buf - 1); buf[n > 0 ? n : 0] = 0;
        printf("%s", buf); return 0;
    }
    if (!strcmp(op, "write")) {
        int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { printf("open: %s\n", strerror(errno)); return 1; }
        write(fd, "pwned\n", 6); close(fd); return 0;
    }
    if (!strcmp(op, "exec")) {
        execv(arg, argv + 2);
        printf("execv: %s\n", strerror(errno)); return 1;
    }
    if (!strcmp(op, "spawn")) {
        pid_t pid; int st;
        int r = posix_spawn(&pid, arg, NULL, NULL, argv + 2, environ);
        if (r) { printf("posix_spawn: %s\n", strerror(r)); return 1; }
        waitpid(pid, &st, 0); return WEXITSTATUS(st);
    }
    if (!strcmp(op, "env")) { const char *v = getenv(arg); printf("%s\n", v ? v : "(unset)"); return 0; }
    return 2;
}
C
cc -O1 -o "$work/bin/probe" "$work/probe.c" || { bad "building the probe failed"; exit 1; }
PROBE="$work/bin/probe"
printf '#!/bin/sh\necho RAN-OK\n' >"$work/bin/ok-tool"
printf '#!/bin/sh\necho RAN-BLOCKED\n' >"$work/bin/sandpit-blocked-tool"
chmod +x "$work/bin/ok-tool" "$work/bin/sandpit-blocked-tool"
# The project's own policy may only tighten: block one command by name.
printf '[exec]\nblock = ["sandpit-blocked-tool"]\n' >"$WS/.sandpit.toml"
run() { "$SANDPIT" run "$@"; }

out=$("$SANDPIT" check --json -- "$PROBE")
mode=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["mode"])' <<<"$out")
[ "$mode" = full ] && ok "probe: full mode (Seatbelt + interposer)" || bad "probe: mode $mode, want full: $out"

# Seatbelt applied in the child by sandpit: DYLD_INSERT_LIBRARIES survives.
out=$(run -- "$PROBE" env DYLD_INSERT_LIBRARIES 2>/dev/null)
case "$out" in *libsandpit*) ok "run: DYLD_INSERT_LIBRARIES reaches the program ($out)" ;; *) bad "run: no interposer in the program: $out" ;; esac

# A `#!/usr/bin/env probe` script: sandpit starts probe itself, so the SIP-protected
# env does not strip the interposer on the way.
printf '#!/usr/bin/env probe\n' >"$work/bin/envscript"
chmod +x "$work/bin/envscript"
out=$(PATH="$work/bin:$PATH" run -- "$work/bin/envscript" 2>/dev/null)
case "$out" in *libsandpit*) ok "run: a #!/usr/bin/env script keeps the interposer" ;; *) bad "run: #!/usr/bin/env script lost the interposer: $out" ;; esac

# Denied read, both layers; positive control first.
out=$(run -- "$PROBE" read "$WS/src/readme.txt" 2>&1)
case "$out" in *hello*) ok "run: control read inside the workspace" ;; *) bad "run: control read failed: $out" ;; esac
out=$(run -- "$PROBE" read "$HOME/.ssh/id_ed25519" 2>&1)
case "$out" in
*"$CANARY"*) bad "run: denied read: canary leaked" ;;
*sandpit*) ok "run: denied read, the interposer named the rule" ;;
*) ok "run: denied read (no interposer message: Seatbelt denied it; output: $out)" ;;
esac

# Denied write; positive control first.
run -- "$PROBE" write "$WS/src/written.txt" >/dev/null 2>&1
[ "$(cat "$WS/src/written.txt" 2>/dev/null)" = pwned ] && ok "run: control write inside the workspace" || bad "run: control write failed"
run -- "$PROBE" write "$HOME/outside.txt" >/dev/null 2>&1
[ "$(cat "$HOME/outside.txt")" = original ] && ok "run: denied write outside the workspace" || bad "run: write outside happened"

# Blocked exec (judged by the interposer in the probe), through execv and
# posix_spawn; positive control first.
out=$(run -- "$PROBE" exec "$work/bin/ok-tool" 2>&1)
case "$out" in *RAN-OK*) ok "run: control exec" ;; *) bad "run: control exec failed: $out" ;; esac
for how in exec spawn; do
	out=$(run -- "$PROBE" "$how" "$work/bin/sandpit-blocked-tool" 2>&1)
	case "$out" in *RAN-BLOCKED*) bad "run: blocked command ran through $how" ;; *) ok "run: blocked exec through $how ($out)" ;; esac
done
run -- /usr/bin/osascript -e 'return 1' >/dev/null 2>&1 && bad "run: osascript ran" || ok "run: denied osascript"

# Blocked domain at the proxy; the other loopback listener gets nothing.
out=$(run --block-host blocked.example -- /usr/bin/curl -sS --max-time 5 http://blocked.example/ 2>&1)
case "$out" in *blocked*|*denied*|*refused*|*403*) ok "run: blocked domain refused ($out)" ;; *) bad "run: blocked domain: $out" ;; esac
: >"$work/other.hits"
run -- "$PROBE" exec /usr/bin/curl -sS --noproxy '*' --max-time 5 "http://127.0.0.1:$OTHER_PORT/" >/dev/null 2>&1
sleep 0.5
[ ! -s "$work/other.hits" ] && ok "run: a direct connection to another port got nothing" || bad "run: a connection reached the blocked listener"
out=$(run --allow-host "127.0.0.1:$OTHER_PORT" -- /usr/bin/curl -sS --max-time 5 "http://127.0.0.1:$OTHER_PORT/" 2>&1)
[ "$out" = ok ] && ok "run: control connection to an allowed loopback service" || bad "run: control connection failed: $out"
: >"$work/other.hits"
run --network unrestricted -- /usr/bin/curl -sS --max-time 5 "http://127.0.0.1:$OTHER_PORT/" >/dev/null 2>&1
sleep 0.5
[ ! -s "$work/other.hits" ] && ok "run: unrestricted keeps the host's loopback services closed" || bad "run: unrestricted reached a loopback service"

# A SIP binary falls back to Seatbelt alone: the start-up line says so and the
# read is still denied.
out=$(run -- /bin/cat "$HOME/.ssh/id_ed25519" 2>&1)
case "$out" in *"$CANARY"*) bad "run /bin/cat: canary leaked" ;; *) ok "run /bin/cat (SIP): denied read by Seatbelt alone" ;; esac
case "$out" in *"interposer OFF"*) ok "run /bin/cat: start-up line reports the interposer off" ;; *) bad "run /bin/cat: start-up line: $out" ;; esac
rm -f "$WS/.sandpit.toml"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
