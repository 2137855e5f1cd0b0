/* The absolute time `seconds` from now on `clock`, as pthread_cond_timedwait
 * wants it (CLOCK_REALTIME unless the condition variable was made for
 * another clock). Written once for the project's timed waits. */
#ifndef KINREG_CORE_DEADLINE_H
#define KINREG_CORE_DEADLINE_H

#include <math.h>
#include <time.h>

static inline struct timespec kr_deadline_after(clockid_t clock, double seconds)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    double whole = floor(seconds);
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((seconds - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
