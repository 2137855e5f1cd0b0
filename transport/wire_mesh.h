/* What the publisher writes into a packed mesh's chunks as it sends them
 * (transport/wire_mesh.c). Internal header. */
#ifndef KINREG_TRANSPORT_WIRE_MESH_H
#define KINREG_TRANSPORT_WIRE_MESH_H

#include <stdint.h>

/* Sets a packed chunk's sequence number and snapshot number. */
void kr_wire_mesh_stamp(uint8_t *chunk, uint64_t seq, uint64_t snapshot);

#endif
