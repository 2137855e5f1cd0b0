/* ZeroMQ publisher. Sends never block (ZMQ_DONTWAIT, and a PUB socket
 * drops per subscriber at its high-water mark), so a slow or stuck subscriber
 * cannot stall tracking; it sees the loss as a sequence gap instead. One
 * context and socket per publisher, used from one thread (ZeroMQ sockets are
 * not thread-safe).
 *
 * The socket is an XPUB: to subscribers exactly a PUB, but it also hands the
 * publisher their subscriptions, so kr_publisher_wait_subscriber can hold the
 * start of a stream until someone listens, and the publisher can count them.
 * With ZMQ_XPUB_NODROP a message that a subscriber's queue cannot take makes
 * zmq_send fail with EAGAIN instead of vanishing, so every drop is counted.
 *
 * Defences (docs/SECURITY.md): CURVE with a ZAP allow-list, a cap on
 * connections (publisher_guard.c) sized to the open-file limit, a cap on
 * distinct subscriptions, and ZMQ_MAXMSGSIZE on what peers may send. */
#include "kinreg/transport.h"

#include "publisher_guard.h"
#include "wire_internal.h"

#include "kinreg/frame.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

/* Long enough for queued messages (the final STOPPED status among them) to
 * reach connected subscribers at shutdown, short enough that a dead
 * subscriber cannot hold up exit. */
#define LINGER_MS 500
/* File descriptors kept for the rest of kinreg (files, threads' pipes,
 * libfreenect, CUDA) when sizing the connection cap to RLIMIT_NOFILE. */
#define FD_RESERVE 256
/* After dropping every connection for too many subscriptions, wait this
 * long before doing it again (the count falls as the peers' go). */
#define RESET_INTERVAL_S 1.0
/* Subscriptions remembered for kr_publisher_has_subscriber: kinreg's topics
 * need a handful; longer or more prefixes than this are still served by
 * ZeroMQ, only not remembered (has_subscriber then answers true). */
#define MAX_PREFIXES 32
#define PREFIX_MAX 32

struct kr_publisher {
    void *ctx, *sock;     /* both NULL: publishes nowhere */
    char endpoint[256];   /* as bound (ZMQ_LAST_ENDPOINT) */
    uint64_t seq[KR_TOPIC_SLOTS]; /* next sequence number, indexed by kr_topic */
    atomic_ullong dropped; /* read by other threads (kr_pipeline_get_stats) */
    bool subscribed;      /* a subscription has arrived */
    kr_pub_guard *guard;
    long subscriptions;   /* distinct subscriptions held by the socket */
    int max_subscriptions;
    double last_reset;    /* kr_now() of the last drop-all, 0 = never */
    /* The distinct subscription prefixes now active. A non-verbose XPUB
     * passes a prefix's first subscribe and its last unsubscribe (also when
     * a subscriber disconnects), so this set is exact. */
    char prefixes[MAX_PREFIXES][PREFIX_MAX];
    size_t prefix_len[MAX_PREFIXES];
    int n_prefixes;
    uint64_t model_snapshots; /* model snapshots sent, numbering the next */
    uint64_t mesh_snapshots;  /* likewise, mesh snapshots */
    uint8_t *chunk;           /* model chunk buffer (KR_WIRE_MODEL_CHUNK_POINTS points) */
};

void kr_publisher_config_default(kr_publisher_config *cfg)
{
    if (!cfg) return;
    cfg->endpoint = NULL;
    cfg->send_hwm = 1000;
    cfg->curve_secret_key = NULL;
    cfg->curve_allow = NULL;
    cfg->curve_allow_count = 0;
    cfg->max_connections = 64;
    cfg->max_subscriptions = 256;
    cfg->isolate_subscribers = false;
}

/* ZeroMQ's ipc:// bind silently unlinks an existing socket file, which would
 * steal the stream from a running publisher. Refuse instead when something
 * accepts connections on that path. */
