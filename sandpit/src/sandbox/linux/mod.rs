//! The Linux kernel layer. (Minimal here: only the capability probe `sandpit check`
//! needs; the kernel branch brings Landlock, seccomp and namespaces.)
pub mod probe;
mod sys;
