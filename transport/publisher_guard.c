/* Guard thread of a publisher (see publisher_guard.h).
 *
 * ZeroMQ offers no per-connection limit and no way to close one peer of a
 * socket. It does report each accepted connection's file descriptor through
 * a socket monitor; shutting that descriptor down makes ZeroMQ's I/O thread
 * see the peer hang up and close it, with its subscriptions. The guard reads
 * the monitor on its own thread so that a burst of connections is answered
 * within one poll, not at the next published frame. */
#include "publisher_guard.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
/* The thread looks at its stop flag this often. */
#define POLL_MS 50

struct kr_pub_guard {
    void *monitor, *zap; /* PAIR reading the monitor events; REP of the ZAP handler or NULL */
    pthread_t thread;
    atomic_bool stop, drop_all;
    atomic_int port;
    int max_connections;
    int *fds; /* accepted connections being kept, at most max_connections */
    atomic_int connections;
    char (*allow)[KR_CURVE_KEY_LEN + 1];
    size_t allow_count;
    /* Refused clients already said (address and key), so that one
     * subscriber retrying is one line, not one a handshake. */
    char said[16][KR_CURVE_KEY_LEN + 48];
    int said_count;
    atomic_ullong refused, denied, resets;
};

/* The descriptor is still a connection of our listener (not a descriptor
 * number the kernel has since given to something else). */
static bool is_our_connection(const kr_pub_guard *g, int fd)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0) return false;
    int port = atomic_load(&g->port);
    if (a.ss_family == AF_UNIX) return true;
    if (a.ss_family == AF_INET) return !port || ntohs(((struct sockaddr_in *)&a)->sin_port) == port;
    if (a.ss_family == AF_INET6)
        return !port || ntohs(((struct sockaddr_in6 *)&a)->sin6_port) == port;
    return false;
}

static void refuse(kr_pub_guard *g, int fd)
{
    if (is_our_connection(g, fd)) shutdown(fd, SHUT_RDWR);
}

static void on_accepted(kr_pub_guard *g, int fd)
{
    int n = atomic_load(&g->connections);
    if (n >= g->max_connections) {
        atomic_fetch_add(&g->refused, 1);
        refuse(g, fd);
        return;
    }
    g->fds[n] = fd;
    atomic_store(&g->connections, n + 1);
}

static void on_disconnected(kr_pub_guard *g, int fd)
{
    int n = atomic_load(&g->connections);
    for (int i = 0; i < n; i++)
        if (g->fds[i] == fd) {
            g->fds[i] = g->fds[n - 1];
            atomic_store(&g->connections, n - 1);
            return;
        }
}

/* One monitor event: a 6-byte frame (u16 event, u32 value: the descriptor
 * for these two events, in host order) and the endpoint. */
static void read_monitor(kr_pub_guard *g)
{
    uint8_t head[6];
    int n = zmq_recv(g->monitor, head, sizeof head, ZMQ_DONTWAIT);
    if (n < 0) return;
    int more = 0;
    size_t len = sizeof more;
    while (zmq_getsockopt(g->monitor, ZMQ_RCVMORE, &more, &len) == 0 && more) {
        char skip[8];
        zmq_recv(g->monitor, skip, sizeof skip, 0);
    }
    if (n != 6) return;
    uint16_t event;
    uint32_t value;
    memcpy(&event, head, 2);
    memcpy(&value, head + 2, 4);
    if (event == ZMQ_EVENT_ACCEPTED)
        on_accepted(g, (int)value);
    else if (event == ZMQ_EVENT_DISCONNECTED)
        on_disconnected(g, (int)value);
}

static bool allowed(const kr_pub_guard *g, const uint8_t *key, size_t n)
{
    if (n != 32) return false;
    char z85[KR_CURVE_KEY_LEN + 1];
    if (!zmq_z85_encode(z85, key, 32)) return false;
    for (size_t i = 0; i < g->allow_count; i++)
        if (!strcmp(g->allow[i], z85)) return true;
    return false;
}

