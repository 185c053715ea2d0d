/* The native keeper: the small process that holds a contained tree together.
 *
 * It speaks the keeper protocol of proctree/_containment/protocol.py (its
 * command line and its status lines); tests/test_keeper_protocol.py holds it
 * to that protocol. build_keeper.py builds it into the package, beside the
 * extension module, from the core's own sources.
 *
 * Why this shape:
 * - Signals are blocked, never handled: a signal the owner ignored stays
 *   ignored for the command (exec keeps SIG_IGN, and a blocked signal is
 *   still queued for us, so it is still forwarded), and no handler can race
 *   the loop. Linux reads them from a signalfd, macOS from kqueue.
 * - Every signal to a member is bound to its identity: a pidfd (Linux 5.3+)
 *   held across the start-time check, else the start time checked just before.
 * - The owner's death is proven by getppid() alone: a pidfd (kqueue NOTE_EXIT
 *   on macOS) or PR_SET_PDEATHSIG only wakes us to look.
 * - Every buffer is static and sized by MAX_PROCS: only the pages a scan
 *   touches are resident, and a fork bomb cannot make the keeper grow.
 * - The command is started with fork (clone3 into its cgroup on Linux) and
 *   exec, never posix_spawn: the child may have to join a cgroup or make its
 *   group the terminal's foreground before it execs, which no spawn attribute
 *   does, and glibc's posix_spawn leaves signals ignored in a static program's
 *   child that Popen's child has at default.
 */
#if defined(__linux__)
#define _GNU_SOURCE
#elif defined(__APPLE__)
#define _DARWIN_C_SOURCE
#endif
#include "proctree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#define CGROUP2_MAGIC 0x63677270
#endif
#ifdef __APPLE__
#include <sys/event.h>
#endif

extern char **environ;

#define FIXED        13    /* fields before "--" (protocol._FIXED) */
#define MAX_PROCS    16384 /* members one scan holds */
#define SET_SLOTS    32768 /* identity set slots: a power of two, twice MAX_PROCS */
#define MAX_CG_DIRS  4096  /* nested cgroups visited at most */
#define MAX_CG_DEPTH 32
#define TREE_KEY     "PROCTREE_TREE"
#define TREE_ID_LEN  32
#define TREE_CHAIN   7 /* ids in one PROCTREE_TREE value, innermost first (marker.MAX_TREE_CHAIN) */
#define PENDING_MAX  64
#ifdef __APPLE__
#define ENV_SCRATCH (PT_ENV_SCAN_MAX + 65536) /* macOS reads the whole KERN_PROCARGS2 area */
#else
#define ENV_SCRATCH 65536 /* Linux streams /proc/<pid>/environ through it */
#endif

enum mode { M_CGROUP, M_SUBREAPER, M_SESSION };

/* What the owner told us (protocol.KeeperArgs), and the keeper's own state. */
static struct {
    int status_fd, go_fd;
    enum mode mode;
    pid_t owner;
    double grace;
    bool keep_orphans, restore_signals, pty;
    int stop_sig;      /* what each member gets, once, when we end the tree */
    bool held;         /* the owner ends the tree: we signal no member on our own */
    bool sweeping;     /* our own teardown has begun (we said "sweep") */
    bool looked_again; /* session mode with keep_orphans: the tree looked empty once already */
    bool in_cgroup;    /* cgroup mode with a go fd: the owner moved us into the tree's cgroup (we leave it after the
                     * spawn); without one we stay outside and the command is born inside */
    const char *cgroup, *exe, *receipts;
    char **argv;
    char tree_id[TREE_ID_LEN + 1]; /* session mode: our PROCTREE_TREE, else "" */
    pid_t self, session;           /* session: our sid in session mode when we lead one, else 0 */
    uint64_t self_start;           /* 0 until read */
    pid_t cmd;                     /* 0 until started */
    bool cmd_done;
    int cmd_status;
    bool cmd_stopped; /* pty mode: the command's last reported state was stopped */
    int tty_fd;       /* pty mode: the slave, our controlling terminal (for tcsetpgrp), else -1 */
    int stop_lines;   /* "stopped" lines written (macOS: their budget) */
    bool use_pidfd;
    int owner_fd; /* Linux: owner pidfd; macOS: the kqueue; -1: poll getppid() */
    int sig_fd;   /* Linux: the signalfd */
    sigset_t orig_mask, blocked;
    int pending[PENDING_MAX]; /* forwarded signals not yet sent, in order */
    int npending;
} K = {.status_fd = -1, .go_fd = -1, .owner_fd = -1, .sig_fd = -1, .tty_fd = -1};

static const int FORWARD[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
#define NFORWARD   ((int)(sizeof(FORWARD) / sizeof(FORWARD[0])))
#define PDEATH_SIG SIGALRM
/* The owner's "I end this tree" (protocol.HOLD_SIGNAL): never forwarded, ignored by default elsewhere. */
#define HOLD_SIG SIGURG
/* Room kept in the status pipe for the exit line: a "stopped" line that would eat into it is dropped. */
#define EXIT_RESERVE 256
/* Where the free room cannot be read (macOS), at most this many "stopped" lines: ~3 KB, inside the smallest pipe. */
#define STOP_LINES_MAX 256

/* ------------------------------------------------------------------------- */
/* Small helpers */

/* Returns monotonic seconds. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Returns nothing: sleeps ms milliseconds (signals are blocked, so no EINTR cuts it short). */
static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Returns nothing: writes one status line if the status fd is still ours (never blocks; a lost line is the owner's loss). */
static void say(const char *fmt, ...)
{
    if (K.status_fd < 0)
        return;
    char line[96];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof line - 1)
        return;
    line[n++] = '\n';
    ssize_t w;
    do {
        w = write(K.status_fd, line, (size_t)n);
    } while (w < 0 && errno == EINTR);
}

/* Returns nothing: writes "stopped <sig>" unless that could crowd out the exit line (a stop line may be lost; the
 * exit line is kept room for in the status pipe). */
static void say_stopped(int sig)
{
    if (K.status_fd < 0)
        return;
    bool room = K.stop_lines < STOP_LINES_MAX;
#ifdef __linux__
    int size = fcntl(K.status_fd, F_GETPIPE_SZ), used = 0;
    if (size > 0 && ioctl(K.status_fd, FIONREAD, &used) == 0)
        room = size - used >= EXIT_RESERVE; /* the reader's pace decides, not a count */
#endif
    if (!room)
        return;
    K.stop_lines++;
    say("stopped %d", sig);
}

/* Returns 0 with *out parsed from an ASCII decimal of 1..20 digits no larger than max, else -EINVAL. */
static int parse_uint(const char *s, long long max, long long *out)
{
    size_t len = strlen(s);
    if (len == 0 || len > 20)
        return -EINVAL;
    unsigned long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        if (v > (ULLONG_MAX - 9) / 10)
            return -EINVAL;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > (unsigned long long)max)
        return -EINVAL;
    *out = (long long)v;
    return 0;
}

/* Returns 0 with *out the seconds in s (a finite decimal >= 0, ASCII, no hex), else -EINVAL. */
static int parse_seconds(const char *s, double *out)
{
    if (*s == '\0')
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if ((unsigned char)*p > 127 || *p == 'x' || *p == 'X' || *p == ' ')
            return -EINVAL;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE && v < 1.0)
        errno = 0; /* underflow (1e-310, 1e-400): a valid, tiny number of seconds, as Python's float() reads it */
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0)
        return -EINVAL;
    *out = v;
    return 0;
}

