//! Each tool's argument forms: the destinations found and what is refused.
use super::*;
use crate::NoCtx;
use std::collections::HashMap;

fn run_with(tool: &str, args: &[&str], ctx: &dyn Ctx) -> Analysis {
    let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    analyze(tool, &v, ctx)
}

fn dests(tool: &str, args: &[&str]) -> Vec<(String, Option<u16>)> {
    let a = run_with(tool, args, &NoCtx);
    assert!(
        a.refusals.is_empty(),
        "{tool} {args:?} refused: {:?}",
        a.refusals
    );
    a.dests.into_iter().map(|d| (d.host, d.port)).collect()
}

fn refused(tool: &str, args: &[&str]) -> Vec<Refusal> {
    let a = run_with(tool, args, &NoCtx);
    assert!(
        !a.refusals.is_empty(),
        "{tool} {args:?} not refused: {:?}",
        a.dests
    );
    a.refusals
}

fn hp(h: &str, p: u16) -> (String, Option<u16>) {
    (h.to_string(), Some(p))
}

#[derive(Default)]
struct MapCtx {
    env: HashMap<String, String>,
    files: HashMap<String, String>,
    git: Option<Vec<(String, String)>>,
}

impl Ctx for MapCtx {
    fn env(&self, n: &str) -> Option<String> {
        self.env.get(n).cloned()
    }
    fn read_file(&self, p: &str) -> Option<String> {
        self.files.get(p).cloned()
    }
    fn git_config(&self, _: &[String]) -> Option<Vec<(String, String)>> {
        self.git.clone()
    }
}

#[test]
fn curl_forms() {
    assert_eq!(
        dests("curl", &["-sSL", "https://a.test/x"]),
        vec![hp("a.test", 443)]
    );
    assert_eq!(dests("curl", &["a.test:8080/x"]), vec![hp("a.test", 8080)]);
    // -o takes a value: "b.test" is a file name, not a URL; -sSo clusters.
    assert_eq!(
        dests("curl", &["-sSob.test", "http://a.test"]),
        vec![hp("a.test", 80)]
    );
    assert_eq!(
        dests("curl", &["-x", "p.test:3128", "http://a.test"]),
        vec![hp("p.test", 3128), hp("a.test", 80)]
    );
    assert_eq!(
        dests("curl", &["--proxy=socks5h://s.test", "a.test"])[0],
        hp("s.test", 1080)
    );
    assert_eq!(
        dests("curl", &["-xp.test", "a.test"])[0],
        hp("p.test", 1080)
    );
    assert_eq!(
        dests("curl", &["--preproxy", "pp.test:1", "a.test"])[0],
        hp("pp.test", 1)
    );
    assert_eq!(
        dests(
            "curl",
            &["--resolve", "a.test:443:10.0.0.1,[::2]", "https://a.test"]
        ),
        vec![hp("10.0.0.1", 443), hp("::2", 443), hp("a.test", 443)]
    );
    assert_eq!(
        dests(
            "curl",
            &[
                "--connect-to",
                "a.test:443:evil.test:8443",
                "https://a.test"
            ]
        ),
        vec![hp("evil.test", 8443), hp("a.test", 443)]
    );
    assert_eq!(
        dests("curl", &["--connect-to", "::b.test:", "https://a.test"]),
        vec![("b.test".to_string(), None), hp("a.test", 443)]
    );
    assert_eq!(
        dests(
            "curl",
            &["--connect-to", "a.test:443::8443", "https://a.test"]
        ),
        vec![hp("a.test", 443), hp("a.test", 8443)]
    );
    // Abbreviated long option (curl accepts unique prefixes).
    assert_eq!(
        dests("curl", &["--resol", "a.test:80:1.2.3.4", "a.test"])[0],
        hp("1.2.3.4", 80)
    );
    assert_eq!(
        dests("curl", &["--url", "ftp://f.test"]),
        vec![hp("f.test", 21)]
    );
    assert_eq!(
        dests("curl", &["--doh-url", "https://doh.test/q"]),
        vec![hp("doh.test", 443)]
    );
    assert_eq!(dests("curl", &["--", "-a.test"]), vec![hp("-a.test", 80)]);
    assert_eq!(
        dests("curl", &["--proto-default", "https", "a.test"]),
        vec![hp("a.test", 443)]
    );
    // Unknown option: the next word is judged, not swallowed.
    assert_eq!(
        dests("curl", &["--frobnicate", "b.test"]),
        vec![hp("b.test", 80)]
    );
    assert!(dests("curl", &["--version"]).is_empty());
    assert_eq!(
        dests(
            "curl",
            &["--data", "@-", "https://a.test", "-:", "http://b.test"]
        ),
        vec![hp("a.test", 443), hp("b.test", 80)]
    );
}

