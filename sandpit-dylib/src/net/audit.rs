//! Denials to the launcher's audit socket (`SANDPIT_AUDIT`, unix datagram):
//! fire-and-forget, no allocation.
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
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return;
        }
        libc::sendto(
            fd,
            line.as_ptr().cast(),
            line.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            (&raw const sa).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        );
        libc::close(fd);
    }
}
