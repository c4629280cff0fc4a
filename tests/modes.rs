//! Each network mode's exact limits, judged on real processes and held against
//! `sandpit explain`: for every destination class, what explain says is what a run
//! does, for a dynamic program (the interposer sends its connect() to the proxy)
//! and a static one (it uses the proxy variables, as proxy-aware clients do). The
//! destinations are stand-ins in a network namespace of the test's own
//! (`common::lab`): nothing leaves the machine.
//!
//! `unrestricted` lifts host filtering and opens UDP to public addresses, nothing
//! else: a public address is reached over TCP (through the proxy) and over UDP (the
//! kernel layer's relay, static programs included); the host's loopback services,
//! the LAN, link-local and metadata addresses (in every spelling), listening and
//! proxy-unaware TCP clients stay refused, as in `filtered`, where UDP reaches
//! nothing but sandpit's DNS responder.
// Linux only: the lab is a network namespace (macOS is cross-checked, see
// .ci/macos-cross.sh).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod kernel_support;

use common::lab::Lab;
use common::{sandpit_bin, TestHome};
use kernel_support::build_probe;

/// One destination class: where the stand-in listens, how a client names it, and
/// whether unrestricted mode opens it.
struct Dest {
    class: &'static str,
    listen: &'static str,
    /// The address the probe dials (another spelling of `listen` for some).
    dial: (&'static str, &'static str),
    public: bool,
}

const DESTS: &[Dest] = &[
    Dest {
        class: "public IPv4",
        listen: "1.2.3.4:8080",
        dial: ("1.2.3.4", "8080"),
        public: true,
    },
    Dest {
        class: "public IPv6",
        listen: "[2606:4700:4700::1111]:8080",
        dial: ("2606:4700:4700::1111", "8080"),
        public: true,
    },
    Dest {
        class: "cloud metadata",
        listen: "169.254.169.254:80",
        dial: ("169.254.169.254", "80"),
        public: false,
    },
    Dest {
        class: "metadata, IPv4-mapped",
        listen: "169.254.169.254:81",
        dial: ("::ffff:169.254.169.254", "81"),
        public: false,
    },
    Dest {
        class: "AWS IPv6 metadata",
        listen: "[fd00:ec2::254]:80",
        dial: ("fd00:ec2::254", "80"),
        public: false,
    },
    Dest {
        class: "LAN",
        listen: "10.9.8.7:8080",
        dial: ("10.9.8.7", "8080"),
        public: false,
    },
    Dest {
        class: "host loopback service",
        listen: "127.0.0.1:5432",
        dial: ("127.0.0.1", "5432"),
        public: false,
    },
];

/// The UDP destinations: (class, where the echoing stand-in listens, the address the
/// probe sends to, whether it is public). Only unrestricted mode opens any, and only
/// the public ones.
const UDP_DESTS: &[(&str, &str, (&str, &str), bool)] = &[
    ("public IPv4", "1.2.3.4:5353", ("1.2.3.4", "5353"), true),
    (
        "public IPv6",
        "[2606:4700:4700::1111]:5353",
        ("2606:4700:4700::1111", "5353"),
        true,
    ),
    (
        "cloud metadata",
        "169.254.169.254:53",
        ("169.254.169.254", "53"),
        false,
    ),
    (
        "metadata, IPv4-mapped",
        "169.254.169.254:54",
        ("::ffff:169.254.169.254", "54"),
        false,
    ),
    (
        "AWS IPv6 metadata",
        "[fd00:ec2::254]:53",
        ("fd00:ec2::254", "53"),
        false,
    ),
    ("LAN", "10.9.8.7:53", ("10.9.8.7", "53"), false),
    (
        "host loopback",
        "127.0.0.1:5353",
        ("127.0.0.1", "5353"),
        false,
    ),
    ("host loopback IPv6", "[::1]:5353", ("::1", "5353"), false),
];

/// (label, user config, whether each destination is allowed, by class publicness
/// in unrestricted mode or by the allow list in filtered mode)
const MODES: &[(&str, &str)] = &[
    ("filtered", ""),
    (
        "filtered, 1.2.3.4:8080 allowed",
        "[network]\nallow = [\"1.2.3.4:8080\"]\n",
    ),
    ("offline", "[network]\nmode = \"offline\"\n"),
    ("unrestricted", "[network]\nmode = \"unrestricted\"\n"),
];

