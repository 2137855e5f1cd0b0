/* The view's fan-out: every page (an SSE stream) has its own bounded byte
 * buffer; the stream's thread appends each event to every buffer and never
 * waits. A buffer too full for an event drops that event and counts it, so
 * a slow or stalled browser loses events but can never hold up the stream,
 * let alone the tracker behind it. Also keeps the trajectory so far, sent to
 * a page when it joins, and the last status. Independent of the HTTP
 * library, so it is tested without a browser.
 *
 * Pages are bounded too (issue 30, item 5): at most `max_clients` at once
 * (kr_view_hub_limit), so the buffers together never hold more than
 * max_clients x buffer_bytes. A page that stopped reading (an event was
 * dropped for it and it has read nothing since) gives its place to a new
 * page when the hub is full: it is evicted, its buffer freed at once, and
 * its stream ends at its next read. Without such a page a new one is
 * refused. Both are counted (kr_view_hub_stats). */
#ifndef KINREG_TOOLS_VIEW_VIEW_HUB_H
#define KINREG_TOOLS_VIEW_VIEW_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct kr_view_hub kr_view_hub;
typedef struct kr_view_client kr_view_client;

/* `buffer_bytes` per page; `history_cap` trajectory poses kept for late
 * joiners (older ones are thinned out, every other one, when it fills). */
kr_view_hub *kr_view_hub_create(size_t buffer_bytes, size_t history_cap);
void kr_view_hub_destroy(kr_view_hub **hub);

/* At most `max_clients` pages at once (0 = no limit, the default). */
void kr_view_hub_limit(kr_view_hub *hub, int max_clients);

/* A new page: its buffer starts with the trajectory so far ("history") and
 * the last status. NULL when out of memory or when the hub is full and no
 * page has stopped reading (*full then says which, when not NULL). */
kr_view_client *kr_view_hub_join(kr_view_hub *hub);
kr_view_client *kr_view_hub_join_full(kr_view_hub *hub, bool *full);

/* For a reader that must not block (the HTTP server's one thread): `wake`
 * is called with `wake_arg`, outside the hub's lock, when data arrives for
 * a page that went to sleep (see kr_view_client_take). Set once, after
 * joining, before the first take. */
void kr_view_client_on_wake(kr_view_hub *hub, kr_view_client *c, void (*wake)(void *),
                            void *wake_arg);
void kr_view_hub_leave(kr_view_hub *hub, kr_view_client *c);

/* Appends "event: NAME\ndata: DATA\n\n" to every page's buffer (data must
 * not contain a newline). Never waits. */
void kr_view_hub_broadcast(kr_view_hub *hub, const char *name, const char *data, size_t len);
/* Remembers a pose for late joiners (refine: a refined keyframe). A seq that
 * does not advance means the publisher restarted: the history starts over. */
void kr_view_hub_note_pose(kr_view_hub *hub, uint64_t seq, uint64_t frame, const double t[3],
                           int state, bool refine);
/* Remembers the last status event's data for late joiners. */
void kr_view_hub_note_status(kr_view_hub *hub, const char *data, size_t len);
/* Sends every page its own "hub" event: pages connected, events this page
 * lost to a full buffer, and all pages' losses. */
void kr_view_hub_tick(kr_view_hub *hub);

/* Takes up to `max` bytes of the page's stream, waiting up to wait_s for some:
 * > 0 bytes, 0 nothing yet, -1 the hub is closing and this page is drained. */
ssize_t kr_view_client_read(kr_view_hub *hub, kr_view_client *c, char *buf, size_t max,
                            double wait_s);
/* Takes up to `max` bytes without waiting: > 0 bytes, -1 the hub is closing
 * and this page is drained (or the page was evicted). 0: nothing yet; the
 * page is then falling asleep: the caller suspends its connection and calls
 * kr_view_client_sleep, which is false when data came in between (the
 * caller resumes the connection itself); otherwise the wake callback
 * resumes it when data arrives. */
ssize_t kr_view_client_take(kr_view_hub *hub, kr_view_client *c, char *buf, size_t max);
bool kr_view_client_sleep(kr_view_hub *hub, kr_view_client *c);
uint64_t kr_view_client_dropped(kr_view_hub *hub, const kr_view_client *c);

typedef struct {
    int clients;      /* pages now */
    uint64_t dropped; /* events not delivered to a page whose buffer was full */
    uint64_t evicted; /* pages that stopped reading, ended to make room */
    uint64_t refused; /* pages refused: the hub was full of reading pages */
    size_t buffered;  /* bytes waiting in all buffers */
} kr_view_hub_stats_t;
void kr_view_hub_stats(kr_view_hub *hub, kr_view_hub_stats_t *out);
int kr_view_hub_clients(kr_view_hub *hub);
uint64_t kr_view_hub_dropped(kr_view_hub *hub);
/* Wakes every reader (sleeping ones through their wake callback); reads
 * then drain and end. */
void kr_view_hub_close(kr_view_hub *hub);

#endif
