//! Denials to the launcher's audit socket (`SANDPIT_AUDIT`, unix datagram):
//! fire-and-forget, no allocation. Two shapes (docs/audit.md):
//! - a plain line (denials no single rule made: UDP, network mode, load failures);
//! - the line followed by structured fields, each after a NUL byte:
//!   `SANDPIT-AUDIT/1`, kind (`deny`|`learn`), action (`read`|`write`|`exec`|
//!   `connect`), then the subject (path; argv…; host, port).
//!
//! Either way the datagram starts with the line the program saw.

/// The first field of a structured record.
pub const MAGIC: &[u8] = b"SANDPIT-AUDIT/1";

/// Send a structured record; fields past the buffer are cut.
pub fn record(kind: &[u8], action: &[u8], message: &[u8], subject: &[&[u8]]) {
    let mut buf = [0u8; 8192];
    let mut len = 0;
    let mut put = |field: &[u8], first: bool| {
        if !first && len < buf.len() {
            buf[len] = 0;
            len += 1;
        }
        let n = field.len().min(buf.len() - len);
        buf[len..len + n].copy_from_slice(&field[..n]);
        len += n;
    };
    put(message, true);
    put(MAGIC, false);
    put(kind, false);
    put(action, false);
    for f in subject {
        put(f, false);
    }
    send(&buf[..len]);
}

pub fn send(line: &[u8]) {
    let Some(st) = crate::state::peek() else {
        return;
    };
    let Some(path) = &st.audit else { return };
    let p = path.as_bytes();
    // SAFETY: zeroed sockaddr_un is valid; the path is copied within bounds.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if p.len() >= sa.sun_path.len() {
        return;
    }
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in sa.sun_path.iter_mut().zip(p) {
        *d = *s as libc::c_char;
    }
    // SAFETY: plain socket calls on an fd we own and close.
    unsafe {
        let fd = libc::socket(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | crate::sys::SOCK_CLOEXEC,
            0,
        );
        if fd < 0 {
            return;
        }
        libc::sendto(
            fd,
            line.as_ptr().cast(),
            line.len(),
            libc::MSG_DONTWAIT | crate::sys::MSG_NOSIGNAL,
            (&raw const sa).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        );
        libc::close(fd);
    }
}
