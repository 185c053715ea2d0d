/* The head of a /proc/<pid>/stat line, parsed one way for the facts (facts_parse.c) and the walk (linux_proc.c).
 *
 * Why a header of static functions: facts_parse.c is built on every platform, linux_proc.c also into the native
 * programs, which do not link facts_parse.c; each file gets its own copy of the same code.
 * The including file defines _GNU_SOURCE on Linux (memrchr) before its first include.
 */
#ifndef PROCTREE_CORE_STAT_PARSE_H
#define PROCTREE_CORE_STAT_PARSE_H

#include "proctree.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* Returns 0 with *out set and *s moved past one decimal (an optional '-', then digits) in s..end, or -EIO if there
 * is none or it does not fit an int64_t (the kernel prints no field this parser reads that large). */
static inline int pt_parse_decimal(const char **s, const char *end, int64_t *out)
{
    const char *p = *s;
    int neg = p < end && *p == '-';
    uint64_t v = 0;
    int digits = 0;
    if (neg)
        p++;
    while (p < end && *p >= '0' && *p <= '9') {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return -EIO; /* checked before the step, so nothing wraps */
        v = v * 10 + d;
        digits++;
        p++;
    }
    if (digits == 0)
        return -EIO;
    *out = neg ? -(int64_t)v : (int64_t)v;
    *s = p;
    return 0;
}

/* Returns the last ')' of buf[0..len), or NULL if none. */
static inline const char *last_close_paren(const char *buf, size_t len)
{
#ifdef __linux__
    return memrchr(buf, ')', len);
#else
    for (const char *q = buf + len; q > buf; q--) /* memrchr is a GNU extension */
        if (q[-1] == ')')
            return q - 1;
    return NULL;
#endif
}

/* Returns 0 with *pid, name[0..PT_NAME_MAX) (truncated, NUL-padded), *state and *rest (the text at field 4) from the
 * head of one /proc/<pid>/stat line buf[0..len), or -EIO if it is malformed. */
static inline int pt_parse_stat_head(const char *buf, size_t len, int32_t *pid, char *name, char *state,
                                     const char **rest)
{
    const char *end = buf + len;
    const char *open = memchr(buf, '(', len);
    const char *close = last_close_paren(buf, len);
    const char *p = buf;
    int64_t v;

    if (!open || !close || close < open || open == buf || open[-1] != ' ')
        return -EIO;
    if (pt_parse_decimal(&p, open - 1, &v) != 0 || p != open - 1 || v <= 0 || v > INT32_MAX)
        return -EIO;
    *pid = (int32_t)v;

    size_t name_len = (size_t)(close - open - 1);
    if (name_len > PT_NAME_MAX - 1)
        name_len = PT_NAME_MAX - 1;
    memcpy(name, open + 1, name_len);
    memset(name + name_len, 0, PT_NAME_MAX - name_len);

    p = close + 1;
    if (end - p < 3 || p[0] != ' ' || p[2] != ' ' || p[1] < 'A' || p[1] > 'z')
        return -EIO;
    *state = p[1];
    *rest = p + 3; /* at field 4 */
    return 0;
}

#endif
