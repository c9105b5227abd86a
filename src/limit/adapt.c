/* adapt.c — the arithmetic of a destination's adapting pace (adapt.h):
 * latency, backoff, Crawl-delay, jitter and the turn they give together.
 *
 * Every sum and product saturates (the clock, a factor times a response
 * time, an interval doubled): a pause or a turn too far to say is as far
 * as the word can say, never a wrap to the past. */
#include "limit/adapt.h"

__extension__ typedef unsigned __int128 u128;

#define NS_PER_US 1000ull
#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull
#define LOW32 0xffffffffull

/* The pause word (adapt.h). */
#define END_MASK ((1ull << 40) - 1)
#define WHY_BACKOFF (1ull << 40)
#define COUNT_SHIFT 41
#define COUNT_MAX 255ull
#define CAUSE_SHIFT 49
#define CAUSE_MAX 1023ull
#define RUN_MASK ((COUNT_MAX << COUNT_SHIFT) | (CAUSE_MAX << CAUSE_SHIFT))

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t div_up(uint64_t x, uint64_t d)
{
    return x / d + (x % d != 0);
}

static uint64_t sat32(uint64_t x)
{
    return x > LOW32 ? LOW32 : x;
}

/* The ceiling of adaptation: max_interval, never below the floor. */
static uint64_t ceiling(const struct rl_adapt_conf *c)
{
    return max_u64(c->max_interval_ns, c->floor_ns);
}

static uint64_t clamp(uint64_t x, const struct rl_adapt_conf *c)
{
    return x < c->floor_ns ? c->floor_ns : min_u64(x, ceiling(c));
}

/* factor x response, saturating. */
static uint64_t target_of(uint64_t response_ns, uint32_t factor_milli)
{
    u128 t = (u128)response_ns * factor_milli / 1000;

    return t > UINT64_MAX ? UINT64_MAX : (uint64_t)t;
}

uint64_t rl_adapt_latency_interval(const struct rl_adapt *a,
                                   const struct rl_adapt_conf *c)
{
    if (a->latency == 0)
        return 0;
    return clamp((a->latency & LOW32) * NS_PER_US, c);
}

uint64_t rl_adapt_latency_response(const struct rl_adapt *a)
{
    return (a->latency >> 32) * NS_PER_US;
}

bool rl_adapt_latency(struct rl_adapt *a, const struct rl_adapt_conf *c,
                      uint64_t response_ns)
{
    uint64_t old = rl_adapt_latency_interval(a, c);
    if (old == 0)
        old = c->floor_ns;
    uint64_t target = target_of(response_ns, c->factor_milli);
    /* (old + target) / 2 without the sum overflowing. */
    uint64_t mean = old / 2 + target / 2 + (old & target & 1);
    uint64_t next = clamp(max_u64(target, mean), c);
    uint64_t w = 0;

    /* Stored to the us above, a falling interval would stop short of the
     * floor: (old + target) / 2 rounds back up to old once they are
     * within 2 us. So that close counts as the floor. */
    if (next >= add_sat(c->floor_ns, 2 * NS_PER_US))
        w = sat32(div_up(next, NS_PER_US)) |
            sat32(div_up(response_ns, NS_PER_US)) << 32;
    /* Only the interval moving is a write: a new response time behind the
     * same interval is no news to the other processes. */
    if ((w & LOW32) == (a->latency & LOW32))
        return false;
    a->latency = w;
    return true;
}

uint64_t rl_adapt_crawl_delay_now(const struct rl_adapt *a,
                                  const struct rl_adapt_conf *c, uint64_t now)
{
    if (a->crawl == 0 || (a->crawl >> 32) * NS_PER_S <= now)
        return 0;
    return min_u64((a->crawl & LOW32) * NS_PER_MS, c->max_crawl_delay_ns);
}

bool rl_adapt_crawl_delay(struct rl_adapt *a, const struct rl_adapt_conf *c,
                          uint64_t now, uint64_t delay_ns)
{
    uint64_t d = min_u64(delay_ns, c->max_crawl_delay_ns);
    uint64_t w = 0;

    if (d > 0)
        w = sat32(div_up(d, NS_PER_MS)) |
            sat32(div_up(add_sat(now, RL_ADAPT_CRAWL_TTL_NS), NS_PER_S)) << 32;
    if (w == a->crawl)
        return false;
    a->crawl = w;
    return true;
}

uint64_t rl_adapt_interval(const struct rl_adapt *a,
                           const struct rl_adapt_conf *c, uint64_t now)
{
    uint64_t i = max_u64(c->floor_ns, rl_adapt_latency_interval(a, c));

    i = max_u64(i, rl_adapt_crawl_delay_now(a, c, now));
    return i > 0 ? i : 1;
}

/* A time as the pause word's end: ms, rounded up, saturating. */
static uint64_t end_field(uint64_t ns)
{
    return min_u64(div_up(ns, NS_PER_MS), END_MASK);
}

static uint64_t end_ns(uint64_t w)
{
    return (w & END_MASK) * NS_PER_MS;
}

