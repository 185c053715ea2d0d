/* Drives the macOS facts, csrc/core/facts_macos*.c, against sim_kernel.c: the contract of pt_facts, pt_facts_scan
 * and pt_facts_table in csrc/include/proctree.h (in macOS units: microseconds since the epoch, nanoseconds,
 * bytes), for a normal process, a zombie, another user's process, a pid taken by another process before or
 * during the read, long argv, buffers too small, and processes exiting mid-batch. Buffers are malloc'd to
 * their exact size, so ASan sees any write past them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proctree.h"
#include <sys/proc.h>

#include "sim_kernel.h"
#include "sim_test.h"

#define ONE_SECOND_ABS 24000000ull /* Mach absolute units per second at sim_timebase (125/3): 24 MHz */
#define TTY            0x10000003

/* KERN_PROCARGS2's strings: exec path, padding, argv (3 entries), environment. */
static const char AREA[] = "/usr/local/bin/tool\0\0\0\0"
                           "tool\0--port\0"
                           "8080\0"
                           "HOME=/Users/me\0PATH=/usr/bin\0";
static const char AREA_ARGV[] = "tool\0--port\0"
                                "8080\0";

static void reset_facts(void)
{
    sim_count = 0;
    sim_uid = 501;
    sim_sidl_listed = 0;
    sim_grow_per_read = 0;
    sim_argmax = 1 << 18;
    memset(&sim_calls, 0, sizeof sim_calls);
}

/* Returns a new process of uid (all three uids), with counters, a terminal, an exe path, a cwd and AREA. */
static struct sim_proc *add_proc(int pid, int ppid, int uid, int stat, const char *exe)
{
    struct sim_proc *p = &sim_table[sim_count++];
    memset(p, 0, sizeof *p);
    p->pid = p->pgid = pid;
    p->ppid = ppid;
    p->sid = 1;
    p->uid = p->ruid = p->svuid = uid;
    p->stat = stat;
    p->sec = 1700000000L + pid;
    p->usec = pid % 1000000;
    snprintf(p->exe, sizeof p->exe, "%s", exe);
    p->tdev = TTY;
    p->rss = 8u << 20;
    p->vsize = 4ull << 30;
    p->user_abs = 3 * ONE_SECOND_ABS / 2; /* 1.5 s */
    p->sys_abs = ONE_SECOND_ABS / 4;      /* 0.25 s */
    p->threads = 3;
    p->path = "/usr/local/bin/tool";
    p->cwd = "/Users/me/project";
    p->argc = 3;
    p->args = AREA;
    p->args_len = sizeof AREA - 1;
    return p;
}

static uint64_t start_of(const struct sim_proc *p)
{
    return (uint64_t)p->sec * 1000000u + (uint64_t)p->usec;
}

/* Returns 1 if the row's string at off/len in buf is exactly s[0..n). */
static int string_is(const char *buf, uint32_t off, uint32_t len, const char *s, size_t n)
{
    return len == n && (n == 0 || memcmp(buf + off, s, n) == 0);
}

/* Checks the fields every readable, running own process of add_proc has. */
static void check_counted(const struct pt_facts *f, const struct sim_proc *p)
{
    CHECK(f->pid == p->pid && f->ppid == p->ppid && f->state == 'R' && f->kthread == 0);
    CHECK(f->start_time == start_of(p));
    CHECK(f->ruid == (uint32_t)p->ruid && f->euid == (uint32_t)p->uid && f->suid == (uint32_t)p->svuid);
    CHECK(f->tty_nr == TTY);
    CHECK(f->rss_pages == p->rss && f->vsize == p->vsize);        /* bytes on macOS */
    CHECK(f->utime == 1500000000ull && f->stime == 250000000ull); /* nanoseconds */
    CHECK(f->num_threads == 3);
}

