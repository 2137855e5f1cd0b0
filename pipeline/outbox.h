/* The tracker → publisher hand-off: a growable FIFO of messages drained by the
 * publisher thread, which alone owns the ZeroMQ socket (sockets are not
 * thread-safe). The tracker never waits on the network. */
#ifndef KINREG_PIPELINE_OUTBOX_H
#define KINREG_PIPELINE_OUTBOX_H

#include <pthread.h>
#include <stdbool.h>

#include "kinreg/pose.h"
#include "kinreg/transport.h"

typedef struct {
    kr_topic topic;
    kr_pose_msg pose;
    kr_status_msg status;
    double capture_time; /* pose: when its frame entered kinreg (kr_now()) */
} kr_outbox_item;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    kr_outbox_item *items;
    size_t head, count, capacity;
    bool closed;
    bool woken; /* kr_outbox_wake: a waiting take returns with nothing */
} kr_outbox;

/* A `pose`, `refine` or `final` item: topic, frame, timestamp and pose set,
 * capture_time now; the caller sets state, method and the figures. */
kr_outbox_item kr_outbox_pose_item(kr_topic topic, uint64_t frame, double timestamp,
                                   const kr_pose *pose);

kr_status kr_outbox_init(kr_outbox *box);
void kr_outbox_destroy(kr_outbox *box);
kr_status kr_outbox_put(kr_outbox *box, const kr_outbox_item *item);
/* Blocks for the next item; false once closed and drained. */
bool kr_outbox_take(kr_outbox *box, kr_outbox_item *out);
/* Waits at most timeout_s for the next item: 1 taken, 0 none yet, -1 closed
 * and drained (the publisher thread's loop, which also has timed work). */
int kr_outbox_take_within(kr_outbox *box, kr_outbox_item *out, double timeout_s);
void kr_outbox_close(kr_outbox *box);
/* Makes the publisher thread's wait (kr_outbox_take_within) return now,
 * with or without an item: other threads have timed work for it (a mesh
 * to send). */
void kr_outbox_wake(kr_outbox *box);

#endif
