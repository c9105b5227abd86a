/* store_dests_racer — a process of the per-destination race
 * (tests/unit/test_dests.c), exec'd so that it starts its threads in a
 * fresh program (ThreadSanitizer cannot start threads in a forked child).
 *
 *   store_dests_racer MEMFD
 *
 * Sets the gate up as user "crawler" for the config
 *     [site:every]
 *     per = destination
 *     connect = 5/s
 * (built here by hand: helpers do not link the ini parser), maps the shared page
 * (struct dests_race) from the inherited MEMFD, and runs DR_THREADS
 * threads that, DR_REPS times, wait at the page's barrier and then try
 * one connect to a destination never seen before (10.9.0.REP+1), adding
 * what is admitted to page->admitted[rep]. Exit status 0, or 1. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../dests_race.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/proc.h"

/* The process state this file decides through. */
static struct rl_proc proc;

#define T0 (1000ull * 1000000000ull)

static struct dests_race *page;

static void *racer(void *arg)
{
    (void)arg;
    for (int rep = 0; rep < DR_REPS; rep++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
        a.sin_addr.s_addr = htonl(0x0a090000u | (unsigned)(rep + 1));
        struct rl_gate_ticket t;
        pthread_barrier_wait(&page->barrier);
        if (rl_gate_connect_at(&proc, &t, T0, "connect", 3, &a, sizeof a) ==
            RL_GATE_GO)
            atomic_fetch_add(&page->admitted[rep], 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: store_dests_racer MEMFD\n");
        return 1;
    }
    page = mmap(NULL, sizeof *page, PROT_READ | PROT_WRITE, MAP_SHARED,
                atoi(argv[1]), 0);
    if (page == MAP_FAILED)
        return 1;
    static struct rl_rule rule = {
        .section = "site:every",
        .site = "every",
        .algo = RL_ALGO_TOKEN_BUCKET,
        .nlimits = {1, 0, 0},
        .per = RL_PER_DESTINATION,
        .on_deny = RL_DENY_FAIL,
        .deny_errno = EAGAIN,
    };
    static struct rl_config c = {
        .rules = &rule,
        .nrules = 1,
        .max_users = RL_CONFIG_MAX_USERS_DEFAULT,
        .max_destinations = RL_CONFIG_MAX_DESTINATIONS_DEFAULT,
        .deny_errno = EAGAIN,
        .hash = 0x5175de57ull, /* the same in every racer */
    };
    if (rl_limit_prepare(&rule.limits[RL_KIND_CONNECT][0],
                         RL_ALGO_TOKEN_BUCKET, 5, 1000000000ull, 0) != 0)
        return 1;
    struct rl_config *cfg = &c;
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "crawler");
    if (rl_gate_init(&proc, cfg, &id, NULL, 0) != 0)
        return 1;
    pthread_t th[DR_THREADS];
    for (int i = 0; i < DR_THREADS; i++)
        if (pthread_create(&th[i], NULL, racer, NULL) != 0)
            return 1;
    for (int i = 0; i < DR_THREADS; i++)
        pthread_join(th[i], NULL);
    return 0;
}
