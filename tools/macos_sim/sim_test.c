/* Drives csrc/proctree_macos.c against sim_kernel.c: the contracts in
 * csrc/proctree.h, the libproc traps, and (under ASan) that pt_snapshot's
 * pid list in the tail of the caller's buffer never overruns or clobbers. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proctree.h"
#include <sys/proc.h>

#include "sim_kernel.h"

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

static struct sim_proc *add(int pid, int ppid, int uid, int stat, const char *comm, const char *name)
{
    struct sim_proc *p = &sim_table[sim_count++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->ppid = ppid;
    p->pgid = pid;
    p->sid = pid == 0 ? 0 : 1;
    p->uid = uid;
    p->stat = stat;
    p->sec = 1700000000L + pid;
    p->usec = pid % 1000000;
    snprintf(p->comm, sizeof p->comm, "%s", comm);
    snprintf(p->name, sizeof p->name, "%s", name);
    return p;
}

static uint64_t start_of(int pid)
{
    return (uint64_t)(1700000000L + pid) * 1000000u + (uint64_t)(pid % 1000000);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void fixed_table(void)
{
    sim_count = 0;
    add(0, 0, 0, SRUN, "kernel_task", "kernel_task");
    add(1, 0, 0, SRUN, "launchd", "launchd");
    add(300, 1, 0, SSLEEP, "syslogd", "");
    add(500, 1, 501, SRUN, "a_fifteen_chars", "a_much_longer_exec_name_31chars");
    add(501, 500, 501, SZOMB, "zomb", "zomb");
    add(502, 500, 501, SSTOP, "stopped", "stopped");
    add(503, 500, 0, SIDL, "forking", "forking")->no_getsid = 1;
    struct sim_proc *t = add(504, 999, 501, SRUN, "traced", "traced");
    t->traced = 1;
    t->oppid = 500;
    add(999, 1, 501, SRUN, "lldb", "lldb");
    add(505, 500, 501, SRUN, "sandboxed", "sandboxed")->eperm_short = 1;
}

static void test_snapshot_rows(void)
{
    fixed_table();
    struct pt_proc rows[64];
    int n = pt_snapshot(rows, 64);
    CHECK(n == sim_count - 1); /* every process but kernel_task */
    for (int i = 1; i < n; i++)
        CHECK(rows[i - 1].pid < rows[i].pid);
    for (int i = 0; i < n; i++)
        CHECK(rows[i].start_time == start_of(rows[i].pid));
    printf("  snapshot of the fixed table: %d rows, ascending pids, kernel_task left out\n", n);
}

static void test_snapshot_caps(void)
{
    fixed_table();
    for (int cap = 0; cap <= sim_count + 2; cap++) {
        struct pt_proc *r = malloc(sizeof *r * (size_t)(cap ? cap : 1));
        int m = pt_snapshot(r, cap);
        /* the kernel lists kernel_task too: cap must hold every listed pid */
        CHECK(cap < sim_count ? m == -ENOBUFS : m == sim_count - 1);
        free(r);
    }
    struct pt_proc r;
    CHECK(pt_snapshot(&r, -1) == -EINVAL);
    printf("  caps 0..%d: -ENOBUFS below the listed count, the full table from it on\n", sim_count + 2);
}

