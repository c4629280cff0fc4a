/* What a program with a sandbox of its own (Chromium's, Electron's) does first, for
 * tests/kernel_proc.rs. Built dynamic and static. Prints one line per step:
 * "userns OK|FAIL <why>", then, inside the new user namespace, "read …" (PATH,
 * a file the sandbox must not read), "mount …" and "chroot …".
 *
 *   userns_probe PATH
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static void step(const char *what, int ok) {
  if (ok)
    printf("%s OK\n", what);
  else
    printf("%s FAIL %s\n", what, strerror(errno));
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: userns_probe PATH\n");
    return 2;
  }
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) != 0) {
    step("userns", 0);
    return 0;
  }
  step("userns", 1);
  /* Full capabilities in the new namespace now: what do they buy? */
  char buf[64] = {0};
  int fd = open(argv[1], O_RDONLY);
  int got = fd >= 0 && read(fd, buf, sizeof buf - 1) > 0;
  step("read", got);
  if (got) printf("content %s\n", buf);
  step("mount", mount("none", "/tmp", "tmpfs", 0, NULL) == 0);
  step("chroot", chroot("/proc/self/fdinfo") == 0);
  return 0;
}
