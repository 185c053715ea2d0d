/* cgroup v2 (Linux): the tree's own cgroup, below a proctree-<pid>-<start> parent.
 */
#include "keeper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define CGROUP2_MAGIC 0x63677270 /* statfs f_type of a cgroup v2 mount */

static char g_cgpath[PATH_MAX];

/* Returns true if name is proctree-<digits>-<digits>, optionally followed by -<pid ns>-<time ns> (a per-owner
 * parent spawn() makes). */
static bool is_parent_name(const char *name, size_t len)
{
    if (len < 12 || strncmp(name, "proctree-", 9) != 0)
        return false;
    int dashes = 0, digits = 0;
    for (size_t i = 9; i < len; i++) {
        if (name[i] == '-') {
            if (digits == 0 || ++dashes > 3)
                return false;
            digits = 0;
        } else if (name[i] >= '0' && name[i] <= '9') {
            digits++;
        } else {
            return false;
        }
    }
    return (dashes == 1 || dashes == 3) && digits > 0;
}

/* Returns true if path is a plain absolute path (no "." or ".." parts, no "//", no trailing '/') of a cgroup v2
 * directory directly below a proctree-<pid>-<start> parent: the only cgroup we may write to, kill or remove. */
bool cgroup_is_ours(const char *path)
{
    size_t len = strlen(path);
    if (len < 2 || path[0] != '/' || path[len - 1] == '/' || len >= PATH_MAX - 64)
        return false;
    if (strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../"))
        return false;
    const char *last = strrchr(path, '/');
    if (strcmp(last, "/.") == 0 || strcmp(last, "/..") == 0 || last == path)
        return false;
    const char *prev = last - 1;
    while (prev > path && *prev != '/')
        prev--;
    if (!is_parent_name(prev + 1, (size_t)(last - prev - 1)))
        return false;
    struct statfs fs;
    return statfs(path, &fs) == 0 && (unsigned long)fs.f_type == CGROUP2_MAGIC;
}

/* Returns a descriptor of dir/file opened with flags (and O_CLOEXEC), or -errno. */
static int open_in(const char *dir, const char *file, int flags)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", dir, file) >= (int)sizeof p)
        return -ENAMETOOLONG;
    int fd = open(p, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Returns 0 after writing text to dir/file, or -errno. */
int write_file(const char *dir, const char *file, const char *text)
{
    int fd = open_in(dir, file, O_WRONLY);
    if (fd < 0)
        return fd;
    ssize_t w = write(fd, text, strlen(text));
    int rc = w < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Returns the bytes read (at most cap - 1, NUL-terminated) from dir/file, or -errno. */
int read_file(const char *dir, const char *file, char *buf, size_t cap)
{
    int fd = open_in(dir, file, O_RDONLY);
    if (fd < 0)
        return fd;
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    close(fd);
    return (int)n;
}

/* Returns nothing: calls visit on g_cgpath[0..len) and every cgroup nested below it (children before their parent
 * when post, else after), at most *budget directories and MAX_CG_DEPTH levels deep. */
static void cg_walk(size_t len, int depth, int *budget, cg_visit visit, bool post)
{
    if (!post)
        visit(g_cgpath);
    DIR *d = depth < MAX_CG_DEPTH ? opendir(g_cgpath) : NULL;
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL && *budget > 0) {
            if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            size_t nl = strlen(de->d_name);
            if (len + 1 + nl >= sizeof g_cgpath)
                continue;
            g_cgpath[len] = '/';
            memcpy(g_cgpath + len + 1, de->d_name, nl + 1);
            (*budget)--;
            cg_walk(len + 1 + nl, depth + 1, budget, visit, post);
            g_cgpath[len] = '\0';
        }
        closedir(d);
    }
    if (post)
        visit(g_cgpath);
}

/* Returns nothing: walks the tree's cgroup (K.cgroup) and those nested in it with visit. */
void cg_each(cg_visit visit, bool post)
{
    size_t len = strlen(K.cgroup);
    if (len >= sizeof g_cgpath)
        return;
    memcpy(g_cgpath, K.cgroup, len + 1);
    int budget = MAX_CG_DIRS;
    cg_walk(len, 0, &budget, visit, post);
}

/* Returns true while any process is in the tree's cgroup (cgroup.events: populated). */
bool cg_populated(void)
{
    char buf[512];
    if (read_file(K.cgroup, "cgroup.events", buf, sizeof buf) < 0)
        return false;
    const char *p = strstr(buf, "populated ");
    return p && p[10] != '0';
}

/* Returns nothing: rmdir of one nested cgroup (a visit). */
static void cg_rmdir_nested(const char *dir)
{
    if (strcmp(dir, K.cgroup) != 0)
        rmdir(dir);
}

/* Returns nothing: removes the tree's cgroup (nested ones first; waiting up to 1 s for exiting tasks to let go), then
 * its per-owner parent if that is empty. */
void cg_remove(void)
{
    if (!K.cgroup || !cgroup_is_ours(K.cgroup))
        return;
    cg_each(cg_rmdir_nested, true);
    double deadline = now_s() + 1.0;
    for (long us = 200; rmdir(K.cgroup) != 0 && errno == EBUSY && now_s() < deadline; us = us < 5000 ? us * 2 : us) {
        struct timespec ts = {0, us * 1000}; /* exiting tasks are still charged to it for a moment */
        nanosleep(&ts, NULL);
    }
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", K.cgroup);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        rmdir(parent); /* EBUSY while another tree of this owner lives */
    }
}