/* Returns 0 with *out set from "0" or "1", else -EINVAL. */
static int parse_flag(const char *s, bool *out)
{
    if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0)
        return -EINVAL;
    *out = s[0] == '1';
    return 0;
}

/* Returns NULL for the absent marker "-", else s. */
static const char *opt(const char *s)
{
    return strcmp(s, "-") == 0 ? NULL : s;
}

/* Returns 2 (the protocol's refusal status) after one line on stderr saying why. */
static int refuse(const char *fmt, const char *what)
{
    fputs("proctree keeper: ", stderr);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return 2;
}

/* Returns 0 with K filled from the command line, or 2 after a line on stderr (protocol.KeeperArgs.from_argv's rules). */
static int parse_args(int argc, char **argv)
{
    int n = argc - 1;
    char **a = argv + 1;
    long long v;
    if (n < 1 || a[0][0] != 'v')
        return refuse("keeper arguments must start with a protocol version%s", "");
    if (strcmp(a[0], "v6") != 0)
        return refuse("keeper protocol version '%s' is not the supported 6", a[0] + 1);
    if (n <= FIXED + 1 || strcmp(a[FIXED], "--") != 0)
        return refuse("keeper arguments need 12 fields, '--' and a command%s", "");
    if (parse_uint(a[1], INT_MAX, &v) < 0)
        return refuse("status_fd must be a decimal number, not '%s'", a[1]);
    K.status_fd = (int)v;
    if (opt(a[2]) && parse_uint(a[2], INT_MAX, &v) < 0)
        return refuse("go_fd must be a decimal number, not '%s'", a[2]);
    K.go_fd = opt(a[2]) ? (int)v : -1;
    if (strcmp(a[3], "cgroup") == 0)
        K.mode = M_CGROUP;
    else if (strcmp(a[3], "subreaper") == 0)
        K.mode = M_SUBREAPER;
    else if (strcmp(a[3], "session") == 0)
        K.mode = M_SESSION;
    else
        return refuse("mode must be one of cgroup, subreaper, session, not '%s'", a[3]);
    if (parse_uint(a[4], INT32_MAX, &v) < 0 || v == 0)
        return refuse("owner_pid must be a pid, not '%s'", a[4]);
    K.owner = (pid_t)v;
    if (parse_seconds(a[5], &K.grace) < 0)
        return refuse("grace must be seconds >= 0, not '%s'", a[5]);
    if (parse_flag(a[6], &K.keep_orphans) < 0)
        return refuse("keep_orphans must be 0 or 1, not '%s'", a[6]);
    K.cgroup = opt(a[7]);
    if (K.cgroup && K.cgroup[0] == '\0')
        return refuse("cgroup must be a path or -, not '%s'", a[7]);
    if (parse_flag(a[8], &K.restore_signals) < 0)
        return refuse("restore_signals must be 0 or 1, not '%s'", a[8]);
    K.exe = a[9]; /* always the program to run: no placeholder, so a program may be named "-" */
    K.receipts = opt(a[10]);
    if (K.receipts && K.receipts[0] != '/')
        return refuse("receipts must be an absolute directory or -, not '%s'", a[10]);
    if (parse_flag(a[11], &K.pty) < 0)
        return refuse("pty must be 0 or 1, not '%s'", a[11]);
    if (parse_uint(a[12], 64, &v) < 0 || v == 0 || v == SIGKILL || v == SIGSTOP || v == SIGCONT)
        return refuse("stop_signal must be a signal number other than SIGKILL, SIGSTOP and SIGCONT, not '%s'", a[12]);
    K.stop_sig = (int)v;
    if ((K.cgroup != NULL) != (K.mode == M_CGROUP) || (K.go_fd >= 0 && !K.cgroup))
        return refuse("cgroup (and go_fd) are given in cgroup mode only, and cgroup mode needs a cgroup%s", "");
    K.argv = a + FIXED + 1;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Identity-checked signalling */

/* Returns true if pid may never be signalled by us: pid 0/1, ourselves, the owner, our parent. */
static bool protected_pid(pid_t pid)
{
    return pid <= 1 || pid == K.self || pid == K.owner || pid == getppid();
}

/* Returns 1 if sig was sent to the process (pid, start), 0 if it is gone, protected or a zombie, or -errno (-EPERM: refused). */
static int send_sig(pid_t pid, uint64_t start, int sig)
{
    if (protected_pid(pid))
        return 0;
    int fd = -1;
#ifdef __linux__
    if (K.use_pidfd) {
        fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0 && errno == ESRCH)
            return 0;
    }
#endif
    struct pt_proc row;
    int rc = pt_proc(pid, &row);
    if (rc == 0 && (row.start_time != start || row.state == 'Z' || row.state == 'X'))
        rc = -ESRCH;
    if (rc == 0) {
#ifdef __linux__
        if (fd >= 0)
            rc = (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
        else
            rc = kill(pid, sig);
#else
        rc = kill(pid, sig);
#endif
        rc = rc == 0 ? 1 : -errno;
    }
    if (fd >= 0)
        close(fd);
    return rc == -ESRCH || rc == -ENOENT ? 0 : rc;
}

/* ------------------------------------------------------------------------- */
/* cgroup v2 (Linux): the tree's own cgroup, below a proctree-<pid>-<start> parent */

#ifdef __linux__
static char g_cgpath[PATH_MAX];

/* Returns true if name is proctree-<digits>-<digits>, optionally followed by -<pid ns>-<time ns> (a per-owner
 * parent spawn() makes). */
static bool is_parent_name(const char *name, size_t len)
{
    if (len < 12 || strncmp(name, "proctree-", 9) != 0)
        return false;
    int dashes = 0, digits = 0;
    for (size_t i = 9; i < len; i++) {
        if (name[i] == '-') {
            if (digits == 0 || ++dashes > 3)
                return false;
            digits = 0;
        } else if (name[i] >= '0' && name[i] <= '9') {
            digits++;
        } else {
            return false;
        }
    }
    return (dashes == 1 || dashes == 3) && digits > 0;
}

/* Returns true if path is a plain absolute path (no "." or ".." parts, no "//", no trailing '/') of a cgroup v2
 * directory directly below a proctree-<pid>-<start> parent: the only cgroup we may write to, kill or remove. */
static bool cgroup_is_ours(const char *path)
{
    size_t len = strlen(path);
    if (len < 2 || path[0] != '/' || path[len - 1] == '/' || len >= PATH_MAX - 64)
        return false;
    if (strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../"))
        return false;
    const char *last = strrchr(path, '/');
    if (strcmp(last, "/.") == 0 || strcmp(last, "/..") == 0 || last == path)
        return false;
    const char *prev = last - 1;
    while (prev > path && *prev != '/')
        prev--;
    if (!is_parent_name(prev + 1, (size_t)(last - prev - 1)))
        return false;
    struct statfs fs;
    return statfs(path, &fs) == 0 && (unsigned long)fs.f_type == CGROUP2_MAGIC;
}

/* Returns 0 after writing text to dir/file, or -errno. */
static int write_file(const char *dir, const char *file, const char *text)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", dir, file) >= (int)sizeof p)
        return -ENAMETOOLONG;
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, text, strlen(text));
    int rc = w < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Returns the bytes read (at most cap - 1, NUL-terminated) from dir/file, or -errno. */
static int read_file(const char *dir, const char *file, char *buf, size_t cap)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", dir, file) >= (int)sizeof p)
        return -ENAMETOOLONG;
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    close(fd);
    return (int)n;
}

