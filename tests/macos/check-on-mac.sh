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
# Part 4  `sandpit wrap`: a small app bundle built here (AppKit, `cc`) is wrapped;
#         the launcher, its Info.plist and its ad-hoc signature are checked, and
#         the wrapped app opens a window and uses the pasteboard (the GUI
#         allowance) while a secret stays unreadable and Apple Events stay denied.
# Part 5  `--shims`: curl to a loopback listener refused by the shim (exit 126,
#         nothing received), and allowed with --allow-host.
# Part 6  the adversary: a scripted reviewer on 127.0.0.1 (OpenAI-compatible)
#         denies one command and allows another.
# Part 7  name resolution in interposed programs: getaddrinfo and gethostbyname
#         answer an allowed name (a `[network.resolve]` test name) and a connect
#         to it arrives; a blocked name fails and the audit log names its rule.
# Part 8  lifetime: a daemon (setsid + double fork), one that also drops its
#         environment, and a plain background child are gone after the run.
#
# Every part ends with one summary line (`SUMMARY part N …: P passed, F failed`);
# the last lines repeat them all.
set -u
SANDPIT=${1:-target/debug/sandpit}
SANDPIT=$(cd "$(dirname "$SANDPIT")" && pwd -P)/$(basename "$SANDPIT")
[ "$(uname -s)" = Darwin ] || { echo "this script is for macOS" >&2; exit 2; }
[ -x "$SANDPIT" ] || { echo "no sandpit binary at $SANDPIT (run cargo build)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 2; }

pass=0 fail=0
ppass=0 pfail=0 part_name=""
summaries=()
ok() { pass=$((pass + 1)); ppass=$((ppass + 1)); echo "PASS  $*"; }
bad() { fail=$((fail + 1)); pfail=$((pfail + 1)); echo "FAIL  $*"; }
# End the current part with its summary line.
end_part() {
	[ -n "$part_name" ] || return 0
	summaries+=("SUMMARY part $part_name: $ppass passed, $pfail failed")
	echo "${summaries[${#summaries[@]} - 1]}"
	part_name="" ppass=0 pfail=0
}
part() { # part "N name"
	end_part
	part_name=$1
	echo "== Part $1"
}
# Print every part's summary and the totals; exit non-zero on any failure.
finish() {
	end_part
	echo "== Summary"
	for l in ${summaries[@]+"${summaries[@]}"}; do echo "$l"; done
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ] && [ "${1:-0}" -eq 0 ]
	exit
}

work=$(cd "$(mktemp -d /tmp/sandpit-mac.XXXXXX)" && pwd -P)
pids=()
# Called by the EXIT trap (shellcheck cannot see that).
# shellcheck disable=SC2317
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

part "1 (sandpit check)"
out=$("$SANDPIT" check --json -- /bin/ls)
mode=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["mode"])' <<<"$out")
kinds=$(python3 -c 'import json,sys; print(" ".join(b["kind"] for b in json.load(sys.stdin)["inspection"]["blockers"]))' <<<"$out")
[ "$mode" = kernel ] && ok "/bin/ls: kernel mode ($kinds)" || bad "/bin/ls: mode $mode ($kinds), want kernel"
case " $kinds " in *" sip_location "*) ok "/bin/ls: SIP location reported" ;; *) bad "/bin/ls: no sip_location in: $kinds" ;; esac
out=$("$SANDPIT" check --json -- "$SANDPIT")
mode=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["mode"])' <<<"$out")
[ "$mode" = full ] && ok "sandpit binary: full mode" || bad "sandpit binary: mode $mode, want full: $out"
"$SANDPIT" check -- /bin/ls

part "2 (Seatbelt profile through sandbox-exec)"
CONTROL="$work/control.sock"
"$SANDPIT" check --seatbelt --json --proxy-port "$PROXY_PORT" --control-socket "$CONTROL" -- /bin/cat >"$work/check.json" ||
	{ bad "sandpit check --seatbelt failed"; finish 1; }
