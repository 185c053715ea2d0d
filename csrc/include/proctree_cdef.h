/* cffi declarations for the proctree C core. Mirrors csrc/include/proctree.h.
 * No preprocessor directives here: cffi's cdef parser does not run cpp.
 * Every function returns 0 (or a count) on success and -errno on failure. */

struct pt_proc {
    int32_t pid;
    int32_t ppid;
    int32_t pgid;
    int32_t sid;
    uint32_t uid;
    char state;
    char leader_state;
    uint8_t threaded;
    char _pad;
    uint64_t start_time;
    char name[64];
};

int pt_snapshot(struct pt_proc *out, int cap);
int pt_proc(int32_t pid, struct pt_proc *out);
int pt_children(int32_t pid, int32_t *out, int cap);
int pt_children_of(const struct pt_proc *parent, int32_t *out, int cap);
int pt_verified_children_of(const struct pt_proc *parent, struct pt_proc *out, int cap);
int pt_descendants_of(const struct pt_proc *root, struct pt_proc *out, int cap);
int pt_now(uint64_t *out);
int pt_environ(int32_t pid, char *buf, size_t cap);
int pt_cmdline(int32_t pid, char *buf, size_t cap);
int pt_env_find(int32_t pid, const char *key, size_t keylen, char *val, size_t valcap, char *scratch,
                size_t scratchcap);
int pt_env_scan(const int32_t *pids, int n, const char *key, size_t keylen, int32_t *status, char *vals, size_t slot,
                char *scratch, size_t scratchcap);
int pt_block_find(const char *blk, size_t len, const char *key, size_t keylen, char *val, size_t valcap);
int pt_stream_find(int fd, const char *key, size_t keylen, char *val, size_t valcap, char *scratch, size_t scratchcap,
                   size_t limit);
int pt_procargs2_split(const char *blk, size_t len, size_t *argv_off, size_t *argv_len, size_t *env_off,
                       size_t *env_len);
