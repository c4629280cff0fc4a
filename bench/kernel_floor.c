// What the kernel mechanisms sandpit must use cost by themselves, with nothing of
// sandpit's: open+close of one path, N times, after installing
//   n   nothing (bare)
//   s   a seccomp filter of one rule (arch check, one syscall number, allow): the
//       kernel caches its verdict for open and close, what is left is the system
//       call's slower entry with any filter
//   l   a Landlock domain that handles one right no open asks for (EXECUTE)
//   t   a Landlock domain that handles TRUNCATE, which every open asks about
//   sl  both s and l: the floor under sandpit's kernel layer (which handles more
//       rights than l, never TRUNCATE or WRITE_FILE in namespace mode)
// Prints "MODE NS" (CPU nanoseconds per open+close, thread CPU time).
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3; older headers lack it */
#endif

static void seccomp_one_rule(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog p = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p)) { perror("seccomp"); exit(1); }
}

static void landlock_handling(unsigned long long handled) {
    struct landlock_ruleset_attr a = {.handled_access_fs = handled};
    int rs = syscall(SYS_landlock_create_ruleset, &a, sizeof a, 0);
    if (rs < 0) { perror("landlock_create_ruleset"); exit(1); }
    struct landlock_path_beneath_attr b = {.allowed_access = handled,
                                           .parent_fd = open("/", O_PATH | O_CLOEXEC)};
    if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &b, 0) ||
        syscall(SYS_landlock_restrict_self, rs, 0)) { perror("landlock"); exit(1); }
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: kernel_floor PATH N n|s|l|t|sl\n"); return 2; }
    long n = atol(argv[2]);
    const char *m = argv[3];
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) { perror("no_new_privs"); return 1; }
    if (strchr(m, 's')) seccomp_one_rule();
    if (strchr(m, 'l')) landlock_handling(LANDLOCK_ACCESS_FS_EXECUTE);
    if (strchr(m, 't')) landlock_handling(LANDLOCK_ACCESS_FS_TRUNCATE);
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (long i = 0; i < n; i++) {
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0) { perror("open"); return 1; }
        close(fd);
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    printf("%s %.1f\n", m, ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
