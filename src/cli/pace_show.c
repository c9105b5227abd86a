/* pace_show.c — see pace_show.h. */
#include <stdio.h>
#include <string.h>

#include "cli/pace_show.h"
#include "limit/adapt.h"
#include "policy/pace.h"

bool rl_cli_pace(const struct rl_pauses *p, const struct rl_config *cfg,
                 const struct rl_rule *rule, const char *user,
                 const char *dest, uint64_t now, uint64_t *interval,
                 char *why, size_t wlen)
{
    struct rl_adapt a;
    if (p == NULL || cfg == NULL || !rl_pace_kept(rule) ||
        !rl_pauses_pace(p,
                        rl_pauses_key((uint64_t)(rule - cfg->rules) + 1, user,
                                      dest, strlen(dest)),
                        &a))
        return false;
    struct rl_adapt_conf c;
    struct rl_adapt_shown sh;
    rl_pace_conf(rule, &c);
    rl_adapt_show(&a, &c, now, &sh);
    if (sh.why != RL_ADAPT_LATENCY && sh.why != RL_ADAPT_CRAWL_DELAY)
        return false;
    rl_adapt_format(&sh, why, wlen);
    *interval = sh.interval_ns;
    return true;
}

/* A duration as a person reads it: "30 s", "500 ms". */
static void duration(uint64_t ns, char *buf, size_t len)
{
    if (ns % 1000000000u == 0)
        snprintf(buf, len, "%llu s", (unsigned long long)(ns / 1000000000u));
    else
        snprintf(buf, len, "%llu ms", (unsigned long long)(ns / 1000000u));
}

void rl_cli_pace_settings(const struct rl_rule *r, char *buf, size_t len)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } causes[] = {
        {RL_BACKOFF_429, "429"},     {RL_BACKOFF_503, "503"},
        {RL_BACKOFF_5XX, "5xx"},     {RL_BACKOFF_RESET, "reset"},
        {RL_BACKOFF_TIMEOUT, "timeout"},
    };
    char adapt[64] = "adapt off", most[24], backoff[64] = "", crawl[48];
    if (r->adapt == RL_ADAPT_MODE_LATENCY) {
        duration(r->max_interval_ns, most, sizeof most);
        snprintf(adapt, sizeof adapt, "adapt latency x %g (max %s)",
                 (double)r->adapt_factor_milli / 1000, most);
    }
    size_t used = 0;
    for (size_t i = 0; i < sizeof causes / sizeof causes[0]; i++) {
        if (!(r->backoff_on & causes[i].bit))
            continue;
        int k = snprintf(backoff + used, sizeof backoff - used, "%s%s",
                         used ? ", " : "", causes[i].name);
        if (k > 0 && (size_t)k < sizeof backoff - used)
            used += (size_t)k;
    }
    if (r->crawl_delay == RL_CRAWL_DELAY_OBEY) {
        duration(r->max_crawl_delay_ns, most, sizeof most);
        snprintf(crawl, sizeof crawl, "crawl_delay obey (max %s)", most);
    } else
        snprintf(crawl, sizeof crawl, "crawl_delay ignore");
    snprintf(buf, len, "%s, backoff_on %s, %s, jitter %u%%", adapt,
             used ? backoff : "none", crawl, r->jitter_pct);
}
