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
