//! The environment variables through which `sandpit run` hands a run to the layers
//! inside it (the interposer and the shims): one definition for the launcher that
//! sets them and the library that reads them.

/// The loader variable that injects the interposer.
#[cfg(not(target_os = "macos"))]
pub const PRELOAD_VAR: &str = "LD_PRELOAD";
#[cfg(target_os = "macos")]
pub const PRELOAD_VAR: &str = "DYLD_INSERT_LIBRARIES";
/// The run's policy snapshot.
pub const SNAPSHOT_VAR: &str = "SANDPIT_SNAPSHOT";
/// sandpit's state directory: the snapshot must lie inside it.
pub const STATE_DIR_VAR: &str = "SANDPIT_STATE_DIR";
/// The proxy's transparent-redirect address, and its per-run token.
pub const PROXY_VAR: &str = "SANDPIT_PROXY";
pub const TOKEN_VAR: &str = "SANDPIT_PROXY_TOKEN";
/// sandpit's DNS responder.
pub const DNS_VAR: &str = "SANDPIT_DNS";
/// The audit session's datagram socket.
pub const AUDIT_VAR: &str = "SANDPIT_AUDIT";
/// The pid of the command sandpit starts, as it sees itself (Linux): the process the
/// interposer takes for the agent, with `env.agent_programs`. Without it every process
/// counts as the agent (`files.agent_read` is then the interposer's alone nowhere).
pub const AGENT_PID_VAR: &str = "SANDPIT_AGENT_PID";
/// Set in a command the agent spawned once it holds the layer that hides
/// `files.agent_read` (it is inherited: its descendants take no second one).
pub const HIDDEN_VAR: &str = "SANDPIT_AGENT_FILES_HIDDEN";
