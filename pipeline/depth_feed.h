/* The `depth` topic's sender (docs/PROTOCOL.md, "Depth record"): a thumbnail
 * of the latest depth frame for viewers, about twice a second. The tracker
 * thread offers each frame after tracking it; only when a subscriber wants
 * the topic and a period has passed does it subsample the frame (a few
 * tens of microseconds) into the feed. The publisher thread, which owns the
 * socket, sends what is there and says whether anyone wants it. The tracker
 * never waits on the socket: the two share one small buffer under a lock. */
#ifndef KINREG_PIPELINE_DEPTH_FEED_H
#define KINREG_PIPELINE_DEPTH_FEED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kinreg/frame.h"
#include "kinreg/transport.h"

/* The thumbnail's largest size: a 640×480 frame is subsampled by 4. */
#define KR_DEPTH_FEED_WIDTH 160
#define KR_DEPTH_FEED_HEIGHT 120

typedef struct {
    pthread_mutex_t lock;
    double period_s;    /* <= 0: never */
    double next_time;   /* tracker thread: kr_now() of the next thumbnail */
    atomic_bool wanted; /* set by the publisher thread: someone subscribes */
    /* Under lock: the newest thumbnail and whether it was sent. */
    uint16_t mm[KR_DEPTH_FEED_WIDTH * KR_DEPTH_FEED_HEIGHT];
    kr_depth_msg msg;
    bool fresh;
    /* Publisher thread only: the copy it sends from. */
    uint16_t sending[KR_DEPTH_FEED_WIDTH * KR_DEPTH_FEED_HEIGHT];
    uint64_t sent;
    double next_check; /* kr_now() of the next look at the subscriptions */
} kr_depth_feed;

void kr_depth_feed_init(kr_depth_feed *f, double period_s);
void kr_depth_feed_free(kr_depth_feed *f);
/* Tracker thread: takes a thumbnail of `frame` when one is due and wanted. */
void kr_depth_feed_offer(kr_depth_feed *f, const kr_frame *frame);
/* Publisher thread: sends a thumbnail not sent yet. */
kr_status kr_depth_feed_tick(kr_depth_feed *f, kr_publisher *pub);

#endif
