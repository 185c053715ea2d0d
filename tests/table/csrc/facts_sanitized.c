/* The facts' C under AddressSanitizer and UBSan (tests/table/test_facts_sanitized.py builds and runs it):
 * the pure parsers on 300,000 mutated stat and status texts, then the readers over this machine's /proc
 * with every size of string buffer from none to 64 KiB, and their argument checks. Prints "ok ..." or fails.
 */
#include "proctree.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returns 0 after parsing mutated copies of a stat line and a status text (a crash is the failure). */
static int fuzz_parsers(void)
{
    const char *seed = "4242 (py (x) 3) S 1 4242 4242 34816 -1 4194560 10 0 0 0 3 1 0 0 20 0 3 0 9000 1234567 89 "
                       "18446744073709551615 1 1\n";
    const char *st = "Name:\tx\nTgid:\t5\nUid:\t1\t2\t3\t4\n";
    const char alpha[] = "0123456789 ()-\nSZ\t:Uid:Tgid";
    srand(7);
    for (int i = 0; i < 300000; i++) {
        size_t n = (size_t)(rand() % 140);
        char *b = malloc(n ? n : 1);
        const char *src = (i & 1) ? seed : st;
        size_t sl = strlen(src);
        for (size_t j = 0; j < n; j++)
            b[j] = (rand() % 4) ? src[j % sl] : alpha[rand() % (int)(sizeof alpha - 1)];
        struct pt_facts f;
        int32_t tgid;
        uint32_t uids[3];
        (void)pt_parse_stat_facts(b, n, &f);
        (void)pt_parse_status_ids(b, n, &tgid, uids);
        free(b);
    }
    return 0;
}

/* Returns 0 if the readers kept every string inside the buffer and refused bad arguments, else 1. */
static int read_live(void)
{
    static struct pt_facts rows[8192];
    static char buf[1 << 16];
    int total = 0, nobufs = 0;
    for (size_t cap = 0; cap < sizeof buf; cap = cap * 2 + 7) {
        int n = pt_facts_table(PT_FACT_ALL, rows, 8192, cap ? buf : NULL, cap);
        if (n < 0) {
            printf("pt_facts_table: %d\n", n);
            return 1;
        }
        for (int i = 0; i < n; i++) {
            const struct pt_facts *r = &rows[i];
            nobufs += r->status == -ENOBUFS;
            if (r->status == 0 && (r->cmdline_off + (size_t)r->cmdline_len > cap ||
                                   r->exe_off + (size_t)r->exe_len > cap || r->cwd_off + (size_t)r->cwd_len > cap)) {
                puts("a string outside the buffer");
                return 1;
            }
        }
        total += n;
    }
    int32_t pids[6] = {1, 2, 0, -5, 999999, 3};
    uint64_t starts[6] = {0, 0, 0, 0, 0, 0};
    if (pt_facts_scan(pids, starts, 6, PT_FACT_ALL, rows, buf, 100) != 0 ||
        pt_facts_scan(pids, NULL, 6, PT_FACT_ALL, rows, NULL, 0) != 0 ||
        pt_facts_scan(pids, NULL, -1, PT_FACT_ALL, rows, buf, 1) != -EINVAL ||
        pt_facts_table(32, rows, 10, buf, 1) != -EINVAL || pt_facts_table(PT_FACT_ALL, rows, 3, buf, 1) != -ENOBUFS ||
        pt_facts(1, NULL, 64, rows, buf, 1) != -EINVAL || pt_facts(0, NULL, 0, rows, buf, 1) != -ESRCH) {
        puts("an argument check");
        return 1;
    }
    printf("ok %d rows, %d -ENOBUFS\n", total, nobufs);
    return 0;
}

int main(void)
{
    return fuzz_parsers() || read_live();
}
