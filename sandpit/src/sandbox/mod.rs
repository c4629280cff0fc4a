//! The kernel layer (L2) behind one small facade. Platform code lives in
//! `linux/` and `macos/`; `cfg(target_os)` appears here and nowhere in the logic.

#[cfg(target_os = "linux")]
pub mod linux;

/// What the running kernel offers sandpit, as `sandpit check` reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct KernelSupport {
    /// Landlock ABI version, `None` when Landlock is unavailable (Linux).
    pub landlock_abi: Option<u32>,
    /// Unprivileged user namespaces can be created (Linux).
    pub user_namespaces: bool,
    /// seccomp filters can be installed (Linux).
    pub seccomp: bool,
    /// Seatbelt (`sandbox_init`) is available (macOS).
    pub seatbelt: bool,
}

pub mod macos;

/// Probe what this machine's kernel offers.
pub fn probe() -> KernelSupport {
    #[cfg(target_os = "linux")]
    {
        linux::probe::probe()
    }
    #[cfg(target_os = "macos")]
    {
        KernelSupport {
            seatbelt: macos::apply::available(),
            ..KernelSupport::default()
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        KernelSupport::default()
    }
}