/* One own process, every fact, in one TASKALLINFO plus a call per string and one identity check after them. */
static void test_normal(void)
{
    reset_facts();
    add_proc(1, 0, 0, SRUN, "launchd");
    struct sim_proc *p = add_proc(100, 1, 501, SRUN, "a_name_longer_than_sixteen");
    p->ruid = 502;
    p->svuid = 503;
    uint64_t start = start_of(p);
    size_t cap = 256;
    char *buf = malloc(cap);
    struct pt_facts f;
    CHECK(pt_facts(100, &start, PT_FACT_ALL, &f, buf, cap) == 0);
    CHECK(f.status == 0 && f.have == PT_FACT_ALL && f.denied == 0);
    check_counted(&f, p);
    CHECK(strcmp(f.name, "a_name_longer_than_sixteen") == 0); /* pbi_name, not the 15-byte p_comm */
    CHECK(string_is(buf, f.cmdline_off, f.cmdline_len, AREA_ARGV, sizeof AREA_ARGV - 1));
    CHECK(string_is(buf, f.exe_off, f.exe_len, "/usr/local/bin/tool", 19));
    CHECK(string_is(buf, f.cwd_off, f.cwd_len, "/Users/me/project", 17));
    CHECK(sim_calls.taskallinfo == 1 && sim_calls.procargs2 == 1 && sim_calls.pidpath == 1);
    CHECK(sim_calls.vnodepathinfo == 1 && sim_calls.bsdinfo == 1 && sim_calls.kern_proc_pid == 0);

    /* The BSD part alone: one system call, no buffer needed. */
    memset(&sim_calls, 0, sizeof sim_calls);
    CHECK(pt_facts(100, NULL, PT_FACT_STAT, &f, NULL, 0) == 0);
    CHECK(f.have == PT_FACT_STAT && f.ruid == 502); /* the uids come with the record either way */
    CHECK(sim_calls.taskallinfo == 1 && sim_calls.bsdinfo == 0 && sim_calls.kern_proc_pid == 0);

    /* Errors of the call itself. */
    CHECK(pt_facts(100, NULL, PT_FACT_ALL + 1, &f, buf, cap) == -EINVAL);
    CHECK(pt_facts(100, NULL, PT_FACT_STAT, NULL, buf, cap) == -EINVAL);
    CHECK(pt_facts(0, NULL, PT_FACT_STAT, &f, buf, cap) == -ESRCH && f.status == -ESRCH);
    CHECK(pt_facts(-1, NULL, PT_FACT_STAT, &f, buf, cap) == -ESRCH);
    CHECK(pt_facts(4242, NULL, PT_FACT_ALL, &f, buf, cap) == -ESRCH && f.pid == 4242);

    /* Large counters convert without overflowing ticks * numer. */
    p->user_abs = 3000000000000000ull;
    CHECK(pt_facts(100, NULL, PT_FACT_STAT, &f, NULL, 0) == 0 && f.utime == 125000000000000000ull);
    p->tdev = -1; /* NODEV: no terminal */
    CHECK(pt_facts(100, NULL, PT_FACT_STAT, &f, NULL, 0) == 0 && f.tty_nr == 0);
    free(buf);
    printf("  facts: an own process, every fact, in 5 calls; the BSD part alone in 1\n");
}

/* A zombie: no task (TASKALLINFO is ESRCH), kinfo still has it. Zero counters, empty strings, no error. */
static void test_zombie(void)
{
    reset_facts();
    add_proc(1, 0, 0, SRUN, "launchd");
    struct sim_proc *z = add_proc(200, 1, 501, SZOMB, "zomb");
    uint64_t start = start_of(z);
    char buf[64];
    struct pt_facts f;
    CHECK(pt_facts(200, &start, PT_FACT_ALL, &f, buf, sizeof buf) == 0);
    CHECK(f.status == 0 && f.state == 'Z' && f.have == PT_FACT_ALL && f.denied == 0);
    CHECK(f.start_time == start && f.ppid == 1 && f.ruid == 501 && strcmp(f.name, "zomb") == 0);
    CHECK(f.rss_pages == 0 && f.vsize == 0 && f.utime == 0 && f.num_threads == 0);
    CHECK(f.cmdline_len == 0 && f.exe_len == 0 && f.cwd_len == 0);
    CHECK(sim_calls.procargs2 == 0 && sim_calls.pidpath == 0); /* nothing asked of a process that has none */
    printf("  facts: a zombie reads as one, with no strings and no error\n");
}