# The argument vector sandbox-exec takes, one element per line is not safe for
# newlines; read it NUL-separated.
python3 -c 'import json,sys; sys.stdout.write("\0".join(json.load(open(sys.argv[1]))["seatbelt"]["sandbox_exec_args"]) + "\0")' \
	"$work/check.json" >"$work/args"
SB=()
while IFS= read -r -d '' a; do SB+=("$a"); done <"$work/args"
sb() { /usr/bin/sandbox-exec "${SB[@]}" "$@"; }

if sb /usr/bin/true; then ok "profile loads (sandbox-exec /usr/bin/true)"; else
	bad "the profile does not load; sandbox-exec said the above"
	finish 1
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

part "3 (sandpit run: Seatbelt applied by sandpit, interposer, proxy)"
# A small probe built here: ad-hoc signed, outside SIP, no hardened runtime, so
# sandpit runs it in full mode (Seatbelt + DYLD interposer). /bin/* programs are
# SIP-protected platform binaries: sandpit runs them with Seatbelt alone.
if ! command -v cc >/dev/null; then
	bad "no C compiler (xcode-select --install): Parts 3 to 8 not checked"
	finish 1
fi
mkdir -p "$work/bin"
cat >"$work/probe.c" <<'C'
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
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
    if (!strcmp(op, "resolve")) { /* getaddrinfo NAME: the addresses, or the error */
        struct addrinfo h = {0}, *res, *a; h.ai_socktype = SOCK_STREAM;
        int r = getaddrinfo(arg, argc > 3 ? argv[3] : NULL, &h, &res);
        if (r) { printf("getaddrinfo: %s\n", gai_strerror(r)); return 1; }
        for (a = res; a; a = a->ai_next) {
            char host[64]; getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, NULL, 0, NI_NUMERICHOST);
            printf("addr %s\n", host);
        }
        freeaddrinfo(res); return 0;
    }
    if (!strcmp(op, "hostbyname")) {
        struct hostent *he = gethostbyname(arg);
        if (!he || !he->h_addr_list[0]) { printf("gethostbyname: no answer\n"); return 1; }
        printf("addr %s\n", inet_ntoa(*(struct in_addr *)he->h_addr_list[0])); return 0;
    }
    if (!strcmp(op, "connect") && argc > 3) { /* connect NAME PORT: resolve, connect, GET */
        struct addrinfo h = {0}, *res; h.ai_socktype = SOCK_STREAM; h.ai_family = AF_INET;
        int r = getaddrinfo(arg, argv[3], &h, &res);
        if (r) { printf("getaddrinfo: %s\n", gai_strerror(r)); return 1; }
        int s = socket(res->ai_family, SOCK_STREAM, 0);
        if (connect(s, res->ai_addr, res->ai_addrlen)) { printf("connect: %s\n", strerror(errno)); return 1; }
        const char *req = "GET / HTTP/1.0\r\n\r\n"; write(s, req, strlen(req));
        char buf[256]; ssize_t n = read(s, buf, sizeof buf - 1); buf[n > 0 ? n : 0] = 0;
        printf("%s\n", buf); return 0;
    }
    if (!strcmp(op, "daemon")) { /* daemon PIDFILE [noenv]: setsid + double fork, sleep */
        pid_t p = fork();
        if (p < 0) return 1;
        if (p > 0) { /* until the daemon has written its pid */
            waitpid(p, NULL, 0);
            for (int i = 0; i < 500 && access(arg, F_OK); i++) usleep(10000);
            return 0;
        }
        setsid();
        if (fork() > 0) _exit(0);
        FILE *f = fopen(arg, "w"); fprintf(f, "%d\n", getpid()); fclose(f);
        char *sleep_argv[] = {"sleep", "300", NULL}, *empty[] = {NULL};
        execve("/bin/sleep", sleep_argv, argc > 3 ? empty : environ);
        _exit(1);
    }
    return 2;
}
C
cc -O1 -o "$work/bin/probe" "$work/probe.c" || { bad "building the probe failed"; finish 1; }
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

info() { echo "INFO  $*"; }

