/* recreate SRC DST DIR MODE: link SRC at DST; once it is gone (moved aside), link it
   again at once, then chmod DIR to MODE (octal); then wait to be killed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 5) return 2;
    mode_t m = strtol(argv[4], 0, 8);
    if (link(argv[1], argv[2])) { perror("link1"); return 1; }
    unsigned long n = 0;
    for (;;) {
        if (link(argv[1], argv[2]) == 0) break;
        if (errno != EEXIST) { perror("link2"); return 1; }
        n++;
    }
    if (chmod(argv[3], m)) perror("chmod");
    printf("RECREATED after %lu tries\n", n);
    fflush(stdout);
    pause();
    return 0;
}
