/* Environment and argument blocks: the parsers every platform shares, and the argument checks in front of the
 * platform's environment reads (pt_env_find, pt_env_scan).
 *
 * Why this shape:
 * - A block is NUL-separated entries exactly as the kernel holds them: any
 *   bytes, no encoding, maybe no final NUL (a process can rewrite the area).
 *   Nothing here decodes, and nothing reads outside blk[0..len).
 * - A variable is found only at the start of an entry ("KEY=..."): never
 *   inside another entry's value, never as the tail of a longer name. The
 *   first entry with that name wins, as getenv(3) reads it.
 * - Linux streams /proc/<pid>/environ through a small scratch buffer
 *   (pt_stream_find) so a sweep of thousands of processes never holds a
 *   whole environment; the in-memory search (pt_block_find) is written
 *   separately, and the tests hold the two to the same answers.
 * - pt_procargs2_split reads macOS's KERN_PROCARGS2 area as psutil does
 *   (psutil/arch/osx/proc.c): the NUL padding after the exec path is skipped,
 *   so an empty leading argv string cannot be told from padding.
 */
#include "platform.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* Returns 0 if key[0..keylen) can name a variable (not empty, no '=' or NUL) and valcap has room for a NUL, else -EINVAL. */
static int check_key(const char *key, size_t keylen, size_t valcap)
{
    if (!key || keylen == 0 || valcap == 0)
        return -EINVAL;
    if (memchr(key, '=', keylen) || memchr(key, '\0', keylen))
        return -EINVAL;
    return 0;
}

/* Returns 0 with val emptied if a search for key may start (check_key, and a scratch to read through), else -EINVAL. */
static int check_search(const char *key, size_t keylen, char *val, size_t valcap, const char *scratch,
                        size_t scratchcap)
{
    if (check_key(key, keylen, valcap) != 0 || !scratch || scratchcap == 0)
        return -EINVAL;
    val[0] = '\0';
    return 0;
}

/* Returns the value length after copying v[0..vlen) NUL-terminated into val, or -ENAMETOOLONG if it does not fit valcap. */
static int copy_value(const char *v, size_t vlen, char *val, size_t valcap)
{
    if (vlen >= valcap || vlen > INT32_MAX)
        return -ENAMETOOLONG;
    memcpy(val, v, vlen);
    val[vlen] = '\0';
    return (int)vlen;
}

int pt_block_find(const char *blk, size_t len, const char *key, size_t keylen, char *val, size_t valcap)
{
    int rc = check_key(key, keylen, valcap);
    if (rc != 0)
        return rc;
    val[0] = '\0';
    size_t pos = 0;
    while (pos < len) {
        const char *entry = blk + pos;
        const char *nul = memchr(entry, '\0', len - pos);
        size_t elen = nul ? (size_t)(nul - entry) : len - pos;
        if (elen > keylen && entry[keylen] == '=' && memcmp(entry, key, keylen) == 0)
            return copy_value(entry + keylen + 1, elen - keylen - 1, val, valcap);
        pos += elen + 1;
    }
    return -ENODATA;
}

/* Where the streaming search stands between two bytes. */
enum scan_state {
    S_NAME,  /* matched key[0..matched) from the start of the entry */
    S_SKIP,  /* this entry is not it: skip to its NUL */
    S_VALUE, /* found key=: copying the value */
};

struct scanner {
    const char *key;
    size_t keylen, matched;
    char *val;
    size_t valcap, vlen;
    enum scan_state state;
};

/* Returns 1 with the value complete in s->val, 0 to read on, or -ENAMETOOLONG; consumes buf[0..n). */
static int scan_chunk(struct scanner *s, const char *buf, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s->state == S_SKIP) {
            const char *nul = memchr(buf + i, '\0', n - i);
            if (!nul)
                return 0;
            i = (size_t)(nul - buf) + 1;
            s->state = S_NAME;
            s->matched = 0;
        } else if (s->state == S_VALUE) {
            const char *start = buf + i;
            const char *nul = memchr(start, '\0', n - i);
            size_t take = nul ? (size_t)(nul - start) : n - i;
            if (take >= s->valcap - s->vlen)
                return -ENAMETOOLONG; /* the NUL must fit too */
            memcpy(s->val + s->vlen, start, take);
            s->vlen += take;
            if (nul)
                return 1;
            i = n;
        } else {
            char c = buf[i++];
            if (c == '\0') {
                s->matched = 0; /* an entry that ended before key= was complete */
            } else if (s->matched < s->keylen) {
                if (c == s->key[s->matched])
                    s->matched++;
                else
                    s->state = S_SKIP;
            } else {
                s->state = c == '=' ? S_VALUE : S_SKIP;
            }
        }
    }
    return 0;
}