part "4 (sandpit wrap: a small GUI app)"
app="$work/apps/Probe.app"
mkdir -p "$app/Contents/MacOS" "$work/wrapped"
cat >"$app/Contents/Info.plist" <<'PLIST'
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>CFBundleExecutable</key><string>Probe</string>
  <key>CFBundleIdentifier</key><string>org.sandpit.check.probe</string>
  <key>CFBundleName</key><string>Probe</string>
  <key>CFBundlePackageType</key><string>APPL</string>
</dict>
</plist>
PLIST
# Opens a window, round-trips the pasteboard, and tries to read the file it is given.
cat >"$work/gui.m" <<'OBJC'
#import <AppKit/AppKit.h>
#include <stdio.h>
int main(int argc, char **argv) {
    @autoreleasepool {
        [NSApplication sharedApplication];
        [NSApp setActivationPolicy:NSApplicationActivationPolicyAccessory];
        NSWindow *w = [[NSWindow alloc] initWithContentRect:NSMakeRect(0, 0, 200, 100)
                                                  styleMask:NSWindowStyleMaskTitled
                                                    backing:NSBackingStoreBuffered
                                                      defer:NO];
        [w orderFront:nil];
        NSPasteboard *pb = [NSPasteboard generalPasteboard];
        [pb clearContents];
        BOOL put = [pb setString:@"sandpit-paste" forType:NSPasteboardTypeString];
        NSString *got = [pb stringForType:NSPasteboardTypeString];
        printf("window=%d paste=%d\n", (int)([w windowNumber] > 0),
               (int)(put && [got isEqualToString:@"sandpit-paste"]));
        if (argc > 1) {
            char buf[128] = {0};
            FILE *f = fopen(argv[1], "r");
            if (f) { fread(buf, 1, sizeof buf - 1, f); fclose(f); }
            printf("secret=%s\n", buf);
        }
    }
    return 0;
}
OBJC
if cc -fobjc-arc -framework AppKit -o "$app/Contents/MacOS/Probe" "$work/gui.m" &&
	codesign --force --sign - "$app" >/dev/null 2>&1; then
	ok "built and signed Probe.app"
else
	bad "building Probe.app failed (Xcode command line tools?)"
fi
wrapped="$work/wrapped/Probe (sandpit).app"
out=$("$SANDPIT" wrap "$app" --output "$work/wrapped" --workspace "$WS" 2>&1)
[ -d "$wrapped" ] && ok "wrap made $wrapped" || bad "wrap: $out"
launcher="$wrapped/Contents/MacOS/Probe-sandpit"
[ "$(plutil -extract CFBundleExecutable raw "$wrapped/Contents/Info.plist" 2>&1)" = Probe-sandpit ] &&
	ok "Info.plist: CFBundleExecutable is the launcher" || bad "Info.plist: CFBundleExecutable"
[ "$(plutil -extract CFBundleIdentifier raw "$wrapped/Contents/Info.plist" 2>&1)" = org.sandpit.check.probe.sandpit ] &&
	ok "Info.plist: an identifier of its own" || bad "Info.plist: CFBundleIdentifier"
