/* The view's fan-out (tools/view/view_hub.h): one mutex, a condition variable
 * per page, a ring buffer per page. */
#include "view_hub.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A page that reads without blocking (kr_view_client_take) falls asleep
 * when its buffer is empty: AWAKE -> DOZING (take found nothing; the caller
 * is suspending its connection) -> ASLEEP (kr_view_client_sleep). Data for
 * an ASLEEP page wakes it through its callback; data for a DOZING one makes
 * kr_view_client_sleep say so (WOKEN), and the caller resumes itself. The
 * wake callback is called only for a page whose connection was suspended,
 * never twice for one sleep. */
typedef enum { AWAKE, DOZING, WOKEN, ASLEEP } sleep_state;

struct kr_view_client {
    kr_view_client *next;
    kr_view_client *wake_next; /* on the wake list of one put, under the lock */
    pthread_cond_t ready;
    char *ring;           /* NULL once evicted */
    size_t head, len;     /* bytes waiting, starting at ring[head] */
    uint64_t dropped;     /* events that did not fit */
    bool stalled;         /* an event was dropped and nothing read since */
    double stalled_since; /* when the first of those was dropped */
    bool evicted;         /* ended to make room for a new page */
    sleep_state sleep;
    void (*wake)(void *);
    void *wake_arg;
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
    kr_view_client *clients; /* every page until it leaves, evicted ones too */
    int n_clients;           /* pages not evicted */
    int max_clients;         /* 0 = no limit */
    uint64_t dropped, evicted, refused;
    kr_view_client *wake_list; /* pages to wake once the lock is let go */
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

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A page that had nothing and now has data: an ASLEEP one goes on the wake
 * list (its callback is called once the lock is let go), a DOZING one will
 * hear it from kr_view_client_sleep. Under the lock. */
static void rouse(kr_view_hub *h, kr_view_client *c)
{
    if (c->sleep == ASLEEP) {
        c->sleep = AWAKE;
        c->wake_next = h->wake_list;
        h->wake_list = c;
    } else if (c->sleep == DOZING) {
        c->sleep = WOKEN;
    }
}

/* Lets the lock go and wakes the pages put on the wake list under it. A page
 * on the list is suspended until its callback runs, so it cannot leave
 * meanwhile; nothing of it is read after its callback. */
static void unlock_and_wake(kr_view_hub *h)
{
    kr_view_client *c = h->wake_list;
    h->wake_list = NULL;
    pthread_mutex_unlock(&h->lock);
    while (c) {
        kr_view_client *next = c->wake_next;
        void (*wake)(void *) = c->wake;
        void *arg = c->wake_arg;
        if (wake) wake(arg);
        c = next;
    }
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
    if (c->evicted) return;
    int hn = snprintf(head, sizeof head, "event: %s\ndata: ", name);
    if (hn < 0 || (size_t)hn >= sizeof head || (size_t)hn + len + 2 > h->cap - c->len) {
        c->dropped++;
        h->dropped++;
        if (!c->stalled) {
            c->stalled = true;
            c->stalled_since = monotonic_s();
        }
        return;
    }
    put(h, c, head, (size_t)hn);
    put(h, c, data, len);
    put(h, c, "\n\n", 2);
    pthread_cond_signal(&c->ready);
    rouse(h, c);
}

/* Ends the page that stopped reading longest ago, freeing its buffer now
 * (its stream ends at its next read). False when every page reads. Under
 * the lock. */
static bool evict_one(kr_view_hub *h)
{
    kr_view_client *worst = NULL;
    for (kr_view_client *c = h->clients; c; c = c->next)
        if (!c->evicted && c->stalled && (!worst || c->stalled_since < worst->stalled_since))
            worst = c;
    if (!worst) return false;
    worst->evicted = true;
    free(worst->ring);
    worst->ring = NULL;
    worst->head = worst->len = 0;
    h->n_clients--;
    h->evicted++;
    pthread_cond_broadcast(&worst->ready);
    rouse(h, worst); /* asleep means empty, so never stalled: for form's sake */
    return true;
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

void kr_view_hub_limit(kr_view_hub *h, int max_clients)
{
    pthread_mutex_lock(&h->lock);
    h->max_clients = max_clients > 0 ? max_clients : 0;
    pthread_mutex_unlock(&h->lock);
}

kr_view_client *kr_view_hub_join(kr_view_hub *h)
{
    return kr_view_hub_join_full(h, NULL);
}

kr_view_client *kr_view_hub_join_full(kr_view_hub *h, bool *full)
{
    if (full) *full = false;
    pthread_mutex_lock(&h->lock);
    if (h->max_clients && h->n_clients >= h->max_clients && !evict_one(h)) {
        h->refused++;
        pthread_mutex_unlock(&h->lock);
        if (full) *full = true;
        return NULL;
    }
    /* The place is taken now; the buffer is allocated outside the lock. */
    h->n_clients++;
    unlock_and_wake(h);
    kr_view_client *c = calloc(1, sizeof *c);
    if (!c || !(c->ring = malloc(h->cap))) {
        free(c);
        pthread_mutex_lock(&h->lock);
        h->n_clients--;
        pthread_mutex_unlock(&h->lock);
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
    pthread_mutex_unlock(&h->lock);
    return c;
}

void kr_view_client_on_wake(kr_view_hub *h, kr_view_client *c, void (*wake)(void *), void *wake_arg)
{
    pthread_mutex_lock(&h->lock);
    c->wake = wake;
    c->wake_arg = wake_arg;
    pthread_mutex_unlock(&h->lock);
}

void kr_view_hub_leave(kr_view_hub *h, kr_view_client *c)
{
    if (!c) return;
    pthread_mutex_lock(&h->lock);
    for (kr_view_client **pp = &h->clients; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            if (!c->evicted) h->n_clients--;
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
    unlock_and_wake(h);
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
            snprintf(data, sizeof data,
                     "{\"clients\":%d,\"dropped\":%llu,\"dropped_all\":%llu,\"evicted\":%llu,"
                     "\"refused\":%llu}",
                     h->n_clients, (unsigned long long)c->dropped, (unsigned long long)h->dropped,
                     (unsigned long long)h->evicted, (unsigned long long)h->refused);
        put_event(h, c, "hub", data, (size_t)n);
    }
    unlock_and_wake(h);
}

/* Moves up to max bytes of the page's buffer to buf. Under the lock. */
static size_t take_bytes(kr_view_hub *h, kr_view_client *c, char *buf, size_t max)
{
    size_t take = c->len < max ? c->len : max;
    size_t first = h->cap - c->head < take ? h->cap - c->head : take;
    memcpy(buf, c->ring + c->head, first);
    memcpy(buf + first, c->ring, take - first);
    c->head = (c->head + take) % h->cap;
    c->len -= take;
    if (take) c->stalled = false;
    return take;
}

ssize_t kr_view_client_take(kr_view_hub *h, kr_view_client *c, char *buf, size_t max)
{
    pthread_mutex_lock(&h->lock);
    ssize_t n;
    if (c->evicted || (h->closing && c->len == 0)) {
        n = -1;
    } else if (c->len) {
        n = (ssize_t)take_bytes(h, c, buf, max);
    } else {
        c->sleep = DOZING;
        n = 0;
    }
    pthread_mutex_unlock(&h->lock);
    return n;
}

bool kr_view_client_sleep(kr_view_hub *h, kr_view_client *c)
{
    pthread_mutex_lock(&h->lock);
    bool asleep = c->sleep == DOZING;
    c->sleep = asleep ? ASLEEP : AWAKE;
    pthread_mutex_unlock(&h->lock);
    return asleep;
}

void kr_view_hub_stats(kr_view_hub *h, kr_view_hub_stats_t *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&h->lock);
    out->clients = h->n_clients;
    out->dropped = h->dropped;
    out->evicted = h->evicted;
    out->refused = h->refused;
    for (kr_view_client *c = h->clients; c; c = c->next)
        out->buffered += c->len;
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
        while (c->len == 0 && !h->closing && !c->evicted)
            if (pthread_cond_timedwait(&c->ready, &h->lock, &until) != 0) break;
    }
    ssize_t n = -1;
    if (!c->evicted && (c->len || !h->closing)) n = (ssize_t)take_bytes(h, c, buf, max);
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
    for (kr_view_client *c = h->clients; c; c = c->next) {
        pthread_cond_broadcast(&c->ready);
        rouse(h, c);
    }
    unlock_and_wake(h);
}
