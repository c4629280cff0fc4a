/* macOS: C trampolines for the C-variadic file entry points.
 *
 * Apple's arm64 ABI passes variadic arguments on the stack, not in registers, so a
 * Rust hook with a fixed `mode` argument would read garbage. For each symbol S
 * (`open`, `open$NOCANCEL`, `openat`, `openat$NOCANCEL`):
 *   sandpit_c_S     C-variadic, the `__DATA,__interpose` replacement for S: fetches
 *                   the mode when the flags say one was passed and calls
 *   sandpit_hook_S  the Rust hook body (fixed arguments, exported by the dylib),
 *                   whose real call is
 *   sandpit_real_S  fixed arguments in, calls the variadic original S by name
 *                   (interposing does not apply to this library's own calls).
 * The same shape serves `open_dprotected_np`, `openat_dprotected_np`,
 * `guarded_open_np` and `guarded_open_dprotected_np` below.
 * Symbol names carry `$`, so they are given as assembler labels. No allocation, no
 * locks: these can run in a child forked from a threaded parent. */
#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* The mode is only present (and only read) when O_CREAT asks for one; it follows
 * the last named parameter `last`. */
#define FETCH_MODE(mode, flags, last)                   \
    do {                                                \
        if ((flags) & O_CREAT) {                        \
            va_list ap_;                                \
            va_start(ap_, last);                        \
            mode = (mode_t)va_arg(ap_, int);            \
            va_end(ap_);                                \
        }                                               \
    } while (0)

#define OPEN_FAMILY(tag, sym)                                                        \
    int hook_##tag(const char *, int, mode_t) __asm("_sandpit_hook_" sym);           \
    int orig_##tag(const char *, int, ...) __asm("_" sym);                           \
    HIDDEN int c_##tag(const char *path, int flags, ...) __asm("_sandpit_c_" sym);   \
    HIDDEN int real_##tag(const char *, int, mode_t) __asm("_sandpit_real_" sym);    \
    int c_##tag(const char *path, int flags, ...) {                                  \
        mode_t mode = 0;                                                             \
        FETCH_MODE(mode, flags, flags);                                              \
        return hook_##tag(path, flags, mode);                                        \
    }                                                                                \
    int real_##tag(const char *path, int flags, mode_t mode) {                       \
        return orig_##tag(path, flags, (int)mode);                                   \
    }

#define OPENAT_FAMILY(tag, sym)                                                      \
    int hook_##tag(int, const char *, int, mode_t) __asm("_sandpit_hook_" sym);      \
    int orig_##tag(int, const char *, int, ...) __asm("_" sym);                      \
    HIDDEN int c_##tag(int dirfd, const char *path, int flags, ...)                  \
        __asm("_sandpit_c_" sym);                                                    \
    HIDDEN int real_##tag(int, const char *, int, mode_t) __asm("_sandpit_real_" sym); \
    int c_##tag(int dirfd, const char *path, int flags, ...) {                       \
        mode_t mode = 0;                                                             \
        FETCH_MODE(mode, flags, flags);                                              \
        return hook_##tag(dirfd, path, flags, mode);                                 \
    }                                                                                \
    int real_##tag(int dirfd, const char *path, int flags, mode_t mode) {            \
        return orig_##tag(dirfd, path, flags, (int)mode);                            \
    }

OPEN_FAMILY(open, "open")
OPEN_FAMILY(open_nocancel, "open$NOCANCEL")
OPENAT_FAMILY(openat, "openat")
OPENAT_FAMILY(openat_nocancel, "openat$NOCANCEL")

/* The data-protection and guarded variants (libSystem exports them; they open a path
 * like `open` but would bypass its hook). The mode follows the last named
 * parameter. */
typedef unsigned long long sandpit_guardid_t;

