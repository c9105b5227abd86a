/* waitlock.h — a lock on one 32-bit word, private to a process: 0 free,
 * 1 held, 2 held with a thread waiting (futex: the release wakes it).
 *
 * For state two threads share briefly (a connection's request and
 * response sides, policy/reqconn.h): taking a free word is one
 * compare-and-swap, letting it go one exchange, and a system call only
 * when a thread waits. The wait is bounded, for a holder that never comes
 * back (a thread cancelled while it held the word). Nothing is allocated;
 * a signal handler must not take a word (its own thread may hold it). A
 * fork child sets the words its parent's other threads held to 0. */
#ifndef RL_UTIL_WAITLOCK_H
#define RL_UTIL_WAITLOCK_H

#include <stdbool.h>
#include <stdint.h>

/* Take *word, waiting at most max_ns for its holder: false when not had
 * (then the caller holds nothing). Acquire: pairs with the release in
 * rl_waitlock_let_go. */
bool rl_waitlock_take(uint32_t *word, uint64_t max_ns);

/* Let *word go, waking one thread that waits for it. */
void rl_waitlock_let_go(uint32_t *word);

#endif
