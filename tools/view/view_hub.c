/* The view's fan-out (tools/view/view_hub.h): one mutex, a condition variable
 * per page, a ring buffer per page. */
#include "view_hub.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct kr_view_client {
    kr_view_client *next;
    pthread_cond_t ready;
    char *ring;
    size_t head, len; /* bytes waiting, starting at ring[head] */
    uint64_t dropped; /* events that did not fit */
};

typedef struct {
    uint64_t frame;
    double t[3];
    uint8_t state;
    bool refine;
} history_pose;

struct kr_view_hub {
    pthread_mutex_t lock;
    size_t cap;
    kr_view_client *clients;
    int n_clients;
    uint64_t dropped;
    bool closing;
    history_pose *history;
    size_t history_len, history_cap;
    uint64_t last_seq;
    bool have_seq;
    char *status;
    size_t status_len;
};

kr_view_hub *kr_view_hub_create(size_t buffer_bytes, size_t history_cap)
{
    kr_view_hub *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->history = malloc((history_cap ? history_cap : 1) * sizeof *h->history);
    if (!h->history) {
        free(h);
        return NULL;
    }
    h->cap = buffer_bytes;
    h->history_cap = history_cap ? history_cap : 1;
    pthread_mutex_init(&h->lock, NULL);
    return h;
}

void kr_view_hub_destroy(kr_view_hub **hp)
{
    if (!hp || !*hp) return;
    kr_view_hub *h = *hp;
    while (h->clients)
        kr_view_hub_leave(h, h->clients);
    pthread_mutex_destroy(&h->lock);
    free(h->history);
    free(h->status);
    free(h);
    *hp = NULL;
}

/* Appends whole or not at all: a page never sees half an event. */
static bool put(kr_view_hub *h, kr_view_client *c, const char *data, size_t n)
{
    if (n > h->cap - c->len) return false;
    size_t tail = (c->head + c->len) % h->cap, first = h->cap - tail < n ? h->cap - tail : n;
    memcpy(c->ring + tail, data, first);
    memcpy(c->ring, data + first, n - first);
    c->len += n;
    return true;
}

static void put_event(kr_view_hub *h, kr_view_client *c, const char *name, const char *data,
                      size_t len)
{
    char head[64];
    int hn = snprintf(head, sizeof head, "event: %s\ndata: ", name);
    if (hn < 0 || (size_t)hn >= sizeof head || (size_t)hn + len + 2 > h->cap - c->len) {
        c->dropped++;
        h->dropped++;
        return;
    }
    put(h, c, head, (size_t)hn);
    put(h, c, data, len);
    put(h, c, "\n\n", 2);
    pthread_cond_signal(&c->ready);
}

/* The trajectory so far as one "history" event: [[frame,x,y,z,state,refine],...],
 * the newest part that fits in half a buffer. */
static void put_history(kr_view_hub *h, kr_view_client *c)
{
    size_t budget = h->cap / 2, per = 96, n = h->history_len;
    size_t first = n * per > budget ? n - budget / per : 0;
    char *text = malloc((n - first) * per + 4);
    if (!text) return;
    size_t k = 0;
    text[k++] = '[';
    for (size_t i = first; i < n; i++) {
        const history_pose *p = &h->history[i];
        k += (size_t)snprintf(text + k, per, "%s[%llu,%.6g,%.6g,%.6g,%d,%d]", i > first ? "," : "",
                              (unsigned long long)p->frame, p->t[0], p->t[1], p->t[2], p->state,
                              p->refine);
    }
    text[k++] = ']';
    put_event(h, c, "history", text, k);
    free(text);
}

kr_view_client *kr_view_hub_join(kr_view_hub *h)
{
    kr_view_client *c = calloc(1, sizeof *c);
    if (!c || !(c->ring = malloc(h->cap))) {
        free(c);
        return NULL;
    }
    pthread_cond_init(&c->ready, NULL);
    pthread_mutex_lock(&h->lock);
    /* EventSource reconnects after 1 s when the connection drops. */
    put(h, c, "retry: 1000\n\n", 13);
    put_history(h, c);
    if (h->status) put_event(h, c, "status", h->status, h->status_len);
    c->next = h->clients;
    h->clients = c;
    h->n_clients++;
    pthread_mutex_unlock(&h->lock);
    return c;
}

