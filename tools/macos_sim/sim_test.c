/* Drives the macOS core, csrc/core/macos_*.c (and csrc/core/walk.c over it; the facts in sim_test_facts.c) against
 * sim_kernel.c: the contracts in csrc/include/proctree.h, the xnu behaviours listed
 * in sim_kernel.c, and (under ASan) the snapshot's buffer handling. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proctree.h"
#include <sys/proc.h>

#include "sim_kernel.h"
#include "sim_test.h"


static struct sim_proc *add(int pid, int ppid, int uid, int stat, const char *exe)
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
    snprintf(p->exe, sizeof p->exe, "%s", exe);
    return p;
}

static struct sim_proc *traced(struct sim_proc *p, int tracer, int oppid)
{
    p->traced = 1;
    p->ppid = tracer;
    p->oppid = oppid;
    return p;
}

static uint64_t start_of(int pid)
{
    const struct sim_proc *p = NULL;
    for (int i = 0; i < sim_count; i++)
        if (sim_table[i].pid == pid)
            p = &sim_table[i];
    CHECK(p != NULL);
    return (uint64_t)p->sec * 1000000u + (uint64_t)p->usec;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static const struct pt_proc *row_of(const struct pt_proc *rows, int n, int pid)
{
    for (int i = 0; i < n; i++)
        if (rows[i].pid == pid)
            return &rows[i];
    return NULL;
}

static void reset(void)
{
    sim_count = 0;
    sim_uid = 501;
    sim_sidl_listed = 0;
    sim_grow_per_read = 0;
    sim_argmax = 1 << 18;
    memset(&sim_calls, 0, sizeof sim_calls);
}

/* The fixed table: every case the core must get right, in one machine. */
static void fixed_table(void)
{
    reset();
    add(0, 0, 0, SRUN, "kernel_task");
    add(1, 0, 0, SRUN, "launchd");
    add(300, 1, 0, SSLEEP, "syslogd");
    add(301, 1, 0, SRUN, "com.apple.a_long_daemon_name");
    add(500, 1, 501, SRUN, "a_much_longer_exec_name_31chars_and_more");
    add(501, 500, 501, SZOMB, "zomb");
    add(502, 500, 501, SSTOP, "stopped");
    struct sim_proc *f = add(503, 500, 0, SIDL, "forking");
    f->sidl_reads = 4;   /* fork completes after a few looks */
    f->getsid_fails = 2; /* and getsid finds it a little later */
    traced(add(504, 500, 501, SRUN, "traced"), 999, 500);
    add(505, 500, 501, SRUN, "sandboxed")->eperm_short = 1;
    traced(add(506, 999, 501, SRUN, "orphaned"), 999, 4242);   /* original parent gone */
    traced(add(507, 999, 501, SRUN, "reused"), 999, 600);      /* its pid reused since */
    add(508, 1, 501, SRUN, "exactly16chars__")->no_p_name = 1; /* p_name empty: comm stands */
    add(509, 1, 501, SRUN, "shortname");
    add(600, 1, 501, SRUN, "younger")->sec = 1900000000L;
    add(999, 1, 501, SRUN, "lldb");
}

