/* declog_read.c — see declog_read.h. A small recursive-descent reader for
 * the one JSON shape the writer makes: an object of strings, unsigned
 * integers, null and (dest) one nested object. */
#include "util/declog_read.h"

#include <errno.h>
#include <string.h>

#include "util/declog.h"

struct cur {
    const char *p;
    int depth;
};

static void ws(struct cur *c)
{
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n')
        c->p++;
}

static int hexval(char h)
{
    if (h >= '0' && h <= '9')
        return h - '0';
    if (h >= 'a' && h <= 'f')
        return h - 'a' + 10;
    if (h >= 'A' && h <= 'F')
        return h - 'A' + 10;
    return -1;
}

/* A string into out (cut to len - 1 bytes; NULL: skipped). \u escapes
 * beyond ASCII become '?': names here are ASCII. */
static int str(struct cur *c, char *out, size_t len)
{
    size_t n = 0;
    if (*c->p != '"')
        return -EINVAL;
    c->p++;
    for (;;) {
        char ch = *c->p++;
        if (ch == '\0' || (unsigned char)ch < 0x20)
            return -EINVAL;
        if (ch == '"')
            break;
        if (ch == '\\') {
            char e = *c->p++;
            switch (e) {
            case '"': case '\\': case '/': ch = e; break;
            case 'n': ch = '\n'; break;
            case 't': ch = '\t'; break;
            case 'r': ch = '\r'; break;
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'u': {
                int v = 0;
                for (int i = 0; i < 4; i++) {
                    int h = hexval(*c->p++);
                    if (h < 0)
                        return -EINVAL;
                    v = v * 16 + h;
                }
                ch = v < 0x80 ? (char)v : '?';
                break;
            }
            default:
                return -EINVAL;
            }
        }
        if (out != NULL && n + 1 < len)
            out[n++] = ch;
    }
    if (out != NULL && len > 0)
        out[n] = '\0';
    return 0;
}

