/* adapt.h — politeness that adapts (SPEC §14, §12): the arithmetic of one
 * destination's pace. Pure: no I/O, no clock, no globals, no atomics; the
 * caller passes `now` (CLOCK_MONOTONIC nanoseconds) and everything the
 * config says (struct rl_adapt_conf).
 *
 * A destination's adaptation is four 64-bit words (struct rl_adapt), all
 * zero at first, meant for the shared segment beside its budget. Each
 * update changes exactly one word, and its new value is a function of that
 * word's old value and the update's inputs only (what else it reads, the
 * interval for the backoff, only sizes the change). So in the segment an
 * update is one CAS: load the words, call the function on a copy, and when
 * it says the word moved, CAS that word from the value loaded to the
 * copy's; a failed CAS means another process moved it first: load again
 * and call again. When the function says nothing moved, write nothing (the
 * fleet writes at most once per response, none when unchanged).
 *
 *   word      bits                                  written by
 *   latency   0-31  the interval, us, rounded up;    rl_adapt_latency
 *             32-63 the response time that set it,
 *                   us (for `rlshim stat`);
 *             0: not adapted, the limit's own pace
 *   pause     0-39  its end, ms of the clock,        rl_adapt_error,
 *                   rounded up; 0: none              rl_adapt_retry_after,
 *             40    why: 1 backoff, 0 Retry-After    rl_adapt_success
 *             41-48 errors in a row (saturating)
 *             49-58 the last error's cause
 *                   (RL_ADAPT_CAUSE_* or an HTTP status)
 *   crawl     0-31  a Crawl-delay, ms, rounded up;   rl_adapt_crawl_delay
 *             32-63 the second of the clock it
 *                   expires at; 0: none
 *   last      the latest turn granted, ns; 0: none  rl_adapt_went
 *
 * Packing keeps each update to one word, so a reader never sees an
 * interval with another response's figure, a pause with another run's
 * count, or one robots.txt's delay with another's expiry. The units cap
 * what a word can say: an interval or response time of 2^32 us (71
 * minutes), a Crawl-delay of 2^32 ms (49 days), a clock of 2^40 ms (34
 * years) or 2^32 s; each saturates there. Ends are rounded up, so
 * nothing is ever let go earlier than asked. */
#ifndef RL_LIMIT_ADAPT_H
#define RL_LIMIT_ADAPT_H

#include <stdbool.h>
#include <stdint.h>

struct rl_adapt {
    uint64_t latency;
    uint64_t pause;
    uint64_t crawl;
    uint64_t last;
};

/* What the rule says, in the units of the arithmetic. */
struct rl_adapt_conf {
    uint64_t floor_ns;           /* the request limit's own period: one
                                    request's turn at its rate */
    uint64_t max_interval_ns;    /* adaptation's ceiling (below the floor:
                                    the floor) */
    uint64_t max_retry_after_ns; /* the backoff's and Retry-After's cap */
    uint64_t max_crawl_delay_ns; /* a Crawl-delay is cut to this */
    uint32_t factor_milli;       /* adapt_factor in thousandths: 2000 = 2 */
};

/* Causes of an error that are not an HTTP status (SPEC §14 backoff_on). */
enum {
    RL_ADAPT_CAUSE_RESET = 1,   /* reset or closed before a response */
    RL_ADAPT_CAUSE_TIMEOUT = 2, /* no response within response_timeout */
};

/* How long robots.txt's Crawl-delay holds unless read again: a day. */
#define RL_ADAPT_CRAWL_TTL_NS (86400ull * 1000000000ull)

/* What set a destination's pace now, or held a request. */
enum rl_adapt_why {
    RL_ADAPT_RATE = 0,    /* the limit's own: adaptation adds nothing */
    RL_ADAPT_LATENCY,     /* the server's response time */
    RL_ADAPT_CRAWL_DELAY, /* robots.txt */
    RL_ADAPT_BACKOFF,     /* errors in a row, no Retry-After */
    RL_ADAPT_RETRY_AFTER, /* the server's Retry-After */
};

/* Latency (SPEC §14): at a response taking `response_ns`, the interval
 * becomes max(target, (old + target) / 2), target = factor x response,
 * within [floor, max_interval]: up at once, down by halves. An interval
 * back at the floor (within 2 us of it) is stored as 0: the limit alone
 * paces again, its burst with it. Changes a->latency; returns whether
 * it moved. */
bool rl_adapt_latency(struct rl_adapt *a, const struct rl_adapt_conf *c,
                      uint64_t response_ns);

/* The latency interval now, ns: 0 when not adapted, else within [floor,
 * max_interval]. */
uint64_t rl_adapt_latency_interval(const struct rl_adapt *a,
                                   const struct rl_adapt_conf *c);

/* The response time, ns (to the us above), that last moved the latency
 * interval; 0 when not adapted. */
uint64_t rl_adapt_latency_response(const struct rl_adapt *a);

/* The destination's interval now: the largest of the floor, the latency
 * interval and a Crawl-delay in force; at least 1 ns. The backoff's first
 * pause and jitter's span are this long. */
uint64_t rl_adapt_interval(const struct rl_adapt *a,
                           const struct rl_adapt_conf *c, uint64_t now);

