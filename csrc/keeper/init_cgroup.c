/* proctree-init's cgroup: <own cgroup>/proctree-<pid>-<start>-<pid ns>-<time ns>/run under the cgroup v2 mount.
 *
 * The same place and names as spawn()'s (proctree/_containment/cgroup.py create()), so that the keeper's cgroup code
 * (cgroup_is_ours, cg_remove, cgroup_kill) and the reaper's leftover-cgroup evidence treat it as any tree's. Before
 * making its own, it removes the empty ones a killed run left beside it (sweep_left_cgroups): a container's PID 1
 * SIGKILLed cannot remove its own, so the next run does.
 */
#include "init.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define INITIAL_PID_NS 0xEFFFFFFCULL
#define SETTLED                                                                                                        \
    5 /* seconds a leftover cgroup stays unchanged before a later run removes it */ /* the kernel's inode for the initial pid namespace (include/linux/proc_ns.h) */

static char g_tree[PATH_MAX];

/* Returns nothing: s unescaped in place from mountinfo's \ooo escapes (space, tab, newline, backslash). */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* Returns 0 with out filled by match from the first line of path it accepts, -ENOENT if none does, or -errno. */
static int find_line(const char *path, bool (*match)(char *line, char *out, size_t cap), char *out, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char line[4096];
    int rc = -ENOENT;
    while (rc != 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (match(line, out, cap))
            rc = 0;
    }
    fclose(f);
    return rc;
}

/* Returns true with out the mount point if line is a mountinfo line of the cgroup v2 hierarchy's root. */
static bool cgroup2_mount(char *line, char *out, size_t cap)
{
    char *sep = strstr(line, " - ");
    if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
        return false;
    *sep = '\0';
    char *field[5];
    char *save = NULL, *s = line;
    for (int i = 0; i < 5; i++, s = NULL) {
        field[i] = strtok_r(s, " ", &save);
        if (!field[i])
            return false;
    }
    if (strcmp(field[3], "/") != 0)
        return false;
    unescape(field[4]);
    return snprintf(out, cap, "%s", field[4]) < (int)cap;
}

/* Returns true with out our cgroup v2 path (relative to the mount) if line is /proc/self/cgroup's "0::" line. */
static bool unified_line(char *line, char *out, size_t cap)
{
    size_t len = strlen(line);
    if (strncmp(line, "0::/", 4) != 0 || (len > 10 && strcmp(line + len - 10, " (deleted)") == 0))
        return false;
    return snprintf(out, cap, "%s", strcmp(line + 3, "/") == 0 ? "" : line + 3) < (int)cap;
}

