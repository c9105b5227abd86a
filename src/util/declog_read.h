/* declog_read.h — reading decision-log lines back (rlshim verify and
 * timeline, and the tests). Strict about the fields it needs, lenient
 * about fields it does not know (a later version may add some). */
#ifndef RL_UTIL_DECLOG_READ_H
#define RL_UTIL_DECLOG_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "util/declog.h"

struct rl_declog_entry {
    uint64_t mono_ns, pid, tid, units, wait_ns, port;
    int verdict; /* enum rl_declog_verdict */
    char user[256];
    char rule[256]; /* "" when null */
    char site[256]; /* the site's label ("" when null) */
    char dest[256];
    char call[32];
    char limit[16];
    /* call = request (SPEC §11): "" when the line has none. */
    char method[RL_DECLOG_REQ_MAX + 1];
    char target[RL_DECLOG_REQ_MAX + 1];
    /* A pause or the pace held it (SPEC §12, §14): "retry_after",
     * "backoff", "latency" or "crawl_delay"; "" else. */
    char reason[16];
    /* verdict pause (a response that paused its budget): its status. */
    uint64_t status;
    /* A request decided again at its turn (a pause came meanwhile): that
     * earlier turn, which it did not go at; 0: none. */
    uint64_t moved_ns;
    /* A request whose destination keeps a pace: its interval then; 0:
     * none. */
    uint64_t interval_ns;
};

/* Parse one line (without or with its "\n"). Returns 0, or -EINVAL when
 * it is not a decision-log object (a cut line, another format). */
int rl_declog_parse(const char *line, struct rl_declog_entry *e);

#endif