static void test_proc(void)
{
    struct pt_proc p;
    fixed_table();
    CHECK(pt_proc(0, &p) == -ESRCH);
    CHECK(pt_proc(-1, &p) == -ESRCH);
    CHECK(pt_proc(4242, &p) == -ESRCH);
    /* zombie: libproc refuses it, sysctl answers, getsid refuses it */
    CHECK(pt_proc(501, &p) == 0 && p.state == 'Z' && p.sid == 0 && p.ppid == 500);
    CHECK(p.start_time == start_of(501) && strcmp(p.name, "zomb") == 0);
    /* another user's process: BSDINFO refused, start time from sysctl, short name */
    CHECK(pt_proc(300, &p) == 0 && p.state == 'S' && p.start_time == start_of(300));
    CHECK(strcmp(p.name, "syslogd") == 0 && p.uid == 0 && p.sid == 1);
    /* own process: BSDINFO's pbi_name (31 bytes) beats the 15-byte comm */
    CHECK(pt_proc(500, &p) == 0 && strcmp(p.name, "a_much_longer_exec_name_31chars") == 0);
    CHECK(pt_proc(503, &p) == 0 && p.state == 'R' && p.sid == 0); /* SIDL, getsid refuses it */
    CHECK(pt_proc(502, &p) == 0 && p.state == 'T');
    CHECK(pt_proc(505, &p) == 0 && p.state == 'R' && strcmp(p.name, "sandboxed") == 0);
    sim_uid = 0; /* root: BSDINFO for everyone, same start time as via sysctl */
    CHECK(pt_proc(300, &p) == 0 && p.start_time == start_of(300));
    sim_uid = 501;
    printf("  pt_proc: bad pids, zombie, other user, root, SIDL, stopped, sandboxed\n");
}

static void test_children(void)
{
    int32_t kids[16];
    fixed_table();
    int k = pt_children(500, kids, 16);
    CHECK(k == 4);
    qsort(kids, (size_t)k, sizeof kids[0], cmp_int);
    /* 504 is listed by the kernel (traced, p_oppid 500) but its ppid is 999 */
    CHECK(kids[0] == 501 && kids[1] == 502 && kids[2] == 503 && kids[3] == 505);
    CHECK(pt_children(999, kids, 16) == 1 && kids[0] == 504);
    /* the kernel lists 5 pids for 500: a full buffer cannot be told from an exact fit */
    CHECK(pt_children(500, kids, 5) == -ENOBUFS);
    CHECK(pt_children(500, kids, 6) == 4);
    CHECK(pt_children(500, kids, 0) == -ENOBUFS);
    CHECK(pt_children(300, kids, 0) == 0);
    CHECK(pt_children(4242, kids, 16) == -ESRCH);
    CHECK(pt_children(0, kids, 16) == -ESRCH);
    CHECK(pt_children(500, kids, -1) == -EINVAL);
    printf("  pt_children: traced child dropped, zombie kept, truncation, bad pids\n");
}

static void test_random_tables(void)
{
    srand(1);
    for (int iter = 0; iter < 3000; iter++) {
        sim_count = 0;
        int want = 1 + rand() % 400;
        add(0, 0, 0, SRUN, "kernel_task", "");
        for (int i = 1; i < want; i++) {
            int pid = 1 + rand() % 99999, dup = 0;
            for (int j = 0; j < sim_count; j++)
                dup |= sim_table[j].pid == pid;
            if (!dup)
                add(pid, 1, rand() % 2 ? 501 : 0, 1 + rand() % 5, "p", rand() % 2 ? "name" : "");
        }
        int cap = rand() % 450;
        struct pt_proc *r = malloc(sizeof *r * (size_t)(cap ? cap : 1));
        int m = pt_snapshot(r, cap);
        if (cap < sim_count) {
            CHECK(m == -ENOBUFS);
        } else {
            int expect[SIM_MAX], e = 0;
            for (int j = 0; j < sim_count; j++)
                if (sim_table[j].pid)
                    expect[e++] = sim_table[j].pid;
            qsort(expect, (size_t)e, sizeof expect[0], cmp_int);
            CHECK(m == e);
            for (int j = 0; j < m; j++) {
                CHECK(r[j].pid == expect[j]);
                CHECK(r[j].start_time == start_of(r[j].pid));
            }
        }
        free(r);
    }
    printf("  3000 random tables and caps: complete and sorted, or -ENOBUFS\n");
}

int main(void)
{
    uint64_t now;
    test_snapshot_rows();
    test_snapshot_caps();
    test_proc();
    test_children();
    test_random_tables();
    CHECK(pt_now(&now) == 0 && now > 1700000000ull * 1000000u);
    printf("macOS core simulation: all checks passed\n");
    return 0;
}
