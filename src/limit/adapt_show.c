/* adapt_show.c — what set a destination's pace, as `rlshim stat` and the
 * decision log say it (adapt.h).
 *
 * The text is built by hand rather than by snprintf: limit/ includes no
 * header beyond stdint, stdbool and stdatomic, and the few shapes needed
 * (a whole number, up to three decimals, a unit) take a page. */
#include "limit/adapt.h"

#define NS_PER_US 1000ull
#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

const char *rl_adapt_reason(enum rl_adapt_why why)
{
    switch (why) {
    case RL_ADAPT_LATENCY:
        return "latency";
    case RL_ADAPT_CRAWL_DELAY:
        return "crawl_delay";
    case RL_ADAPT_BACKOFF:
        return "backoff";
    case RL_ADAPT_RETRY_AFTER:
        return "retry_after";
    case RL_ADAPT_RATE:
        break;
    }
    return 0;
}

void rl_adapt_show(const struct rl_adapt *a, const struct rl_adapt_conf *c,
                   uint64_t now, struct rl_adapt_shown *out)
{
    enum rl_adapt_why py;
    uint64_t end = rl_adapt_pause_until(a, now, &py);
    uint64_t lat = rl_adapt_latency_interval(a, c);
    uint64_t crawl = rl_adapt_crawl_delay_now(a, c, now);

    out->why = RL_ADAPT_RATE;
    out->interval_ns = rl_adapt_interval(a, c, now);
    out->figure_ns = 0;
    out->factor_milli = c->factor_milli;
    out->errors = rl_adapt_errors(a, &out->cause);
    if (py != RL_ADAPT_RATE) {
        out->why = py;
        out->figure_ns = end - now;
    } else if (lat > c->floor_ns && lat >= crawl) {
        out->why = RL_ADAPT_LATENCY;
        out->figure_ns = rl_adapt_latency_response(a);
    } else if (crawl > c->floor_ns) {
        out->why = RL_ADAPT_CRAWL_DELAY;
        out->figure_ns = crawl;
    }
}

/* A bounded writer, snprintf's way: counts every character, stores those
 * that fit before the NUL. */
struct text {
    char *buf;
    uint64_t cap, len;
};

static void put_char(struct text *t, char ch)
{
    if (t->len + 1 < t->cap)
        t->buf[t->len] = ch;
    t->len++;
}

static void put_str(struct text *t, const char *s)
{
    while (*s != '\0')
        put_char(t, *s++);
}

static void put_uint(struct text *t, uint64_t v)
{
    char digits[20];
    int n = 0;

    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    while (n > 0)
        put_char(t, digits[--n]);
}

/* whole.thousandths, the decimals' trailing zeros left out ("2", "1.5"). */
static void put_decimal(struct text *t, uint64_t whole, uint64_t thousandths)
{
    put_uint(t, whole);
    if (thousandths == 0)
        return;
    put_char(t, '.');
    for (uint64_t unit = 100; unit > 0 && thousandths > 0; unit /= 10) {
        put_char(t, (char)('0' + thousandths / unit));
        thousandths %= unit;
    }
}

/* A duration in the largest unit it reaches: "800 ns", "12 us", "310 ms",
 * "1.5 s"; below a second, whole units (cut, not rounded). */
static void put_duration(struct text *t, uint64_t ns)
{
    if (ns < NS_PER_US) {
        put_uint(t, ns);
        put_str(t, " ns");
    } else if (ns < NS_PER_MS) {
        put_uint(t, ns / NS_PER_US);
        put_str(t, " us");
    } else if (ns < NS_PER_S) {
        put_uint(t, ns / NS_PER_MS);
        put_str(t, " ms");
    } else {
        put_decimal(t, ns / NS_PER_S, ns % NS_PER_S / NS_PER_MS);
        put_str(t, " s");
    }
}

static void put_cause(struct text *t, uint32_t cause)
{
    if (cause == RL_ADAPT_CAUSE_RESET)
        put_str(t, "reset");
    else if (cause == RL_ADAPT_CAUSE_TIMEOUT)
        put_str(t, "timeout");
    else if (cause >= 100 && cause <= 599)
        put_uint(t, cause);
    else
        put_str(t, "error");
}

uint64_t rl_adapt_format(const struct rl_adapt_shown *s, char *buf,
                         uint64_t cap)
{
    struct text t = {buf, cap, 0};

    switch (s->why) {
    case RL_ADAPT_LATENCY:
        put_str(&t, "latency ");
        put_decimal(&t, s->factor_milli / 1000, s->factor_milli % 1000);
        put_str(&t, " x ");
        put_duration(&t, s->figure_ns);
        break;
    case RL_ADAPT_CRAWL_DELAY:
        put_str(&t, "crawl-delay ");
        put_duration(&t, s->figure_ns);
        break;
    case RL_ADAPT_BACKOFF:
        put_str(&t, "backoff ");
        put_cause(&t, s->cause);
        put_str(&t, " x ");
        put_uint(&t, s->errors);
        break;
    case RL_ADAPT_RETRY_AFTER:
        put_str(&t, "retry-after ");
        put_duration(&t, s->figure_ns);
        break;
    case RL_ADAPT_RATE:
    default:
        put_str(&t, "rate");
        break;
    }
    if (cap > 0)
        buf[t.len < cap ? t.len : cap - 1] = '\0';
    return t.len;
}
