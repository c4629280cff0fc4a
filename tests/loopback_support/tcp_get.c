/* A client that ignores proxy variables and every libc hook a preload could add:
 * built with -static, it connects with the raw socket calls to ADDR PORT, sends one
 * HTTP/1.0 request and prints "PORT:" followed by the response, or "PORT:ERR:" and
 * the reason. Usage: tcp_get ADDR PORT [ADDR PORT]...
 * `tcp_get bind ADDR PORT` binds and listens instead (prints "...:ok" or the error);
 * `bindwait` then stays listening until killed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static socklen_t fill(struct sockaddr_storage *out, const char *addr, int port) {
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    int family = strchr(addr, ':') ? AF_INET6 : AF_INET;
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        inet_pton(AF_INET, addr, &a->sin_addr);
        len = sizeof *a;
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        inet_pton(AF_INET6, addr, &a->sin6_addr);
        len = sizeof *a;
    }
    *out = ss;
    return len;
}

static int bind_listen(const char *addr, const char *port_s, int wait) {
    int port = atoi(port_s);
    struct sockaddr_storage ss;
    socklen_t len = fill(&ss, addr, port);
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 8) < 0) {
        printf("static bind %s:%d:ERR:%s\n", addr, port, strerror(errno));
        return 1;
    }
    printf("static bind %s:%d:ok listening\n", addr, port);
    fflush(stdout);
    if (wait) pause();
    return 0;
}

static void get(const char *addr, const char *port_s) {
    int port = atoi(port_s);
    struct sockaddr_storage ss;
    socklen_t len = fill(&ss, addr, port);
    int family = ss.ss_family;
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0) {
        printf("static %s:%d:ERR:%s\n", addr, port, strerror(errno));
        if (fd >= 0) close(fd);
        return;
    }
    const char *req = "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (write(fd, req, strlen(req)) < 0) {
        printf("static %s:%d:ERR:%s\n", addr, port, strerror(errno));
        close(fd);
        return;
    }
    char buf[4096];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0) got += n;
    buf[got] = 0;
    const char *body = strstr(buf, "\r\n\r\n");
    printf("static %s:%d:%s\n", addr, port, got == 0 ? "EMPTY" : body ? body + 4 : buf);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc == 4 && (!strcmp(argv[1], "bind") || !strcmp(argv[1], "bindwait")))
        return bind_listen(argv[2], argv[3], !strcmp(argv[1], "bindwait"));
    for (int i = 1; i + 1 < argc; i += 2) get(argv[i], argv[i + 1]);
    return 0;
}
