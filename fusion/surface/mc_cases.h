/* The marching-cubes case table, derived rather than typed in.
 *
 * A cube's corners are numbered by their offsets: corner i sits at
 * (i & 1, i >> 1 & 1, i >> 2 & 1). Its 12 edges join corners that differ in
 * one bit; edge 4k + j runs along axis k from the j-th corner (in increasing
 * number) whose bit k is 0. A case is the 8-bit mask of the corners inside
 * (field value < 0).
 *
 * The triangles of a case come from the cube's six faces. On a face the
 * edges whose corners disagree are cut: two of them give one segment joining
 * them; four of them (diagonal corners alike, the ambiguous face) give two
 * segments, each cutting off one inside corner. The rule looks at the face's
 * corners alone, so the two cubes that share a face cut it alike and the
 * surface has no cracks. Every cut edge lies on two faces, so the segments
 * close into loops; each loop is a polygon, turned so that its normal (by
 * Newell's formula on the edge midpoints) points from the inside corners to
 * the outside ones, and split into a fan of triangles, counter-clockwise seen
 * from outside. The result is the classic table's surface with one fixed
 * choice on ambiguous faces — watertight and consistently oriented, which
 * tests/test_surface.c checks on a sphere. */
#ifndef KINREG_FUSION_SURFACE_MC_CASES_H
#define KINREG_FUSION_SURFACE_MC_CASES_H

#include <stdint.h>

#include "core/kr_hd.h"

/* A case cuts at most 12 edges, and a loop of n cut edges makes n - 2
 * triangles: at most 10 per case. */
#define KR_MC_MAX_TRIANGLES 10

typedef struct {
    uint8_t triangles[256];                     /* triangles of each case */
    int8_t edges[256][3 * KR_MC_MAX_TRIANGLES]; /* their corners' edges, 3 per triangle */
    uint8_t edge_corner[12][2];                 /* the two corners of each edge, low first */
    uint8_t edge_axis[12];                      /* the axis the edge runs along */
} kr_mc_table;

/* The table, built on first use (thread-safe). */
#ifdef __cplusplus
extern "C" {
#endif
const kr_mc_table *kr_mc_table_get(void);
#ifdef __cplusplus
}
#endif

/* The case of a cube from its corner values (inside: value < 0). */
static inline KR_HD unsigned kr_mc_case(const float value[8])
{
    unsigned c = 0;
    for (int i = 0; i < 8; i++)
        c |= (unsigned)(value[i] < 0.0f) << i;
    return c;
}

#endif
