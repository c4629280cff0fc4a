// open+close microbenchmark: N iterations on one path, prints CPU nanoseconds per
// call (thread CPU time, so other jobs on a shared machine distort it less).
// Used by run_startup.sh inside and outside the sandbox with the same binary.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: openclose PATH N r|w\n"); return 2; }
    long n = atol(argv[2]);
    int flags = argv[3][0] == 'w' ? O_WRONLY : O_RDONLY;
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (long i = 0; i < n; i++) {
        int fd = open(argv[1], flags);
        if (fd < 0) { perror("open"); return 1; }
        close(fd);
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.1f\n", ns / n);
    return 0;
}
