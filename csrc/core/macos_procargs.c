/* macOS, a process's argv and environment: its KERN_PROCARGS2 area read into the caller's buffer (pt_environ,
 * pt_cmdline, pt_env_find_checked). Telling why a read was refused is macos_proc.c's.
 *
 * Why this shape (xnu line references are to bsd/kern/ in xnu-11417):
 * - Environments and argv come from sysctl(KERN_PROCARGS2) (kern_sysctl.c
 *   sysctl_procargsx), into the caller's buffer, never an allocation here:
 *   int argc, the exec path, NUL padding, argv, the environment. A buffer
 *   larger than KERN_ARGMAX is refused (EINVAL), so the request is clamped
 *   to it; a smaller buffer than the area gets the area's TAIL with argc in
 *   front, not an error, so a reply that fills the buffer may be cut and is
 *   reported as -E2BIG (the binding retries with a bigger buffer).
 *   EINVAL also means "not found" (gone, or a zombie: proc_find skips it),
 *   "another user's process" (is_procargs_content_read_permitted), or a task
 *   that is not IPC-active (being created or exiting): a read of the process
 *   tells these apart, and an alive process refused is -EACCES, as psutil
 *   reads it. Since macOS 11 the kernel omits the environment of a
 *   cs_restricted process (and a no-read-procargs process shows argv[0]
 *   only): that area ends after argv and reads as an empty environment,
 *   which the caller must take as "unknown", never as "has no variable".
 */
#define _DARWIN_C_SOURCE /* struct kinfo_proc, struct extern_proc */
#include "macos.h"
#include "platform.h"

#include <errno.h>
#include <string.h>
#include <sys/proc.h>
#include <sys/sysctl.h>
#include <sys/types.h>

/* Returns KERN_ARGMAX (the largest procargs area the kernel accepts a request for), or -errno. */
static int args_max(void)
{
    int mib[2] = {CTL_KERN, KERN_ARGMAX};
    int argmax = 0;
    size_t len = sizeof argmax;
    if (sysctl(mib, 2, &argmax, &len, NULL, 0) != 0)
        return -errno;
    return argmax > 0 ? argmax : -EIO;
}

/* Returns the length of pid's KERN_PROCARGS2 area read into buf, 0 if pid is a
 * zombie (it has none), -E2BIG if the area may not have fit cap, -ESRCH if
 * pid is gone, -EACCES if the kernel refuses an alive process (EINVAL: another
 * user's, or not IPC-active), or -errno. */
static int read_procargs2(int32_t pid, char *buf, size_t cap)
{
    if (pid <= 0)
        return -ESRCH; /* pid 0 (kernel_task) has no user stack; nothing below 0 is a process */
    int argmax = args_max();
    if (argmax < 0)
        return argmax;
    size_t want = cap < (size_t)argmax ? cap : (size_t)argmax;
    if (want <= sizeof(int))
        return -E2BIG;
    int mib[3] = {CTL_KERN, KERN_PROCARGS2, (int)pid};
    size_t len = want;
    if (sysctl(mib, 3, buf, &len, NULL, 0) == 0) {
        if (len >= want)
            return -E2BIG; /* filled: the kernel may have cut the area's head */
        return (int)len;
    }
    int err = errno;
    /* Every failure is asked about: gone, a zombie, or alive and refused. */
    struct kinfo_proc kp;
    int rc = kinfo(pid, &kp);
    if (rc != 0)
        return rc == -ESRCH && in_creation(pid) ? -EACCES : rc;
    if (kp.kp_proc.p_stat == SZOMB)
        return 0;
    return err == EINVAL ? -EACCES : -err;
}

/* Returns the length of one part of pid's procargs area moved to buf's start (argv if want_env is 0), or as read_procargs2. */
static int procargs_part(int32_t pid, char *buf, size_t cap, int want_env)
{
    size_t argv_off, argv_len, env_off, env_len;
    int n = read_procargs2(pid, buf, cap);
    if (n <= 0)
        return n;
    if (pt_procargs2_split(buf, (size_t)n, &argv_off, &argv_len, &env_off, &env_len) != 0)
        return -EIO; /* not the layout we know: never guess */
    size_t off = want_env ? env_off : argv_off, len = want_env ? env_len : argv_len;
    memmove(buf, buf + off, len);
    return (int)len;
}

int pt_environ(int32_t pid, char *buf, size_t cap)
{
    return procargs_part(pid, buf, cap, 1);
}

int pt_cmdline(int32_t pid, char *buf, size_t cap)
{
    return procargs_part(pid, buf, cap, 0);
}

/* Returns what pt_block_find returns for pid's environment, read whole into scratch (so -E2BIG if it does not fit), -ESRCH, or -errno. */
int pt_env_find_checked(int32_t pid, const char *key, size_t keylen, char *val, size_t valcap, char *scratch,
                        size_t scratchcap)
{
    int n = procargs_part(pid, scratch, scratchcap, 1);
    if (n < 0)
        return n;
    /* KERN_ARGMAX bounds the area, so the whole environment is already here:
     * PT_ENV_SCAN_MAX is the Linux stream's bound. */
    return pt_block_find(scratch, (size_t)n, key, keylen, val, valcap);
}
