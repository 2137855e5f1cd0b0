/* Parsing of the view's [ADDR:]PORT (IPv4; "localhost" and "*" accepted). */
#ifndef KINREG_TOOLS_VIEW_VIEW_ADDRESS_H
#define KINREG_TOOLS_VIEW_VIEW_ADDRESS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

/* 0, or -1 with the reason in `why`. ADDR defaults to 127.0.0.1. */
int kr_view_parse_address(const char *text, struct sockaddr_in *out, char *why, size_t why_size);
bool kr_view_is_loopback(const struct sockaddr_in *addr);

#endif
