/* The model topic's sender (pipeline/model_feed.h). */
#include "pipeline/model_feed.h"

#include <stdlib.h>
#include <string.h>

#include "kinreg/frame.h"

void kr_model_feed_init(kr_model_feed *f, double period_s, size_t cap)
{
    memset(f, 0, sizeof *f);
    f->period_s = period_s;
    f->cap = cap;
    f->next_time = kr_now() + period_s;
}

void kr_model_feed_free(kr_model_feed *f)
{
    free(f->points);
    free(f->normals);
    memset(f, 0, sizeof *f);
}

double kr_model_feed_wait_s(const kr_model_feed *f)
{
    if (f->period_s <= 0 || f->cap == 0) return 3600;
    double left = f->next_time - kr_now();
    return left > 0 ? left : 0;
}

kr_status kr_model_feed_tick(kr_model_feed *f, kr_model *model, kr_publisher *pub)
{
    if (kr_model_feed_wait_s(f) > 0) return KR_OK;
    f->next_time = kr_now() + f->period_s;
    if (!kr_publisher_has_subscriber(pub, KR_TOPIC_MODEL)) {
        f->skipped++;
        return KR_OK;
    }
    kr_model_snapshot *snap = kr_model_snapshot_acquire(model);
    if (!snap) return KR_OK; /* no model yet */
    const kr_kdtree *tree = kr_model_snapshot_tree(snap);
    size_t n = kr_kdtree_size(tree), m = n < f->cap ? n : f->cap;
    if (m > f->capacity) {
        float *p = realloc(f->points, 3 * m * sizeof *p),
              *q = p ? realloc(f->normals, 3 * m * sizeof *q) : NULL;
        if (p) f->points = p;
        if (!q) {
            kr_model_snapshot_release(&snap);
            return kr_error(KR_ERR_NOMEM, "cannot hold a model snapshot of %zu points for viewers",
                            m);
        }
        f->normals = q;
        f->capacity = m;
    }
    /* An even stride over the tree's points: the cap thins the snapshot
     * uniformly instead of cutting part of the scene away. */
    for (size_t i = 0; i < m; i++) {
        size_t k = (size_t)((unsigned long long)i * n / m);
        kr_kdtree_point(tree, k, f->points + 3 * i, f->normals + 3 * i);
    }
    uint64_t frame = kr_model_snapshot_frame(snap);
    kr_model_snapshot_release(&snap);
    f->sent++;
    return kr_publisher_send_model(pub, f->points, f->normals, m, frame);
}
