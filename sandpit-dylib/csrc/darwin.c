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
 * Symbol names carry `$`, so they are given as assembler labels. No allocation, no
 * locks: these can run in a child forked from a threaded parent. */
#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* The mode is only present (and only read) when O_CREAT asks for one. */
#define FETCH_MODE(mode, flags)                         \
    do {                                                \
        if ((flags) & O_CREAT) {                        \
            va_list ap_;                                \
            va_start(ap_, flags);                       \
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
        FETCH_MODE(mode, flags);                                                     \
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
        FETCH_MODE(mode, flags);                                                     \
        return hook_##tag(dirfd, path, flags, mode);                                 \
    }                                                                                \
    int real_##tag(int dirfd, const char *path, int flags, mode_t mode) {            \
        return orig_##tag(dirfd, path, flags, (int)mode);                            \
    }

OPEN_FAMILY(open, "open")
OPEN_FAMILY(open_nocancel, "open$NOCANCEL")
OPENAT_FAMILY(openat, "openat")
OPENAT_FAMILY(openat_nocancel, "openat$NOCANCEL")
