//! PATH shims and the argument parsers behind `sandpit exec`.
