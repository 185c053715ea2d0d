/*
 * The part of the C library proctree-enter uses, written on raw system calls (x86_64 and aarch64 Linux).
 *
 * Why: the exec step runs once per proctree.Popen start, and a statically
 * linked glibc spends ~0.5 ms of each run starting itself (its ifunc
 * relocations, TLS set-up and the page faults of a 680 KB image), a third of
 * what proctree.Popen adds to a start. Built with this file instead (-nostdlib
 * -ffreestanding), the step is a few KB and starts in microseconds.
 * build_keeper.py falls back to the glibc build wherever this one does not
 * compile or link (other architectures, other compilers).
 *
 * Each function keeps libc's prototype and contract (-1 with errno set, as
 * the step's code expects), so enter_linux.c reads the same either way. The
 * process is single-threaded and never allocates: there is no TLS, no stack
 * protector canary, no atexit; errno is one static int.
 */
#define _GNU_SOURCE
#include <asm/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "the freestanding exec step supports x86_64 and aarch64; build_keeper.py builds the glibc one elsewhere"
#endif

int main(int argc, char **argv);
void pt_start(long *sp);

static int pt_errno;
char **environ;

/* Returns this process's errno (glibc's errno macro reads it through this function). */
int *__errno_location(void)
{
    return &pt_errno;
}

#if defined(__x86_64__)
/* Returns the kernel's raw result of system call n: a value >= 0, or -errno. */
static long raw(long n, long a, long b, long c, long d, long e, long f)
{
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
/* The entry point: the stack holds argc, argv..., NULL, envp..., NULL; the ABI wants it 16-byte aligned at a call. */
__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "  xor %rbp, %rbp\n"
        "  mov %rsp, %rdi\n"
        "  and $-16, %rsp\n"
        "  call pt_start\n"
        "  hlt\n");
#else
/* Returns the kernel's raw result of system call n: a value >= 0, or -errno. */
static long raw(long n, long a, long b, long c, long d, long e, long f)
{
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory", "cc");
    return x0;
}
/* The entry point: sp holds argc, argv..., NULL, envp..., NULL, already 16-byte aligned. */
__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "  mov x29, #0\n"
        "  mov x30, #0\n"
        "  mov x0, sp\n"
        "  bl pt_start\n");
#endif

/* Returns r, or -1 with errno set when r is a kernel error (-4095..-1). */
static long ret(long r)
{
    if (r < 0 && r > -4096) {
        pt_errno = (int)-r;
        return -1;
    }
    return r;
}

/* Never returns: ends the process (every thread; there is one) with status code. */
void _exit(int code)
{
    for (;;)
        raw(__NR_exit_group, code, 0, 0, 0, 0, 0);
}

/* Never returns: main's result is the exit status. */
void pt_start(long *sp)
{
    int argc = (int)sp[0];
    char **argv = (char **)(sp + 1);
    environ = argv + argc + 1;
    _exit(main(argc, argv));
}

/* Returns the system call's result, or -1 with errno set (libc's syscall(2)). */
long syscall(long n, ...)
{
    va_list ap;
    va_start(ap, n);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
    long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    return ret(raw(n, a, b, c, d, e, f));
}

/* Returns the bytes written, or -1 with errno set. */
ssize_t write(int fd, const void *buf, size_t n)
{
    return ret(raw(__NR_write, fd, (long)buf, (long)n, 0, 0, 0));
}

/* Returns 0, or -1 with errno set. */
int close(int fd)
{
    return (int)ret(raw(__NR_close, fd, 0, 0, 0, 0, 0));
}

/* Returns a new fd, or -1 with errno set (the step never creates files: no mode). */
int openat(int dir, const char *path, int flags, ...)
{
    return (int)ret(raw(__NR_openat, dir, (long)path, flags, 0, 0, 0));
}

/* Returns a new fd, or -1 with errno set. */
int open(const char *path, int flags, ...)
{
    return openat(AT_FDCWD, path, flags);
}

/* Returns 0, or -1 with errno set (mkdirat: aarch64 has no mkdir system call). */
int mkdir(const char *path, mode_t mode)
{
    return (int)ret(raw(__NR_mkdirat, AT_FDCWD, (long)path, (long)mode, 0, 0, 0));
}

/* Returns fcntl's result, or -1 with errno set (every command the step uses takes an int or nothing). */
int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return (int)ret(raw(__NR_fcntl, fd, cmd, arg, 0, 0, 0));
}

/* Returns only on failure: -1 with errno set. */
int execve(const char *path, char *const argv[], char *const envp[])
{
    return (int)ret(raw(__NR_execve, (long)path, (long)argv, (long)envp, 0, 0, 0));
}

