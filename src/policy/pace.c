/* pace.c — a destination's pace as a request's decision reads and
 * records it (pace.h). The words are read lock-free; the last turn is
 * written by rl_pauses_pace_cas, from the value the turn was computed
 * from, so two processes that computed from the same last turn cannot
 * both record theirs: the second reads again and goes later. */
#include "policy/pace.h"

#include "policy/gate_pause.h"

bool rl_pace_kept(const struct rl_rule *r)
{
    return r->nlimits[RL_KIND_REQUEST] > 0 &&
           (r->adapt == RL_ADAPT_MODE_LATENCY ||
            r->crawl_delay == RL_CRAWL_DELAY_OBEY || r->jitter_pct > 0);
}

void rl_pace_conf(const struct rl_rule *r, struct rl_adapt_conf *out)
{
    out->floor_ns = rl_pause_one_turn(r);
    out->max_interval_ns = r->max_interval_ns;
    out->max_retry_after_ns = r->max_retry_after_ns;
    out->max_crawl_delay_ns =
        r->crawl_delay == RL_CRAWL_DELAY_OBEY ? r->max_crawl_delay_ns : 0;
    out->factor_milli = r->adapt_factor_milli;
}

uint64_t rl_pace_turn(const struct rl_pace *pc, uint64_t now, uint64_t turn,
                      enum rl_adapt_why *why)
{
    struct rl_adapt a;
    *why = RL_ADAPT_RATE;
    if (!rl_pauses_pace(&pc->table, pc->set.key, &a))
        return turn; /* no entry: nothing learned of it yet */
    return rl_adapt_turn(&a, &pc->conf, now, turn, why);
}

/* Does something pace the destination now, so that its last turn is
 * worth a write? */
static bool paced(const struct rl_pace *pc, const struct rl_adapt *a,
                  uint64_t now)
{
    return a->latency != 0 ||
           rl_adapt_crawl_delay_now(a, &pc->conf, now) != 0 ||
           pc->rule->adapt == RL_ADAPT_MODE_LATENCY;
}

int rl_pace_record(struct rl_pace *pc, uint64_t now, uint64_t *turn,
                   uint64_t latest, enum rl_adapt_why *why)
{
    int moved = 0;
    for (unsigned i = 0; i < RL_PACE_TRIES; i++) {
        struct rl_adapt a;
        rl_pauses_pace(&pc->table, pc->set.key, &a);
        enum rl_adapt_why y;
        uint64_t need = rl_adapt_turn(&a, &pc->conf, now, *turn, &y);
        if (need > *turn) {
            if (need > latest)
                return -1;
            *turn = need;
            *why = y;
            moved = 1;
        }
        if (!paced(pc, &a, now))
            return moved;
        struct rl_adapt went = a;
        if (!rl_adapt_went(&went, *turn))
            return moved; /* a later turn is recorded already */
        if (rl_pauses_pace_cas(&pc->table, &pc->set, RL_PACE_LAST, a.last,
                               went.last) != 0)
            return moved; /* written, or a lock not to be had */
    }
    return moved;
}

uint64_t rl_pace_jitter_ns(uint64_t interval_ns, uint32_t percent,
                           uint64_t random)
{
    return rl_adapt_jitter(0, interval_ns, percent, random);
}

uint64_t rl_pace_random(uint64_t counter, uint64_t salt)
{
    /* splitmix64's finaliser over a counter that no two draws of a
     * process share, salted so that two processes drawing the same count
     * (a fork's child) part ways. */
    uint64_t z = counter * 0x9e3779b97f4a7c15ull ^ salt;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
