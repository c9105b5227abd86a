/* logfile.h — a decision log read whole (rlshim verify, rlshim timeline). */
#ifndef RL_CLI_LOGFILE_H
#define RL_CLI_LOGFILE_H

#include <stddef.h>

#include "util/declog_read.h"

struct rl_logline {
    struct rl_declog_entry e;
    char *raw;     /* the line as written, without "\n" */
    size_t lineno; /* 1-based */
};

struct rl_logfile {
    struct rl_logline *v;
    size_t n;
    size_t bad; /* lines that were not decision-log objects (skipped) */
};

/* Read `path` ("-": stdin). Errors go to stderr as "rlshim CMD: ...";
 * returns 0 or -errno. */
int rl_logfile_read(const char *cmd, const char *path, struct rl_logfile *lf);
void rl_logfile_free(struct rl_logfile *lf);

#endif