typedef void (*cg_visit)(const char *dir);

/* Returns nothing: calls visit on g_cgpath[0..len) and every cgroup nested below it (children before their parent
 * when post, else after), at most *budget directories and MAX_CG_DEPTH levels deep. */
static void cg_walk(size_t len, int depth, int *budget, cg_visit visit, bool post)
{
    if (!post)
        visit(g_cgpath);
    DIR *d = depth < MAX_CG_DEPTH ? opendir(g_cgpath) : NULL;
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL && *budget > 0) {
            if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            size_t nl = strlen(de->d_name);
            if (len + 1 + nl >= sizeof g_cgpath)
                continue;
            g_cgpath[len] = '/';
            memcpy(g_cgpath + len + 1, de->d_name, nl + 1);
            (*budget)--;
            cg_walk(len + 1 + nl, depth + 1, budget, visit, post);
            g_cgpath[len] = '\0';
        }
        closedir(d);
    }
    if (post)
        visit(g_cgpath);
}

/* Returns nothing: walks the tree's cgroup (K.cgroup) and those nested in it with visit. */
static void cg_each(cg_visit visit, bool post)
{
    size_t len = strlen(K.cgroup);
    if (len >= sizeof g_cgpath)
        return;
    memcpy(g_cgpath, K.cgroup, len + 1);
    int budget = MAX_CG_DIRS;
    cg_walk(len, 0, &budget, visit, post);
}

/* Returns true while any process is in the tree's cgroup (cgroup.events: populated). */
static bool cg_populated(void)
{
    char buf[512];
    if (read_file(K.cgroup, "cgroup.events", buf, sizeof buf) < 0)
        return false;
    const char *p = strstr(buf, "populated ");
    return p && p[10] != '0';
}

/* Returns nothing: moves the keeper back to the owner's cgroup (two levels up), so that killing and removing the
 * tree's is ours to do; if that fails we stay inside, and cgroup.kill ends us with the tree. */
static void cg_leave(void)
{
    char base[PATH_MAX];
    size_t len = strlen(K.cgroup);
    if (len >= sizeof base)
        return;
    memcpy(base, K.cgroup, len + 1);
    for (int i = 0; i < 2; i++) {
        char *slash = strrchr(base, '/');
        if (!slash || slash == base)
            return;
        *slash = '\0';
    }
    write_file(base, "cgroup.procs", "0");
}

/* Returns nothing: rmdir of one nested cgroup (a visit). */
static void cg_rmdir_nested(const char *dir)
{
    if (strcmp(dir, K.cgroup) != 0)
        rmdir(dir);
}

/* Returns nothing: removes the tree's cgroup (nested ones first; waiting up to 1 s for exiting tasks to let go), then
 * its per-owner parent if that is empty. */
static void cg_remove(void)
{
    if (!K.cgroup || !cgroup_is_ours(K.cgroup))
        return;
    cg_each(cg_rmdir_nested, true);
    double deadline = now_s() + 1.0;
    for (long us = 200; rmdir(K.cgroup) != 0 && errno == EBUSY && now_s() < deadline; us = us < 5000 ? us * 2 : us) {
        struct timespec ts = {0, us * 1000}; /* exiting tasks are still charged to it for a moment */
        nanosleep(&ts, NULL);
    }
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", K.cgroup);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        rmdir(parent); /* EBUSY while another tree of this owner lives */
    }
}
#endif

/* ------------------------------------------------------------------------- */
/* Membership: who is in the tree now */

/* One process seen by this teardown, by identity. */
struct ident {
    int32_t pid;
    uint32_t tgen; /* the teardown it belongs to (older generations are empty slots) */
    uint32_t sgen; /* the last scan that listed it */
    uint8_t sent;  /* SENT_* signals this teardown sent it */
    uint64_t start;
};

#define SENT_TERM 1
#define SENT_STOP 2

static struct ident g_set[SET_SLOTS];
static uint32_t g_tgen, g_sgen;
static int g_nset;
static bool g_incomplete; /* a scan was cut short: never call the tree clean */

static struct pt_proc g_snap[MAX_PROCS]; /* snapshots and walks */
static struct pt_proc g_cur[MAX_PROCS];  /* the live members of the last scan */
static int g_ncur;
static int32_t g_order[MAX_PROCS]; /* snapshot rows by ppid */
static int32_t g_queue[MAX_PROCS];
static char g_env_scratch[ENV_SCRATCH];
static double g_marks_at = -1;

/* The processes a forwarded stop-type signal reached (members of the command's group when it was sent), for the
 * life of the keeper: our own teardown sends them no other stop signal. */
struct stopped_ident {
    int32_t pid;
    uint64_t start;
};
static struct stopped_ident g_stopped[SET_SLOTS];
static int g_nstopped;

/* Returns true if (pid, start) is in g_stopped; with add, inserts it (false then: it was not there, or no room). */
static bool stopped_has(int32_t pid, uint64_t start, bool add)
{
    uint32_t h = ((uint32_t)pid * 2654435761u) & (SET_SLOTS - 1);
    for (int i = 0; i < SET_SLOTS; i++, h = (h + 1) & (SET_SLOTS - 1)) {
        struct stopped_ident *e = &g_stopped[h];
        if (e->pid == 0) {
            if (add && g_nstopped < MAX_PROCS) {
                *e = (struct stopped_ident){.pid = pid, .start = start};
                g_nstopped++;
            }
            return false;
        }
        if (e->pid == pid && e->start == start)
            return true;
    }
    return false;
}

/* Returns the identity set's entry for (pid, start), inserting it (isnew = true), or NULL when the set is full. */
static struct ident *ident_get(int32_t pid, uint64_t start, bool *isnew)
{
    uint32_t h = ((uint32_t)pid * 2654435761u) & (SET_SLOTS - 1);
    for (int i = 0; i < SET_SLOTS; i++, h = (h + 1) & (SET_SLOTS - 1)) {
        struct ident *e = &g_set[h];
        if (e->tgen != g_tgen) {
            if (g_nset >= MAX_PROCS)
                return NULL;
            *e = (struct ident){.pid = pid, .tgen = g_tgen, .sgen = 0, .sent = 0, .start = start};
            g_nset++;
            *isnew = true;
            return e;
        }
        if (e->pid == pid && e->start == start) {
            *isnew = false;
            return e;
        }
    }
    return NULL;
}

/* Returns nothing: adds a live, unprotected row to this scan's members once. */
static void add_member(const struct pt_proc *row)
{
    if (row->state == 'Z' || row->state == 'X' || protected_pid(row->pid))
        return;
    if (g_ncur >= MAX_PROCS) {
        g_incomplete = true;
        return;
    }
    bool isnew = false;
    struct ident *e = ident_get(row->pid, row->start_time, &isnew);
    if (!e) {
        g_incomplete = true; /* still a member: signalled, just not remembered */
    } else {
        if (e->sgen == g_sgen)
            return;
        e->sgen = g_sgen;
    }
    g_cur[g_ncur++] = *row;
}

