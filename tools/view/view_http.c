/* The live view's server (tools/view/view.h): libmicrohttpd on one thread
 * (epoll), a thread subscribed to the pose stream that turns messages into
 * events for the hub (tools/view/view_hub.h), and nothing that can hold up
 * either (issue 30, item 5):
 *
 *   - connections: at most MAX_CONNECTIONS at once (and within the open-file
 *     limit); one that sends or takes nothing for IDLE_SECONDS is closed, so
 *     a client that connects and stays silent, or a page that stopped
 *     reading, is gone after that long. An idle connection costs a socket
 *     and a small buffer, not a thread;
 *   - requests: headers and URL within HEADER_BYTES (431 past it), GET and
 *     HEAD only, and a Host header naming this server: localhost or a 127.x
 *     address on loopback, the bound address or this machine's name
 *     otherwise; anything else (a DNS-rebinding page) gets 421;
 *   - event streams: at most MAX_PAGES pages, each with PAGE_BUFFER_BYTES of
 *     buffer in the hub and a fixed kernel send buffer; a page that stopped
 *     reading gives its place (and its buffer) to a new one, else the new
 *     one gets 503 and its script retries;
 *   - a stream is suspended while its buffer is empty and resumed by the hub
 *     when an event arrives: no thread waits per page.
 *
 * Nothing here is on the tracker's path: the tracker publishes on a socket
 * and never waits (docs/PROTOCOL.md); this process's view threads run at a
 * lower priority. */
#include "view.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kinreg/frame.h"
#include "kinreg/transport.h"
#include "view_address.h"
#include "view_assets.h"
#include "view_events.h"
#include "view_hub.h"

/* Per page: about two seconds of 100k-point model snapshots in base64 plus
 * the poses between them; beyond this a page drops events (and is told). */
#define PAGE_BUFFER_BYTES (4u << 20)
#define HISTORY_POSES 20000
/* Pages at once: their buffers together stay within 64 MiB. */
#define MAX_PAGES 16
/* Connections at once (pages, page loads, idle ones); lowered to fit the
 * open-file limit. */
#define MAX_CONNECTIONS 2048
/* Seconds without a byte in or out before a connection is closed. */
#define IDLE_SECONDS 10
/* Per connection: the request line and headers must fit (libmicrohttpd's
 * buffer for them, 431 beyond it). */
#define HEADER_BYTES (16u << 10)
/* The kernel's send buffer of an event stream (fixed: autotuning would
 * give a page that never reads megabytes of kernel memory). */
#define STREAM_SNDBUF (256 << 10)
/* File descriptors kept for everything else (the stream's sockets, the
 * tracker's files, libraries). */
#define FD_RESERVE 256

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
    struct sockaddr_in addr; /* bound */
    bool loopback;
    char hostname[256]; /* this machine's name, for a Host header beyond loopback */
    char who[32];
    atomic_ullong foreign_host; /* requests refused: their Host names another server */
    file_bytes three, orbit; /* three.min.js and OrbitControls.js from libjs-three */
};

/* A whole file, if it is a regular one of at most 64 MiB (a named pipe
 * would hang the start, a device never end). */
static file_bytes read_file(const char *path)
{
    file_bytes f = {NULL, 0};
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return f;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0 || sb.st_size > (64 << 20) ||
        !(f.data = malloc((size_t)sb.st_size))) {
        close(fd);
        return f;
    }
    size_t n = (size_t)sb.st_size;
    while (f.len < n) {
        ssize_t r = read(fd, f.data + f.len, n - f.len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        f.len += (size_t)r;
    }
    close(fd);
    if (f.len != n) {
        free(f.data);
        f.data = NULL;
        f.len = 0;
    }
    return f;
}

/* The view's threads yield to the tracker's on a busy machine (Linux: a
 * thread's nice value is its own). */
static void lower_priority(void)
{
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), 5);
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
    case KR_TOPIC_DEPTH: {
        /* Likewise the depth thumbnail, which the page draws. */
        static uint8_t record[KR_WIRE_DEPTH_HEADER_SIZE + 2 * KR_WIRE_DEPTH_MAX_SAMPLES];
        n = kr_view_base64(record, kr_wire_encode_depth(&m->depth, record), buf);
        kr_view_hub_broadcast(v->hub, "depth", buf, n);
        break;
    }
    case KR_TOPIC_MESH: {
        /* And a chunk of the surface, which the page draws as triangles. */
        static uint8_t record[KR_WIRE_MAX_MESSAGE];
        size_t h = kr_wire_encode_mesh_header(&m->mesh, record);
        size_t vn = (size_t)m->mesh.vertices * KR_WIRE_MESH_VERTEX_SIZE;
        size_t fn = (size_t)m->mesh.faces * KR_WIRE_MESH_FACE_SIZE;
        memcpy(record + h, m->mesh.vertex_bytes, vn);
        memcpy(record + h + vn, m->mesh.face_bytes, fn);
        n = kr_view_base64(record, h + vn + fn, buf);
        kr_view_hub_broadcast(v->hub, "mesh", buf, n);
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
    lower_priority();
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
    struct MHD_Connection *conn;
} sse_stream;

