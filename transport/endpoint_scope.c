/* Whether a bind endpoint can be reached from other hosts: the publisher warns
 * before it sends plain-text poses to anyone on the network. */
#include "kinreg/transport.h"

#include <string.h>

/* The host part of "tcp://HOST:PORT" is loopback: 127.0.0.0/8, ::1, or the
 * names ZeroMQ resolves to them (localhost, the interface lo). */
static bool loopback_host(const char *host, size_t n)
{
    static const char *const names[] = {"localhost", "lo", "[::1]", "::1"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && !strncmp(host, names[i], n)) return true;
    return n > 4 && !strncmp(host, "127.", 4);
}

bool kr_endpoint_is_public(const char *endpoint)
{
    if (!endpoint || !*endpoint) return false;
    if (!strncmp(endpoint, "ipc://", 6) || !strncmp(endpoint, "inproc://", 9)) return false;
    if (strncmp(endpoint, "tcp://", 6) != 0) return true; /* pgm, ws, tipc, ...: a network */
    const char *host = endpoint + 6;
    const char *colon = strrchr(host, ':');
    size_t n = colon ? (size_t)(colon - host) : strlen(host);
    return !loopback_host(host, n);
}