/* Is the pause of word w a Retry-After's that still runs at now? */
static bool server_pause_runs(uint64_t w, uint64_t now)
{
    return !(w & WHY_BACKOFF) && end_ns(w) > now;
}

/* `one` doubled `n` times, at most `cap`. */
static uint64_t doubled(uint64_t one, uint64_t n, uint64_t cap)
{
    if (one >= cap)
        return cap;
    for (; n > 0; n--) {
        if (one > cap / 2)
            return cap;
        one *= 2;
    }
    return one;
}

bool rl_adapt_error(struct rl_adapt *a, const struct rl_adapt_conf *c,
                    uint64_t now, uint32_t cause)
{
    uint64_t w = a->pause;
    uint64_t n = (w >> COUNT_SHIFT) & COUNT_MAX;
    uint64_t nw = (w & (END_MASK | WHY_BACKOFF)) |
                  min_u64(n + 1, COUNT_MAX) << COUNT_SHIFT |
                  min_u64(cause, CAUSE_MAX) << CAUSE_SHIFT;
    uint64_t len =
        doubled(rl_adapt_interval(a, c, now), n, c->max_retry_after_ns);

    if (!server_pause_runs(w, now) && len > 0) {
        uint64_t until = end_field(add_sat(now, len));
        /* A backoff's pause that runs on is only ever moved later. */
        if ((w & WHY_BACKOFF) && end_ns(w) > now)
            until = max_u64(until, w & END_MASK);
        nw = (nw & RUN_MASK) | until | WHY_BACKOFF;
    }
    if (nw == w)
        return false;
    a->pause = nw;
    return true;
}

bool rl_adapt_retry_after(struct rl_adapt *a, const struct rl_adapt_conf *c,
                          uint64_t now, uint64_t wait_ns)
{
    uint64_t w = a->pause;
    uint64_t wait = min_u64(wait_ns, c->max_retry_after_ns);
    uint64_t until = wait > 0 ? end_field(add_sat(now, wait)) : 0;

    if (server_pause_runs(w, now) && (w & END_MASK) >= until)
        return false;
    uint64_t nw = (w & RUN_MASK) | until;
    if (nw == w)
        return false;
    a->pause = nw;
    return true;
}

bool rl_adapt_success(struct rl_adapt *a)
{
    uint64_t w = a->pause;
    uint64_t nw = (w & WHY_BACKOFF) ? 0 : (w & END_MASK);

    if (nw == w)
        return false;
    a->pause = nw;
    return true;
}

uint64_t rl_adapt_pause_until(const struct rl_adapt *a, uint64_t now,
                              enum rl_adapt_why *why)
{
    uint64_t end = end_ns(a->pause);
    enum rl_adapt_why y = RL_ADAPT_RATE;

    if (end > now)
        y = (a->pause & WHY_BACKOFF) ? RL_ADAPT_BACKOFF : RL_ADAPT_RETRY_AFTER;
    else
        end = now;
    if (why != 0)
        *why = y;
    return end;
}

uint32_t rl_adapt_errors(const struct rl_adapt *a, uint32_t *cause)
{
    if (cause != 0)
        *cause = (uint32_t)((a->pause >> CAUSE_SHIFT) & CAUSE_MAX);
    return (uint32_t)((a->pause >> COUNT_SHIFT) & COUNT_MAX);
}

uint64_t rl_adapt_turn(const struct rl_adapt *a, const struct rl_adapt_conf *c,
                       uint64_t now, uint64_t limit_turn,
                       enum rl_adapt_why *why)
{
    uint64_t turn = limit_turn;
    enum rl_adapt_why y = RL_ADAPT_RATE;
    uint64_t lat = rl_adapt_latency_interval(a, c);
    uint64_t crawl = rl_adapt_crawl_delay_now(a, c, now);
    uint64_t space = max_u64(lat, crawl);

    /* With neither, the limit alone spaces requests (its burst too). */
    if (space > 0 && a->last != 0 && add_sat(a->last, space) > turn) {
        turn = add_sat(a->last, space);
        y = lat >= crawl ? RL_ADAPT_LATENCY : RL_ADAPT_CRAWL_DELAY;
    }
    enum rl_adapt_why py;
    uint64_t end = rl_adapt_pause_until(a, now, &py);
    if (py != RL_ADAPT_RATE && end > turn) {
        turn = end;
        y = py;
    }
    if (why != 0)
        *why = y;
    return turn;
}

bool rl_adapt_went(struct rl_adapt *a, uint64_t turn)
{
    if (turn <= a->last)
        return false;
    a->last = turn;
    return true;
}

uint64_t rl_adapt_jitter(uint64_t turn, uint64_t interval_ns, uint32_t percent,
                         uint64_t random)
{
    u128 span = (u128)interval_ns * percent / 100;

    if (span > UINT64_MAX)
        span = UINT64_MAX;
    /* random / 2^64 scaled onto [0, span]: uniform to within one part in
     * 2^64 / (span + 1), with no division and no loop. */
    uint64_t part = (uint64_t)(((u128)random * (span + 1)) >> 64);
    return add_sat(turn, part);
}
