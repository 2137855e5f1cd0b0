/* The fusion thread (pipeline/fuser.h): one mutex, one condition variable,
 * one job slot. */
#include "pipeline/fuser.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kr_fuser {
    kr_model *model;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool pending, quit;
    /* the job */
    const kr_cloud *cloud;
    kr_pose pose;
    uint64_t frame;
    bool snapshot;
    /* the last job's outcome */
    kr_status status;
    char message[1024];
};

static void *fuser_main(void *arg)
{
    kr_fuser *f = arg;
    pthread_mutex_lock(&f->lock);
    for (;;) {
        while (!f->pending && !f->quit)
            pthread_cond_wait(&f->cond, &f->lock);
        if (!f->pending) break; /* quit with nothing left to do */
        pthread_mutex_unlock(&f->lock);
        kr_status s = KR_OK;
        if (f->cloud) s = kr_model_integrate(f->model, f->cloud, &f->pose, f->frame);
        if (s == KR_OK && f->snapshot) s = kr_model_request_snapshot(f->model, f->frame);
        pthread_mutex_lock(&f->lock);
        if (s != KR_OK && f->status == KR_OK) {
            f->status = s;
            snprintf(f->message, sizeof f->message, "%s", kr_last_error());
        }
        f->pending = false;
        pthread_cond_broadcast(&f->cond);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

kr_status kr_fuser_create(kr_fuser **out, kr_model *model)
{
    kr_fuser *f = calloc(1, sizeof *f);
    if (!f) return kr_error(KR_ERR_NOMEM, "cannot allocate the fusion thread");
    f->model = model;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    if (pthread_create(&f->thread, NULL, fuser_main, f) != 0) {
        pthread_cond_destroy(&f->cond);
        pthread_mutex_destroy(&f->lock);
        free(f);
        return kr_error(KR_ERR_NOMEM, "cannot start the fusion thread");
    }
    *out = f;
    return KR_OK;
}

kr_status kr_fuser_wait(kr_fuser *f)
{
    pthread_mutex_lock(&f->lock);
    while (f->pending)
        pthread_cond_wait(&f->cond, &f->lock);
    kr_status s = f->status;
    char message[sizeof f->message];
    memcpy(message, f->message, sizeof message);
    pthread_mutex_unlock(&f->lock);
    return s == KR_OK ? KR_OK : kr_error(s, "%s", message);
}

kr_status kr_fuser_post(kr_fuser *f, const kr_cloud *cloud, const kr_pose *pose, uint64_t frame,
                        bool snapshot)
{
    kr_status s = kr_fuser_wait(f);
    if (s != KR_OK) return s;
    pthread_mutex_lock(&f->lock);
    f->cloud = cloud;
    f->pose = *pose;
    f->frame = frame;
    f->snapshot = snapshot;
    f->pending = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    return KR_OK;
}

void kr_fuser_destroy(kr_fuser **fp)
{
    if (!fp || !*fp) return;
    kr_fuser *f = *fp;
    pthread_mutex_lock(&f->lock);
    f->quit = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f);
    *fp = NULL;
}