/* The hub's wake callback: data arrived for a suspended stream. */
static void sse_wake(void *conn)
{
    MHD_resume_connection(conn);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    sse_stream *s = cls;
    ssize_t n = kr_view_client_take(s->view->hub, s->client, buf, max);
    if (n < 0) return MHD_CONTENT_READER_END_OF_STREAM;
    if (n > 0) return n;
    /* Nothing to send: the connection sleeps until the hub has an event for
     * it (at least the hub's tick, once a second). */
    MHD_suspend_connection(s->conn);
    if (!kr_view_client_sleep(s->view->hub, s->client)) MHD_resume_connection(s->conn);
    return 0;
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
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (code == MHD_HTTP_SERVICE_UNAVAILABLE) MHD_add_response_header(r, "Retry-After", "2");
    enum MHD_Result ok = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ok;
}

/* Whether the Host header names this server (DNS rebinding: a page of
 * evil.example.com whose name now resolves to 127.0.0.1 must not read the
 * stream). Allowed: localhost or any 127.x address (and [::1]) on loopback;
 * beyond loopback also the bound address (any IPv4 address when bound to
 * 0.0.0.0) and this machine's name, with or without its domain. A port, if
 * given, must be the one served. No Host at all (HTTP/1.0; no browser) is
 * let through: libmicrohttpd refuses an HTTP/1.1 request without one. */
static bool host_allowed(const kr_view *v, const char *host)
{
    if (!host) return true;
    char name[256];
    const char *end = host + strlen(host);
    const char *port = NULL;
    if (host[0] == '[') { /* [v6]:port */
        const char *close = strchr(host, ']');
        if (!close) return false;
        port = close[1] == ':' ? close + 2 : close[1] ? end : NULL;
        if (port == end) return false;
        snprintf(name, sizeof name, "%.*s", (int)(close + 1 - host), host);
    } else {
        const char *colon = strrchr(host, ':');
        if (colon) port = colon + 1;
        size_t n = (size_t)((colon ? colon : end) - host);
        if (n == 0 || n >= sizeof name) return false;
        memcpy(name, host, n);
        name[n] = '\0';
    }
    if (port) {
        char *e;
        long p = strtol(port, &e, 10);
        if (e == port || *e || p != v->port) return false;
    } else if (v->port != 80) {
        return false;
    }
    struct in_addr a;
    bool is_ip = inet_pton(AF_INET, name, &a) == 1;
    if (!strcasecmp(name, "localhost") || !strcmp(name, "[::1]") ||
        (is_ip && (ntohl(a.s_addr) >> 24) == 127))
        return true;
    if (v->loopback) return false;
    if (is_ip)
        return v->addr.sin_addr.s_addr == htonl(INADDR_ANY) || a.s_addr == v->addr.sin_addr.s_addr;
    size_t hn = strlen(v->hostname);
    return hn && !strncasecmp(name, v->hostname, hn) && (name[hn] == '\0' || name[hn] == '.');
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)con_cls;
    kr_view *v = cls;
    static _Thread_local bool lowered;
    if (!lowered) {
        lower_priority();
        lowered = true;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        *upload_size = 0; /* a body is not read */
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9,
                     MHD_RESPMEM_PERSISTENT);
    }
    if (!host_allowed(v, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"))) {
        atomic_fetch_add(&v->foreign_host, 1);
        static const char foreign[] =
            "kinreg view: this server is not the host your address names; open it by its own "
            "address (http://127.0.0.1:PORT/ on this machine)\n";
        return reply(conn, MHD_HTTP_MISDIRECTED_REQUEST, "text/plain", foreign, sizeof foreign - 1,
                     MHD_RESPMEM_PERSISTENT);
    }
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
        s->conn = conn;
        bool full = false;
        s->client = kr_view_hub_join_full(v->hub, &full);
        if (!s->client) {
            free(s);
            if (!full) return MHD_NO;
            static const char busy[] = "kinreg view: as many pages as it serves are open and "
                                       "reading; close one, or try again\n";
            return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", busy, sizeof busy - 1,
                         MHD_RESPMEM_PERSISTENT);
        }
        kr_view_client_on_wake(v->hub, s->client, sse_wake, conn);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) {
            int sndbuf = STREAM_SNDBUF;
            (void)setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
        }
        /* Blocks of at most 16 KiB: the connection's buffer holds the chunk. */
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_read, s, sse_free);
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

