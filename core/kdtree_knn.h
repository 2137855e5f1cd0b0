/* The k nearest neighbours, and the nearest one within a distance, of a
 * point in the model k-d tree (core/kdtree_layout.h), written once as KR_HD
 * for the host (core/kdtree.c: kr_kdtree_knn, kr_kdtree_nearest_cell_within)
 * and the device (pipeline/refine/refine_fields_cuda.cu,
 * pipeline/refine/refine_fit_cuda.cu): depth first, near child first. The products that decide
 * which neighbour is nearer go through KR_MUL (no FMA on the device), so both engines find the same
 * neighbours. */
#ifndef KINREG_CORE_KDTREE_KNN_H
#define KINREG_CORE_KDTREE_KNN_H

#include <math.h>
#include <stdint.h>

#include "core/kdtree_layout.h"
#include "core/kr_hd.h"

/* The largest k of kr_kdtree_knn_hd (the host's kr_kdtree_knn caps k there too). */
#define KR_KDTREE_KNN_MAX 64

/* Squared distance from q to a cell's point. */
static inline KR_HD float kr_kdtree_cell_dist2(const kr_kdtree_cell *c, const float q[3])
{
    float dx = q[0] - c->s[0], dy = q[1] - c->s[1], dz = q[2] - c->s[2];
    return KR_MUL(dx, dx) + KR_MUL(dy, dy) + KR_MUL(dz, dz);
}

/* The k (1 ≤ k ≤ KR_KDTREE_KNN_MAX, ≤ the tree's size) nearest cells of q:
 * bc[0 … found) cell indices and bd their squared distances, ascending.
 * Depth-first search, near child first; the stack holds the far siblings of
 * the current path (at most the tree depth, < 33 for 32-bit sizes) with the
 * squared distance to their split plane as a lower bound. Returns found. */
static inline KR_HD int kr_kdtree_knn_hd(const kr_kdtree_node *nodes, uint32_t n_internal,
                                         const kr_kdtree_cell *cells, const float q[3], int k,
                                         float *bd, uint32_t *bc)
{
    struct {
        uint32_t node;
        float bound;
    } stack[64];
    int sp = 0, found = 0;
    uint32_t node = 0;
    for (;;) {
        while (node < n_internal) {
            kr_kdtree_node nd = nodes[node];
            float diff = q[nd.axis] - nd.split;
            stack[sp].node = diff >= 0 ? 2 * node + 1 : 2 * node + 2;
            stack[sp].bound = KR_MUL(diff, diff);
            sp++;
            node = diff >= 0 ? 2 * node + 2 : 2 * node + 1;
        }
        uint32_t cell = node - n_internal;
        float dd = kr_kdtree_cell_dist2(&cells[cell], q);
        if (found < k || dd < bd[found - 1]) {
            int j = found < k ? found++ : k - 1;
            while (j > 0 && bd[j - 1] > dd) {
                bd[j] = bd[j - 1];
                bc[j] = bc[j - 1];
                j--;
            }
            bd[j] = dd;
            bc[j] = cell;
        }
        float bound = found < k ? INFINITY : bd[k - 1];
        while (sp > 0 && stack[sp - 1].bound >= bound)
            sp--;
        if (sp == 0) break;
        node = stack[--sp].node;
    }
    return found;
}

/* The nearest cell of q closer than sqrt(max_dist2) (*dist2 its squared
 * distance), or UINT32_MAX with *dist2 = max_dist2 when none is.
 * Depth-first search, near child first. The stack holds the far siblings of
 * the current path (at most the tree depth, < 33 for 32-bit sizes) with the
 * squared distance to their split plane as a lower bound: every point of the
 * far side lies at least that far from q along the split axis. Starting
 * from the bound prunes every subtree beyond it: a query far from the cloud
 * visits a few cells instead of most of the tree. */
static inline KR_HD uint32_t kr_kdtree_nearest_within_hd(const kr_kdtree_node *nodes,
                                                         uint32_t n_internal,
                                                         const kr_kdtree_cell *cells,
                                                         const float q[3], float max_dist2,
                                                         float *dist2)
{
    struct {
        uint32_t node;
        float bound;
    } stack[64];
    int sp = 0;
    float best = max_dist2;
    uint32_t best_cell = UINT32_MAX, node = 0;
    for (;;) {
        while (node < n_internal) {
            kr_kdtree_node nd = nodes[node];
            float diff = q[nd.axis] - nd.split;
            uint32_t near = 2 * node + 1 + (uint32_t)(diff >= 0);
            stack[sp].node = 4 * node + 3 - near; /* the sibling: children sum to 4i + 3 */
            stack[sp].bound = KR_MUL(diff, diff);
            sp++;
            node = near;
        }
        uint32_t cell = node - n_internal;
        float d2 = kr_kdtree_cell_dist2(&cells[cell], q);
        if (d2 < best) {
            best = d2;
            best_cell = cell;
        }
        while (sp > 0 && stack[sp - 1].bound >= best)
            sp--;
        if (sp == 0) break;
        node = stack[--sp].node;
    }
    *dist2 = best;
    return best_cell;
}

#endif