/* Another user's process: its record from kinfo, its counters, argv and cwd refused, its exe known. */
static void test_other_user(void)
{
    reset_facts();
    add_proc(1, 0, 0, SRUN, "launchd");
    struct sim_proc *r = add_proc(300, 1, 0, SRUN, "rootd");
    r->ruid = 0;
    r->svuid = 7;
    uint64_t start = start_of(r);
    size_t cap = 128;
    char *buf = malloc(cap);
    struct pt_facts f;
    CHECK(pt_facts(300, &start, PT_FACT_ALL, &f, buf, cap) == 0);
    CHECK(f.status == 0 && f.state == 'R' && f.start_time == start && f.ppid == 1);
    CHECK(f.have == (PT_FACT_STAT | PT_FACT_UIDS | PT_FACT_EXE));
    CHECK(f.denied == (PT_FACT_STAT | PT_FACT_CMDLINE | PT_FACT_CWD)); /* counters unknown, not zero */
    CHECK(f.euid == 0 && f.suid == 7 && f.tty_nr == TTY && strcmp(f.name, "rootd") == 0);
    CHECK(string_is(buf, f.exe_off, f.exe_len, "/usr/local/bin/tool", 19));
    CHECK(f.cmdline_len == 0 && f.cwd_len == 0);

    sim_uid = 0; /* as root, everything */
    CHECK(pt_facts(300, &start, PT_FACT_ALL, &f, buf, cap) == 0);
    CHECK(f.have == PT_FACT_ALL && f.denied == 0 && f.num_threads == 3);
    CHECK(string_is(buf, f.cmdline_off, f.cmdline_len, AREA_ARGV, sizeof AREA_ARGV - 1));
    free(buf);
    printf("  facts: another user's process: kinfo's fields, exe; counters, argv, cwd marked denied\n");
}

/* A traced process reports its original parent, as pt_proc does. */
static void test_traced(void)
{
    reset_facts();
    add_proc(1, 0, 0, SRUN, "launchd");
    add_proc(400, 1, 501, SRUN, "parent");
    add_proc(401, 1, 501, SRUN, "lldb");
    struct sim_proc *t = add_proc(402, 401, 501, SRUN, "child");
    t->traced = 1;
    t->oppid = 400;
    struct pt_facts f;
    CHECK(pt_facts(402, NULL, PT_FACT_STAT, &f, NULL, 0) == 0);
    CHECK(f.ppid == 400 && f.num_threads == 3 && f.have == PT_FACT_STAT);
    struct pt_proc row;
    CHECK(pt_proc(402, &row) == 0 && row.ppid == f.ppid && row.start_time == f.start_time);
    printf("  facts: a traced process's parent is the one pt_proc reports\n");
}

/* The pid names another process than the caller's (before the read), or is taken or freed during it: the row is
 * -ESRCH at whichever call sees the change, never a mix of two processes. */
static void test_pid_reuse(void)
{
    char buf[256];
    struct pt_facts f;
    reset_facts();
    add_proc(1, 0, 0, SRUN, "launchd");
    struct sim_proc *p = add_proc(500, 1, 501, SRUN, "tool");
    uint64_t old = start_of(p) - 1;
    CHECK(pt_facts(500, &old, PT_FACT_STAT, &f, buf, sizeof buf) == -ESRCH && f.status == -ESRCH && f.have == 0);

    /* A full read looks at the pid 5 times (TASKALLINFO, KERN_PROCARGS2, proc_pidpath, VNODEPATHINFO, the check). */
    for (int reborn = 0; reborn < 2; reborn++) {
        for (int k = 1; k <= 6; k++) {
            reset_facts();
            add_proc(1, 0, 0, SRUN, "launchd");
            p = add_proc(500, 1, 501, SRUN, "tool");
            uint64_t start = start_of(p);
            p->looks_left = k;
            p->reborn_sec = reborn ? 1800000000L : 0;
            int rc = pt_facts(500, &start, PT_FACT_ALL, &f, buf, sizeof buf);
            CHECK(rc == f.status);
            CHECK(k <= 5 ? rc == -ESRCH && f.have == 0 : rc == 0 && f.have == PT_FACT_ALL);
        }
    }
    printf("  facts: a pid taken or freed before or at any of the 5 reads fails the row (-ESRCH)\n");
}