/* Returns the qsort order of two snapshot rows by ppid. */
static int by_ppid(const void *a, const void *b)
{
    int32_t pa = g_snap[*(const int32_t *)a].ppid, pb = g_snap[*(const int32_t *)b].ppid;
    return (pa > pb) - (pa < pb);
}

/* Returns nothing: adds every process below K.self in the snapshot g_snap[0..n) (ppid links, breadth-first). */
static void add_descendants_of_snapshot(int n)
{
    for (int i = 0; i < n; i++)
        g_order[i] = i;
    qsort(g_order, (size_t)n, sizeof g_order[0], by_ppid);
    int head = 0, tail = 0;
    g_queue[tail++] = K.self;
    while (head < tail) {
        int32_t parent = g_queue[head++];
        int lo = 0, hi = n; /* first row with ppid >= parent */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (g_snap[g_order[mid]].ppid < parent)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (int i = lo; i < n && g_snap[g_order[i]].ppid == parent; i++) {
            const struct pt_proc *row = &g_snap[g_order[i]];
            if (row->pid == K.self || row->pid == parent)
                continue;
            if (tail >= MAX_PROCS) {
                g_incomplete = true;
                return;
            }
            g_queue[tail++] = row->pid;
            add_member(row);
        }
    }
}

/* Returns true if row started after the keeper (the same clock tick: a higher pid, as pids are handed out in order). */
static bool started_after_us(const struct pt_proc *row)
{
    return row->start_time > K.self_start || (row->start_time == K.self_start && row->pid > K.self);
}

/* Returns true if v[0..len) is a PROCTREE_TREE value (1 to TREE_CHAIN ids of 32 lowercase hex digits joined by ':')
 * that names id (marker.carries_tree). */
static bool chain_names(const char *v, size_t len, const char *id)
{
    bool named = false;
    for (size_t at = 0, n = 1; n <= TREE_CHAIN; at += TREE_ID_LEN + 1, n++) {
        if (len < at + TREE_ID_LEN)
            return false;
        for (size_t i = at; i < at + TREE_ID_LEN; i++) {
            if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
                return false;
        }
        named = named || memcmp(v + at, id, TREE_ID_LEN) == 0;
        if (len == at + TREE_ID_LEN)
            return named;
        if (v[at + TREE_ID_LEN] != ':')
            return false;
    }
    return false;
}

/* Returns true if pid's environment carries a PROCTREE_TREE naming our tree, its own or an enclosing one's chain
 * (false if it cannot be read). */
static bool carries_marker(pid_t pid)
{
    char val[TREE_CHAIN * (TREE_ID_LEN + 1) + 1];
    int rc = pt_env_find(pid, TREE_KEY, sizeof TREE_KEY - 1, val, sizeof val, g_env_scratch, sizeof g_env_scratch);
    return rc > 0 && chain_names(val, (size_t)rc, K.tree_id);
}

/* Returns nothing: adds the rows of g_snap[0..n) that carry the tree's marker and started after us, each read again
 * after its environment so that both reads name one process. */
static void add_marked(int n)
{
    for (int i = 0; i < n; i++) {
        const struct pt_proc *row = &g_snap[i];
        if (!started_after_us(row) || row->state == 'Z' || protected_pid(row->pid) || !carries_marker(row->pid))
            continue;
        struct pt_proc again;
        if (pt_proc(row->pid, &again) == 0 && again.start_time == row->start_time)
            add_member(&again);
    }
}

#ifdef __linux__
/* Returns nothing: adds every process of one cgroup.procs (a visit of the tree's cgroups). */
static void add_cgroup_procs(const char *dir)
{
    char buf[8192];
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/cgroup.procs", dir) >= (int)sizeof p)
        return;
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t keep = 0;
    for (;;) {
        ssize_t r = read(fd, buf + keep, sizeof buf - 1 - keep);
        if (r <= 0)
            break;
        size_t len = keep + (size_t)r;
        buf[len] = '\0';
        char *s = buf, *nl;
        while ((nl = memchr(s, '\n', len - (size_t)(s - buf))) != NULL) {
            *nl = '\0';
            long long v;
            struct pt_proc row;
            if (parse_uint(s, INT32_MAX, &v) == 0 && pt_proc((int32_t)v, &row) == 0)
                add_member(&row);
            s = nl + 1;
        }
        keep = len - (size_t)(s - buf);
        memmove(buf, s, keep);
    }
    close(fd);
}
#endif

/* Returns nothing: fills g_cur with the tree's live members (descendants, cgroup, session, marker), confirming an
 * empty answer with a full scan of the table. */
static void scan(bool full)
{
    g_sgen++;
    g_ncur = 0;
#ifdef __linux__
    if (K.cgroup) {
        cg_each(add_cgroup_procs, false);
        /* The cgroup holds the whole tree (nothing leaves it without privilege), and the kernel's populated flag
         * is the proof of "nothing left": no walk, no marker sweep. A populated cgroup whose lists read empty
         * (a race, or an unreadable nested cgroup) falls through to the scans below. */
        if (g_ncur > 0 || !cg_populated())
            return;
    }
#endif
    bool walked = false;
    if (!full && K.mode != M_SESSION) {
        struct pt_proc me;
        if (pt_proc(K.self, &me) == 0) {
            int n = pt_descendants_of(&me, g_snap, MAX_PROCS);
            if (n >= 0) {
                for (int i = 0; i < n; i++)
                    add_member(&g_snap[i]);
                walked = true;
            }
        }
    }
    /* Session mode only: there a daemon that left the session is ours only by its marker. A subreaper's
     * descendants cannot leave its subtree (orphans reparent to it), so the walk is whole. */
    bool marks = K.mode == M_SESSION && K.tree_id[0] && K.self_start &&
                 (full || g_marks_at < 0 || now_s() - g_marks_at >= 0.1); /* every environment: the costly part */
    if (!walked || K.session || marks) {
        int n = pt_snapshot(g_snap, MAX_PROCS);
        if (n == -ENOBUFS) { /* a fork bomb, perhaps: end the rows that fit now, the rest on the next rounds */
            g_incomplete = true;
            n = MAX_PROCS;
        } else if (n < 0) {
            g_incomplete = true;
            n = 0;
            if (!walked) { /* the table could not be read whole: our descendants at least */
                struct pt_proc me;
                int k = pt_proc(K.self, &me) == 0 ? pt_descendants_of(&me, g_snap, MAX_PROCS) : -ESRCH;
                for (int i = 0; i < k; i++)
                    add_member(&g_snap[i]);
                walked = true;
            }
        }
        if (!walked)
            add_descendants_of_snapshot(n);
        for (int i = 0; K.session && i < n; i++) {
            if (g_snap[i].sid == K.session && g_snap[i].pid != K.session)
                add_member(&g_snap[i]);
        }
        if (marks) {
            g_marks_at = now_s();
            add_marked(n);
        }
    }
    /* "Nothing left" ends a teardown: never on a walk alone, nor on a snapshot that skipped the marker. */
    if (g_ncur == 0 && !full && (walked || (K.mode == M_SESSION && K.tree_id[0] && !marks)))
        scan(true);
}