/* An error that backoff_on lists, without Retry-After, at `now` (`cause`:
 * an HTTP status or RL_ADAPT_CAUSE_*): one more in a row; the pause is
 * the interval doubled once for each error before it in the run, at most
 * max_retry_after, and only ever moved later. A Retry-After's pause still
 * running wins: the error is counted, the pause is left. Changes
 * a->pause; returns whether it moved (it does, short of the count's
 * cap). */
bool rl_adapt_error(struct rl_adapt *a, const struct rl_adapt_conf *c,
                    uint64_t now, uint32_t cause);

/* A Retry-After of `wait_ns` (cut at max_retry_after) at `now`: the pause
 * ends then, in place of a backoff's (the server's word beats the
 * guess, earlier or later), but a running Retry-After that ends later is
 * kept (two answers read out of order). 0 ends a backoff's pause now.
 * The run's count is kept. Changes a->pause; returns whether it moved. */
bool rl_adapt_retry_after(struct rl_adapt *a, const struct rl_adapt_conf *c,
                          uint64_t now, uint64_t wait_ns);

/* A success ends the backoff: the run's count, and a backoff's pause,
 * back to none; a Retry-After's pause runs on. Changes a->pause; returns
 * whether it moved (not when there was no backoff). */
bool rl_adapt_success(struct rl_adapt *a);

/* The end of the pause in force at `now` (*why: RL_ADAPT_BACKOFF or
 * _RETRY_AFTER), or `now` and RL_ADAPT_RATE when none. `why` may be NULL. */
uint64_t rl_adapt_pause_until(const struct rl_adapt *a, uint64_t now,
                              enum rl_adapt_why *why);

/* Errors in a row now, and the last one's cause (may be NULL). */
uint32_t rl_adapt_errors(const struct rl_adapt *a, uint32_t *cause);

/* A robots.txt read at `now` with a Crawl-delay of `delay_ns` (0: none;
 * cut at max_crawl_delay): it spaces requests until now + a day or the
 * next read, which replaces it. Changes a->crawl; returns whether it
 * moved. */
bool rl_adapt_crawl_delay(struct rl_adapt *a, const struct rl_adapt_conf *c,
                          uint64_t now, uint64_t delay_ns);

/* The Crawl-delay in force at `now`, ns (cut at max_crawl_delay); 0 when
 * none or expired. */
uint64_t rl_adapt_crawl_delay_now(const struct rl_adapt *a,
                                  const struct rl_adapt_conf *c, uint64_t now);

/* The turn a request may have at `now`, given `limit_turn`, the turn the
 * request limit itself gave: the latest of that turn, the last turn
 * granted plus the larger of the latency interval and the Crawl-delay,
 * and the end of a pause in force. Never before `limit_turn`. *why says
 * which of them made it later than the limit's (RL_ADAPT_RATE: none);
 * `why` may be NULL. Changes nothing: the caller, once it grants the
 * turn, records it with rl_adapt_went. */
uint64_t rl_adapt_turn(const struct rl_adapt *a, const struct rl_adapt_conf *c,
                       uint64_t now, uint64_t limit_turn,
                       enum rl_adapt_why *why);

/* A request was granted `turn` (after jitter): the spacing of the next
 * counts from it. Changes a->last, only ever later; returns whether it
 * moved. In the segment, CAS `last` from the value the turn was computed
 * from: a failed CAS means another request took that turn first, so ask
 * rl_adapt_turn again. */
bool rl_adapt_went(struct rl_adapt *a, uint64_t turn);

/* Jitter (SPEC §14 `jitter = P%`): `turn` later by a uniform part of
 * [0, interval x percent / 100], drawn from `random` (any 64-bit word
 * the caller drew); never earlier, saturating. */
uint64_t rl_adapt_jitter(uint64_t turn, uint64_t interval_ns, uint32_t percent,
                         uint64_t random);

/* What adapt_show.c says. */

/* The decision log's `reason` for a request adaptation held
 * ("latency", "crawl_delay", "backoff", "retry_after"); NULL for
 * RL_ADAPT_RATE. */
const char *rl_adapt_reason(enum rl_adapt_why why);

/* What `rlshim stat` says of a destination: what set its pace and the
 * figures behind it. */
struct rl_adapt_shown {
    enum rl_adapt_why why;
    uint64_t interval_ns;  /* the destination's interval now */
    uint64_t figure_ns;    /* latency: the response time; crawl-delay: the
                              delay; a pause: the time left of it */
    uint32_t factor_milli; /* latency: adapt_factor */
    uint32_t errors;       /* backoff: errors in a row */
    uint32_t cause;        /* backoff: the last one's cause */
};

/* The state at `now` as `rlshim stat` shows it. */
void rl_adapt_show(const struct rl_adapt *a, const struct rl_adapt_conf *c,
                   uint64_t now, struct rl_adapt_shown *out);

/* `s` as text ("rate", "latency 2 x 310 ms", "crawl-delay 5 s", "backoff
 * 503 x 3", "retry-after 30 s") into buf, snprintf's way: at most cap - 1
 * characters and a NUL (nothing when cap is 0); returns the length the
 * whole text has, so a return >= cap means it was cut. */
uint64_t rl_adapt_format(const struct rl_adapt_shown *s, char *buf,
                         uint64_t cap);

#endif
