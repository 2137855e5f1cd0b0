/* Bounded frame queue: ordering under BLOCK, accounting under DROP_OLDEST,
 * close semantics and timeouts. Worker threads record what they saw; checks run
 * on the main thread (the harness is not thread-safe). */
#include "kr_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "kinreg/queue.h"

/* its worker threads are what TSan watches */
KR_LABELS("threads");

/* A frame whose one-sample buffer carries its own index, so a test can tell
 * that the buffer travelled with the frame. */
static kr_frame make_frame(uint64_t index)
{
    kr_frame f = {0};
    f.index = index;
    f.width = 1;
    f.height = 1;
    f.raw = malloc(sizeof *f.raw);
    if (f.raw) f.raw[0] = (uint16_t)(index & 0xffff);
    return f;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static kr_queue *new_queue(int capacity, kr_queue_policy policy)
{
    kr_queue_config cfg;
    kr_queue_config_default(&cfg);
    cfg.capacity = capacity;
    cfg.policy = policy;
    kr_queue *q = NULL;
    if (kr_queue_create(&q, &cfg) != KR_OK) return NULL;
    return q;
}

typedef struct {
    kr_queue *q;
    int n;
    int producer_delay_ms, consumer_delay_ms;
    /* consumer's record */
    uint64_t *received;
    int received_count;
    int payload_mismatch;
    kr_status end_status;
    /* producer's record */
    int push_failures;
} flow;

static void *producer(void *arg)
{
    flow *f = arg;
    for (int i = 0; i < f->n; i++) {
        kr_frame fr = make_frame((uint64_t)i);
        if (kr_queue_push(f->q, &fr) != KR_OK || fr.raw != NULL) {
            f->push_failures++;
            kr_frame_release(&fr);
        }
        if (f->producer_delay_ms) sleep_ms(f->producer_delay_ms);
    }
    kr_queue_close(f->q);
    return NULL;
}

static void *consumer(void *arg)
{
    flow *f = arg;
    for (;;) {
        kr_frame fr = {0};
        kr_status s = kr_queue_pop(f->q, &fr, -1);
        if (s != KR_OK) {
            f->end_status = s;
            break;
        }
        if (!fr.raw || fr.raw[0] != (uint16_t)(fr.index & 0xffff)) f->payload_mismatch++;
        if (f->received_count < f->n) f->received[f->received_count++] = fr.index;
        kr_frame_release(&fr);
        if (f->consumer_delay_ms) sleep_ms(f->consumer_delay_ms);
    }
    return NULL;
}

static void run_flow(flow *f)
{
    pthread_t p, c;
    pthread_create(&c, NULL, consumer, f);
    pthread_create(&p, NULL, producer, f);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
}

KR_TEST(queue, block_delivers_every_frame_in_order)
{
    kr_queue *q = new_queue(4, KR_QUEUE_BLOCK);
    REQUIRE(q != NULL);
    enum { N = 2000 };
    flow f = {.q = q, .n = N, .received = calloc(N, sizeof(uint64_t))};
    REQUIRE(f.received != NULL);
    run_flow(&f);
    CHECK_EQ(f.push_failures, 0);
    CHECK_EQ(f.received_count, N);
    CHECK_EQ(f.payload_mismatch, 0);
    CHECK_EQ(f.end_status, KR_END);
    int out_of_order = 0;
    for (int i = 0; i < f.received_count; i++) out_of_order += f.received[i] != (uint64_t)i;
    CHECK_EQ(out_of_order, 0);
    CHECK_EQ(kr_queue_dropped(q), 0);
    free(f.received);
    kr_queue_destroy(&q);
    CHECK(q == NULL);
}

KR_TEST(queue, block_with_slow_consumer_never_drops)
{
    /* A consumer slower than the producer must throttle it, not lose frames. */
    kr_queue *q = new_queue(2, KR_QUEUE_BLOCK);
    REQUIRE(q != NULL);
    enum { N = 60 };
    flow f = {.q = q, .n = N, .consumer_delay_ms = 1, .received = calloc(N, sizeof(uint64_t))};
    REQUIRE(f.received != NULL);
    run_flow(&f);
    CHECK_EQ(f.received_count, N);
    CHECK_EQ(kr_queue_dropped(q), 0);
    for (int i = 0; i < f.received_count; i++) CHECK_EQ(f.received[i], i);
    free(f.received);
    kr_queue_destroy(&q);
}

KR_TEST(queue, drop_oldest_with_slow_consumer)
{
    kr_queue *q = new_queue(3, KR_QUEUE_DROP_OLDEST);
    REQUIRE(q != NULL);
    enum { N = 300 };
    flow f = {.q = q, .n = N, .consumer_delay_ms = 2, .received = calloc(N, sizeof(uint64_t))};
    REQUIRE(f.received != NULL);
    run_flow(&f);
    CHECK_EQ(f.push_failures, 0); /* a live producer never waits or fails */
    CHECK_EQ(f.payload_mismatch, 0);
    CHECK_EQ(f.end_status, KR_END);
    CHECK_EQ((uint64_t)f.received_count + kr_queue_dropped(q), N);
    CHECK_GT(kr_queue_dropped(q), 0); /* the consumer really was too slow */
    int not_increasing = 0;
    for (int i = 1; i < f.received_count; i++) not_increasing += f.received[i] <= f.received[i - 1];
    CHECK_EQ(not_increasing, 0);
    REQUIRE(f.received_count > 0);
    CHECK_EQ(f.received[f.received_count - 1], N - 1); /* the newest frame always arrives */
    free(f.received);
    kr_queue_destroy(&q);
}

KR_TEST(queue, drop_oldest_keeps_the_newest_capacity_frames)
{
    kr_queue *q = new_queue(2, KR_QUEUE_DROP_OLDEST);
    REQUIRE(q != NULL);
    for (uint64_t i = 0; i < 5; i++) {
        kr_frame fr = make_frame(i);
        CHECK_OK(kr_queue_push(q, &fr));
        CHECK(fr.raw == NULL);
    }
    CHECK_EQ(kr_queue_dropped(q), 3);
    CHECK_EQ(kr_queue_length(q), 2);
    kr_frame a = {0}, b = {0};
    CHECK_OK(kr_queue_pop(q, &a, 0));
    CHECK_OK(kr_queue_pop(q, &b, 0));
    CHECK_EQ(a.index, 3);
    CHECK_EQ(b.index, 4);
    kr_frame_release(&a);
    kr_frame_release(&b);
    kr_queue_destroy(&q);
}

KR_TEST(queue, close_drains_then_ends_and_refuses_pushes)
{
    kr_queue *q = new_queue(8, KR_QUEUE_BLOCK);
    REQUIRE(q != NULL);
    for (uint64_t i = 0; i < 3; i++) {
        kr_frame fr = make_frame(i);
        CHECK_OK(kr_queue_push(q, &fr));
    }
    kr_queue_close(q);
    kr_queue_close(q); /* idempotent */
    kr_frame late = make_frame(99);
    CHECK_STATUS(kr_queue_push(q, &late), KR_END);
    CHECK(late.raw != NULL); /* still the caller's */
    kr_frame_release(&late);
    for (uint64_t i = 0; i < 3; i++) {
        kr_frame fr = {0};
        CHECK_OK(kr_queue_pop(q, &fr, -1));
        CHECK_EQ(fr.index, i);
        kr_frame_release(&fr);
    }
    kr_frame sentinel = {.index = 12345};
    CHECK_STATUS(kr_queue_pop(q, &sentinel, -1), KR_END);
    CHECK_STATUS(kr_queue_pop(q, &sentinel, 100), KR_END);
    CHECK_EQ(sentinel.index, 12345); /* untouched on failure */
    kr_queue_destroy(&q);
}

typedef struct {
    kr_queue *q;
    atomic_int done;
    kr_status status;
    bool still_owned;
} blocked_push;

static void *push_one(void *arg)
{
    blocked_push *b = arg;
    kr_frame fr = make_frame(7);
    b->status = kr_queue_push(b->q, &fr);
    b->still_owned = fr.raw != NULL;
    kr_frame_release(&fr);
    atomic_store(&b->done, 1);
    return NULL;
}

KR_TEST(queue, close_wakes_a_blocked_push)
{
    kr_queue *q = new_queue(1, KR_QUEUE_BLOCK);
    REQUIRE(q != NULL);
    kr_frame first = make_frame(0);
    REQUIRE_OK(kr_queue_push(q, &first));
    blocked_push b = {.q = q};
    atomic_init(&b.done, 0);
    pthread_t t;
    pthread_create(&t, NULL, push_one, &b);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&b.done), 0); /* full queue, BLOCK: the push waits */
    kr_queue_close(q);
    pthread_join(t, NULL);
    CHECK_EQ(b.status, KR_END);
    CHECK(b.still_owned);
    CHECK_EQ(kr_queue_length(q), 1);
    kr_queue_destroy(&q); /* releases the queued frame (leak checkers see it) */
}