/* Long argv; buffers that hold all, all but one byte, or nothing. */
static void test_buffers(void)
{
    enum { ARGS = 3000 };
    static char area[ARGS * 2 + 64];
    size_t n = 0;
    memcpy(area, "/bin/long\0\0\0", 12);
    n = 12;
    size_t argv_start = n;
    for (int i = 0; i < ARGS; i++) {
        area[n++] = (char)('a' + i % 26);
        area[n++] = '\0';
    }
    size_t argv_len = n - argv_start;
    memcpy(area + n, "E=1\0", 4);
    n += 4;
    reset_facts();
    add_proc(1, 0, 0, SRUN, "launchd");
    struct sim_proc *p = add_proc(600, 1, 501, SRUN, "long");
    p->argc = ARGS;
    p->args = area;
    p->args_len = n;
    p->path = "/bin/long";
    p->cwd = "/";
    uint64_t start = start_of(p);
    struct pt_facts f;
    /* The area is read into the row's room whole (environment included); argv alone is kept. */
    size_t cap = n + sizeof(int) + 1;
    char *buf = malloc(cap);
    CHECK(pt_facts(600, &start, PT_FACT_CMDLINE | PT_FACT_EXE | PT_FACT_CWD, &f, buf, cap) == 0);
    CHECK(f.cmdline_len == argv_len && memcmp(buf, area + argv_start, argv_len) == 0);
    CHECK(string_is(buf, f.exe_off, f.exe_len, "/bin/long", 9) && string_is(buf, f.cwd_off, f.cwd_len, "/", 1));
    free(buf);
    for (size_t small = 0; small < 40; small += 7) {
        char *tiny = malloc(small ? small : 1);
        CHECK(pt_facts(600, &start, PT_FACT_ALL, &f, small ? tiny : NULL, small) == -ENOBUFS);
        CHECK(f.status == -ENOBUFS && f.have == 0 && f.start_time == start); /* kept: read it again, pinned */
        free(tiny);
    }
    /* argv fits, the exe path does not. */
    p->args = AREA;
    p->args_len = sizeof AREA - 1;
    p->argc = 3;
    cap = sizeof AREA + sizeof(int) + 2;
    buf = malloc(cap);
    CHECK(pt_facts(600, &start, PT_FACT_CMDLINE | PT_FACT_EXE, &f, buf, cap) == 0);
    p->path = "/a/path/much/longer/than/what/is/left/in/the/buffer/after/argv/was/kept/there";
    CHECK(pt_facts(600, &start, PT_FACT_CMDLINE | PT_FACT_EXE, &f, buf, cap) == -ENOBUFS);
    free(buf);
    printf("  facts: a %d-entry argv read whole; too small a buffer is -ENOBUFS with the row's start kept\n", ARGS);
}

/* Given pids: one exits mid-batch, one is not a process, one another user's; the others' strings are packed
 * one after another, and the failed row's are taken back. */
