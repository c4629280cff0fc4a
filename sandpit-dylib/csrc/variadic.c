/* The variadic exec entry points. Stable Rust cannot define a C-variadic function,
 * and glibc's execl* call execve internally (not through the PLT), so they must be
 * hooked: these collect the arguments into an array on the stack (no allocation:
 * they can run in a child forked from a threaded parent) and hand over to the Rust
 * hook bodies. The exported `execl`, `execlp`, `execle` symbols are naked Rust
 * trampolines that jump here with the caller's registers and stack untouched. */
#include <stdarg.h>
#include <stddef.h>

#ifdef __APPLE__
/* In a dylib `environ` is not linkable; libSystem hands out its address. On macOS
 * these functions are C-variadic, so they are the `__interpose` replacements
 * themselves (no assembly trampoline). */
#include <crt_externs.h>
#define environ (*_NSGetEnviron())
#else
extern char **environ;
#endif
int sandpit_execve_impl(const char *path, char *const argv[], char *const envp[]);
int sandpit_execvpe_impl(const char *file, char *const argv[], char *const envp[]);

#define HIDDEN __attribute__((visibility("hidden")))

/* Count the arguments after `arg` up to the terminating NULL. */
#define COUNT(n, arg, last)                                   \
    do {                                                      \
        va_list ap_;                                          \
        n = 1;                                                \
        if (arg != NULL) {                                    \
            va_start(ap_, last);                              \
            while (va_arg(ap_, const char *) != NULL) n++;    \
            va_end(ap_);                                      \
            n++;                                              \
        }                                                     \
    } while (0)

/* Declare `argv`, a stack array of `arg`, the variadic arguments up to the
 * terminating NULL, and that NULL; `ap` is left started, just past the NULL (where
 * execle's environment is). The caller ends it. */
#define COLLECT(argv, arg, ap)                                            \
    size_t n_;                                                            \
    COUNT(n_, arg, arg);                                                  \
    const char *argv[n_];                                                 \
    argv[0] = arg;                                                        \
    va_list ap;                                                           \
    va_start(ap, arg);                                                    \
    for (size_t i_ = 1; i_ < n_; i_++) argv[i_] = va_arg(ap, const char *); \
    argv[n_ - 1] = NULL

HIDDEN int sandpit_c_execl(const char *path, const char *arg, ...) {
    COLLECT(argv, arg, ap);
    va_end(ap);
    return sandpit_execve_impl(path, (char *const *)argv, environ);
}

HIDDEN int sandpit_c_execlp(const char *file, const char *arg, ...) {
    COLLECT(argv, arg, ap);
    va_end(ap);
    return sandpit_execvpe_impl(file, (char *const *)argv, environ);
}

HIDDEN int sandpit_c_execle(const char *path, const char *arg, ...) {
    COLLECT(argv, arg, ap);
    /* After the terminating NULL comes the environment. */
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return sandpit_execve_impl(path, (char *const *)argv, envp);
}