/* Returns true if a full scan finds nothing of the tree (session mode with keep_orphans asks this; a scan that was
 * cut short counts what it found, so that a table that keeps failing to read cannot hold the keeper forever). */
static bool tree_empty(void)
{
    g_tgen++;
    g_nset = 0;
    scan(true);
    return g_ncur == 0;
}

/* ------------------------------------------------------------------------- */
/* Events: signals, the owner, the command */

/* Returns nothing: the owner's hold. Once our own teardown has begun, nothing: its "sweep" line is out already. */
static void hold(void)
{
    if (K.sweeping)
        return;
    K.held = true;
    say("held");
}

/* Returns nothing: queues sig for forward() if it is one we pass on (SIGCONT too in pty mode); takes the owner's
 * hold at once. */
static void queue_signal(int sig)
{
    if (sig == HOLD_SIG) {
        hold();
        return;
    }
    bool pass = K.pty && sig == SIGCONT;
    for (int f = 0; f < NFORWARD; f++)
        pass = pass || sig == FORWARD[f];
    if (pass && K.npending < PENDING_MAX)
        K.pending[K.npending++] = sig;
}

/* Returns nothing: waits up to ms milliseconds for a signal or the owner's exit; queues forwarded signals. */
static void wait_events(int ms)
{
#ifdef __linux__
    struct pollfd fds[2] = {{.fd = K.sig_fd, .events = POLLIN}, {.fd = K.owner_fd, .events = POLLIN}};
    int rc = poll(fds, K.owner_fd >= 0 ? 2 : 1, ms);
    if (rc <= 0 || !(fds[0].revents & POLLIN))
        return;
    struct signalfd_siginfo si[16];
    ssize_t r = read(K.sig_fd, si, sizeof si);
    for (ssize_t i = 0; r > 0 && i < r / (ssize_t)sizeof si[0]; i++)
        queue_signal((int)si[i].ssi_signo);
#else
    struct kevent ev[16];
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    int rc = kevent(K.owner_fd, NULL, 0, ev, 16, &ts);
    for (int i = 0; i < rc; i++) {
        if (ev[i].filter == EVFILT_SIGNAL)
            queue_signal((int)ev[i].ident);
    }
    sigset_t pend;
    if (sigpending(&pend) == 0) { /* consume what is pending, so nothing fires when we unblock one to re-raise it */
        for (int s = 1; s < NSIG; s++) {
            int got;
            if (sigismember(&K.blocked, s) && sigismember(&pend, s) == 1) {
                sigset_t one;
                sigemptyset(&one);
                sigaddset(&one, s);
                sigwait(&one, &got);
            }
        }
    }
#endif
}

/* Returns true while some child of ours is left to reap; records the command's status (and says exit) when reaped. */
static bool reap(void)
{
    /* pty mode: the command's stops too, so that the owner can hand the user's terminal back, as a shell does. */
    int flags = WNOHANG | (K.pty ? WUNTRACED | WCONTINUED : 0);
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, flags);
        if (pid < 0)
            return errno != ECHILD;
        if (pid == 0)
            return true;
        if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
            if (pid == K.cmd && !K.cmd_done) {
                K.cmd_stopped = WIFSTOPPED(status);
                if (K.cmd_stopped)
                    say_stopped(WSTOPSIG(status));
            }
            continue;
        }
        if (pid == K.cmd && !K.cmd_done) {
            K.cmd_done = true;
            K.cmd_status = status;
            say("exit %d", status & 0xFFFF);
        }
    }
}

/* Returns true if sig, forwarded to the command's group, asks its members to stop (protocol.STOPPING). */
static bool stopping(int sig)
{
    return sig == K.stop_sig || sig == SIGTERM || sig == SIGINT || sig == SIGHUP;
}

/* Returns nothing: records the live members of the command's group in g_stopped, before a stop-type signal to it (a
 * process that joins the group between this read and the signal gets it unrecorded: a fork's microseconds). */
static void record_group(void)
{
    int n = pt_snapshot(g_snap, MAX_PROCS);
    if (n == -ENOBUFS)
        n = MAX_PROCS;
    for (int i = 0; i < n; i++) {
        if (g_snap[i].pgid == K.cmd && g_snap[i].state != 'Z' && g_snap[i].state != 'X')
            stopped_has(g_snap[i].pid, g_snap[i].start_time, true);
    }
}

/* Returns nothing: sends queued signals to the command's group (its pid is its group's while unreaped), and SIGCONT
 * after TERM/INT/HUP so that a stopped command cannot wedge its runner. In pty mode a SIGCONT to us continues the
 * command, and first gives the terminal back to its group if it had stopped (as a shell's fg). */
static void forward(void)
{
    for (int i = 0; i < K.npending; i++) {
        int sig = K.pending[i];
        if (K.cmd <= 0 || K.cmd_done)
            continue;
        if (stopping(sig))
            record_group();
        if (sig == SIGCONT && K.cmd_stopped && K.tty_fd >= 0)
            tcsetpgrp(K.tty_fd, K.cmd); /* SIGTTOU is blocked: a background caller may */
        if (killpg(K.cmd, sig) != 0)
            kill(K.cmd, sig);
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
            if (killpg(K.cmd, SIGCONT) != 0)
                kill(K.cmd, SIGCONT);
        }
    }
    K.npending = 0;
}

/* Returns true while our parent is the owner (a child is reparented only once its parent's whole thread group is gone). */
static bool owner_alive(void)
{
    return getppid() == K.owner;
}

/* ------------------------------------------------------------------------- */
/* Teardown */

/* Returns true if sig reached a member of this scan that had not had it yet in this teardown (flag records it).
 * The stop signal (SENT_TERM) is sent at most once per member: never to one a forwarded stop-type signal reached, and
 * none at all while the owner holds the tree (it sent its own); it is followed by SIGCONT, so that a stopped member
 * can act on it. */
static bool signal_new(int sig, uint8_t flag)
{
    bool any = false;
    for (int i = 0; i < g_ncur; i++) {
        bool isnew = false;
        struct ident *e = ident_get(g_cur[i].pid, g_cur[i].start_time, &isnew);
        if (e && (e->sent & flag))
            continue;
        if (e)
            e->sent |= flag;
        if (flag == SENT_TERM && (K.held || stopped_has(g_cur[i].pid, g_cur[i].start_time, false)))
            continue;
        if (send_sig(g_cur[i].pid, g_cur[i].start_time, sig) > 0)
            any = true;
        if (flag == SENT_TERM)
            send_sig(g_cur[i].pid, g_cur[i].start_time, SIGCONT);
    }
    return any;
}

/* Returns nothing: SIGKILLs everything in the tree's cgroup (cgroup.kill, else freeze, kill each member, thaw). */
static void cgroup_kill(void)
{
#ifdef __linux__
    if (!K.cgroup || !cgroup_is_ours(K.cgroup))
        return;
    if (write_file(K.cgroup, "cgroup.kill", "1") != -ENOENT)
        return;
    /* Before 5.14: frozen, nothing in it can fork or exit between the read and the kill. */
    bool frozen = write_file(K.cgroup, "cgroup.freeze", "1") == 0;
    for (int i = 0; frozen && i < 200; i++) {
        char buf[512];
        if (read_file(K.cgroup, "cgroup.events", buf, sizeof buf) < 0 || strstr(buf, "frozen 1"))
            break;
        sleep_ms(5);
    }
    g_sgen++;
    int before = g_ncur;
    cg_each(add_cgroup_procs, false);
    for (int i = before; i < g_ncur; i++)
        send_sig(g_cur[i].pid, g_cur[i].start_time, SIGKILL);
    g_ncur = before;
    if (frozen)
        write_file(K.cgroup, "cgroup.freeze", "0");
#endif
}

