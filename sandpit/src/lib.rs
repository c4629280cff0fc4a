//! The sandpit launcher.
pub mod cli;