#[test]
fn curl_refusals() {
    refused("curl", &["http://{a,b}.test"]);
    refused("curl", &["http://a.test@b.test@c.test/"]);
    refused("curl", &["-K", "-"]);
    refused("curl", &["--config", "/nonexistent"]);
    refused("curl", &["-sK/nonexistent", "http://a.test"]);
}

#[test]
fn curl_config_files_are_judged() {
    let mut ctx = MapCtx::default();
    ctx.files.insert(
        "/c".into(),
        "# comment\nurl = \"http://c1.test\"\n--proxy p.test:9\nsilent\n".into(),
    );
    ctx.files
        .insert("/h/.curlrc".into(), "proxy = \"rc.test:7\"\n".into());
    ctx.env.insert("HOME".into(), "/h".into());
    let a = run_with("curl", &["-K", "/c", "a.test"], &ctx);
    let got: Vec<_> = a.dests.iter().map(|d| (d.host.as_str(), d.port)).collect();
    assert!(got.contains(&("rc.test", Some(7))), "{got:?}");
    assert!(got.contains(&("p.test", Some(9))), "{got:?}");
    assert!(got.contains(&("c1.test", Some(80))), "{got:?}");
    assert!(got.contains(&("a.test", Some(80))), "{got:?}");
    // -q first: no curlrc.
    let a = run_with("curl", &["-q", "a.test"], &ctx);
    assert!(!a.dests.iter().any(|d| d.host == "rc.test"));
}

#[test]
fn wget_forms() {
    assert_eq!(
        dests("wget", &["-qO-", "https://a.test/x"]),
        vec![hp("a.test", 443)]
    );
    assert_eq!(
        dests("wget", &["-O", "out", "a.test"]),
        vec![hp("a.test", 80)]
    );
    assert_eq!(
        dests("wget", &["--output-document=o", "a.test"]),
        vec![hp("a.test", 80)]
    );
    assert_eq!(
        dests(
            "wget",
            &["-e", "use_proxy=on", "-e", "https_proxy=p.test:8", "a.test"]
        ),
        vec![hp("p.test", 8), hp("a.test", 80)]
    );
    assert_eq!(
        dests("wget", &["--execute=http_proxy=http://p.test", "a.test"])[0],
        hp("p.test", 80)
    );
    assert_eq!(dests("wget", &["-nv", "a.test"]), vec![hp("a.test", 80)]);
    assert_eq!(
        dests("wget", &["--exec", "ftp_proxy=f.test:1", "a.test"])[0],
        hp("f.test", 1)
    );
    refused("wget", &["-i", "-"]);
    refused("wget", &["-i", "/nonexistent"]);
    refused("wget", &["--input-file=http://list.test/urls"]);
    refused("wget", &["--config=/nonexistent", "a.test"]);
    let mut ctx = MapCtx::default();
    ctx.files
        .insert("/u".into(), "http://u1.test\n\nu2.test:81\n".into());
    ctx.files
        .insert("/rc".into(), "https_proxy = rcp.test:3\n".into());
    let a = run_with("wget", &["-i", "/u", "--config", "/rc"], &ctx);
    let got: Vec<_> = a.dests.iter().map(|d| (d.host.as_str(), d.port)).collect();
    assert_eq!(
        got,
        vec![
            ("u1.test", Some(80)),
            ("u2.test", Some(81)),
            ("rcp.test", Some(3))
        ]
    );
}