int pt_stream_find(int fd, const char *key, size_t keylen, char *val, size_t valcap, char *scratch, size_t scratchcap,
                   size_t limit)
{
    struct scanner s = {key, keylen, 0, val, valcap, 0, S_NAME};
    size_t total = 0;
    int rc = check_search(key, keylen, val, valcap, scratch, scratchcap);
    if (rc != 0)
        return rc;
    for (;;) {
        ssize_t got = read(fd, scratch, scratchcap);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (got == 0)
            break;
        if (total >= limit)
            return -E2BIG; /* more than limit bytes, and key= not complete in them */
        size_t use = (size_t)got;
        if (use > limit - total)
            use = limit - total;
        rc = scan_chunk(&s, scratch, use);
        if (rc == 1) {
            val[s.vlen] = '\0';
            return (int)s.vlen;
        }
        if (rc < 0)
            return rc;
        total += use;
        if (use < (size_t)got)
            return -E2BIG;
    }
    if (s.state == S_VALUE) { /* the last entry had no NUL: it ends with the block */
        val[s.vlen] = '\0';
        return (int)s.vlen;
    }
    val[0] = '\0';
    return -ENODATA;
}

/* Returns the offset just past the NUL of the string at blk[pos..len), or 0 if it has none (0 is never past a NUL). */
static size_t past_string(const char *blk, size_t len, size_t pos)
{
    if (pos >= len)
        return 0;
    const char *nul = memchr(blk + pos, '\0', len - pos);
    return nul ? (size_t)(nul - blk) + 1 : 0;
}

int pt_procargs2_split(const char *blk, size_t len, size_t *argv_off, size_t *argv_len, size_t *env_off,
                       size_t *env_len)
{
    int argc;
    *argv_off = *argv_len = *env_off = *env_len = 0;
    if (!blk || len < sizeof argc)
        return -EINVAL;
    memcpy(&argc, blk, sizeof argc); /* unaligned-safe */
    if (argc < 0 || (size_t)argc > len - sizeof argc)
        return -EINVAL;                              /* every argv string takes a byte at least */
    size_t pos = past_string(blk, len, sizeof argc); /* the exec path */
    if (pos == 0)
        return -EINVAL;
    while (pos < len && blk[pos] == '\0')
        pos++; /* the path's alignment padding */
    size_t argv_start = pos;
    for (int i = 0; i < argc; i++) {
        pos = past_string(blk, len, pos);
        if (pos == 0)
            return -EINVAL; /* fewer strings than argc: truncated */
    }
    size_t env_start = pos;
    /* The environment runs to an empty string or to the end (a restricted
     * process's area ends after argv: no environment at all). */
    while (pos < len && blk[pos] != '\0') {
        pos = past_string(blk, len, pos);
        if (pos == 0)
            return -EINVAL; /* an entry cut short */
    }
    *argv_off = argv_start;
    *argv_len = env_start - argv_start;
    *env_off = env_start;
    *env_len = pos - env_start;
    return 0;
}

/* Returns -EINVAL for bad arguments (before pid is looked at), else what the platform's pt_env_find_checked returns. */
int pt_env_find(int32_t pid, const char *key, size_t keylen, char *val, size_t valcap, char *scratch, size_t scratchcap)
{
    int rc = check_search(key, keylen, val, valcap, scratch, scratchcap);
    if (rc != 0)
        return rc;
    return pt_env_find_checked(pid, key, keylen, val, valcap, scratch, scratchcap);
}

int pt_env_scan(const int32_t *pids, int n, const char *key, size_t keylen, int32_t *status, char *vals, size_t slot,
                char *scratch, size_t scratchcap)
{
    if (n < 0 || (n > 0 && (!pids || !status || !vals)) || !scratch || scratchcap == 0)
        return -EINVAL;
    int rc = check_key(key, keylen, slot);
    if (rc != 0)
        return rc;
    if (n > 0 && slot > SIZE_MAX / (size_t)n)
        return -EINVAL;
    for (int i = 0; i < n; i++) {
        char *val = vals + (size_t)i * slot;
        val[0] = '\0';
        status[i] = pt_env_find(pids[i], key, keylen, val, slot, scratch, scratchcap);
    }
    return 0;
}