static bool ipc_path_in_use(const char *endpoint)
{
    if (strncmp(endpoint, "ipc://", 6) != 0) return false;
    const char *path = endpoint + 6;
    struct sockaddr_un addr;
    /* "*" is a wildcard and "@" the abstract namespace (whose bind already
     * fails with EADDRINUSE); over-long paths fail in zmq_bind itself. */
    if (!*path || !strcmp(path, "*") || path[0] == '@' || strlen(path) >= sizeof addr.sun_path)
        return false;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return false;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    bool in_use = connect(fd, (const struct sockaddr *)&addr, sizeof addr) == 0;
    close(fd);
    return in_use;
}

static kr_status bind_error(const char *endpoint, int err)
{
    if (err == EADDRINUSE)
        return kr_error(KR_ERR_ADDR_IN_USE,
                        "endpoint %s is already in use: stop the other publisher or choose "
                        "another --publish endpoint",
                        endpoint);
    if (err == EINVAL || err == EPROTONOSUPPORT || err == ENOCOMPATPROTO || err == EADDRNOTAVAIL ||
        err == ENODEV || err == ENOENT || err == ENAMETOOLONG || err == EACCES)
        return kr_error(KR_ERR_INVALID_ARG,
                        "cannot publish on endpoint \"%s\": %s (expected e.g. tcp://127.0.0.1:5555, "
                        "tcp://*:5555 or ipc:///tmp/kinreg.sock)",
                        endpoint, zmq_strerror(err));
    return kr_error(KR_ERR_TRANSPORT, "cannot bind publisher to %s: %s", endpoint,
                    zmq_strerror(err));
}

/* ZeroMQ reads a tcp port past 65535 modulo 65536 or as "any port" (a
 * random one), so the port 99999 (tcp, any interface) bound somewhere no subscriber would look.
 * The port must be 1..65535, or * for an ephemeral one. */
static kr_status check_tcp_port(const char *endpoint)
{
    if (strncmp(endpoint, "tcp://", 6) != 0) return KR_OK;
    const char *colon = strrchr(endpoint + 6, ':');
    const char *port = colon ? colon + 1 : "";
    if (strcmp(port, "*") == 0) return KR_OK;
    char *end;
    errno = 0;
    long v = *port >= '0' && *port <= '9' ? strtol(port, &end, 10) : -1;
    if (v < 1 || v > 65535 || errno == ERANGE || *end)
        return kr_error(
            KR_ERR_INVALID_ARG,
            "cannot publish on endpoint \"%s\": the port must be 1..65535 or * (any free "
            "port), as in tcp://*:5555 or tcp://127.0.0.1:*",
            endpoint);
    return KR_OK;
}

static void close_socket(kr_publisher *p)
{
    if (p->sock && p->guard) zmq_socket_monitor(p->sock, NULL, 0);
    kr_pub_guard_stop(&p->guard);
    if (p->sock) zmq_close(p->sock);
    /* zmq_ctx_term waits for the linger period while messages are queued. */
    if (p->ctx)
        while (zmq_ctx_term(p->ctx) != 0 && errno == EINTR) {
        }
    p->sock = p->ctx = NULL;
    /* libzmq leaves the socket file of an ipc:// path behind; the path was
     * ours (bind refuses one in use), so a finished run removes it. */
    if (!strncmp(p->endpoint, "ipc://", 6) && p->endpoint[6] && p->endpoint[6] != '@')
        unlink(p->endpoint + 6);
    p->endpoint[0] = '\0';
}

/* The connection cap that fits the open-file limit: raises the soft limit
 * toward the hard one when needed, else lowers the cap and says so. */