int hook_open_dp(const char *, int, int, int, mode_t) __asm("_sandpit_hook_open_dprotected_np");
int orig_open_dp(const char *, int, int, int, ...) __asm("_open_dprotected_np");
HIDDEN int c_open_dp(const char *, int, int, int, ...) __asm("_sandpit_c_open_dprotected_np");
HIDDEN int real_open_dp(const char *, int, int, int, mode_t) __asm("_sandpit_real_open_dprotected_np");
int c_open_dp(const char *path, int flags, int class, int dpflags, ...) {
    mode_t mode = 0;
    FETCH_MODE(mode, flags, dpflags);
    return hook_open_dp(path, flags, class, dpflags, mode);
}
int real_open_dp(const char *path, int flags, int class, int dpflags, mode_t mode) {
    return orig_open_dp(path, flags, class, dpflags, (int)mode);
}

int hook_openat_dp(int, const char *, int, int, int, mode_t)
    __asm("_sandpit_hook_openat_dprotected_np");
int orig_openat_dp(int, const char *, int, int, int, ...) __asm("_openat_dprotected_np");
HIDDEN int c_openat_dp(int, const char *, int, int, int, ...)
    __asm("_sandpit_c_openat_dprotected_np");
HIDDEN int real_openat_dp(int, const char *, int, int, int, mode_t)
    __asm("_sandpit_real_openat_dprotected_np");
int c_openat_dp(int dirfd, const char *path, int flags, int class, int dpflags, ...) {
    mode_t mode = 0;
    FETCH_MODE(mode, flags, dpflags);
    return hook_openat_dp(dirfd, path, flags, class, dpflags, mode);
}
int real_openat_dp(int dirfd, const char *path, int flags, int class, int dpflags, mode_t mode) {
    return orig_openat_dp(dirfd, path, flags, class, dpflags, (int)mode);
}

int hook_guarded(const char *, const sandpit_guardid_t *, unsigned, int, mode_t)
    __asm("_sandpit_hook_guarded_open_np");
int orig_guarded(const char *, const sandpit_guardid_t *, unsigned, int, ...)
    __asm("_guarded_open_np");
HIDDEN int c_guarded(const char *, const sandpit_guardid_t *, unsigned, int, ...)
    __asm("_sandpit_c_guarded_open_np");
HIDDEN int real_guarded(const char *, const sandpit_guardid_t *, unsigned, int, mode_t)
    __asm("_sandpit_real_guarded_open_np");
int c_guarded(const char *path, const sandpit_guardid_t *guard, unsigned gflags, int flags, ...) {
    mode_t mode = 0;
    FETCH_MODE(mode, flags, flags);
    return hook_guarded(path, guard, gflags, flags, mode);
}
int real_guarded(const char *path, const sandpit_guardid_t *guard, unsigned gflags, int flags,
                 mode_t mode) {
    return orig_guarded(path, guard, gflags, flags, (int)mode);
}

int hook_guarded_dp(const char *, const sandpit_guardid_t *, unsigned, int, int, int, mode_t)
    __asm("_sandpit_hook_guarded_open_dprotected_np");
int orig_guarded_dp(const char *, const sandpit_guardid_t *, unsigned, int, int, int, ...)
    __asm("_guarded_open_dprotected_np");
HIDDEN int c_guarded_dp(const char *, const sandpit_guardid_t *, unsigned, int, int, int, ...)
    __asm("_sandpit_c_guarded_open_dprotected_np");
HIDDEN int real_guarded_dp(const char *, const sandpit_guardid_t *, unsigned, int, int, int, mode_t)
    __asm("_sandpit_real_guarded_open_dprotected_np");
int c_guarded_dp(const char *path, const sandpit_guardid_t *guard, unsigned gflags, int flags,
                 int class, int dpflags, ...) {
    mode_t mode = 0;
    FETCH_MODE(mode, flags, dpflags);
    return hook_guarded_dp(path, guard, gflags, flags, class, dpflags, mode);
}
int real_guarded_dp(const char *path, const sandpit_guardid_t *guard, unsigned gflags, int flags,
                    int class, int dpflags, mode_t mode) {
    return orig_guarded_dp(path, guard, gflags, flags, class, dpflags, (int)mode);
}
