/* conform.c — see conform.h. Both checks are one pass. */
#include "limit/conform.h"

__extension__ typedef __int128 i128;

/* Bucket: with S_j the units of events 0..j, interval [i, j] holds
 * S_j - S_{i-1}, allowed burst + count * (t_j - t_i) / P. Scaled by P:
 *   excess(i, j) = (S_j*P - count*t_j) + (count*t_i - S_{i-1}*P) - burst*P
 * so the worst i for each j is the running maximum of the second term. */
void rl_conform_bucket(const struct rl_conform_ev *ev, uint64_t n,
                       uint64_t count, uint64_t period_ns, uint64_t burst,
                       uint64_t slack_ns, struct rl_conform_result *res)
{
    *res = (struct rl_conform_result){.ok = true};
    if (n == 0 || period_ns == 0)
        return;
    i128 P = period_ns, N = count;
    i128 best_key = 0, worst = 0;
    uint64_t best_i = 0;
    bool have = false;
    i128 prefix = 0; /* S_{j-1} */
    for (uint64_t j = 0; j < n; j++) {
        i128 key = N * (i128)ev[j].t - prefix * P;
        /* On a tie the later start: the shorter interval is the one a
         * reader wants to see. */
        if (j == 0 || key >= best_key) {
            best_key = key;
            best_i = j;
        }
        prefix += ev[j].units;
        i128 val = prefix * P - N * (i128)ev[j].t + best_key;
        if (!have || val > worst) {
            have = true;
            worst = val;
            res->first = best_i;
            res->last = j;
        }
    }
    uint64_t span = ev[res->last].t - ev[res->first].t;
    i128 units = (worst + N * (i128)span) / P;
    i128 allowed = ((i128)burst * P + N * ((i128)span + slack_ns)) / P;
    res->units = (uint64_t)units;
    res->allowed = (uint64_t)allowed;
    res->ok = worst <= (i128)burst * P + N * (i128)slack_ns;
}

void rl_conform_window(const struct rl_conform_ev *ev, uint64_t n,
                       uint64_t count, uint64_t period_ns, uint64_t slack_ns,
                       struct rl_conform_result *res)
{
    *res = (struct rl_conform_result){.ok = true, .allowed = count};
    uint64_t w = period_ns > slack_ns ? period_ns - slack_ns : 1;
    uint64_t sum = 0;
    uint64_t i = 0;
    bool have = false;
    for (uint64_t j = 0; j < n; j++) {
        sum += ev[j].units;
        while (ev[j].t - ev[i].t >= w)
            sum -= ev[i++].units;
        if (!have || sum > res->units) {
            have = true;
            res->units = sum;
            res->first = i;
            res->last = j;
        }
    }
    res->ok = res->units <= count;
}