grep -q -- " run --gui " "$launcher" 2>/dev/null && ok "launcher runs sandpit run --gui" || bad "launcher: $(cat "$launcher" 2>&1)"
codesign --verify --strict "$wrapped" 2>&1 && ok "wrapped bundle: signature verifies" || bad "wrapped bundle: codesign --verify failed"
codesign -dv "$wrapped" 2>&1 | grep -q "Signature=adhoc" && ok "wrapped bundle: ad-hoc signed" || bad "wrapped bundle: not ad-hoc signed"
codesign --verify --strict "$app" 2>&1 && ok "the original's signature still verifies" || bad "the original was changed"
# The launcher as LaunchServices would start it (exec'd directly: `open` itself is
# denied inside the sandbox, not outside).
out=$("$launcher" "$HOME/.ssh/id_ed25519" 2>"$work/wrap.err")
err=$(cat "$work/wrap.err")
case "$out" in *"window=1"*) ok "wrapped app opened a window (GUI allowance)" ;; *) bad "wrapped app: no window: $out $err" ;; esac
case "$out" in *"paste=1"*) ok "wrapped app used the pasteboard" ;; *) bad "wrapped app: no pasteboard: $out" ;; esac
case "$out" in *"$CANARY"*) bad "wrapped app read ~/.ssh: canary leaked" ;; *) ok "wrapped app: ~/.ssh stays unreadable" ;; esac
case "$err" in *"GUI allowance (app org.sandpit.check.probe)"*) ok "start-up line names the GUI allowance" ;; *) bad "start-up line: $err" ;; esac
# Without the allowance the same program gets no window.
out=$(run -- "$app/Contents/MacOS/Probe" 2>/dev/null)
case "$out" in *"window=1"*) bad "without --gui a window opened: $out" ;; *) ok "without --gui: no window ($out)" ;; esac
# Apple Events stay denied with the allowance.
run --gui -- /usr/bin/osascript -e 'tell application "Finder" to get name of startup disk' >/dev/null 2>&1 &&
	bad "run --gui: osascript reached Finder" || ok "run --gui: Apple Events still denied"

part "5 (--shims: curl blocked, allowed)"
: >"$work/other.hits"
out=$(run --shims -- curl -sS --max-time 5 "http://127.0.0.1:$OTHER_PORT/" 2>&1)
rc=$?
[ "$rc" -eq 126 ] && case "$out" in *"sandpit: curl"*) true ;; *) false ;; esac &&
	ok "shim refused curl to a host the policy does not allow (exit 126)" || bad "shim: exit $rc: $out"
sleep 0.5
[ ! -s "$work/other.hits" ] && ok "shim: the listener received nothing" || bad "shim: a connection reached the listener"
out=$(run --shims --allow-host "127.0.0.1:$OTHER_PORT" -- curl -sS --max-time 5 "http://127.0.0.1:$OTHER_PORT/" 2>"$work/shim.err")
[ "$out" = ok ] && ok "shim: control, curl to an allowed host" || bad "shim: control failed: $out $(cat "$work/shim.err")"
grep -q "shims (" "$work/shim.err" && ok "start-up line lists the shims" || bad "start-up line: $(cat "$work/shim.err")"

part "6 (the adversary: a scripted reviewer on loopback)"
python3 - "$work/review.port" "$work/review.log" <<'PY' &
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        open(sys.argv[2], "a").write(body + "\n")
        answer = "DENY: the rules forbid touching files" if "made-by-touch" in body else "ALLOW: harmless"
        out = json.dumps({"id": "x", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
pids+=($!)
for _ in $(seq 50); do [ -s "$work/review.port" ] && break; sleep 0.1; done
mkdir -p "$HOME/.sandpit"
cat >"$HOME/.sandpit/config.toml" <<TOML
[adversary]
provider = "openai"
model = "test"
endpoint = "http://127.0.0.1:$(cat "$work/review.port")/v1"
rules = "Never modify files with touch."
timeout_ms = 5000
TOML
out=$(run -- "$PROBE" spawn /bin/ls "$WS" 2>&1)
case "$out" in *src*) ok "adversary: control, an allowed command ran" ;; *) bad "adversary: control: $out" ;; esac
out=$(run -- "$PROBE" spawn /usr/bin/touch "$WS/made-by-touch" 2>&1)
[ ! -e "$WS/made-by-touch" ] && ok "adversary: the denied command did not run" || bad "adversary: made-by-touch exists: $out"
case "$out" in *"forbid touching files"*) ok "adversary: its reason reached the program" ;; *) bad "adversary: no reason: $out" ;; esac
grep -q "Never modify files with touch." "$work/review.log" 2>/dev/null && ok "adversary: the reviewer got the rules" || bad "adversary: the reviewer saw no request"
rm -f "$HOME/.sandpit/config.toml" "$WS/made-by-touch"

