/* Growable mutex/condition FIFO between the tracker and the publisher thread. */
#include "pipeline/outbox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/deadline.h"
#include "kinreg/frame.h"

kr_outbox_item kr_outbox_pose_item(kr_topic topic, uint64_t frame, double timestamp,
                                   const kr_pose *pose)
{
    kr_outbox_item item;
    memset(&item, 0, sizeof item);
    item.topic = topic;
    item.capture_time = kr_now();
    kr_pose_msg *m = &item.pose;
    m->topic = topic;
    m->frame_index = frame;
    m->timestamp = timestamp;
    memcpy(m->t, pose->t, sizeof m->t);
    kr_quat q = kr_pose_to_quat(pose);
    m->q[0] = q.x;
    m->q[1] = q.y;
    m->q[2] = q.z;
    m->q[3] = q.w;
    for (int i = 0; i < 21; i++)
        m->covariance[i] = NAN; /* unknown unless the caller has one */
    return item;
}

kr_status kr_outbox_init(kr_outbox *box)
{
    memset(box, 0, sizeof *box);
    box->capacity = 256;
    box->items = malloc(box->capacity * sizeof *box->items);
    if (!box->items) return kr_error(KR_ERR_NOMEM, "cannot allocate the publisher queue");
    pthread_mutex_init(&box->lock, NULL);
    pthread_cond_init(&box->ready, NULL);
    return KR_OK;
}

void kr_outbox_destroy(kr_outbox *box)
{
    if (!box->items) return;
    pthread_mutex_destroy(&box->lock);
    pthread_cond_destroy(&box->ready);
    free(box->items);
    box->items = NULL;
}

kr_status kr_outbox_put(kr_outbox *box, const kr_outbox_item *item)
{
    pthread_mutex_lock(&box->lock);
    if (box->count == box->capacity) {
        /* Unwrap into a buffer twice as large; messages are never dropped here
         * (ZeroMQ's high-water mark is where slow subscribers lose messages). */
        kr_outbox_item *grown = malloc(2 * box->capacity * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&box->lock);
            return kr_error(KR_ERR_NOMEM, "cannot grow the publisher queue");
        }
        for (size_t i = 0; i < box->count; i++) grown[i] = box->items[(box->head + i) % box->capacity];
        free(box->items);
        box->items = grown;
        box->head = 0;
        box->capacity *= 2;
    }
    box->items[(box->head + box->count) % box->capacity] = *item;
    box->count++;
    pthread_cond_signal(&box->ready);
    pthread_mutex_unlock(&box->lock);
    return KR_OK;
}

bool kr_outbox_take(kr_outbox *box, kr_outbox_item *out)
{
    pthread_mutex_lock(&box->lock);
    while (box->count == 0 && !box->closed) pthread_cond_wait(&box->ready, &box->lock);
    bool got = box->count > 0;
    if (got) {
        *out = box->items[box->head];
        box->head = (box->head + 1) % box->capacity;
        box->count--;
    }
    pthread_mutex_unlock(&box->lock);
    return got;
}

void kr_outbox_close(kr_outbox *box)
{
    pthread_mutex_lock(&box->lock);
    box->closed = true;
    pthread_cond_broadcast(&box->ready);
    pthread_mutex_unlock(&box->lock);
}

int kr_outbox_take_within(kr_outbox *box, kr_outbox_item *out, double timeout_s)
{
    struct timespec until = kr_deadline_after(CLOCK_REALTIME, timeout_s);
    pthread_mutex_lock(&box->lock);
    int rc = 0;
    while (box->count == 0 && !box->closed && !box->woken && rc == 0)
        rc = pthread_cond_timedwait(&box->ready, &box->lock, &until);
    box->woken = false;
    int got = box->count > 0 ? 1 : box->closed ? -1 : 0;
    if (got == 1) {
        *out = box->items[box->head];
        box->head = (box->head + 1) % box->capacity;
        box->count--;
    }
    pthread_mutex_unlock(&box->lock);
    return got;
}

void kr_outbox_wake(kr_outbox *box)
{
    pthread_mutex_lock(&box->lock);
    box->woken = true;
    pthread_cond_broadcast(&box->ready);
    pthread_mutex_unlock(&box->lock);
}
