/* The `mesh` topic's sender (pipeline/mesh_feed.h). */
#include "pipeline/mesh_feed.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/deadline.h"

void kr_mesh_feed_init(kr_mesh_feed *f, double period_s, kr_outbox *wake)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->sent_cond, NULL);
    f->period_s = period_s;
    f->wake = wake;
    f->per_block = 40;
    atomic_init(&f->wanted, false);
}

void kr_mesh_feed_free(kr_mesh_feed *f)
{
    kr_wire_mesh_packed_free(&f->ready);
    kr_wire_mesh_packed_free(&f->sending);
    pthread_cond_destroy(&f->sent_cond);
    pthread_mutex_destroy(&f->lock);
}

/* A refresh's coarseness: the finest power of two (at most 16) whose mesh
 * should fit the budget. A surface has about `per_block` triangles a block
 * at its own voxel (30-40 for a room; learnt from the last refresh) and a
 * factor f about 1/f² of them, so a scan's first refresh is already made
 * at the factor its size asks for. */
static int factor_for(size_t blocks, double per_block)
{
    int f = 1;
    while (f < 16 && (double)blocks * per_block / ((double)f * f) > KR_MESH_FEED_FACES)
        f *= 2;
    return f;
}

void kr_mesh_feed_offer(kr_mesh_feed *f, const kr_surface *surface, uint64_t frames, bool force)
{
    if (f->period_s <= 0 || !atomic_load(&f->wanted) || frames == f->meshed_frames) return;
    double now = kr_now();
    if (!force && now < f->next_time) return;
    f->next_time = now + f->period_s;
    f->meshed_frames = frames;
    kr_mesh mesh = {0};
    kr_wire_mesh_packed packed = {0};
    double start = kr_now();
    size_t blocks = kr_surface_stats_get(surface).blocks;
    int factor = factor_for(blocks, f->per_block);
    kr_status s = kr_surface_extract_coarse(surface, factor, &mesh);
    if (s == KR_OK)
        s = kr_wire_pack_mesh(mesh.xyz, mesh.normals, mesh.rgb, mesh.n_vertices, mesh.faces,
                              mesh.n_faces, frames, &packed);
    if (s == KR_OK) {
        if (blocks) f->per_block = (double)mesh.n_faces * factor * factor / (double)blocks;
        f->refreshes++;
        f->refresh_s += kr_now() - start;
        f->last_faces = mesh.n_faces;
    }
    kr_mesh_free(&mesh);
    if (s == KR_ERR_EMPTY) return; /* nothing seen yet */
    if (s != KR_OK) {
        if (!f->warned)
            kr_log(KR_LOG_WARN, "the surface is not published: %s (%s)", kr_strerror(s),
                   kr_last_error());
        f->warned = true;
        return;
    }
    pthread_mutex_lock(&f->lock);
    kr_wire_mesh_packed_free(&f->ready); /* a refresh the publisher had no time for */
    f->ready = packed;
    f->fresh = true;
    pthread_mutex_unlock(&f->lock);
    if (f->wake) kr_outbox_wake(f->wake);
}

void kr_mesh_feed_flush(kr_mesh_feed *f, double timeout_s)
{
    struct timespec until = kr_deadline_after(CLOCK_REALTIME, timeout_s);
    pthread_mutex_lock(&f->lock);
    int rc = 0;
    while ((f->fresh || f->in_flight) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&f->sent_cond, &f->lock, &until);
    pthread_mutex_unlock(&f->lock);
}

kr_status kr_mesh_feed_tick(kr_mesh_feed *f, kr_publisher *pub)
{
    if (f->period_s <= 0) return KR_OK;
    /* The subscriptions at every message sent until a viewer has come (a
     * short replay ends before a period has passed), then a few times a
     * period, to see it go. */
    double now = kr_now();
    if (!atomic_load(&f->wanted) || now >= f->next_check) {
        f->next_check = now + fmin(f->period_s, 0.5);
        atomic_store(&f->wanted, kr_publisher_has_subscriber(pub, KR_TOPIC_MESH));
    }
    pthread_mutex_lock(&f->lock);
    bool fresh = f->fresh;
    if (fresh) {
        f->sending = f->ready; /* sending is empty between ticks */
        memset(&f->ready, 0, sizeof f->ready);
        f->fresh = false;
        f->in_flight = true;
    }
    pthread_mutex_unlock(&f->lock);
    if (!fresh) return KR_OK;
    kr_status s = kr_publisher_send_mesh(pub, &f->sending);
    kr_wire_mesh_packed_free(&f->sending);
    pthread_mutex_lock(&f->lock);
    f->in_flight = false;
    pthread_cond_broadcast(&f->sent_cond);
    pthread_mutex_unlock(&f->lock);
    return s;
}
