// A static binary (no dynamic loader, so no LD_PRELOAD interposer) that changes the
// file tree with raw system calls, as only the kernel layer can refuse:
//   static_fs symlink TARGET LINK | rename FROM TO | exchange A B | chmod PATH MODE
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    const char *op = argv[1];
    long r;
    if (!strcmp(op, "symlink"))
        r = syscall(SYS_symlinkat, argv[2], AT_FDCWD, argv[3]);
    else if (!strcmp(op, "rename"))
        r = syscall(SYS_renameat2, AT_FDCWD, argv[2], AT_FDCWD, argv[3], 0);
    else if (!strcmp(op, "exchange"))
        r = syscall(SYS_renameat2, AT_FDCWD, argv[2], AT_FDCWD, argv[3], RENAME_EXCHANGE);
    else if (!strcmp(op, "chmod"))
        r = syscall(SYS_fchmodat, AT_FDCWD, argv[2], (mode_t)strtol(argv[3], 0, 8));
    else
        return 2;
    if (r != 0) {
        printf("static-fs %s %s %s: %s\n", op, argv[2], argv[3], strerror(errno));
        return 1;
    }
    printf("static-fs %s %s %s: done\n", op, argv[2], argv[3]);
    return 0;
}
