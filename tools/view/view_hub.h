/* The view's fan-out: every page (an SSE stream) has its own bounded byte
 * buffer; the stream's thread appends each event to every buffer and never
 * waits. A buffer too full for an event drops that event and counts it, so
 * a slow or stalled browser loses events but can never hold up the stream,
 * let alone the tracker behind it. Also keeps the trajectory so far, sent to
 * a page when it joins, and the last status. Independent of the HTTP
 * library, so it is tested without a browser. */
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

/* A new page: its buffer starts with the trajectory so far ("history") and
 * the last status. NULL when out of memory. */
kr_view_client *kr_view_hub_join(kr_view_hub *hub);
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
uint64_t kr_view_client_dropped(kr_view_hub *hub, const kr_view_client *c);
int kr_view_hub_clients(kr_view_hub *hub);
uint64_t kr_view_hub_dropped(kr_view_hub *hub);
/* Wakes every reader; reads then drain and end. */
void kr_view_hub_close(kr_view_hub *hub);

#endif