#[test]
fn nc_forms() {
    assert_eq!(
        dests("nc", &["-zv", "a.test", "80"]),
        vec![hp("a.test", 80)]
    );
    assert_eq!(
        dests("nc", &["-w", "3", "a.test", "22", "80-81"]),
        vec![hp("a.test", 22), hp("a.test", 80), hp("a.test", 81)]
    );
    assert_eq!(
        dests("nc", &["-w3", "a.test", "https"]),
        vec![hp("a.test", 443)]
    );
    assert_eq!(
        dests(
            "nc",
            &["-X", "connect", "-x", "p.test:3128", "a.test", "443"]
        ),
        vec![hp("p.test", 3128), hp("a.test", 443)]
    );
    assert!(dests("nc", &["-l", "8080"]).is_empty());
    assert!(dests("nc", &["-lp", "8080"]).is_empty());
    assert!(dests("nc", &["-U", "/tmp/sock"]).is_empty());
    assert_eq!(
        dests("ncat", &["--proxy", "p.test:8", "a.test", "1"])[0],
        hp("p.test", 8)
    );
    assert_eq!(
        dests("netcat", &["--", "a.test", "9"]),
        vec![hp("a.test", 9)]
    );
    assert_eq!(dests("nc", &["[::1]", "9"]), vec![hp("::1", 9)]);
    refused("nc", &["a.test", "1-65535"]);
    refused("nc", &["a.test", "nosuchservice"]);
    assert_eq!(dests("telnet", &["a.test"]), vec![hp("a.test", 23)]);
    assert_eq!(
        dests("telnet", &["-l", "u", "a.test", "25"]),
        vec![hp("a.test", 25)]
    );
    refused("telnet", &[]);
    assert_eq!(dests("ftp", &["a.test"]), vec![hp("a.test", 21)]);
    assert_eq!(dests("ftp", &["ftp://a.test/x"]), vec![hp("a.test", 21)]);
    refused("ftp", &["-n"]);
}

#[test]
fn ssh_forms() {
    assert_eq!(dests("ssh", &["u@a.test"]), vec![hp("a.test", 22)]);
    assert_eq!(
        dests("ssh", &["-p", "2222", "a.test", "ls", "-p", "9"]),
        vec![hp("a.test", 2222)]
    );
    assert_eq!(
        dests("ssh", &["-p2222", "-v", "a.test"]),
        vec![hp("a.test", 2222)]
    );
    assert_eq!(
        dests("ssh", &["a.test", "-p", "2200", "uptime"]),
        vec![hp("a.test", 2200)]
    );
    assert_eq!(dests("ssh", &["-vTp22", "a.test"]), vec![hp("a.test", 22)]);
    assert_eq!(
        dests("ssh", &["ssh://u@a.test:2022"]),
        vec![hp("a.test", 2022)]
    );
    assert_eq!(
        dests("ssh", &["-oPort=23", "a.test"]),
        vec![hp("a.test", 23)]
    );
    assert_eq!(
        dests("ssh", &["-o", "Port 24", "a.test"]),
        vec![hp("a.test", 24)]
    );
    assert_eq!(
        dests("ssh", &["-o", "HostName=b.test", "a.test"]),
        vec![hp("b.test", 22), hp("a.test", 22)]
    );
    assert_eq!(
        dests("ssh", &["-L", "8080:c.test:80", "a.test"]),
        vec![hp("c.test", 80), hp("a.test", 22)]
    );
    assert_eq!(
        dests("ssh", &["-W", "[::1]:25", "a.test"])[0],
        hp("::1", 25)
    );
    assert_eq!(
        dests(
            "ssh",
            &["-F", "/dev/null", "-o", "ProxyCommand=none", "a.test"]
        ),
        vec![hp("a.test", 22)]
    );
    assert_eq!(
        dests("ssh", &["--", "a.test", "-p", "9"]),
        vec![hp("a.test", 22)]
    );
    assert!(run_with("ssh", &["a.test"], &NoCtx).ssh_tunnel);
    refused("ssh", &["-o", "ProxyCommand=nc evil 22", "a.test"]);
    refused("ssh", &["-oproxycommand nc evil 22", "a.test"]);
    refused("ssh", &["-J", "jump.test", "a.test"]);
    refused("ssh", &["-o", "ProxyJump=jump.test", "a.test"]);
    refused("ssh", &["-F", "/tmp/cfg", "a.test"]);
    refused("ssh", &["-D", "1080", "a.test"]);
    refused("ssh", &["-R", "1080", "a.test"]);
    refused("ssh", &["-o", "CanonicalizeHostname=yes", "a.test"]);
    refused("ssh", &["a@b@c.test"]);
}

