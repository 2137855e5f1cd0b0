/* kinreg — bounded, thread-safe FIFO of frames between the capture thread and
 * the tracker (DESIGN.md §2). Replay blocks the producer when full and never
 * drops; live capture drops the oldest queued frame and counts it, so the
 * tracker always gets the freshest data and the sensor is never stalled. */
#ifndef KINREG_QUEUE_H
#define KINREG_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "kinreg/frame.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_queue kr_queue;

typedef enum {
    KR_QUEUE_BLOCK = 0,      /* replay: push waits for space; nothing is ever dropped */
    KR_QUEUE_DROP_OLDEST = 1 /* live: push on a full queue releases the oldest frame and counts it */
} kr_queue_policy;

typedef struct {
    int capacity;           /* frames held at most (default 8) */
    kr_queue_policy policy; /* default KR_QUEUE_BLOCK */
} kr_queue_config;

KR_API void kr_queue_config_default(kr_queue_config *cfg);
KR_API kr_status kr_queue_create(kr_queue **out, const kr_queue_config *cfg);
/* Releases the frames still queued, then frees the queue. No thread may be
 * inside push or pop (close the queue and join them first). */
KR_API void kr_queue_destroy(kr_queue **q);

/* Appends `frame`. On KR_OK the queue owns the frame's buffer and `*frame` is
 * cleared (raw = NULL). Returns KR_END, leaving `*frame` with the caller, when
 * the queue is closed — also when closed while this push was waiting. */
KR_API kr_status kr_queue_push(kr_queue *q, kr_frame *frame);

/* Removes the oldest frame into `*out` (the caller then owns it).
 * timeout_ms < 0 waits indefinitely, 0 polls. Returns KR_OK, KR_END once the
 * queue is closed and drained, or KR_TIMEOUT when nothing arrived in time;
 * `*out` is untouched unless KR_OK. */
KR_API kr_status kr_queue_pop(kr_queue *q, kr_frame *out, int timeout_ms);

/* The producer is done (or the consumer gives up): later and waiting pushes
 * return KR_END; pops drain what is queued, then return KR_END. Idempotent. */
KR_API void kr_queue_close(kr_queue *q);

/* Frames dropped by KR_QUEUE_DROP_OLDEST so far. Safe from any thread. */
KR_API uint64_t kr_queue_dropped(const kr_queue *q);
/* Frames queued now (a snapshot; may change at once). Safe from any thread. */
KR_API size_t kr_queue_length(const kr_queue *q);

#ifdef __cplusplus
}
#endif
#endif
