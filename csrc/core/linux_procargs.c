/* Linux, argv and environment: pt_environ, pt_cmdline and pt_env_find_checked (args.c's pt_env_find) read
 * /proc/<pid>/environ and cmdline.
 *
 * Why this shape:
 * - /proc/<pid>/environ and cmdline are opened with the target's mm checked
 *   (PTRACE_MODE_READ): another user's process fails the open with EACCES
 *   (or EPERM). A zombie or a kernel thread has no mm: older kernels open it
 *   and read 0 bytes, newer ones (6.18 here) fail the open with ESRCH while
 *   /proc/<pid> is still there. Both are an empty block; ESRCH is "gone"
 *   only once /proc/<pid> is gone too. Each read gives at most a page, so a
 *   block is read to end of file.
 */
#define _GNU_SOURCE
#include "linux.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Returns an fd for /proc/<pid>/<name>, -ENODATA if pid has no mm to read (a zombie, a
 * kernel thread, one exiting), -ESRCH if pid is gone, -EACCES/-EPERM if refused, or -errno. */
static int open_pid_file(int32_t pid, const char *name)
{
    char path[48];
    struct stat st;
    if (pid <= 0)
        return -ESRCH;
    int len = snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    int err = errno;
    if (err == ESRCH) {
        path[len - strlen(name) - 1] = '\0'; /* /proc/<pid> */
        if (stat(path, &st) == 0)
            return -ENODATA; /* still listed: it has no mm, not "gone" */
    }
    return (err == ENOENT || err == ESRCH) ? -ESRCH : -err;
}

/* Returns the number of bytes of /proc/<pid>/<name> read into buf, -E2BIG if longer than cap, -ESRCH, or -errno. */
static int read_pid_block(int32_t pid, const char *name, char *buf, size_t cap)
{
    if (cap > INT32_MAX)
        cap = INT32_MAX; /* the count must fit the return */
    int fd = open_pid_file(pid, name);
    if (fd == -ENODATA)
        return 0;
    if (fd < 0)
        return fd;
    size_t n = 0;
    int rc = 0;
    for (;;) {
        char probe;
        /* Once buf is full, one byte more tells a block of exactly cap from a longer one. */
        ssize_t got = n < cap ? read(fd, buf + n, cap - n) : read(fd, &probe, 1);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            rc = (errno == ESRCH || errno == ENOENT) ? -ESRCH : -errno;
            break;
        }
        if (got == 0)
            break;
        if (n >= cap) {
            rc = -E2BIG;
            break;
        }
        n += (size_t)got;
    }
    close(fd);
    return rc != 0 ? rc : (int)n;
}

int pt_environ(int32_t pid, char *buf, size_t cap)
{
    return read_pid_block(pid, "environ", buf, cap);
}

int pt_cmdline(int32_t pid, char *buf, size_t cap)
{
    return read_pid_block(pid, "cmdline", buf, cap);
}

/* Returns what pt_stream_find returns for /proc/<pid>/environ (scanning at most PT_ENV_SCAN_MAX bytes), -ESRCH, or -errno. */
int pt_env_find_checked(int32_t pid, const char *key, size_t keylen, char *val, size_t valcap, char *scratch,
                        size_t scratchcap)
{
    int fd = open_pid_file(pid, "environ");
    if (fd < 0)
        return fd;
    int rc = pt_stream_find(fd, key, keylen, val, valcap, scratch, scratchcap, PT_ENV_SCAN_MAX);
    close(fd);
    return rc == -ENOENT ? -ESRCH : rc;
}