#[test]
fn scp_sftp_forms() {
    assert_eq!(dests("scp", &["f", "u@a.test:/x"]), vec![hp("a.test", 22)]);
    assert_eq!(
        dests("scp", &["-P", "2222", "-r", "a.test:x", "."]),
        vec![hp("a.test", 2222)]
    );
    assert_eq!(
        dests("scp", &["-rP2222", "a.test:x", "b.test:y"]),
        vec![hp("a.test", 2222), hp("b.test", 2222)]
    );
    assert_eq!(
        dests("scp", &["scp://u@a.test:2/x", "."]),
        vec![hp("a.test", 2)]
    );
    assert_eq!(dests("scp", &["u@[::1]:x", "."]), vec![hp("::1", 22)]);
    assert!(dests("scp", &["./a:b", "/c:d"]).is_empty());
    assert_eq!(
        dests("scp", &["--", "a.test:x", "."]),
        vec![hp("a.test", 22)]
    );
    refused("scp", &["-S", "/bin/prog", "a.test:x", "."]);
    refused("scp", &["-J", "j.test", "a.test:x", "."]);
    refused("scp", &["-oProxyCommand=x", "a.test:x", "."]);
    assert_eq!(dests("sftp", &["a.test"]), vec![hp("a.test", 22)]);
    assert_eq!(
        dests("sftp", &["-P", "9", "u@a.test:/dir"]),
        vec![hp("a.test", 9)]
    );
    assert_eq!(dests("sftp", &["sftp://a.test:7/x"]), vec![hp("a.test", 7)]);
    assert!(run_with("scp", &["a.test:x", "."], &NoCtx).ssh_tunnel);
    refused("sftp", &["-S", "prog", "a.test"]);
}

#[test]
fn rsync_forms() {
    assert_eq!(
        dests("rsync", &["-av", "d/", "u@a.test:d/"]),
        vec![hp("a.test", 22)]
    );
    assert_eq!(
        dests("rsync", &["-av", "-e", "ssh -p 2222", "a.test:d/", "."]),
        vec![hp("a.test", 2222)]
    );
    assert_eq!(
        dests("rsync", &["--rsh=ssh -p2", "a.test:d/", "."]),
        vec![hp("a.test", 2)]
    );
    assert_eq!(
        dests("rsync", &["a.test::mod/x", "."]),
        vec![hp("a.test", 873)]
    );
    assert_eq!(
        dests("rsync", &["--port=8873", "a.test::mod/x", "."]),
        vec![hp("a.test", 8873)]
    );
    assert_eq!(
        dests("rsync", &["rsync://a.test:1/m", "."]),
        vec![hp("a.test", 1)]
    );
    assert!(dests("rsync", &["-a", "./x:y", "/tmp/z"]).is_empty());
    refused("rsync", &["-e", "nc", "a.test:x", "."]);
    refused("rsync", &["-e", "ssh -o ProxyCommand=x", "a.test:x", "."]);
}

#[test]
fn socat_forms() {
    assert_eq!(
        dests("socat", &["-", "TCP:a.test:80"]),
        vec![hp("a.test", 80)]
    );
    assert_eq!(
        dests(
            "socat",
            &["-d", "-d", "stdio", "tcp4:[::1]:81,connect-timeout=2"]
        ),
        vec![hp("::1", 81)]
    );
    assert_eq!(
        dests("socat", &["OPENSSL:a.test:443,verify=0", "-"]),
        vec![hp("a.test", 443)]
    );
    assert_eq!(
        dests("socat", &["-t", "5", "TCP-LISTEN:80,fork", "TCP6:b.test:1"]),
        vec![hp("b.test", 1)]
    );
    assert_eq!(
        dests("socat", &["-", "SOCKS4A:s.test:a.test:80,socksport=9050"]),
        vec![hp("s.test", 9050), hp("a.test", 80)]
    );
    assert_eq!(
        dests("socat", &["-", "PROXY:p.test:a.test:443"]),
        vec![hp("p.test", 8080), hp("a.test", 443)]
    );
    assert_eq!(
        dests("socat", &["STDIN!!TCP:a.test:1", "/tmp/file"]),
        vec![hp("a.test", 1)]
    );
    assert!(dests("socat", &["UNIX-CONNECT:/s", "EXEC:ls"]).is_empty());
    refused("socat", &["-", "SOCKET-CONNECT:2:6:x"]);
    refused("socat", &["-", "VSOCK-CONNECT:2:3"]);
}