/* Returns the inode of /proc/self/ns/<name>, 0 if it cannot be read (a kernel without time namespaces). */
static unsigned long long ns_ino(const char *name)
{
    char p[64];
    struct stat st;
    snprintf(p, sizeof p, "/proc/self/ns/%s", name);
    return stat(p, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* Returns true only when cgroup.events says nothing runs in path or below it (a failed read: false). */
static bool unpopulated(const char *path)
{
    char p[PATH_MAX + 16], buf[256];
    snprintf(p, sizeof p, "%s/cgroup.events", path);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strstr(buf, "populated 0\n") != NULL;
}

/* Returns true if the directory st describes has not changed for SETTLED seconds: one just made (its tree not yet in
 * it) or just emptied is left to its maker, and to a reaper that is looking at it. */
static bool settled(const struct stat *st)
{
    time_t now = time(NULL);
    return now - st->st_mtime >= SETTLED && now - st->st_ctime >= SETTLED;
}

/* Returns true if a process we can see lives in the pid namespace ino, or one's namespace cannot be read (it might). */
static bool pidns_lives(unsigned long long ino)
{
    DIR *d = opendir("/proc");
    if (!d)
        return true;
    bool lives = false;
    struct dirent *e;
    while (!lives && (e = readdir(d)) != NULL) {
        char p[300];
        struct stat st;
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(p, sizeof p, "/proc/%s/ns/pid", e->d_name);
        if (stat(p, &st) == 0)
            lives = st.st_ino == ino;
        else
            lives = errno != ENOENT && errno != ESRCH; /* gone meanwhile: no answer; denied: assume it lives */
    }
    closedir(d);
    return lives;
}

/* Returns nothing: removes the empty cgroups below path, then path (depth: how deep to go on). rmdir refuses a
 * cgroup that holds a process, so nothing that runs is touched. */
static void remove_empty(const char *path, int depth)
{
    DIR *d = depth > 0 ? opendir(path) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char p[PATH_MAX];
        if (e->d_type == DT_DIR && e->d_name[0] != '.' && snprintf(p, sizeof p, "%s/%s", path, e->d_name) < PATH_MAX)
            remove_empty(p, depth - 1);
    }
    if (d)
        closedir(d);
    rmdir(path);
}

/* Returns nothing: removes the empty tree cgroups a killed run left beside ours (dir: where ours goes), whose owner
 * is provably gone, as the reaper judges it: in our pid and time namespaces, no process with that pid and start
 * time; in another pid namespace, seen from the initial one (where every process is listed), no process left in it
 * (a container's PID 1 SIGKILLed, which takes its namespace and its keeper half along). Only our uid's (or any, as
 * root). Costs one directory read when there is nothing to remove. */
static void sweep_left_cgroups(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    unsigned long long mine = ns_ino("pid"), my_time = ns_ino("time");
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned long long pid, start, pidns, timens;
        char p[PATH_MAX], rest;
        if (strncmp(e->d_name, "proctree-", 9) != 0 || e->d_name[9] < '0' || e->d_name[9] > '9' ||
            sscanf(e->d_name, "proctree-%llu-%llu-%llu-%llu%c", &pid, &start, &pidns, &timens, &rest) != 4 ||
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p || !unpopulated(p))
            continue;
        struct stat st;
        if (stat(p, &st) != 0 || (st.st_uid != geteuid() && geteuid() != 0) || !settled(&st))
            continue;
        bool gone;
        if (pidns == mine && timens == my_time)
            gone = pid > 0 && pid <= INT32_MAX && start_of((pid_t)pid) != start;
        else
            gone = mine == INITIAL_PID_NS && pidns != mine && !pidns_lives(pidns);
        if (gone)
            remove_empty(p, 4);
    }
    closedir(d);
}

/* Returns 0 once the tree's cgroup exists, is ours and is writable (K.cgroup set), or -errno (nothing left made). */
int make_tree_cgroup(void)
{
    char mount[PATH_MAX / 2], rel[PATH_MAX / 4], parent[PATH_MAX];
    int rc = find_line("/proc/self/mountinfo", cgroup2_mount, mount, sizeof mount);
    if (rc == 0)
        rc = find_line("/proc/self/cgroup", unified_line, rel, sizeof rel);
    if (rc < 0)
        return rc;
    uint64_t start = start_of(K.self);
    if (start == 0)
        return -ESRCH;
    snprintf(parent, sizeof parent, "%s%s", mount, rel);
    sweep_left_cgroups(parent);
    snprintf(parent, sizeof parent, "%s%s/proctree-%d-%llu-%llu-%llu", mount, rel, (int)K.self,
             (unsigned long long)start, ns_ino("pid"), ns_ino("time"));
    if (snprintf(g_tree, sizeof g_tree, "%s/run", parent) >= (int)sizeof g_tree - 64)
        return -ENAMETOOLONG;
    if (mkdir(parent, 0755) != 0 && errno != EEXIST)
        return -errno;
    if (mkdir(g_tree, 0755) != 0) {
        rc = -errno;
        rmdir(parent);
        return rc;
    }
    K.cgroup = g_tree;
    int dir = open(g_tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bool writable = dir >= 0 && faccessat(dir, "cgroup.procs", W_OK, 0) == 0;
    if (dir >= 0)
        close(dir);
    if (!cgroup_is_ours(g_tree) || !writable) {
        rmdir(g_tree);
        rmdir(parent);
        K.cgroup = NULL;
        return -EACCES;
    }
    return 0;
}
