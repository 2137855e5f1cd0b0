/* Ordered decode-ahead (capture/prefetch.h). Item i lives in slot i % ahead;
 * a worker claims the next unclaimed item once its slot has been taken by
 * the caller, so at most `ahead` items are decoded and waiting. One mutex,
 * two condition variables: workers wait for room, the caller for its item. */
#include "capture/prefetch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    bool ready;
    kr_status status;
    uint16_t *raw;
    char message[1024];
} pf_slot;

struct kr_prefetch {
    pthread_mutex_t lock;
    pthread_cond_t room, done;
    pthread_t *threads;
    int workers, started, ahead;
    size_t count, next_claim, next_take;
    bool stop;
    pf_slot *slots;
    kr_prefetch_decode decode;
    const void *user;
};

int kr_prefetch_default_workers(void)
{
    const char *env = getenv("KINREG_DECODE_THREADS");
    if (env && *env) {
        long n = strtol(env, NULL, 10);
        return n < 0 ? 0 : (n > 64 ? 64 : (int)n);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 4) return 0;
    long w = cores / 2;
    return (int)(w > 6 ? 6 : w);
}

static void *worker(void *arg)
{
    kr_prefetch *p = arg;
    kr_png_reader reader;
    memset(&reader, 0, sizeof reader);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->next_claim < p->count &&
               p->next_claim >= p->next_take + (size_t)p->ahead)
            pthread_cond_wait(&p->room, &p->lock);
        if (p->stop || p->next_claim >= p->count) break;
        size_t i = p->next_claim++;
        pthread_mutex_unlock(&p->lock);
        uint16_t *raw = NULL;
        kr_status st = p->decode(p->user, i, &reader, &raw);
        pthread_mutex_lock(&p->lock);
        pf_slot *s = &p->slots[i % (size_t)p->ahead];
        s->status = st;
        s->raw = st == KR_OK ? raw : NULL;
        if (st != KR_OK) snprintf(s->message, sizeof s->message, "%s", kr_last_error());
        s->ready = true;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    kr_png_reader_free(&reader);
    return NULL;
}

kr_status kr_prefetch_start(kr_prefetch **out, int workers, int ahead, size_t count,
                            kr_prefetch_decode decode, const void *user)
{
    if (!out || workers < 1 || ahead < 1 || !decode)
        return kr_error(KR_ERR_INVALID_ARG, "kr_prefetch_start: bad arguments");
    kr_prefetch *p = calloc(1, sizeof *p);
    if (!p) return kr_error(KR_ERR_NOMEM, "out of memory starting the frame decoders");
    p->slots = calloc((size_t)ahead, sizeof *p->slots);
    p->threads = calloc((size_t)workers, sizeof *p->threads);
    if (!p->slots || !p->threads) {
        free(p->slots);
        free(p->threads);
        free(p);
        return kr_error(KR_ERR_NOMEM, "out of memory starting the frame decoders");
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->room, NULL);
    pthread_cond_init(&p->done, NULL);
    p->workers = workers;
    p->ahead = ahead;
    p->count = count;
    p->decode = decode;
    p->user = user;
    for (int i = 0; i < workers; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0) break;
        p->started++;
    }
    if (p->started == 0) {
        kr_prefetch_stop(&p);
        return kr_error(KR_ERR_NOMEM, "cannot start a frame decoder thread");
    }
    *out = p;
    return KR_OK;
}

kr_status kr_prefetch_take(kr_prefetch *p, size_t index, uint16_t **raw)
{
    if (index != p->next_take || index >= p->count)
        return kr_error(KR_ERR_INVALID_ARG, "kr_prefetch_take: item %zu out of order", index);
    pthread_mutex_lock(&p->lock);
    pf_slot *s = &p->slots[index % (size_t)p->ahead];
    while (!s->ready)
        pthread_cond_wait(&p->done, &p->lock);
    kr_status st = s->status;
    uint16_t *r = s->raw;
    char message[sizeof s->message];
    memcpy(message, s->message, sizeof message);
    memset(s, 0, sizeof *s);
    p->next_take++;
    pthread_cond_broadcast(&p->room);
    pthread_mutex_unlock(&p->lock);
    if (st != KR_OK) return kr_error(st, "%s", message);
    *raw = r;
    return KR_OK;
}

void kr_prefetch_stop(kr_prefetch **pp)
{
    if (!pp || !*pp) return;
    kr_prefetch *p = *pp;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->room);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    for (int i = 0; i < p->ahead; i++)
        free(p->slots[i].raw);
    pthread_cond_destroy(&p->room);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p->slots);
    free(p->threads);
    free(p);
    *pp = NULL;
}
