/* Parsers of the files process facts come from: /proc/<pid>/stat and /proc/<pid>/status, as plain text.
 *
 * Why this shape:
 * - Pure: text in, fields out, no system call, so the tests feed them synthetic and fuzzed lines on any platform.
 * - The name (stat's field 2) sits between the FIRST '(' and the LAST ')': it may hold spaces, parentheses and
 *   newlines, even a whole fake tail of fields; every field is counted after the last ')'.
 * - A line that does not parse is an error (-EIO), never a half-filled row: a number too long for 64 bits, a
 *   missing field or a stray byte all fail the whole line.
 * - status is read by line name ("Tgid:", "Uid:"), never by line number: kernels add lines.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* memrchr, in stat_parse.h */
#endif
#include "proctree.h"
#include "stat_parse.h"

#include <errno.h>
#include <string.h>

/* proc(5)'s numbering of the stat fields read here, counting state as field 3. */
#define F_PPID       4
#define F_TTY_NR     7
#define F_FLAGS      9
#define F_UTIME      14
#define F_STIME      15
#define F_NUM_THREAD 20
#define F_STARTTIME  22
#define F_VSIZE      23
#define F_RSS        24

/* PF_KTHREAD in the kernel's task flags: set only on kernel threads, and not settable from user space. */
#define PF_KTHREAD 0x00200000ULL

/* Returns 0 after storing field number `field`'s value v into *out (fields not read here are skipped). */
static int store_stat_field(int field, int64_t v, struct pt_facts *out)
{
    switch (field) {
    case F_PPID: out->ppid = (int32_t)v; break;
    case F_TTY_NR: out->tty_nr = (int32_t)v; break;
    case F_FLAGS: out->kthread = ((uint64_t)v & PF_KTHREAD) != 0; break;
    case F_UTIME: out->utime = (uint64_t)v; break;
    case F_STIME: out->stime = (uint64_t)v; break;
    case F_NUM_THREAD: out->num_threads = v; break;
    case F_STARTTIME: out->start_time = (uint64_t)v; break;
    case F_VSIZE: out->vsize = (uint64_t)v; break;
    case F_RSS: out->rss_pages = v < 0 ? 0 : (uint64_t)v; break;
    default: break;
    }
    return 0;
}

int pt_parse_stat_facts(const char *buf, size_t len, struct pt_facts *out)
{
    const char *end = buf + len;
    const char *p;
    int64_t v;

    if (pt_parse_stat_head(buf, len, &out->pid, out->name, &out->state, &p) != 0)
        return -EIO;
    for (int field = F_PPID; field <= F_RSS; field++) {
        if (pt_parse_decimal(&p, end, &v) != 0)
            return -EIO;
        store_stat_field(field, v, out);
        if (field < F_RSS) {
            if (p >= end || *p != ' ')
                return -EIO;
            p++;
        }
    }
    /* What follows field 24 is another field or the line's end, never more of this number. */
    if (p < end && *p != ' ' && *p != '\n')
        return -EIO;
    return 0;
}

/* Returns the start of the value of the line of text[0..len) named `name` (e.g. "Uid:"), or NULL if none. */
static const char *line_value(const char *text, size_t len, const char *name)
{
    size_t nlen = strlen(name);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl ? nl : end;
        if ((size_t)(line_end - p) >= nlen && memcmp(p, name, nlen) == 0)
            return p + nlen;
        p = line_end + 1;
    }
    return NULL;
}

/* Returns 0 with *out set from the unsigned decimal after tabs or spaces at *s (moved past it, within end), or -EIO. */
static int next_id(const char **s, const char *end, int64_t *out)
{
    const char *p = *s;
    while (p < end && (*p == '\t' || *p == ' '))
        p++;
    if (p == *s || p >= end || *p == '-')
        return -EIO;
    int rc = pt_parse_decimal(&p, end, out);
    if (rc == 0 && p < end && *p != '\t' && *p != ' ' && *p != '\n')
        return -EIO;
    *s = p;
    return rc;
}

int pt_parse_status_ids(const char *buf, size_t len, int32_t *tgid, uint32_t *uids)
{
    const char *end = buf + len;
    const char *t = line_value(buf, len, "Tgid:");
    const char *u = line_value(buf, len, "Uid:");
    int64_t v;
    if (!t || !u)
        return -ENODATA;
    if (next_id(&t, end, &v) != 0 || v <= 0 || v > INT32_MAX)
        return -EIO;
    *tgid = (int32_t)v;
    for (int i = 0; i < 3; i++) {
        if (next_id(&u, end, &v) != 0 || v > UINT32_MAX)
            return -EIO;
        uids[i] = (uint32_t)v;
    }
    return 0;
}
