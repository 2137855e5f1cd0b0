/* kinreg — the pose stream over ZeroMQ PUB/SUB. Each message is two frames: the
 * topic ("pose", "refine", "status") and a fixed-size, versioned, little-endian
 * binary payload documented in docs/PROTOCOL.md. */
#ifndef KINREG_TRANSPORT_H
#define KINREG_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version 2 (kinreg 0.1, issue 11): the status text grew from 64 to 320 bytes
 * so an error reason arrives whole. Version 3 (issue 14): the status record
 * carries the publisher's dropped-message count before the text. Version 4
 * (issue 33): and the source's length (frames_total), for progress. Version 5
 * (issue 33): the pose record carries the pose's 6×6 covariance (112 → 200
 * bytes). Decoders accept versions 1 to 5 (docs/PROTOCOL.md). */
#define KR_WIRE_VERSION 5
#define KR_WIRE_VERSION_MIN 1

/* KR_TOPIC_MODEL (issue 12) and KR_TOPIC_FINAL (issue 13: the poses the
 * final trajectory changed, at the end of a run) are topics beside the
 * others, not a new wire version: readers that do not know them ignore them
 * (docs/PROTOCOL.md). */
typedef enum {
    KR_TOPIC_POSE = 1,
    KR_TOPIC_STATUS = 2,
    KR_TOPIC_REFINE = 3,
    KR_TOPIC_MODEL = 4,
    KR_TOPIC_FINAL = 5,
    KR_TOPIC_DEPTH = 6, /* issue 33: a thumbnail of the latest depth frame, for viewers */
    KR_TOPIC_MESH = 7   /* issue 34: the surface as triangles, for viewers */
} kr_topic;
/* Arrays indexed by kr_topic. */
#define KR_TOPIC_SLOTS 8

typedef enum {
    KR_METHOD_NEWTON = 0,
    KR_METHOD_EMICP = 1,
    KR_METHOD_SOFTASSIGN = 2,
    KR_METHOD_REFINE = 3,
    KR_METHOD_PREDICTED = 4,   /* no registration: the seed pose (LOST frames) */
    KR_METHOD_INTERPOLATED = 5 /* `final`: a covered frame placed between two known poses */
} kr_method;

/* Payload of `pose`, `refine` and `final` messages (host form; the wire form
 * is fixed). */
typedef struct {
    kr_topic topic;
    uint64_t seq;             /* per-topic sequence number, set by the publisher */
    uint64_t frame_index;
    double timestamp;         /* sensor timestamp, s */
    double t[3];              /* translation, m */
    double q[4];              /* rotation quaternion x, y, z, w (camera-to-world) */
    uint8_t state;            /* kr_track_state */
    uint8_t method;           /* kr_method */
    uint16_t iterations;
    float inlier_fraction;
    float rms;                /* m */
    float condition;
    float latency_ms;         /* capture → publish */
    /* 6×6 covariance of (position x y z, m; rotation about the world's x y z,
     * rad), upper triangle row by row (kr_track_result.covariance); NaN when
     * unknown (LOST frames, refine and final records, version 1-4 senders). */
    float covariance[21];
} kr_pose_msg;

typedef enum {
    KR_EVENT_STARTED = 0,
    KR_EVENT_PROGRESS = 1,
    KR_EVENT_STALLED = 2,     /* the sensor stopped delivering frames */
    KR_EVENT_STOPPED = 3,     /* clean end of stream or shutdown */
    KR_EVENT_ERROR = 4,
    KR_EVENT_LOST = 5,        /* tracking was lost (text: "frame N") */
    KR_EVENT_RECOVERED = 6    /* recovery found the camera again (text: "METHOD MS ms frame N") */
} kr_event;

/* Payload of `status` messages. */
typedef struct {
    uint64_t seq;
    uint8_t event;            /* kr_event */
    uint8_t state;            /* last kr_track_state */
    uint64_t frames_in, frames_out, frames_dropped, frames_lost;
    float fps;
    uint64_t model_points;
    uint64_t messages_dropped; /* messages the publisher could not queue so far
                                  (kr_publisher_dropped; 0 from a version 1 or 2 sender) */
    uint64_t frames_total;     /* frames the source holds (a replay's length); 0 when
                                  unknown (a live sensor; a version 1 to 3 sender) */
    char text[320];           /* NUL-terminated detail, e.g. an error message
                                 (at most 319 bytes; 63 from a version 1 sender) */
} kr_status_msg;