fn expected(mode: &str, d: &Dest) -> bool {
    match mode {
        "unrestricted" => d.public,
        "filtered, 1.2.3.4:8080 allowed" => d.listen == "1.2.3.4:8080",
        _ => false,
    }
}

/// What `sandpit explain ARGS…` prints, as the test user.
fn explain(h: &TestHome, args: &[&str]) -> String {
    common::explained(&h.sandpit().arg("explain").args(args).output().unwrap())
}

fn authority(host: &str, port: &str) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[test]
fn explain_and_a_run_agree_on_every_destination_in_every_network_mode() {
    let lab = Lab::new(&[
        "1.2.3.4",
        "2606:4700:4700::1111",
        "169.254.169.254",
        "fd00:ec2::254",
        "10.9.8.7",
    ]);
    let h = TestHome::new();
    // Built under one name; the static build is moved aside first.
    let static_probe = h.workspace().join("net_probe_static");
    std::fs::rename(build_probe(&h, "net_probe", true), &static_probe).unwrap();
    let dynamic = build_probe(&h, "net_probe", false);
    let servers: Vec<_> = DESTS.iter().map(|d| lab.serve(d.listen)).collect();
    let echoes: Vec<_> = UDP_DESTS
        .iter()
        .map(|(_, at, ..)| lab.udp_echo(at))
        .collect();

    // The script every run executes: each probe's line tagged with its case.
    let mut script = String::new();
    for (i, d) in DESTS.iter().enumerate() {
        let (host, port) = d.dial;
        script.push_str(&format!(
            "echo \"dyn {i} $({} connect {host} {port})\"\n\
             echo \"static-proxy {i} $({} proxy {host} {port})\"\n\
             echo \"static-raw {i} $({} connect {host} {port})\"\n",
            dynamic.display(),
            static_probe.display(),
            static_probe.display()
        ));
    }
    for (tag, p) in [("dyn", &dynamic), ("static", &static_probe)] {
        script.push_str(&format!(
            "echo \"{tag}-listen $({p} listen 0.0.0.0 7001)\"\n",
            p = p.display()
        ));
        for (i, (_, _, (host, port), _)) in UDP_DESTS.iter().enumerate() {
            script.push_str(&format!(
                "echo \"{tag}-udp {i} $({p} udp {host} {port})\"\n",
                p = p.display()
            ));
            // sendto() on a socket never connected, to a public and a LAN address.
            if [0, 5].contains(&i) {
                script.push_str(&format!(
                    "echo \"{tag}-udp-to {i} $({p} udp-to {host} {port})\"\n",
                    p = p.display()
                ));
            }
        }
    }
    let line = |out: &str, tag: &str| -> String {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{tag} ")))
            .unwrap_or_else(|| panic!("no line {tag:?} in:\n{out}"))
            .to_string()
    };

    // Control: without sandpit, in the lab, every probe reaches its stand-in.
    let bare = lab
        .command(&h, "sh")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    let bare_out = String::from_utf8_lossy(&bare.stdout).into_owned();
    for (i, d) in DESTS.iter().enumerate() {
        for tag in ["dyn", "static-raw"] {
            let l = line(&bare_out, &format!("{tag} {i}"));
            assert!(l.starts_with("OK LAB"), "bare {tag} {}: {l}", d.class);
        }
    }
    for tag in ["dyn-listen", "static-listen"] {
        assert!(
            line(&bare_out, tag).starts_with("OK"),
            "bare {tag}: {bare_out}"
        );
    }
    for (i, (class, at, ..)) in UDP_DESTS.iter().enumerate() {
        let tags = match i {
            0 | 5 => &["dyn-udp", "static-udp", "dyn-udp-to", "static-udp-to"][..],
            _ => &["dyn-udp", "static-udp"][..],
        };
        for tag in tags {
            let l = line(&bare_out, &format!("{tag} {i}"));
            // The stand-in's own answer, naming it, came back.
            assert!(l.starts_with("OK ECHO "), "bare {tag} {class}: {l}");
            assert!(l.ends_with("probe"), "bare {tag} {class}: {l}");
        }
        assert_eq!(echoes[i].hits(), tags.len(), "bare {class}: {at}");
    }
    let before: Vec<usize> = servers.iter().map(|s| s.hits()).collect();

    let mut wrong = vec![];
    for (mode, config) in MODES {
        h.user_config(config);
        let hits: Vec<usize> = servers.iter().map(|s| s.hits()).collect();
        let echoed: Vec<usize> = echoes.iter().map(|s| s.hits()).collect();
        let run = lab
            .command(&h, sandpit_bin())
            .args(["run", "--", "sh", "-c", &script])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&run.stdout).into_owned();
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        assert_eq!(run.status.code(), Some(0), "{mode}: {out}\n{err}");
        for (i, d) in DESTS.iter().enumerate() {
            let (host, port) = d.dial;
            let said = explain(&h, &["connect", &authority(host, port)]);
            let allow = said.starts_with("ALLOW");
            assert!(
                allow || said.starts_with("DENY"),
                "{mode} {}: {said}",
                d.class
            );
            if allow != expected(mode, d) {
                wrong.push(format!(
                    "{mode}, {}: explain says {}",
                    d.class,
                    said.lines().next().unwrap_or("")
                ));
            }
            for tag in ["dyn", "static-proxy"] {
                let l = line(&out, &format!("{tag} {i}"));
                if l.starts_with("OK LAB") != allow {
                    wrong.push(format!(
                        "{mode}, {} ({tag}): explain {} but the run: {l}",
                        d.class,
                        if allow { "ALLOW" } else { "DENY" }
                    ));
                }
            }
            // A static program that ignores the proxy variables has no way out in
            // any mode: the network namespace holds nothing else. In unrestricted
            // mode the UDP relay's device is the default route, and it answers TCP
            // with a reset: refused at once, not left to time out.
            let l = line(&out, &format!("static-raw {i}"));
            if !l.starts_with("FAIL") {
                wrong.push(format!("{mode}, {} (static-raw): {l}", d.class));
            }
            if *mode == "unrestricted"
                && !d.listen.starts_with("127.")
                && !l.contains("Connection refused")
            {
                wrong.push(format!(
                    "{mode}, {} (static-raw): not refused at once: {l}",
                    d.class
                ));
            }
            let reached = servers[i].hits() > hits[i];
            if reached != allow {
                wrong.push(format!(
                    "{mode}, {}: the stand-in was {}reached",
                    d.class,
                    if reached { "" } else { "not " }
                ));
            }
        }
        for tag in ["dyn-listen", "static-listen"] {
            let l = line(&out, tag);
            if !l.starts_with("FAIL") {
                wrong.push(format!("{mode}: {tag}: {l}"));
            }
        }
        // UDP: explain, the dynamic and the static program, and the stand-in agree.
        for (i, (class, at, (host, port), public)) in UDP_DESTS.iter().enumerate() {
            let open = *mode == "unrestricted" && *public;
            let said = explain(&h, &["udp", &authority(host, port)]);
            if said.starts_with("ALLOW") != open || !said.contains("udp ") {
                wrong.push(format!("{mode}, UDP {class}: explain says {said}"));
            }
            let tags = match i {
                0 | 5 => &["dyn-udp", "static-udp", "dyn-udp-to", "static-udp-to"][..],
                _ => &["dyn-udp", "static-udp"][..],
            };
            for tag in tags {
                let l = line(&out, &format!("{tag} {i}"));
                let echoed = l.starts_with("OK ECHO ") && l.ends_with("probe");
                if echoed != open {
                    wrong.push(format!("{mode}, UDP {class} ({tag}): {l}"));
                }
                // The refusal is the interposer's, with the rule, for the dynamic one.
                if !open && tag.starts_with("dyn") && !l.contains("Operation not permitted") {
                    wrong.push(format!(
                        "{mode}, UDP {class} ({tag}): not the interposer's refusal: {l}"
                    ));
                }
            }
            let got = echoes[i].hits() - echoed[i];
            if got != if open { tags.len() } else { 0 } {
                wrong.push(format!(
                    "{mode}, UDP {class}: the stand-in at {at} got {got} datagrams"
                ));
            }
        }
        if !err.contains("blocked UDP to 10.9.8.7:53") {
            let udp: Vec<&str> = err.lines().filter(|l| l.contains("UDP")).collect();
            wrong.push(format!(
                "{mode}: the interposer did not name the UDP refusal: {udp:#?}"
            ));
        }
        // The relay's refusal of the static program's datagram is in the audit log.
        if *mode == "unrestricted" {
            let log = err
                .split("log: ~/")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .map(|p| h.home().join(p));
            let text = log
                .and_then(|p| std::fs::read_to_string(p).ok())
                .unwrap_or_default();
            let kernel = text.lines().any(|l| {
                l.contains("\"layer\":\"kernel\"")
                    && l.contains("\"action\":\"udp\"")
                    && l.contains("\"subject\":\"10.9.8.7:53\"")
                    && l.contains("\"decision\":\"deny\"")
            });
            if !kernel {
                let udp: Vec<&str> = text.lines().filter(|l| l.contains("\"udp\"")).collect();
                wrong.push(format!(
                    "{mode}: no kernel udp denial in the audit log: {udp:#?}"
                ));
            }
        }
        // What explain says of listening is what the run did.
        let said = explain(&h, &["listen", "0.0.0.0:7001"]);
        if !said.starts_with("DENY  listen 0.0.0.0:7001") {
            wrong.push(format!(
                "{mode}: the run refused listening, explain: {said}"
            ));
        }
        if *mode == "unrestricted"
            && !(err.contains("proxy (unrestricted: public addresses only)")
                && err.contains("UDP to public addresses"))
        {
            wrong.push(format!("{mode}: the layers line does not say so: {err}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Something was reached in the sandboxed runs (not only in the control).
    assert!(servers.iter().zip(&before).any(|(s, b)| s.hits() > *b));
}

/// Pathname Unix sockets: one that a program on this machine listens on is out of
/// reach wherever it lies (home, the workspace, outside home, at a path holding a
/// newline or other odd bytes) unless
/// `isolation.unix_sockets` names it, even inside an unreadable directory; the
/// run's own sockets work. For a dynamic and a static program, in every network
/// mode, and `explain unix` says what the run does.
#[test]
fn explain_and_a_run_agree_on_unix_sockets_in_every_network_mode() {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixListener;
    let h = TestHome::new();
    let static_probe = h.workspace().join("net_probe_static");
    std::fs::rename(build_probe(&h, "net_probe", true), &static_probe).unwrap();
    let dynamic = build_probe(&h, "net_probe", false);
    let home = h.home();
    let outside =
        std::path::PathBuf::from(format!("/var/tmp/sandpit-test-unix-{}", std::process::id()));
    // (case, socket, whether a program outside listens on it, whether it is allowed)
    let cases = [
        (
            "in home",
            home.join(".local/share/daemon/d.sock"),
            true,
            false,
        ),
        (
            "in the workspace",
            h.workspace().join(".dev.sock"),
            true,
            false,
        ),
        ("outside home", outside.join("d.sock"), true, false),
        // `/proc/net/unix` cuts such a path at its newline: the kernel's socket
        // table must be read whole for it to be masked.
        (
            "outside home, a newline in its path",
            outside.join("nl\nx.sock"),
            true,
            false,
        ),
        (
            "outside home, other odd bytes in its path",
            outside.join("odd \t\u{1b}[7m\r\u{e9} .sock"),
            true,
            false,
        ),
        ("allowed", home.join(".allowed/d.sock"), true, true),
        (
            "allowed inside an unreadable directory",
            home.join(".docker/run/docker.sock"),
            true,
            true,
        ),
        ("the run's own", h.workspace().join("own.sock"), false, true),
    ];
    let mut listeners = vec![];
    let mut script = String::new();
    for (i, (_, sock, host, _)) in cases.iter().enumerate() {
        let dir = sock.parent().unwrap();
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        h.give_to_test_user(dir);
        let op = if *host { "unix" } else { "unix-own" };
        for (tag, p) in [("dyn", &dynamic), ("static", &static_probe)] {
            script.push_str(&format!(
                "echo \"{tag} {i} $({} {op} '{}' -)\"\n",
                p.display(),
                sock.display()
            ));
        }
        listeners.push(host.then(|| {
            let l = UnixListener::bind(sock).unwrap();
            std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o777)).unwrap();
            l.set_nonblocking(true).unwrap();
            l
        }));
    }
    // What each host listener was sent since the last look.
    let received = |l: &UnixListener| -> bool {
        let mut got = false;
        while let Ok((mut c, _)) = l.accept() {
            c.set_nonblocking(false).unwrap();
            c.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            let mut s = String::new();
            let _ = c.read_to_string(&mut s);
            got |= s.contains("RUN-THIS");
        }
        got
    };
    let line = |out: &str, tag: &str| -> String {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{tag} ")))
            .unwrap_or_else(|| panic!("no line {tag:?} in:\n{out}"))
            .to_string()
    };

    // Control: without sandpit every probe gets through.
    let bare = h.command("sh").arg("-c").arg(&script).output().unwrap();
    let bare_out = String::from_utf8_lossy(&bare.stdout).into_owned();
    for (i, (case, ..)) in cases.iter().enumerate() {
        for tag in ["dyn", "static"] {
            let l = line(&bare_out, &format!("{tag} {i}"));
            assert!(l.starts_with("OK"), "bare {tag} {case}: {l}");
        }
        if let Some(l) = &listeners[i] {
            assert!(received(l), "bare {case}: the listener got nothing");
        }
    }

    let allow =
        "[isolation]\nunix_sockets = [\"~/.allowed/d.sock\", \"~/.docker/run/docker.sock\"]\n";
    let mut wrong = vec![];
    for (mode, net) in [
        ("filtered", ""),
        ("offline", "[network]\nmode = \"offline\"\n"),
        ("unrestricted", "[network]\nmode = \"unrestricted\"\n"),
    ] {
        h.user_config(&format!("{net}{allow}"));
        // Unrestricted mode needs a TUN device (`lab::host_command`).
        let run = common::lab::host_command(&h, sandpit_bin())
            .args(["run", "--", "sh", "-c", &script])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&run.stdout).into_owned();
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        assert_eq!(run.status.code(), Some(0), "{mode}: {out}\n{err}");
        for (i, (case, sock, _, allowed)) in cases.iter().enumerate() {
            let said = explain(&h, &["unix", &sock.display().to_string()]);
            if said.starts_with("ALLOW") != *allowed || !said.contains("unix ") {
                wrong.push(format!("{mode}, {case}: explain says {said}"));
            }
            for tag in ["dyn", "static"] {
                let l = line(&out, &format!("{tag} {i}"));
                if l.starts_with("OK") != *allowed {
                    wrong.push(format!("{mode}, {case} ({tag}): {l}"));
                }
            }
            if let Some(l) = &listeners[i] {
                if received(l) != *allowed {
                    wrong.push(format!("{mode}, {case}: the listener's view disagrees"));
                }
            }
        }
        // The interposer names the rule for a refused socket.
        if !err.contains("blocked connecting to the socket") || !err.contains("isolation") {
            wrong.push(format!("{mode}: no refusal naming [isolation]: {err}"));
        }
    }
    let _ = std::fs::remove_dir_all(&outside);
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Unrestricted mode's UDP relay needs its TUN device: where it cannot be made
/// (`/dev/net/tun` closed to the user, as on a machine without udev, or absent in a
/// container) the run starts without it, UDP refused as in filtered mode (nothing
/// more is opened), and says why and what it takes. Where the device can be made
/// the run says nothing of the kind; filtered mode needs none.
#[test]
fn unrestricted_mode_without_a_tun_device_runs_without_the_relay() {
    let lab = Lab::new(&[]);
    let h = TestHome::new();
    let marker = h.workspace().join("ran");
    let run = |mode: &str, tun: &str| {
        let _ = std::fs::remove_file(&marker);
        h.user_config(&format!("[network]\nmode = \"{mode}\"\n"));
        let o = lab
            .command_with_tun(&h, sandpit_bin(), tun)
            .args(["run", "--", "sh", "-c"])
            .arg(format!("touch {}", marker.display()))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (o.status.code(), err, marker.exists())
    };
    // `sandpit check` says so ahead of a run, and what it takes.
    let check = |tun: &str| {
        let o = lab
            .command_with_tun(&h, sandpit_bin(), tun)
            .args(["check", "sh"])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines()
            .find(|l| l.starts_with("udp:"))
            .unwrap_or_else(|| panic!("no udp line: {out}"))
            .to_string()
    };
    let (code, err, ran) = run("unrestricted", "0600");
    let said = check("0600");
    assert!(said.contains("runs start without the relay"), "{said}");
    assert!(check("0666").contains("to public addresses"), "{said}");
    assert!(code == Some(0) && ran, "{err}");
    assert!(
        err.contains("UDP is not relayed")
            && err.contains("/dev/net/tun")
            && err.contains("filtered"),
        "{err}"
    );
    let (code, err, ran) = run("unrestricted", "0666");
    assert!(code == Some(0) && ran, "{err}");
    assert!(!err.contains("UDP is not relayed"), "{err}");
    let (code, err, ran) = run("filtered", "0600");
    assert!(code == Some(0) && ran, "{err}");
}

/// Unrestricted mode lifts host filtering, and the machine's own addresses stay
/// closed as loopback does: a public IPv4 and a global IPv6 on one of its
/// interfaces reach every service listening on all interfaces. The lab's machine
/// holds such addresses on an interface of its own and listens on `0.0.0.0` and `[::]`;
/// a dynamic and a static program reach neither over TCP (through the proxy) nor
/// over UDP (the relay), in any spelling, and the listeners receive nothing, while
/// another machine's public address (the world's stand-in) is reached. An address
/// the machine gains while the run goes on is refused as well. `explain` (run on
/// the same machine) says what the run does.
#[test]
fn unrestricted_mode_refuses_the_machines_own_addresses() {
    let lab = Lab::new(&["1.2.3.4", "2606:4700:4700::1111"]);
    lab.add_own("5.45.100.7/24");
    lab.add_own("2a01:4f8::7/64");
    let h = TestHome::new();
    let static_probe = h.workspace().join("net_probe_static");
    std::fs::rename(build_probe(&h, "net_probe", true), &static_probe).unwrap();
    let dynamic = build_probe(&h, "net_probe", false);
    // The machine's own services, on every address it has (now and later).
    let mine = [
        lab.serve("0.0.0.0:8080"),
        lab.serve("[::]:8081"),
        lab.udp_echo("0.0.0.0:7353"),
        lab.udp_echo("[::]:7354"),
    ];
    // Another machine's.
    let world = [lab.serve("1.2.3.4:8080"), lab.udp_echo("1.2.3.4:7353")];
    // (case, op, host, port, whether unrestricted mode reaches it)
    let now: &[(&str, &str, &str, &str, bool)] = &[
        ("own IPv4, TCP", "tcp", "5.45.100.7", "8080", false),
        ("own IPv6, TCP", "tcp", "2a01:4f8::7", "8081", false),
        (
            "own IPv4 as IPv4-mapped, TCP",
            "tcp",
            "::ffff:5.45.100.7",
            "8081",
            false,
        ),
        ("own IPv4, UDP", "udp", "5.45.100.7", "7353", false),
        ("own IPv6, UDP", "udp", "2a01:4f8::7", "7354", false),
        ("another machine, TCP", "tcp", "1.2.3.4", "8080", true),
        ("another machine, UDP", "udp", "1.2.3.4", "7353", true),
    ];
    // Addresses the machine gains during the run.
    let later: &[(&str, &str, &str, &str, bool)] = &[
        (
            "own IPv4 added later, TCP",
            "tcp",
            "81.2.69.9",
            "8080",
            false,
        ),
        (
            "own IPv6 added later, TCP",
            "tcp",
            "2a01:4f8:1::9",
            "8081",
            false,
        ),
        (
            "own IPv4 added later, UDP",
            "udp",
            "81.2.69.9",
            "7353",
            false,
        ),
        (
            "own IPv6 added later, UDP",
            "udp",
            "2a01:4f8:1::9",
            "7354",
            false,
        ),
    ];
    let lines = |cases: &[(&str, &str, &str, &str, bool)], tags: &[&str], from: usize| {
        let mut s = String::new();
        for (i, (_, op, host, port, _)) in cases.iter().enumerate() {
            for tag in tags {
                let (probe, how) = match (*tag, *op) {
                    ("dyn", "tcp") => (&dynamic, "connect"),
                    ("static", "tcp") => (&static_probe, "proxy"),
                    ("bare", "tcp") => (&static_probe, "connect"),
                    ("dyn", _) => (&dynamic, "udp"),
                    _ => (&static_probe, "udp"),
                };
                s.push_str(&format!(
                    "echo \"{tag} {} $({} {how} {host} {port})\"\n",
                    from + i,
                    probe.display()
                ));
            }
        }
        s
    };
    let line = |out: &str, tag: &str, i: usize| -> String {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{tag} {i} ")))
            .unwrap_or_else(|| panic!("no line {tag} {i} in:\n{out}"))
            .to_string()
    };
    let reached = |l: &str| l.starts_with("OK LAB") || l.starts_with("OK ECHO");
    let hits = |s: &[common::lab::Server]| s.iter().map(|s| s.hits()).sum::<usize>();

    // Control: without sandpit, on the machine, every probe reaches its listener.
    let bare = lab
        .command(&h, "sh")
        .arg("-c")
        .arg(lines(now, &["bare"], 0))
        .output()
        .unwrap();
    let bare_out = String::from_utf8_lossy(&bare.stdout).into_owned();
    for (i, (case, ..)) in now.iter().enumerate() {
        let l = line(&bare_out, "bare", i);
        assert!(reached(&l), "bare {case}: {l}");
    }
    assert_eq!(hits(&mine), 5, "bare: {bare_out}");

    h.user_config("[network]\nmode = \"unrestricted\"\n");
    let explain_here = |what: &str, host: &str, port: &str| -> String {
        let o = lab
            .command(&h, sandpit_bin())
            .args(["explain", what, &authority(host, port)])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let mut wrong = vec![];
    let mut judge = |cases: &[(&str, &str, &str, &str, bool)], from: usize, out: &str| {
        for (i, (case, op, host, port, open)) in cases.iter().enumerate() {
            let said = explain_here(if *op == "tcp" { "connect" } else { "udp" }, host, port);
            if said.starts_with("ALLOW") != *open
                || (!open && !said.contains("this machine itself"))
            {
                wrong.push(format!("{case}: explain says {said}"));
            }
            for tag in ["dyn", "static"] {
                let l = line(out, tag, from + i);
                if reached(&l) != *open {
                    wrong.push(format!("{case} ({tag}): {l}"));
                }
            }
        }
    };
    let ready = h.workspace().join("ready");
    let go = h.workspace().join("go");
    let script = format!(
        "{}touch {ready}\nwhile [ ! -e {go} ]; do sleep 0.1; done\n{}",
        lines(now, &["dyn", "static"], 0),
        lines(later, &["dyn", "static"], now.len()),
        ready = ready.display(),
        go = go.display(),
    );
    let (mine_before, world_before) = (hits(&mine), hits(&world));
    let run = lab
        .command(&h, sandpit_bin())
        .args(["run", "--", "sh", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_until(120, "the run's first probes", || ready.exists());
    // The run has decided with the machine's addresses: now it gains two more.
    for (_, _, host, ..) in &later[..2] {
        let before = explain_here("connect", host, "8080");
        assert!(
            before.starts_with("ALLOW"),
            "{host} before it is the machine's: {before}"
        );
    }
    lab.add_own("81.2.69.9/32");
    lab.add_own("2a01:4f8:1::9/128");
    std::fs::write(&go, "").unwrap();
    let run = run.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(0), "{out}\n{err}");
    judge(now, 0, &out);
    judge(later, now.len(), &out);
    // Nothing reached the machine's own listeners; the other machine was reached
    // by both programs over both protocols.
    if hits(&mine) != mine_before {
        wrong.push(format!(
            "the machine's own listeners got {} connections or datagrams",
            hits(&mine) - mine_before
        ));
    }
    if hits(&world) != world_before + 4 {
        wrong.push(format!(
            "the other machine got {} of 4",
            hits(&world) - world_before
        ));
    }
    assert!(wrong.is_empty(), "{wrong:#?}\n{out}\n{err}");
}