static void test_snapshot_rows(void)
{
    struct pt_proc rows[64];
    const struct pt_proc *r;

    fixed_table();
    int n = pt_snapshot(rows, 64);
    CHECK(n == sim_count - 2); /* kernel_task left out; 503 in SIDL is not listed yet */
    CHECK(row_of(rows, n, 503) == NULL);
    for (int i = 1; i < n; i++)
        CHECK(rows[i - 1].pid < rows[i].pid);
    for (int i = 0; i < n; i++)
        CHECK(rows[i].start_time == start_of(rows[i].pid));
    /* one KERN_PROC_ALL probe and one read; never a per-pid walk of the list */
    CHECK(sim_calls.kern_proc_all == 2 && sim_calls.kern_proc_pid == 0);
    /* BSDINFO only for the names p_comm may have cut: 301 (refused), 500, 508 */
    CHECK(sim_calls.bsdinfo == 3 && sim_calls.shortinfo == 0);

    r = row_of(rows, n, 501);
    CHECK(r && r->state == 'Z' && r->sid == 0 && r->ppid == 500 && r->pgid == 501);
    r = row_of(rows, n, 300);
    CHECK(r && r->state == 'S' && r->uid == 0 && r->sid == 1 && strcmp(r->name, "syslogd") == 0);
    r = row_of(rows, n, 301); /* another user's: BSDINFO refused, p_comm's 16 bytes */
    CHECK(r && strcmp(r->name, "com.apple.a_long") == 0);
    r = row_of(rows, n, 500);
    CHECK(r && strcmp(r->name, "a_much_longer_exec_name_31chars") == 0);
    r = row_of(rows, n, 508);
    CHECK(r && strcmp(r->name, "exactly16chars__") == 0);
    r = row_of(rows, n, 509);
    CHECK(r && strcmp(r->name, "shortname") == 0);
    r = row_of(rows, n, 502);
    CHECK(r && r->state == 'T');
    r = row_of(rows, n, 505);
    CHECK(r && r->state == 'R' && strcmp(r->name, "sandboxed") == 0);
    /* traced: the original parent, or launchd where that one is gone or its pid reused */
    CHECK((r = row_of(rows, n, 504)) && r->ppid == 500);
    CHECK((r = row_of(rows, n, 506)) && r->ppid == 1);
    CHECK((r = row_of(rows, n, 507)) && r->ppid == 1);
    printf("  snapshot: one KERN_PROC_ALL read, zombie sid 0, other users, long names, traced parents\n");
}

static void test_snapshot_sidl_listed(void)
{
    struct pt_proc rows[64];
    fixed_table();
    sim_sidl_listed = 1; /* a kernel whose KERN_PROC_ALL lists processes in SIDL */
    int n = pt_snapshot(rows, 64);
    CHECK(n == sim_count - 1);
    const struct pt_proc *r = row_of(rows, n, 503);
    /* kept, alive, and getsid retried until it answered */
    CHECK(r && r->state == 'R' && r->ppid == 500 && r->sid == 1 && r->start_time == start_of(503));
    CHECK(sim_table[7].getsid_fails == 0);

    fixed_table();
    sim_sidl_listed = 1;
    sim_table[7].sidl_reads = 1000000;  /* never finishes: bounded, then sid unknown */
    sim_table[7].getsid_fails = 1000000;
    n = pt_snapshot(rows, 64);
    r = row_of(rows, n, 503);
    CHECK(n == sim_count - 1 && r && r->state == 'R' && r->sid == 0);
    printf("  snapshot: a SIDL row is kept and its sid retried, bounded\n");
}

static void test_snapshot_caps(void)
{
    fixed_table();
    int listed = sim_count - 1; /* every process but 503 (SIDL), kernel_task included */
    for (int cap = 0; cap <= sim_count + 2; cap++) {
        fixed_table();
        struct pt_proc *r = malloc(sizeof *r * (size_t)(cap ? cap : 1));
        int m = pt_snapshot(r, cap);
        /* the kernel lists kernel_task too: cap must hold every listed record */
        CHECK(cap < listed ? m == -ENOBUFS : m == listed - 1);
        free(r);
    }
    struct pt_proc r;
    CHECK(pt_snapshot(&r, -1) == -EINVAL);
    printf("  caps 0..%d: -ENOBUFS below the listed count, the full table from it on\n", sim_count + 2);
}

static void big_table(int n, int uid)
{
    reset();
    add(0, 0, 0, SRUN, "kernel_task");
    add(1, 0, 0, SRUN, "launchd");
    for (int i = 2; i < n; i++)
        add(100 + i, 1, uid, SSLEEP, "worker");
}