#[test]
fn dns_forms() {
    assert_eq!(
        dests("dig", &["@1.1.1.1", "a.test"]),
        vec![hp("1.1.1.1", 53)]
    );
    assert_eq!(
        dests("dig", &["-p", "5353", "@ns.test", "a.test", "+short"]),
        vec![hp("ns.test", 5353)]
    );
    assert_eq!(
        dests("dig", &["+tls", "@ns.test", "a.test"]),
        vec![hp("ns.test", 853)]
    );
    assert_eq!(
        dests("dig", &["+https", "@ns.test", "a.test"]),
        vec![hp("ns.test", 443)]
    );
    assert!(dests("dig", &["a.test", "MX"]).is_empty());
    refused("dig", &["-f", "/nonexistent"]);
    let mut ctx = MapCtx::default();
    ctx.files.insert("/b".into(), "a.test @ns2.test\n".into());
    let a = run_with("dig", &["-f", "/b"], &ctx);
    assert_eq!(a.dests[0].host, "ns2.test");
    assert_eq!(
        dests("nslookup", &["a.test", "ns.test"]),
        vec![hp("ns.test", 53)]
    );
    assert_eq!(
        dests("nslookup", &["-port=54", "a.test", "ns.test"]),
        vec![hp("ns.test", 54)]
    );
    assert!(dests("nslookup", &["a.test"]).is_empty());
    refused("nslookup", &[]);
    refused("nslookup", &["-", "ns.test"]);
    assert_eq!(
        dests("host", &["-t", "MX", "a.test", "ns.test"]),
        vec![hp("ns.test", 53)]
    );
    assert!(dests("host", &["a.test"]).is_empty());
}

#[test]
fn nmap_forms() {
    assert_eq!(
        dests("nmap", &["-p", "22,80", "a.test"]),
        vec![hp("a.test", 22), hp("a.test", 80)]
    );
    assert_eq!(
        dests("nmap", &["-sV", "-p80", "a.test"]),
        vec![hp("a.test", 80)]
    );
    assert_eq!(
        dests("nmap", &["-Pn", "a.test"]),
        vec![("a.test".into(), None)]
    );
    refused("nmap", &["10.0.0.0/24"]);
    refused("nmap", &["10.0.0.1-20"]);
    refused("nmap", &["-iL", "hosts.txt"]);
    refused("nmap", &["-iR", "10"]);
    refused("nmap", &["--script", "http-fetch", "a.test"]);
    refused("nmap", &["-p-", "a.test"]);
    // Found by the fuzzer: a non-ASCII option name.
    let _ = run_with("nmap", &["-\u{3a3}C\u{3b5}"], &NoCtx);
}

#[test]
fn git_urls() {
    assert_eq!(
        dests("git", &["clone", "https://a.test/r.git"]),
        vec![hp("a.test", 443)]
    );
    assert_eq!(
        dests(
            "git",
            &["clone", "--depth", "1", "git@a.test:o/r.git", "dir"]
        ),
        vec![hp("a.test", 22)]
    );
    assert_eq!(
        dests("git", &["clone", "--depth=1", "ssh://git@a.test:2222/r"]),
        vec![hp("a.test", 2222)]
    );
    assert_eq!(
        dests("git", &["-C", "/x", "clone", "git://a.test/r"]),
        vec![hp("a.test", 9418)]
    );
    assert_eq!(
        dests("git", &["clone", "-b", "main", "--", "https://a.test/r"]),
        vec![hp("a.test", 443)]
    );
    assert!(dests("git", &["clone", "/local/repo", "x"]).is_empty());
    assert!(dests("git", &["status"]).is_empty());
    assert_eq!(
        dests("git", &["remote", "add", "o", "https://b.test/r"]),
        vec![hp("b.test", 443)]
    );
    assert_eq!(
        dests("git", &["remote", "set-url", "o", "u@c.test:r"]),
        vec![hp("c.test", 22)]
    );
    assert_eq!(
        dests("git", &["push", "https://a.test/r", "main"]),
        vec![hp("a.test", 443)]
    );
    assert_eq!(
        dests("git", &["ls-remote", "https://a.test/r"]),
        vec![hp("a.test", 443)]
    );
    assert_eq!(
        dests(
            "git",
            &["-c", "http.proxy=p.test:3128", "clone", "https://a.test/r"]
        ),
        vec![hp("p.test", 3128), hp("a.test", 443)]
    );
    refused("git", &["clone", "ext::sh -c evil"]);
    refused("git", &["clone", "fd::3"]);
    refused(
        "git",
        &["-c", "core.sshCommand=/tmp/x", "clone", "git@a.test:r"],
    );
    refused(
        "git",
        &[
            "-c",
            "core.sshCommand=ssh -o ProxyCommand=x",
            "fetch",
            "git@a.test:r",
        ],
    );
    refused("git", &["-c", "core.gitProxy=x", "clone", "git://a.test/r"]);
    // A remote name cannot be resolved without the repository's config.
    refused("git", &["fetch", "origin"]);
    refused("git", &["push"]);
}

