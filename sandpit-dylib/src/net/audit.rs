//! Denials to the launcher's audit socket (`SANDPIT_AUDIT`, unix datagram):
//! no allocation; a send waits at most a second for room. Two shapes (docs/audit.md):
//! - a plain line (denials no single rule made: UDP, network mode, load failures);
//! - the line followed by structured fields, each after a NUL byte:
//!   `SANDPIT-AUDIT/1`, kind (`deny`|`learn`), action (`read`|`write`|`exec`|
//!   `connect`), then the subject (path; argv…; host, port).
//!
//! Either way the datagram starts with the line the program saw. A record that cannot
//! be delivered (the launcher's queue stays full for a second) is counted, and the
//! count goes with the next one that gets through (kind `lost`).

/// The first field of a structured record.
pub const MAGIC: &[u8] = b"SANDPIT-AUDIT/1";

/// Send a structured record; fields past the buffer are cut.
pub fn record(kind: &[u8], action: &[u8], message: &[u8], subject: &[&[u8]]) {
    let mut buf = [0u8; 8192];
    let len = structured(&mut buf, kind, action, message, subject);
    send(&buf[..len]);
}

/// Lay out a structured record in `buf`; returns its length.
fn structured(
    buf: &mut [u8],
    kind: &[u8],
    action: &[u8],
    message: &[u8],
    subject: &[&[u8]],
) -> usize {
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
    len
}

/// Records this process could not deliver, told with the next one that gets through.
static LOST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How long one send may wait for room in the launcher's queue: a flood of denials
/// then runs at the pace the launcher logs them instead of losing records (the
/// queue holds `net.unix.max_dgram_qlen` datagrams, 10 on many machines).
const SEND_WAIT_SECS: libc::time_t = 1;

/// Send one datagram; what cannot be delivered is counted, and the count goes with
/// the next datagram that gets through (kind `lost`, the count as subject).
pub fn send(line: &[u8]) {
    use std::sync::atomic::Ordering;
    if !send_one(line) {
        LOST.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let lost = LOST.swap(0, Ordering::Relaxed);
    if lost > 0 {
        let mut digits = [0u8; 20];
        let mut n = lost;
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let count = &digits[i..];
        let mut buf = [0u8; 256];
        let len = structured(
            &mut buf,
            b"lost",
            b"other",
            b"sandpit: audit records of this process were lost: the launcher's audit socket stayed full",
            &[count],
        );
        if !send_one(&buf[..len]) {
            LOST.fetch_add(lost, Ordering::Relaxed);
        }
    }
}

/// One datagram; false only when the launcher's queue stayed full (or the send
/// failed otherwise) while the socket was there: a run without an audit socket, or
/// one whose socket is gone (the run is ending), loses nothing worth counting.
fn send_one(line: &[u8]) -> bool {
    let Some(st) = crate::state::peek() else {
        return true;
    };
    let Some(path) = &st.audit else { return true };
    let p = path.as_bytes();
    // SAFETY: zeroed sockaddr_un is valid; the path is copied within bounds.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if p.len() >= sa.sun_path.len() {
        return true;
    }
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in sa.sun_path.iter_mut().zip(p) {
        *d = *s as libc::c_char;
    }
    let wait = libc::timeval {
        tv_sec: SEND_WAIT_SECS,
        tv_usec: 0,
    };
    // SAFETY: plain socket calls on an fd we own and close; the option and the
    // address point to live values of the sizes given.
    unsafe {
        let fd = libc::socket(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | crate::sys::SOCK_CLOEXEC,
            0,
        );
        if fd < 0 {
            return false;
        }
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&raw const wait).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        let r = libc::sendto(
            fd,
            line.as_ptr().cast(),
            line.len(),
            crate::sys::MSG_NOSIGNAL,
            (&raw const sa).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        );
        let gone = r < 0 && matches!(crate::sys::errno(), libc::ENOENT | libc::ECONNREFUSED);
        libc::close(fd);
        r >= 0 || gone
    }
}