static void test_growing_table(void)
{
    struct pt_proc *rows = malloc(sizeof *rows * 4000);
    big_table(300, 501);
    sim_grow_per_read = 100; /* 100 forks between each probe and its read */
    int n = pt_snapshot(rows, 4000);
    CHECK(n == sim_count - 1);
    CHECK(sim_calls.kern_proc_all >= 4); /* ENOMEM, probe again, read again */
    for (int i = 1; i < n; i++)
        CHECK(rows[i - 1].pid < rows[i].pid);

    /* a table that outgrows the caller's cap ends in -ENOBUFS, never a loop */
    big_table(300, 501);
    sim_grow_per_read = 200;
    CHECK(pt_snapshot(rows, 400) == -ENOBUFS);
    CHECK(sim_calls.kern_proc_all <= 2 * 32);
    printf("  a table growing under the read: ENOMEM, grow, read again; -ENOBUFS past cap\n");
    free(rows);
}

static void test_linear_work(void)
{
    /* Another user's 3000 processes: the per-pid fallback this replaced made
     * one KERN_PROC_PID (a walk of the whole list) per row. */
    struct pt_proc *rows = malloc(sizeof *rows * 4000);
    big_table(3000, 0);
    int n = pt_snapshot(rows, 4000);
    CHECK(n == 2999);
    CHECK(sim_calls.kern_proc_all == 2 && sim_calls.kern_proc_pid == 0 && sim_calls.bsdinfo == 0);
    CHECK(sim_calls.getsid == 2999);
    printf("  3000 other users' processes: 2 sysctl calls, 0 per-pid list walks, 1 getsid a row\n");
    free(rows);
}

static void test_proc(void)
{
    struct pt_proc p;
    fixed_table();
    CHECK(pt_proc(0, &p) == -ESRCH);
    CHECK(pt_proc(-1, &p) == -ESRCH);
    CHECK(pt_proc(4242, &p) == -ESRCH);
    /* zombie: libproc refuses it, sysctl answers, sid unknown */
    CHECK(pt_proc(501, &p) == 0 && p.state == 'Z' && p.sid == 0 && p.ppid == 500);
    CHECK(p.start_time == start_of(501) && strcmp(p.name, "zomb") == 0);
    /* another user's process: BSDINFO refused, everything from sysctl */
    CHECK(pt_proc(300, &p) == 0 && p.state == 'S' && p.start_time == start_of(300));
    CHECK(strcmp(p.name, "syslogd") == 0 && p.uid == 0 && p.sid == 1);
    CHECK(pt_proc(301, &p) == 0 && strcmp(p.name, "com.apple.a_long") == 0);
    /* own process: BSDINFO's pbi_name (31 bytes) */
    CHECK(pt_proc(500, &p) == 0 && strcmp(p.name, "a_much_longer_exec_name_31chars") == 0);
    CHECK(pt_proc(502, &p) == 0 && p.state == 'T');
    CHECK(pt_proc(505, &p) == 0 && p.state == 'R' && strcmp(p.name, "sandboxed") == 0);
    /* traced */
    CHECK(pt_proc(504, &p) == 0 && p.ppid == 500 && strcmp(p.name, "traced") == 0);
    CHECK(pt_proc(506, &p) == 0 && p.ppid == 1);
    CHECK(pt_proc(507, &p) == 0 && p.ppid == 1);
    CHECK(pt_proc(999, &p) == 0 && p.ppid == 1);
    sim_uid = 0; /* root: BSDINFO for everyone, same start time as via sysctl */
    CHECK(pt_proc(300, &p) == 0 && p.start_time == start_of(300));
    sim_uid = 501;
    printf("  pt_proc: bad pids, zombie, other user, root, stopped, sandboxed, traced\n");
}

