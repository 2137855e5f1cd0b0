/* The `mesh` topic's sender (docs/PROTOCOL.md, "Mesh record"): the surface
 * for viewers, refreshed about once a period while someone subscribes.
 *
 * The surface thread (pipeline/mesher.c) meshes its volume when a period has
 * passed, the surface has new frames and the publisher thread has seen a
 * subscriber, and packs the mesh into chunks (transport's kr_wire_pack_mesh);
 * the publisher thread, which owns the socket, sends them. Meshing costs
 * the surface thread frames (it skips what arrives meanwhile) and never the
 * tracker one. A viewer wants a refresh, not every triangle: the mesh is
 * made at the coarseness that keeps it near KR_MESH_FEED_FACES triangles
 * (kr_surface_extract_coarse's factor, from the surface's blocks and the
 * triangles a block gave last time), so a growing scan keeps its refresh
 * cheap. */
#ifndef KINREG_PIPELINE_MESH_FEED_H
#define KINREG_PIPELINE_MESH_FEED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kinreg/surface.h"
#include "kinreg/transport.h"
#include "pipeline/outbox.h"

/* Triangles a refresh aims at: about 2.4 MB on the wire. */
#define KR_MESH_FEED_FACES 200000

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t sent_cond;
    double period_s;    /* <= 0: never */
    atomic_bool wanted; /* set by the publisher thread: someone subscribes */
    kr_outbox *wake;    /* the publisher thread's wait, woken when a mesh is ready */
    /* Under lock: the newest packed mesh not sent yet. */
    kr_wire_mesh_packed ready;
    bool fresh;
    bool in_flight; /* the publisher thread is sending the one before */
    /* Surface thread only. */
    double next_time;       /* kr_now() of the next refresh */
    uint64_t meshed_frames; /* the surface's frames at the last refresh */
    double per_block;       /* triangles a block at the surface's voxel (the last refresh's) */
    bool warned;
    uint64_t refreshes; /* meshes offered */
    double refresh_s;   /* seconds spent meshing and packing them */
    size_t last_faces;  /* the last one's triangles */
    /* Publisher thread only. */
    kr_wire_mesh_packed sending;
    double next_check; /* kr_now() of the next look at the subscriptions */
} kr_mesh_feed;

void kr_mesh_feed_init(kr_mesh_feed *f, double period_s, kr_outbox *wake);
void kr_mesh_feed_free(kr_mesh_feed *f);
/* Surface thread: meshes and packs `surface` (which has fused `frames`
 * frames) when a refresh is due and wanted, or, with `force`, whenever it
 * is wanted and has something new (the run's end). Failures are a warning
 * (once): the viewers miss a refresh, nothing else. */
void kr_mesh_feed_offer(kr_mesh_feed *f, const kr_surface *surface, uint64_t frames, bool force);
/* Surface thread: waits up to timeout_s for the publisher thread to send
 * what was offered (the run's last mesh, before its last status). */
void kr_mesh_feed_flush(kr_mesh_feed *f, double timeout_s);
/* Publisher thread: sends a mesh not sent yet. */
kr_status kr_mesh_feed_tick(kr_mesh_feed *f, kr_publisher *pub);

#endif
