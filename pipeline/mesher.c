/* The surface thread (pipeline/mesher.h): one mutex, one condition
 * variable, a waiting slot and a working buffer that swap. */
#include "pipeline/mesher.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpu/engine.h"

typedef struct {
    kr_cloud cloud;  /* points owned here; normals unused (NULL) */
    size_t points_bytes;
    uint8_t *rgb;    /* owned here, rgb_capacity bytes */
    size_t rgb_capacity;
    bool coloured; /* rgb holds this frame's colour */
    kr_pose pose;
} mesher_job;

struct kr_mesher {
    kr_surface *surface;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    mesher_job waiting, working;
    bool has_waiting, busy, quit;
    uint64_t fused, skipped;
    kr_mesh_feed *feed; /* the `mesh` topic's, or NULL */
    bool pinned;        /* the surface is on a device: job buffers page-locked */
    kr_status status; /* the first integration failure */
    char message[1024];
};

static void *mesher_main(void *arg)
{
    kr_mesher *m = arg;
    /* Below the tracker: where cores are few the surface takes what they
     * leave (this thread's niceness, which the OpenMP threads it starts
     * inherit), not time from the poses. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10) != 0)
        kr_log(KR_LOG_DEBUG, "surface thread: its priority stays (%s)", strerror(errno));
    pthread_mutex_lock(&m->lock);
    for (;;) {
        while (!m->has_waiting && !m->quit)
            pthread_cond_wait(&m->cond, &m->lock);
        if (!m->has_waiting) break; /* quit with nothing left */
        mesher_job t = m->working;
        m->working = m->waiting;
        m->waiting = t;
        m->has_waiting = false;
        m->busy = true;
        pthread_mutex_unlock(&m->lock);
        kr_status s = m->status == KR_OK
                          ? kr_surface_integrate(m->surface, &m->working.cloud,
                                                 m->working.coloured ? m->working.rgb : NULL,
                                                 &m->working.pose)
                          : KR_OK;
        /* The viewers' refresh, when one is due: frames arriving meanwhile
         * wait in the slot (and replace each other) as during any frame. */
        if (s == KR_OK && m->feed)
            kr_mesh_feed_offer(m->feed, m->surface, kr_surface_stats_get(m->surface).frames, false);
        pthread_mutex_lock(&m->lock);
        m->busy = false;
        if (s == KR_OK) m->fused++;
        if (s != KR_OK && m->status == KR_OK) {
            m->status = s;
            snprintf(m->message, sizeof m->message, "%s", kr_last_error());
        }
        pthread_cond_broadcast(&m->cond);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

kr_status kr_mesher_create(kr_mesher **out, const kr_surface_config *cfg, const kr_device *device,
                           kr_mesh_feed *feed)
{
    kr_mesher *m = calloc(1, sizeof *m);
    if (!m) return kr_error(KR_ERR_NOMEM, "surface thread: out of memory");
    m->feed = feed;
    kr_status s = kr_surface_create(&m->surface, cfg);
    if (s != KR_OK) {
        free(m);
        return s;
    }
    if (kr_device_backend(device) == KR_BACKEND_CUDA) {
        m->pinned = kr_surface_fuse_on(m->surface, device) == KR_OK;
        if (!m->pinned)
            kr_log(KR_LOG_WARN, "the surface is fused on the host: %s", kr_last_error());
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->cond, NULL);
    if (pthread_create(&m->thread, NULL, mesher_main, m) != 0) {
        pthread_cond_destroy(&m->cond);
        pthread_mutex_destroy(&m->lock);
        kr_surface_destroy(&m->surface);
        free(m);
        return kr_error(KR_ERR_NOMEM, "surface thread: cannot start a thread");
    }
    *out = m;
    return KR_OK;
}

/* A job buffer of at least `bytes`: page-locked when the surface is on a
 * device, so that its upload is one DMA (a 640x480 cloud's 3.7 MB in a
 * fraction of the time a pageable copy takes). Contents are not kept. */
static bool job_buffer(const kr_mesher *m, void **buf, size_t *cap, size_t bytes)
{
    if (*cap >= bytes) return true;
    void *p = NULL;
    if (m->pinned) {
        if (kr_gpu_host_alloc(&p, bytes) != KR_OK) return false;
        kr_gpu_host_free(*buf);
    } else {
        if (!(p = realloc(*buf, bytes))) return false;
    }
    *buf = p;
    *cap = bytes;
    return true;
}

static void job_free(const kr_mesher *m, mesher_job *j)
{
    if (m->pinned) {
        kr_gpu_host_free(j->cloud.points);
        kr_gpu_host_free(j->rgb);
    } else {
        free(j->cloud.points);
        free(j->rgb);
    }
}

kr_status kr_mesher_post(kr_mesher *m, const kr_cloud *cloud, const uint8_t *rgb,
                         const kr_pose *pose)
{
    size_t n = 3 * (size_t)cloud->width * (size_t)cloud->height;
    pthread_mutex_lock(&m->lock);
    mesher_job *j = &m->waiting;
    if (rgb && !job_buffer(m, (void **)&j->rgb, &j->rgb_capacity, n)) {
        pthread_mutex_unlock(&m->lock);
        return kr_error(KR_ERR_NOMEM, "surface thread: out of memory for a %dx%d colour image",
                        cloud->width, cloud->height);
    }
    j->coloured = rgb != NULL;
    if (rgb) memcpy(j->rgb, rgb, n);
    if (!job_buffer(m, (void **)&j->cloud.points, &j->points_bytes, n * sizeof(float))) {
        pthread_mutex_unlock(&m->lock);
        return kr_error(KR_ERR_NOMEM, "surface thread: out of memory for a %dx%d cloud",
                        cloud->width, cloud->height);
    }
    float *points = j->cloud.points;
    j->cloud = *cloud;
    j->cloud.points = points;
    j->cloud.normals = NULL;
    memcpy(points, cloud->points, n * sizeof *points);
    j->pose = *pose;
    if (m->has_waiting) m->skipped++;
    m->has_waiting = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    return KR_OK;
}

static void stop(kr_mesher *m)
{
    pthread_mutex_lock(&m->lock);
    bool running = !m->quit;
    m->quit = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (running) pthread_join(m->thread, NULL);
}

kr_status kr_mesher_finish(kr_mesher *m, const char *path, int decimate, kr_pipeline_stats *stats)
{
    stop(m); /* integrates the frame waiting first */
    stats->mesh_frames = m->fused;
    stats->mesh_skipped = m->skipped;
    if (m->status != KR_OK) return kr_error(m->status, "%s", m->message);
    kr_surface_stats ss = kr_surface_stats_get(m->surface);
    if (m->feed) { /* the viewers' last refresh, before the run's last status */
        kr_mesh_feed_offer(m->feed, m->surface, ss.frames, true);
        kr_mesh_feed_flush(m->feed, 5.0);
    }
    kr_log(KR_LOG_INFO, "meshing the surface (%zu blocks from %llu frames)", ss.blocks,
           (unsigned long long)m->fused);
    kr_mesh mesh = {0};
    kr_status s = kr_surface_extract_coarse(m->surface, decimate, &mesh);
    if (s == KR_OK) {
        stats->mesh_vertices = mesh.n_vertices;
        stats->mesh_faces = mesh.n_faces;
        s = kr_mesh_save_ply(path, &mesh);
    }
    kr_mesh_free(&mesh);
    return s;
}

void kr_mesher_destroy(kr_mesher **mp)
{
    if (!mp || !*mp) return;
    kr_mesher *m = *mp;
    stop(m);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->lock);
    job_free(m, &m->waiting);
    job_free(m, &m->working);
    kr_surface_destroy(&m->surface);
    free(m);
    *mp = NULL;
}