static kr_status fit_connections(int wanted, const char *endpoint, int *out)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        *out = wanted;
        return KR_OK;
    }
    rlim_t need = (rlim_t)wanted + FD_RESERVE;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        struct rlimit raised = rl;
        raised.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) {
        *out = wanted;
        return KR_OK;
    }
    long fit = (long)rl.rlim_cur - FD_RESERVE;
    if (fit < 1)
        return kr_error(KR_ERR_INVALID_ARG,
                        "cannot publish on %s: the open-file limit (ulimit -n %ld) leaves no room for "
                        "subscribers beside the %d files kinreg keeps; raise it (ulimit -n %ld)",
                        endpoint, (long)rl.rlim_cur, FD_RESERVE, (long)need);
    kr_log(KR_LOG_WARN,
           "publisher on %s: at most %ld subscriber connections, not %d, under the open-file limit "
           "(ulimit -n %ld); raise it to %ld for %d",
           endpoint, fit, wanted, (long)rl.rlim_cur, (long)need, wanted);
    *out = (int)fit;
    return KR_OK;
}

/* Socket options before bind: queue bound, linger, counted drops, the size
 * of what peers may send, and CURVE. */
static kr_status set_options(kr_publisher *p, const kr_publisher_config *cfg)
{
    int hwm = cfg->send_hwm, linger = LINGER_MS, nodrop = !cfg->isolate_subscribers, one = 1;
    /* Subscriptions are a topic name, but CURVE's handshake commands pass
     * the same limit (INITIATE is about 300 bytes). */
    int64_t max_in = KR_WIRE_MAX_SUBSCRIPTION;
    if (zmq_setsockopt(p->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_XPUB_NODROP, &nodrop, sizeof nodrop) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_MAXMSGSIZE, &max_in, sizeof max_in) != 0)
        return kr_error(KR_ERR_TRANSPORT, "cannot set PUB socket options: %s", zmq_strerror(errno));
    if (!cfg->curve_secret_key) return KR_OK;
    if (zmq_setsockopt(p->sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_CURVE_SECRETKEY, cfg->curve_secret_key, KR_CURVE_KEY_LEN) != 0)
        return kr_error(KR_ERR_TRANSPORT, "cannot turn on CURVE on the publisher: %s", zmq_strerror(errno));
    return KR_OK;
}

static kr_status check_curve(const kr_publisher_config *cfg)
{
    if (!cfg->curve_secret_key) {
        if (cfg->curve_allow_count)
            return kr_error(KR_ERR_INVALID_ARG,
                            "an allow-list of subscriber keys needs the publisher's secret key too "
                            "(--curve-secret NAME.key_secret)");
        return KR_OK;
    }
    if (!kr_curve_available())
        return kr_error(KR_ERR_UNSUPPORTED, "this libzmq has no CURVE support (zmq_has(\"curve\") is 0)");
    uint8_t raw[32];
    if (strlen(cfg->curve_secret_key) != KR_CURVE_KEY_LEN || !zmq_z85_decode(raw, cfg->curve_secret_key))
        return kr_error(KR_ERR_INVALID_ARG, "the publisher's CURVE secret key is not 40 Z85 characters");
    if (!cfg->curve_allow || !cfg->curve_allow_count)
        return kr_error(KR_ERR_INVALID_ARG,
                        "CURVE publishing needs an allow-list of subscriber public keys "
                        "(--curve-allow FILE: their NAME.key files joined with cat)");
    for (size_t i = 0; i < cfg->curve_allow_count; i++)
        if (!cfg->curve_allow[i] || strlen(cfg->curve_allow[i]) != KR_CURVE_KEY_LEN ||
            !zmq_z85_decode(raw, cfg->curve_allow[i]))
            return kr_error(KR_ERR_INVALID_ARG, "allow-list key %zu is not 40 Z85 characters", i + 1);
    return KR_OK;
}

static int bound_port(const char *endpoint)
{
    if (strncmp(endpoint, "tcp://", 6) != 0) return 0;
    const char *colon = strrchr(endpoint, ':');
    return colon ? atoi(colon + 1) : 0;
}

