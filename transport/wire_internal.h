/* What the wire's encoders and the publisher share (transport/wire_model.c,
 * wire_mesh.c, publisher.c). Internal header. */
#ifndef KINREG_TRANSPORT_WIRE_INTERNAL_H
#define KINREG_TRANSPORT_WIRE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* One quantisation grid for a snapshot's n points (3 floats each): origin
 * the bounding box's minimum, scale its longest side over 65535 steps
 * (non-finite coordinates are left out, and clamped by the packer). */
void kr_wire_grid_of(const float *xyz, size_t n, float origin[3], float *scale);

/* Sets a packed mesh chunk's sequence number and snapshot number. */
void kr_wire_mesh_stamp(uint8_t *chunk, uint64_t seq, uint64_t snapshot);

#endif