typedef struct {
    kr_queue *q;
    int delay_ms;
} late_push;

static void *push_later(void *arg)
{
    late_push *l = arg;
    sleep_ms(l->delay_ms);
    kr_frame fr = make_frame(42);
    if (kr_queue_push(l->q, &fr) != KR_OK) kr_frame_release(&fr);
    return NULL;
}

KR_TEST(queue, pop_times_out_and_wakes_on_push)
{
    kr_queue *q = new_queue(2, KR_QUEUE_BLOCK);
    REQUIRE(q != NULL);
    kr_frame fr = {0};
    CHECK_STATUS(kr_queue_pop(q, &fr, 0), KR_TIMEOUT);
    double t0 = kr_now();
    CHECK_STATUS(kr_queue_pop(q, &fr, 80), KR_TIMEOUT);
    double waited = kr_now() - t0;
    CHECK_GE(waited, 0.075);
    CHECK_LT(waited, 2.0); /* generous: shared, loaded machines */
    CHECK(fr.raw == NULL);

    late_push l = {q, 30};
    pthread_t t;
    pthread_create(&t, NULL, push_later, &l);
    t0 = kr_now();
    CHECK_OK(kr_queue_pop(q, &fr, 5000));
    CHECK_LT(kr_now() - t0, 4.0); /* woke on the push, not on the timeout */
    CHECK_EQ(fr.index, 42);
    kr_frame_release(&fr);
    pthread_join(t, NULL);
    kr_queue_destroy(&q);
}

KR_TEST(queue, rejects_bad_config_and_destroy_accepts_null)
{
    kr_queue_config cfg;
    kr_queue_config_default(&cfg);
    CHECK_EQ(cfg.policy, KR_QUEUE_BLOCK);
    CHECK_GE(cfg.capacity, 1);
    kr_queue *q = NULL;
    cfg.capacity = 0;
    CHECK_STATUS(kr_queue_create(&q, &cfg), KR_ERR_INVALID_ARG);
    CHECK(q == NULL);
    cfg.capacity = 4;
    cfg.policy = (kr_queue_policy)9;
    CHECK_STATUS(kr_queue_create(&q, &cfg), KR_ERR_INVALID_ARG);
    CHECK(q == NULL);
    kr_queue_destroy(&q);
    kr_queue_destroy(NULL);
    CHECK_STR(kr_strerror(KR_TIMEOUT), "timed out");
}
