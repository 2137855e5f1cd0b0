/* The `model` topic's sender (docs/PROTOCOL.md, "Model record"): once a
 * period, on the publisher thread, the model's last k-d tree snapshot is
 * subsampled to a cap and handed to the publisher, which quantises and
 * chunks it. Nothing is built when no subscriber asks for the topic, and the
 * tracker never waits for any of it: the snapshot is reference-counted and
 * read-only, and the socket belongs to the publisher thread. */
#ifndef KINREG_PIPELINE_MODEL_FEED_H
#define KINREG_PIPELINE_MODEL_FEED_H

#include <stdint.h>

#include "kinreg/model.h"
#include "kinreg/transport.h"

typedef struct {
    double period_s;  /* <= 0: never send */
    size_t cap;       /* points per snapshot at most */
    double next_time; /* kr_now() of the next send */
    float *points, *normals;
    size_t capacity;
    uint64_t sent, skipped; /* snapshots sent; periods skipped because nobody subscribed */
} kr_model_feed;

void kr_model_feed_init(kr_model_feed *f, double period_s, size_t cap);
void kr_model_feed_free(kr_model_feed *f);
/* Seconds until the next send is due (0: now); a large value when never. */
double kr_model_feed_wait_s(const kr_model_feed *f);
/* Sends a snapshot when due and someone subscribes to `model`. */
kr_status kr_model_feed_tick(kr_model_feed *f, kr_model *model, kr_publisher *pub);

#endif
