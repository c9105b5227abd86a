/* dests_race.h — the page shared between tests/unit/test_dests.c and the
 * program it execs (tests/integration/helpers/store_dests_racer.c): the
 * barrier every thread of every process waits at before each rep, and the
 * admissions of each rep. */
#ifndef RL_TESTS_DESTS_RACE_H
#define RL_TESTS_DESTS_RACE_H

#include <pthread.h>
#include <stdatomic.h>

#define DR_REPS 20
#define DR_PROCS 8
#define DR_THREADS 25

struct dests_race {
    pthread_barrier_t barrier;
    _Atomic int admitted[DR_REPS];
    _Atomic int errors;
};

#endif
