/* What the keeper's files share: its state, its limits and their functions.
 */
#ifndef PROCTREE_KEEPER_H
#define PROCTREE_KEEPER_H

/* Feature macros before any system header: the shared files use POSIX and BSD calls that -std=c11 hides. */
#if defined(__linux__)
#define _GNU_SOURCE
#elif defined(__APPLE__)
#define _DARWIN_C_SOURCE
#endif
#include "proctree.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "protocol_gen.h" /* the protocol's constants, generated from protocol.py */

#define MAX_PROCS    16384 /* members one scan holds */
#define SET_SLOTS    32768 /* identity set slots: a power of two, twice MAX_PROCS */
#define MAX_CG_DIRS  4096  /* nested cgroups visited at most */
#define MAX_CG_DEPTH 32
#define TREE_KEY     "PROCTREE_TREE"
#define TREE_ID_LEN  32
#define TREE_CHAIN   7 /* ids in one PROCTREE_TREE value, innermost first (marker.MAX_TREE_CHAIN) */
#define PENDING_MAX  64

/* What the owner told us (protocol.KeeperArgs), and the keeper's own state. */
struct keeper {
    int status_fd;
    enum mode mode;
    pid_t owner;
    double grace;
    bool keep_orphans, restore_signals, pty;
    int stop_sig;      /* what each member gets, once, when we end the tree */
    bool held;         /* the owner ends the tree: we signal no member on our own */
    bool sweeping;     /* our own teardown has begun (we said "sweep") */
    bool looked_again; /* session mode with keep_orphans: the tree looked empty once already */
    const char *cgroup, *exe, *receipts;
    char **argv;
    char tree_id[TREE_ID_LEN + 1]; /* session mode: our PROCTREE_TREE, else "" */
    pid_t self, session;           /* session: our sid in session mode when we lead one, else 0 */
    uint64_t self_start;           /* 0 until read */
    pid_t cmd;                     /* 0 until started */
    bool cmd_done;
    bool cmd_alone; /* session mode: no process was started after the command, up to its exit (nothing to sweep) */
    int cmd_status;
    bool cmd_stopped; /* pty mode: the command's last reported state was stopped */
    int tty_fd;       /* pty mode: the slave, our controlling terminal (for tcsetpgrp), else -1 */
    int stop_lines;   /* "stopped" lines written (macOS: their budget) */
    bool use_pidfd;
    int owner_fd; /* Linux: owner pidfd; macOS: the kqueue; -1: poll getppid() */
    int sig_fd;   /* Linux: the signalfd */
    sigset_t orig_mask, blocked;
    bool caller_mask_given;   /* spawn() passed its thread's mask (CALLER_MASK_ENV): the command's, not our own */
    uint64_t caller_mask;     /* bit n-1 for signal n */
    int pending[PENDING_MAX]; /* forwarded signals not yet sent, in order */
    int npending;
};
extern struct keeper K;

extern const int FORWARD[NFORWARD]; /* FORWARD_SIGNALS */
#define PDEATH_SIG SIGALRM
/* spawn() blocks every signal around the keeper's fork (so that none sent to the owner's group ends the keeper
 * before it leaves it) and passes its thread's own mask here, hex: the command's. Taken out of the environment. */
#define CALLER_MASK_ENV "PROCTREE_KEEPER_SIGMASK"
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
#define SENT_KILL 4

/* The membership state members.c keeps and teardown.c reads. */
extern struct ident g_set[SET_SLOTS];
extern uint32_t g_tgen, g_sgen;
extern int g_nset;
extern int g_nkilled; /* members this teardown had to SIGKILL (the grace was not enough) */
extern bool g_incomplete;
extern struct pt_proc g_snap[MAX_PROCS];
extern struct pt_proc g_cur[MAX_PROCS];
extern int g_ncur;

/* status.c */
double now_s(void);
void sleep_ms(int ms);
void say(const char *fmt, ...);
void say_stopped(int sig);

/* args.c */
int parse_uint(const char *s, long long max, long long *out);
int parse_seconds(const char *s, double *out);
int refuse(const char *fmt, const char *what);
int parse_args(int argc, char **argv);

/* send.c */
bool protected_pid(pid_t pid);
int send_sig(pid_t pid, uint64_t start, int sig);

/* members.c */
bool stopped_has(int32_t pid, uint64_t start, bool add);
struct ident *ident_get(int32_t pid, uint64_t start, bool *isnew);
void add_member(const struct pt_proc *row);
bool chain_names(const char *v, size_t len, const char *id);
void scan(bool full);
bool tree_empty(void);

/* events.c */
void queue_signal(int sig);
bool reap(void);

/* Returns true while some child of ours is left to reap: hands each change waitpid(-1, flags) reports now to
 * seen(pid, status), until none is ready (the keeper's reap and proctree-init's, each with its own rules). */
static inline bool reap_each(int flags, void (*seen)(pid_t pid, int status))
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, flags);
        if (pid < 0)
            return errno != ECHILD;
        if (pid == 0)
            return true;
        seen(pid, status);
    }
}
void forward(void);
bool owner_alive(void);
int setup_events(void);

/* teardown.c */
bool teardown(void);
void end_receipt(bool clean);
void cleanup_cgroup(void);
bool end_tree(void);
int exit_code(void);

/* start.c */
void detach_stdio(void);
void close_inherited(void);
int start_command(const char **stage);
void read_tree_id(void);
void read_self_start(void);
uint64_t start_of(pid_t pid);

/* The platform's pieces: keeper_linux.c and events_linux.c, or keeper_macos.c and events_macos.c. */
extern const char FD_DIR[]; /* the directory listing our own open fds */
extern char env_scratch[];  /* the scratch a process's environment is read through */
extern const size_t ENV_SCRATCH_SIZE;
int pidfd_of(pid_t pid);
int pidfd_signal(int fd, int sig);
int status_room(int fd);
pid_t fork_child(bool into_cgroup, bool *born_inside);
bool exited_last(pid_t pid);
int enter_mode(const char **stage);
int events_open(void);
void events_drop_pending(void);
void wait_events(int ms);

/* cgroup v2: cgroup_linux.c, or keeper_macos.c's stand-ins (there K.cgroup is always NULL). */
typedef void (*cg_visit)(const char *dir);
bool cgroup_is_ours(const char *path);
int write_file(const char *dir, const char *file, const char *text);
int read_file(const char *dir, const char *file, char *buf, size_t cap);
void cg_each(cg_visit visit, bool post);
void add_cgroup_procs(const char *dir);
bool cg_scan(void);
bool cg_populated(void);
void cg_remove(void);
int cg_join_self(void);
void cgroup_kill(void);

#endif