static void test_scan(void)
{
    reset_facts();
    add_proc(1, 0, 0, SRUN, "launchd");
    struct sim_proc *a = add_proc(700, 1, 501, SRUN, "a");
    add_proc(701, 1, 501, SRUN, "b")->looks_left = 3; /* gone at its proc_pidpath */
    add_proc(702, 1, 0, SRUN, "c");
    struct sim_proc *d = add_proc(703, 1, 501, SRUN, "d");
    d->cwd = "/tmp";
    int32_t pids[] = {700, 701, -5, 702, 703};
    uint64_t starts[5];
    for (int i = 0; i < 5; i++)
        starts[i] = pids[i] > 0 ? 1700000000ull * 1000000u + (uint64_t)pids[i] * 1000001u : 0;
    CHECK(starts[0] == start_of(a));
    struct pt_facts *out = malloc(5 * sizeof *out);
    size_t cap = 4096;
    char *buf = malloc(cap);
    CHECK(pt_facts_scan(pids, starts, 5, PT_FACT_ALL, out, buf, cap) == 0);
    CHECK(out[0].status == 0 && out[0].have == PT_FACT_ALL);
    CHECK(out[1].status == -ESRCH && out[1].pid == 701 && out[1].have == 0);
    CHECK(out[2].status == -ESRCH && out[2].pid == -5);
    CHECK(out[3].status == 0 && out[3].denied == (PT_FACT_STAT | PT_FACT_CMDLINE | PT_FACT_CWD));
    CHECK(out[4].status == 0 && out[4].have == PT_FACT_ALL);
    CHECK(out[3].exe_off == out[0].cwd_off + out[0].cwd_len); /* 701's strings were taken back */
    CHECK(out[4].cmdline_off == out[3].exe_off + out[3].exe_len);
    CHECK(string_is(buf, out[4].cwd_off, out[4].cwd_len, "/tmp", 4));
    CHECK(pt_facts_scan(pids, NULL, -1, PT_FACT_ALL, out, buf, cap) == -EINVAL);
    CHECK(pt_facts_scan(NULL, NULL, 1, PT_FACT_ALL, out, buf, cap) == -EINVAL);
    CHECK(pt_facts_scan(pids, NULL, 0, PT_FACT_ALL, NULL, NULL, 0) == 0);
    free(out);
    free(buf);
    printf("  facts: a scan of 5 pids: one exits mid-batch, one is no process; the rest read, strings packed\n");
}