/* A refused client is counted and said once (the publisher used to refuse
 * in silence, and the subscriber saw only that nothing came): its address
 * and CURVE public key, and what lets it in. Past 16 different clients, only
 * every power of two of the count is said. */
static void say_denied(kr_pub_guard *g, bool curve, zmq_msg_t *address, zmq_msg_t *key)
{
    unsigned long long n = atomic_fetch_add(&g->denied, 1) + 1;
    char addr[40] = "?", z85[KR_CURVE_KEY_LEN + 1] = "";
    if (address) {
        size_t an =
            zmq_msg_size(address) < sizeof addr - 1 ? zmq_msg_size(address) : sizeof addr - 1;
        memcpy(addr, zmq_msg_data(address), an);
        addr[an] = '\0';
    }
    if (curve && key && zmq_msg_size(key) == 32) zmq_z85_encode(z85, zmq_msg_data(key), 32);
    char who[sizeof g->said[0]];
    snprintf(who, sizeof who, "%s %s", addr, z85);
    for (int i = 0; i < g->said_count; i++)
        if (!strcmp(g->said[i], who)) return;
    if (g->said_count < (int)(sizeof g->said / sizeof g->said[0])) {
        memcpy(g->said[g->said_count++], who, sizeof who);
    } else if (n & (n - 1)) {
        return;
    }
    if (z85[0])
        kr_log(KR_LOG_WARN,
               "publisher: refused a subscriber from %s: its CURVE public key %s is not on the "
               "allow-list (add its NAME.key to the --curve-allow file and restart to let it in; "
               "%llu refused so far)",
               addr, z85, n);
    else
        kr_log(KR_LOG_WARN,
               "publisher: refused a subscriber from %s: it does not use CURVE (it needs "
               "--curve-server and --curve-secret; %llu refused so far)",
               addr, n);
}

/* One ZAP request (RFC 27): version, request id, domain, address, identity,
 * mechanism, credentials. The reply admits a CURVE client whose public key
 * is on the allow-list and nothing else. */
