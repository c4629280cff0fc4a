#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Everyday agent work under `sandpit run` with the default policy and no config of
//! the user's, as the unprivileged test user: git in an existing repository, npm,
//! pnpm, yarn, pip and uv installs, cargo, go, make and cc builds, temp files, and
//! registry traffic through the proxy. Installs come from local tarballs, wheels and
//! path dependencies, or from a registry served on loopback and named through
//! sandpit's own `[network.resolve]`; nothing needs the internet.
//!
//! Each test asserts the real effect (the commit exists, `node_modules/x` is there,
//! the cache landed in sandpit's cache and not in the host's), and the protections
//! the defaults promise beside it still hold.
mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::{text, TestHome, PROTECTED};

/// A fresh HOME and workspace for the test user under /var/tmp: the usual layout, a
/// HOME outside `/tmp` (under /tmp sandpit brings it back read-only over the private
/// tmpfs, and then the interposer does not allow writing the rest of /tmp).
fn home() -> TestHome {
    TestHome::new_in("/var/tmp")
}

/// `sandpit run -- sh -c SCRIPT` in the workspace; the run must succeed.
fn run(h: &TestHome, script: &str) -> String {
    let o = h
        .sandpit()
        .args(["run", "--", "sh", "-c", script])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    t
}

/// The same script without sandpit, as the test user (fixtures, checks).
fn bare(h: &TestHome, script: &str) -> String {
    let o = h.command("sh").arg("-c").arg(script).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// sandpit's package cache for this HOME's workspace (`~/.cache/sandpit/<name>-<hash>`,
/// one per workspace; the launcher creates it on the first run).
fn cache(h: &TestHome) -> PathBuf {
    let root = h.home().join(".cache/sandpit");
    let prefix = format!("{}-", h.workspace().file_name().unwrap().to_string_lossy());
    std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .unwrap_or_else(|| root.join(format!("{prefix}not-created")))
}

fn nonempty_dir(p: &Path) -> bool {
    std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_some())
}

/// An npm package `lpkg` as a tarball in HOME/fx (outside the workspace, readable).
fn npm_tarball(h: &TestHome) -> PathBuf {
    let dir = h.home().join("fx/lpkg");
    h.write(
        &dir.join("package.json"),
        r#"{"name":"lpkg","version":"1.0.0","main":"index.js"}"#,
    );
    h.write(&dir.join("index.js"), "module.exports = 'LPKG-LOADED';\n");
    bare(
        h,
        "cd ../fx && tar czf lpkg-1.0.0.tgz --transform 's,^lpkg,package,' lpkg",
    );
    h.home().join("fx/lpkg-1.0.0.tgz")
}