static int num(struct cur *c, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = c->p;
    while (*c->p >= '0' && *c->p <= '9') {
        unsigned d = (unsigned)(*c->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
        c->p++;
    }
    if (c->p == s)
        return -EINVAL;
    *out = v;
    return 0;
}

static int lit(struct cur *c, const char *w)
{
    size_t n = strlen(w);
    if (strncmp(c->p, w, n) != 0)
        return -EINVAL;
    c->p += n;
    return 0;
}

static int object(struct cur *c, struct rl_declog_entry *e, bool top,
                  unsigned *seen);

/* Any value, skipped (fields this version does not know). */
static int skip(struct cur *c)
{
    uint64_t u;
    switch (*c->p) {
    case '"':
        return str(c, NULL, 0);
    case 'n':
        return lit(c, "null");
    case 't':
        return lit(c, "true");
    case 'f':
        return lit(c, "false");
    case '{':
        return object(c, NULL, false, NULL);
    case '-':
        c->p++;
        /* fall through */
    default:
        if (num(c, &u) < 0)
            return -EINVAL;
        if (*c->p == '.') {
            c->p++;
            if (num(c, &u) < 0)
                return -EINVAL;
        }
        return 0;
    }
}

enum {
    F_MONO = 1u << 0, F_PID = 1u << 1, F_TID = 1u << 2, F_USER = 1u << 3,
    F_RULE = 1u << 4, F_DEST = 1u << 5, F_CALL = 1u << 6, F_LIMIT = 1u << 7,
    F_UNITS = 1u << 8, F_VERDICT = 1u << 9, F_WAIT = 1u << 10,
    F_NAME = 1u << 11, F_PORT = 1u << 12,
    F_NEEDED = F_MONO | F_USER | F_DEST | F_LIMIT | F_UNITS | F_VERDICT |
               F_WAIT,
};

static int field(struct cur *c, struct rl_declog_entry *e, bool top,
                 const char *key, unsigned *seen)
{
    if (e == NULL)
        return skip(c);
    if (top) {
        if (strcmp(key, "mono_ns") == 0)
            return *seen |= F_MONO, num(c, &e->mono_ns);
        if (strcmp(key, "pid") == 0)
            return *seen |= F_PID, num(c, &e->pid);
        if (strcmp(key, "tid") == 0)
            return *seen |= F_TID, num(c, &e->tid);
        if (strcmp(key, "units") == 0)
            return *seen |= F_UNITS, num(c, &e->units);
        if (strcmp(key, "wait_ns") == 0)
            return *seen |= F_WAIT, num(c, &e->wait_ns);
        if (strcmp(key, "user") == 0)
            return *seen |= F_USER, str(c, e->user, sizeof e->user);
        if (strcmp(key, "call") == 0)
            return *seen |= F_CALL, str(c, e->call, sizeof e->call);
        if (strcmp(key, "limit") == 0)
            return *seen |= F_LIMIT, str(c, e->limit, sizeof e->limit);
        if (strcmp(key, "method") == 0)
            return str(c, e->method, sizeof e->method);
        if (strcmp(key, "target") == 0)
            return str(c, e->target, sizeof e->target);
        if (strcmp(key, "reason") == 0)
            return str(c, e->reason, sizeof e->reason);
        if (strcmp(key, "status") == 0)
            return num(c, &e->status);
        if (strcmp(key, "site") == 0) {
            if (*c->p == 'n') {
                e->site[0] = '\0';
                return lit(c, "null");
            }
            return str(c, e->site, sizeof e->site);
        }
        if (strcmp(key, "moved_ns") == 0)
            return num(c, &e->moved_ns);
        if (strcmp(key, "interval_ns") == 0)
            return num(c, &e->interval_ns);
        if (strcmp(key, "rule") == 0) {
            *seen |= F_RULE;
            if (*c->p == 'n') {
                e->rule[0] = '\0';
                return lit(c, "null");
            }
            return str(c, e->rule, sizeof e->rule);
        }
        if (strcmp(key, "verdict") == 0) {
            char v[16];
            int r = str(c, v, sizeof v);
            if (r < 0)
                return r;
            *seen |= F_VERDICT;
            if (strcmp(v, "allow") == 0)
                e->verdict = RL_DECLOG_ALLOW;
            else if (strcmp(v, "deny") == 0)
                e->verdict = RL_DECLOG_DENY;
            else if (strcmp(v, "delay") == 0)
                e->verdict = RL_DECLOG_DELAY;
            else if (strcmp(v, "pause") == 0)
                e->verdict = RL_DECLOG_PAUSE;
            else if (strcmp(v, "respond") == 0)
                e->verdict = RL_DECLOG_RESPOND;
            else
                return -EINVAL;
            return 0;
        }
        if (strcmp(key, "dest") == 0) {
            unsigned inner = 0;
            int r = object(c, e, false, &inner);
            if (r < 0 || !(inner & F_NAME))
                return -EINVAL;
            *seen |= F_DEST;
            return 0;
        }
        return skip(c);
    }
    /* Inside dest. */
    if (strcmp(key, "name") == 0) {
        *seen |= F_NAME;
        if (*c->p == 'n') {
            strcpy(e->dest, "?");
            return lit(c, "null");
        }
        return str(c, e->dest, sizeof e->dest);
    }
    if (strcmp(key, "port") == 0)
        return *seen |= F_PORT, num(c, &e->port);
    return skip(c);
}

static int object(struct cur *c, struct rl_declog_entry *e, bool top,
                  unsigned *seen)
{
    if (*c->p != '{' || ++c->depth > 8)
        return -EINVAL;
    c->p++;
    ws(c);
    if (*c->p == '}') {
        c->p++;
        c->depth--;
        return 0;
    }
    for (;;) {
        char key[32];
        ws(c);
        if (str(c, key, sizeof key) < 0)
            return -EINVAL;
        ws(c);
        if (*c->p++ != ':')
            return -EINVAL;
        ws(c);
        if (field(c, e, top, key, seen) < 0)
            return -EINVAL;
        ws(c);
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p == '}') {
            c->p++;
            c->depth--;
            return 0;
        }
        return -EINVAL;
    }
}

int rl_declog_parse(const char *line, struct rl_declog_entry *e)
{
    struct cur c = {line, 0};
    unsigned seen = 0;
    memset(e, 0, sizeof *e);
    ws(&c);
    if (object(&c, e, true, &seen) < 0)
        return -EINVAL;
    ws(&c);
    if (*c.p != '\0' || (seen & F_NEEDED) != F_NEEDED)
        return -EINVAL;
    return 0;
}