part "7 (name resolution in interposed programs)"
cat >"$HOME/.sandpit/config.toml" <<TOML
[network]
allow = ["allowed.test"]
block = ["blocked.test"]
[network.resolve]
"allowed.test" = "127.0.0.1"
"blocked.test" = "127.0.0.1"
TOML
out=$(run -- "$PROBE" resolve allowed.test 2>/dev/null)
case "$out" in *"addr 127.0.0.1"*) ok "getaddrinfo: an allowed name answers ($out)" ;; *) bad "getaddrinfo allowed.test: $out" ;; esac
out=$(run -- "$PROBE" hostbyname allowed.test 2>/dev/null)
case "$out" in *"addr 127.0.0.1"*) ok "gethostbyname: an allowed name answers" ;; *) bad "gethostbyname allowed.test: $out" ;; esac
: >"$work/other.hits"
out=$(run -- "$PROBE" connect allowed.test "$OTHER_PORT" 2>/dev/null)
sleep 0.5
case "$out" in *ok*) [ -s "$work/other.hits" ] ;; *) false ;; esac &&
	ok "connect by name: arrived through the proxy" || bad "connect allowed.test: $out"
: >"$work/other.hits"
out=$(run -- "$PROBE" resolve blocked.test 2>/dev/null)
case "$out" in *"addr "*) bad "getaddrinfo blocked.test answered: $out" ;; *getaddrinfo:*) ok "getaddrinfo: a blocked name fails ($out)" ;; *) bad "getaddrinfo blocked.test: $out" ;; esac
out=$(run -- "$PROBE" connect blocked.test "$OTHER_PORT" 2>/dev/null)
sleep 0.5
[ ! -s "$work/other.hits" ] && ok "connect to a blocked name: the listener received nothing" || bad "blocked.test reached the listener"
log=$("$SANDPIT" log --denied 2>&1)
case "$log" in *blocked.test*network.block*) ok "audit log names the rule of the refusal" ;; *) bad "audit log: $log" ;; esac
out=$(run -- "$PROBE" resolve nowhere.invalid 2>/dev/null)
case "$out" in *"addr "*) bad "an unlisted name answered: $out" ;; *) ok "a name no rule allows fails ($out)" ;; esac
out=$(run -- /usr/bin/python3 -c 'import socket; print(socket.gethostbyname("allowed.test"))' 2>&1)
info "a SIP program (no interposer) resolving allowed.test: $out"
rm -f "$HOME/.sandpit/config.toml"

part "8 (lifetime: nothing outlives the run)"
gone() { # gone PIDFILE: the process it names is gone (waits up to 5 s)
	[ -s "$1" ] || return 2
	p=$(cat "$1")
	for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
	kill -9 "$p" 2>/dev/null
	return 1
}
rm -f "$WS"/d*.pid
run -- "$PROBE" daemon "$WS/d1.pid" >/dev/null 2>&1
gone "$WS/d1.pid" && ok "a daemon (setsid + double fork) is gone after the run" || bad "daemon outlived the run (pid file: $(cat "$WS/d1.pid" 2>&1))"
run -- "$PROBE" daemon "$WS/d2.pid" noenv >/dev/null 2>&1
gone "$WS/d2.pid" && ok "a daemon that emptied its environment is gone" || bad "daemon with an empty environment outlived the run"
run -- /bin/sh -c "sleep 300 & echo \$! > '$WS/d3.pid'" >/dev/null 2>&1
gone "$WS/d3.pid" && ok "a background child of a SIP shell is gone" || bad "a background child of /bin/sh outlived the run"
# The documented limit: a program outside the interposer clears the environment
# and is re-parented at once; only the 20 ms tracking can catch it.
run -- /bin/sh -c "(/usr/bin/env -i /bin/sleep 301 & echo \$! > '$WS/d4.pid')" >/dev/null 2>&1
if gone "$WS/d4.pid"; then info "env -i + immediate re-parenting: caught by tracking"; else info "env -i + immediate re-parenting: outlived the run (the limit docs/macos.md names)"; fi
rm -f "$WS"/d*.pid

finish 0
