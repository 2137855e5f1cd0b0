/* The live view's server (tools/view/view.h): libmicrohttpd with a thread per
 * connection, so a page's Server-Sent Events stream may block in its reader
 * until its buffer has data, and a thread subscribed to the pose stream that
 * turns messages into events for the hub (tools/view/view_hub.h). */
#include "view.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kinreg/frame.h"
#include "kinreg/transport.h"
#include "view_address.h"
#include "view_assets.h"
#include "view_events.h"
#include "view_hub.h"

/* Per page: about four seconds of 100k-point model snapshots in base64 plus
 * the poses between them; beyond this a page drops events (and is told). */
#define PAGE_BUFFER_BYTES (8u << 20)
#define HISTORY_POSES 20000

typedef struct {
    char *data;
    size_t len;
} file_bytes;

struct kr_view {
    struct MHD_Daemon *daemon;
    kr_view_hub *hub;
    kr_subscriber *sub;
    pthread_t feed;
    bool feed_running;
    atomic_bool stop;
    int port;
    file_bytes three, orbit; /* three.min.js and OrbitControls.js from libjs-three */
};

static file_bytes read_file(const char *path)
{
    file_bytes f = {NULL, 0};
    FILE *in = fopen(path, "rb");
    if (!in) return f;
    if (fseek(in, 0, SEEK_END) == 0) {
        long n = ftell(in);
        if (n > 0 && fseek(in, 0, SEEK_SET) == 0 && (f.data = malloc((size_t)n))) {
            f.len = fread(f.data, 1, (size_t)n, in);
            if (f.len != (size_t)n) {
                free(f.data);
                f.data = NULL;
                f.len = 0;
            }
        }
    }
    fclose(in);
    return f;
}

/* ---- the stream's thread ------------------------------------------------- */

static void forward(kr_view *v, const kr_message *m, char *buf, size_t cap)
{
    size_t n;
    switch (m->topic) {
    case KR_TOPIC_POSE:
    case KR_TOPIC_REFINE:
        n = kr_view_pose_json(&m->pose, m->gap, buf, cap);
        kr_view_hub_note_pose(v->hub, m->pose.seq, m->pose.frame_index, m->pose.t, m->pose.state,
                              m->topic == KR_TOPIC_REFINE);
        kr_view_hub_broadcast(v->hub, kr_topic_name(m->topic), buf, n);
        break;
    case KR_TOPIC_STATUS:
        n = kr_view_status_json(&m->status, m->gap, buf, cap);
        kr_view_hub_note_status(v->hub, buf, n);
        kr_view_hub_broadcast(v->hub, "status", buf, n);
        break;
    case KR_TOPIC_MODEL: {
        /* The record exactly as on the wire: header re-encoded, points as received. */
        static uint8_t record[KR_WIRE_MODEL_HEADER_SIZE +
                              KR_WIRE_MODEL_CHUNK_POINTS * KR_WIRE_MODEL_POINT_SIZE];
        size_t h = kr_wire_encode_model_header(&m->model, record);
        size_t pn = (size_t)m->model.count * KR_WIRE_MODEL_POINT_SIZE;
        memcpy(record + h, m->model.points, pn);
        n = kr_view_base64(record, h + pn, buf);
        kr_view_hub_broadcast(v->hub, "model", buf, n);
        break;
    }
    case KR_TOPIC_FINAL: /* not subscribed: the view follows the live stream */
        break;
    }
}

static void *feed_main(void *arg)
{
    kr_view *v = arg;
    /* Big enough for a model chunk in base64. */
    size_t cap = 4 * ((KR_WIRE_MODEL_HEADER_SIZE +
                       KR_WIRE_MODEL_CHUNK_POINTS * KR_WIRE_MODEL_POINT_SIZE + 2) /
                      3) +
                 16;
    char *buf = malloc(cap);
    if (!buf) {
        kr_log(KR_LOG_ERROR, "view: cannot allocate the event buffer");
        return NULL;
    }
    double next_tick = kr_now();
    while (!atomic_load(&v->stop)) {
        kr_message m;
        kr_status s = kr_subscriber_receive(v->sub, 200, &m);
        if (s == KR_OK)
            forward(v, &m, buf, cap);
        else if (s != KR_END && s != KR_ERR_FORMAT && s != KR_ERR_INTERRUPTED)
            kr_log(KR_LOG_WARN, "view: %s (%s)", kr_strerror(s), kr_last_error());
        if (kr_now() >= next_tick) {
            kr_view_hub_tick(v->hub);
            next_tick = kr_now() + 1.0;
        }
    }
    free(buf);
    return NULL;
}

