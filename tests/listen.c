/* Reading a run's messages while it goes on (listen.h). */
#include "listen.h"

/* How often the listener looks whether the run has returned. */
#define POLL_MS 1000

void kr_test_run_init(kr_test_run *run)
{
    atomic_init(&run->returned, false);
}

void kr_test_run_returned(kr_test_run *run)
{
    atomic_store(&run->returned, true);
}

kr_status kr_test_receive_during(kr_subscriber *sub, kr_test_run *run, int drain_ms, kr_message *m)
{
    int waited_after_return_ms = 0;
    for (;;) {
        kr_status s = kr_subscriber_receive(sub, POLL_MS, m);
        if (s != KR_END) return s;
        if (atomic_load(&run->returned) && (waited_after_return_ms += POLL_MS) >= drain_ms)
            return KR_END;
    }
}
