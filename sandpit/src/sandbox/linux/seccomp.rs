//! The seccomp layer as data: `table(…)` lists what is refused and why;
//! `compile` turns the table into a classic-BPF program; `sys::seccomp_install`
//! applies it. Both halves are pure and tested here with a small BPF interpreter.
//!
//! The filter is a deny list on top of Landlock and the namespaces: it removes kernel
//! surface that those layers do not mediate (io_uring bypasses the syscall-level hooks
//! the interposer sees, ptrace/process_vm/prlimit64 reach other processes, keyrings
//! and bpf are global, new user namespaces would give back the capabilities the
//! sandbox dropped, TIOCSTI injects keystrokes into the user's terminal). Syscalls
//! from a foreign architecture (i386 `int 0x80`, x32) never reach the table: they are
//! refused first.
//!
//! Not compiled by `seccompiler` (issue #33): its `SeccompAction` offers Allow,
//! Errno, KillThread, KillProcess, Log, Trace and Trap (0.5.0) — no
//! `SECCOMP_RET_USER_NOTIF`, which the kernel-refusal reporting rule needs — and it
//! has no x32 refusal of its own; the rest (masked 32-bit argument compares, errno
//! per rule) it could express.
use super::sys::SockFilter;

/// Which table: the full sandbox (namespaces on), or the fallback without network
/// namespace, which must also refuse datagram/raw sockets, stream sockets of any
/// protocol but TCP, and TCP Fast Open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Profile {
    Namespaced,
    Fallback,
}

/// A comparison on the low 32 bits of one syscall argument, after `& mask`.
/// Every argument the table inspects is an `int`/`unsigned int` to the kernel
/// (socket domain and type, ioctl request, clone/unshare flags, send flags), so the
/// high half is ignored by the kernel too and must be ignored here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    pub arg: u8,
    pub mask: u32,
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Eq(u32),
    Ne(u32),
    In(Vec<u32>),
    NotIn(Vec<u32>),
}

/// Refuse `syscall` with `errno` when every condition holds (no conditions: always).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub name: &'static str,
    pub nr: u32,
    pub when: Vec<Cond>,
    pub errno: i32,
}

const CLONE_NEWUSER: u32 = 0x1000_0000;
const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
const AF_UNIX: u32 = 1;
const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;
const SOCK_STREAM: u32 = 1;
const SOCK_TYPE_MASK: u32 = 0xf;
/// A stream socket's protocol: 0 (the kernel's default, TCP) or TCP itself.
const IPPROTO_IP: u32 = 0;
const IPPROTO_TCP: u32 = 6;
const MSG_FASTOPEN: u32 = 0x2000_0000;

fn nr(n: libc::c_long) -> u32 {
    n as u32
}

fn always(name: &'static str, n: libc::c_long, errno: i32) -> Rule {
    Rule {
        name,
        nr: nr(n),
        when: vec![],
        errno,
    }
}

fn when(name: &'static str, n: libc::c_long, conds: Vec<Cond>) -> Rule {
    Rule {
        name,
        nr: nr(n),
        when: conds,
        errno: libc::EPERM,
    }
}

fn low(arg: u8, op: Op) -> Cond {
    Cond {
        arg,
        mask: u32::MAX,
        op,
    }
}

fn any_bit(arg: u8, bits: u32) -> Cond {
    Cond {
        arg,
        mask: bits,
        op: Op::Ne(0),
    }
}