/* ---- HTTP ------------------------------------------------------------------ */

typedef struct {
    kr_view *view;
    kr_view_client *client;
} sse_stream;

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    sse_stream *s = cls;
    /* A comment line every few seconds of silence keeps proxies and the
     * browser from timing the stream out, and notices a closed page. */
    ssize_t n = kr_view_client_read(s->view->hub, s->client, buf, max, 5.0);
    if (n < 0) return MHD_CONTENT_READER_END_OF_STREAM;
    if (n == 0) {
        static const char ping[] = ": ping\n\n";
        if (max < sizeof ping - 1) return 0;
        memcpy(buf, ping, sizeof ping - 1);
        return (ssize_t)(sizeof ping - 1);
    }
    return n;
}

static void sse_free(void *cls)
{
    sse_stream *s = cls;
    kr_view_hub_leave(s->view->hub, s->client);
    free(s);
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *type,
                             const void *data, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, mode);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)upload_size;
    (void)con_cls;
    kr_view *v = cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9,
                     MHD_RESPMEM_PERSISTENT);
    if (!strcmp(url, "/") || !strcmp(url, "/index.html"))
        return reply(conn, MHD_HTTP_OK, "text/html; charset=utf-8", kr_view_index_html,
                     kr_view_index_html_len, MHD_RESPMEM_PERSISTENT);
    if (!strcmp(url, "/view.js"))
        return reply(conn, MHD_HTTP_OK, "text/javascript; charset=utf-8", kr_view_view_js,
                     kr_view_view_js_len, MHD_RESPMEM_PERSISTENT);
    if (!strcmp(url, "/three.min.js") && v->three.data)
        return reply(conn, MHD_HTTP_OK, "text/javascript", v->three.data, v->three.len,
                     MHD_RESPMEM_PERSISTENT);
    if (!strcmp(url, "/OrbitControls.js") && v->orbit.data)
        return reply(conn, MHD_HTTP_OK, "text/javascript", v->orbit.data, v->orbit.len,
                     MHD_RESPMEM_PERSISTENT);
    if (!strcmp(url, "/events")) {
        sse_stream *s = malloc(sizeof *s);
        if (!s) return MHD_NO;
        s->view = v;
        s->client = kr_view_hub_join(v->hub);
        if (!s->client) {
            free(s);
            return MHD_NO;
        }
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, sse_read, s, sse_free);
        if (!r) {
            sse_free(s);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ok = MHD_queue_response(conn, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ok;
    }
    static const char missing[] = "not found (the view serves /, /view.js, /events)\n";
    return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", missing, sizeof missing - 1,
                 MHD_RESPMEM_PERSISTENT);
}

/* ---- start and stop ------------------------------------------------------ */

/* The listening socket is ours, so "in use" is told apart from other
 * failures and named with the port; libmicrohttpd takes it over. */
static int listen_on(const struct sockaddr_in *addr, const char *text, const char *who)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot create the view's socket: %s\n", who, strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)addr, sizeof *addr) != 0 || listen(fd, 64) != 0) {
        int err = errno;
        if (err == EADDRINUSE)
            fprintf(stderr,
                    "%s: the view's HTTP port %s is already in use: stop the program serving it or "
                    "choose "
                    "another port (--view [ADDR:]PORT; 0 = any free port)\n",
                    who, text);
        else
            fprintf(stderr, "%s: cannot serve the view on %s: %s\n", who, text, strerror(err));
        close(fd);
        return -1;
    }
    return fd;
}