/* Returns true if nothing of the tree survived and no scan was cut short: the stop signal + CONT to every member
 * (once: see signal_new), the grace (re-scanning: late joiners get it too), then stop-the-world (SIGSTOP until a scan finds nothing new) and SIGKILL,
 * until a full scan finds nothing. */
static bool teardown(void)
{
    g_tgen++;
    g_nset = 0;
    g_incomplete = false;
    double deadline = now_s() + K.grace;
    scan(false);
    if (K.sweeping && g_ncur > 0)
        say("sweep"); /* before our first signal: the owner must not send these members another */
    signal_new(K.stop_sig, SENT_TERM);
    int pause = 2;
    while (g_ncur > 0) {
        double left = deadline - now_s();
        if (left <= 0)
            break;
        int ms = (int)(left * 1000) + 1;
        wait_events(ms < pause ? ms : pause);
        pause = pause * 2 > 20 ? 20 : pause * 2;
        reap();
        scan(false);
        signal_new(K.stop_sig, SENT_TERM); /* late joiners */
    }
    /* Stop the world: nothing left can fork or move while we collect it; rescan until nothing new is stopped. */
    for (int round = 0; g_ncur > 0 && round < 50; round++) {
        if (!signal_new(SIGSTOP, SENT_STOP))
            break;
        scan(false);
    }
    for (int round = 0; g_ncur > 0 && round < 100; round++) { /* bounded: ~1 s of SIGKILL rounds at most */
        cgroup_kill();
        for (int i = 0; i < g_ncur; i++)
            send_sig(g_cur[i].pid, g_cur[i].start_time, SIGKILL);
        wait_events(5);
        reap();
        scan(false);
    }
    return g_ncur == 0 && !g_incomplete;
}

/* ------------------------------------------------------------------------- */
/* The keeper process */

/* Returns nothing: removes the tree's receipt when it ended cleanly (the owner may have removed it already). */
static void end_receipt(bool clean)
{
    if (!clean || !K.receipts || !K.self_start)
        return;
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%d-%llu.json", K.receipts, (int)K.self, (unsigned long long)K.self_start) <
        (int)sizeof p)
        unlink(p);
}

/* Returns nothing: removes the tree's cgroup (cgroup mode). */
static void cleanup_cgroup(void)
{
#ifdef __linux__
    cg_remove();
#endif
}

/* Returns true if nothing of the tree survived: the teardown, then the reaping and the cgroup's removal. */
static bool end_tree(void)
{
    bool clean = teardown();
    reap();
    cleanup_cgroup();
    return clean;
}

/* Returns the exit code for the command's status; a fatal signal is re-raised on ourselves first, as a shell does. */
static int exit_code(void)
{
    int status = K.cmd_done ? K.cmd_status : 0;
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit rl = {0, 0};
        setrlimit(RLIMIT_CORE, &rl);
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        kill(getpid(), sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        return 128 + sig;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* Returns how many inherited fds (above 2, not close-on-exec) it closed: at most 256, one reading of the fd list. */
static int close_inherited_batch(void)
{
#ifdef __linux__
    DIR *d = opendir("/proc/self/fd");
#else
    DIR *d = opendir("/dev/fd");
#endif
    if (!d)
        return 0;
    int own = dirfd(d);
    int close_list[256], n = 0;
    struct dirent *de;
    while (n < 256 && (de = readdir(d)) != NULL) {
        long long v;
        if (parse_uint(de->d_name, INT_MAX, &v) < 0 || v <= 2 || v == own)
            continue;
        int flags = fcntl((int)v, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC))
            close_list[n++] = (int)v;
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        close(close_list[i]);
    return n;
}

/* Returns nothing: /dev/null on 0-2 and every fd we inherited (not close-on-exec) closed: the command's alone now. */
static void detach_stdio(void)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        for (int i = 0; i < 3; i++)
            dup2(fd, i);
        if (fd > 2)
            close(fd);
    }
    while (close_inherited_batch() == 256) {
    }
}

/* Returns errno once exec failed (it does not return otherwise): exe run as Popen runs it. A name without a slash is
 * looked up in the command's PATH (unset: /bin:/usr/bin, Python's os.defpath), every directory tried in turn; the
 * error is the first that is not ENOENT/ENOTDIR, else the last. Unlike execvp, a file the kernel cannot execute
 * (ENOEXEC: a script without #!) is an error, never handed to /bin/sh. */
static int exec_as_popen(const char *exe)
{
    if (strchr(exe, '/')) {
        execv(exe, K.argv);
        return errno;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin";
    int first = 0, last = ENOENT;
    char buf[PATH_MAX];
    for (const char *dir = path;; dir++) {
        const char *colon = strchr(dir, ':');
        size_t len = colon ? (size_t)(colon - dir) : strlen(dir);
        /* os.path.join("", exe) is exe itself: an empty PATH entry is the working directory */
        int n = snprintf(buf, sizeof buf, "%.*s%s%s", (int)len, dir, len && dir[len - 1] != '/' ? "/" : "", exe);
        if (n < 0 || (size_t)n >= sizeof buf) {
            last = ENAMETOOLONG;
        } else {
            execv(buf, K.argv);
            last = errno;
        }
        if (last != ENOENT && last != ENOTDIR && first == 0)
            first = last;
        if (colon == NULL)
            break;
        dir = colon;
    }
    return first ? first : last;
}

/* Returns nothing (never returns): the child between fork and exec; reports {stage, errno} on fd w if it
 * cannot exec. */
static void exec_child(const char *exe, int w, bool join_cgroup)
{
    int report[2] = {0, 0}; /* stage (0: exec, 1: pty, 2: cgroup), errno */
    setpgid(0, 0);
#ifdef __linux__
    int rc = join_cgroup ? write_file(K.cgroup, "cgroup.procs", "0") : 0; /* "0": the writer itself */
#else
    int rc = join_cgroup ? -EOPNOTSUPP : 0;
#endif
    if (rc < 0) {
        report[0] = 2;
        report[1] = -rc;
    } else if (K.pty && tcsetpgrp(0, getpid()) != 0) {
        /* The terminal's foreground group before the command runs: its first read never meets SIGTTIN. SIGTTOU
         * is blocked (inherited from the keeper), so a background group may make itself the foreground. */
        report[0] = 1;
        report[1] = errno;
    } else {
        if (K.restore_signals) {
            signal(SIGPIPE, SIG_DFL);
            signal(SIGXFSZ, SIG_DFL);
        }
        sigprocmask(SIG_SETMASK, &K.orig_mask, NULL);
        report[1] = exec_as_popen(exe);
    }
    ssize_t r;
    do {
        r = write(w, report, sizeof report);
    } while (r < 0 && errno == EINTR);
    _exit(127);
}

#ifdef __linux__
/* clone3's argument block up to its cgroup field (CLONE_ARGS_SIZE_VER2), declared here for older headers. */
struct pt_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};
#define PT_CLONE_INTO_CGROUP 0x200000000ULL
#ifndef SYS_clone3
#define SYS_clone3 435 /* the same number on every architecture */
#endif
#endif