/* libmicrohttpd's own messages (a request too large, a failed accept)
 * through kr_log, as debug lines: a client's mistakes are not the user's. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    kr_log(KR_LOG_DEBUG, "view: %s", msg);
}

/* Connections the open-file limit leaves room for: the soft limit is raised
 * toward the hard one as far as MAX_CONNECTIONS needs. */
static int connection_limit(const char *who)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 64;
    rlim_t want = MAX_CONNECTIONS + FD_RESERVE;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        struct rlimit up = rl;
        up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) rl = up;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want) return MAX_CONNECTIONS;
    int n = (int)rl.rlim_cur - FD_RESERVE;
    if (n < 16) n = 16;
    fprintf(stderr,
            "%s: the open-file limit (ulimit -n %llu) leaves the view room for %d connections at "
            "once instead of %d\n",
            who, (unsigned long long)rl.rlim_cur, n, MAX_CONNECTIONS);
    return n;
}

/* ---- start and stop ------------------------------------------------------ */

/* The listening socket is ours, so "in use" is told apart from other
 * failures and named with the port; libmicrohttpd takes it over. */
static int listen_on(const struct sockaddr_in *addr, const char *text, const char *option,
                     const char *who)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot create the view's socket: %s\n", who, strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)addr, sizeof *addr) != 0 || listen(fd, 512) != 0) {
        int err = errno;
        if (err == EADDRINUSE)
            fprintf(stderr,
                    "%s: the view's HTTP port %s is already in use: stop the program serving it or "
                    "choose another port (%s [ADDR:]PORT; 0 = any free port)\n",
                    who, text, option);
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
    atomic_init(&v->foreign_host, 0);
    snprintf(v->who, sizeof v->who, "%s", who);
    v->loopback = kr_view_is_loopback(&addr);
    if (gethostname(v->hostname, sizeof v->hostname) != 0) v->hostname[0] = '\0';
    v->hostname[sizeof v->hostname - 1] = '\0';
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
    kr_view_hub_limit(v->hub, MAX_PAGES);
    if (kr_subscriber_create(&v->sub, cfg->endpoint,
                             (1u << KR_TOPIC_POSE) | (1u << KR_TOPIC_STATUS) |
                                 (1u << KR_TOPIC_REFINE) | (1u << KR_TOPIC_MODEL) |
                                 (1u << KR_TOPIC_DEPTH) | (1u << KR_TOPIC_MESH)) != KR_OK) {
        fprintf(stderr, "%s: %s\n", who, kr_last_error());
        rc = 2;
        goto fail;
    }
    int fd = listen_on(&addr, http, cfg->http_option ? cfg->http_option : "--http", who);
    if (fd < 0) goto fail;
    struct sockaddr_in bound;
    socklen_t blen = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &blen);
    v->port = ntohs(bound.sin_port);
    v->addr = bound;
    unsigned max_conn = (unsigned)connection_limit(who);
    v->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                                 0, NULL, NULL, on_request, v, MHD_OPTION_LISTEN_SOCKET, fd,
                                 MHD_OPTION_CONNECTION_LIMIT, max_conn,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_SECONDS,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_BYTES,
                                 MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, v, MHD_OPTION_END);
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
    /* Every stream wakes and ends; a suspended connection is resumed here,
     * before the server stops (libmicrohttpd requires it). */
    if (v->hub) kr_view_hub_close(v->hub);
    if (v->daemon) MHD_stop_daemon(v->daemon);
    if (v->hub) {
        kr_view_hub_stats_t hs;
        kr_view_hub_stats(v->hub, &hs);
        unsigned long long foreign = atomic_load(&v->foreign_host);
        if (hs.refused || hs.evicted || foreign)
            fprintf(stderr,
                    "%s: the view refused %llu pages (%d at once at most), ended %llu that "
                    "stopped reading and refused %llu requests naming another host\n",
                    v->who, (unsigned long long)hs.refused, MAX_PAGES,
                    (unsigned long long)hs.evicted, foreign);
    }
    kr_subscriber_destroy(&v->sub);
    kr_view_hub_destroy(&v->hub);
    free(v->three.data);
    free(v->orbit.data);
    free(v);
    *vp = NULL;
}