int kr_view_start(kr_view **out, const kr_view_config *cfg, const char *who)
{
    struct sockaddr_in addr;
    char why[160];
    const char *http = cfg->http && *cfg->http ? cfg->http : "8080";
    if (kr_view_parse_address(http, &addr, why, sizeof why) != 0) {
        fprintf(stderr, "%s: view address '%s' is not allowed: %s\n", who, http, why);
        return 2;
    }
    if (!kr_view_is_loopback(&addr) && !cfg->public_bind) {
        fprintf(
            stderr,
            "%s: the view would be served beyond this machine on %s: add --view-public to allow it "
            "(anyone who can reach the port sees the scan), or serve on 127.0.0.1\n",
            who, http);
        return 2;
    }
    kr_view *v = calloc(1, sizeof *v);
    if (!v) return 1;
    atomic_init(&v->stop, false);
    const char *dir = cfg->three_dir ? cfg->three_dir : "/usr/share/javascript/three";
    char path[512];
    snprintf(path, sizeof path, "%s/three.min.js", dir);
    v->three = read_file(path);
    snprintf(path, sizeof path, "%s/examples/js/controls/OrbitControls.js", dir);
    v->orbit = read_file(path);
    if (!v->three.data || !v->orbit.data)
        fprintf(stderr,
                "%s: three.js not found in %s (install Debian's libjs-three): the page shows "
                "counters and "
                "plots but no 3-D view\n",
                who, dir);
    int rc = 1;
    if (!(v->hub = kr_view_hub_create(PAGE_BUFFER_BYTES, HISTORY_POSES))) goto fail;
    if (kr_subscriber_create(&v->sub, cfg->endpoint,
                             (1u << KR_TOPIC_POSE) | (1u << KR_TOPIC_STATUS) |
                                 (1u << KR_TOPIC_REFINE) | (1u << KR_TOPIC_MODEL)) != KR_OK) {
        fprintf(stderr, "%s: %s\n", who, kr_last_error());
        rc = 2;
        goto fail;
    }
    int fd = listen_on(&addr, http, who);
    if (fd < 0) goto fail;
    struct sockaddr_in bound;
    socklen_t blen = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &blen);
    v->port = ntohs(bound.sin_port);
    v->daemon =
        MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
                         NULL, on_request, v, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_END);
    if (!v->daemon) {
        close(fd);
        fprintf(stderr, "%s: cannot start the view's HTTP server on %s\n", who, http);
        goto fail;
    }
    if (pthread_create(&v->feed, NULL, feed_main, v) != 0) {
        fprintf(stderr, "%s: cannot start the view's stream thread\n", who);
        goto fail;
    }
    v->feed_running = true;
    char host[32];
    inet_ntop(AF_INET, &bound.sin_addr, host, sizeof host);
    if (kr_view_is_loopback(&addr))
        fprintf(stderr, "%s: live view at http://%s:%d/ (this machine only) of %s\n", who, host,
                v->port, cfg->endpoint);
    else
        fprintf(stderr,
                "%s: live view at http://%s:%d/ of %s, served BEYOND this machine (--view-public): "
                "anyone who "
                "can reach port %d sees the scan\n",
                who, host, v->port, cfg->endpoint, v->port);
    *out = v;
    return 0;
fail:
    kr_view_stop(&v);
    return rc;
}

int kr_view_port(const kr_view *v)
{
    return v ? v->port : 0;
}

void kr_view_stop(kr_view **vp)
{
    if (!vp || !*vp) return;
    kr_view *v = *vp;
    atomic_store(&v->stop, true);
    if (v->feed_running) pthread_join(v->feed, NULL);
    if (v->hub) kr_view_hub_close(v->hub); /* streams end: their threads can be joined */
    if (v->daemon) MHD_stop_daemon(v->daemon);
    kr_subscriber_destroy(&v->sub);
    kr_view_hub_destroy(&v->hub);
    free(v->three.data);
    free(v->orbit.data);
    free(v);
    *vp = NULL;
}
