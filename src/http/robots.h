/* robots.h — the Crawl-delay a robots.txt gives one user agent (SPEC §14).
 *
 * An incremental reader of a robots.txt body, fed its bytes in pieces of
 * any size as they pass; the answer never depends on where the pieces are
 * cut. Only the first RL_ROBOTS_BODY_MAX bytes are read. The product token
 * of the request's User-Agent is given at init, so the state is the
 * answer so far and one line buffer: O(1), no allocation, no I/O.
 *
 * Groups follow RFC 9309 §2.1 and §2.2.1: a group is one or more
 * consecutive `user-agent` lines and the records after them; a rule record
 * (`allow`, `disallow`, `crawl-delay`) ends the run of user-agent lines, so
 * the next user-agent line starts a new group; blank lines, `sitemap` and
 * unknown keys change nothing. A group matches when one of its user-agent
 * names equals the product token, case-insensitively; else the `*` groups
 * apply. RFC 9309 leaves `crawl-delay` out; where it is silent this reader
 * chooses: the first valid `crawl-delay` (in file order) of all matching
 * groups merged; a group that names the token, even with no crawl-delay,
 * hides the `*` groups' (as it hides their rules); a value is decimal
 * seconds (`5`, `0.5`, `10.`, `.5`), cut at nanoseconds and clamped at
 * RL_ROBOTS_DELAY_MAX_NS; anything else on the line (a sign, a unit, a
 * second number) makes it malformed and it is ignored.
 *
 * A name, on either side, is the leading run of letters, digits, `-` and
 * `_` (RFC 9309's identifier, with digits, which real tokens carry): so
 * `Scrapy/2.8 (+https://scrapy.org)` is `Scrapy`, and a robots.txt line
 * `User-agent: Scrapy/1.0` names it too. Lines end at CR, LF or CRLF; `#`
 * starts a comment; keys are case-insensitive; a UTF-8 BOM may start the
 * body; a line longer than RL_ROBOTS_LINE_MAX is skipped whole. */
#ifndef RL_ROBOTS_H
#define RL_ROBOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RL_ROBOTS_BODY_MAX 65536u /* bytes of a robots.txt read (SPEC §14) */
#define RL_ROBOTS_LINE_MAX 512u   /* a longer line is skipped whole */
#define RL_ROBOTS_TOKEN_MAX 64u   /* a longer product token matches only `*` */
/* A day: a robots.txt is obeyed for a day (SPEC §14); the caller cuts at
 * max_crawl_delay anyway. */
#define RL_ROBOTS_DELAY_MAX_NS (86400ull * 1000000000ull)

struct rl_robots {
    char token[RL_ROBOTS_TOKEN_MAX];
    uint8_t token_len;        /* 0: no product token, only `*` groups apply */
    bool started;             /* a line ended: a BOM is no longer possible */
    bool skipping;            /* the current line outgrew the buffer */
    bool cut;                 /* bytes past RL_ROBOTS_BODY_MAX were offered */
    bool in_agents;           /* the last record was a user-agent line */
    bool group_named;         /* the current group names the product token */
    bool group_star;          /* the current group is a `*` group */
    bool named_seen;          /* a group naming the token has a record */
    bool named_has, star_has; /* a delay was found for either */
    uint64_t named_ns, star_ns;
    uint32_t seen; /* body bytes taken, at most RL_ROBOTS_BODY_MAX */
    uint32_t line_len;
    char line[RL_ROBOTS_LINE_MAX];
};

/* Starts reading a robots.txt for the request whose User-Agent value is
 * user_agent[0..len) (NULL or empty: no product token). */
void rl_robots_init(struct rl_robots *r, const char *user_agent, size_t len);

/* Takes the next body bytes buf[0..n). Returns false once bytes beyond the
 * first RL_ROBOTS_BODY_MAX were offered: the rest is ignored and the
 * answer is final (the line the cap cut is not read). */
bool rl_robots_feed(struct rl_robots *r, const uint8_t *buf, size_t n);

/* The body ended: a last line without a line end is read, unless the cap
 * cut it. Call once, before rl_robots_delay's final answer. */
void rl_robots_finish(struct rl_robots *r);

/* The Crawl-delay for the token: stores it in nanoseconds and returns
 * true, or returns false when the matching groups give none. */
bool rl_robots_delay(const struct rl_robots *r, uint64_t *ns);

#endif
