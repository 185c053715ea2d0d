/* The status lines to the owner, and the keeper's clock.
 */
#include "keeper.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Returns monotonic seconds. */
double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Returns nothing: sleeps ms milliseconds (signals are blocked, so no EINTR cuts it short). */
void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Returns nothing: writes one status line if the status fd is still ours (never blocks; a lost line is the owner's loss). */
void say(const char *fmt, ...)
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
void say_stopped(int sig)
{
    if (K.status_fd < 0)
        return;
    int free_room = status_room(K.status_fd);
    bool room = free_room >= 0 ? free_room > 0 : K.stop_lines < STOP_LINES_MAX; /* the reader's pace, else a count */
    if (!room)
        return;
    K.stop_lines++;
    say(STATUS_STOPPED " %d", sig);
}
