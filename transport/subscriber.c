/* ZeroMQ SUB subscriber: receives two-frame messages (topic, payload),
 * decodes them and turns per-topic sequence numbers into gap counts. It
 * trusts nothing the publisher sends: frames over KR_WIRE_MAX_MESSAGE bytes
 * are refused by ZeroMQ itself (ZMQ_MAXMSGSIZE), topics it does not know
 * are skipped, and with CURVE only the expected publisher key is accepted. */
#include "kinreg/transport.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define TOPIC_MAX KR_TOPIC_SLOTS
/* receive_one's answer for a message on an unknown topic (never returned). */
#define KR_SKIPPED ((kr_status)100)
/* What a mask of 0 subscribes to: the small topics. */
#define DEFAULT_TOPICS                                                                             \
    ((1u << KR_TOPIC_POSE) | (1u << KR_TOPIC_STATUS) | (1u << KR_TOPIC_REFINE) |                   \
     (1u << KR_TOPIC_FINAL))
#define ALL_TOPICS                                                                                 \
    (DEFAULT_TOPICS | (1u << KR_TOPIC_MODEL) | (1u << KR_TOPIC_DEPTH) | (1u << KR_TOPIC_MESH))

struct kr_subscriber {
    void *ctx, *sock;
    /* With CURVE: a PAIR reading the SUB socket's handshake events, so that
     * a publisher refusing this subscriber's key is an error that says so,
     * not a silence that looks like no publisher at all. NULL without. */
    void *monitor;
    int handshake_failures; /* in a row, without a handshake that succeeded */
    bool warned;
    bool seen[TOPIC_MAX];
    uint64_t last_seq[TOPIC_MAX];
    char endpoint[256];
    uint8_t *payload; /* the last model payload (kr_message.model.points points into it) */
    size_t payload_cap;
};

static void close_socket(kr_subscriber *s)
{
    if (s->monitor) {
        zmq_socket_monitor(s->sock, NULL, 0);
        zmq_close(s->monitor);
        s->monitor = NULL;
    }
    if (s->sock) zmq_close(s->sock);
    if (s->ctx)
        while (zmq_ctx_term(s->ctx) != 0 && errno == EINTR) {
        }
    s->sock = s->ctx = NULL;
}

void kr_subscriber_config_default(kr_subscriber_config *cfg)
{
    if (cfg) memset(cfg, 0, sizeof *cfg);
}

/* CURVE client options: all three keys or none. */
static kr_status set_curve(void *sock, const kr_subscriber_config *cfg)
{
    const char *keys[3] = {cfg->curve_server_key, cfg->curve_public_key, cfg->curve_secret_key};
    static const char *const names[3] = {"publisher's public", "subscriber's public", "subscriber's secret"};
    int given = !!keys[0] + !!keys[1] + !!keys[2];
    if (given == 0) return KR_OK;
    if (given != 3)
        return kr_error(KR_ERR_INVALID_ARG,
                        "CURVE needs the publisher's public key and this subscriber's key pair "
                        "(--curve-server NAME.key and --curve-secret NAME.key_secret)");
    if (!kr_curve_available())
        return kr_error(KR_ERR_UNSUPPORTED, "this libzmq has no CURVE support");
    for (int i = 0; i < 3; i++) {
        uint8_t raw[32];
        if (strlen(keys[i]) != KR_CURVE_KEY_LEN || !zmq_z85_decode(raw, keys[i]))
            return kr_error(KR_ERR_INVALID_ARG, "the %s CURVE key is not 40 Z85 characters", names[i]);
    }
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, keys[0], KR_CURVE_KEY_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, keys[1], KR_CURVE_KEY_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, keys[2], KR_CURVE_KEY_LEN) != 0)
        return kr_error(KR_ERR_TRANSPORT, "cannot set the subscriber's CURVE keys: %s", zmq_strerror(errno));
    return KR_OK;
}

/* The handshake events of the SUB socket, on a PAIR in the same context;
 * started before connect so that no handshake escapes it. */