/* One chunk of a `model` message: a subsampled snapshot of the running model
 * for viewers, split into chunks of at most KR_WIRE_MODEL_CHUNK_POINTS points.
 * Positions travel as three u16 quanta from `origin` in steps of `scale`
 * metres, normals octahedrally as two u8 (docs/PROTOCOL.md). */
typedef struct {
    uint64_t seq;             /* per-topic sequence number (one per chunk), set by the publisher */
    uint64_t snapshot;        /* snapshot number (from 0); every chunk of a snapshot shares it */
    uint64_t frame;           /* frame index the model snapshot was taken at */
    uint32_t total_points;    /* points in the whole snapshot (all chunks) */
    uint32_t first_point;     /* index of this chunk's first point in the snapshot */
    uint32_t count;           /* points in this chunk */
    uint16_t chunk, chunks;   /* this chunk's index, and the snapshot's number of chunks */
    float origin[3];          /* m: the snapshot's bounding-box minimum */
    float scale;              /* m per quantum */
    const uint8_t *points;    /* count × KR_WIRE_MODEL_POINT_SIZE packed bytes (decoders point into
                                 the payload: valid as long as it is) */
} kr_model_msg;

#define KR_WIRE_MODEL_HEADER_SIZE 64
#define KR_WIRE_MODEL_POINT_SIZE 8       /* u16 x, y, z quanta; u8 u, v octahedral normal */
#define KR_WIRE_MODEL_CHUNK_POINTS 16384 /* a chunk is at most 64 + 16384 × 8 bytes (128 KiB) */
/* Payload bytes of a model chunk of `count` points. */
KR_API size_t kr_wire_model_size(uint32_t count);
/* Writes the header of *m (its points are not touched; pack them with
 * kr_wire_pack_model_point after it). Returns the header size. */
KR_API size_t kr_wire_encode_model_header(const kr_model_msg *m, uint8_t *buf);
/* Quantises one point: position to the nearest quantum of the (origin, scale)
 * grid, clamped to 0..65535; normal octahedrally, a missing (NaN or zero)
 * normal as +z. */
KR_API void kr_wire_pack_model_point(const float p[3], const float n[3], const float origin[3], float scale,
                                     uint8_t out[KR_WIRE_MODEL_POINT_SIZE]);
KR_API void kr_wire_unpack_model_point(const uint8_t in[KR_WIRE_MODEL_POINT_SIZE], const float origin[3],
                                       float scale, float p[3], float n[3]);
/* Checks size, magic, version, kind and that the chunk lies inside its
 * snapshot; out->points points into buf. */
KR_API kr_status kr_wire_decode_model(const uint8_t *buf, size_t len, kr_model_msg *out);

/* A `depth` message (issue 33, wire version 4 on): the latest depth frame,
 * subsampled by `step` in both directions, as millimetres (0 = no depth),
 * for viewers; sent only to subscribers of the topic (docs/PROTOCOL.md). */
typedef struct {
    uint64_t seq;             /* per-topic sequence number, set by the publisher */
    uint64_t frame;           /* the frame's index */
    double timestamp;         /* the frame's sensor time, s */
    uint16_t width, height;   /* samples per row and rows */
    uint16_t step;            /* sensor pixels per sample in each direction */
    const uint8_t *samples;   /* width × height little-endian u16 millimetres, row by row
                                 (decoders point into the payload: valid as long as it is) */
} kr_depth_msg;

#define KR_WIRE_DEPTH_HEADER_SIZE 40
#define KR_WIRE_DEPTH_MAX_SAMPLES 65536 /* a record is at most 40 + 65536 × 2 bytes */
/* Payload bytes of a depth record of width × height samples. */
KR_API size_t kr_wire_depth_size(uint16_t width, uint16_t height);
/* Writes the whole record (header, then m->samples as given); returns its
 * size, 0 when width × height is 0 or above KR_WIRE_DEPTH_MAX_SAMPLES. */
