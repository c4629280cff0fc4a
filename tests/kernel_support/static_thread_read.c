// A static binary that reads the file given on the command line from a second
// thread (raw system calls), as a multithreaded agent reads its login from a worker
// thread: the seccomp notifier sees the thread's id, not the process's.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *path;

static void *reader(void *unused) {
    (void)unused;
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY, 0);
    if (fd < 0) { printf("thread-open %s: %s\n", path, strerror(errno)); return NULL; }
    char buf[4096];
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    if (n < 0) n = 0;
    buf[n] = 0;
    printf("thread-read %s:%s\n", path, buf);
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    path = argv[1];
    pthread_t t;
    if (pthread_create(&t, NULL, reader, NULL) != 0) return 1;
    pthread_join(t, NULL);
    return 0;
}
