/* The refiner thread (pipeline/refine/refiner.h). One mutex guards the single job
 * slot: `queued` (posted, not started), `running`, `done` (waiting to be
 * taken); at most one of them is set. */
#include "pipeline/refine/refiner.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* The refiner's thread runs at this nice value above the process's: a
 * refinement is an improvement that may come late, tracking is real time. */
#define KR_REFINER_NICE 10

struct kr_refiner {
    kr_refine_config cfg;
    kr_device *dev;
    int threads;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    kr_refine_job *queued, *running, *done;
    bool quit;
    atomic_bool interrupt; /* kr_refiner_interrupt */
};

static bool interrupted(void *user)
{
    return atomic_load(&((kr_refiner *)user)->interrupt);
}

void kr_refiner_interrupt(kr_refiner *r)
{
    if (r) atomic_store(&r->interrupt, true);
}

kr_status kr_refine_job_create(kr_refine_job **out, int first, int count, const float *const *xyz,
                               const size_t *n, const kr_pose *poses)
{
    if (!out || count < 2 || !xyz || !n || !poses)
        return kr_error(KR_ERR_INVALID_ARG, "refiner: a job needs 2 or more views with poses");
    kr_refine_job *j = calloc(1, sizeof *j);
    if (!j) return kr_error(KR_ERR_NOMEM, "refiner: no memory for a job");
    j->first = first;
    j->count = count;
    j->views = calloc((size_t)count, sizeof *j->views);
    j->poses = malloc(sizeof *j->poses * (size_t)count);
    bool ok = j->views && j->poses;
    for (int k = 0; ok && k < count; k++) {
        float *copy = malloc(sizeof *copy * 3 * (n[k] ? n[k] : 1));
        ok = copy != NULL;
        if (ok) memcpy(copy, xyz[k], sizeof *copy * 3 * n[k]);
        j->views[k] = (kr_refine_view){copy, n[k]};
        j->poses[k] = poses[k];
    }
    if (!ok) {
        kr_refine_job_free(&j);
        return kr_error(KR_ERR_NOMEM, "refiner: no memory to copy %d keyframes", count);
    }
    *out = j;
    return KR_OK;
}

void kr_refine_job_free(kr_refine_job **job)
{
    if (!job || !*job) return;
    kr_refine_job *j = *job;
    for (int k = 0; j->views && k < j->count; k++)
        free((void *)j->views[k].xyz);
    free(j->views);
    free(j->poses);
    free(j);
    *job = NULL;
}

/* Runs one job; a failure is kept in the job (the tracker logs it and keeps
 * the tracked poses), never raised: refinement is an improvement, not a
 * condition of tracking. */
static void run_job(kr_refiner *r, kr_refine_job *j)
{
    kr_pose *poses = malloc(sizeof *poses * (size_t)j->count);
    if (!poses) {
        j->status = kr_error(KR_ERR_NOMEM, "refiner: no memory for %d poses", j->count);
    } else {
        memcpy(poses, j->poses, sizeof *poses * (size_t)j->count);
        kr_refine_config c = r->cfg;
        c.gauge = 0; /* the window's oldest keyframe: it was refined by the window before */
        c.interrupted = interrupted;
        c.interrupted_user = r;
        j->status = kr_refine(&c, r->dev, j->views, j->count, poses, &j->result);
        if (j->status == KR_OK) memcpy(j->poses, poses, sizeof *poses * (size_t)j->count);
        free(poses);
    }
    if (j->status != KR_OK) snprintf(j->error, sizeof j->error, "%s", kr_last_error());
}

static void *refiner_main(void *arg)
{
    kr_refiner *r = arg;
#ifdef __linux__
    /* On a machine with few cores the refiner's sums took CPU from the
     * tracker (frames/s 20-30 % lower with --refine on, 2-core VM): a lower
     * priority for this thread alone (Linux's nice is per thread) leaves the
     * cores to tracking when both want them. Failure only costs that. */
    pid_t tid = (pid_t)syscall(SYS_gettid);
    int nice_now = getpriority(PRIO_PROCESS, (id_t)tid);
    (void)setpriority(PRIO_PROCESS, (id_t)tid, nice_now + KR_REFINER_NICE);
#endif
    /* This thread's OpenMP team: the tracker's cores stay with the tracker. */
    if (r->threads > 0) omp_set_num_threads(r->threads);
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->queued && !r->quit)
            pthread_cond_wait(&r->changed, &r->lock);
        if (!r->queued) break; /* quit with nothing queued */
        r->running = r->queued;
        r->queued = NULL;
        pthread_mutex_unlock(&r->lock);
        run_job(r, r->running);
        pthread_mutex_lock(&r->lock);
        r->done = r->running;
        r->running = NULL;
        pthread_cond_broadcast(&r->changed);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

kr_status kr_refiner_create(kr_refiner **out, const kr_refine_config *cfg, kr_device *dev,
                            int threads)
{
    if (!out || !cfg) return kr_error(KR_ERR_INVALID_ARG, "kr_refiner_create: NULL argument");
    kr_refiner *r = calloc(1, sizeof *r);
    if (!r) return kr_error(KR_ERR_NOMEM, "refiner: no memory");
    r->cfg = *cfg;
    atomic_init(&r->interrupt, false);
    r->cfg.progress = NULL; /* nobody reads progress from this thread */
    r->dev = dev;
    r->threads = threads;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    if (pthread_create(&r->thread, NULL, refiner_main, r) != 0) {
        pthread_cond_destroy(&r->changed);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return kr_error(KR_ERR_NOMEM, "cannot start the refiner thread");
    }
    *out = r;
    return KR_OK;
}

bool kr_refiner_idle(kr_refiner *r)
{
    pthread_mutex_lock(&r->lock);
    bool idle = !r->queued && !r->running && !r->done;
    pthread_mutex_unlock(&r->lock);
    return idle;
}

kr_status kr_refiner_post(kr_refiner *r, kr_refine_job **job)
{
    if (!r || !job || !*job) return kr_error(KR_ERR_INVALID_ARG, "kr_refiner_post: NULL argument");
    pthread_mutex_lock(&r->lock);
    bool idle = !r->queued && !r->running && !r->done && !r->quit;
    if (idle) {
        r->queued = *job;
        *job = NULL;
        pthread_cond_broadcast(&r->changed);
    }
    pthread_mutex_unlock(&r->lock);
    return idle ? KR_OK
                : kr_error(KR_ERR_INVALID_ARG,
                           "refiner: a window is still being refined; take its result first");
}

kr_refine_job *kr_refiner_take(kr_refiner *r, bool wait)
{
    pthread_mutex_lock(&r->lock);
    while (wait && !r->done && (r->queued || r->running))
        pthread_cond_wait(&r->changed, &r->lock);
    kr_refine_job *j = r->done;
    r->done = NULL;
    pthread_mutex_unlock(&r->lock);
    return j;
}

void kr_refiner_destroy(kr_refiner **rp)
{
    if (!rp || !*rp) return;
    kr_refiner *r = *rp;
    pthread_mutex_lock(&r->lock);
    r->quit = true;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    kr_refine_job_free(&r->queued);
    kr_refine_job_free(&r->done);
    pthread_cond_destroy(&r->changed);
    pthread_mutex_destroy(&r->lock);
    free(r);
    *rp = NULL;
}
