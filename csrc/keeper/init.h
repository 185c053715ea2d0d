/* What proctree-init's files share (init*.c): the runner's own state beside the keeper's K, and their functions.
 */
#ifndef PROCTREE_INIT_H
#define PROCTREE_INIT_H

#include "keeper.h"

/* --contain's words: auto, then protocol_gen.h's modes in their order (CONTAIN_<mode> is M_<mode> + 1). */
enum contain {
    CONTAIN_AUTO,
    CONTAIN_CGROUP = M_CGROUP + 1,
    CONTAIN_SUBREAPER = M_SUBREAPER + 1,
    CONTAIN_SESSION = M_SESSION + 1
};

/* The runner's own state: what the keeper's K has no field for. */
struct runner {
    const char *prog; /* the program as invoked (argv[0]'s basename): every message names it */
    enum contain contain;
    bool group;            /* -g: every forwarded signal to CMD's process group, not only the stop-type ones */
    int verbosity;         /* -1: -q, 0, else the number of -v (or TINI_VERBOSITY - 1) */
    bool warn_reap;        /* -w: a line for each orphan reaped (tini's) */
    uint32_t expect[8];    /* -e CODE: CMD's exit status CODE is returned as 0 (tini's), a bit per status */
    bool pid1;             /* getpid() == 1: every orphan of the namespace is ours to reap */
    bool tty;              /* we let go of our terminal (stdin's) for the keeper half to give CMD's session */
    int pdeath;            /* -p SIG: the signal we get (and pass on) when our parent dies, or 0 */
    uint64_t keeper_start; /* the runner: its keeper half's start time (its receipt's name) */
};
extern struct runner R;

/* The usage line after the program's name. */
#define USAGE                                                                                                          \
    "[-h] [--version] [-l] [-s] [-g] [-w] [-v...|-q] [-e CODE]... [-p SIG] [--contain MODE] [--grace S] "              \
    "[--stop-signal SIG] -- CMD ARGS..."

/* build_keeper.py passes the package's version. */
#ifndef PROCTREE_VERSION
#define PROCTREE_VERSION "unknown"
#endif

/* init_help.c */
void print_help(void);
void print_license(void);

/* init_args.c */
int usage_error(const char *fmt, const char *what);
int parse_signal_name(const char *s);
int parse_runner_args(int argc, char **argv);

/* init_cgroup.c */
int make_tree_cgroup(void);

/* init_events.c: also the keeper.h functions teardown.c calls (queue_signal, reap, forward), with the runner's rules */
int open_runner_events(void);
void every_signal(sigset_t *set);
bool forwardable(int sig);
bool synchronous(int sig);
void note_reaped(pid_t pid);

/* init_receipt.c */
void choose_receipt_dir(void);
int write_receipt(void);
void remove_receipt_of(pid_t pid, uint64_t start);

/* init_report.c */
void note_leftovers(void);
void say_leftovers(int ended, bool clean);

/* init_keep.c */
int keep_tree(void);

#endif
