/* A small probe for the interposer tests: performs one libc call named on the
 * command line and prints "ok" or "err <errno>" (and for reads, the data read). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int res(int r) {
    if (r < 0) { printf("err %d\n", errno); return 1; }
    printf("ok\n");
    return 0;
}

static int dump(int fd) {
    if (fd < 0) { printf("err %d\n", errno); return 1; }
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0) { printf("err %d\n", errno); return 1; }
    buf[n] = 0;
    printf("ok %s\n", buf);
    return 0;
}

/* A relative open that succeeds, so the interposer has asked for (and remembers)
 * the cwd before the change that follows. */
static void touch_cwd(void) {
    int d = open(".", O_RDONLY | O_DIRECTORY);
    if (d >= 0) close(d);
}

static int inet(const char *ip, int port, struct sockaddr_storage *ss, socklen_t *len) {
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *b = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, ip, &a->sin_addr) == 1) {
        a->sin_family = AF_INET; a->sin_port = htons(port); *len = sizeof *a; return AF_INET;
    }
    inet_pton(AF_INET6, ip, &b->sin6_addr);
    b->sin6_family = AF_INET6; b->sin6_port = htons(port); *len = sizeof *b; return AF_INET6;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *op = argv[1];
    const char *a = argc > 2 ? argv[2] : NULL;
    const char *b = argc > 3 ? argv[3] : NULL;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(op, "read")) return dump(open(a, O_RDONLY));
    if (!strcmp(op, "read64")) return dump(open64(a, O_RDONLY));
    if (!strcmp(op, "openat")) {           /* openat(open(dir), rel) */
        int d = open(a, O_RDONLY | O_DIRECTORY);
        if (d < 0) return res(-1);
        return dump(openat(d, b, O_RDONLY));
    }
    if (!strcmp(op, "opath")) {            /* O_PATH fd, then re-open via /proc/self/fd */
        int d = open(a, O_PATH);
        if (d < 0) return res(-1);
        char p[64]; snprintf(p, sizeof p, "/proc/self/fd/%d", d);
        return dump(open(p, O_RDONLY));
    }
    if (!strcmp(op, "fopen")) {
        FILE *f = fopen(a, b);
        if (!f) return res(-1);
        if (b[0] != 'r') { fputs("written\n", f); }
        else { char buf[256] = {0}; fgets(buf, sizeof buf, f); printf("ok %s\n", buf); fclose(f); return 0; }
        fclose(f); return res(0);
    }
    /* Change directory to `a` after a relative open, then read (or write) `b` relative to it:
     * through libc's chdir, fchdir, a raw system call, or in a vforked child that
     * changes directory, opens there and execs /bin/true (the parent then reads `b`
     * from its own, unchanged cwd). */
    if (!strcmp(op, "cd-read")) { touch_cwd(); if (chdir(a)) return res(-1); return dump(open(b, O_RDONLY)); }
    if (!strcmp(op, "cd-write")) {
        touch_cwd();
        if (chdir(a)) return res(-1);
        int fd = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) { write(fd, "written\n", 8); close(fd); }
        return res(fd);
    }
    if (!strcmp(op, "fcd-read")) {
        touch_cwd();
        int d = open(a, O_RDONLY | O_DIRECTORY);
        if (d < 0 || fchdir(d)) return res(-1);
        return dump(open(b, O_RDONLY));
    }
    if (!strcmp(op, "rawcd-read")) { touch_cwd(); if (syscall(SYS_chdir, a)) return res(-1); return dump(open(b, O_RDONLY)); }
    if (!strcmp(op, "vfork-cd-read")) {
        touch_cwd();
        pid_t pid = vfork();
        if (pid == 0) {
            if (chdir(a)) _exit(126);
            touch_cwd();
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
            printf("child failed\n");
            return 1;
        }
        return dump(open(b, O_RDONLY));
    }
    if (!strcmp(op, "opendir")) { DIR *d = opendir(a); return res(d ? 0 : -1); }
    if (!strcmp(op, "write")) {
        int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) { write(fd, "written\n", 8); close(fd); }
        return res(fd);
    }
    if (!strcmp(op, "creat")) return res(creat(a, 0644));
    if (!strcmp(op, "append")) {
        int fd = open(a, O_WRONLY | O_APPEND);
        if (fd >= 0) { write(fd, "appended\n", 9); close(fd); }
        return res(fd);
    }
    if (!strcmp(op, "truncate")) return res(truncate(a, 0));
    if (!strcmp(op, "rename")) return res(rename(a, b));
    if (!strcmp(op, "renameat2")) return res(renameat2(AT_FDCWD, a, AT_FDCWD, b, 0));
    if (!strcmp(op, "link")) return res(link(a, b));
    if (!strcmp(op, "symlink")) return res(symlink(a, b));
    if (!strcmp(op, "unlink")) return res(unlink(a));
    if (!strcmp(op, "mkdir")) return res(mkdir(a, 0755));
    if (!strcmp(op, "rmdir")) return res(rmdir(a));
    if (!strcmp(op, "chmod")) return res(chmod(a, 0777));
    if (!strcmp(op, "utimes")) return res(utimes(a, NULL));
    if (!strcmp(op, "mkfifo")) return res(mkfifo(a, 0644));
    if (!strcmp(op, "fchmodat")) return res(fchmodat(AT_FDCWD, a, 0777, 0));
    /* exec family: argv[2] is the program, argv[3..] its argv. */
    if (!strcmp(op, "execv")) { execv(a, argv + 3); return res(-1); }
    if (!strcmp(op, "execvp")) { execvp(a, argv + 3); return res(-1); }
    if (!strcmp(op, "execve-empty-env")) { char *e[] = {NULL}; execve(a, argv + 3, e); return res(-1); }
    if (!strcmp(op, "execl")) { execl(a, a, argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL, (char *)NULL); return res(-1); }
    if (!strcmp(op, "execlp")) { execlp(a, a, argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL, (char *)NULL); return res(-1); }
    if (!strcmp(op, "execle")) { char *e[] = {NULL}; execle(a, a, argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL, (char *)NULL, e); return res(-1); }
    if (!strcmp(op, "execveat")) { char *e[] = {NULL}; execveat(AT_FDCWD, a, argv + 3, e, 0); return res(-1); }
    if (!strcmp(op, "execveat-dir")) { /* execveat-dir DIR NAME argv...: NAME relative to DIR's fd */
        int d = open(a, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d < 0) return res(-1);
        char *e[] = {NULL}; execveat(d, b, argv + 4, e, 0); return res(-1);
    }
    if (!strcmp(op, "execvpe")) { char *e[] = {NULL}; execvpe(a, argv + 3, e); return res(-1); }
    if (!strcmp(op, "freopen")) {
        FILE *f = freopen(a, b, stdin);
        if (!f) return res(-1);
        char buf[256] = {0}; fgets(buf, sizeof buf, f); printf("ok %s\n", buf); return 0;
    }
    if (!strcmp(op, "fexecve")) {
        int fd = open(a, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return res(-1);
        char *e[] = {NULL};
        fexecve(fd, argv + 3, e); return res(-1);
    }
    if (!strcmp(op, "posix_spawn") || !strcmp(op, "posix_spawnp")) {
        pid_t pid; char *e[] = {NULL};
        int r = !strcmp(op, "posix_spawn") ? posix_spawn(&pid, a, NULL, NULL, argv + 3, e)
                                           : posix_spawnp(&pid, a, NULL, NULL, argv + 3, e);
        if (r != 0) { printf("err %d\n", r); return 1; }
        int st; waitpid(pid, &st, 0);
        printf("ok\n"); return 0;
    }
    if (!strcmp(op, "system")) {
        unsetenv("LD_PRELOAD");
        int r = system(a);
        if (r == -1) return res(-1);
        printf("ok %d\n", WIFEXITED(r) ? WEXITSTATUS(r) : -1); return 0;
    }
    if (!strcmp(op, "popen")) {
        unsetenv("LD_PRELOAD");
        FILE *f = popen(a, "r");
        if (!f) return res(-1);
        char buf[4096] = {0}; size_t n = fread(buf, 1, sizeof buf - 1, f); buf[n] = 0;
        int st = pclose(f);
        printf("ok %d %s\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf); return 0;
    }
    if (!strcmp(op, "getenv")) { const char *v = getenv(a); printf("ok %s\n", v ? v : "(unset)"); return 0; }
    /* network: argv[2] ip, argv[3] port */
    if (!strcmp(op, "connect") || !strcmp(op, "connect-nb")) {
        struct sockaddr_storage ss; socklen_t len;
        int fam = inet(a, atoi(b), &ss, &len);
        int fl = !strcmp(op, "connect-nb") ? SOCK_NONBLOCK : 0;
        int fd = socket(fam, SOCK_STREAM | fl, 0);
        int r = connect(fd, (struct sockaddr *)&ss, len);
        if (r < 0 && errno == EINPROGRESS) {
            struct pollfd p = {fd, POLLOUT, 0};
            poll(&p, 1, 5000);
            int err = 0; socklen_t el = sizeof err;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
            if (err) { printf("err %d\n", err); return 1; }
            r = 0;
        }
        if (r < 0) return res(-1);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        const char *msg = argc > 4 ? argv[4] : "hello\n";
        write(fd, msg, strlen(msg));
        char buf[256] = {0}; ssize_t n = read(fd, buf, sizeof buf - 1);
        printf("ok %s\n", n > 0 ? buf : "");
        return 0;
    }
    if (!strcmp(op, "connect-again")) {    /* connect twice, report the second */
        struct sockaddr_storage ss; socklen_t len;
        int fam = inet(a, atoi(b), &ss, &len);
        int fd = socket(fam, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&ss, len) < 0) return res(-1);
        return res(connect(fd, (struct sockaddr *)&ss, len));
    }
    if (!strcmp(op, "udp")) {
        struct sockaddr_storage ss; socklen_t len;
        int fam = inet(a, atoi(b), &ss, &len);
        int fd = socket(fam, SOCK_DGRAM, 0);
        return res((int)sendto(fd, "dgram", 5, 0, (struct sockaddr *)&ss, len));
    }
    if (!strcmp(op, "udp-connect")) {
        struct sockaddr_storage ss; socklen_t len;
        int fam = inet(a, atoi(b), &ss, &len);
        int fd = socket(fam, SOCK_DGRAM, 0);
        return res(connect(fd, (struct sockaddr *)&ss, len));
    }
    if (!strcmp(op, "tfo")) {
        struct sockaddr_storage ss; socklen_t len;
        int fam = inet(a, atoi(b), &ss, &len);
        int fd = socket(fam, SOCK_STREAM, 0);
        return res((int)sendto(fd, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&ss, len));
    }
    fprintf(stderr, "probe: unknown op %s\n", op);
    return 2;
}