/// The deny table for `profile`. With `nested_user_namespaces`
/// (`isolation.nested_user_namespaces`), new user namespaces and `chroot` pass, for
/// the sandboxes of Chromium and Electron: the capabilities they give hold only over
/// the new namespaces, mounts stay refused here and by Landlock, and Landlock's
/// rules and the process limit follow into them.
pub fn table(profile: Profile, nested_user_namespaces: bool) -> Vec<Rule> {
    let eperm = libc::EPERM;
    // ENOSYS where callers probe and fall back (io_uring users, glibc's clone3 use).
    let enosys = libc::ENOSYS;
    let mut t = vec![
        always("io_uring_setup", libc::SYS_io_uring_setup, enosys),
        always("io_uring_enter", libc::SYS_io_uring_enter, enosys),
        always("io_uring_register", libc::SYS_io_uring_register, enosys),
        always("ptrace", libc::SYS_ptrace, eperm),
        always("process_vm_readv", libc::SYS_process_vm_readv, eperm),
        always("process_vm_writev", libc::SYS_process_vm_writev, eperm),
        always("pidfd_getfd", libc::SYS_pidfd_getfd, eperm),
        always("kcmp", libc::SYS_kcmp, eperm),
        // Another process's limits (pid 0 is the caller's own, as libc's setrlimit
        // passes it): a lowered address-space limit while the loader runs makes it
        // skip the interposer, with the layer its constructor takes (a static
        // agent's commands; docs/kernel.md, "The agent's own files").
        when("prlimit64", libc::SYS_prlimit64, vec![low(0, Op::Ne(0))]),
        always("keyctl", libc::SYS_keyctl, eperm),
        always("add_key", libc::SYS_add_key, eperm),
        always("request_key", libc::SYS_request_key, eperm),
        always("bpf", libc::SYS_bpf, eperm),
        always("perf_event_open", libc::SYS_perf_event_open, eperm),
        always("userfaultfd", libc::SYS_userfaultfd, eperm),
        always("open_by_handle_at", libc::SYS_open_by_handle_at, eperm),
        always("name_to_handle_at", libc::SYS_name_to_handle_at, eperm),
        always("mount", libc::SYS_mount, eperm),
        always("umount2", libc::SYS_umount2, eperm),
        always("pivot_root", libc::SYS_pivot_root, eperm),
        always("chroot", libc::SYS_chroot, eperm),
        always("move_mount", libc::SYS_move_mount, eperm),
        always("open_tree", libc::SYS_open_tree, eperm),
        always("fsopen", libc::SYS_fsopen, eperm),
        always("fsconfig", libc::SYS_fsconfig, eperm),
        always("fsmount", libc::SYS_fsmount, eperm),
        always("fspick", libc::SYS_fspick, eperm),
        always("mount_setattr", libc::SYS_mount_setattr, eperm),
        always("setns", libc::SYS_setns, eperm),
        // clone3 passes its flags through memory seccomp cannot read: refuse it so
        // libc falls back to clone(2), whose flags are checked below.
        always("clone3", libc::SYS_clone3, enosys),
        when(
            "unshare",
            libc::SYS_unshare,
            vec![any_bit(0, CLONE_NEWUSER)],
        ),
        when("clone", libc::SYS_clone, vec![any_bit(0, CLONE_NEWUSER)]),
        when("ioctl", libc::SYS_ioctl, vec![low(1, Op::Eq(TIOCSTI))]),
        when("ioctl", libc::SYS_ioctl, vec![low(1, Op::Eq(TIOCLINUX))]),
        when(
            "socket",
            libc::SYS_socket,
            vec![low(0, Op::NotIn(vec![AF_UNIX, AF_INET, AF_INET6]))],
        ),
        when(
            "socketpair",
            libc::SYS_socketpair,
            vec![low(0, Op::NotIn(vec![AF_UNIX, AF_INET, AF_INET6]))],
        ),
    ];
    if nested_user_namespaces {
        t.retain(|r| !matches!(r.name, "unshare" | "clone" | "chroot"));
    }
    if profile == Profile::Fallback {
        // Without a network namespace, Landlock only mediates TCP connect/bind: refuse
        // every other inet socket type, every stream protocol but TCP (MPTCP and SCTP
        // stream sockets are not TCP to Landlock, which lets them connect anywhere),
        // and Fast Open (which connects inside sendto).
        t.push(when(
            "socket",
            libc::SYS_socket,
            vec![
                low(0, Op::In(vec![AF_INET, AF_INET6])),
                Cond {
                    arg: 1,
                    mask: SOCK_TYPE_MASK,
                    op: Op::Ne(SOCK_STREAM),
                },
            ],
        ));
        t.push(when(
            "socket",
            libc::SYS_socket,
            vec![
                low(0, Op::In(vec![AF_INET, AF_INET6])),
                low(2, Op::NotIn(vec![IPPROTO_IP, IPPROTO_TCP])),
            ],
        ));
        t.push(when(
            "sendto",
            libc::SYS_sendto,
            vec![any_bit(3, MSG_FASTOPEN)],
        ));
        t.push(when(
            "sendmsg",
            libc::SYS_sendmsg,
            vec![any_bit(2, MSG_FASTOPEN)],
        ));
        t.push(when(
            "sendmmsg",
            libc::SYS_sendmmsg,
            vec![any_bit(3, MSG_FASTOPEN)],
        ));
    }
    t
}

