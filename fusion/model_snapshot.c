/* Snapshots of the running model: the caller gathers the active voxels (it is
 * the map's only writer, so no lock on the map), a persistent worker builds the
 * k-d tree and swaps it in. Readers hold reference-counted snapshots, so a
 * swap never waits for them and they never see a tree being freed. */
#include "fusion/model_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Builds the tree over the job buffers, swaps it in as the current snapshot
 * and ends the request (busy = false). Runs on the worker, or on the caller
 * when synchronous. */
static kr_status build_and_swap(kr_model *m)
{
    kr_kdtree *tree = NULL;
    kr_model_snapshot *snap = NULL;
    kr_status s = kr_model_build_tree(m, &tree);
    if (s == KR_OK) {
        snap = malloc(sizeof *snap);
        if (!snap) {
            kr_kdtree_destroy(&tree);
            s = kr_error(KR_ERR_NOMEM, "cannot allocate model snapshot");
        } else {
            atomic_init(&snap->refs, 1);
            snap->tree = tree;
            snap->frame = m->job_frame;
        }
    }
    kr_model_snapshot *old = NULL;
    pthread_mutex_lock(&m->mu);
    if (snap) {
        old = m->current;
        m->current = snap;
    }
    m->busy = false;
    pthread_cond_broadcast(&m->idle);
    pthread_mutex_unlock(&m->mu);
    /* Outside the lock: freeing a large tree must not hold up acquirers. */
    kr_model_snapshot_release(&old);
    return s;
}

static void *worker_main(void *arg)
{
    kr_model *m = arg;
    /* The rebuild is background work: one thread, so that it never starts an
     * OpenMP team of its own that competes with the tracker's for the cores
     * (on a 2-core machine oversubscribed teams spin and stall each other). */
    omp_set_num_threads(1);
    pthread_mutex_lock(&m->mu);
    for (;;) {
        while (!m->job_ready && !m->stop) pthread_cond_wait(&m->wake, &m->mu);
        /* A job handed over before stop is still built: destroy promises to
         * wait for the rebuild in flight, not to cancel it. */
        if (!m->job_ready) break;
        m->job_ready = false;
        pthread_mutex_unlock(&m->mu);
        size_t n = m->job_n; /* read now: the job buffers are the caller's again after the swap */
        kr_status s = build_and_swap(m);
        if (s != KR_OK)
            kr_log(KR_LOG_WARN, "model snapshot of %zu voxels not built: %s (%s); keeping the previous one",
                   n, kr_strerror(s), kr_last_error());
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

kr_status kr_model_worker_start(kr_model *m)
{
    m->stop = false;
    int err = pthread_create(&m->worker, NULL, worker_main, m);
    if (err) return kr_error(KR_ERR_NOMEM, "cannot start the model snapshot thread: %s", strerror(err));
    m->worker_running = true;
    return KR_OK;
}

void kr_model_worker_stop(kr_model *m)
{
    if (!m->worker_running) return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_signal(&m->wake);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->worker, NULL);
    m->worker_running = false;
}

kr_status kr_model_request_snapshot(kr_model *m, uint64_t frame_index)
{
    if (!m) return kr_error(KR_ERR_INVALID_ARG, "kr_model_request_snapshot: NULL model");
    uint64_t window = (uint64_t)m->cfg.active_window;
    return kr_model_request_snapshot_since(m, frame_index,
                                           frame_index > window ? frame_index - window : 0);
}

kr_status kr_model_request_snapshot_since(kr_model *m, uint64_t frame_index, uint64_t since)
{
    if (!m) return kr_error(KR_ERR_INVALID_ARG, "kr_model_request_snapshot_since: NULL model");
    pthread_mutex_lock(&m->mu);
    if (m->busy) {
        pthread_mutex_unlock(&m->mu);
        kr_log(KR_LOG_DEBUG, "model snapshot requested at frame %llu while one is building: ignored",
               (unsigned long long)frame_index);
        return KR_OK;
    }
    m->busy = true; /* from here this request owns the job buffers */
    pthread_mutex_unlock(&m->mu);

    size_t n = 0;
    kr_status s = kr_model_gather(m, since, &n);
    if (s != KR_OK || n == 0) {
        if (s == KR_OK)
            kr_log(KR_LOG_DEBUG, "model snapshot at frame %llu: no active voxels, keeping the previous one",
                   (unsigned long long)frame_index);
        pthread_mutex_lock(&m->mu);
        m->busy = false;
        pthread_cond_broadcast(&m->idle);
        pthread_mutex_unlock(&m->mu);
        return s;
    }
    m->job_n = n;
    m->job_frame = frame_index;
    if (!m->worker_running) return build_and_swap(m);

    pthread_mutex_lock(&m->mu);
    m->job_ready = true;
    pthread_cond_signal(&m->wake);
    pthread_mutex_unlock(&m->mu);
    return KR_OK;
}

void kr_model_wait_idle(kr_model *m)
{
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    while (m->busy) pthread_cond_wait(&m->idle, &m->mu);
    pthread_mutex_unlock(&m->mu);
}

kr_model_snapshot *kr_model_snapshot_acquire(kr_model *m)
{
    if (!m) return NULL;
    pthread_mutex_lock(&m->mu);
    kr_model_snapshot *snap = m->current;
    /* Under the lock: the worker cannot drop the model's reference between
     * reading the pointer and taking ours. */
    if (snap) atomic_fetch_add(&snap->refs, 1);
    pthread_mutex_unlock(&m->mu);
    return snap;
}

void kr_model_snapshot_release(kr_model_snapshot **sp)
{
    if (!sp || !*sp) return;
    kr_model_snapshot *snap = *sp;
    *sp = NULL;
    if (atomic_fetch_sub(&snap->refs, 1) == 1) {
        kr_kdtree_destroy(&snap->tree);
        free(snap);
    }
}

const kr_kdtree *kr_model_snapshot_tree(const kr_model_snapshot *snap)
{
    return snap ? snap->tree : NULL;
}

uint64_t kr_model_snapshot_frame(const kr_model_snapshot *snap)
{
    return snap ? snap->frame : 0;
}
