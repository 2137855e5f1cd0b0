/* The pipeline's pose stream as a real subscriber receives it: every pose,
 * in order, then the publisher's "stopped". Its own module because the case
 * waits on the stream with a deadline: the module runs alone under ctest -j
 * (tests/CMakeLists.txt), and the pipeline module's long accuracy runs need
 * not. */
#include "kr_test.h"
#include "listen.h"

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "kinreg/pipeline.h"

/* the capture, tracker, fuser and publisher threads: TSan watches them */
KR_LABELS("threads");

typedef struct {
    const char *endpoint;
    int expected;
    int received, in_order, gaps, stopped;
    kr_test_run run;
} sub_ctx;

static void *subscribe(void *arg)
{
    sub_ctx *c = arg;
    kr_subscriber *sub = NULL;
    if (kr_subscriber_create(&sub, c->endpoint, 0) != KR_OK) return NULL;
    uint64_t next = 0;
    kr_message m;
    while (kr_test_receive_during(sub, &c->run, 5000, &m) == KR_OK) {
        if (m.topic == KR_TOPIC_POSE) {
            if (m.pose.frame_index == next) c->in_order++;
            next = m.pose.frame_index + 1;
            c->received++;
            c->gaps += (int)m.gap;
        } else if (m.topic == KR_TOPIC_STATUS && m.status.event == KR_EVENT_STOPPED) {
            c->stopped = 1;
            break;
        }
    }
    kr_subscriber_destroy(&sub);
    return NULL;
}

KR_TEST_TAGGED(pipeline_publish, subscriber_receives_every_pose, "deadline")
{
    char endpoint[512];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/poses.sock", kr_test_tmpdir());
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.source.max_frames = 60;
    cfg.rate = 1.0; /* recorded timing gives the subscriber time to join */
    cfg.publish.endpoint = endpoint;
    kr_pipeline *p = NULL;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    sub_ctx c = {.endpoint = endpoint, .expected = 60};
    kr_test_run_init(&c.run);
    pthread_t th;
    pthread_create(&th, NULL, subscribe, &c);
    usleep(1000000); /* ZeroMQ slow joiner: let the subscription reach the publisher */
    CHECK_OK(kr_pipeline_run(p));
    kr_test_run_returned(&c.run);
    pthread_join(th, NULL);
    CHECK_EQ(c.received, 60);
    CHECK_EQ(c.in_order, 60);
    CHECK_EQ(c.gaps, 0);
    CHECK_EQ(c.stopped, 1);
    /* Recorded timing: 60 frames at 30 Hz cannot finish before 59/30 s. */
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    CHECK_GE(st.elapsed_s, 59.0 / 30.0 * 0.98);
    kr_pipeline_destroy(&p);
}