// --- compiler ------------------------------------------------------------------------

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_AND_K: u16 = 0x54;
const BPF_RET_K: u16 = 0x06;

pub const RET_ALLOW: u32 = 0x7fff_0000;
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const RET_ERRNO: u32 = 0x0005_0000;

#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 0xC000_00B7;
/// x32 system calls share x86_64's audit arch and set this bit in the number.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: Option<u32> = None;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_arg_low(arg: u8) -> u32 {
    // seccomp_data.args[i] is a u64 at 16 + 8*i; the low word comes first on
    // little-endian machines (every target sandpit builds for).
    16 + 8 * arg as u32
}

fn stmt(code: u16, k: u32) -> SockFilter {
    SockFilter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

/// A jump longer than 8-bit BPF offsets reach: too many comparisons in one rule, or
/// a table too big for the dispatch.
#[derive(Debug, thiserror::Error)]
#[error("seccomp filter too long to compile: {0}")]
pub struct TooLong(pub String);

/// Compile `rules` into a BPF program: arch check, foreign-ABI check, then a binary
/// search on the syscall number down to the rules for that number (`ret errno` for
/// the first whose conditions all hold), allow otherwise.
///
/// A search, not one comparison per rule: the kernel runs the program once per
/// syscall number when the filter is installed (to find the numbers it can allow
/// without running it again) and on every call with argument conditions, so a
/// linear chain of ~35 rules cost ~0.1 ms at every sandboxed start.
pub fn compile(rules: &[Rule]) -> Result<Vec<SockFilter>, TooLong> {
    let mut p = vec![
        stmt(BPF_LD_W_ABS, OFF_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, OFF_NR),
    ];
    if let Some(bit) = X32_SYSCALL_BIT {
        p.push(jump(BPF_JGE_K, bit, 0, 1));
        p.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
    }
    let mut nrs: Vec<u32> = rules.iter().map(|r| r.nr).collect();
    nrs.sort_unstable();
    nrs.dedup();
    let blocks = nrs
        .iter()
        .map(|&n| block(rules.iter().filter(|r| r.nr == n)))
        .collect::<Result<Vec<_>, _>>()?;
    p.extend(dispatch(&nrs, &blocks)?);
    Ok(p)
}

fn offset(n: usize, what: &str) -> Result<u8, TooLong> {
    u8::try_from(n).map_err(|_| TooLong(what.to_string()))
}

/// The accumulator holds the syscall number, one of `nrs` (sorted) or none of them:
/// `nrs[i]` runs `blocks[i]`, anything else is allowed. Every path ends in a `ret`.
fn dispatch(nrs: &[u32], blocks: &[Vec<SockFilter>]) -> Result<Vec<SockFilter>, TooLong> {
    if nrs.len() <= 2 {
        let mut d = vec![];
        for (&n, b) in nrs.iter().zip(blocks) {
            d.push(jump(BPF_JEQ_K, n, 0, offset(b.len(), "a syscall's rules")?));
            d.extend_from_slice(b);
        }
        d.push(stmt(BPF_RET_K, RET_ALLOW));
        return Ok(d);
    }
    let mid = nrs.len() / 2;
    let below = dispatch(&nrs[..mid], &blocks[..mid])?;
    let above = dispatch(&nrs[mid..], &blocks[mid..])?;
    let mut d = vec![jump(
        BPF_JGE_K,
        nrs[mid],
        offset(below.len(), "the dispatch")?,
        0,
    )];
    d.extend(below);
    d.extend(above);
    Ok(d)
}

/// The rules of one syscall number, in table order: the first whose conditions all
/// hold returns its errno; none does: allow.
fn block<'a>(rules: impl Iterator<Item = &'a Rule>) -> Result<Vec<SockFilter>, TooLong> {
    // Within a rule, `FAIL` stands for "go to the next rule" until the rule's length
    // is known.
    const FAIL: u8 = u8::MAX;
    let mut b = vec![];
    for rule in rules {
        let mut r: Vec<SockFilter> = vec![];
        for c in &rule.when {
            r.push(stmt(BPF_LD_W_ABS, off_arg_low(c.arg)));
            if c.mask != u32::MAX {
                r.push(stmt(BPF_AND_K, c.mask));
            }
            match &c.op {
                Op::Eq(v) => r.push(jump(BPF_JEQ_K, *v, 0, FAIL)),
                Op::Ne(v) => r.push(jump(BPF_JEQ_K, *v, FAIL, 0)),
                Op::In(vs) => {
                    // Jump past the remaining comparisons on a hit; fail if none hit.
                    let n = vs.len();
                    for (i, v) in vs.iter().enumerate() {
                        let rest = offset(n - 1 - i, rule.name)?;
                        if i + 1 == n {
                            r.push(jump(BPF_JEQ_K, *v, 0, FAIL));
                        } else {
                            r.push(jump(BPF_JEQ_K, *v, rest, 0));
                        }
                    }
                }
                Op::NotIn(vs) => {
                    for v in vs {
                        r.push(jump(BPF_JEQ_K, *v, FAIL, 0));
                    }
                }
            }
        }
        r.push(stmt(BPF_RET_K, RET_ERRNO | (rule.errno as u32 & 0xffff)));
        // FAIL's target is the first instruction after the rule; offsets count from
        // the instruction after the jump.
        let len = r.len();
        for (i, ins) in r.iter_mut().enumerate() {
            let off = offset(len - 1 - i, rule.name)?;
            if ins.jt == FAIL {
                ins.jt = off;
            }
            if ins.jf == FAIL {
                ins.jf = off;
            }
        }
        b.extend(r);
    }
    b.push(stmt(BPF_RET_K, RET_ALLOW));
    Ok(b)
}

