// The floor under #5's throughput goal: what relaying a TCP upload through a second
// loopback connection costs by itself, with nothing of sandpit's (no policy, no
// runtime, no event loop: one blocking thread per direction), against the same upload
// sent directly, measured alternately in one process.
//
//   relay_floor MB ROUNDS
//
// Per round and way: a client thread writes MB megabytes in 256 KiB writes to the
// sink (directly, or through the relay), half-closes and waits for the sink's "k";
// the sink reads in 256 KiB reads until end of stream. Ways:
//   direct  client -> sink
//   copy    client -> relay -> sink, read/write through a 4 MiB buffer
//   splice  client -> relay -> sink, splice(2) through a 1 MiB pipe, filled and
//           drained in turn by one thread
//   splice2 the same, but a second thread drains the pipe while the first fills it
// Prints per way the median MB/s, the median ratio to the direct run of the same
// round, the process's CPU time per transfer (client, sink and relay together), and
// the ceiling that CPU time sets: direct's wall time over the way's CPU time spread
// over every core.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)
#define COPY_BUF (4 << 20)
#define PIPE_SZ (1 << 20)

static void die(const char *what) {
  perror(what);
  exit(1);
}

static int listener(const char *ip, struct sockaddr_in *at) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  if (l < 0) die("socket");
  memset(at, 0, sizeof *at);
  at->sin_family = AF_INET;
  inet_pton(AF_INET, ip, &at->sin_addr);
  if (bind(l, (struct sockaddr *)at, sizeof *at) || listen(l, 16)) die("bind");
  socklen_t n = sizeof *at;
  getsockname(l, (struct sockaddr *)at, &n);
  return l;
}

static int dial(const struct sockaddr_in *at) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0 || connect(s, (const struct sockaddr *)at, sizeof *at)) die("connect");
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

static void *sink(void *arg) {
  int l = *(int *)arg;
  char *buf = malloc(CHUNK);
  for (;;) {
    int s = accept(l, NULL, NULL);
    if (s < 0) die("accept");
    while (read(s, buf, CHUNK) > 0) {
    }
    if (write(s, "k", 1) != 1) die("sink write");
    close(s);
  }
  return NULL;
}

enum mode { COPY, SPLICE, SPLICE2 };

struct way {
  int from, to;
  enum mode mode;
};

struct drain {
  int pipe, to;
};

// Empties the pipe into the socket until the pipe's write end is closed.
static void *drain(void *arg) {
  struct drain *d = arg;
  while (splice(d->pipe, NULL, d->to, NULL, PIPE_SZ, SPLICE_F_MOVE) > 0) {
  }
  return NULL;
}

static void *one_way(void *arg) {
  struct way *w = arg;
  if (w->mode != COPY) {
    int p[2];
    if (pipe(p)) die("pipe");
    fcntl(p[1], F_SETPIPE_SZ, PIPE_SZ);
    struct drain d = {p[0], w->to};
    pthread_t t;
    if (w->mode == SPLICE2) pthread_create(&t, NULL, drain, &d);
    for (;;) {
      ssize_t n = splice(w->from, NULL, p[1], NULL, PIPE_SZ, SPLICE_F_MOVE);
      if (n <= 0) break;
      while (w->mode == SPLICE && n > 0) {
        ssize_t m = splice(p[0], NULL, w->to, NULL, n, SPLICE_F_MOVE);
        if (m <= 0) die("splice out");
        n -= m;
      }
    }
    close(p[1]);
    if (w->mode == SPLICE2) pthread_join(t, NULL);
    close(p[0]);
  } else {
    char *buf = malloc(COPY_BUF);
    ssize_t n;
    while ((n = read(w->from, buf, COPY_BUF)) > 0) {
      for (ssize_t off = 0; off < n;) {
        ssize_t m = write(w->to, buf + off, n - off);
        if (m <= 0) die("relay write");
        off += m;
      }
    }
    free(buf);
  }
  shutdown(w->to, SHUT_WR);
  return NULL;
}

struct relay {
  int l;
  enum mode mode;
  struct sockaddr_in sink;
};

// Accepts one connection at a time and relays it both ways until both have ended.
static void *relay(void *arg) {
  struct relay *r = arg;
  for (;;) {
    int c = accept(r->l, NULL, NULL);
    if (c < 0) die("accept");
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int u = dial(&r->sink);
    struct way up = {c, u, r->mode}, down = {u, c, r->mode};
    pthread_t t;
    pthread_create(&t, NULL, one_way, &down);
    one_way(&up);
    pthread_join(t, NULL);
    close(c);
    close(u);
  }
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_ms(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

// MB/s of one upload of `total` bytes to `at`; adds its CPU time to *cpu.
static double upload(const struct sockaddr_in *at, size_t total, double *cpu) {
  static char chunk[CHUNK];
  double c0 = cpu_ms(), t0 = now();
  int s = dial(at);
  for (size_t sent = 0; sent < total;) {
    ssize_t n = write(s, chunk, total - sent < CHUNK ? total - sent : CHUNK);
    if (n <= 0) die("client write");
    sent += n;
  }
  shutdown(s, SHUT_WR);
  char k;
  if (read(s, &k, 1) != 1 || k != 'k') die("no k");
  close(s);
  double secs = now() - t0;
  *cpu += cpu_ms() - c0;
  return total / 1e6 / secs;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  double s[n];
  memcpy(s, v, sizeof s);
  qsort(s, n, sizeof *s, cmp);
  return s[n / 2];
}

int main(int argc, char **argv) {
  size_t mb = argc > 1 ? atoi(argv[1]) : 100;
  int rounds = argc > 2 ? atoi(argv[2]) : 9;
  if (rounds < 1 || rounds > 99) rounds = 9;
  size_t total = mb * 1000000;
  enum { WAYS = 4 };
  static struct sockaddr_in at[WAYS];
  static int sink_l;
  sink_l = listener("127.0.0.2", &at[0]);
  pthread_t t;
  pthread_create(&t, NULL, sink, &sink_l);
  static struct relay relays[WAYS - 1];
  for (int i = 0; i < WAYS - 1; i++) {
    relays[i].l = listener("127.0.0.1", &at[i + 1]);
    relays[i].mode = (enum mode)i;
    relays[i].sink = at[0];
    pthread_create(&t, NULL, relay, &relays[i]);
  }
  const char *names[WAYS] = {"direct", "copy", "splice", "splice2"};
  double speed[WAYS][99], ratio[WAYS][99], cpu[WAYS] = {0}, warm = 0;
  for (int w = 0; w < WAYS; w++) upload(&at[w], total / 4, &warm);
  for (int r = 0; r < rounds; r++)
    for (int w = 0; w < WAYS; w++) {
      speed[w][r] = upload(&at[w], total, &cpu[w]);
      ratio[w][r] = speed[w][r] / speed[0][r];
    }
  double cores = sysconf(_SC_NPROCESSORS_ONLN);
  double direct_ms = total / 1e3 / median(speed[0], rounds);
  for (int w = 0; w < WAYS; w++) {
    double per = cpu[w] / rounds, spread = per / cores;
    printf("%s %.0f MB/s ratio %.2f cpu %.1f ms ceiling %.2f\n", names[w],
           median(speed[w], rounds), median(ratio[w], rounds), per,
           direct_ms / (spread > direct_ms ? spread : direct_ms));
  }
  return 0;
}
