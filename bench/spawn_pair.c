/* Interleaved start-up timing of two commands: A then B, RUNS times, each started with
 * fork + exec straight from here (no shell, no interpreter, no setpriv in between, so
 * the bare command's time is close to what fork+exec+exit itself costs). As root,
 * UID >= 0 makes the child drop to that uid/gid before exec.
 *   spawn_pair RUNS UID DIR_A DIR_B CMD_A... --vs-- CMD_B...
 * Prints "A_wall B_wall A_cpu B_cpu": medians in ms; cpu = user+sys of the child and
 * the descendants it waited for (wait4). Every run must exit 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return v[n / 2];
}

static void run(char **argv, const char *dir, int uid, int devnull, double *wall, double *cpu) {
    double t0 = now_ms();
    pid_t p = fork();
    if (p < 0) { perror("fork"); exit(1); }
    if (p == 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        if (chdir(dir) != 0) _exit(126);
        if (uid >= 0 && (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid)))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(p, &st, 0, &ru) != p) { perror("wait4"); exit(1); }
    *wall = now_ms() - t0;
    *cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3
         + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "spawn_pair: %s (in %s) ended with status %d\n", argv[0], dir, st);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: spawn_pair RUNS UID DIR_A DIR_B CMD_A... --vs-- CMD_B...\n");
        return 2;
    }
    int n = atoi(argv[1]), uid = atoi(argv[2]);
    const char *dir[2] = {argv[3], argv[4]};
    char **cmd[2] = {argv + 5, NULL};
    for (char **a = argv + 5; *a; a++)
        if (strcmp(*a, "--vs--") == 0) { *a = NULL; cmd[1] = a + 1; break; }
    if (n < 1 || !cmd[1] || !cmd[1][0]) {
        fprintf(stderr, "spawn_pair: RUNS >= 1 and both commands are needed\n");
        return 2;
    }
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    double *w[2], *c[2];
    for (int k = 0; k < 2; k++) {
        w[k] = calloc(n, sizeof(double));
        c[k] = calloc(n, sizeof(double));
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++)
            run(cmd[k], dir[k], uid, devnull, &w[k][i], &c[k][i]);
    printf("%.2f %.2f %.2f %.2f\n", median(w[0], n), median(w[1], n), median(c[0], n), median(c[1], n));
    return 0;
}
