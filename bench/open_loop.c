// Wall-clock open+close loop (bench/kernel_reports.sh): N opens of PATH, prints
// nanoseconds per call. Wall time, not CPU time: a call stopped by the seccomp
// notifier waits for the launcher's thread, which CPU time would not count.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: open_loop PATH N\n"); return 2; }
    long n = atol(argv[2]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0) { perror("open"); return 1; }
        close(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.1f\n", ns / n);
    return 0;
}
