/* Reading a run's messages while it goes on in another thread or process. */
#ifndef KR_TEST_LISTEN_H
#define KR_TEST_LISTEN_H

#include <stdatomic.h>

#include "kinreg/transport.h"

/* A run a test starts and a listener thread follows: `returned` is set by
 * the test once the run (kr_pipeline_run, or the kinreg process) is back. */
typedef struct {
    atomic_bool returned;
} kr_test_run;

void kr_test_run_init(kr_test_run *run);
void kr_test_run_returned(kr_test_run *run);

/* The next message of the run: waits as long as the run goes — under the
 * sanitizers on a loaded 2-core machine a stream stays silent for minutes —
 * and once it has returned, up to drain_ms more for what is still in
 * flight. KR_END then; other statuses as kr_subscriber_receive's. A fixed
 * silence bound instead ended a test with 29 of 60 poses. */
kr_status kr_test_receive_during(kr_subscriber *sub, kr_test_run *run, int drain_ms, kr_message *m);

#endif