static kr_status start_monitor(kr_subscriber *s)
{
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://kinreg-sub-monitor-%p", (void *)s);
    int linger = 0;
    if (zmq_socket_monitor(s->sock, ep,
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0 ||
        !(s->monitor = zmq_socket(s->ctx, ZMQ_PAIR)) ||
        zmq_setsockopt(s->monitor, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_connect(s->monitor, ep) != 0)
        return kr_error(KR_ERR_TRANSPORT, "cannot watch the subscriber's CURVE handshakes: %s",
                        zmq_strerror(errno));
    return KR_OK;
}

kr_status kr_subscriber_create(kr_subscriber **out, const char *endpoint, unsigned topics)
{
    kr_subscriber_config cfg;
    kr_subscriber_config_default(&cfg);
    cfg.endpoint = endpoint;
    cfg.topics = topics;
    return kr_subscriber_open(out, &cfg);
}

kr_status kr_subscriber_open(kr_subscriber **out, const kr_subscriber_config *cfg)
{
    if (!out || !cfg) return kr_error(KR_ERR_INVALID_ARG, "kr_subscriber_open: NULL argument");
    const char *endpoint = cfg->endpoint;
    unsigned topics = cfg->topics;
    if (!endpoint || !*endpoint)
        return kr_error(KR_ERR_INVALID_ARG, "no endpoint to subscribe to (e.g. tcp://127.0.0.1:5555)");
    if (topics & ~ALL_TOPICS)
        return kr_error(
            KR_ERR_INVALID_ARG,
            "topic mask 0x%x has bits outside pose, status, refine, model, final, depth, mesh",
            topics);
    kr_subscriber *s = calloc(1, sizeof *s);
    if (!s) return kr_error(KR_ERR_NOMEM, "cannot allocate the subscriber");
    snprintf(s->endpoint, sizeof s->endpoint, "%s", endpoint);

    kr_status st = KR_OK;
    /* Nothing of a subscriber's outgoing traffic matters at close. */
    int linger = 0;
    s->ctx = zmq_ctx_new();
    if (!s->ctx) {
        st = kr_error(KR_ERR_TRANSPORT, "zmq_ctx_new failed: %s", zmq_strerror(errno));
        goto fail;
    }
    /* A frame larger than any record is refused before it is buffered: a
     * 200 MiB payload would otherwise be allocated whole. */
    int64_t max_in = KR_WIRE_MAX_MESSAGE;
    s->sock = zmq_socket(s->ctx, ZMQ_SUB);
    if (!s->sock || zmq_setsockopt(s->sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &max_in, sizeof max_in) != 0) {
        st = kr_error(KR_ERR_TRANSPORT, "cannot create a SUB socket: %s", zmq_strerror(errno));
        goto fail;
    }
    if ((st = set_curve(s->sock, cfg)) != KR_OK) goto fail;
    if (cfg->curve_server_key && (st = start_monitor(s)) != KR_OK) goto fail;
    /* Subscriptions are byte prefixes; no topic name is a prefix of another,
     * and receive() still matches the whole topic frame. */
    unsigned mask = topics ? topics : DEFAULT_TOPICS;
    for (int t = 1; t < TOPIC_MAX; t++) {
        if (!(mask & (1u << t))) continue;
        const char *name = kr_topic_name((kr_topic)t);
        if (zmq_setsockopt(s->sock, ZMQ_SUBSCRIBE, name, strlen(name)) != 0) {
            st = kr_error(KR_ERR_TRANSPORT, "cannot subscribe to %s: %s", name, zmq_strerror(errno));
            goto fail;
        }
    }
    /* Connecting is asynchronous: an endpoint with nobody bound yet is fine
     * (ZeroMQ retries); only a malformed one fails here. */
    if (zmq_connect(s->sock, endpoint) != 0) {
        int err = errno;
        st = kr_error(err == EINVAL || err == EPROTONOSUPPORT || err == ENOCOMPATPROTO
                          ? KR_ERR_INVALID_ARG
                          : KR_ERR_TRANSPORT,
                      "cannot subscribe to endpoint \"%s\": %s (expected e.g. tcp://127.0.0.1:5555 "
                      "or ipc:///tmp/kinreg.sock)",
                      endpoint, zmq_strerror(err));
        goto fail;
    }
    *out = s;
    return KR_OK;

fail:
    close_socket(s);
    free(s);
    return st;
}

void kr_subscriber_destroy(kr_subscriber **sub)
{
    if (!sub || !*sub) return;
    close_socket(*sub);
    free((*sub)->payload);
    free(*sub);
    *sub = NULL;
}

/* Receives one frame without waiting (poll said a message is there; the
 * frames of a multipart message arrive together). */
static int recv_frame(void *sock, zmq_msg_t *msg)
{
    for (;;) {
        if (zmq_msg_recv(msg, sock, ZMQ_DONTWAIT) >= 0) return 0;
        if (errno != EINTR) return -1;
    }
}

static bool more_frames(void *sock)
{
    int more = 0;
    size_t len = sizeof more;
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) == 0 && more;
}

/* The topic frame printably, for error details (it is untrusted bytes). */
static void printable(char *dst, size_t cap, const uint8_t *src, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n && j + 1 < cap; i++) dst[j++] = isprint(src[i]) ? (char)src[i] : '?';
    dst[j] = '\0';
}

