/* robots.c — the Crawl-delay of a robots.txt, read line by line as it
 * passes. Hand-written: Debian ships no C robots.txt parser (its parsers
 * are Perl, Python and Ruby modules), and a preloaded library can link
 * none of those. */
#include "http/robots.h"

#include <string.h>

#include "http/http.h"

#define NS 1000000000ull
#define MAX_S (RL_ROBOTS_DELAY_MAX_NS / NS)

static bool is_ws(uint8_t c)
{
    return c == ' ' || c == '\t';
}

static bool is_name(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* The length of the name p[0..n) starts with. */
static size_t name_len(const char *p, size_t n)
{
    size_t i = 0;

    while (i < n && is_name((uint8_t)p[i]))
        i++;
    return i;
}

static bool same_lower(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (rl_http_lower((uint8_t)a[i]) != rl_http_lower((uint8_t)b[i]))
            return false;
    }
    return true;
}

void rl_robots_init(struct rl_robots *r, const char *user_agent, size_t len)
{
    size_t at = 0, n;

    memset(r, 0, sizeof *r);
    if (user_agent == NULL)
        return;
    while (at < len && is_ws((uint8_t)user_agent[at]))
        at++;
    n = name_len(user_agent + at, len - at);
    if (n > RL_ROBOTS_TOKEN_MAX)
        return;
    memcpy(r->token, user_agent + at, n);
    r->token_len = (uint8_t)n;
}

/* Decimal seconds, the whole of v[0..n), to nanoseconds: digits, at most
 * one point, at least one digit; a huge value is clamped. */
static bool seconds(const char *v, size_t n, uint64_t *ns)
{
    uint64_t s = 0, frac = 0, scale = NS / 10;
    size_t i = 0, digits = 0;

    for (; i < n && v[i] >= '0' && v[i] <= '9'; i++, digits++) {
        if (s <= MAX_S)
            s = s * 10 + (uint64_t)(v[i] - '0');
    }
    if (i < n && v[i] == '.') {
        for (i++; i < n && v[i] >= '0' && v[i] <= '9'; i++, digits++) {
            frac += (uint64_t)(v[i] - '0') * scale;
            scale /= 10;
        }
    }
    if (i != n || digits == 0)
        return false;
    *ns = s >= MAX_S ? RL_ROBOTS_DELAY_MAX_NS : s * NS + frac;
    return true;
}

static void user_agent(struct rl_robots *r, const char *v, size_t n)
{
    size_t len;

    if (!r->in_agents) {
        r->in_agents = true;
        r->group_named = r->group_star = false;
    }
    /* `*` alone, or followed by more words (as Google reads it). */
    if (n > 0 && v[0] == '*' && (n == 1 || is_ws((uint8_t)v[1]))) {
        r->group_star = true;
        return;
    }
    len = name_len(v, n);
    if (len > 0 && len == r->token_len && same_lower(v, r->token, len))
        r->group_named = true;
}

static void rule(struct rl_robots *r, bool delay, const char *v, size_t n)
{
    uint64_t ns;

    r->in_agents = false;
    if (r->group_named)
        r->named_seen = true;
    if (!delay || !(r->group_named || r->group_star) || !seconds(v, n, &ns))
        return;
    if (r->group_named && !r->named_has) {
        r->named_has = true;
        r->named_ns = ns;
    }
    if (r->group_star && !r->star_has) {
        r->star_has = true;
        r->star_ns = ns;
    }
}

static bool key_is(const char *k, size_t n, const char *want)
{
    return n == strlen(want) && same_lower(k, want, n);
}

/* One whole line (without its line end). */
static void line_done(struct rl_robots *r)
{
    const char *p = r->line, *colon, *hash;
    size_t n = r->line_len, k;

    if (!r->started && n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) {
        p += 3;
        n -= 3;
    }
    hash = memchr(p, '#', n);
    if (hash != NULL)
        n = (size_t)(hash - p);
    colon = memchr(p, ':', n);
    if (colon == NULL)
        return;
    k = (size_t)(colon - p);
    n -= k + 1;
    while (k > 0 && is_ws((uint8_t)p[k - 1]))
        k--;
    while (k > 0 && is_ws((uint8_t)*p)) {
        p++;
        k--;
    }
    colon++;
    while (n > 0 && is_ws((uint8_t)*colon)) {
        colon++;
        n--;
    }
    while (n > 0 && is_ws((uint8_t)colon[n - 1]))
        n--;
    if (key_is(p, k, "user-agent"))
        user_agent(r, colon, n);
    else if (key_is(p, k, "crawl-delay"))
        rule(r, true, colon, n);
    else if (key_is(p, k, "allow") || key_is(p, k, "disallow"))
        rule(r, false, colon, n);
}

bool rl_robots_feed(struct rl_robots *r, const uint8_t *buf, size_t n)
{
    size_t room = RL_ROBOTS_BODY_MAX - r->seen;

    if (n > room) {
        n = room;
        r->cut = true;
    }
    r->seen += (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = buf[i];

        if (b == '\r' || b == '\n') {
            /* CRLF is a line and an empty one: an empty line is nothing. */
            if (!r->skipping)
                line_done(r);
            r->skipping = false;
            r->started = true;
            r->line_len = 0;
        } else if (r->skipping) {
            continue;
        } else if (r->line_len == RL_ROBOTS_LINE_MAX) {
            r->skipping = true;
        } else {
            r->line[r->line_len++] = (char)b;
        }
    }
    return !r->cut;
}

void rl_robots_finish(struct rl_robots *r)
{
    if (!r->cut && !r->skipping)
        line_done(r);
    r->skipping = false;
    r->started = true;
    r->line_len = 0;
}

bool rl_robots_delay(const struct rl_robots *r, uint64_t *ns)
{
    if (r->named_seen) {
        *ns = r->named_ns;
        return r->named_has;
    }
    *ns = r->star_ns;
    return r->star_has;
}