static void test_proc_sidl(void)
{
    struct pt_proc p;
    /* another user's process in SIDL: BSDINFO refused, sysctl skips it, only
     * SHORTBSDINFO sees it. Retried until fork completes, never "gone". */
    fixed_table();
    CHECK(pt_proc(503, &p) == 0);
    CHECK(p.state == 'R' && p.ppid == 500 && p.sid == 1 && p.start_time == start_of(503));

    /* one that never leaves SIDL: bounded, and "unknown" (-EBUSY), not -ESRCH */
    fixed_table();
    sim_table[7].sidl_reads = 1000000;
    CHECK(pt_proc(503, &p) == -EBUSY);

    /* our own process in SIDL: BSDINFO sees it; after the bound it is reported alive */
    fixed_table();
    sim_table[7].uid = 501;
    sim_table[7].sidl_reads = 1000000;
    sim_table[7].getsid_fails = 0;
    CHECK(pt_proc(503, &p) == 0 && p.state == 'R' && p.sid == 1);

    /* getsid cannot find it for a while (being created on an older kernel): retried */
    fixed_table();
    sim_table[7].stat = SRUN;
    sim_table[7].sidl_reads = 0;
    sim_table[7].getsid_fails = 5;
    CHECK(pt_proc(503, &p) == 0 && p.sid == 1);
    printf("  pt_proc in SIDL: retried, bounded, never -ESRCH\n");
}

static void test_children(void)
{
    int32_t kids[16];
    fixed_table();
    int k = pt_children(500, kids, 16);
    CHECK(k == 5);
    qsort(kids, (size_t)k, sizeof kids[0], cmp_int);
    /* 504 is traced by 999: listed under 500 (p_oppid) and reported there */
    CHECK(kids[0] == 501 && kids[1] == 502 && kids[2] == 503 && kids[3] == 504 && kids[4] == 505);
    /* the tracer's list has 504, 506, 507: none is reported as its child */
    CHECK(pt_children(999, kids, 16) == 0);
    /* 600 holds 507's p_oppid, but started after it: not its parent */
    CHECK(pt_children(600, kids, 16) == 0);
    /* the kernel lists 5 pids for 500: a full buffer cannot be told from an exact fit */
    CHECK(pt_children(500, kids, 5) == -ENOBUFS);
    CHECK(pt_children(500, kids, 6) == 5);
    CHECK(pt_children(500, kids, 0) == -ENOBUFS);
    CHECK(pt_children(300, kids, 0) == 0);
    CHECK(pt_children(4242, kids, 16) == -ESRCH);
    CHECK(pt_children(0, kids, 16) == -ESRCH);
    CHECK(pt_children(500, kids, -1) == -EINVAL);
    printf("  pt_children: traced child under its original parent, zombie kept, truncation, bad pids\n");
}

static void test_walk(void)
{
    struct pt_proc root, rows[32];
    fixed_table();
    sim_table[7].stat = SRUN;
    sim_table[7].sidl_reads = 0;
    sim_table[7].getsid_fails = 0;
    CHECK(pt_proc(500, &root) == 0);
    int n = pt_descendants_of(&root, rows, 32);
    CHECK(n == 5 && row_of(rows, n, 504) != NULL && row_of(rows, n, 504)->ppid == 500);
    printf("  pt_descendants_of: a traced member stays in its tree\n");
}

/* The ppid a row must report for p, from the table's own facts. */
static int expected_ppid(const struct sim_proc *p)
{
    if (!p->traced || p->oppid <= 0 || p->oppid == p->ppid)
        return p->ppid; /* p_oppid 0: nothing saved, the tracer is all the kernel says */
    for (int i = 0; i < sim_count; i++) {
        const struct sim_proc *q = &sim_table[i];
        if (q->pid == p->oppid)
            return q->stat != SZOMB && (q->sec < p->sec || (q->sec == p->sec && q->usec <= p->usec)) ? q->pid : 1;
    }
    return 1;
}

static void random_table(int want)
{
    reset();
    add(0, 0, 0, SRUN, "kernel_task");
    add(1, 0, 0, SRUN, "launchd");
    for (int i = 2; i < want; i++) {
        int pid = 2 + rand() % 99997, dup = 0;
        for (int j = 0; j < sim_count; j++)
            dup |= sim_table[j].pid == pid;
        if (dup)
            continue;
        static const char *names[] = {"p", "sixteen_chars_ab", "a_name_well_beyond_thirty_one_bytes_long",
                                      "fifteen_chars_a"};
        int stat = 2 + rand() % 4; /* SRUN..SZOMB */
        struct sim_proc *p = add(pid, sim_table[rand() % sim_count].pid, rand() % 2 ? 501 : 0, stat,
                                 names[rand() % 4]);
        p->sec = 1700000000L + rand() % 1000;
        p->sid = 1 + rand() % 50;
        if (stat != SZOMB && rand() % 10 == 0) /* never traced by, or the child of, itself */
            traced(p, sim_table[rand() % (sim_count - 1)].pid, sim_table[rand() % (sim_count - 1)].pid);
    }
}

