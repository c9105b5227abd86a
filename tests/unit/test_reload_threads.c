/* test_reload_threads.c — a process of several threads follows its config
 * file (policy/reload.h, policy/proc.h's struct rl_gen): threads decide in
 * a loop while another reloads again and again, between two configs whose
 * tables differ (sites or none), and every decision is made under one
 * config's rules: each charge's section is one of the config its ticket's
 * generation was built from. Made to run under TSan too (make tsan). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/proc.h"
#include "policy/reload.h"
#include "proc_new.h"
#include "reload_dir.h"

TestSuite(reload_threads, .init = reload_dir_make, .fini = reload_dir_remove);

/* Two configs whose tables differ: three sections with two sites, and
 * one section alone. A decision that took the rule of one and the sites
 * of the other would name a section of neither. */
static const char *const configs[2] = {
    "[default]\nconnect = 1000000/s\n"
    "[site:a]\nto = 127.0.0.1\nconnect = 1000000/s\n"
    "[site:b]\nto = 127.0.0.2\nconnect = 1000000/s\n",
    "[default]\nconnect = 2000000/s\n",
};

#define DECIDERS 3
#define RELOADS 59 /* odd: the last edit is the config of one section */

struct decider {
    struct rl_proc *p;
    atomic_bool *stop;
    unsigned decided, mixed, gens_seen;
};

/* Is r one of the sections of cfg? */
static bool of(const struct rl_config *cfg, const struct rl_rule *r)
{
    return r >= cfg->rules && r < cfg->rules + cfg->nrules;
}

static void *decide_loop(void *arg)
{
    struct decider *d = arg;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(80)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    const struct rl_gen *last = NULL;
    while (!atomic_load(d->stop)) {
        struct rl_gate_ticket t;
        int r = rl_gate_connect(d->p, &t, "connect", -1, &sa, sizeof sa);
        const struct rl_config *cfg = t.gen->gate.cfg;
        bool one = r == RL_GATE_GO && of(cfg, t.gen->gate.rule);
        for (unsigned i = 0; i < t.ncharges; i++)
            one = one && of(cfg, t.charge[i].rule);
        if (t.alone)
            one = one && of(cfg, t.charge[0].budget->rule);
        d->mixed += !one;
        d->gens_seen += t.gen != last;
        last = t.gen;
        rl_gate_connected(d->p, &t, -1, false);
        d->decided++;
    }
    return NULL;
}

Test(reload_threads, threads_decide_while_another_reloads)
{
    put(configs[0]);
    char line[512];
    struct rl_proc *p = proc_new();
    rl_proc_init(p);
    cr_assert_eq(rl_proc_set_up(p, RL_PROC_AT_FIRST_CALL, line, sizeof line),
                 RL_PROC_READY, "%s", line);
    atomic_bool stop = false;
    struct decider d[DECIDERS];
    pthread_t th[DECIDERS];
    for (int i = 0; i < DECIDERS; i++) {
        d[i] = (struct decider){p, &stop, 0, 0, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, decide_loop, &d[i]), 0);
    }
    for (unsigned k = 1; k <= RELOADS; k++) {
        put(configs[k % 2]);
        atomic_store(&p->watch.w.next_look, 1); /* a look due now */
        cr_assert_eq(rl_reload_look(p), RL_PROC_READY);
        usleep(1000); /* the deciders run on this config a while */
    }
    atomic_store(&stop, true);
    unsigned decided = 0, mixed = 0, seen = 0;
    for (int i = 0; i < DECIDERS; i++) {
        pthread_join(th[i], NULL);
        decided += d[i].decided;
        mixed += d[i].mixed;
        seen += d[i].gens_seen;
    }
    cr_assert_eq(p->watch.nretired, RELOADS,
                 "%u edits followed of %u, beside other threads",
                 p->watch.nretired, RELOADS);
    cr_assert_eq(rl_proc_gen(p)->gate.cfg, p->cfg);
    cr_assert_eq(p->cfg->nrules, 1, "the last edit's config is in use");
    cr_expect_eq(mixed, 0, "%u of %u decisions mixed two configs", mixed,
                 decided);
    cr_expect_gt(seen, DECIDERS, "the deciders saw the configs change");
    cr_log_info("%u decisions over %u reloads, %u generation changes seen",
                decided, RELOADS, seen);
}
