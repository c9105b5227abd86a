/* logfile.c — see logfile.h. */
#include "cli/logfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rl_logfile_read(const char *cmd, const char *path, struct rl_logfile *lf)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    char *line = NULL;
    size_t cap = 0, alloc = 0, lineno = 0;
    ssize_t len;
    int r = 0;

    *lf = (struct rl_logfile){0};
    if (f == NULL) {
        r = -errno;
        fprintf(stderr, "rlshim %s: %s: %s\n", cmd, path, strerror(-r));
        return r;
    }
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (len == 0)
            continue;
        if (lf->n == alloc) {
            size_t na = alloc ? alloc * 2 : 256;
            struct rl_logline *nv = realloc(lf->v, na * sizeof *nv);
            if (nv == NULL) {
                r = -ENOMEM;
                break;
            }
            lf->v = nv;
            alloc = na;
        }
        struct rl_logline *l = &lf->v[lf->n];
        /* A line cut by a full disk, or not ours: counted and skipped. */
        if (rl_declog_parse(line, &l->e) < 0) {
            lf->bad++;
            continue;
        }
        l->raw = strdup(line);
        if (l->raw == NULL) {
            r = -ENOMEM;
            break;
        }
        l->lineno = lineno;
        lf->n++;
    }
    if (r == 0 && ferror(f))
        r = -EIO;
    free(line);
    if (f != stdin)
        fclose(f);
    if (r < 0) {
        fprintf(stderr, "rlshim %s: %s: %s\n", cmd, path, strerror(-r));
        rl_logfile_free(lf);
    } else if (lf->bad > 0) {
        fprintf(stderr, "rlshim %s: %s: %zu line%s not understood, skipped\n",
                cmd, path, lf->bad, lf->bad == 1 ? "" : "s");
    }
    return r;
}

void rl_logfile_free(struct rl_logfile *lf)
{
    for (size_t i = 0; i < lf->n; i++)
        free(lf->v[i].raw);
    free(lf->v);
    *lf = (struct rl_logfile){0};
}