static void check_row(const struct pt_proc *r, const struct sim_proc *p)
{
    CHECK(r->pid == p->pid && r->pgid == p->pgid && (int)r->uid == p->uid);
    CHECK(r->ppid == expected_ppid(p));
    CHECK(r->start_time == (uint64_t)p->sec * 1000000u + (uint64_t)p->usec);
    CHECK(r->sid == (p->stat == SZOMB ? 0 : p->sid));
    CHECK(r->state == (p->stat == SZOMB ? 'Z' : p->stat == SSTOP ? 'T' : p->stat == SSLEEP ? 'S' : 'R'));
    /* another user's (or a zombie libproc refuses): p_comm's 16 bytes; own:
     * the 31-byte p_name where p_comm is full */
    int bsd_ok = (uid_t)p->uid == sim_uid && p->stat != SZOMB;
    size_t keep = strlen(p->exe) >= MAXCOMLEN && bsd_ok ? 2 * MAXCOMLEN - 1 : MAXCOMLEN;
    CHECK(strlen(r->name) == (strlen(p->exe) < keep ? strlen(p->exe) : keep));
    CHECK(strncmp(r->name, p->exe, strlen(r->name)) == 0);
}

static void test_random_tables(void)
{
    srand(1);
    for (int iter = 0; iter < 3000; iter++) {
        random_table(1 + rand() % 400);
        int cap = rand() % 450;
        int consistency = iter % 10 == 0;
        struct pt_proc *r = malloc(sizeof *r * (size_t)(cap ? cap : 1));
        memset(&sim_calls, 0, sizeof sim_calls);
        int m = pt_snapshot(r, cap);
        CHECK(sim_calls.kern_proc_pid == 0);
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
                for (int t = 0; t < sim_count; t++)
                    if (sim_table[t].pid == r[j].pid)
                        check_row(&r[j], &sim_table[t]);
                if (consistency) { /* pt_proc reads every row back the same */
                    struct pt_proc one;
                    CHECK(pt_proc(r[j].pid, &one) == 0);
                    CHECK(memcmp(&one, &r[j], sizeof one) == 0);
                }
            }
        }
        free(r);
    }
    printf("  3000 random tables and caps (zombies, traced, other users): rows as expected, pt_proc agrees\n");
}

/* A KERN_PROCARGS2 strings area: "/bin/tool", padding, argv [tool, -x, "", a=b],
 * the environment, an empty string, then what follows it (apple strings). */
static const char AREA[] = "/bin/tool\0\0\0\0\0\0"
                           "tool\0-x\0\0a=b\0"
                           "A=1\0FOO=bar\0FOOBAR=baz\0X=FOO=no\0EMPTY=\0"
                           "\0ptr_munge=1\0";
static const char AREA_ARGV[] = "tool\0-x\0\0a=b\0";
static const char AREA_ENV[] = "A=1\0FOO=bar\0FOOBAR=baz\0X=FOO=no\0EMPTY=\0";
/* A cs_restricted process since macOS 11: the kernel ends the area after argv. */
static const char RESTRICTED[] = "/usr/libexec/x\0\0x\0--flag\0";

static struct sim_proc *with_args(struct sim_proc *p, int argc, const char *area, size_t len)
{
    p->argc = argc;
    p->args = area;
    p->args_len = len;
    return p;
}

