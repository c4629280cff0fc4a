/* One network operation, as a real program does it, for tests/modes.rs. Built
 * dynamic (the interposer loads) and static (it does not). Prints one line:
 * "OK <first line of the reply>" or "FAIL <why>"; exits 0 either way.
 *
 *   net_probe connect HOST PORT   TCP connect() straight to HOST:PORT, send an HTTP
 *                                 request, read the reply
 *   net_probe proxy HOST PORT     the same through $HTTPS_PROXY (HTTP CONNECT with
 *                                 the URL's user:password), as proxy-aware clients do
 *   net_probe listen ADDR PORT    bind() and listen() a TCP server there
 *   net_probe udp HOST PORT       connect() a UDP socket there, send one datagram
 *                                 and print the first line of the reply (the lab's
 *                                 stand-ins echo): "OK <reply>", or "FAIL no reply"
 *                                 after 3 s, or the error (an ICMP error ends the
 *                                 wait at once on a connected socket)
 *   net_probe udp-to HOST PORT    the same with sendto() and recvfrom() on a socket
 *                                 never connected
 *   net_probe unix PATH -         connect() to the Unix socket PATH and send a line
 *   net_probe unix-own PATH -     bind and listen on PATH, then connect to it and
 *                                 read back what was sent: a socket of the run's own
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(const char *what) {
  printf("FAIL %s: %s\n", what, strerror(errno));
  return 0;
}

/* A numeric address, IPv4 or IPv6, into `ss`. */
static socklen_t addr_of(const char *host, const char *port, struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(atoi(port));
    return sizeof *v4;
  }
  if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(atoi(port));
    return sizeof *v6;
  }
  fprintf(stderr, "not a numeric address: %s\n", host);
  exit(2);
}

static int dial(const char *host, const char *port) {
  struct sockaddr_storage ss;
  socklen_t len = addr_of(host, port, &ss);
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* Read up to the end of the first line (or of the reply). */
static int first_line(int fd, char *buf, size_t cap) {
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, 1);
    if (r <= 0) break;
    if (buf[n] == '\n' || buf[n] == '\r') break;
    n++;
  }
  buf[n] = 0;
  return (int)n;
}

static int request(int fd) {
  const char *req = "GET / HTTP/1.0\r\n\r\n";
  if (write(fd, req, strlen(req)) < 0) return fail("write");
  char line[256];
  /* The lab's servers answer with one line of their own. */
  if (first_line(fd, line, sizeof line) <= 0) return fail("no reply");
  printf("OK %s\n", line);
  return 0;
}

static void base64(const char *in, char *out) {
  static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t n = strlen(in), o = 0;
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned char)in[i] << 16;
    if (i + 1 < n) v |= (unsigned char)in[i + 1] << 8;
    if (i + 2 < n) v |= (unsigned char)in[i + 2];
    out[o++] = t[(v >> 18) & 63];
    out[o++] = t[(v >> 12) & 63];
    out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
    out[o++] = i + 2 < n ? t[v & 63] : '=';
  }
  out[o] = 0;
}

static int via_proxy(const char *host, const char *port) {
  /* http://user:pass@127.0.0.1:PORT */
  const char *url = getenv("HTTPS_PROXY");
  if (!url || strncmp(url, "http://", 7)) {
    printf("FAIL no HTTPS_PROXY\n");
    return 0;
  }
  char buf[512];
  snprintf(buf, sizeof buf, "%s", url + 7);
  char *slash = strchr(buf, '/');
  if (slash) *slash = 0;
  char *at = strrchr(buf, '@');
  char *userinfo = NULL, *hostport = buf;
  if (at) {
    *at = 0;
    userinfo = buf;
    hostport = at + 1;
  }
  char *colon = strrchr(hostport, ':');
  if (!colon) {
    printf("FAIL proxy URL has no port\n");
    return 0;
  }
  *colon = 0;
  int fd = dial(hostport, colon + 1);
  if (fd < 0) return fail("connect to the proxy");
  char auth[400] = "";
  if (userinfo) {
    char b64[400];
    base64(userinfo, b64);
    snprintf(auth, sizeof auth, "Proxy-Authorization: Basic %s\r\n", b64);
  }
  char req[1024];
  int v6 = strchr(host, ':') != NULL;
  snprintf(req, sizeof req, "CONNECT %s%s%s:%s HTTP/1.1\r\nHost: %s%s%s:%s\r\n%s\r\n", v6 ? "[" : "",
           host, v6 ? "]" : "", port, v6 ? "[" : "", host, v6 ? "]" : "", port, auth);
  if (write(fd, req, strlen(req)) < 0) return fail("write to the proxy");
  char line[256];
  first_line(fd, line, sizeof line);
  if (strncmp(line, "HTTP/1.1 200", 12) && strncmp(line, "HTTP/1.0 200", 12)) {
    printf("FAIL proxy said: %s\n", line);
    return 0;
  }
  /* The rest of the proxy's head: lines up to the empty one (the status line's
   * '\n' is still unread). */
  char c;
  int len = -1;
  while (read(fd, &c, 1) == 1) {
    if (c == '\n') {
      if (len == 0) break;
      len = 0;
    } else if (c != '\r') {
      len = len < 0 ? 1 : len + 1;
    }
  }
  return request(fd);
}

