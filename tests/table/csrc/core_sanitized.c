/* The Linux process-table core (linux_proc.c, linux_table.c, linux_procargs.c, with walk.c and args.c) under
 * AddressSanitizer and UBSan (tests/table/test_core_sanitized.py builds and runs it): every read over this
 * machine's /proc, with every small cap, and a child of its own that each read must find. Prints "ok ..." or fails.
 */
#define _GNU_SOURCE
#include "platform.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROWS  8192
#define BLOCK (1 << 16)

static struct pt_proc rows[ROWS], walk[ROWS];
static int32_t kids[ROWS];
static char buf[BLOCK], scratch[BLOCK];

/* Returns 0 if each block read kept inside every cap from none to 64 bytes and the whole block, else 1. */
static int read_blocks(int32_t pid)
{
    char val[256];
    for (size_t cap = 0; cap <= 64; cap++) {
        int n = pt_environ(pid, buf, cap);
        int m = pt_cmdline(pid, buf, cap);
        if (n > (int)cap || m > (int)cap)
            return 1;
    }
    if (pt_environ(pid, buf, BLOCK) > BLOCK || pt_cmdline(pid, buf, BLOCK) > BLOCK)
        return 1;
    int found = pt_env_find(pid, "PATH", 4, val, sizeof val, scratch, 64);
    return found >= (int)sizeof val;
}

/* Returns 0 if each children read of row (by pid, from the row, verified, listed) kept inside its caps, else 1. */
static int read_children(const struct pt_proc *row)
{
    struct pt_proc one;
    for (int cap = 0; cap <= 2; cap++) {
        if (pt_children(row->pid, kids, cap) > cap || pt_children_of(row, kids, cap) > cap)
            return 1;
        if (pt_verified_children_of(row, walk, cap) > cap || pt_proc_listed(row->pid, &one, kids, cap) > cap)
            return 1;
    }
    int n = pt_proc_listed(row->pid, &one, kids, ROWS);
    if (n >= 0 && one.pid != row->pid)
        return 1;
    return pt_children(row->pid, kids, ROWS) > ROWS || pt_verified_children_of(row, walk, ROWS) > ROWS;
}

/* Returns 0 if the table and every row's reads are clean, with *count set to the rows read, else 1. */
static int read_table(int *count)
{
    struct pt_proc one;
    if (pt_snapshot(rows, 0) != -ENOBUFS || pt_snapshot(rows, 1) != -ENOBUFS)
        return 1;
    int n = pt_snapshot(rows, ROWS);
    if (n <= 1)
        return 1;
    for (int i = 0; i < n; i++) {
        int rc = pt_proc(rows[i].pid, &one);
        if (rc == 0 && (one.pid != rows[i].pid || memchr(one.name, '\0', PT_NAME_MAX) == NULL))
            return 1;
        if (read_blocks(rows[i].pid) || read_children(&rows[i]))
            return 1;
    }
    *count = n;
    return 0;
}

/* Returns 0 if a child of this process is found by every read that should find it, else 1. */
static int find_own_child(pid_t child)
{
    struct pt_proc self;
    if (pt_proc(getpid(), &self) != 0 || self.pid != getpid())
        return 1;
    int n = pt_children(getpid(), kids, ROWS);
    int seen = 0;
    for (int i = 0; i < n; i++)
        seen |= kids[i] == child;
    int d = pt_descendants_of(&self, walk, ROWS);
    int walked = 0;
    for (int i = 0; i < d; i++)
        walked |= walk[i].pid == child && walk[i].ppid == getpid();
    return !(seen && walked);
}

int main(void)
{
    struct pt_proc none;
    uint64_t now;
    int count = 0;
    if (pt_proc(0, &none) != -ESRCH || pt_proc(-1, &none) != -ESRCH || pt_environ(0, buf, BLOCK) != -ESRCH)
        return 1;
    if (pt_now(&now) != 0 || now == 0)
        return 1;
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        /* Dies with the driver, should a sanitizer abort it before it kills this child. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == parent)
            pause();
        _exit(0);
    }
    int bad = find_own_child(child) ? 2 : read_table(&count) ? 3 : 0;
    kill(child, SIGKILL); /* our own child, not yet reaped: its pid cannot have been reused */
    waitpid(child, NULL, 0);
    if (bad)
        return bad;
    printf("ok %d rows\n", count);
    return 0;
}
