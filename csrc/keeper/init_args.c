/* proctree-init's command line: `[--contain MODE] [--grace S] [--stop-signal SIG] [-g] [-p SIG] [-q|-v] -- CMD...`.
 *
 * The options are `proctree run`'s (proctree/cli/run.py) that need no Python: the Python command hands over to this
 * program when only these were given, so their spelling and their refusals (exit 2, one line) must match it.
 */
#include "init.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct runner R = {.contain = CONTAIN_AUTO};

static const struct {
    const char *name;
    int sig;
} SIGNAMES[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT},     {"ILL", SIGILL},   {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},       {"KILL", SIGKILL}, {"USR1", SIGUSR1},
    {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},   {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},
    {"CHLD", SIGCHLD}, {"CONT", SIGCONT},   {"STOP", SIGSTOP},     {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU}, {"URG", SIGURG},     {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM},
    {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},         {"PWR", SIGPWR},   {"SYS", SIGSYS},
    {"IOT", SIGABRT},  {"POLL", SIGIO},     {"STKFLT", SIGSTKFLT},
};

/* Returns REFUSED (2: bad input) after one line on stderr: "proctree run: <what>". */
int usage_error(const char *fmt, const char *what)
{
    fputs("proctree run: ", stderr);
    fprintf(stderr, fmt, what);
    fputs(" (usage: proctree run [--contain MODE] [--grace S] [--stop-signal SIG] [-g] [-p SIG] [-q|-v] -- CMD "
          "ARGS...)\n",
          stderr);
    return REFUSED;
}

/* Returns the signal named by s (SIGTERM, TERM, term, 15, RTMIN+3), or -EINVAL. */
int parse_signal_name(const char *s)
{
    long long v;
    if (parse_uint(s, SIGRTMAX, &v) == 0)
        return v > 0 ? (int)v : -EINVAL;
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof SIGNAMES / sizeof SIGNAMES[0]; i++) {
        if (strcasecmp(s, SIGNAMES[i].name) == 0)
            return SIGNAMES[i].sig;
    }
    if (strncasecmp(s, "RTMIN", 5) == 0 || strncasecmp(s, "RTMAX", 5) == 0) {
        bool max = (s[3] | 0x20) == 'a';
        long long off = 0;
        if (s[5] != '\0' && ((s[5] != '+' && s[5] != '-') || parse_uint(s + 6, 64, &off) < 0))
            return -EINVAL;
        int sig = max ? SIGRTMAX - (int)off : SIGRTMIN + (int)off;
        if ((max && s[5] == '+') || (!max && s[5] == '-') || sig < SIGRTMIN || sig > SIGRTMAX)
            return -EINVAL;
        return sig;
    }
    return -EINVAL;
}

/* Returns 0 with *out the containment named s, or -EINVAL. */
static int parse_contain(const char *s, enum contain *out)
{
    static const char *const NAMES[] = {"auto", MODE_NAMES}; /* enum contain: auto, then enum mode's order */
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, NAMES[i]) == 0) {
            *out = (enum contain)i;
            return 0;
        }
    }
    return -EINVAL;
}

/* Returns 0 with R and K filled from the command line, 1 when --help was answered, or REFUSED after a line on stderr. */
int parse_runner_args(int argc, char **argv)
{
    int i = 1;
    bool quiet = false, verbose = false;
    K.grace = 2.0;
    K.stop_sig = SIGTERM;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        const char *eq = strchr(a, '=');
        char name[32];
        if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof name) { /* --grace=3 */
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            a = name;
            val = eq + 1;
        } else if (eq == NULL || strncmp(a, "--", 2) != 0) {
            eq = NULL;
        }
        bool pdeath = strcmp(a, "-p") == 0 || strcmp(a, "--parent-death-signal") == 0;
        bool takes =
            strcmp(a, "--contain") == 0 || strcmp(a, "--grace") == 0 || strcmp(a, "--stop-signal") == 0 || pdeath;
        if (!takes && eq != NULL)
            return usage_error("argument %s: ignored explicit argument", a); /* --group=1, as argparse says */
        if (takes && val == NULL)
            return usage_error("argument %s: expected one argument", a);
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage_error("%s", "runs CMD as a contained tree in the foreground");
            return 1;
        } else if (strcmp(a, "--contain") == 0) {
            if (parse_contain(val, &R.contain) < 0)
                return usage_error("argument --contain: unknown containment mode '%s'", val);
        } else if (strcmp(a, "--grace") == 0) {
            if (parse_seconds(val, &K.grace) < 0)
                return usage_error("argument --grace: '%s' is not a number of seconds >= 0", val);
        } else if (strcmp(a, "--stop-signal") == 0) {
            int sig = parse_signal_name(val);
            if (sig < 0 || IS_NOT_STOP(sig))
                return usage_error("argument --stop-signal: '%s' is not a stop signal (not KILL, STOP or CONT)", val);
            K.stop_sig = sig;
        } else if (pdeath) {
            int sig = parse_signal_name(val);
            if (sig < 0 || sig == SIGSTOP)
                return usage_error("argument -p/--parent-death-signal: '%s' is not a signal (not STOP)", val);
            R.pdeath = sig;
        } else if (strcmp(a, "-g") == 0 || strcmp(a, "--group") == 0) {
            R.group = true;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            R.verbosity = -1;
            quiet = true;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            R.verbosity = 1;
            verbose = true;
        } else if (a[0] == '-') {
            return usage_error("unrecognized argument '%s'", a);
        } else {
            break; /* the command, without "--" */
        }
        if (takes && eq == NULL)
            i++;
    }
    if (i >= argc)
        return usage_error("no command given%s", "");
    if (quiet && verbose)
        return usage_error("argument %s: not allowed with argument -q/--quiet", "-v/--verbose");
    K.argv = argv + i;
    K.exe = argv[i];
    return 0;
}