static socklen_t unix_addr(const char *path, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa->sun_path) {
    fprintf(stderr, "path too long: %s\n", path);
    exit(2);
  }
  strcpy(sa->sun_path, path);
  return sizeof *sa;
}

/* The daemon side of these tests prints what it received; the line names the op. */
static int unix_connect(const char *path) {
  struct sockaddr_un sa;
  socklen_t len = unix_addr(path, &sa);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return fail("socket");
  if (connect(fd, (struct sockaddr *)&sa, len) != 0) return fail("connect");
  if (write(fd, "RUN-THIS\n", 9) != 9) return fail("write");
  printf("OK connected\n");
  return 0;
}

static int unix_own(const char *path) {
  struct sockaddr_un sa;
  socklen_t len = unix_addr(path, &sa);
  unlink(path);
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  if (l < 0) return fail("socket");
  if (bind(l, (struct sockaddr *)&sa, len) != 0) return fail("bind");
  if (listen(l, 1) != 0) return fail("listen");
  int c = socket(AF_UNIX, SOCK_STREAM, 0);
  if (c < 0) return fail("socket");
  if (connect(c, (struct sockaddr *)&sa, len) != 0) return fail("connect");
  int a = accept(l, NULL, NULL);
  if (a < 0) return fail("accept");
  char buf[16] = {0};
  if (write(c, "OWN", 3) != 3 || read(a, buf, 3) != 3) return fail("echo");
  unlink(path);
  printf("OK %s\n", buf);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: net_probe connect|proxy|listen|udp HOST PORT, unix|unix-own PATH -\n");
    return 2;
  }
  const char *op = argv[1], *host = argv[2], *port = argv[3];
  if (!strcmp(op, "unix")) return unix_connect(host);
  if (!strcmp(op, "unix-own")) return unix_own(host);
  if (!strcmp(op, "connect")) {
    int fd = dial(host, port);
    if (fd < 0) return fail("connect");
    return request(fd);
  }
  if (!strcmp(op, "proxy")) return via_proxy(host, port);
  struct sockaddr_storage ss;
  socklen_t len = addr_of(host, port, &ss);
  if (!strcmp(op, "listen")) {
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0) return fail("socket");
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) return fail("bind");
    if (listen(fd, 1) != 0) return fail("listen");
    printf("OK listening\n");
    return 0;
  }
  if (!strcmp(op, "udp") || !strcmp(op, "udp-to")) {
    int fd = socket(ss.ss_family, SOCK_DGRAM, 0);
    if (fd < 0) return fail("socket");
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    ssize_t n;
    if (!strcmp(op, "udp")) {
      if (connect(fd, (struct sockaddr *)&ss, len) != 0) return fail("connect");
      if (send(fd, "probe\n", 6, 0) != 6) return fail("send");
      n = recv(fd, buf, sizeof buf - 1, 0);
    } else {
      if (sendto(fd, "probe\n", 6, 0, (struct sockaddr *)&ss, len) != 6) return fail("sendto");
      n = recvfrom(fd, buf, sizeof buf - 1, 0, NULL, NULL);
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      printf("FAIL no reply\n");
      return 0;
    }
    if (n < 0) return fail("recv");
    buf[n] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    printf("OK %s\n", buf);
    return 0;
  }
  fprintf(stderr, "unknown operation %s\n", op);
  return 2;
}