static void answer_zap(kr_pub_guard *g)
{
    enum { FRAMES = 8 };
    zmq_msg_t f[FRAMES];
    int count = 0;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, g->zap, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        bool more = zmq_msg_more(&m);
        if (count < FRAMES)
            f[count++] = m;
        else
            zmq_msg_close(&m);
        if (!more) break;
    }
    if (count == 0) return;
    bool curve = count >= 7 && zmq_msg_size(&f[5]) == 5 && !memcmp(zmq_msg_data(&f[5]), "CURVE", 5);
    bool ok = curve && allowed(g, zmq_msg_data(&f[6]), zmq_msg_size(&f[6]));
    if (!ok) say_denied(g, curve, count > 3 ? &f[3] : NULL, count > 6 ? &f[6] : NULL);
    const char *code = ok ? "200" : "400";
    const char *text = ok ? "OK" : "public key not on the allow-list";
    zmq_send(g->zap, "1.0", 3, ZMQ_SNDMORE);
    if (count >= 2)
        zmq_send(g->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
    else
        zmq_send(g->zap, "", 0, ZMQ_SNDMORE);
    zmq_send(g->zap, code, 3, ZMQ_SNDMORE);
    zmq_send(g->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(g->zap, "", 0, ZMQ_SNDMORE); /* user id */
    zmq_send(g->zap, "", 0, 0);           /* metadata */
    for (int i = 0; i < count; i++)
        zmq_msg_close(&f[i]);
}

static void drop_every_connection(kr_pub_guard *g)
{
    int n = atomic_load(&g->connections);
    for (int i = 0; i < n; i++)
        refuse(g, g->fds[i]);
    atomic_fetch_add(&g->resets, 1);
    /* Their DISCONNECTED events remove them from the list. */
}

static void *guard_main(void *arg)
{
    kr_pub_guard *g = arg;
    while (!atomic_load(&g->stop)) {
        zmq_pollitem_t items[2] = {{g->monitor, 0, ZMQ_POLLIN, 0}, {g->zap, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(items, g->zap ? 2 : 1, POLL_MS);
        if (n < 0 && errno == ETERM) break;
        if (n > 0 && (items[0].revents & ZMQ_POLLIN)) read_monitor(g);
        if (n > 0 && g->zap && (items[1].revents & ZMQ_POLLIN)) answer_zap(g);
        if (atomic_exchange(&g->drop_all, false)) drop_every_connection(g);
    }
    return NULL;
}

static void close_sockets(kr_pub_guard *g)
{
    int zero = 0;
    if (g->monitor) {
        zmq_setsockopt(g->monitor, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(g->monitor);
    }
    if (g->zap) {
        zmq_setsockopt(g->zap, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(g->zap);
    }
    free(g->fds);
    free(g->allow);
    free(g);
}

kr_status kr_pub_guard_start(kr_pub_guard **out, void *ctx, void *sock, bool curve,
                             const char *const *allow, size_t allow_count, int max_connections)
{
    kr_pub_guard *g = calloc(1, sizeof *g);
    if (!g) return kr_error(KR_ERR_NOMEM, "cannot allocate the publisher guard");
    g->max_connections = max_connections;
    g->fds = calloc((size_t)max_connections, sizeof *g->fds);
    g->allow = allow_count ? calloc(allow_count, sizeof *g->allow) : NULL;
    if (!g->fds || (allow_count && !g->allow)) {
        close_sockets(g);
        return kr_error(KR_ERR_NOMEM, "cannot allocate the publisher guard");
    }
    for (size_t i = 0; i < allow_count; i++)
        snprintf(g->allow[i], sizeof g->allow[i], "%s", allow[i]);
    g->allow_count = allow_count;

    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "inproc://kinreg-monitor-%p", (void *)g);
    g->monitor = zmq_socket(ctx, ZMQ_PAIR);
    if (!g->monitor ||
        zmq_socket_monitor(sock, endpoint, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0 ||
        zmq_connect(g->monitor, endpoint) != 0) {
        kr_status st = kr_error(KR_ERR_TRANSPORT, "cannot monitor the publisher's connections: %s",
                                zmq_strerror(errno));
        close_sockets(g);
        return st;
    }
    if (curve) {
        g->zap = zmq_socket(ctx, ZMQ_REP);
        if (!g->zap || zmq_bind(g->zap, ZAP_ENDPOINT) != 0) {
            kr_status st =
                kr_error(KR_ERR_TRANSPORT, "cannot start the CURVE authentication handler: %s",
                         zmq_strerror(errno));
            close_sockets(g);
            return st;
        }
    }
    if (pthread_create(&g->thread, NULL, guard_main, g) != 0) {
        close_sockets(g);
        return kr_error(KR_ERR_NOMEM, "cannot start the publisher guard thread");
    }
    *out = g;
    return KR_OK;
}

void kr_pub_guard_set_port(kr_pub_guard *g, int port)
{
    if (g) atomic_store(&g->port, port);
}

void kr_pub_guard_drop_all(kr_pub_guard *g)
{
    if (g) atomic_store(&g->drop_all, true);
}

void kr_pub_guard_get(const kr_pub_guard *g, kr_publisher_guard_stats *out)
{
    if (!g) return;
    kr_pub_guard *m = (kr_pub_guard *)g; /* atomics are read, never changed */
    out->connections_refused = atomic_load(&m->refused);
    out->clients_denied = atomic_load(&m->denied);
    out->subscription_resets = atomic_load(&m->resets);
    out->connections = atomic_load(&m->connections);
    out->max_connections = g->max_connections;
}

void kr_pub_guard_stop(kr_pub_guard **gp)
{
    if (!gp || !*gp) return;
    kr_pub_guard *g = *gp;
    atomic_store(&g->stop, true);
    pthread_join(g->thread, NULL);
    close_sockets(g);
    *gp = NULL;
}