static kr_topic topic_of_frame(const uint8_t *data, size_t n)
{
    for (int t = 1; t < TOPIC_MAX; t++) {
        const char *name = kr_topic_name((kr_topic)t);
        if (strlen(name) == n && !memcmp(name, data, n)) return (kr_topic)t;
    }
    return (kr_topic)0;
}

/* Decodes one message into *out (fields other than gap). */
static kr_status decode(kr_subscriber *sub, const zmq_msg_t *topic_frame, const zmq_msg_t *payload, int frames,
                        kr_message *out)
{
    const uint8_t *td = zmq_msg_data((zmq_msg_t *)topic_frame);
    size_t tn = zmq_msg_size((zmq_msg_t *)topic_frame);
    char name[40];
    printable(name, sizeof name, td, tn);
    kr_topic topic = topic_of_frame(td, tn);
    if (!topic) return KR_END; /* unknown topic: ignored (docs/PROTOCOL.md) */
    if (frames != 2)
        return kr_error(KR_ERR_FORMAT, "message on topic \"%s\" has %d frame%s, expected 2", name,
                        frames, frames == 1 ? "" : "s");

    const uint8_t *pd = zmq_msg_data((zmq_msg_t *)payload);
    size_t pn = zmq_msg_size((zmq_msg_t *)payload);
    memset(out, 0, sizeof *out);
    out->topic = topic;
    if (topic == KR_TOPIC_STATUS) return kr_wire_decode_status(pd, pn, &out->status);
    if (topic == KR_TOPIC_MODEL || topic == KR_TOPIC_DEPTH || topic == KR_TOPIC_MESH) {
        /* The ZeroMQ frame is closed after this call: keep a copy the
         * message's points (samples) can point into until the next receive. */
        if (pn > sub->payload_cap) {
            uint8_t *grown = realloc(sub->payload, pn);
            if (!grown) return kr_error(KR_ERR_NOMEM, "cannot hold a %s payload of %zu bytes", name, pn);
            sub->payload = grown;
            sub->payload_cap = pn;
        }
        if (pn) memcpy(sub->payload, pd, pn);
        const uint8_t *kept = pn ? sub->payload : pd;
        return topic == KR_TOPIC_MODEL   ? kr_wire_decode_model(kept, pn, &out->model)
               : topic == KR_TOPIC_DEPTH ? kr_wire_decode_depth(kept, pn, &out->depth)
                                         : kr_wire_decode_mesh(kept, pn, &out->mesh);
    }
    kr_status st = kr_wire_decode_pose(pd, pn, &out->pose);
    if (st == KR_OK && out->pose.topic != topic)
        return kr_error(KR_ERR_FORMAT, "message on topic \"%s\" carries a %s payload", name,
                        kr_topic_name(out->pose.topic));
    return st;
}

/* Messages of this topic missed just before sequence number seq. A number
 * that does not advance means the publisher restarted (its counters start at
 * 0 again) or repeated itself: not a gap, and counting starts over. */