/* Returns the new session's id, or -1 with errno set. */
pid_t setsid(void)
{
    return (pid_t)ret(raw(__NR_setsid, 0, 0, 0, 0, 0, 0));
}

/* Returns 0, or -1 with errno set. */
int setpgid(pid_t pid, pid_t pgid)
{
    return (int)ret(raw(__NR_setpgid, pid, pgid, 0, 0, 0, 0));
}

/* Returns 0, or -1 with errno set (one thread: no other thread's credentials to keep in step, unlike glibc's). */
int setgroups(size_t n, const gid_t *groups)
{
    return (int)ret(raw(__NR_setgroups, (long)n, (long)groups, 0, 0, 0, 0));
}

/* Returns 0, or -1 with errno set. */
int setregid(gid_t rgid, gid_t egid)
{
    return (int)ret(raw(__NR_setregid, rgid, egid, 0, 0, 0, 0));
}

/* Returns 0, or -1 with errno set. */
int setreuid(uid_t ruid, uid_t euid)
{
    return (int)ret(raw(__NR_setreuid, ruid, euid, 0, 0, 0, 0));
}

/* Returns -1 with errno EINTR once a handled signal arrives (ppoll with nothing to poll: aarch64 has no pause). */
int pause(void)
{
    return (int)ret(raw(__NR_ppoll, 0, 0, 0, 0, 8, 0));
}

/* Returns the length of s. */
size_t strlen(const char *s)
{
    const char *p = s;
    while (*p)
        p++;
    return (size_t)(p - s);
}

/* Returns <0, 0 or >0 as a sorts before, with or after b. */
int strcmp(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

/* Returns d. The stores go through a volatile pointer so the compiler cannot turn the loop into a call to itself. */
void *memset(void *d, int c, size_t n)
{
    volatile unsigned char *p = d;
    while (n--)
        *p++ = (unsigned char)c;
    return d;
}

/* Returns d (the same guard as memset). */
void *memcpy(void *restrict d, const void *restrict s, size_t n)
{
    volatile unsigned char *p = d;
    const unsigned char *q = s;
    while (n--)
        *p++ = *q++;
    return d;
}

/* Returns the decimal number at s (base 10 only: the step's fields), *end after it; max and errno ERANGE past max. */
static unsigned long decimal(const char *s, char **end, unsigned long max, int *negative)
{
    const char *p = s;
    *negative = 0;
    if (*p == '-' || *p == '+')
        *negative = *p++ == '-';
    unsigned long v = 0;
    int over = 0;
    const char *digits = p;
    while (*p >= '0' && *p <= '9') {
        unsigned long d = (unsigned long)(*p++ - '0');
        if (over || v > (max - d) / 10)
            over = 1;
        else
            v = v * 10 + d;
    }
    *end = (char *)(p == digits ? s : p);
    if (over) {
        pt_errno = ERANGE;
        return max;
    }
    return v;
}

/* Returns the decimal long at s (base must be 10), *end after it; LONG_MAX/LONG_MIN with errno ERANGE. */
long strtol(const char *s, char **end, int base)
{
    (void)base;
    int neg;
    char *stop;
    unsigned long v = decimal(s, &stop, (unsigned long)__LONG_MAX__ + 1, &neg);
    if (end)
        *end = stop;
    if (!neg && v > (unsigned long)__LONG_MAX__) {
        pt_errno = ERANGE;
        return __LONG_MAX__;
    }
    return neg ? (long)(0 - v) : (long)v;
}

/* Returns the decimal unsigned long at s (base must be 10), *end after it; ULONG_MAX with errno ERANGE. */
unsigned long strtoul(const char *s, char **end, int base)
{
    (void)base;
    int neg;
    char *stop;
    unsigned long v = decimal(s, &stop, ~0UL, &neg);
    if (end)
        *end = stop;
    return neg ? 0 - v : v;
}

/* Returns a short description of the errors a cgroup start can meet, else "error". */
char *strerror(int e)
{
    switch (e) {
    case EACCES: return (char *)"Permission denied";
    case EPERM: return (char *)"Operation not permitted";
    case ENOENT: return (char *)"No such file or directory";
    case EBUSY: return (char *)"Device or resource busy";
    case EAGAIN: return (char *)"Resource temporarily unavailable";
    case ENOMEM: return (char *)"Cannot allocate memory";
    case ENOSPC: return (char *)"No space left on device";
    case EINVAL: return (char *)"Invalid argument";
    case EOPNOTSUPP: return (char *)"Operation not supported";
    case EMFILE: return (char *)"Too many open files";
    default: return (char *)"error";
    }
}