kr_status kr_publisher_create(kr_publisher **out, const kr_publisher_config *cfg)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_publisher_create: out is NULL");
    kr_publisher_config def;
    if (!cfg) {
        kr_publisher_config_default(&def);
        cfg = &def;
    }
    /* ZeroMQ reads an HWM of 0 as "no limit": memory would grow without bound
     * behind a slow subscriber, the opposite of what the HWM is for. */
    if (cfg->send_hwm <= 0)
        return kr_error(KR_ERR_INVALID_ARG, "publisher send_hwm is %d, must be > 0",
                        cfg->send_hwm);
    const char *ep = cfg->endpoint;
    if (ep && strlen(ep) >= sizeof((kr_publisher *)0)->endpoint)
        return kr_error(KR_ERR_INVALID_ARG, "publish endpoint \"%.40s...\" is too long", ep);
    if (cfg->max_connections < 0 || cfg->max_subscriptions < 0)
        return kr_error(KR_ERR_INVALID_ARG,
                        "publisher max_connections %d and max_subscriptions %d must be >= 0 (0 = default)",
                        cfg->max_connections, cfg->max_subscriptions);
    /* 0 = the default, so a zeroed configuration from before these fields works. */
    kr_publisher_config_default(&def);
    int max_connections = cfg->max_connections ? cfg->max_connections : def.max_connections;
    int max_subscriptions = cfg->max_subscriptions ? cfg->max_subscriptions : def.max_subscriptions;
    if (ep && *ep) {
        kr_status st = check_tcp_port(ep);
        if (st == KR_OK) st = check_curve(cfg);
        if (st == KR_OK) st = fit_connections(max_connections, ep, &max_connections);
        if (st != KR_OK) return st;
    }

    kr_publisher *p = calloc(1, sizeof *p);
    if (!p) return kr_error(KR_ERR_NOMEM, "cannot allocate the publisher");
    if (!ep || !*ep) {
        *out = p;
        return KR_OK;
    }
    if (ipc_path_in_use(ep)) {
        free(p);
        return bind_error(ep, EADDRINUSE);
    }

    kr_status st = KR_OK;
    p->max_subscriptions = max_subscriptions;
    p->ctx = zmq_ctx_new();
    if (!p->ctx) {
        st = kr_error(KR_ERR_TRANSPORT, "zmq_ctx_new failed: %s", zmq_strerror(errno));
        goto fail;
    }
    p->sock = zmq_socket(p->ctx, ZMQ_XPUB);
    if (!p->sock) {
        st = kr_error(KR_ERR_TRANSPORT, "cannot create a PUB socket: %s", zmq_strerror(errno));
        goto fail;
    }
    if ((st = set_options(p, cfg)) != KR_OK) goto fail;
    /* The guard (ZAP handler, connection monitor) must be up before bind,
     * or the first peers would be admitted unchecked. */
    st = kr_pub_guard_start(&p->guard, p->ctx, p->sock, cfg->curve_secret_key != NULL, cfg->curve_allow,
                            cfg->curve_allow_count, max_connections);
    if (st != KR_OK) goto fail;
    if (zmq_bind(p->sock, ep) != 0) {
        st = bind_error(ep, errno);
        goto fail;
    }
    size_t len = sizeof p->endpoint;
    if (zmq_getsockopt(p->sock, ZMQ_LAST_ENDPOINT, p->endpoint, &len) != 0)
        snprintf(p->endpoint, sizeof p->endpoint, "%s", ep);
    kr_pub_guard_set_port(p->guard, bound_port(p->endpoint));
    if (!cfg->curve_secret_key && kr_endpoint_is_public(ep))
        kr_log(KR_LOG_WARN,
               "publishing on %s without encryption: the pose stream is readable by anyone who can "
               "reach it; use a loopback or ipc:// endpoint, or CURVE keys (kinreg keygen, "
               "docs/SECURITY.md)",
               ep);
    *out = p;
    return KR_OK;

fail:
    close_socket(p);
    free(p);
    return st;
}

void kr_publisher_destroy(kr_publisher **pub)
{
    if (!pub || !*pub) return;
    close_socket(*pub);
    free((*pub)->chunk);
    free(*pub);
    *pub = NULL;
}

const char *kr_publisher_endpoint(const kr_publisher *pub)
{
    return pub ? pub->endpoint : "";
}

uint64_t kr_publisher_dropped(const kr_publisher *pub)
{
    return pub ? atomic_load_explicit(&((kr_publisher *)pub)->dropped, memory_order_relaxed) : 0;
}

