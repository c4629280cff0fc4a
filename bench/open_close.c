/* open+close per call: prints the best-of-rounds CPU nanoseconds per iteration
 * (thread CPU time, so time spent descheduled on a shared machine is not counted). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *path = argv[1];
    long n = atol(argv[2]);
    double best = 1e18;
    for (int round = 0; round < 5; round++) {
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        for (long i = 0; i < n; i++) {
            int fd = open(path, O_RDONLY);
            if (fd < 0) { perror(path); return 1; }
            close(fd);
        }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
        if (ns < best) best = ns;
    }
    printf("%.1f\n", best);
    return 0;
}