// --- the reporting filter ----------------------------------------------------------

pub const RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// The system calls that take a path Landlock may refuse to the calling program:
/// opening (reading, writing, creating), executing, and every change to a
/// directory's entries. The reporting filter ([`compile_notify`]) hands each of
/// them to the launcher's notifier (`notify.rs`) before the kernel runs it.
pub fn notified_syscalls() -> Vec<(&'static str, u32)> {
    let mut v = vec![
        ("openat", nr(libc::SYS_openat)),
        ("openat2", nr(libc::SYS_openat2)),
        ("execve", nr(libc::SYS_execve)),
        ("execveat", nr(libc::SYS_execveat)),
        ("mkdirat", nr(libc::SYS_mkdirat)),
        ("mknodat", nr(libc::SYS_mknodat)),
        ("unlinkat", nr(libc::SYS_unlinkat)),
        ("renameat", nr(libc::SYS_renameat)),
        ("renameat2", nr(libc::SYS_renameat2)),
        ("linkat", nr(libc::SYS_linkat)),
        ("symlinkat", nr(libc::SYS_symlinkat)),
        ("truncate", nr(libc::SYS_truncate)),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        ("open", nr(libc::SYS_open)),
        ("creat", nr(libc::SYS_creat)),
        ("mkdir", nr(libc::SYS_mkdir)),
        ("mknod", nr(libc::SYS_mknod)),
        ("unlink", nr(libc::SYS_unlink)),
        ("rmdir", nr(libc::SYS_rmdir)),
        ("rename", nr(libc::SYS_rename)),
        ("link", nr(libc::SYS_link)),
        ("symlink", nr(libc::SYS_symlink)),
    ]);
    v
}