KR_API size_t kr_wire_encode_depth(const kr_depth_msg *m, uint8_t *buf);
/* Sample i (row-major) of a decoded record, in millimetres. */
KR_API uint16_t kr_wire_depth_sample(const kr_depth_msg *m, size_t i);
/* Checks size, magic, version and kind; out->samples points into buf. */
KR_API kr_status kr_wire_decode_depth(const uint8_t *buf, size_t len, kr_depth_msg *out);

/* One chunk of a `mesh` message (issue 34, wire version 5 on): the surface
 * (kinreg/surface.h) as a triangle mesh for viewers, cut into chunks that
 * each stand alone — their own vertices, and triangles indexing them — so a
 * viewer can draw a chunk as it comes and a lost chunk loses only its
 * triangles. Vertices are packed as the model's points (three u16 quanta
 * from `origin` in steps of `scale`, an octahedral normal in two bytes),
 * then r, g, b and a (255: a measured colour, 0: none) (docs/PROTOCOL.md). */
typedef struct {
    uint64_t seq;             /* per-topic sequence number (one per chunk), set by the publisher */
    uint64_t snapshot;        /* mesh snapshot number (from 0), set by the publisher */
    uint64_t frame;           /* frames fused into the surface when it was meshed */
    uint32_t total_faces;     /* triangles in the whole snapshot (all chunks) */
    uint32_t first_face;      /* index of this chunk's first triangle in the snapshot */
    uint16_t vertices, faces; /* in this chunk */
    uint16_t chunk, chunks;   /* this chunk's index, and the snapshot's number of chunks */
    float origin[3];          /* m: the snapshot's bounding-box minimum */
    float scale;              /* m per quantum */
    const uint8_t *vertex_bytes; /* vertices × KR_WIRE_MESH_VERTEX_SIZE (decoders point into the
                                    payload: valid as long as it is) */
    const uint8_t *face_bytes;   /* faces × 3 little-endian u16, indices into this chunk's
                                    vertices (checked by the decoder) */
} kr_mesh_msg;

#define KR_WIRE_MESH_HEADER_SIZE 64
#define KR_WIRE_MESH_VERTEX_SIZE 12 /* a model point's 8 bytes, then r, g, b, a */
#define KR_WIRE_MESH_FACE_SIZE 6
/* Payload bytes of a mesh chunk. */
KR_API size_t kr_wire_mesh_size(uint16_t vertices, uint16_t faces);
/* Writes the header of *m; returns its size (a decoded chunk is re-encoded
 * byte for byte by its header, then its vertex and face bytes). */
KR_API size_t kr_wire_encode_mesh_header(const kr_mesh_msg *m, uint8_t *buf);
/* A whole mesh packed into chunks of at most KR_WIRE_MAX_MESSAGE bytes,
 * ready to send (kr_publisher_send_mesh numbers them). */
typedef struct {
    uint8_t *bytes;  /* the chunks, one after another */
    size_t *offsets; /* chunk i is bytes[offsets[i] .. offsets[i + 1]) */
    uint16_t chunks;
    uint32_t faces, vertices; /* triangles in all, vertices sent (shared ones once a chunk) */
} kr_wire_mesh_packed;
/* Packs n_vertices vertices (xyz and normals 3 floats each; rgb 3 bytes each
 * or NULL for none) and n_faces triangles (3 indices each) taken when
 * `frame` frames were fused. The triangles keep their order; a chunk takes
 * triangles until the next would not fit. KR_ERR_INVALID_ARG for an index
 * out of range or a mesh over 65535 chunks; KR_ERR_NOMEM. */
KR_API kr_status kr_wire_pack_mesh(const float *xyz, const float *normals, const uint8_t *rgb,
                                   size_t n_vertices, const uint32_t *faces, size_t n_faces,
                                   uint64_t frame, kr_wire_mesh_packed *out);
KR_API void kr_wire_mesh_packed_free(kr_wire_mesh_packed *p);
/* Vertex i and face i of a decoded chunk. */
KR_API void kr_wire_mesh_vertex(const kr_mesh_msg *m, uint32_t i, float p[3], float n[3],
                                uint8_t rgba[4]);
KR_API void kr_wire_mesh_face(const kr_mesh_msg *m, uint32_t i, uint16_t v[3]);
/* Checks size, magic, version, kind, that the chunk lies inside its
 * snapshot and that every index names one of its vertices. */
