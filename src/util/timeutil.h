/* timeutil — monotonic clock helpers. */
#ifndef SGLC_UTIL_TIMEUTIL_H
#define SGLC_UTIL_TIMEUTIL_H
#include <time.h>

static inline double time_now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
#endif
