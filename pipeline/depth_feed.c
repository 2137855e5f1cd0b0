/* The `depth` topic's sender (pipeline/depth_feed.h). */
#include "pipeline/depth_feed.h"

#include <math.h>
#include <string.h>

void kr_depth_feed_init(kr_depth_feed *f, double period_s)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    f->period_s = period_s;
    atomic_init(&f->wanted, false);
}

void kr_depth_feed_free(kr_depth_feed *f)
{
    pthread_mutex_destroy(&f->lock);
}

void kr_depth_feed_offer(kr_depth_feed *f, const kr_frame *frame)
{
    if (f->period_s <= 0 || !atomic_load(&f->wanted) || !frame->raw || frame->width <= 0 ||
        frame->height <= 0)
        return;
    double now = kr_now();
    if (now < f->next_time) return;
    f->next_time = now + f->period_s;
    /* The smallest step that fits the thumbnail; a sample is the sensor
     * pixel at the step's corner (no averaging: a viewer sees real depths). */
    int step = 1;
    while (frame->width / step > KR_DEPTH_FEED_WIDTH || frame->height / step > KR_DEPTH_FEED_HEIGHT)
        step++;
    int w = frame->width / step, h = frame->height / step;
    pthread_mutex_lock(&f->lock);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint16_t raw = frame->raw[(size_t)y * step * frame->width + (size_t)x * step];
            float z = kr_depth_to_metres(raw, frame->encoding, frame->depth_scale);
            float mm = roundf(1000.0f * z);
            f->mm[y * w + x] = z > 0 && mm < 65535.0f ? (uint16_t)mm : 0;
        }
    f->msg = (kr_depth_msg){.frame = frame->index,
                            .timestamp = frame->timestamp,
                            .width = (uint16_t)w,
                            .height = (uint16_t)h,
                            .step = (uint16_t)step};
    f->fresh = true;
    pthread_mutex_unlock(&f->lock);
}

kr_status kr_depth_feed_tick(kr_depth_feed *f, kr_publisher *pub)
{
    if (f->period_s <= 0) return KR_OK;
    /* The subscriptions once a period, not at every message sent. */
    double now = kr_now();
    if (now >= f->next_check) {
        f->next_check = now + f->period_s;
        atomic_store(&f->wanted, kr_publisher_has_subscriber(pub, KR_TOPIC_DEPTH));
    }
    pthread_mutex_lock(&f->lock);
    bool fresh = f->fresh;
    kr_depth_msg m = f->msg;
    if (fresh) {
        memcpy(f->sending, f->mm, sizeof(uint16_t) * m.width * m.height);
        f->fresh = false;
    }
    pthread_mutex_unlock(&f->lock);
    if (!fresh) return KR_OK;
    /* The wire's samples are little-endian u16: encode each one. */
    uint8_t *le = (uint8_t *)f->sending;
    for (size_t i = 0; i < (size_t)m.width * m.height; i++) {
        uint16_t v = f->sending[i];
        le[2 * i] = (uint8_t)(v & 0xff);
        le[2 * i + 1] = (uint8_t)(v >> 8);
    }
    m.samples = le;
    f->sent++;
    return kr_publisher_send_depth(pub, &m);
}
