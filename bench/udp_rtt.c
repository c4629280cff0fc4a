// Round trips of small UDP datagrams, for bench/udp_relay.sh: through sandpit's UDP
// relay (network.mode = "unrestricted") against the same exchange made directly.
//
//   udp_rtt echo ADDR PORT          answer every datagram with itself, forever
//   udp_rtt client ADDR PORT N      N round trips of a 64-byte datagram on a
//                                   connected socket; prints "RTT <per second>"
// Built static, so the relay is measured without the interposer in the way.
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

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

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: udp_rtt echo ADDR PORT | client ADDR PORT N\n");
    return 2;
  }
  struct sockaddr_storage ss;
  socklen_t len = addr_of(argv[2], argv[3], &ss);
  int fd = socket(ss.ss_family, SOCK_DGRAM, 0);
  if (fd < 0) return perror("socket"), 1;
  char buf[2048];
  if (!strcmp(argv[1], "echo")) {
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) return perror("bind"), 1;
    for (;;) {
      struct sockaddr_storage from;
      socklen_t fl = sizeof from;
      ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
      if (n >= 0) sendto(fd, buf, n, 0, (struct sockaddr *)&from, fl);
    }
  }
  long n = argc > 4 ? atol(argv[4]) : 10000;
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&ss, len) != 0) return perror("connect"), 1;
  memset(buf, 'x', 64);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) {
    if (send(fd, buf, 64, 0) != 64) return perror("send"), 1;
    if (recv(fd, buf, sizeof buf, 0) != 64) return perror("recv"), 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
  printf("RTT %.0f\n", n / s);
  return 0;
}
