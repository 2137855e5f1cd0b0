/* Bounded frame FIFO: a ring buffer under one mutex with two condition
 * variables (space for producers, data for consumers). */
#include "kinreg/queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "core/deadline.h"

struct kr_queue {
    kr_queue_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    kr_frame *ring;
    int head, count; /* oldest at ring[head] */
    bool closed;
    /* Atomic mirrors so the const readers need no lock. */
    _Atomic uint64_t dropped;
    _Atomic size_t length;
};

void kr_queue_config_default(kr_queue_config *cfg)
{
    if (!cfg) return;
    cfg->capacity = 8;
    cfg->policy = KR_QUEUE_BLOCK;
}

kr_status kr_queue_create(kr_queue **out, const kr_queue_config *cfg)
{
    if (!out || !cfg) return kr_error(KR_ERR_INVALID_ARG, "kr_queue_create: NULL argument");
    if (cfg->capacity < 1)
        return kr_error(KR_ERR_INVALID_ARG, "queue capacity must be at least 1 (got %d)", cfg->capacity);
    if (cfg->policy != KR_QUEUE_BLOCK && cfg->policy != KR_QUEUE_DROP_OLDEST)
        return kr_error(KR_ERR_INVALID_ARG, "unknown queue policy %d", (int)cfg->policy);

    kr_queue *q = calloc(1, sizeof *q);
    if (!q) return kr_error(KR_ERR_NOMEM, "cannot allocate frame queue");
    q->ring = calloc((size_t)cfg->capacity, sizeof *q->ring);
    if (!q->ring) {
        free(q);
        return kr_error(KR_ERR_NOMEM, "cannot allocate frame queue of %d frames", cfg->capacity);
    }
    q->cfg = *cfg;
    /* Timeouts are measured on the monotonic clock so a wall-clock jump
     * (NTP, suspend) neither shortens nor stretches a wait. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, &ca);
    pthread_cond_init(&q->not_full, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&q->dropped, 0);
    atomic_init(&q->length, 0);
    *out = q;
    return KR_OK;
}

void kr_queue_destroy(kr_queue **qp)
{
    if (!qp || !*qp) return;
    kr_queue *q = *qp;
    for (int i = 0; i < q->count; i++) kr_frame_release(&q->ring[(q->head + i) % q->cfg.capacity]);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    pthread_mutex_destroy(&q->mu);
    free(q->ring);
    free(q);
    *qp = NULL;
}

kr_status kr_queue_push(kr_queue *q, kr_frame *frame)
{
    if (!q || !frame) return kr_error(KR_ERR_INVALID_ARG, "kr_queue_push: NULL argument");
    pthread_mutex_lock(&q->mu);
    if (q->cfg.policy == KR_QUEUE_BLOCK) {
        while (q->count == q->cfg.capacity && !q->closed) pthread_cond_wait(&q->not_full, &q->mu);
    }
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return KR_END;
    }
    if (q->count == q->cfg.capacity) {
        /* DROP_OLDEST on a full queue: the stalest frame is the least useful
         * to a tracker that wants to stay current. */
        kr_frame_release(&q->ring[q->head]);
        q->head = (q->head + 1) % q->cfg.capacity;
        q->count--;
        atomic_fetch_add(&q->dropped, 1);
    }
    q->ring[(q->head + q->count) % q->cfg.capacity] = *frame;
    q->count++;
    atomic_store(&q->length, (size_t)q->count);
    frame->raw = NULL; /* ownership moved into the queue */
    frame->rgb = NULL;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return KR_OK;
}

kr_status kr_queue_pop(kr_queue *q, kr_frame *out, int timeout_ms)
{
    if (!q || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_queue_pop: NULL argument");
    struct timespec deadline =
        kr_deadline_after(CLOCK_MONOTONIC, timeout_ms > 0 ? 1e-3 * timeout_ms : 0.0);
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !q->closed) {
        if (timeout_ms == 0) break;
        if (timeout_ms < 0) {
            pthread_cond_wait(&q->not_empty, &q->mu);
        } else if (pthread_cond_timedwait(&q->not_empty, &q->mu, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    if (q->count == 0) {
        kr_status s = q->closed ? KR_END : KR_TIMEOUT;
        pthread_mutex_unlock(&q->mu);
        return s;
    }
    *out = q->ring[q->head];
    q->ring[q->head].raw = NULL;
    q->ring[q->head].rgb = NULL;
    q->head = (q->head + 1) % q->cfg.capacity;
    q->count--;
    atomic_store(&q->length, (size_t)q->count);
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return KR_OK;
}

void kr_queue_close(kr_queue *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    /* Wake everyone: waiting pushes must return, waiting pops must see the end. */
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

uint64_t kr_queue_dropped(const kr_queue *q)
{
    return q ? atomic_load(&((kr_queue *)q)->dropped) : 0;
}

size_t kr_queue_length(const kr_queue *q)
{
    return q ? atomic_load(&((kr_queue *)q)->length) : 0;
}