/* The table: pid 0 left out, ascending pids, each kind of row, one process gone mid-pass left out. */
static void test_table(void)
{
    reset_facts();
    add_proc(0, 0, 0, SRUN, "kernel_task");
    add_proc(1, 0, 0, SRUN, "launchd");
    add_proc(900, 1, 501, SZOMB, "zomb");
    add_proc(800, 1, 501, SRUN, "own");
    add_proc(801, 1, 501, SRUN, "vanishing")->looks_left = 1; /* gone before its TASKALLINFO answers */
    struct sim_proc *t = add_proc(802, 1, 501, SRUN, "traced");
    t->traced = 1;
    t->ppid = 1;
    t->oppid = 800;
    add_proc(803, 1, 501, SRUN, "reborn")->looks_left = 1; /* another process took 803 since the list */
    sim_table[sim_count - 1].reborn_sec = 1800000000L;
    int cap = 16;
    struct pt_facts *out = malloc((size_t)cap * sizeof *out);
    size_t bufcap = 1 << 16;
    char *buf = malloc(bufcap);
    int n = pt_facts_table(PT_FACT_ALL, out, cap, buf, bufcap);
    CHECK(n == 4);
    CHECK(out[0].pid == 1 && out[1].pid == 800 && out[2].pid == 802 && out[3].pid == 900);
    CHECK(out[0].status == 0 && out[0].denied == (PT_FACT_STAT | PT_FACT_CMDLINE | PT_FACT_CWD));
    CHECK(out[1].status == 0 && out[1].have == PT_FACT_ALL && out[1].denied == 0);
    CHECK(out[2].status == 0 && out[2].ppid == 800); /* the original parent, resolved from the list */
    CHECK(out[3].status == 0 && out[3].state == 'Z' && out[3].have == PT_FACT_ALL);
    for (int i = 0; i < n; i++)
        CHECK(out[i].kthread == 0);
    /* One list (probe + read); KERN_PROC_PID only where TASKALLINFO found no task (801 gone, 900 a zombie), and
     * for another user's process (launchd), whose refused argv and identity check ask it. */
    CHECK(sim_calls.kern_proc_all == 2 && sim_calls.kern_proc_pid == 4);
    CHECK(pt_facts_table(PT_FACT_ALL, out, 3, buf, bufcap) == -ENOBUFS);
    CHECK(pt_facts_table(PT_FACT_ALL, out, 0, buf, bufcap) == -ENOBUFS);
    CHECK(pt_facts_table(PT_FACT_ALL + 1, out, cap, buf, bufcap) == -EINVAL);
    CHECK(pt_facts_table(PT_FACT_STAT, NULL, 4, NULL, 0) == -EINVAL);

    /* Read again: 801 is gone for good, 803 is the new process. 1 KiB of strings holds every row's. With 40
     * bytes, launchd's exe fits and the next rows get -ENOBUFS, kept with their start times. */
    CHECK(pt_facts_table(PT_FACT_ALL, out, cap, buf, 1024) == 5);
    for (int i = 0; i < 5; i++)
        CHECK(out[i].status == 0);
    CHECK(out[3].pid == 803 && out[3].start_time == 1800000000ull * 1000000u);
    n = pt_facts_table(PT_FACT_ALL, out, cap, buf, 40);
    CHECK(n == 5 && out[0].status == 0 && out[0].exe_len == 19);
    CHECK(out[1].status == -ENOBUFS && out[1].start_time == 1700000000ull * 1000000u + 800u * 1000001u);
    CHECK(out[4].status == 0 && out[4].state == 'Z'); /* the zombie has no strings to fit */
    free(out);
    free(buf);
    printf("  facts: the table: pid 0 out, a process gone or reborn mid-pass out, the rest each with its marks\n");
}

/* A random table: every kind of row (own, another user's, zombie, stopped, traced, gone or reborn at a random
 * look, long or missing argv), read as a random user with a random string room. */
static void random_facts_table(struct sim_proc *before, int *n_before)
{
    static const char LONG[] = "/bin/x\0\0a-much-longer-argument-than-most\0b\0"
                               "ENV=a-long-environment-value-to-fill-the-room\0";
    static const int STATS[] = {SRUN, SSLEEP, SSTOP, SZOMB};
    reset_facts();
    sim_uid = rand() % 3 ? 501 : 0;
    add_proc(0, 0, 0, SRUN, "kernel_task");
    add_proc(1, 0, 0, SRUN, "launchd");
    int n = 2 + rand() % 60, pid = 100;
    for (int i = 0; i < n; i++) {
        pid += 1 + rand() % 5;
        int uid = rand() % 3 ? 501 : 0;
        struct sim_proc *p = add_proc(pid, 1, uid, STATS[rand() % 4], "p");
        if (rand() % 4 == 0) {
            p->args = LONG;
            p->args_len = sizeof LONG - 1;
            p->argc = 3;
        }
        if (rand() % 6 == 0 && i > 0) {
            p->traced = 1;
            p->oppid = sim_table[sim_count - 2].pid;
        }
        if (rand() % 5 == 0) {
            p->looks_left = 1 + rand() % 6;
            p->reborn_sec = rand() % 2 ? 1800000000L : 0;
        }
    }
    memcpy(before, sim_table, (size_t)sim_count * sizeof *before);
    *n_before = sim_count;
}

static const struct sim_proc *was(const struct sim_proc *before, int n, int pid)
{
    for (int i = 0; i < n; i++)
        if (before[i].pid == pid)
            return &before[i];
    return NULL;
}

