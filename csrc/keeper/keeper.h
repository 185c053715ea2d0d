/* What the keeper's files share: its state, its limits and their functions.
 */
#ifndef PROCTREE_KEEPER_H
#define PROCTREE_KEEPER_H

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
struct keeper {
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
};
extern struct keeper K;

#define NFORWARD 7
extern const int FORWARD[NFORWARD]; /* the signals passed on to the command's group (protocol.FORWARD) */
#define PDEATH_SIG SIGALRM
/* The owner's "I end this tree" (protocol.HOLD_SIGNAL): never forwarded, ignored by default elsewhere. */
#define HOLD_SIG SIGURG
/* Room kept in the status pipe for the exit line: a "stopped" line that would eat into it is dropped. */
#define EXIT_RESERVE 256
/* Where the free room cannot be read (macOS), at most this many "stopped" lines: ~3 KB, inside the smallest pipe. */
#define STOP_LINES_MAX 256

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

/* The membership state members.c keeps and teardown.c reads. */
extern struct ident g_set[SET_SLOTS];
extern uint32_t g_tgen, g_sgen;
extern int g_nset;
extern bool g_incomplete;
extern struct pt_proc g_snap[MAX_PROCS];
extern struct pt_proc g_cur[MAX_PROCS];
extern int g_ncur;

typedef void (*cg_visit)(const char *dir);

int parse_uint(const char *s, long long max, long long *out);
int refuse(const char *fmt, const char *what);
int parse_args(int argc, char **argv);
double now_s(void);
void sleep_ms(int ms);
void say(const char *fmt, ...);
void say_stopped(int sig);
bool protected_pid(pid_t pid);
int send_sig(pid_t pid, uint64_t start, int sig);
bool cgroup_is_ours(const char *path);
int write_file(const char *dir, const char *file, const char *text);
int read_file(const char *dir, const char *file, char *buf, size_t cap);
void cg_each(cg_visit visit, bool post);
bool cg_populated(void);
void cg_leave(void);
void cg_remove(void);
void add_cgroup_procs(const char *dir);
bool stopped_has(int32_t pid, uint64_t start, bool add);
struct ident *ident_get(int32_t pid, uint64_t start, bool *isnew);
void add_member(const struct pt_proc *row);
bool chain_names(const char *v, size_t len, const char *id);
void scan(bool full);
bool tree_empty(void);
void hold(void);
void wait_events(int ms);
bool reap(void);
void forward(void);
bool owner_alive(void);
int setup_events(void);
bool teardown(void);
void end_receipt(bool clean);
void cleanup_cgroup(void);
bool end_tree(void);
int exit_code(void);
void detach_stdio(void);
int start_command(const char **stage);
void read_tree_id(void);
void read_self_start(void);
uint64_t start_of(pid_t pid);
int run(void);

#endif