void kr_publisher_guard_get(const kr_publisher *pub, kr_publisher_guard_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (pub) kr_pub_guard_get(pub->guard, out);
}

/* A prefix too long or too many to remember: treated as matching anything,
 * so has_subscriber errs towards sending. */
#define PREFIX_OVERFLOW (-1)

static void note_subscription(kr_publisher *pub, const uint8_t *msg, int n)
{
    size_t len = (size_t)n - 1;
    const uint8_t *prefix = msg + 1;
    int found = -1;
    for (int i = 0; i < pub->n_prefixes; i++)
        if (pub->prefix_len[i] == len && !memcmp(pub->prefixes[i], prefix, len)) found = i;
    if (msg[0] == 1 && found < 0) {
        if (len >= PREFIX_MAX || pub->n_prefixes == MAX_PREFIXES || n > 64) {
            pub->n_prefixes = PREFIX_OVERFLOW;
            return;
        }
        memcpy(pub->prefixes[pub->n_prefixes], prefix, len);
        pub->prefix_len[pub->n_prefixes++] = len;
    } else if (msg[0] == 0 && found >= 0) {
        pub->n_prefixes--;
        memcpy(pub->prefixes[found], pub->prefixes[pub->n_prefixes], PREFIX_MAX);
        pub->prefix_len[found] = pub->prefix_len[pub->n_prefixes];
    }
}

/* Reads the subscription messages that have arrived (XPUB queues them for
 * the application: each subscription that is new to the socket, and each
 * that no peer holds any more) and keeps the set of active prefixes; true
 * when one of them subscribes. Keeps the count of distinct subscriptions and
 * drops every connection when it passes the cap, which frees their memory
 * (the honest peers reconnect). Never waits. */
static bool drain_subscriptions(kr_publisher *pub)
{
    bool subscribed = false;
    uint8_t msg[KR_WIRE_MAX_SUBSCRIPTION];
    int n;
    while ((n = zmq_recv(pub->sock, msg, sizeof msg, ZMQ_DONTWAIT)) > 0 || (n < 0 && errno == EINTR)) {
        if (n <= 0) continue;
        if (msg[0] == 1) {
            subscribed = true;
            pub->subscriptions++;
        } else if (msg[0] == 0 && pub->subscriptions > 0) {
            pub->subscriptions--;
        }
        if ((msg[0] == 0 || msg[0] == 1) && pub->n_prefixes != PREFIX_OVERFLOW)
            note_subscription(pub, msg, n);
    }
    if (pub->subscriptions > pub->max_subscriptions && kr_now() - pub->last_reset >= RESET_INTERVAL_S) {
        pub->last_reset = kr_now();
        kr_log(KR_LOG_WARN,
               "publisher on %s: %ld distinct subscriptions, more than the %d allowed (kinreg has 4 "
               "topics): dropping every connection to free them",
               pub->endpoint, pub->subscriptions, pub->max_subscriptions);
        kr_pub_guard_drop_all(pub->guard);
    }
    return subscribed;
}

bool kr_publisher_has_subscriber(kr_publisher *pub, kr_topic topic)
{
    if (!pub || !pub->sock) return false;
    if (drain_subscriptions(pub)) pub->subscribed = true;
    if (pub->n_prefixes == PREFIX_OVERFLOW) return true;
    const char *name = kr_topic_name(topic);
    size_t len = strlen(name);
    for (int i = 0; i < pub->n_prefixes; i++)
        if (pub->prefix_len[i] <= len && !memcmp(pub->prefixes[i], name, pub->prefix_len[i])) return true;
    return false;
}

