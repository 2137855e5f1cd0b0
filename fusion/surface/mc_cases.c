/* The marching-cubes case table from the cube's faces (mc_cases.h says how). */
#include "fusion/surface/mc_cases.h"

#include <pthread.h>
#include <string.h>

static kr_mc_table table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static int corner_bit(int corner, int axis)
{
    return corner >> axis & 1;
}

/* The edge joining corners a and b (which differ in one bit), or -1. */
static int edge_between(int a, int b)
{
    for (int e = 0; e < 12; e++) {
        const uint8_t *c = table.edge_corner[e];
        if ((c[0] == a && c[1] == b) || (c[0] == b && c[1] == a)) return e;
    }
    return -1;
}

static void list_edges(void)
{
    for (int axis = 0; axis < 3; axis++) {
        int j = 0;
        for (int c = 0; c < 8; c++) {
            if (corner_bit(c, axis)) continue;
            int e = 4 * axis + j++;
            table.edge_corner[e][0] = (uint8_t)c;
            table.edge_corner[e][1] = (uint8_t)(c | 1 << axis);
            table.edge_axis[e] = (uint8_t)axis;
        }
    }
}

/* The four corners of face (axis, side) in cyclic order. */
static void face_corners(int axis, int side, int q[4])
{
    int a1 = (axis + 1) % 3, a2 = (axis + 2) % 3;
    static const int ring[4][2] = {{0, 0}, {1, 0}, {1, 1}, {0, 1}};
    for (int k = 0; k < 4; k++)
        q[k] = side << axis | ring[k][0] << a1 | ring[k][1] << a2;
}

static void link(int next[12][2], int e, int f)
{
    next[e][next[e][0] < 0 ? 0 : 1] = f;
    next[f][next[f][0] < 0 ? 0 : 1] = e;
}

static void midpoint(int e, double p[3])
{
    for (int k = 0; k < 3; k++)
        p[k] =
            0.5 * (corner_bit(table.edge_corner[e][0], k) + corner_bit(table.edge_corner[e][1], k));
}

/* Turns `loop` so that its Newell normal points from its edges' inside
 * corners to their outside ones. */
static void orient(int *loop, int n, unsigned inside)
{
    double normal[3] = {0, 0, 0}, out[3] = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        double p[3], q[3];
        midpoint(loop[i], p);
        midpoint(loop[(i + 1) % n], q);
        normal[0] += (p[1] - q[1]) * (p[2] + q[2]);
        normal[1] += (p[2] - q[2]) * (p[0] + q[0]);
        normal[2] += (p[0] - q[0]) * (p[1] + q[1]);
        const uint8_t *c = table.edge_corner[loop[i]];
        int in = inside >> c[0] & 1 ? c[0] : c[1], o = in == c[0] ? c[1] : c[0];
        for (int k = 0; k < 3; k++)
            out[k] += corner_bit(o, k) - corner_bit(in, k);
    }
    if (normal[0] * out[0] + normal[1] * out[1] + normal[2] * out[2] >= 0) return;
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        int t = loop[i];
        loop[i] = loop[j];
        loop[j] = t;
    }
}

static void build_case(unsigned inside)
{
    int next[12][2];
    memset(next, -1, sizeof next);
    for (int axis = 0; axis < 3; axis++) {
        for (int side = 0; side < 2; side++) {
            int q[4], cut[4], n = 0;
            face_corners(axis, side, q);
            for (int k = 0; k < 4; k++)
                if ((inside >> q[k] & 1) != (inside >> q[(k + 1) % 4] & 1))
                    cut[n++] = edge_between(q[k], q[(k + 1) % 4]);
            if (n == 2) link(next, cut[0], cut[1]);
            if (n == 4) {
                /* The ambiguous face: cut off each inside corner q[k], whose
                 * edges are (q[k-1], q[k]) and (q[k], q[k+1]). */
                for (int k = 0; k < 4; k++)
                    if (inside >> q[k] & 1)
                        link(next, edge_between(q[(k + 3) % 4], q[k]),
                             edge_between(q[k], q[(k + 1) % 4]));
            }
        }
    }
    int done[12] = {0}, t = 0;
    for (int start = 0; start < 12; start++) {
        if (next[start][0] < 0 || done[start]) continue;
        int loop[12], n = 0, prev = -1, e = start;
        do {
            loop[n++] = e;
            done[e] = 1;
            int f = next[e][0] != prev ? next[e][0] : next[e][1];
            prev = e;
            e = f;
        } while (e != start);
        orient(loop, n, inside);
        for (int i = 1; i + 1 < n; i++, t++) {
            table.edges[inside][3 * t] = (int8_t)loop[0];
            table.edges[inside][3 * t + 1] = (int8_t)loop[i];
            table.edges[inside][3 * t + 2] = (int8_t)loop[i + 1];
        }
    }
    table.triangles[inside] = (uint8_t)t;
}

static void build(void)
{
    list_edges();
    for (unsigned c = 0; c < 256; c++)
        build_case(c);
}

const kr_mc_table *kr_mc_table_get(void)
{
    pthread_once(&table_once, build);
    return &table;
}
