// A static binary (no dynamic loader, so no LD_PRELOAD interposer) that reads files
// given on the command line with raw open/read system calls.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        long fd = syscall(SYS_openat, AT_FDCWD, argv[i], O_RDONLY, 0);
        if (fd < 0) { printf("static-open %s: %s\n", argv[i], strerror(errno)); continue; }
        char buf[4096];
        long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
        if (n < 0) { printf("static-read %s: %s\n", argv[i], strerror(errno)); continue; }
        buf[n] = 0;
        printf("static-read %s:%s\n", argv[i], buf);
        close(fd);
    }
    return 0;
}