void kr_view_hub_leave(kr_view_hub *h, kr_view_client *c)
{
    if (!c) return;
    pthread_mutex_lock(&h->lock);
    for (kr_view_client **pp = &h->clients; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            h->n_clients--;
            break;
        }
    pthread_mutex_unlock(&h->lock);
    pthread_cond_destroy(&c->ready);
    free(c->ring);
    free(c);
}

void kr_view_hub_broadcast(kr_view_hub *h, const char *name, const char *data, size_t len)
{
    pthread_mutex_lock(&h->lock);
    for (kr_view_client *c = h->clients; c; c = c->next)
        put_event(h, c, name, data, len);
    pthread_mutex_unlock(&h->lock);
}

void kr_view_hub_note_pose(kr_view_hub *h, uint64_t seq, uint64_t frame, const double t[3],
                           int state, bool refine)
{
    pthread_mutex_lock(&h->lock);
    if (!refine) {
        if (h->have_seq && seq <= h->last_seq) h->history_len = 0; /* the publisher restarted */
        h->have_seq = true;
        h->last_seq = seq;
    }
    if (h->history_len == h->history_cap) {
        /* Full: keep every other pose, so the whole path stays, coarser. */
        size_t k = 0;
        for (size_t i = 0; i < h->history_len; i += 2)
            h->history[k++] = h->history[i];
        h->history_len = k;
    }
    history_pose *p = &h->history[h->history_len++];
    p->frame = frame;
    memcpy(p->t, t, sizeof p->t);
    p->state = (uint8_t)state;
    p->refine = refine;
    pthread_mutex_unlock(&h->lock);
}

void kr_view_hub_note_status(kr_view_hub *h, const char *data, size_t len)
{
    pthread_mutex_lock(&h->lock);
    char *copy = realloc(h->status, len + 1);
    if (copy) {
        memcpy(copy, data, len);
        copy[len] = '\0';
        h->status = copy;
        h->status_len = len;
    }
    pthread_mutex_unlock(&h->lock);
}

void kr_view_hub_tick(kr_view_hub *h)
{
    pthread_mutex_lock(&h->lock);
    for (kr_view_client *c = h->clients; c; c = c->next) {
        char data[160];
        int n =
            snprintf(data, sizeof data, "{\"clients\":%d,\"dropped\":%llu,\"dropped_all\":%llu}",
                     h->n_clients, (unsigned long long)c->dropped, (unsigned long long)h->dropped);
        put_event(h, c, "hub", data, (size_t)n);
    }
    pthread_mutex_unlock(&h->lock);
}

ssize_t kr_view_client_read(kr_view_hub *h, kr_view_client *c, char *buf, size_t max, double wait_s)
{
    pthread_mutex_lock(&h->lock);
    if (c->len == 0 && !h->closing && wait_s > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double whole = floor(wait_s);
        until.tv_sec += (time_t)whole;
        until.tv_nsec += (long)((wait_s - whole) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (c->len == 0 && !h->closing)
            if (pthread_cond_timedwait(&c->ready, &h->lock, &until) != 0) break;
    }
    ssize_t n = -1;
    if (c->len || !h->closing) {
        size_t take = c->len < max ? c->len : max;
        size_t first = h->cap - c->head < take ? h->cap - c->head : take;
        memcpy(buf, c->ring + c->head, first);
        memcpy(buf + first, c->ring, take - first);
        c->head = (c->head + take) % h->cap;
        c->len -= take;
        n = (ssize_t)take;
    }
    pthread_mutex_unlock(&h->lock);
    return n;
}

uint64_t kr_view_client_dropped(kr_view_hub *h, const kr_view_client *c)
{
    pthread_mutex_lock(&h->lock);
    uint64_t d = c->dropped;
    pthread_mutex_unlock(&h->lock);
    return d;
}

int kr_view_hub_clients(kr_view_hub *h)
{
    pthread_mutex_lock(&h->lock);
    int n = h->n_clients;
    pthread_mutex_unlock(&h->lock);
    return n;
}

uint64_t kr_view_hub_dropped(kr_view_hub *h)
{
    pthread_mutex_lock(&h->lock);
    uint64_t d = h->dropped;
    pthread_mutex_unlock(&h->lock);
    return d;
}

void kr_view_hub_close(kr_view_hub *h)
{
    pthread_mutex_lock(&h->lock);
    h->closing = true;
    for (kr_view_client *c = h->clients; c; c = c->next)
        pthread_cond_broadcast(&c->ready);
    pthread_mutex_unlock(&h->lock);
}