static uint64_t update_gap(kr_subscriber *sub, kr_topic topic, uint64_t seq)
{
    uint64_t gap = 0;
    if (sub->seen[topic] && seq > sub->last_seq[topic]) gap = seq - sub->last_seq[topic] - 1;
    sub->seen[topic] = true;
    sub->last_seq[topic] = seq;
    return gap;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static kr_status receive_one(kr_subscriber *sub, int timeout_ms, kr_message *out);

kr_status kr_subscriber_receive(kr_subscriber *sub, int timeout_ms, kr_message *out)
{
    if (!sub || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_subscriber_receive: NULL argument");
    /* Messages on unknown topics are skipped within the same wait. */
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        int left = timeout_ms < 0 ? -1 : (int)(deadline - now_ms());
        if (timeout_ms >= 0 && left < 0) left = 0;
        kr_status st = receive_one(sub, left, out);
        if (st != KR_SKIPPED) return st;
        if (timeout_ms >= 0 && left == 0) return KR_END;
    }
}

/* One handshake event: KR_SKIPPED to wait on, or the error of a publisher
 * that refused this subscriber's key. */
static kr_status handshake_event(kr_subscriber *sub)
{
    uint8_t head[6];
    int n = zmq_recv(sub->monitor, head, sizeof head, ZMQ_DONTWAIT);
    int more = 0;
    size_t len = sizeof more;
    while (zmq_getsockopt(sub->monitor, ZMQ_RCVMORE, &more, &len) == 0 && more) {
        char skip[8];
        zmq_recv(sub->monitor, skip, sizeof skip, 0);
    }
    if (n != 6) return KR_SKIPPED;
    uint16_t event;
    uint32_t value;
    memcpy(&event, head, 2);
    memcpy(&value, head + 2, 4);
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        sub->handshake_failures = 0;
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        /* The publisher's ZAP handler said no (RFC 27 status 400): this
         * key is not on its allow-list. ZeroMQ does not try again. */
        return kr_error(KR_ERR_TRANSPORT,
                        "the publisher at %s refused this subscriber's CURVE key (status %u): "
                        "its public key is not on the publisher's allow-list; give the "
                        "publisher's operator your NAME.key to add to --curve-allow",
                        sub->endpoint, (unsigned)value);
    } else if (++sub->handshake_failures >= 3 && !sub->warned) {
        /* The connection closes during the handshake: with CURVE, most often
         * a --curve-server that is not the publisher's key (ZeroMQ retries). */
        sub->warned = true;
        kr_log(KR_LOG_WARN,
               "subscriber: the encrypted handshake with %s failed %d times in a row: check that "
               "--curve-server is the publisher's public key (its NAME.key) and that it "
               "publishes with CURVE",
               sub->endpoint, sub->handshake_failures);
    }
    return KR_SKIPPED;
}

static kr_status receive_one(kr_subscriber *sub, int timeout_ms, kr_message *out)
{
    zmq_pollitem_t items[2] = {{.socket = sub->sock, .events = ZMQ_POLLIN},
                               {.socket = sub->monitor, .events = ZMQ_POLLIN}};
    int rc = zmq_poll(items, sub->monitor ? 2 : 1, timeout_ms < 0 ? -1 : timeout_ms);
    if (rc < 0) {
        if (errno == EINTR) return kr_error(KR_ERR_INTERRUPTED, "receive interrupted by a signal");
        return kr_error(KR_ERR_TRANSPORT, "cannot poll %s: %s", sub->endpoint, zmq_strerror(errno));
    }
    if (rc == 0) return KR_END;
    if (sub->monitor && (items[1].revents & ZMQ_POLLIN)) {
        kr_status hs = handshake_event(sub);
        if (hs != KR_SKIPPED || !(items[0].revents & ZMQ_POLLIN)) return hs;
    }

    zmq_msg_t frame[2];
    zmq_msg_init(&frame[0]);
    zmq_msg_init(&frame[1]);
    int frames = 0;
    kr_status st = KR_OK;
    if (recv_frame(sub->sock, &frame[0]) != 0) {
        st = kr_error(KR_ERR_TRANSPORT, "cannot receive from %s: %s", sub->endpoint,
                      zmq_strerror(errno));
        goto done;
    }
    frames = 1;
    /* Read every frame of the message, even surplus ones, so that the next
     * call starts at a message boundary. */
    while (more_frames(sub->sock)) {
        zmq_msg_t extra;
        zmq_msg_t *dst = frames < 2 ? &frame[1] : &extra;
        if (dst == &extra) zmq_msg_init(&extra);
        int r = recv_frame(sub->sock, dst);
        if (dst == &extra) zmq_msg_close(&extra);
        if (r != 0) {
            st = kr_error(KR_ERR_TRANSPORT, "cannot receive from %s: %s", sub->endpoint,
                          zmq_strerror(errno));
            goto done;
        }
        frames++;
    }
    kr_message m;
    st = decode(sub, &frame[0], &frame[1], frames, &m);
    if (st == KR_END) st = KR_SKIPPED;
    if (st == KR_OK) {
        uint64_t seq = m.topic == KR_TOPIC_STATUS  ? m.status.seq
                       : m.topic == KR_TOPIC_MODEL ? m.model.seq
                       : m.topic == KR_TOPIC_DEPTH ? m.depth.seq
                       : m.topic == KR_TOPIC_MESH  ? m.mesh.seq
                                                   : m.pose.seq;
        m.gap = update_gap(sub, m.topic, seq);
        *out = m;
    }
done:
    zmq_msg_close(&frame[0]);
    zmq_msg_close(&frame[1]);
    return st;
}
