/* The page's event data (Server-Sent Events, one line each): poses and
 * statuses as JSON with the field names of `kinreg sub --format json`
 * (doubles round-trip exact), model chunks as base64 of the wire record
 * itself (docs/PROTOCOL.md), which the page decodes with a DataView. */
#ifndef KINREG_TOOLS_VIEW_VIEW_EVENTS_H
#define KINREG_TOOLS_VIEW_VIEW_EVENTS_H

#include <stddef.h>

#include "kinreg/transport.h"

/* Each returns the length written (always < cap; cap >= 1024 is enough). */
size_t kr_view_pose_json(const kr_pose_msg *p, uint64_t gap, char *out, size_t cap);
size_t kr_view_status_json(const kr_status_msg *s, uint64_t gap, char *out, size_t cap);
/* Standard base64 (RFC 4648, with padding); out needs 4 * ceil(n / 3) + 1 bytes. */
size_t kr_view_base64(const uint8_t *in, size_t n, char *out);

#endif