kr_status kr_publisher_wait_subscriber(kr_publisher *pub, int timeout_ms)
{
    if (!pub) return kr_error(KR_ERR_INVALID_ARG, "kr_publisher_wait_subscriber: NULL publisher");
    if (!pub->sock || pub->subscribed) return KR_OK;
    double deadline = kr_now() + (timeout_ms < 0 ? 1e9 : 1e-3 * timeout_ms);
    for (;;) {
        if (drain_subscriptions(pub)) break;
        double left = deadline - kr_now();
        if (left <= 0) return KR_TIMEOUT;
        zmq_pollitem_t item = {pub->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, (long)(left * 1e3) + 1) < 0 && errno != EINTR)
            return kr_error(KR_ERR_TRANSPORT, "waiting for a subscriber on %s: %s", pub->endpoint,
                            zmq_strerror(errno));
    }
    pub->subscribed = true;
    /* A subscriber sends one subscription per topic; give the rest a moment
     * so the first messages of every topic reach it. */
    zmq_pollitem_t item = {pub->sock, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&item, 1, 20) > 0) drain_subscriptions(pub);
    return KR_OK;
}

/* zmq_send that retries a signal interruption (bounded: the call never waits)
 * and reports EAGAIN as 0. */
static int send_frame(void *sock, const void *data, size_t n, int flags)
{
    for (;;) {
        if (zmq_send(sock, data, n, flags | ZMQ_DONTWAIT) >= 0) return 1;
        if (errno == EAGAIN) return 0;
        if (errno != EINTR) return -1;
    }
}

static kr_status send_message(kr_publisher *pub, kr_topic topic, const uint8_t *buf, size_t n)
{
    if (!pub->sock) return KR_OK;
    if (drain_subscriptions(pub)) pub->subscribed = true;
    const char *name = kr_topic_name(topic);
    /* A PUB socket queues the frames of a multipart message together and
     * delivers all or none, so the topic frame cannot be orphaned. */
    int rc = send_frame(pub->sock, name, strlen(name), ZMQ_SNDMORE);
    if (rc == 1) rc = send_frame(pub->sock, buf, n, 0);
    if (rc == 0) {
        atomic_fetch_add_explicit(&pub->dropped, 1, memory_order_relaxed);
        return KR_OK;
    }
    if (rc < 0)
        return kr_error(KR_ERR_TRANSPORT, "cannot send a %s message on %s: %s", name,
                        pub->endpoint, zmq_strerror(errno));
    return KR_OK;
}

kr_status kr_publisher_send_pose(kr_publisher *pub, const kr_pose_msg *m)
{
    if (!pub || !m) return kr_error(KR_ERR_INVALID_ARG, "kr_publisher_send_pose: NULL argument");
    /* A zero-initialised message (topic 0) is a pose. */
    kr_topic topic = m->topic == 0 ? KR_TOPIC_POSE : m->topic;
    if (topic != KR_TOPIC_POSE && topic != KR_TOPIC_REFINE && topic != KR_TOPIC_FINAL)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_publisher_send_pose: topic %d is not pose, refine or final",
                        (int)m->topic);
    kr_pose_msg copy = *m;
    copy.topic = topic;
    copy.seq = pub->seq[topic]++;
    uint8_t buf[KR_WIRE_POSE_SIZE];
    size_t n = kr_wire_encode_pose(&copy, buf);
    return send_message(pub, topic, buf, n);
}

kr_status kr_publisher_send_status(kr_publisher *pub, const kr_status_msg *m)
{
    if (!pub || !m)
        return kr_error(KR_ERR_INVALID_ARG, "kr_publisher_send_status: NULL argument");
    kr_status_msg copy = *m;
    copy.seq = pub->seq[KR_TOPIC_STATUS]++;
    /* The publisher knows its own drops best: every status record says them. */
    copy.messages_dropped = kr_publisher_dropped(pub);
    uint8_t buf[KR_WIRE_STATUS_SIZE];
    size_t n = kr_wire_encode_status(&copy, buf);
    return send_message(pub, KR_TOPIC_STATUS, buf, n);
}