KR_API kr_status kr_wire_decode_mesh(const uint8_t *buf, size_t len, kr_mesh_msg *out);

/* Encoded sizes on the wire (docs/PROTOCOL.md), for static buffers. */
#define KR_WIRE_POSE_SIZE 200 /* version 5; versions 1 to 4 have 112 */
#define KR_WIRE_POSE_SIZE_V4 112
#define KR_WIRE_STATUS_SIZE 400 /* version 4; version 3 has 392, 2 has 384, 1 has 128 */
#define KR_WIRE_STATUS_SIZE_V3 392
#define KR_WIRE_STATUS_SIZE_V2 384
#define KR_WIRE_STATUS_SIZE_V1 128
KR_API size_t kr_wire_pose_size(void);
KR_API size_t kr_wire_status_size(void);
KR_API const char *kr_topic_name(kr_topic topic);
/* The kr_topic of "pose", "status" or "refine"; 0 for any other name. */
KR_API kr_topic kr_topic_from_name(const char *name);
/* Lower-case names used in JSON output and docs/PROTOCOL.md ("newton",
 * "stopped", "good", ...); "unknown" for a value outside the enum. */
KR_API const char *kr_method_name(int method);
KR_API const char *kr_event_name(int event);
KR_API const char *kr_wire_state_name(int state); /* kr_track_state */

/* Encode into buf (at least the wire size); return bytes written. */
KR_API size_t kr_wire_encode_pose(const kr_pose_msg *m, uint8_t *buf);
KR_API size_t kr_wire_encode_status(const kr_status_msg *m, uint8_t *buf);
/* Encoders write the current version. Decoders read versions
 * KR_WIRE_VERSION_MIN..KR_WIRE_VERSION (a version 1 status record is 128
 * bytes with a 64-byte text); KR_ERR_FORMAT (with detail) on a wrong size,
 * version or magic. */
KR_API kr_status kr_wire_decode_pose(const uint8_t *buf, size_t len, kr_pose_msg *out);
KR_API kr_status kr_wire_decode_status(const uint8_t *buf, size_t len, kr_status_msg *out);

/* A publisher owns one ZeroMQ context and PUB socket. ZeroMQ sockets are not
 * thread-safe: create, send and destroy from one thread (the publisher thread
 * of DESIGN.md §2), or serialise the calls yourself. */
typedef struct kr_publisher kr_publisher;

typedef struct {
    const char *endpoint;     /* e.g. "tcp://127.0.0.1:5555"; NULL or "" = publish nowhere */
    int send_hwm;             /* messages queued per subscriber before dropping (default 1000) */
    /* CURVE (docs/SECURITY.md): the publisher's secret key (Z85, 40
     * characters) turns on encryption; then only subscribers whose public
     * key is among curve_allow (Z85 each) may connect. NULL = plain text. */
    const char *curve_secret_key;
    const char *const *curve_allow;
    size_t curve_allow_count;
    /* Connections beyond this are closed as they arrive (0 = default 64;
     * lowered to fit the open-file limit, RLIMIT_NOFILE). */
    int max_connections;
    /* Distinct subscriptions (topic prefixes) beyond this make the publisher
     * drop every connection so the subscriptions' memory is freed; honest
     * subscribers reconnect by themselves (0 = default 256). */
    int max_subscriptions;
    /* false (default): a message that any subscriber's queue cannot take is
     * refused for all and counted (kr_publisher_dropped); true: each
     * subscriber drops on its own, uncounted (ZeroMQ's plain PUB). */
    bool isolate_subscribers;
} kr_publisher_config;

/* Largest frame a kinreg socket accepts from a peer (ZMQ_MAXMSGSIZE): the
 * largest record, a whole model chunk (128 KiB), so a peer cannot make a
 * reader allocate more.
 * What subscribers send the publisher is held to KR_WIRE_MAX_SUBSCRIPTION
 * bytes: a subscription is a topic name, but CURVE's handshake commands
 * pass the same limit (its INITIATE is about 300 bytes). A peer that sends
 * a larger frame is disconnected (ZeroMQ's protocol error). */
#define KR_WIRE_MAX_MESSAGE \
    (KR_WIRE_MODEL_HEADER_SIZE + KR_WIRE_MODEL_CHUNK_POINTS * KR_WIRE_MODEL_POINT_SIZE)