/* Returns the child's pid in the parent, 0 in the child, or -errno. born_inside: when the command must start in the
 * tree's cgroup, set if the kernel placed the child there at birth (clone3 CLONE_INTO_CGROUP, Linux 5.7+: no
 * migration, so no wait for an RCU grace period); else the child must join the cgroup itself. */
static pid_t fork_child(bool into_cgroup, bool *born_inside)
{
    *born_inside = false;
#ifdef __linux__
    int cfd = into_cgroup ? open(K.cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (cfd >= 0) {
        struct pt_clone_args a;
        memset(&a, 0, sizeof a);
        a.flags = PT_CLONE_INTO_CGROUP;
        a.exit_signal = SIGCHLD;
        a.cgroup = (uint64_t)cfd;
        long pid = syscall(SYS_clone3, &a, sizeof a);
        int e = errno;
        if (pid == 0) {
            *born_inside = true;
            return 0;
        }
        close(cfd);
        if (pid > 0) {
            *born_inside = true;
            return (pid_t)pid;
        }
        if (e != ENOSYS && e != E2BIG && e != EINVAL && e != EPERM && e != EOPNOTSUPP)
            return -e; /* a real failure (EAGAIN: out of pids), not a kernel without clone3 */
    }
#else
    (void)into_cgroup;
#endif
    pid_t pid = fork();
    return pid < 0 ? -errno : pid;
}

/* Returns 0 once the command runs (K.cmd set), or -errno (nothing is left running; *stage says which step failed):
 * fork (clone3 into the tree's cgroup where it must start there and can), then exec_child; a close-on-exec pipe
 * carries the child's errno if a step before exec, or exec itself, fails. */
static int start_command_forked(const char *exe, const char **stage)
{
    int p[2];
    if (pipe(p) != 0)
        return -errno;
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    bool into_cgroup = K.cgroup && !K.in_cgroup;
    bool born_inside = false;
    pid_t pid = fork_child(into_cgroup, &born_inside);
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        *stage = into_cgroup ? "cgroup" : "exec";
        return pid;
    }
    if (pid == 0)
        exec_child(exe, p[1], into_cgroup && !born_inside);
    close(p[1]);
    setpgid(pid, pid); /* either side may run first: both set it (EACCES once it has exec'd: fine) */
    int report[2] = {0, 0};
    ssize_t r;
    do {
        r = read(p[0], report, sizeof report);
    } while (r < 0 && errno == EINTR);
    close(p[0]);
    if (r == (ssize_t)sizeof report) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        *stage = report[0] == 1 ? "pty" : report[0] == 2 ? "cgroup" : "exec";
        return -(report[1] ? report[1] : ECHILD);
    }
    K.cmd = pid;
    return 0;
}

/* Returns 0 once the command runs (K.cmd set), or -errno (nothing was started; *stage names the step for the err
 * line). Always fork + exec, never posix_spawn: glibc's posix_spawn leaves its internal signals (32, 33) ignored in
 * the child of a static program, and the command must start with nothing ignored that Popen's child would not. */
static int start_command(const char **stage)
{
    const char *exe = K.exe;
    *stage = "exec";
    if (exe[0] == '\0')
        return -EACCES; /* as Popen: PATH's directories joined with "" are directories */
    return start_command_forked(exe, stage);
}

/* Returns 0 once the keeper's signals are blocked and readable (signalfd or kqueue) and the owner is watched, or
 * -errno. */