/* Checks one row of a random table against what the process was before the read. */
static void check_random_row(const struct pt_facts *f, const struct sim_proc *b, uint32_t want, size_t *packed_end,
                             size_t bufcap)
{
    CHECK(b != NULL && b->pid > 0 && f->kthread == 0);
    CHECK(f->status == 0 || f->status == -ENOBUFS);
    CHECK(f->start_time == start_of(b)); /* never the reborn process's */
    if (f->status != 0)
        return;
    CHECK((f->have | f->denied) == want && f->have & PT_FACT_STAT &&
          (f->denied & ~(uint32_t)(PT_FACT_STAT | PT_FACT_CMDLINE | PT_FACT_CWD)) == 0);
    int other = (uid_t)b->uid != sim_uid && sim_uid != 0;
    if (b->stat == SZOMB)
        CHECK(f->state == 'Z' && f->rss_pages == 0 && f->denied == 0 && f->have == want);
    else
        CHECK(!!(f->denied & PT_FACT_STAT) == other && (other || f->num_threads == 3));
    /* A traced row reports its original parent, or launchd where that one is a zombie, gone or reborn. */
    CHECK(b->traced ? f->ppid == b->oppid || f->ppid == 1 : f->ppid == b->ppid);
    const uint32_t offs[] = {f->cmdline_off, f->exe_off, f->cwd_off}, lens[] = {f->cmdline_len, f->exe_len, f->cwd_len};
    for (int i = 0; i < 3; i++) {
        if (lens[i] == 0)
            continue;
        CHECK(offs[i] >= *packed_end && offs[i] + lens[i] <= bufcap); /* packed in order, inside the buffer */
        *packed_end = offs[i] + lens[i];
    }
}

/* 2,000 random tables, each through pt_facts_table and then pt_facts_scan of the same pids pinned to the
 * starts they had. */
static void test_random_facts(void)
{
    static struct sim_proc before[80];
    struct pt_facts *out = malloc(80 * sizeof *out);
    int32_t pids[80];
    uint64_t starts[80];
    srand(31);
    for (int iter = 0; iter < 2000; iter++) {
        int nb;
        random_facts_table(before, &nb);
        size_t bufcap = (size_t)(rand() % 4 ? rand() % 4096 : 0);
        char *buf = malloc(bufcap ? bufcap : 1);
        uint32_t want = (uint32_t)(rand() % (PT_FACT_ALL + 1)) | PT_FACT_STAT;
        int n = pt_facts_table(want, out, 80, bufcap ? buf : NULL, bufcap);
        CHECK(n >= 0 && n < nb);
        size_t packed = 0;
        for (int i = 0; i < n; i++) {
            CHECK(i == 0 || out[i].pid > out[i - 1].pid);
            check_random_row(&out[i], was(before, nb, out[i].pid), want, &packed, bufcap);
        }
        for (int i = 0; i < nb; i++) /* every process that stayed is in the table */
            if (before[i].pid > 0 && before[i].looks_left == 0) {
                int found = 0;
                for (int j = 0; j < n; j++)
                    found |= out[j].pid == before[i].pid;
                CHECK(found);
            }
        for (int i = 0; i < nb; i++) {
            pids[i] = before[i].pid;
            starts[i] = start_of(&before[i]);
        }
        CHECK(pt_facts_scan(pids, starts, nb, want, out, bufcap ? buf : NULL, bufcap) == 0);
        packed = 0;
        for (int i = 0; i < nb; i++) {
            CHECK(out[i].pid == pids[i]);
            if (out[i].status != -ESRCH)
                check_random_row(&out[i], &before[i], want, &packed, bufcap);
            else
                CHECK(pids[i] <= 0 || before[i].looks_left > 0 || was(sim_table, sim_count, pids[i]) == NULL ||
                      start_of(was(sim_table, sim_count, pids[i])) != starts[i]);
        }
        free(buf);
    }
    free(out);
    printf("  facts: 2000 random tables (every row kind, random room, user and root): table and scan hold\n");
}

void test_facts(void)
{
    test_normal();
    test_zombie();
    test_other_user();
    test_traced();
    test_pid_reuse();
    test_buffers();
    test_scan();
    test_table();
    test_random_facts();
}
