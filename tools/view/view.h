/* The live view (`kinreg view ENDPOINT`, `kinreg run --view [ADDR:]PORT`): an
 * HTTP server (libmicrohttpd) that subscribes to a pose stream and serves one
 * page, fed over Server-Sent Events. The page and its script are files under
 * tools/view/, embedded into the program at build time; three.js comes from
 * Debian's libjs-three on this machine (docs/PROTOCOL.md, docs/guide/live-scanning.md). */
#ifndef KINREG_TOOLS_VIEW_VIEW_H
#define KINREG_TOOLS_VIEW_VIEW_H

#include <stdbool.h>

typedef struct kr_view kr_view;

typedef struct {
    const char *endpoint; /* the pose stream to subscribe to, e.g. tcp://127.0.0.1:5555 */
    const char *http; /* [ADDR:]PORT to serve on; ADDR defaults to 127.0.0.1, PORT 0 = any free */
    bool public_bind; /* an ADDR other than loopback is allowed only with this (--view-public) */
    const char *three_dir; /* libjs-three's folder (default /usr/share/javascript/three) */
    const char *http_option; /* the option that gave `http`, for messages (default "--http") */
} kr_view_config;

/* Starts the server and the stream subscription; prints the page's address
 * on stderr prefixed with `who`. On failure prints one line naming the cause
 * and returns the exit code (2 for a bad address, 1 otherwise); 0 on success. */
int kr_view_start(kr_view **out, const kr_view_config *cfg, const char *who);
/* Ends every page's stream, stops the server and frees everything. */
void kr_view_stop(kr_view **view);
/* Port actually bound (useful with PORT 0). */
int kr_view_port(const kr_view *view);

#endif