/* Returns pt_env_find's answer for key in pid, with val and scratch of the given sizes (malloc'd exactly, for ASan). */
static int find_in(int pid, const char *key, char *out, size_t valcap, size_t scratchcap)
{
    char *val = malloc(valcap ? valcap : 1), *scratch = malloc(scratchcap ? scratchcap : 1);
    int rc = pt_env_find(pid, key, strlen(key), val, valcap, scratch, scratchcap);
    if (rc >= 0)
        memcpy(out, val, (size_t)rc + 1);
    free(val);
    free(scratch);
    return rc;
}

static void args_table(void)
{
    reset();
    add(1, 0, 0, SRUN, "launchd");
    with_args(add(500, 1, 501, SRUN, "tool"), 4, AREA, sizeof AREA - 1);
    with_args(add(501, 1, 0, SRUN, "rootd"), 4, AREA, sizeof AREA - 1);
    with_args(add(502, 500, 501, SZOMB, "zomb"), 1, AREA, sizeof AREA - 1);
    with_args(add(503, 1, 501, SRUN, "x"), 2, RESTRICTED, sizeof RESTRICTED - 1);
    with_args(add(504, 1, 501, SRUN, "eio"), 4, AREA, sizeof AREA - 1)->args_eio = 1;
    with_args(add(505, 1, 501, SRUN, "liar"), 20, AREA, sizeof AREA - 1);          /* argc beyond the strings */
    with_args(add(506, 1, 501, SRUN, "nopath"), 0, "/bin/no-nul", 11);            /* path without its NUL */
    with_args(add(507, 1, 501, SRUN, "noenvnul"), 1, "/p\0p\0A=1\0B=cut", 14); /* last entry cut */
    struct sim_proc *f = with_args(add(508, 1, 501, SIDL, "forking"), 4, AREA, sizeof AREA - 1);
    f->sidl_reads = 1000; /* stays in creation for this test */
}

static void test_environ_cmdline(void)
{
    char buf[4096], val[256];
    args_table();
    int n = pt_environ(500, buf, sizeof buf);
    CHECK(n == (int)sizeof AREA_ENV - 1 && memcmp(buf, AREA_ENV, (size_t)n) == 0);
    n = pt_cmdline(500, buf, sizeof buf);
    CHECK(n == (int)sizeof AREA_ARGV - 1 && memcmp(buf, AREA_ARGV, (size_t)n) == 0);

    /* another user's process: EINVAL from the kernel, -EACCES here; root reads it */
    CHECK(pt_environ(501, buf, sizeof buf) == -EACCES);
    CHECK(find_in(501, "FOO", val, 256, 4096) == -EACCES);
    sim_uid = 0;
    CHECK(pt_environ(501, buf, sizeof buf) == (int)sizeof AREA_ENV - 1);
    sim_uid = 501;
    /* gone, zombie (no area: empty), kernel_task and bad pids */
    CHECK(pt_environ(4242, buf, sizeof buf) == -ESRCH && pt_cmdline(4242, buf, sizeof buf) == -ESRCH);
    CHECK(pt_environ(502, buf, sizeof buf) == 0 && pt_cmdline(502, buf, sizeof buf) == 0);
    CHECK(find_in(502, "FOO", val, 256, 4096) == -ENODATA);
    CHECK(pt_environ(0, buf, sizeof buf) == -ESRCH && pt_environ(-1, buf, sizeof buf) == -ESRCH);
    /* restricted: argv, and an empty environment ("unknown" to the caller) */
    CHECK(pt_environ(503, buf, sizeof buf) == 0);
    n = pt_cmdline(503, buf, sizeof buf);
    CHECK(n == 9 && memcmp(buf, "x\0--flag\0", 9) == 0);
    CHECK(find_in(503, "FOO", val, 256, 4096) == -ENODATA);
    /* the copy from the stack failed; malformed areas are never guessed at */
    CHECK(pt_environ(504, buf, sizeof buf) == -EIO);
    CHECK(pt_environ(505, buf, sizeof buf) == -EIO && pt_cmdline(505, buf, sizeof buf) == -EIO);
    CHECK(pt_environ(506, buf, sizeof buf) == -EIO);
    CHECK(pt_environ(507, buf, sizeof buf) == -EIO);
    /* being forked: alive, not readable yet; never "gone" */
    CHECK(pt_environ(508, buf, sizeof buf) == -EACCES);

    /* a buffer the area does not fit, or only just fills: -E2BIG, never a cut area */
    size_t whole = sizeof AREA - 1 + sizeof(int);
    for (size_t cap = 0; cap <= whole; cap++) {
        char *small = malloc(cap ? cap : 1);
        CHECK(pt_environ(500, small, cap) == -E2BIG);
        CHECK(pt_cmdline(500, small, cap) == -E2BIG);
        free(small);
        CHECK(find_in(500, "FOO", val, 256, cap) == (cap ? -E2BIG : -EINVAL));
    }
    char *exact = malloc(whole + 1);
    CHECK(pt_environ(500, exact, whole + 1) == (int)sizeof AREA_ENV - 1);
    free(exact);
    /* a buffer beyond KERN_ARGMAX is clamped, not refused (the kernel says EINVAL) */
    char *big = malloc((size_t)sim_argmax * 2);
    CHECK(pt_environ(500, big, (size_t)sim_argmax * 2) == (int)sizeof AREA_ENV - 1);
    free(big);
    sim_argmax = 16; /* an area larger than KERN_ARGMAX: -E2BIG at any size */
    CHECK(pt_environ(500, buf, sizeof buf) == -E2BIG);
    sim_argmax = 1 << 18;
    printf("  KERN_PROCARGS2: environ and argv, other users, zombies, restricted, malformed, small buffers\n");
}

