// A static binary (no dynamic loader, so no LD_PRELOAD interposer) that creates or
// truncates each file given on the command line and writes "evil" into it, with raw
// system calls; prints what happened to each.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        long fd = syscall(SYS_openat, AT_FDCWD, argv[i], O_WRONLY | O_CREAT | O_TRUNC, 0755);
        if (fd < 0) { printf("static-write %s: %s\n", argv[i], strerror(errno)); continue; }
        long n = syscall(SYS_write, fd, "evil\n", 5);
        printf("static-write %s: %s\n", argv[i], n == 5 ? "written" : strerror(errno));
        close(fd);
    }
    return 0;
}
