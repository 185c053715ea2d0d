/* proctree-init's receipt: the file spawn() writes for each tree (proctree/_containment/evidence/receipt.py, whose
 * format and checks this follows), so that `proctree reap` finds a tree whose runner and keeper half were killed
 * together from the file too, not only from its members' PROCTREE_OWNER marker.
 *
 * The runner picks the directory before the fork (receipt.py's directory(): made 0700 where missing, ours and closed
 * to group and others, never a symlink), the keeper half writes `<its pid>-<its start>.json` atomically once CMD runs,
 * and whoever ends the tree removes it (teardown.c's end_receipt, or the runner for a killed keeper half), as does
 * the reap that ends an orphaned one. Best effort: no usable directory, no receipt (the marker still proves the tree).
 */
#include "init.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char g_dir[PATH_MAX];

/* Returns true if path is a real directory of ours closed to group and others (receipt.py's _dir_ok). */
static bool usable(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0;
}

/* Returns true with out set to <runtime>/proctree if runtime is an absolute directory of ours. */
static bool runtime_place(const char *runtime, char *out, size_t cap)
{
    struct stat st;
    if (!runtime || runtime[0] != '/' || lstat(runtime, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return false;
    return snprintf(out, cap, "%s/proctree", runtime) < (int)cap;
}

/* Returns nothing: K.receipts is this user's receipt directory (receipt.py's locations, in its order), or NULL; NULL
 * as PID 1 too: its death takes its whole namespace, so its tree is never orphaned, and a receipt written there
 * (another pid namespace's numbers) would only linger as one no reaper outside can prove. */
void choose_receipt_dir(void)
{
    if (R.pid1)
        return;
    char places[4][PATH_MAX / 4], user[64];
    int n = 0;
    const char *override = getenv("PROCTREE_RECEIPTS_DIR"), *tmp = getenv("TMPDIR");
    if (override && override[0] == '/' && snprintf(places[n], sizeof places[0], "%s", override) < (int)sizeof places[0])
        n++;
    if (!override) {
        snprintf(user, sizeof user, "/run/user/%u", (unsigned)geteuid());
        n += runtime_place(getenv("XDG_RUNTIME_DIR"), places[n], sizeof places[0]);
        if (runtime_place(user, places[n], sizeof places[0]) && (n == 0 || strcmp(places[0], places[n]) != 0))
            n++;
        if (geteuid() == 0)
            snprintf(places[n++], sizeof places[0], "/run/proctree");
        snprintf(places[n++], sizeof places[0], "%s/proctree-%u", tmp && tmp[0] == '/' ? tmp : "/tmp",
                 (unsigned)geteuid());
    }
    for (int i = 0; i < n && !K.receipts; i++) {
        if ((mkdir(places[i], 0700) == 0 || errno == EEXIST) && usable(places[i])) {
            snprintf(g_dir, sizeof g_dir, "%s", places[i]);
            K.receipts = g_dir;
        }
    }
}

/* Returns 0 once fmt is appended to buf (of cap bytes, *len used), or -ENOSPC. */
static int append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len)
        return -ENOSPC;
    *len += (size_t)n;
    return 0;
}

/* Returns 0 once s is appended as a JSON string (printable ASCII only, as receipt.py writes it), or -EINVAL. */
static int append_string(char *buf, size_t cap, size_t *len, const char *s)
{
    int rc = append(buf, cap, len, "\"");
    for (; *s && rc == 0; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f)
            return -EINVAL;
        rc = append(buf, cap, len, c == '"' || c == '\\' ? "\\%c" : "%c", c);
    }
    return rc == 0 ? append(buf, cap, len, "\"") : rc;
}

/* Returns 0 once buf holds the receipt's JSON (receipt.py's encode(): the same fields), or -errno. */
static int encode(char *buf, size_t cap)
{
    static const char *const MODES[] = {MODE_NAMES};
    const char *marker = getenv("PROCTREE_OWNER"), *tree = getenv(TREE_KEY);
    int owner;
    unsigned long long owner_start, pidns, timens;
    if (!marker || sscanf(marker, "%d:%llu@%llu.%llu.", &owner, &owner_start, &pidns, &timens) != 4 || !tree ||
        strlen(tree) < TREE_ID_LEN)
        return -EINVAL;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    size_t len = 0;
    int rc = append(buf, cap, &len, "{\"version\":1,\"owner\":[%d,%llu],\"keeper\":[%d,%llu],\"command\":[%d,%llu],",
                    owner, owner_start, (int)K.self, (unsigned long long)K.self_start, (int)K.cmd,
                    (unsigned long long)start_of(K.cmd));
    if (rc == 0)
        rc = append(buf, cap, &len, "\"sid\":%d,\"pgid\":%d,\"cgroup\":", (int)K.self, (int)K.cmd);
    if (rc == 0)
        rc = K.cgroup ? append_string(buf, cap, &len, K.cgroup) : append(buf, cap, &len, "null");
    if (rc == 0)
        rc = append(buf, cap, &len, ",\"tag\":null,\"mode\":\"%s\",\"marker\":", MODES[K.mode]);
    if (rc == 0)
        rc = append_string(buf, cap, &len, marker);
    if (rc == 0)
        rc = append(buf, cap, &len, ",\"tree\":\"%.32s\",\"created\":%lld.%06ld,\"pidns\":%llu,\"timens\":%llu}\n",
                    tree, (long long)now.tv_sec, now.tv_nsec / 1000, pidns, timens);
    return rc;
}

/* Returns 0 once the keeper half's receipt is written (a temporary file renamed over its name: a reader sees all of
 * it or none), or -errno (nothing left). Called by the keeper half once CMD runs. */
int write_receipt(void)
{
    char data[4096], name[64], tmp[128];
    unsigned char raw[4];
    int rc;
    if (!K.receipts || !K.self_start || K.cmd <= 0)
        return -ENOENT;
    if ((rc = encode(data, sizeof data)) < 0)
        return rc;
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return -errno;
    snprintf(name, sizeof name, "%d-%llu.json", (int)K.self, (unsigned long long)K.self_start);
    snprintf(tmp, sizeof tmp, ".tmp-%s.%02x%02x%02x%02x", name, raw[0], raw[1], raw[2], raw[3]);
    int dir = open(K.receipts, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return -errno;
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    rc = fd < 0 ? -errno : 0;
    if (rc == 0) {
        size_t n = strlen(data);
        rc = write(fd, data, n) == (ssize_t)n ? 0 : -EIO;
        close(fd);
        if (rc == 0 && renameat(dir, tmp, dir, name) != 0)
            rc = -errno;
        if (rc < 0)
            unlinkat(dir, tmp, 0);
    }
    close(dir);
    return rc;
}

/* Returns nothing: removes the receipt of the keeper half (pid, start): the runner's, once it ended the tree of a
 * killed keeper half. */
void remove_receipt_of(pid_t pid, uint64_t start)
{
    char p[PATH_MAX + 64];
    if (K.receipts && start &&
        snprintf(p, sizeof p, "%s/%d-%llu.json", K.receipts, (int)pid, (unsigned long long)start) < (int)sizeof p)
        unlink(p);
}