static void test_env_find(void)
{
    char val[256];
    args_table();
    CHECK(find_in(500, "FOO", val, 256, 4096) == 3 && strcmp(val, "bar") == 0);
    CHECK(find_in(500, "FOOBAR", val, 256, 4096) == 3 && strcmp(val, "baz") == 0);
    CHECK(find_in(500, "X", val, 256, 4096) == 6 && strcmp(val, "FOO=no") == 0);
    CHECK(find_in(500, "EMPTY", val, 256, 4096) == 0 && strcmp(val, "") == 0);
    CHECK(find_in(500, "FO", val, 256, 4096) == -ENODATA);
    CHECK(find_in(500, "ptr_munge", val, 256, 4096) == -ENODATA); /* past the environment's end */
    CHECK(find_in(500, "a", val, 256, 4096) == -ENODATA);         /* an argv string is no variable */
    CHECK(find_in(500, "FOO", val, 3, 4096) == -ENAMETOOLONG);
    CHECK(find_in(500, "FOO", val, 4, 4096) == 3);
    CHECK(find_in(500, "", val, 256, 4096) == -EINVAL && find_in(500, "A=", val, 256, 4096) == -EINVAL);
    CHECK(find_in(500, "FOO", val, 0, 4096) == -EINVAL && find_in(500, "FOO", val, 256, 0) == -EINVAL);

    int32_t pids[] = {500, 501, 502, 503, 504, 4242, 508, 1};
    int32_t status[8];
    const size_t slot = 8;
    char *vals = malloc(8 * slot), *scratch = malloc(4096);
    CHECK(pt_env_scan(pids, 8, "FOOBAR", 6, status, vals, slot, scratch, 4096) == 0);
    CHECK(status[0] == 3 && strcmp(vals, "baz") == 0);
    CHECK(status[1] == -EACCES && status[2] == -ENODATA && status[3] == -ENODATA && status[4] == -EIO);
    CHECK(status[5] == -ESRCH && status[6] == -EACCES);
    CHECK(status[7] == -EIO || status[7] == -ENODATA || status[7] == -EACCES); /* launchd has no area here */
    CHECK(pt_env_scan(pids, 8, "X", 1, status, vals, 4, scratch, 4096) == 0 && status[0] == -ENAMETOOLONG);
    CHECK(pt_env_scan(pids, -1, "X", 1, status, vals, slot, scratch, 4096) == -EINVAL);
    CHECK(pt_env_scan(pids, 8, "X", 1, status, vals, 0, scratch, 4096) == -EINVAL);
    CHECK(pt_env_scan(pids, 8, "X=", 2, status, vals, slot, scratch, 4096) == -EINVAL);
    CHECK(pt_env_scan(pids, 0, "X", 1, NULL, NULL, slot, scratch, 4096) == 0);
    free(vals);
    free(scratch);
    printf("  pt_env_find / pt_env_scan over KERN_PROCARGS2: first entry named key wins, statuses per pid\n");
}