#[test]
fn git_config_resolves_remotes_insteadof_and_aliases() {
    let ctx = MapCtx {
        git: Some(vec![
            ("remote.origin.url".into(), "https://a.test/r".into()),
            ("remote.origin.pushurl".into(), "git@pushhost.test:r".into()),
            ("remote.up.url".into(), "gh:o/r".into()),
            ("url.https://evil.test/.insteadOf".into(), "gh:".into()),
            ("alias.sync".into(), "fetch up".into()),
        ]),
        ..Default::default()
    };
    let hosts = |args: &[&str]| -> Vec<String> {
        let a = run_with("git", args, &ctx);
        assert!(a.refusals.is_empty(), "{:?}", a.refusals);
        a.dests.into_iter().map(|d| d.host).collect()
    };
    assert_eq!(hosts(&["fetch", "origin"]), vec!["a.test"]);
    assert_eq!(hosts(&["push", "origin"]), vec!["a.test", "pushhost.test"]);
    assert_eq!(hosts(&["fetch", "up"]), vec!["evil.test"]);
    assert_eq!(hosts(&["sync"]), vec!["evil.test"]);
    assert_eq!(hosts(&["clone", "gh:x/y"]), vec!["evil.test"]);
    let all = hosts(&["fetch", "--all"]);
    assert!(all.contains(&"evil.test".to_string()) && all.contains(&"a.test".to_string()));
    let mut env_ctx = MapCtx {
        git: Some(vec![]),
        ..Default::default()
    };
    env_ctx
        .env
        .insert("GIT_SSH_COMMAND".into(), "/usr/bin/ssh".into());
    assert!(!run_with("git", &["fetch", "git@a.test:r"], &env_ctx)
        .refusals
        .is_empty());
    env_ctx
        .env
        .insert("GIT_SSH_COMMAND".into(), "ssh -p 2222".into());
    assert!(run_with("git", &["fetch", "git@a.test:r"], &env_ctx)
        .refusals
        .is_empty());
}

#[test]
fn unknown_tool_names_nothing() {
    assert!(dests("python3", &["-c", "print(1)", "http://a.test"]).is_empty());
}

#[test]
fn environment_proxies_are_judged_unless_they_are_sandpits() {
    let mut ctx = MapCtx::default();
    ctx.env.insert(
        "SANDPIT_PROXY_URL".into(),
        "http://sandpit:t@127.0.0.1:9".into(),
    );
    ctx.env
        .insert("HTTPS_PROXY".into(), "http://sandpit:t@127.0.0.1:9".into());
    ctx.env
        .insert("ALL_PROXY".into(), "socks5h://sandpit:t@127.0.0.1:9".into());
    let a = run_with("curl", &["https://a.test"], &ctx);
    assert_eq!(a.dests.len(), 1, "{:?}", a.dests);
    ctx.env
        .insert("https_proxy".into(), "evil.test:8080".into());
    let a = run_with("curl", &["https://a.test"], &ctx);
    assert!(a
        .dests
        .iter()
        .any(|d| d.host == "evil.test" && d.port == Some(8080)));
    let a = run_with("wget", &["https://a.test"], &ctx);
    assert!(a.dests.iter().any(|d| d.host == "evil.test"));
}
