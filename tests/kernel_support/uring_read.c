// Read a file through io_uring only (openat + read submitted to the ring), using raw
// syscalls so no liburing is needed. Prints the bytes read, or the failing step.
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int ring_fd;
static struct io_uring_params p;
static unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
static struct io_uring_sqe *sqes;
static struct io_uring_cqe *cqes;

static int submit(struct io_uring_sqe *tmpl) {
    unsigned tail = *sq_tail, idx = tail & *sq_mask;
    sqes[idx] = *tmpl;
    sq_array[idx] = idx;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, ring_fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) {
        printf("io_uring_enter: %s\n", strerror(errno));
        return -100000;
    }
    unsigned head = __atomic_load_n(cq_head, __ATOMIC_ACQUIRE);
    int res = cqes[head & *cq_mask].res;
    __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
    return res;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    ring_fd = syscall(__NR_io_uring_setup, 4, &p);
    if (ring_fd < 0) { printf("io_uring_setup: %s\n", strerror(errno)); return 1; }
    char *sq = mmap(0, p.sq_off.array + p.sq_entries * 4, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd, IORING_OFF_SQ_RING);
    char *cq = mmap(0, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd, IORING_OFF_CQ_RING);
    sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) { printf("mmap failed\n"); return 1; }
    sq_tail = (unsigned *)(sq + p.sq_off.tail); sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    sq_array = (unsigned *)(sq + p.sq_off.array);
    cq_head = (unsigned *)(cq + p.cq_off.head); cq_tail = (unsigned *)(cq + p.cq_off.tail);
    cq_mask = (unsigned *)(cq + p.cq_off.ring_mask); cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    struct io_uring_sqe s; memset(&s, 0, sizeof s);
    s.opcode = IORING_OP_OPENAT; s.fd = AT_FDCWD; s.addr = (unsigned long)argv[1]; s.open_flags = O_RDONLY;
    int fd = submit(&s);
    if (fd < 0) { printf("uring openat: %s\n", strerror(-fd)); return 1; }
    static char buf[4096];
    memset(&s, 0, sizeof s);
    s.opcode = IORING_OP_READ; s.fd = fd; s.addr = (unsigned long)buf; s.len = sizeof buf - 1; s.off = 0;
    int n = submit(&s);
    if (n < 0) { printf("uring read: %s\n", strerror(-n)); return 1; }
    buf[n] = 0;
    printf("uring-read:%s\n", buf);
    return 0;
}
