/* proctree-init's one line on stderr about what CMD left running (run.py leftovers_line's words).
 */
#include "init.h"

#include <stdio.h>
#include <string.h>

#define LISTED 8 /* names (or name groups) written at most */

static struct {
    pid_t pid;
    char name[PT_NAME_MAX];
    int count;
} g_left[MAX_PROCS > 256 ? 256 : MAX_PROCS];
static int g_nleft;

/* Returns nothing: remembers who is in the tree now (names and pids), before the teardown ends them. */
void note_leftovers(void)
{
    g_tgen++; /* a scan of its own: the teardown starts afresh */
    g_nset = 0;
    scan(false);
    g_nleft = 0;
    for (int i = 0; i < g_ncur && g_nleft < (int)(sizeof g_left / sizeof g_left[0]); i++) {
        g_left[g_nleft].pid = g_cur[i].pid;
        g_left[g_nleft].count = 1;
        snprintf(g_left[g_nleft].name, sizeof g_left[0].name, "%s", g_cur[i].name);
        for (char *c = g_left[g_nleft].name; *c; c++) {
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?'; /* a process names itself: no terminal escapes through us */
        }
        g_nleft++;
    }
}

/* Returns nothing: one line on stderr saying how many processes CMD left were ended, and who ("sleep x2", or with
 * verbose "sleep (123)"); with verbose, also when nothing was left. */
void say_leftovers(int ended, bool clean)
{
    if (ended == 0 && clean) {
        if (R.verbosity > 0)
            fputs("proctree run: CMD left nothing running\n", stderr);
        return;
    }
    int groups = 0;
    for (int i = 0; i < g_nleft && R.verbosity <= 0; i++) { /* counts by name, first seen first */
        int j = 0;
        while (j < groups && strcmp(g_left[j].name, g_left[i].name) != 0)
            j++;
        if (j < groups) {
            g_left[j].count++;
        } else {
            g_left[groups] = g_left[i];
            g_left[groups++].count = 1;
        }
    }
    int n = R.verbosity > 0 ? g_nleft : groups;
    fprintf(stderr, "proctree run: ended %d process%s CMD left running", ended, ended == 1 ? "" : "es");
    for (int i = 0; i < n && i < LISTED; i++) {
        fputs(i == 0 ? ": " : ", ", stderr);
        if (R.verbosity > 0)
            fprintf(stderr, "%s (%d)", g_left[i].name, (int)g_left[i].pid);
        else if (g_left[i].count > 1)
            fprintf(stderr, "%s x%d", g_left[i].name, g_left[i].count);
        else
            fputs(g_left[i].name, stderr);
    }
    if (n > LISTED)
        fprintf(stderr, " and %d more", n - LISTED);
    fputs(clean ? "\n" : "; some SURVIVED\n", stderr);
}
