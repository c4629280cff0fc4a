# Read files with raw system calls through ctypes (a second libc handle, no Python
# file API): openat by absolute path, openat relative to a directory fd, and re-open
# of an O_PATH descriptor through /proc/self/fd. Prints what each route read.
import ctypes, os, sys

libc = ctypes.CDLL("libc.so.6", use_errno=True)
SYS_openat, SYS_read = 257, 0
AT_FDCWD = -100
O_PATH, O_DIRECTORY = 0o10000000, 0o200000

def raw_open(dirfd, path, flags=0):
    fd = libc.syscall(SYS_openat, dirfd, path.encode(), flags, 0)
    return fd, ctypes.get_errno()

def raw_read(fd):
    buf = ctypes.create_string_buffer(4096)
    n = libc.syscall(SYS_read, fd, buf, 4095)
    return buf.raw[: max(n, 0)].decode(errors="replace")

for path in sys.argv[1:]:
    fd, e = raw_open(AT_FDCWD, path)
    print(f"raw-abs {path}: " + (raw_read(fd) if fd >= 0 else os.strerror(e)))
    d, base = os.path.split(path)
    dfd, e = raw_open(AT_FDCWD, d, O_DIRECTORY)
    if dfd >= 0:
        fd, e = raw_open(dfd, base)
        print(f"raw-dirfd {path}: " + (raw_read(fd) if fd >= 0 else os.strerror(e)))
    pfd, e = raw_open(AT_FDCWD, path, O_PATH)
    if pfd >= 0:
        fd, e = raw_open(AT_FDCWD, f"/proc/self/fd/{pfd}")
        print(f"raw-opath {path}: " + (raw_read(fd) if fd >= 0 else os.strerror(e)))
    else:
        print(f"raw-opath {path}: {os.strerror(e)}")