kr_status kr_publisher_send_model(kr_publisher *pub, const float *points, const float *normals, size_t n,
                                  uint64_t frame)
{
    if (!pub || (n && (!points || !normals)))
        return kr_error(KR_ERR_INVALID_ARG, "kr_publisher_send_model: NULL argument");
    if (n > UINT32_MAX)
        return kr_error(KR_ERR_INVALID_ARG, "model snapshot of %zu points is too large to send: subsample it", n);
    if (!pub->sock || n == 0) return KR_OK;
    if (!pub->chunk && !(pub->chunk = malloc(kr_wire_model_size(KR_WIRE_MODEL_CHUNK_POINTS))))
        return kr_error(KR_ERR_NOMEM, "cannot allocate the model chunk buffer");
    kr_model_msg m;
    memset(&m, 0, sizeof m);
    kr_wire_grid_of(points, n, m.origin, &m.scale);
    m.snapshot = pub->model_snapshots++;
    m.frame = frame;
    m.total_points = (uint32_t)n;
    m.chunks = (uint16_t)((n + KR_WIRE_MODEL_CHUNK_POINTS - 1) / KR_WIRE_MODEL_CHUNK_POINTS);
    for (uint32_t first = 0; first < n; first += KR_WIRE_MODEL_CHUNK_POINTS, m.chunk++) {
        m.first_point = first;
        m.count = (uint32_t)(n - first < KR_WIRE_MODEL_CHUNK_POINTS ? n - first : KR_WIRE_MODEL_CHUNK_POINTS);
        m.seq = pub->seq[KR_TOPIC_MODEL]++;
        uint8_t *out = pub->chunk + kr_wire_encode_model_header(&m, pub->chunk);
        for (uint32_t i = 0; i < m.count; i++)
            kr_wire_pack_model_point(points + 3 * (size_t)(first + i), normals + 3 * (size_t)(first + i), m.origin,
                                     m.scale, out + (size_t)i * KR_WIRE_MODEL_POINT_SIZE);
        kr_status s = send_message(pub, KR_TOPIC_MODEL, pub->chunk, kr_wire_model_size(m.count));
        if (s != KR_OK) return s;
    }
    return KR_OK;
}

kr_status kr_publisher_send_depth(kr_publisher *pub, const kr_depth_msg *m)
{
    if (!pub || !m) return kr_error(KR_ERR_INVALID_ARG, "kr_publisher_send_depth: NULL argument");
    size_t n = (size_t)m->width * m->height;
    if (n == 0 || n > KR_WIRE_DEPTH_MAX_SAMPLES || !m->samples)
        return kr_error(KR_ERR_INVALID_ARG, "depth thumbnail of %ux%u samples cannot be sent (1 to %d)",
                        m->width, m->height, KR_WIRE_DEPTH_MAX_SAMPLES);
    if (!pub->sock) return KR_OK;
    /* The model chunk's buffer holds the largest depth record too. */
    if (!pub->chunk && !(pub->chunk = malloc(kr_wire_model_size(KR_WIRE_MODEL_CHUNK_POINTS))))
        return kr_error(KR_ERR_NOMEM, "cannot allocate the message buffer");
    kr_depth_msg copy = *m;
    copy.seq = pub->seq[KR_TOPIC_DEPTH]++;
    size_t bytes = kr_wire_encode_depth(&copy, pub->chunk);
    return send_message(pub, KR_TOPIC_DEPTH, pub->chunk, bytes);
}

kr_status kr_publisher_send_mesh(kr_publisher *pub, kr_wire_mesh_packed *mesh)
{
    if (!pub || !mesh) return kr_error(KR_ERR_INVALID_ARG, "kr_publisher_send_mesh: NULL argument");
    if (!pub->sock || !mesh->chunks) return KR_OK;
    uint64_t snapshot = pub->mesh_snapshots++;
    for (uint16_t i = 0; i < mesh->chunks; i++) {
        uint8_t *chunk = mesh->bytes + mesh->offsets[i];
        kr_wire_mesh_stamp(chunk, pub->seq[KR_TOPIC_MESH]++, snapshot);
        kr_status s =
            send_message(pub, KR_TOPIC_MESH, chunk, mesh->offsets[i + 1] - mesh->offsets[i]);
        if (s != KR_OK) return s;
    }
    return KR_OK;
}