#define KR_WIRE_MAX_SUBSCRIPTION 512

/* ---- CURVE keys (ZeroMQ's Z85 text, 40 characters for 32 bytes) ---------- */
#define KR_CURVE_KEY_LEN 40
typedef struct {
    char public_key[KR_CURVE_KEY_LEN + 1];
    char secret_key[KR_CURVE_KEY_LEN + 1];
} kr_curve_keypair;

/* Whether the linked libzmq supports CURVE (zmq_has("curve")). */
KR_API bool kr_curve_available(void);
/* A fresh key pair; KR_ERR_UNSUPPORTED without CURVE. */
KR_API kr_status kr_curve_keypair_new(kr_curve_keypair *out);
/* Writes BASE.key (public key, mode 0644) and BASE.key_secret (both keys,
 * mode 0600), in czmq's certificate text (docs/SECURITY.md); refuses to
 * overwrite either (KR_ERR_EXISTS). */
KR_API kr_status kr_curve_keypair_save(const kr_curve_keypair *kp, const char *base);
/* Reads a secret key file (BASE.key_secret): both keys, checked to belong
 * together; a file readable by group or others is refused. */
KR_API kr_status kr_curve_keypair_load(const char *path, kr_curve_keypair *out);
/* Reads the public key of a key file (BASE.key or BASE.key_secret). */
KR_API kr_status kr_curve_public_load(const char *path, char out[KR_CURVE_KEY_LEN + 1]);
/* Reads an allow-list: every public-key line of a file (e.g. `cat a.key b.key
 * > allowed`). *keys is one allocation of *count keys; free() it. */
KR_API kr_status kr_curve_allow_load(const char *path, char (**keys)[KR_CURVE_KEY_LEN + 1], size_t *count);
/* Whether a bind endpoint is reachable from other hosts (tcp on anything but
 * a loopback address; ipc and inproc are local). */
KR_API bool kr_endpoint_is_public(const char *endpoint);

KR_API void kr_publisher_config_default(kr_publisher_config *cfg);
/* Binds; an endpoint already in use is KR_ERR_ADDR_IN_USE naming it, a
 * malformed one KR_ERR_INVALID_ARG. cfg NULL = defaults (publish nowhere). */
KR_API kr_status kr_publisher_create(kr_publisher **out, const kr_publisher_config *cfg);
/* Lingers briefly so queued messages leave, then closes. */
KR_API void kr_publisher_destroy(kr_publisher **pub);
/* Never block: a slow subscriber loses messages (and sees a sequence gap).
 * The publisher fills in seq (per topic, from 0) on its own copy. send_pose
 * takes topic KR_TOPIC_POSE, KR_TOPIC_REFINE or KR_TOPIC_FINAL (0, as in a
 * zeroed message, counts as pose). */
KR_API kr_status kr_publisher_send_pose(kr_publisher *pub, const kr_pose_msg *m);
/* send_status fills in seq and messages_dropped (kr_publisher_dropped). */
KR_API kr_status kr_publisher_send_status(kr_publisher *pub, const kr_status_msg *m);
/* Waits up to timeout_ms (-1 = forever) until a subscriber has subscribed:
 * KR_OK (also at once for a publisher that publishes nowhere, or once any
 * subscriber has been seen), KR_TIMEOUT otherwise. For streams that must not
 * lose their first messages to ZeroMQ's "slow joiner" effect. */
KR_API kr_status kr_publisher_wait_subscriber(kr_publisher *pub, int timeout_ms);
/* The endpoint actually bound (ZMQ_LAST_ENDPOINT: a "tcp://127.0.0.1:*"
 * wildcard resolved to its port); "" for a publisher that publishes nowhere. */
KR_API const char *kr_publisher_endpoint(const kr_publisher *pub);
/* Messages the socket could not queue (counted, never retried): with the
 * default ZMQ_XPUB_NODROP, a message that some subscriber's queue (send_hwm)
 * cannot take is refused for all and counted here; subscribers see it as a
 * sequence gap. With isolate_subscribers, each subscriber drops on its own
 * and those drops are not counted. Safe to call from any thread. */
KR_API uint64_t kr_publisher_dropped(const kr_publisher *pub);
/* What the publisher refused to protect itself: connections over
 * max_connections, subscription messages over max_subscriptions (each time
 * it dropped every connection), and CURVE clients not on the allow-list. */
