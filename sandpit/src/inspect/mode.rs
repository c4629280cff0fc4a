//! Mode selection: which layers a run of this program gets.
use super::{Inspection, Os};
use crate::sandbox::KernelSupport;

/// The layers a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Kernel layer + interposition (+ shims, adversary).
    Full,
    /// Kernel layer + shims + adversary: the interposer cannot load.
    Kernel,
    /// No kernel layer on this machine: sandpit refuses to run unless the user passes
    /// the explicit degraded flag, and then says so on every run.
    Refuse,
}

/// What a precision layer would have done that another layer now covers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fallthrough {
    pub what: &'static str,
    pub covered_by: &'static str,
}

/// The chosen mode, why, and what falls through to which layer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModeChoice {
    pub mode: Mode,
    /// The interposer loads into this program (after `no_new_privs` on Linux).
    pub interposition: bool,
    /// A kernel layer is available on this machine.
    pub kernel: bool,
    pub reasons: Vec<String>,
    pub fallthrough: Vec<Fallthrough>,
}

/// Is a kernel layer available on `os` with `k`? Linux needs Landlock (namespaces and
/// seccomp strengthen it but Landlock carries the file policy); macOS needs Seatbelt.
pub fn kernel_available(os: Os, k: &KernelSupport) -> bool {
    match os {
        Os::Linux => k.landlock_abi.is_some(),
        Os::Macos => k.seatbelt,
        Os::Other => false,
    }
}

const KERNEL_FALLTHROUGH: &[Fallthrough] = &[
    Fallthrough {
        what: "file denials name no rule (the kernel answers EPERM/EACCES)",
        covered_by: "kernel layer enforces the same paths; `sandpit explain` names the rule",
    },
    Fallthrough {
        what: "connect() destination domain",
        covered_by: "proxy decides by CONNECT/SOCKS host, TLS SNI or HTTP Host; direct connects fail at the kernel",
    },
    Fallthrough {
        what: "name resolution (getaddrinfo)",
        covered_by: "no DNS inside the sandbox; proxy-aware clients resolve through the proxy",
    },
    Fallthrough {
        what: "exec argv rules for every exec",
        covered_by: "PATH shims (curl, wget, nc, ssh, …) and the adversary review",
    },
];

/// Choose the mode for `inspection` on a machine offering `kernel`. Pure.
pub fn choose_mode(inspection: &Inspection, kernel: &KernelSupport) -> ModeChoice {
    let os = inspection.host.os;
    let kernel_ok = kernel_available(os, kernel);
    let mut reasons = vec![];
    let mut interposition = true;
    for b in &inspection.blockers {
        if os == Os::Linux && kernel_ok && b.lifted_by_no_new_privs() {
            reasons.push(format!(
                "{} — lifted: the kernel layer sets no_new_privs, so the program runs without the extra privilege and the interposer loads",
                b.describe()
            ));
        } else {
            interposition = false;
            reasons.push(b.describe());
        }
    }
    let mode = if !kernel_ok {
        reasons.push(match os {
            Os::Linux => "no kernel layer: Landlock is unavailable".to_string(),
            Os::Macos => "no kernel layer: Seatbelt is unavailable".to_string(),
            Os::Other => "no kernel layer for this operating system".to_string(),
        });
        Mode::Refuse
    } else if interposition {
        Mode::Full
    } else {
        Mode::Kernel
    };
    let fallthrough = match mode {
        Mode::Full => vec![],
        Mode::Kernel => KERNEL_FALLTHROUGH.to_vec(),
        Mode::Refuse => vec![Fallthrough {
            what: "every kernel-enforced boundary (raw syscalls, static binaries, children dropping the preload)",
            covered_by: "nothing: sandpit refuses to run without the explicit degraded flag",
        }],
    };
    ModeChoice {
        mode,
        interposition,
        kernel: kernel_ok,
        reasons,
        fallthrough,
    }
}