/// A pure-Python wheel `lwheel` in HOME/fx, built by hand (no setuptools, no index).
fn wheel(h: &TestHome) -> PathBuf {
    std::fs::create_dir_all(h.home().join("fx")).unwrap();
    h.give_to_test_user(&h.home().join("fx"));
    bare(
        h,
        r#"python3 - <<'EOF'
import base64, hashlib, os, zipfile
files = {
    "lwheel/__init__.py": 'MSG = "LWHEEL-LOADED"\n',
    "lwheel-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: lwheel\nVersion: 1.0\n",
    "lwheel-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: everyday-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, body in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(body.encode())}")
record.append("lwheel-1.0.dist-info/RECORD,,")
files["lwheel-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(os.path.expanduser("~/fx/lwheel-1.0-py3-none-any.whl"), "w") as z:
    for name, body in files.items():
        z.writestr(name, body)
EOF"#,
    );
    h.home().join("fx/lwheel-1.0-py3-none-any.whl")
}

#[test]
fn git_works_in_an_existing_repository_and_placeholders_are_no_junk() {
    let h = home();
    let ws = h.workspace();
    bare(
        &h,
        "git init -q && git -c user.name=t -c user.email=t@e commit -q --allow-empty -m init \
         && rm -rf .git/hooks && echo base > a.txt",
    );
    let script = r#"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@e GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@e
set -e
echo "STATUS[$(git status --porcelain --untracked-files=all | tr '\n' ' ')]"
ls -a
git add -A
echo "STAGED[$(git diff --cached --name-only | tr '\n' ' ')]"
git commit -qm one
echo u > untracked.txt
git stash -u -q && [ ! -e untracked.txt ] && echo STASH-U-OK
git stash pop -q && [ -e untracked.txt ] && rm untracked.txt
echo "CLEAN[$(git clean -fd 2>&1)]"
git branch feature
git switch -q feature
echo more >> a.txt
git diff --stat | grep -q '1 insertion' && echo DIFF-OK
git stash -q
grep -q more a.txt || echo STASHED
git stash pop -q
git commit -qam two
git log --format=%s | tr '\n' ' '; echo
git worktree add -q wt master
git -C wt log --format=%s -1
set +e
# The protections hold beside it: the placeholders cannot be filled, moved or removed.
echo evil > .git/hooks/pre-commit || echo HOOK-REFUSED
mkdir .git/hooks/x 2>/dev/null || echo HOOKDIR-REFUSED
echo '{}' > .mcp.json || echo MCP-REFUSED
echo '{}' > .claude/settings.json || echo CLAUDE-REFUSED
rmdir .vscode || echo RMDIR-REFUSED
mv .envrc moved || echo MV-REFUSED
echo evil > .git/config || echo CONFIG-REFUSED
echo ../evil > .git/commondir || echo COMMONDIR-REFUSED
echo END
"#;
    let t = run(&h, script);
    // Inside: git sees none of the placeholders, and adds only the real file.
    assert!(t.contains("STATUS[?? a.txt ]"), "{t}");
    assert!(t.contains("STAGED[a.txt ]"), "{t}");
    for p in PROTECTED {
        assert!(
            t.contains(&format!("\n{p}\n")),
            "placeholder {p} missing: {t}"
        );
    }
    assert!(t.contains("DIFF-OK") && t.contains("STASHED"), "{t}");
    // git neither stashes nor cleans the placeholders (nor warns that it cannot).
    assert!(t.contains("STASH-U-OK") && t.contains("CLEAN[]"), "{t}");
    assert!(t.contains("two one init"), "{t}");
    for refused in [
        "HOOK-REFUSED",
        "HOOKDIR-REFUSED",
        "MCP-REFUSED",
        "CLAUDE-REFUSED",
        "RMDIR-REFUSED",
        "MV-REFUSED",
        "CONFIG-REFUSED",
        "COMMONDIR-REFUSED",
        "END",
    ] {
        assert!(t.contains(refused), "{refused}: {t}");
    }
    // Outside: the commits, the branch and the worktree exist; nothing protected was
    // created and no placeholder is left.
    let log = bare(&h, "git log --format=%s feature");
    assert_eq!(log, "two\none\ninit\n");
    assert_eq!(bare(&h, "git stash list"), "");
    assert!(ws.join("wt/.git").is_file() && ws.join("wt/a.txt").is_file());
    assert_eq!(bare(&h, "git status --porcelain"), "?? wt/\n");
    assert!(!ws.join(".git/hooks").exists() && !ws.join("moved").exists());
    for p in PROTECTED {
        assert!(!ws.join(p).exists(), "{p} left behind or created");
    }
    let config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    assert!(!config.contains("evil"));
}

#[test]
fn npm_pnpm_and_yarn_install_local_tarballs_into_sandpit_caches() {
    let h = home();
    let tgz = npm_tarball(&h);
    let tgz = tgz.display();
    let script = format!(
        r#"
set -e
mkdir n p y
cd n && npm install --no-audit --no-fund {tgz} && node -p "require('lpkg')" && cd ..
cd p && echo '{{"name":"p","version":"1.0.0"}}' > package.json && pnpm add {tgz} && node -p "require('lpkg')" && cd ..
cd y && echo '{{"name":"y","version":"1.0.0"}}' > package.json && yarn add --no-progress file:{tgz} && node -p "require('lpkg')"
"#
    );
    let t = run(&h, &script);
    assert_eq!(t.matches("LPKG-LOADED").count(), 3, "{t}");
    let ws = h.workspace();
    for d in ["n", "p", "y"] {
        assert!(
            ws.join(d).join("node_modules/lpkg/package.json").is_file(),
            "{d}: {t}"
        );
    }
    // The caches are sandpit's; the host's stay untouched.
    let c = cache(&h);
    assert!(nonempty_dir(&c.join("npm/_cacache/content-v2")), "{t}");
    assert!(nonempty_dir(&c.join("pnpm/store")), "{t}");
    assert!(nonempty_dir(&c.join("yarn")), "{t}");
    for host in [".npm", ".cache/yarn", ".cache/pnpm", ".local/share/pnpm"] {
        assert!(!h.home().join(host).exists(), "{host} was written");
    }
}

#[test]
fn pip_and_uv_install_a_local_wheel_into_venvs() {
    let h = home();
    let whl = wheel(&h);
    let whl = whl.display();
    let script = format!(
        r#"
set -e
python3 -m venv .venv
.venv/bin/pip install --no-index {whl}
.venv/bin/python -c 'import lwheel; print(lwheel.MSG)'
uv venv -q .venv-uv
uv pip install -q --python .venv-uv {whl}
.venv-uv/bin/python -c 'import lwheel; print(lwheel.MSG)'
"#
    );
    let t = run(&h, &script);
    assert_eq!(t.matches("LWHEEL-LOADED").count(), 2, "{t}");
    let ws = h.workspace();
    assert!(ws.join(".venv/bin/python").exists() && ws.join(".venv-uv/bin/python").exists());
    assert!(nonempty_dir(&cache(&h).join("uv")), "{t}");
    assert!(!h.home().join(".cache/uv").exists());
}

#[test]
fn cargo_go_make_and_cc_build_with_path_dependencies() {
    let h = home();
    let ws = h.workspace();
    h.write(
        &ws.join("rs/app/Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2018\"\n\n\
         [dependencies]\ndep = { path = \"../dep\" }\n",
    );
    h.write(
        &ws.join("rs/app/src/main.rs"),
        "fn main() { println!(\"{}\", dep::msg()); }\n",
    );
    h.write(
        &ws.join("rs/dep/Cargo.toml"),
        "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2018\"\n",
    );
    h.write(
        &ws.join("rs/dep/src/lib.rs"),
        "pub fn msg() -> &'static str { \"CARGO-DEP-LOADED\" }\n",
    );
    h.write(
        &ws.join("go/go.mod"),
        "module example.com/app\n\ngo 1.19\n\nrequire example.com/lib v0.0.0\n\n\
         replace example.com/lib => ./lib\n",
    );
    h.write(
        &ws.join("go/main.go"),
        "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/lib\"\n)\n\n\
         func main() { fmt.Println(lib.Msg) }\n",
    );
    h.write(
        &ws.join("go/lib/go.mod"),
        "module example.com/lib\n\ngo 1.19\n",
    );
    h.write(
        &ws.join("go/lib/lib.go"),
        "package lib\n\nconst Msg = \"GO-LIB-LOADED\"\n",
    );
    h.write(
        &ws.join("c/hello.c"),
        "#include <stdio.h>\nint main(void) { puts(\"CC-BUILT\"); return 0; }\n",
    );
    h.write(
        &ws.join("c/Makefile"),
        "hello: hello.c\n\tcc -o hello hello.c\n",
    );
    let t = run(
        &h,
        "set -e; (cd rs/app && cargo build --offline && ./target/debug/app); \
         (cd go && go build -o app . && ./app); (cd c && make && ./hello)",
    );
    for built in ["CARGO-DEP-LOADED", "GO-LIB-LOADED", "CC-BUILT"] {
        assert!(t.contains(built), "{built}: {t}");
    }
    assert!(ws.join("rs/app/target/debug/app").is_file());
    assert!(ws.join("go/app").is_file() && ws.join("c/hello").is_file());
    // go's build cache is sandpit's, not ~/.cache/go-build or ~/go.
    assert!(nonempty_dir(&cache(&h).join("go-build")), "{t}");
    for host in [".cache/go-build", "go", ".cargo"] {
        assert!(!h.home().join(host).exists(), "{host} was written");
    }
}

#[test]
fn temp_files_land_in_the_runs_scratch_dir_and_tmp_is_private() {
    let h = home();
    let marker = format!("sandpit-everyday-{}", std::process::id());
    let script = format!(
        r#"
set -e
[ -d "$TMPDIR" ] && [ -w "$TMPDIR" ] && echo "TMPDIR-OK $TMPDIR"
for f in "$(mktemp)" "$(mktemp -d)" "$(mktemp -t x.XXXXXX)" "$(mktemp --tmpdir=)" "$(mktemp --tmpdir=$TMPDIR y.XXXXXX)"; do
  case "$f" in "$TMPDIR"/*) echo "IN-TMPDIR $f" ;; *) echo "OUTSIDE $f" ;; esac
done
python3 -c 'import tempfile; print("PY", tempfile.gettempdir())'
echo private > /tmp/{marker} && cat /tmp/{marker}
echo shm > /dev/shm/{marker} && cat /dev/shm/{marker}
"#
    );
    let t = run(&h, &script);
    let tmpdir = t
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR-OK "))
        .unwrap_or_else(|| panic!("{t}"))
        .to_string();
    assert_eq!(t.matches("IN-TMPDIR").count(), 5, "{t}");
    assert!(!t.contains("OUTSIDE"), "{t}");
    assert!(t.contains(&format!("PY {tmpdir}\n")), "{t}");
    assert!(t.contains("private\nshm\n"), "{t}");
    // The private /tmp and /dev/shm were the run's own: nothing reached the host's,
    // and the scratch dir is gone with the run.
    assert!(!Path::new("/tmp").join(&marker).exists());
    assert!(!Path::new("/dev/shm").join(&marker).exists());
    assert!(!Path::new(&tmpdir).exists(), "{tmpdir} outlived the run");
    // `explain` says what the run did: the private /tmp and /dev/shm are writable,
    // and sockets made there are the run's own.
    for what in [
        ["write", "/tmp/x"],
        ["write", "/dev/shm/x"],
        ["unix", "/tmp/own.sock"],
    ] {
        let o = h.sandpit().arg("explain").args(what).output().unwrap();
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            said.starts_with("ALLOW") && said.contains("private tmpfs of this run"),
            "{what:?}: {said}"
        );
    }
}

#[test]
fn sandpit_config_shows_the_caches_and_their_grant() {
    let h = home();
    let o = h.sandpit().arg("config").output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("# caches    = ~/.cache/sandpit/"), "{t}");
    for (var, sub) in [
        ("npm_config_cache", "npm"),
        ("PIP_CACHE_DIR", "pip"),
        ("UV_CACHE_DIR", "uv"),
        ("GOCACHE", "go-build"),
        ("CARGO_HOME", "cargo"),
    ] {
        assert!(
            t.lines().any(|l| l.contains(var)
                && l.contains("~/.cache/sandpit/")
                && l.contains(&format!("/{sub}  ("))),
            "{var}: {t}"
        );
    }
    assert!(
        t.lines()
            .any(|l| l.contains("\"~/.cache/sandpit/") && l.ends_with("# sandpit package caches")),
        "{t}"
    );
    // A protected cache location means no cache: nothing is granted or shown.
    h.user_config("[files]\nblock_write = [\"~/.cache\"]\n");
    let t = text(&h.sandpit().arg("config").output().unwrap());
    assert!(
        !t.contains("# caches") && !t.contains("package caches"),
        "{t}"
    );
}

/// A registry on loopback serving fixed paths, recording every request path.
struct Registry {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Registry {
    fn serve(l: TcpListener, files: HashMap<String, (&'static str, Vec<u8>)>) -> Registry {
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(vec![]));
        let s2 = seen.clone();
        let files = Arc::new(files);
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                let (files, seen) = (files.clone(), s2.clone());
                std::thread::spawn(move || {
                    let mut head = vec![];
                    let mut b = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match c.read(&mut b) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&b[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&head)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_string();
                    let target = line.split(' ').nth(1).unwrap_or("").to_string();
                    // Absolute form (a forwarding proxy may keep it): keep the path.
                    let path = match target.strip_prefix("http://") {
                        Some(rest) => rest.find('/').map_or("/".into(), |i| rest[i..].to_string()),
                        None => target,
                    };
                    let path = path.split('?').next().unwrap_or("").to_string();
                    seen.lock().unwrap().push(path.clone());
                    let resp = match files.get(&path) {
                        Some((ctype, body)) => {
                            let mut r = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
                                 Cache-Control: max-age=600\r\nConnection: close\r\n\r\n",
                                body.len()
                            )
                            .into_bytes();
                            r.extend_from_slice(body);
                            r
                        }
                        None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                    };
                    let _ = c.write_all(&resp);
                });
            }
        });
        Registry { port, seen }
    }
    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

#[test]
fn npm_pip_uv_and_go_reach_an_allowed_registry_through_the_proxy() {
    let h = home();
    let tgz = std::fs::read(npm_tarball(&h)).unwrap();
    let whl = std::fs::read(wheel(&h)).unwrap();
    // A Go module as a module proxy serves it (GOPROXY protocol: list, info, mod, zip).
    let gomod = "module example.com/lib\n\ngo 1.19\n";
    bare(
        &h,
        r#"python3 - <<'EOF'
import os, zipfile
with zipfile.ZipFile(os.path.expanduser("~/fx/lib.zip"), "w") as z:
    z.writestr("example.com/lib@v1.0.0/go.mod", "module example.com/lib\n\ngo 1.19\n")
    z.writestr("example.com/lib@v1.0.0/lib.go", 'package lib\n\nconst Msg = "GO-PROXY-LOADED"\n')
EOF"#,
    );
    let gozip = std::fs::read(h.home().join("fx/lib.zip")).unwrap();
    h.write(
        &h.workspace().join("g/go.mod"),
        "module example.com/app\n\ngo 1.19\n\nrequire example.com/lib v1.0.0\n",
    );
    h.write(
        &h.workspace().join("g/main.go"),
        "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/lib\"\n)\n\n\
         func main() { fmt.Println(lib.Msg) }\n",
    );
    let listener = TcpListener::bind(("127.0.0.3", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = format!("http://registry.test:{port}");
    let packument = format!(
        r#"{{"name":"lpkg","dist-tags":{{"latest":"1.0.0"}},"versions":{{"1.0.0":{{"name":"lpkg","version":"1.0.0","main":"index.js","dist":{{"tarball":"{base}/lpkg/-/lpkg-1.0.0.tgz"}}}}}}}}"#
    );
    let index = "<html><body><a href=\"/files/lwheel-1.0-py3-none-any.whl\">lwheel-1.0-py3-none-any.whl</a></body></html>";
    let mut files = HashMap::new();
    files.insert(
        "/lpkg".to_string(),
        ("application/json", packument.into_bytes()),
    );
    files.insert(
        "/lpkg/-/lpkg-1.0.0.tgz".to_string(),
        ("application/octet-stream", tgz),
    );
    files.insert(
        "/simple/lwheel/".to_string(),
        ("text/html", index.as_bytes().to_vec()),
    );
    files.insert(
        "/files/lwheel-1.0-py3-none-any.whl".to_string(),
        ("application/octet-stream", whl),
    );
    let v = "/example.com/lib/@v";
    for (path, ctype, body) in [
        (format!("{v}/list"), "text/plain", b"v1.0.0\n".to_vec()),
        (
            format!("{v}/v1.0.0.info"),
            "application/json",
            br#"{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}"#.to_vec(),
        ),
        (
            format!("{v}/v1.0.0.mod"),
            "text/plain",
            gomod.as_bytes().to_vec(),
        ),
        (format!("{v}/v1.0.0.zip"), "application/zip", gozip),
    ] {
        files.insert(path, (ctype, body));
    }
    let reg = Registry::serve(listener, files);
    assert_eq!(reg.port, port);
    h.user_config(&format!(
            "[network]\nallow = [\"registry.test:{port}\"]\n[network.resolve]\n\"registry.test\" = \"127.0.0.3\"\n"
        ),
    );
    let script = format!(
        r#"
set -e
mkdir n && cd n
npm install --no-audit --no-fund --registry {base}/ lpkg
node -p "require('lpkg')"
cd ..
python3 -m venv .venv
PIP_TRUSTED_HOST=registry.test .venv/bin/pip install --index-url {base}/simple/ lwheel
.venv/bin/python -c 'import lwheel; print(lwheel.MSG)'
uv venv -q .venv-uv
uv pip install -q --python .venv-uv --index-url {base}/simple/ lwheel
.venv-uv/bin/python -c 'import lwheel; print("UV", lwheel.MSG)'
cd g && GOPROXY={base} GOSUMDB=off GOFLAGS="$GOFLAGS -mod=mod" go build -o app . && ./app
"#
    );
    let t = run(&h, &script);
    for loaded in [
        "LPKG-LOADED",
        "LWHEEL-LOADED",
        "UV LWHEEL-LOADED",
        "GO-PROXY-LOADED",
    ] {
        assert!(t.contains(loaded), "{loaded}: {t}");
    }
    let seen = reg.seen();
    for path in [
        "/lpkg",
        "/lpkg/-/lpkg-1.0.0.tgz",
        "/simple/lwheel/",
        "/files/lwheel-1.0-py3-none-any.whl",
        "/example.com/lib/@v/v1.0.0.zip",
    ] {
        assert!(
            seen.iter().any(|s| s == path),
            "{path} not requested: {seen:?}\n{t}"
        );
    }
    // The only way out of the sandbox's network namespace is the proxy: the requests
    // went through it, and what they fetched sits in sandpit's caches.
    let c = cache(&h);
    assert!(nonempty_dir(&c.join("npm/_cacache/index-v5")), "{t}");
    assert!(nonempty_dir(&c.join("pip")), "{t}");
    assert!(nonempty_dir(&c.join("uv")), "{t}");
    assert!(
        c.join("go/pkg/mod/example.com/lib@v1.0.0/lib.go").is_file(),
        "{t}"
    );
    assert!(!h.home().join("go").exists());
    assert!(!h.home().join(".npm").exists() && !h.home().join(".cache/pip").exists());
}

#[test]
fn absent_credential_files_read_as_absent_and_present_ones_stay_refused() {
    // Tools probe config files that may hold tokens (`~/.npmrc`, `~/.yarnrc.yml`) and
    // treat "absent" as "none" but "permission denied" as fatal (yarn).
    let h = home();
    let script = "cat ~/.npmrc; cat ~/.yarnrc.yml; echo END";
    let t = run(&h, script);
    assert_eq!(t.matches("No such file or directory").count(), 2, "{t}");
    assert!(!t.contains("deny read"), "an absent file is no denial: {t}");
    // Present, they are refused as before (interposer: EACCES with the rule; the
    // kernel masks them underneath) and nothing of them shows.
    const CANARY: &str = "CANARY-everyday-npmrc-5d1e";
    h.write(
        &h.home().join(".npmrc"),
        &format!("//r/:_authToken={CANARY}\n"),
    );
    h.write(
        &h.home().join(".yarnrc.yml"),
        &format!("npmAuthToken: {CANARY}\n"),
    );
    let t = run(&h, script);
    assert!(!t.contains(CANARY), "{t}");
    assert_eq!(t.matches("Permission denied").count(), 2, "{t}");
    assert!(t.contains("deny read ~/.npmrc"), "{t}");
    let static_probe = h
        .sandpit()
        .args(["run", "--kernel-only", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(!text(&static_probe).contains(CANARY));
}

#[test]
fn overlapping_runs_keep_placeholders_until_the_last_one_ends() {
    use std::process::Stdio;
    let h = home();
    let ws = h.workspace();
    let start = |script: &str| {
        let mut c = h.sandpit();
        c.args(["run", "--", "sh", "-c", script]);
        common::spawn_ready(c, Stdio::null())
    };
    let (mut first, _) = start("echo ready; while [ ! -e go1 ]; do sleep 0.05; done");
    let (mut second, mut second_out) = start(
        "echo ready; while [ ! -e go2 ]; do sleep 0.05; done; \
         echo '{}' > .mcp.json || echo REFUSED",
    );
    h.write(&ws.join("go1"), "");
    assert!(first.wait().unwrap().success());
    // The first run made them; the second still relies on them: they stay.
    for p in PROTECTED {
        assert!(ws.join(p).is_dir(), "{p} removed while a run relies on it");
    }
    h.write(&ws.join("go2"), "");
    assert!(second.wait().unwrap().success());
    assert_eq!(second_out.next().unwrap().unwrap(), "REFUSED");
    // The last run out removed every placeholder, its own or not.
    for p in PROTECTED {
        assert!(!ws.join(p).exists(), "{p} left behind");
    }
}

/// Placeholders are made ahead of time in sandpit's state (`~/.sandpit/spare`) and
/// put in its trash after the run, to be removed once the launcher is gone. A file the user
/// writes into a placeholder on the host during the run stays in the workspace; a
/// handle held on a placeholder after its run (a shell whose working directory it
/// was) never reaches a later run's placeholders: what is written through it ends up
/// in the trash, put aside, not lost.
#[test]
fn placeholders_are_made_ahead_and_a_held_one_reaches_no_later_run() {
    use std::os::fd::AsRawFd;
    use std::process::Stdio;
    let h = home();
    let ws = h.workspace();
    let placeholders: Vec<&str> = PROTECTED.iter().copied().chain([".git"]).collect();
    let wait_for_go = |go: &str| {
        let mut c = h.sandpit();
        c.args(["run", "--", "sh", "-c"]);
        c.arg(format!(
            "echo ready; while [ ! -e {go} ]; do sleep 0.05; done"
        ));
        common::spawn_ready(c, Stdio::null())
    };
    let (mut first, _) = wait_for_go("go1");
    let held = std::fs::File::open(ws.join(".vscode")).unwrap();
    h.write(&ws.join(".idea/notes.txt"), "mine");
    // The run's tending process, which empties the trash once the launcher is gone,
    // held until the handle has been written through.
    let tender = common::Stopped::new(common::tender_of(first.id()));
    h.write(&ws.join("go1"), "");
    assert!(first.wait().unwrap().success());
    assert_eq!(
        std::fs::read_to_string(ws.join(".idea/notes.txt")).unwrap(),
        "mine"
    );
    for p in placeholders.iter().filter(|p| **p != ".idea") {
        assert!(!ws.join(p).exists(), "{p} left behind");
    }
    // Written through the handle after the run, into the trash.
    let via = PathBuf::from(format!("/proc/self/fd/{}/planted", held.as_raw_fd()));
    std::fs::write(&via, "through a held handle").unwrap();
    drop(held);
    drop(tender);
    std::fs::remove_dir_all(ws.join(".idea")).unwrap();
    let (mut second, _) = wait_for_go("go2");
    for p in &placeholders {
        let n = std::fs::read_dir(ws.join(p)).map(|d| d.count());
        assert_eq!(n.unwrap_or(0), 0, "{p} is no empty placeholder");
    }
    // A second run that lasts is tended while it runs: the planted file is kept
    // where the trash is emptied, put aside.
    let trash = h.home().join(".sandpit/burn");
    // Made by the tending process when it first moves an entry there: it may not
    // be there yet while this waits.
    let kept = || -> Vec<PathBuf> {
        std::fs::read_dir(&trash)
            .into_iter()
            .flatten()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("planted").exists())
            .collect()
    };
    common::wait_until(10, "the planted file put aside as `.not-empty`", || {
        kept()
            .iter()
            .any(|k| k.to_string_lossy().ends_with(".not-empty"))
    });
    h.write(&ws.join("go2"), "");
    assert!(second.wait().unwrap().success());
    let kept = kept();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0].to_string_lossy().ends_with(".not-empty"),
        "{kept:?}"
    );
    assert_eq!(
        std::fs::read_to_string(kept[0].join("planted")).unwrap(),
        "through a held handle"
    );
}

/// What a run leaves for later (its placeholders, its scratch and socket
/// directories) goes to a trash and is removed after the run by a process of
/// sandpit's own, however short the run, in both modes: nothing piles up from one
/// run to the next, and in namespace mode the next runs' placeholders are made ahead.
#[test]
fn short_runs_leave_nothing_to_pile_up() {
    for ns in [true, false] {
        let h = home();
        let runtime = h.home().join("runtime");
        std::fs::create_dir(&runtime).unwrap();
        h.give_to_test_user(&runtime);
        let state = h.home().join(".sandpit");
        let scratch = runtime.join("sandpit");
        let count = |p: PathBuf| std::fs::read_dir(p).map_or(0, |d| d.count());
        let trash = || count(state.join("trash")) + count(scratch.join(".trash"));
        let burn = || count(state.join("burn")) + count(scratch.join(".burn"));
        let sandpit = |script: &str| {
            let mut c = h.sandpit();
            c.env("XDG_RUNTIME_DIR", &runtime);
            if !ns {
                c.env("SANDPIT_FORCE_FALLBACK", "1")
                    .arg("run")
                    .arg("--allow-degraded");
            } else {
                c.arg("run");
            }
            c.args(["--", "sh", "-c", script]);
            c
        };
        for _ in 0..8 {
            let o = sandpit("true").output().unwrap();
            assert!(o.status.success(), "{}", text(&o));
        }
        // One more, its tending held until its launcher is gone: what the run left
        // is in the trash then.
        let mut waits = sandpit("echo ready; read _ || true");
        waits.stdin(std::process::Stdio::piped());
        let (mut last, _) = common::spawn_ready(waits, std::process::Stdio::null());
        let tender = common::Stopped::new(common::tender_of(last.id()));
        drop(last.stdin.take());
        assert!(last.wait().unwrap().success());
        let left = trash() + burn();
        let least = if ns { 9 } else { 1 };
        assert!(
            left >= least,
            "namespaces: {ns}: {left} in the trash after the run (at least {least}: the \
             placeholders, the scratch and socket directories)"
        );
        drop(tender);
        common::wait_for(20, || trash() + burn() == 0);
        assert_eq!(
            (trash(), burn()),
            (0, 0),
            "namespaces: {ns}: left behind in the trash"
        );
        if ns {
            assert!(count(state.join("spare")) >= 9, "spares made ahead");
        }
    }
}

/// The degraded mode (no user namespaces: Landlock + seccomp only) as it is: caches,
/// `TMPDIR` and installs work; no placeholder is made (there is no mount to hold
/// one), so protected paths are guarded by the interposer only (dynamic programs)
/// and the start-up line says so; `/tmp` is the host's and stays unwritable.
#[test]
fn degraded_mode_keeps_caches_and_tmpdir_and_says_what_is_weaker() {
    let h = home();
    let tgz = npm_tarball(&h);
    let marker = format!("sandpit-everyday-degraded-{}", std::process::id());
    let script = format!(
        "set -e; npm install --no-audit --no-fund {}; node -p \"require('lpkg')\"; \
         f=$(mktemp); case \"$f\" in \"$TMPDIR\"/*) echo IN-TMPDIR ;; esac; \
         ls -a; set +e; echo '{{}}' > .mcp.json || echo MCP-REFUSED; \
         echo x > /tmp/{marker} || echo TMP-REFUSED",
        tgz.display()
    );
    let o = h
        .sandpit()
        .args(["run", "--allow-degraded", "--network", "offline", "--"])
        .args(["sh", "-c", &script])
        .env("SANDPIT_FORCE_FALLBACK", "1")
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("DEGRADED"), "{t}");
    assert!(
        t.contains("weaker: protected paths inside the workspace stay writable"),
        "{t}"
    );
    assert!(t.contains("LPKG-LOADED") && t.contains("IN-TMPDIR"), "{t}");
    assert!(nonempty_dir(&cache(&h).join("npm/_cacache")), "{t}");
    // No placeholder inside or out; the interposer still refuses the protected file.
    for p in PROTECTED {
        assert!(!t.contains(&format!("\n{p}\n")), "{p} inside: {t}");
        assert!(!h.workspace().join(p).exists(), "{p} on the host");
    }
    assert!(
        t.contains("MCP-REFUSED") && t.contains("TMP-REFUSED"),
        "{t}"
    );
    assert!(!Path::new("/tmp").join(&marker).exists());
}

/// The private /tmp and /dev/shm live in memory: each holds at most
/// `limits.tmp_bytes` (2 GiB by default), so the sandbox cannot take the machine's
/// memory by filling them; past it a write gets "No space left on device". The
/// same 2 MiB fit under the default (the control).
#[test]
fn the_private_tmpfs_mounts_hold_at_most_limits_tmp_bytes() {
    let h = home();
    let script = "for d in /tmp /dev/shm; do \
                    if head -c 2097152 /dev/zero > $d/big 2>/dev/null; then echo \"$d FIT\"; \
                    else echo \"$d FULL $(stat -c %s $d/big)\"; fi; done";
    let t = run(&h, script);
    assert!(t.contains("/tmp FIT") && t.contains("/dev/shm FIT"), "{t}");
    h.user_config("[limits]\ntmp_bytes = 1048576\n");
    let t = run(&h, script);
    for d in ["/tmp", "/dev/shm"] {
        let size: u64 = t
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{d} FULL ")))
            .unwrap_or_else(|| panic!("{d} took 2 MiB: {t}"))
            .trim()
            .parse()
            .unwrap();
        assert!(size <= 1 << 20, "{d}: {size}");
    }
}
