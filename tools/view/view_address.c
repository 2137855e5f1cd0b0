/* [ADDR:]PORT for the view's HTTP server (tools/view/view_address.h). */
#include "view_address.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kr_view_parse_address(const char *text, struct sockaddr_in *out, char *why, size_t why_size)
{
    char host[64] = "127.0.0.1";
    const char *port = text;
    const char *colon = strrchr(text, ':');
    if (colon) {
        size_t n = (size_t)(colon - text);
        if (n == 0 || n >= sizeof host) {
            snprintf(why, why_size, "'%s' has no usable address before the ':'", text);
            return -1;
        }
        memcpy(host, text, n);
        host[n] = '\0';
        port = colon + 1;
    }
    if (!strcmp(host, "localhost")) snprintf(host, sizeof host, "127.0.0.1");
    if (!strcmp(host, "*")) snprintf(host, sizeof host, "0.0.0.0");
    char *end;
    errno = 0;
    long p = *port >= '0' && *port <= '9' ? strtol(port, &end, 10) : -1;
    if (p < 0 || p > 65535 || errno || *end) {
        snprintf(why, why_size, "port '%s' must be 0..65535 (0 = any free port)", port);
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)p);
    if (inet_pton(AF_INET, host, &out->sin_addr) != 1) {
        snprintf(why, why_size, "'%s' is not an IPv4 address (e.g. 127.0.0.1, 0.0.0.0 or *)", host);
        return -1;
    }
    return 0;
}

bool kr_view_is_loopback(const struct sockaddr_in *addr)
{
    return (ntohl(addr->sin_addr.s_addr) >> 24) == 127;
}