/* Returns nothing: adds every process of one cgroup.procs (a visit of the tree's cgroups). */
void add_cgroup_procs(const char *dir)
{
    char buf[8192];
    int fd = open_in(dir, "cgroup.procs", O_RDONLY);
    if (fd < 0)
        return;
    size_t keep = 0;
    for (;;) {
        ssize_t r = read(fd, buf + keep, sizeof buf - 1 - keep);
        if (r <= 0)
            break;
        size_t len = keep + (size_t)r;
        buf[len] = '\0';
        char *s = buf, *nl;
        while ((nl = memchr(s, '\n', len - (size_t)(s - buf))) != NULL) {
            *nl = '\0';
            long long v;
            struct pt_proc row;
            if (parse_uint(s, INT32_MAX, &v) == 0 && pt_proc((int32_t)v, &row) == 0)
                add_member(&row);
            s = nl + 1;
        }
        keep = len - (size_t)(s - buf);
        memmove(buf, s, keep);
    }
    close(fd);
}

/* Returns true if the tree's cgroup answered a scan by itself: members were listed, or it is not populated. */
bool cg_scan(void)
{
    cg_each(add_cgroup_procs, false);
    /* The cgroup holds the whole tree (nothing leaves it without privilege), and the kernel's populated flag
     * is the proof of "nothing left": no walk, no marker sweep. A populated cgroup whose lists read empty
     * (a race, or an unreadable nested cgroup) falls through to the other scans. */
    return g_ncur > 0 || !cg_populated();
}

/* Returns 0 once the calling process moved itself into the tree's cgroup, or -errno. */
int cg_join_self(void)
{
    return write_file(K.cgroup, "cgroup.procs", "0"); /* "0": the writer itself */
}

/* Returns nothing: SIGKILLs everything in the tree's cgroup (cgroup.kill, else freeze, kill each member, thaw). */
void cgroup_kill(void)
{
    if (!K.cgroup || !cgroup_is_ours(K.cgroup))
        return;
    if (write_file(K.cgroup, "cgroup.kill", "1") != -ENOENT)
        return;
    /* Before 5.14: frozen, nothing in it can fork or exit between the read and the kill. */
    bool frozen = write_file(K.cgroup, "cgroup.freeze", "1") == 0;
    for (int i = 0; frozen && i < 200; i++) {
        char buf[512];
        if (read_file(K.cgroup, "cgroup.events", buf, sizeof buf) < 0 || strstr(buf, "frozen 1"))
            break;
        sleep_ms(5);
    }
    g_sgen++;
    int before = g_ncur;
    cg_each(add_cgroup_procs, false);
    for (int i = before; i < g_ncur; i++)
        send_sig(g_cur[i].pid, g_cur[i].start_time, SIGKILL);
    g_ncur = before;
    if (frozen)
        write_file(K.cgroup, "cgroup.freeze", "0");
}
