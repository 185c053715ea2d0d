/* proctree-init's one line on stderr about what CMD left running (run.py leftovers_line's words).
 */
#include "init.h"

#include <stdio.h>
#include <string.h>

#define LISTED 8   /* names (or name groups) written at most */
#define NAMES  256 /* distinct names counted; a name past them is counted in g_unnamed */

struct left {
    pid_t pid; /* the first one seen of this name */
    char name[PT_NAME_MAX];
    int count;
};
static struct left g_names[NAMES];  /* by name, first seen first: every one counted, however many */
static struct left g_first[LISTED]; /* the first processes seen, for -v's "name (pid)" */
static int g_nnames, g_nfirst, g_unnamed, g_total;

/* Returns nothing: name, a process's own, made printable ('?' for a control character: no terminal escapes). */
static void printable(char *name)
{
    for (char *c = name; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    }
}

/* Returns nothing: p counted under its name (a new name while fewer than NAMES are known). */
static void count_name(const struct left *p)
{
    for (int j = 0; j < g_nnames; j++) {
        if (strcmp(g_names[j].name, p->name) == 0) {
            g_names[j].count++;
            return;
        }
    }
    if (g_nnames < NAMES)
        g_names[g_nnames++] = *p;
    else
        g_unnamed++;
}

/* Returns nothing: remembers who is in the tree now (names, counts, the first pids), before the teardown ends them. */
void note_leftovers(void)
{
    g_tgen++; /* a scan of its own: the teardown starts afresh */
    g_nset = 0;
    scan(false);
    g_nnames = g_nfirst = g_unnamed = 0;
    g_total = g_ncur;
    for (int i = 0; i < g_ncur; i++) {
        struct left p = {.pid = g_cur[i].pid, .count = 1};
        snprintf(p.name, sizeof p.name, "%s", g_cur[i].name);
        printable(p.name);
        if (g_nfirst < LISTED)
            g_first[g_nfirst++] = p;
        count_name(&p);
    }
}

/* Returns nothing: one line on stderr saying how many processes CMD left were ended, and who ("sleep x2", or with
 * verbose "sleep (123)"); with verbose, also when nothing was left. */
void say_leftovers(int ended, bool clean)
{
    if (ended == 0 && clean) {
        if (R.verbosity > 0)
            fprintf(stderr, "%s: CMD left nothing running\n", R.prog);
        return;
    }
    bool verbose = R.verbosity > 0;
    int n = verbose ? g_total : g_nnames + (g_unnamed > 0);
    fprintf(stderr, "%s: ended %d process%s CMD left running", R.prog, ended, ended == 1 ? "" : "es");
    for (int i = 0; i < n && i < LISTED; i++) {
        const struct left *p = verbose ? &g_first[i] : &g_names[i];
        fputs(i == 0 ? ": " : ", ", stderr);
        if (verbose)
            fprintf(stderr, "%s (%d)", p->name, (int)p->pid);
        else if (p->count > 1)
            fprintf(stderr, "%s x%d", p->name, p->count);
        else
            fputs(p->name, stderr);
    }
    if (n > LISTED)
        fprintf(stderr, " and %d more", n - LISTED);
    if (g_nkilled > 0)
        fprintf(stderr, " (%d needed SIGKILL)", g_nkilled);
    fputs(clean ? "\n" : "; some SURVIVED\n", stderr);
}
