/* tsan_criterion.c — lets Criterion run under ThreadSanitizer (make tsan).
 *
 * Criterion's BoxFort maps its inheritable arena with MAP_FIXED at
 * 0x200000000000 + rand_r() * 16 MiB, anywhere up to 0x7f0000000000. Most
 * of that range is TSan's shadow, where TSan refuses to map, and Criterion
 * aborts ("Could not initialize inheritable arena", Snaipe/Criterion#274).
 * In the TSan build only, this rand_r (exported from the test runner, so
 * libcriterion binds to it) lands the arena in TSan's application range
 * 0x550000000000-0x568000000000 instead. Nothing else in the runner calls
 * rand_r. */
#include <stdlib.h>

#if defined(__SANITIZE_THREAD__)
__attribute__((visibility("default"))) int rand_r(unsigned *seed)
{
    const unsigned long long base = 0x200000000000ull;
    const unsigned long long app = 0x560000000000ull;

    *seed = *seed * 1103515245u + 12345u;
    /* 4096 slots of 16 MiB from `app`: 64 GiB, all inside the range. */
    return (int)(((app - base) >> 24) + (*seed >> 16) % 4096u);
}
#else
typedef int rl_tsan_criterion_unused;
#endif
