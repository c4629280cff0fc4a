//! The host's socket table (`sandpit/src/sandbox/linux/sockets.rs`) on arbitrary
//! bytes: the `UNIX_DIAG` answer and `/proc/net/unix`'s text, whose socket paths
//! programs on the machine choose. Never panics; every path taken is absolute and
//! holds no NUL byte (none is ever cut short at one it could not hold).
#![no_main]
use libfuzzer_sys::fuzz_target;
use sandpit::sandbox::linux::sockets::{parse, parse_diag};
use std::os::unix::ffi::OsStrExt;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = parse_diag(data) {
        for p in &c.paths {
            let b = p.as_os_str().as_bytes();
            assert!(b.first() == Some(&b'/') && !b.contains(&0), "{p:?}");
        }
    }
    if let Ok(paths) = parse(data) {
        for p in &paths {
            let b = p.as_os_str().as_bytes();
            assert!(b.first() == Some(&b'/') && !b.contains(&b'\n'), "{p:?}");
        }
    }
});