static int setup_events(void)
{
    sigemptyset(&K.blocked);
    for (int i = 0; i < NFORWARD; i++)
        sigaddset(&K.blocked, FORWARD[i]);
    sigaddset(&K.blocked, SIGCHLD);
    sigaddset(&K.blocked, HOLD_SIG);
    sigaddset(&K.blocked, PDEATH_SIG);
    sigaddset(&K.blocked, SIGPIPE);
    if (K.pty) { /* SIGCONT: the owner's "fg"; SIGTTOU: tcsetpgrp from our background group must not stop us */
        sigaddset(&K.blocked, SIGCONT);
        sigaddset(&K.blocked, SIGTTOU);
    }
    if (sigprocmask(SIG_BLOCK, &K.blocked, &K.orig_mask) != 0)
        return -errno;
    /* An ignored SIGCHLD would reap our children for us, and lose the command's status. */
    struct sigaction sa;
    if (sigaction(SIGCHLD, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
        signal(SIGCHLD, SIG_DFL);
    if (!K.restore_signals) { /* what a Python owner's interpreter ignores, and Popen leaves ignored without restore */
        signal(SIGPIPE, SIG_IGN);
        signal(SIGXFSZ, SIG_IGN);
    }
#ifdef __linux__
    K.sig_fd = signalfd(-1, &K.blocked, SFD_CLOEXEC | SFD_NONBLOCK);
    if (K.sig_fd < 0)
        return -errno;
    if (K.use_pidfd)
        K.owner_fd = (int)syscall(SYS_pidfd_open, K.owner, 0);
    if (K.owner_fd < 0) {
        K.owner_fd = -1;
        prctl(PR_SET_PDEATHSIG, PDEATH_SIG); /* a wakeup only: it fires on the spawning thread's exit */
    }
#else
    K.owner_fd = kqueue();
    if (K.owner_fd < 0)
        return -errno;
    fcntl(K.owner_fd, F_SETFD, FD_CLOEXEC);
    struct kevent ev[NFORWARD + 4];
    int n = 0;
    for (int i = 0; i < NFORWARD; i++)
        EV_SET(&ev[n++], FORWARD[i], EVFILT_SIGNAL, EV_ADD, 0, 0, NULL);
    EV_SET(&ev[n++], SIGCHLD, EVFILT_SIGNAL, EV_ADD, 0, 0, NULL);
    EV_SET(&ev[n++], HOLD_SIG, EVFILT_SIGNAL, EV_ADD, 0, 0, NULL);
    if (K.pty)
        EV_SET(&ev[n++], SIGCONT, EVFILT_SIGNAL, EV_ADD, 0, 0, NULL);
    if (kevent(K.owner_fd, ev, n, NULL, 0, NULL) != 0)
        return -errno;
    EV_SET(&ev[0], K.owner, EVFILT_PROC, EV_ADD | EV_ONESHOT, NOTE_EXIT, 0, NULL);
    kevent(K.owner_fd, ev, 1, NULL, 0, NULL); /* ESRCH: it is gone already, and getppid() tells */
#endif
    return 0;
}

/* Returns nothing: K.tree_id set in session mode from our PROCTREE_TREE (its first id: ours; those after it are
 * enclosing trees'), else left "". */
static void read_tree_id(void)
{
    const char *v = getenv(TREE_KEY);
    if (K.mode != M_SESSION || !v || !chain_names(v, strlen(v), v))
        return;
    memcpy(K.tree_id, v, TREE_ID_LEN);
    K.tree_id[TREE_ID_LEN] = '\0';
}

/* Returns nothing: K.self_start read from the core (0 if unreadable: then no receipt and no marker is trusted). */
static void read_self_start(void)
{
    struct pt_proc me;
    for (int i = 0; i < 20; i++) {
        int rc = pt_proc(K.self, &me);
        if (rc == 0) {
            K.self_start = me.start_time;
            return;
        }
        if (rc != -EBUSY)
            return;
        sleep_ms(1);
    }
}

/* Returns the start time of the process pid in the core's units, 0 if it cannot be read. */
static uint64_t start_of(pid_t pid)
{
    struct pt_proc row;
    for (int i = 0; i < 20; i++) {
        int rc = pt_proc(pid, &row);
        if (rc == 0)
            return row.start_time;
        if (rc != -EBUSY)
            return 0;
        sleep_ms(1);
    }
    return 0;
}

/* Returns the keeper's exit status once the command and its tree are done. */
static int run(void)
{
    int rc = setup_events();
    if (rc < 0) {
        say("err %d owner", -rc);
        if (!owner_alive()) /* nobody else will remove the cgroup it made */
            cleanup_cgroup();
        return 1;
    }
    if (!owner_alive()) { /* it died before we could watch it: nobody else will remove the cgroup it made */
        say("err 0 owner");
        cleanup_cgroup();
        return 1;
    }
    if (K.go_fd >= 0) { /* cgroup mode: the owner moves us into the cgroup, then says go */
        char go = 0;
        ssize_t r;
        do {
            r = read(K.go_fd, &go, 1);
        } while (r < 0 && errno == EINTR);
        close(K.go_fd);
        K.go_fd = -1;
        if (r != 1 || go != '1') {
            say("err %d cgroup", EPERM);
#ifdef __linux__
            if (!owner_alive()) { /* it died mid-spawn: nobody else will remove the cgroup */
                cg_leave();
                cleanup_cgroup();
            }
#endif
            return 126;
        }
        K.in_cgroup = true;
    }
    const char *stage = "exec";
    rc = start_command(&stage);
#ifdef __linux__
    if (K.in_cgroup)
        cg_leave(); /* before "ok": once spawn() returns, the cgroup holds the tree alone */
#endif
    if (rc < 0)
        say("err %d %s", -rc, stage);
    else
        say("ok %d %llu", (int)K.cmd, (unsigned long long)start_of(K.cmd));
    detach_stdio(); /* the command owns our stdio now: the owner sees EOF when its side closes */
    if (rc < 0) {
        cleanup_cgroup();
        return 127;
    }
    read_self_start();
    for (;;) {
        bool children = reap();
#ifdef __linux__
        if (K.cgroup)
            children = children || cg_populated();
#endif
        forward();
        if (!owner_alive()) {
            K.status_fd = -1;
            end_receipt(end_tree());
            return exit_code();
        }
        bool session_keep = K.mode == M_SESSION && K.keep_orphans;
        if (K.cmd_done && session_keep && !children) {
            children = !tree_empty();           /* what left for init may still run: we stay while it does */
            if (!children && !K.looked_again) { /* a daemon may be a few forks from existing: one more look */
                K.looked_again = true;
                children = true;
            }
        }
        if (K.cmd_done && !K.keep_orphans && !K.held)
            wait_events(0); /* a hold the owner sent before its stop signal ended the command counts */
        /* Held in session mode with a pty: the command's orphans went to init, and our exit would hang up the
         * terminal under them while they drain: we stay until the owner's teardown has ended them. */
        bool held_session = K.held && K.mode == M_SESSION && K.pty;
        if (K.cmd_done && held_session && !children)
            children = !tree_empty();
        bool leave = K.keep_orphans || K.held; /* what runs on is not ours to end here */
        if (K.cmd_done && (!leave || !children)) {
            bool clean = !K.held; /* held: the owner's teardown knows what survived, we do not */
            if (!leave && (children || K.mode == M_SESSION)) {
                K.sweeping = true; /* an owner's hold from now on waits for our done */
                clean = end_tree();
            }
            cleanup_cgroup();
            end_receipt(clean);
            say("done %d", clean ? 1 : 0); /* the last line: without it the owner knows we were killed */
            return exit_code();
        }
        /* Without an owner watch getppid() is polled; so are orphans whose exit sends us nothing. */
        bool polling = K.owner_fd < 0 || (K.cmd_done && (K.cgroup || session_keep || held_session));
        wait_events(K.cmd_done && held_session ? 20 : polling ? 250 : 30000); /* held: the owner is ending it now */
    }
}

/* Returns the keeper's exit status: 2 for a malformed command line (the reason on stderr), else run()'s. */
int main(int argc, char **argv)
{
    int rc = parse_args(argc, argv);
    if (rc != 0)
        return rc;
    int fl = fcntl(K.status_fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) {
        fprintf(stderr, "proctree keeper: status fd %d is not open for writing: %s\n", K.status_fd,
                strerror(fl < 0 ? errno : EBADF));
        return 2;
    }
    if (K.status_fd <= 2) { /* stdio goes to the command (then /dev/null): keep the status pipe clear of it */
        int fd = fcntl(K.status_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            return refuse("cannot move the status fd: %s", strerror(errno));
        K.status_fd = fd;
    }
    fcntl(K.status_fd, F_SETFD, FD_CLOEXEC);
    fcntl(K.status_fd, F_SETFL, fl | O_NONBLOCK); /* a full status pipe never blocks the keeper */
    if (K.go_fd >= 0) {
        if (K.go_fd == K.status_fd || fcntl(K.go_fd, F_SETFD, FD_CLOEXEC) != 0) {
            say("err %d cgroup", EBADF);
            return 126;
        }
    }
    K.self = getpid();
    const char *nopidfd = getenv("PROCTREE_NO_PIDFD");
    K.use_pidfd = !(nopidfd && strcmp(nopidfd, "1") == 0);
    /* Leave the caller's session and terminal; spawn() already did (Popen start_new_session). */
    if (setsid() < 0)
        setpgid(0, 0);
    /* pty mode: our stdin, the slave the owner opened, becomes our controlling terminal (we lead a fresh session),
     * and a close-on-exec copy outlives detach_stdio() for tcsetpgrp. */
    if (K.pty) {
        if (!isatty(0)) {
            say("err %d pty", ENOTTY);
            return 126;
        }
        if (ioctl(0, TIOCSCTTY, 0) != 0) {
            say("err %d pty", errno);
            return 126;
        }
        K.tty_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
        if (K.tty_fd < 0) {
            say("err %d pty", errno);
            return 126;
        }
    }
    /* Session mode, where nothing else holds the tree: our session's members too (when we lead one). */
    K.session = K.mode == M_SESSION && getsid(0) == K.self ? K.self : 0;
    read_tree_id();
#ifdef __linux__
    if (K.cgroup && !cgroup_is_ours(K.cgroup)) {
        say("err %d cgroup", EINVAL);
        return 126;
    }
    if (K.mode == M_SUBREAPER && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        say("err %d subreaper", errno);
        return 126;
    }
#else
    if (K.mode != M_SESSION) {
        say("err %d %s", EOPNOTSUPP, K.mode == M_CGROUP ? "cgroup" : "subreaper");
        return 126;
    }
#endif
    return run();
}