typedef struct {
    uint64_t connections_refused;
    uint64_t subscription_resets;
    uint64_t clients_denied;
    int connections;          /* open now */
    int max_connections;      /* in force (after the open-file limit) */
} kr_publisher_guard_stats;
KR_API void kr_publisher_guard_get(const kr_publisher *pub, kr_publisher_guard_stats *out);
/* Whether some subscriber now subscribes to `topic` (a subscription whose
 * prefix matches its name). Never waits. Lets a sender skip building a
 * message nobody would receive (the `model` topic). */
KR_API bool kr_publisher_has_subscriber(kr_publisher *pub, kr_topic topic);
/* Sends a model snapshot of n points (3 floats each) and normals (3 floats
 * each, NaN x = none) taken at `frame`, quantised and split into chunks of
 * at most KR_WIRE_MODEL_CHUNK_POINTS (docs/PROTOCOL.md). The caller
 * subsamples; n must be below 2^32. Sends nothing for n = 0. Like every send,
 * never blocks: a chunk refused is counted by kr_publisher_dropped. */
KR_API kr_status kr_publisher_send_model(kr_publisher *pub, const float *points, const float *normals,
                                         size_t n, uint64_t frame);
/* Sends a depth thumbnail (its seq is set here); like the model, only worth
 * making when kr_publisher_has_subscriber(pub, KR_TOPIC_DEPTH). */
KR_API kr_status kr_publisher_send_depth(kr_publisher *pub, const kr_depth_msg *m);
/* Sends a packed mesh's chunks, numbering them (seq) and the snapshot in
 * place; only worth packing when kr_publisher_has_subscriber(pub,
 * KR_TOPIC_MESH). Never blocks: a chunk refused is counted as dropped. */
KR_API kr_status kr_publisher_send_mesh(kr_publisher *pub, kr_wire_mesh_packed *mesh);

typedef struct kr_subscriber kr_subscriber;

/* Connects and subscribes to the given topics (bitmask of 1 << kr_topic;
 * 0 = pose, status and refine: the `model` topic, large, only when asked). */
KR_API kr_status kr_subscriber_create(kr_subscriber **out, const char *endpoint, unsigned topics);

typedef struct {
    const char *endpoint;
    unsigned topics;            /* as for kr_subscriber_create */
    /* CURVE: the publisher's public key and this subscriber's pair (Z85);
     * all NULL = plain text. */
    const char *curve_server_key;
    const char *curve_public_key, *curve_secret_key;
} kr_subscriber_config;
KR_API void kr_subscriber_config_default(kr_subscriber_config *cfg);
KR_API kr_status kr_subscriber_open(kr_subscriber **out, const kr_subscriber_config *cfg);
KR_API void kr_subscriber_destroy(kr_subscriber **sub);

/* One received message. */
typedef struct {
    kr_topic topic;
    kr_pose_msg pose;         /* pose, refine and final */
    kr_status_msg status;     /* status */
    kr_model_msg model;       /* model; model.points is valid until the next receive */
    kr_depth_msg depth;       /* depth; depth.samples is valid until the next receive */
    kr_mesh_msg mesh;         /* mesh; its bytes are valid until the next receive */
    uint64_t gap;             /* messages of this topic missed just before this one */
} kr_message;

/* Waits up to timeout_ms (-1 = forever) for a message: KR_OK, KR_END on
 * timeout, or an error. Tracks per-topic sequence numbers to fill `gap`.
 * A message on a topic this decoder does not know (e.g. "posex", which
 * matches the "pose" prefix subscription) is skipped silently, as
 * docs/PROTOCOL.md promises. A malformed payload on a known topic is consumed
 * and reported as KR_ERR_FORMAT (detail in kr_last_error()); the next call
 * goes on with the stream. Frames over KR_WIRE_MAX_MESSAGE bytes never reach
 * the application: ZeroMQ drops the connection that sent them. A signal that interrupts the wait gives
 * KR_ERR_INTERRUPTED. Like the publisher, use a subscriber from one thread. */
KR_API kr_status kr_subscriber_receive(kr_subscriber *sub, int timeout_ms, kr_message *out);

#ifdef __cplusplus
}
#endif
#endif
