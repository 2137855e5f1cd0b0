/* The publisher's guard thread: the ZAP handler that admits only allowed
 * CURVE keys, and the connection counter that closes connections past the
 * limit before they can use up the process's file descriptors. */
#ifndef KINREG_TRANSPORT_PUBLISHER_GUARD_H
#define KINREG_TRANSPORT_PUBLISHER_GUARD_H

#include "kinreg/transport.h"

typedef struct kr_pub_guard kr_pub_guard;

/* Starts the guard for `sock` (an XPUB in `ctx`, not yet bound): a socket
 * monitor for accepted and closed connections and, when allow_count > 0
 * or curve is on, a ZAP handler on inproc://zeromq.zap.01 in ctx. Must run
 * before zmq_bind so that no connection escapes either. The guard copies
 * the allow-list. */
kr_status kr_pub_guard_start(kr_pub_guard **out, void *ctx, void *sock, bool curve,
                             const char *const *allow, size_t allow_count, int max_connections);
/* The port the socket bound (tcp), so that only its connections are closed. */
void kr_pub_guard_set_port(kr_pub_guard *g, int port);
/* Asks the guard thread to close every connection (thread-safe). */
void kr_pub_guard_drop_all(kr_pub_guard *g);
void kr_pub_guard_get(const kr_pub_guard *g, kr_publisher_guard_stats *out);
/* Stops the thread and closes its sockets (call before zmq_ctx_term). */
void kr_pub_guard_stop(kr_pub_guard **g);

#endif
