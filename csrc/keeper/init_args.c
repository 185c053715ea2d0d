/* proctree-init's command line: tini's options (-s, -e CODE, -w, -v..., -l, --version, -g, -p SIG, -h and its
 * TINI_* environment variables) and `proctree run`'s that need no Python (--contain, --grace, --stop-signal, -q).
 *
 * `proctree run` (proctree/cli/run.py) hands over to this program when only options it reads alike were given
 * (cli/_native.py), so their spelling and their refusals (exit 2, one line) must match it. Short options cluster as
 * getopt's do (-vvv, -sg, -e143, -pSIGKILL); the first word that is not an option, or what follows "--", is CMD.
 */
#include "init.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct runner R = {.contain = CONTAIN_AUTO, .prog = "proctree-init"};

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

/* Returns REFUSED (2: bad input) after one line on stderr: "<program>: <what> (usage: ...)". */
int usage_error(const char *fmt, const char *what)
{
    fprintf(stderr, "%s: ", R.prog);
    fprintf(stderr, fmt, what);
    fprintf(stderr, " (usage: %s %s)\n", R.prog, USAGE);
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

/* Returns nothing: R.prog is the program's name as invoked (argv[0]'s last component), which every message uses. */
static void name_program(const char *argv0)
{
    const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
    if (argv0 && *argv0)
        R.prog = slash && slash[1] ? slash + 1 : argv0;
}

/* Returns nothing: tini's environment variables, which the command line overrides. TINI_SUBREAPER (set, to anything:
 * tini's test) asks for what the runner is anyway; TINI_KILL_PROCESS_GROUP is -g; TINI_VERBOSITY=N is tini's level,
 * whose default is 1: 0 is -q, 1 our default, 2 -v, 3 -vv, 4 -vvv. */
static void read_tini_environment(void)
{
    if (getenv("TINI_KILL_PROCESS_GROUP"))
        R.group = true;
    const char *level = getenv("TINI_VERBOSITY");
    long long v;
    if (level && parse_uint(level, 99, &v) == 0)
        R.verbosity = (int)v - 1;
}

/* Returns 0 once -e's exit status is remapped to 0, or REFUSED after a line on stderr. */
static int expect_status(const char *val)
{
    long long v;
    if (parse_uint(val, 255, &v) < 0)
        return usage_error("argument -e: '%s' is not an exit status from 0 to 255", val);
    R.expect[v / 32] |= 1u << (v % 32);
    return 0;
}

/* Returns 0 once -p's signal is noted, or REFUSED after a line on stderr. */
static int parent_death(const char *val)
{
    int sig = parse_signal_name(val);
    if (sig < 0 || sig == SIGSTOP)
        return usage_error("argument -p/--parent-death-signal: '%s' is not a signal (not STOP)", val);
    R.pdeath = sig;
    return 0;
}

/* Returns 0 once the cluster of short options in a (after its '-') is read, 1 when -h or -l was answered, or
 * REFUSED after a line on stderr. *used is set when the next word was -e's or -p's value. */
static int short_options(const char *a, const char *next, bool *used, int *verbose, bool *quiet)
{
    for (const char *c = a + 1; *c; c++) {
        char opt[3] = {'-', *c, '\0'};
        switch (*c) {
        case 'h': print_help(); return 1;
        case 'l': print_license(); return 1;
        case 's': /* tini's subreaper: the runner always is one (PID 1 reaps every orphan anyway) */ break;
        case 'g': R.group = true; break;
        case 'w': R.warn_reap = true; break;
        case 'q': *quiet = true; break;
        case 'v': (*verbose)++; break;
        case 'e':
        case 'p': {
            const char *val = c[1] ? c + 1 : next;
            if (val == NULL)
                return usage_error("argument %s: expected one argument", *c == 'e' ? "-e" : "-p/--parent-death-signal");
            *used = c[1] == '\0';
            return *c == 'e' ? expect_status(val) : parent_death(val);
        }
        default: return usage_error("unrecognized argument '%s'", c == a + 1 ? a : opt);
        }
    }
    return 0;
}

/* Returns 0 once the long option a (its value val, or NULL) is read, 1 when --help or --version was answered, or
 * REFUSED after a line on stderr. */
static int long_option(const char *a, const char *val, bool *quiet, int *verbose)
{
    if (strcmp(a, "--help") == 0) {
        print_help();
        return 1;
    } else if (strcmp(a, "--version") == 0) {
        printf("%s version %s\n", R.prog, PROCTREE_VERSION);
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
    } else if (strcmp(a, "--parent-death-signal") == 0) {
        return parent_death(val);
    } else if (strcmp(a, "--group") == 0) {
        R.group = true;
    } else if (strcmp(a, "--no-pty") == 0) {
        /* `proctree run`'s: this program never gives CMD a pseudo-terminal */
    } else if (strcmp(a, "--quiet") == 0) {
        *quiet = true;
    } else if (strcmp(a, "--verbose") == 0) {
        (*verbose)++;
    } else {
        return usage_error("unrecognized argument '%s'", a);
    }
    return 0;
}

/* Returns true for the long options that take a value. */
static bool takes_value(const char *name)
{
    return strcmp(name, "--contain") == 0 || strcmp(name, "--grace") == 0 || strcmp(name, "--stop-signal") == 0 ||
           strcmp(name, "--parent-death-signal") == 0;
}

/* Returns 0 with R and K filled from the environment and the command line, 1 when -h, -l or --version was answered,
 * or REFUSED after a line on stderr. */
int parse_runner_args(int argc, char **argv)
{
    int i = 1, rc = 0, verbose = 0;
    bool quiet = false;
    name_program(argc > 0 ? argv[0] : NULL);
    K.grace = 2.0;
    K.stop_sig = SIGTERM;
    read_tini_environment();
    for (; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break; /* the command, without "--" */
        if (a[1] != '-') {
            bool used = false;
            rc = short_options(a, val, &used, &verbose, &quiet);
            i += used;
            continue;
        }
        const char *eq = strchr(a, '=');
        char name[32];
        if (eq && (size_t)(eq - a) < sizeof name) { /* --grace=3 */
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            a = name;
            val = eq + 1;
        }
        bool takes = takes_value(a);
        if (!takes && eq != NULL)
            return usage_error("argument %s: ignored explicit argument", a); /* --group=1, as argparse says */
        if (takes && val == NULL)
            return usage_error("argument %s: expected one argument", a);
        rc = long_option(a, val, &quiet, &verbose);
        i += takes && eq == NULL;
    }
    if (rc != 0)
        return rc;
    if (i >= argc)
        return usage_error("no command given%s", "");
    if (quiet && verbose)
        return usage_error("argument %s: not allowed with argument -q/--quiet", "-v/--verbose");
    if (quiet || verbose)
        R.verbosity = quiet ? -1 : verbose;
    K.argv = argv + i;
    K.exe = argv[i];
    return 0;
}
