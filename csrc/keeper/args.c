/* The keeper's command line: protocol.KeeperArgs.from_argv's rules, in C.
 */
#include "keeper.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returns 0 with *out parsed from an ASCII decimal of 1..20 digits no larger than max, else -EINVAL. */
int parse_uint(const char *s, long long max, long long *out)
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
int parse_seconds(const char *s, double *out)
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

/* The command line's mode words, indexed by enum mode. */
static const char *const MODE_NAME[NMODES] = {MODE_NAMES};

/* Returns REFUSED (the protocol's refusal status) after one line on stderr saying why. */
int refuse(const char *fmt, const char *what)
{
    fputs("proctree keeper: ", stderr);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return REFUSED;
}

/* Returns 0 with *out the mode named s, else -EINVAL. */
static int parse_mode(const char *s, enum mode *out)
{
    for (int m = 0; m < NMODES; m++) {
        if (strcmp(s, MODE_NAME[m]) == 0) {
            *out = (enum mode)m;
            return 0;
        }
    }
    return -EINVAL;
}

/* Returns 0 with K filled from the command line, or REFUSED after a line on stderr (protocol.KeeperArgs.from_argv's
 * rules). */
int parse_args(int argc, char **argv)
{
    int n = argc - 1;
    char **a = argv + 1;
    long long v;
    if (n < 1 || a[0][0] != 'v')
        return refuse("keeper arguments must start with a protocol version%s", "");
    if (strcmp(a[0], PROTOCOL_VERSION_ARG) != 0)
        return refuse("keeper protocol version '%s' is not the supported " PROTOCOL_VERSION_TEXT, a[0] + 1);
    if (n <= FIXED + 1 || strcmp(a[FIXED], "--") != 0)
        return refuse("keeper arguments need " FIXED_FIELDS_TEXT " fields, '--' and a command%s", "");
    if (parse_uint(a[1], INT_MAX, &v) < 0)
        return refuse("status_fd must be a decimal number, not '%s'", a[1]);
    K.status_fd = (int)v;
    if (parse_mode(a[2], &K.mode) < 0)
        return refuse("mode must be one of " MODE_NAMES_TEXT ", not '%s'", a[2]);
    if (parse_uint(a[3], INT32_MAX, &v) < 0 || v == 0)
        return refuse("owner_pid must be a pid, not '%s'", a[3]);
    K.owner = (pid_t)v;
    if (parse_seconds(a[4], &K.grace) < 0)
        return refuse("grace must be seconds >= 0, not '%s'", a[4]);
    if (parse_flag(a[5], &K.keep_orphans) < 0)
        return refuse("keep_orphans must be 0 or 1, not '%s'", a[5]);
    K.cgroup = opt(a[6]);
    if (K.cgroup && K.cgroup[0] == '\0')
        return refuse("cgroup must be a path or -, not '%s'", a[6]);
    if (parse_flag(a[7], &K.restore_signals) < 0)
        return refuse("restore_signals must be 0 or 1, not '%s'", a[7]);
    K.exe = a[8]; /* always the program to run: no placeholder, so a program may be named "-" */
    K.receipts = opt(a[9]);
    if (K.receipts && K.receipts[0] != '/')
        return refuse("receipts must be an absolute directory or -, not '%s'", a[9]);
    if (parse_flag(a[10], &K.pty) < 0)
        return refuse("pty must be 0 or 1, not '%s'", a[10]);
    if (parse_uint(a[11], 64, &v) < 0 || v == 0 || IS_NOT_STOP(v))
        return refuse("stop_signal must be a signal number other than SIGKILL, SIGSTOP and SIGCONT, not '%s'", a[11]);
    K.stop_sig = (int)v;
    if ((K.cgroup != NULL) != (K.mode == M_CGROUP))
        return refuse("cgroup is given in cgroup mode only, and cgroup mode needs a cgroup%s", "");
    K.argv = a + FIXED + 1;
    return 0;
}