/// The reporting filter: every call of [`notified_syscalls`] goes to the listener
/// (`SECCOMP_RET_USER_NOTIF`), everything else is allowed. It refuses nothing:
/// installed next to the deny filter, whose `ERRNO` and `KILL` take precedence
/// over `USER_NOTIF`, and the notifier always answers "continue", so the kernel
/// (Landlock) still decides every call it sees. No argument is inspected, so the
/// kernel's cache lets every other syscall past without running the program.
pub fn compile_notify() -> Result<Vec<SockFilter>, TooLong> {
    let mut nrs: Vec<u32> = notified_syscalls().iter().map(|(_, n)| *n).collect();
    nrs.sort_unstable();
    nrs.dedup();
    let blocks: Vec<Vec<SockFilter>> = nrs
        .iter()
        .map(|_| vec![stmt(BPF_RET_K, RET_USER_NOTIF)])
        .collect();
    // A foreign architecture is killed by the deny filter; allowed here.
    let mut p = vec![
        stmt(BPF_LD_W_ABS, OFF_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_ALLOW),
        stmt(BPF_LD_W_ABS, OFF_NR),
    ];
    p.extend(dispatch(&nrs, &blocks)?);
    Ok(p)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A classic-BPF interpreter for the instructions `compile` emits.
    fn run(prog: &[SockFilter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let mut acc: u32 = 0;
        let mut pc = 0usize;
        loop {
            let ins = prog[pc];
            pc += 1;
            match ins.code {
                BPF_LD_W_ABS => {
                    let o = ins.k as usize;
                    acc = u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
                }
                BPF_AND_K => acc &= ins.k,
                BPF_JEQ_K => pc += if acc == ins.k { ins.jt } else { ins.jf } as usize,
                BPF_JGE_K => pc += if acc >= ins.k { ins.jt } else { ins.jf } as usize,
                BPF_RET_K => return ins.k,
                c => panic!("unknown opcode {c:#x}"),
            }
        }
    }

    fn prog(p: Profile) -> Vec<SockFilter> {
        compile(&table(p, false)).unwrap()
    }

    fn call(p: &[SockFilter], nr: libc::c_long, args: [u64; 6]) -> u32 {
        run(p, AUDIT_ARCH, nr as u32, args)
    }

    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;

    #[test]
    fn foreign_arch_is_killed_and_x32_refused() {
        let p = prog(Profile::Namespaced);
        assert_eq!(run(&p, 0x4000_0003, 0, [0; 6]), RET_KILL_PROCESS); // i386
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            run(&p, AUDIT_ARCH, 0x4000_0000 | libc::SYS_read as u32, [0; 6]),
            ENOSYS
        );
    }

    #[test]
    fn ordinary_calls_pass() {
        let p = prog(Profile::Namespaced);
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_connect,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), RET_ALLOW, "{nr}");
        }
    }

    #[test]
    fn unconditional_denials() {
        let p = prog(Profile::Namespaced);
        for nr in [
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_userfaultfd,
            libc::SYS_open_by_handle_at,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_move_mount,
            libc::SYS_fsopen,
            libc::SYS_setns,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), EPERM, "{nr}");
        }
        for nr in [
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_clone3,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), ENOSYS, "{nr}");
        }
    }

    #[test]
    fn user_namespace_flags_refused_other_clones_pass() {
        let p = prog(Profile::Namespaced);
        let fork_flags = (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID) as u64 | 17;
        assert_eq!(
            call(&p, libc::SYS_clone, [fork_flags, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(
            call(&p, libc::SYS_clone, [thread, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        let user = libc::CLONE_NEWUSER as u64 | libc::CLONE_NEWNS as u64;
        assert_eq!(call(&p, libc::SYS_clone, [user, 0, 0, 0, 0, 0]), EPERM);
        assert_eq!(call(&p, libc::SYS_unshare, [user, 0, 0, 0, 0, 0]), EPERM);
        // Without CAP_SYS_ADMIN a plain unshare(CLONE_NEWNS) fails on its own.
        assert_eq!(
            call(
                &p,
                libc::SYS_unshare,
                [libc::CLONE_FILES as u64, 0, 0, 0, 0, 0]
            ),
            RET_ALLOW
        );
    }

    #[test]
    fn nested_user_namespaces_let_new_namespaces_and_chroot_pass_not_mounts() {
        for profile in [Profile::Namespaced, Profile::Fallback] {
            let p = compile(&table(profile, true)).unwrap();
            let user = (libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWNET) as u64;
            assert_eq!(call(&p, libc::SYS_clone, [user, 0, 0, 0, 0, 0]), RET_ALLOW);
            assert_eq!(
                call(&p, libc::SYS_unshare, [user, 0, 0, 0, 0, 0]),
                RET_ALLOW
            );
            assert_eq!(call(&p, libc::SYS_chroot, [0; 6]), RET_ALLOW);
            for nr in [
                libc::SYS_mount,
                libc::SYS_setns,
                libc::SYS_pivot_root,
                libc::SYS_fsopen,
            ] {
                assert_eq!(call(&p, nr, [0; 6]), EPERM, "{nr}");
            }
            assert_eq!(call(&p, libc::SYS_clone3, [0; 6]), ENOSYS);
            // Only those three rules go.
            assert_eq!(table(profile, true).len() + 3, table(profile, false).len());
        }
    }

    #[test]
    fn tiocsti_masked_compare_ignores_high_bits() {
        let p = prog(Profile::Namespaced);
        for cmd in [
            0x5412u64,
            0xdead_beef_0000_5412,
            0x541c,
            0xffff_ffff_0000_541c,
        ] {
            assert_eq!(
                call(&p, libc::SYS_ioctl, [0, cmd, 0, 0, 0, 0]),
                EPERM,
                "{cmd:#x}"
            );
        }
        for cmd in [
            0x5401u64, /* TCGETS */
            0x5413,    /* TIOCGWINSZ */
            0x1_0000_5400,
        ] {
            assert_eq!(
                call(&p, libc::SYS_ioctl, [0, cmd, 0, 0, 0, 0]),
                RET_ALLOW,
                "{cmd:#x}"
            );
        }
    }

    #[test]
    fn socket_families() {
        let p = prog(Profile::Namespaced);
        for d in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6] {
            assert_eq!(
                call(&p, libc::SYS_socket, [d as u64, 2, 0, 0, 0, 0]),
                RET_ALLOW
            );
        }
        for d in [
            libc::AF_PACKET,
            libc::AF_NETLINK,
            libc::AF_VSOCK,
            libc::AF_ALG,
            4242,
        ] {
            assert_eq!(
                call(&p, libc::SYS_socket, [d as u64, 1, 0, 0, 0, 0]),
                EPERM,
                "{d}"
            );
        }
        // AF_INET with garbage in the high half is still AF_INET to the kernel.
        assert_eq!(
            call(&p, libc::SYS_socket, [0x1_0000_0002, 1, 0, 0, 0, 0]),
            RET_ALLOW
        );
        // Datagram sockets are fine when the network namespace holds them.
        assert_eq!(call(&p, libc::SYS_socket, [2, 2, 0, 0, 0, 0]), RET_ALLOW);
    }

    #[test]
    fn fallback_refuses_udp_raw_non_tcp_streams_and_fast_open() {
        let p = prog(Profile::Fallback);
        let nb = libc::SOCK_NONBLOCK as u64 | libc::SOCK_CLOEXEC as u64;
        for d in [libc::AF_INET, libc::AF_INET6] {
            let d = d as u64;
            assert_eq!(
                call(&p, libc::SYS_socket, [d, 1 | nb, 0, 0, 0, 0]),
                RET_ALLOW
            );
            assert_eq!(call(&p, libc::SYS_socket, [d, 2 | nb, 0, 0, 0, 0]), EPERM);
            assert_eq!(call(&p, libc::SYS_socket, [d, 3, 0, 0, 0, 0]), EPERM);
            // TCP named or left to the default; MPTCP, SCTP and anything else refused
            // (the high half of the protocol is ignored, as the kernel does).
            for proto in [0, libc::IPPROTO_TCP as u64, 0xdead_0000_0006] {
                assert_eq!(
                    call(&p, libc::SYS_socket, [d, 1 | nb, proto, 0, 0, 0]),
                    RET_ALLOW,
                    "{proto:#x}"
                );
            }
            for proto in [
                libc::IPPROTO_MPTCP as u64,
                libc::IPPROTO_SCTP as u64,
                libc::IPPROTO_UDP as u64,
                0x1_0000_0000 | libc::IPPROTO_MPTCP as u64,
                1,
            ] {
                assert_eq!(
                    call(&p, libc::SYS_socket, [d, 1 | nb, proto, 0, 0, 0]),
                    EPERM,
                    "{proto:#x}"
                );
            }
        }
        // Other families keep their protocols (AF_UNIX takes none but 0 anyway).
        assert_eq!(call(&p, libc::SYS_socket, [1, 1, 262, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_socket, [1, 2, 0, 0, 0, 0]), RET_ALLOW);
        let fo = MSG_FASTOPEN as u64;
        assert_eq!(call(&p, libc::SYS_sendto, [3, 0, 0, fo, 0, 0]), EPERM);
        assert_eq!(call(&p, libc::SYS_sendto, [3, 0, 0, 0x40, 0, 0]), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_sendmsg, [3, 0, fo, 0, 0, 0]), EPERM);
        assert_eq!(call(&p, libc::SYS_sendmmsg, [3, 0, 0, fo, 0, 0]), EPERM);
        // The namespaced table leaves them to the namespace.
        let n = prog(Profile::Namespaced);
        assert_eq!(call(&n, libc::SYS_sendto, [3, 0, 0, fo, 0, 0]), RET_ALLOW);
        assert_eq!(call(&n, libc::SYS_socket, [2, 1, 262, 0, 0, 0]), RET_ALLOW);
    }

    /// What the table means, read straight off it: the first rule for the number
    /// whose conditions all hold refuses; otherwise allowed.
    fn meaning(rules: &[Rule], nr: u32, args: [u64; 6]) -> u32 {
        let holds = |c: &Cond| {
            let v = args[c.arg as usize] as u32 & c.mask;
            match &c.op {
                Op::Eq(x) => v == *x,
                Op::Ne(x) => v != *x,
                Op::In(xs) => xs.contains(&v),
                Op::NotIn(xs) => !xs.contains(&v),
            }
        };
        rules
            .iter()
            .find(|r| r.nr == nr && r.when.iter().all(holds))
            .map_or(RET_ALLOW, |r| RET_ERRNO | r.errno as u32)
    }

    #[test]
    fn the_compiled_search_means_what_the_table_says() {
        for profile in [Profile::Namespaced, Profile::Fallback] {
            let rules = table(profile, false);
            let p = compile(&rules).unwrap();
            // Every value a condition names, with its neighbours and high bits set
            // (ignored: the conditions read the low word).
            let mut values: Vec<u64> = vec![0, 1, u64::from(u32::MAX), 1 << 40];
            for c in rules.iter().flat_map(|r| &r.when) {
                let named = match &c.op {
                    Op::Eq(x) | Op::Ne(x) => vec![*x],
                    Op::In(xs) | Op::NotIn(xs) => xs.clone(),
                };
                for x in named.into_iter().chain([c.mask]) {
                    let x = u64::from(x);
                    values.extend([x, x + 1, x.saturating_sub(1), x | 0xdead_0000_0000]);
                }
            }
            values.sort_unstable();
            values.dedup();
            let mut checked = 0;
            for nr in 0..600u32 {
                let named = rules.iter().any(|r| r.nr == nr);
                // Numbers without a rule: the arguments cannot matter; one vector.
                let vs: &[u64] = if named { &values } else { &[7] };
                // Every combination of the first three arguments (a rule reads up to
                // three of them: socket's domain, type and protocol); the fourth
                // follows the third (the send flags are one argument alone).
                for &a in vs {
                    for &b in vs {
                        for &c in vs {
                            let args = [a, b, c, c, 0, 0];
                            assert_eq!(
                                run(&p, AUDIT_ARCH, nr, args),
                                meaning(&rules, nr, args),
                                "{profile:?}: syscall {nr} with {args:x?}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
            assert!(checked > 100_000, "{checked}");
        }
    }

    #[test]
    fn golden_table_names() {
        let names: Vec<&str> = table(Profile::Namespaced, false)
            .iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            names.join(" "),
            "io_uring_setup io_uring_enter io_uring_register ptrace process_vm_readv \
             process_vm_writev pidfd_getfd kcmp prlimit64 keyctl add_key request_key bpf \
             perf_event_open userfaultfd open_by_handle_at name_to_handle_at mount umount2 \
             pivot_root chroot move_mount open_tree fsopen fsconfig fsmount fspick \
             mount_setattr setns clone3 unshare clone ioctl ioctl socket socketpair"
        );
        let fallback: Vec<&str> = table(Profile::Fallback, false)
            .iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            fallback[names.len()..].join(" "),
            "socket socket sendto sendmsg sendmmsg"
        );
        assert_eq!(fallback[..names.len()], names[..]);
    }

    #[test]
    fn the_reporting_filter_notifies_path_calls_only() {
        let p = compile_notify().unwrap();
        let named: Vec<u32> = notified_syscalls().iter().map(|(_, n)| *n).collect();
        for n in 0..600u32 {
            let want = if named.contains(&n) {
                RET_USER_NOTIF
            } else {
                RET_ALLOW
            };
            assert_eq!(run(&p, AUDIT_ARCH, n, [0; 6]), want, "syscall {n}");
        }
        assert_eq!(call(&p, libc::SYS_openat, [0; 6]), RET_USER_NOTIF);
        assert_eq!(call(&p, libc::SYS_read, [0; 6]), RET_ALLOW);
        assert_eq!(
            run(&p, 0x4000_0003, libc::SYS_openat as u32, [0; 6]),
            RET_ALLOW
        );
    }
}