static void test_procargs2_fuzz(void)
{
    srand(7);
    const char alphabet[] = {'\0', '\0', '\0', 'a', 'b', '=', 'F', '\xff'};
    for (int iter = 0; iter < 200000; iter++) {
        size_t len = (size_t)(rand() % 64);
        char *blk = malloc(len ? len : 1); /* exact size: ASan sees any read past it */
        for (size_t i = 0; i < len; i++)
            blk[i] = rand() % 4 ? alphabet[rand() % 8] : (char)rand();
        if (len >= sizeof(int) && rand() % 2) {
            int argc = rand() % 6 - 1;
            memcpy(blk, &argc, sizeof argc);
        }
        size_t ao, al, eo, el;
        int rc = pt_procargs2_split(blk, len, &ao, &al, &eo, &el);
        CHECK(rc == 0 || rc == -EINVAL);
        if (rc == 0) {
            CHECK(ao >= sizeof(int) && ao + al <= len && eo == ao + al && eo + el <= len);
            CHECK(al == 0 || blk[ao + al - 1] == '\0');
            CHECK(el == 0 || blk[eo + el - 1] == '\0');
            char val[8];
            int f = pt_block_find(blk + eo, el, "F", 1, val, sizeof val);
            CHECK(f == -ENODATA || f == -ENAMETOOLONG || (f >= 0 && f < 8));
        }
        free(blk);
    }
    printf("  200000 random KERN_PROCARGS2 areas: split stays in bounds\n");
}

/* The shared parsers under ASan: the streaming search (through a tmpfile, with
 * tiny scratch buffers) and the in-memory one agree on random blocks. */
static void test_stream_vs_block(void)
{
    srand(9);
    const char alphabet[] = {'\0', '=', 'F', 'O', 'B', 'x'};
    const char *keys[] = {"F", "FO", "FOO", "FOOB"};
    FILE *f = tmpfile();
    CHECK(f != NULL);
    int fd = fileno(f);
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = (size_t)(rand() % 48);
        char *blk = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++)
            blk[i] = alphabet[rand() % 6];
        CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, blk, len, 0) == (ssize_t)len && lseek(fd, 0, SEEK_SET) == 0);
        const char *key = keys[rand() % 4];
        size_t valcap = 1 + (size_t)(rand() % 6), scratchcap = 1 + (size_t)(rand() % 9);
        char *v1 = malloc(valcap), *v2 = malloc(valcap), *scratch = malloc(scratchcap);
        int a = pt_block_find(blk, len, key, strlen(key), v1, valcap);
        int b = pt_stream_find(fd, key, strlen(key), v2, valcap, scratch, scratchcap, 1 << 20);
        CHECK(a == b);
        CHECK(a < 0 || memcmp(v1, v2, (size_t)a + 1) == 0);
        free(v1);
        free(v2);
        free(scratch);
        free(blk);
    }
    fclose(f);
    printf("  20000 random blocks: pt_stream_find (1..9-byte scratch) agrees with pt_block_find\n");
}

int main(void)
{
    uint64_t now;
    test_snapshot_rows();
    test_snapshot_sidl_listed();
    test_snapshot_caps();
    test_growing_table();
    test_linear_work();
    test_proc();
    test_proc_sidl();
    test_children();
    test_walk();
    test_random_tables();
    test_environ_cmdline();
    test_env_find();
    test_procargs2_fuzz();
    test_stream_vs_block();
    test_facts();
    CHECK(pt_now(&now) == 0 && now > 1700000000ull * 1000000u);
    printf("macOS core simulation: all checks passed\n");
    return 0;
}
