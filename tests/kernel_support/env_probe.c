/* What a program sees of its environment, and how it starts others, for
 * tests/env.rs. Built dynamic (the interposer loads) and static (it does not).
 *
 *   env_probe show NAME...       "TAG NAME=<value>|absent" from environ, and
 *                                "TAG proc NAME=<value>|absent" from /proc/self/environ
 *   env_probe spawn PROG ARG...  fork, execv(PROG) with this environment, wait
 *   env_probe exec PROG ARG...   execv(PROG) in place
 *   env_probe peek parent        print the parent's /proc/PID/environ (or that it
 *                                cannot be read)
 * TAG is $PROBE_TAG or "-".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *tag(void) {
  const char *t = getenv("PROBE_TAG");
  return t ? t : "-";
}

static void from_proc(const char *name) {
  char buf[65536];
  FILE *f = fopen("/proc/self/environ", "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  size_t len = strlen(name);
  for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
    if (!strncmp(buf + i, name, len) && buf[i + len] == '=') {
      printf("%s proc %s\n", tag(), buf + i);
      return;
    }
  }
  printf("%s proc %s=absent\n", tag(), name);
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (!strcmp(argv[1], "show")) {
    for (int i = 2; i < argc; i++) {
      const char *v = getenv(argv[i]);
      printf("%s %s=%s\n", tag(), argv[i], v ? v : "absent");
      from_proc(argv[i]);
    }
    return 0;
  }
  if (!strcmp(argv[1], "spawn") && argc > 2) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      execv(argv[2], argv + 2);
      perror("execv");
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  if (!strcmp(argv[1], "exec") && argc > 2) {
    fflush(stdout);
    execv(argv[2], argv + 2);
    perror("execv");
    return 127;
  }
  if (!strcmp(argv[1], "peek") && argc == 3) {
    char path[64], buf[65536];
    if (strcmp(argv[2], "parent")) return 2;
    snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
    FILE *f = fopen(path, "r");
    if (!f) {
      printf("%s peek unreadable\n", tag());
      return 0;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
      if (!buf[i]) buf[i] = ' ';
    buf[n] = 0;
    printf("%s peek %s\n", tag(), buf);
    return 0;
  }
  return 2;
}
