/* A compute device made while the input is read (tools/device_start.h). */
#include "tools/device_start.h"

#include <stdio.h>
#include <string.h>

/* A context made and released leaves the device's primary context up for
 * the rest of the process: the refinement's own contexts then start at once. */
typedef struct {
    kr_device_config cfg;
    pthread_t thread;
    bool started;
} warming;

static void *warm_one(void *arg)
{
    warming *w = arg;
    kr_device *dev = NULL;
    if (kr_device_create(&dev, &w->cfg) == KR_OK) kr_device_destroy(&dev);
    return NULL;
}

static void make(kr_device_start *d)
{
    if (d->local_rank >= 0) {
        int visible = kr_cuda_device_count();
        if (visible > 0) d->cfg.cuda_device = d->local_rank % visible;
    }
    /* The further devices' contexts start beside the first one's (each took
     * 0.1 s one after the other on two H200). */
    warming w[16];
    for (int i = 0; i < d->n_warm; i++) {
        w[i] = (warming){.cfg = d->cfg};
        w[i].cfg.cuda_device = d->warm[i];
        if (d->warm[i] != d->cfg.cuda_device)
            w[i].started = pthread_create(&w[i].thread, NULL, warm_one, &w[i]) == 0;
    }
    d->status = kr_device_create(&d->dev, &d->cfg);
    if (d->status != KR_OK) snprintf(d->why, sizeof d->why, "%s", kr_last_error());
    for (int i = 0; i < d->n_warm; i++)
        if (w[i].started) pthread_join(w[i].thread, NULL);
}

static void *run(void *arg)
{
    make(arg);
    return NULL;
}

void kr_device_start_begin(kr_device_start *d, const kr_device_config *cfg, int local_rank,
                           const int *warm, int n_warm)
{
    memset(d, 0, sizeof *d);
    d->cfg = *cfg;
    d->local_rank = local_rank;
    d->n_warm = n_warm < 0 ? 0 : n_warm > 16 ? 16 : n_warm;
    if (d->n_warm) memcpy(d->warm, warm, sizeof *warm * (size_t)d->n_warm);
    d->started = pthread_create(&d->thread, NULL, run, d) == 0;
}

kr_status kr_device_start_end(kr_device_start *d, kr_device **out)
{
    if (d->started)
        pthread_join(d->thread, NULL);
    else
        make(d);
    d->started = false;
    *out = d->dev;
    d->dev = NULL;
    if (d->status != KR_OK) return kr_error(d->status, "%s", d->why);
    return KR_OK;
}
