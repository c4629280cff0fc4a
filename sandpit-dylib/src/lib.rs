//! The injected interposition library.
