/* The `mesh` topic (issue 34; docs/PROTOCOL.md, "Mesh record"): a chunk's
 * bytes at the documented offsets; a mesh too large for one message packed
 * into chunks that each stand alone and together give back every triangle
 * (its corners' positions within half a quantum, normals within the
 * octahedral map's degree, colours exact); what decoders and the packer
 * refuse; and chunks over real sockets, numbered by the publisher. The
 * pipeline's own refreshes are checked against the synthetic scene in
 * test_surface.c (run_publishes_and_writes_the_tracked_surface). */
#include "kr_test.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "kinreg/frame.h"
#include "kinreg/transport.h"

KR_TEST(meshtopic, chunk_bytes_at_documented_offsets)
{
    /* One triangle, its corners 1 m apart along x, y and z from the origin. */
    const float xyz[9] = {0, 0, 0, 1, 0, 0, 0, 0, 1};
    const float nrm[9] = {0, 0, 1, 0, 0, 1, 0, 0, -1};
    const uint8_t rgb[9] = {10, 20, 30, 40, 50, 60, 70, 80, 90};
    const uint32_t tri[3] = {0, 1, 2};
    kr_wire_mesh_packed p;
    REQUIRE_OK(kr_wire_pack_mesh(xyz, nrm, rgb, 3, tri, 1, 42, &p));
    CHECK_EQ(p.chunks, 1);
    CHECK_EQ(p.faces, 1);
    CHECK_EQ(p.vertices, 3);
    const uint8_t *b = p.bytes;
    size_t n = p.offsets[1] - p.offsets[0];
    CHECK_EQ(n, 64 + 3 * 12 + 6);
    CHECK_EQ(kr_wire_mesh_size(3, 1), n);
    CHECK(memcmp(b, "KRMS", 4) == 0);
    CHECK_EQ(kr_le(b + 4, 2), KR_WIRE_VERSION);
    CHECK_EQ(kr_le(b + 6, 2), 7); /* kind: mesh */
    CHECK_EQ(kr_le(b + 24, 8), 42);
    CHECK_EQ(kr_le(b + 32, 4), 1); /* total faces */
    CHECK_EQ(kr_le(b + 36, 4), 0); /* first face */
    CHECK_EQ(kr_le(b + 40, 2), 3); /* vertices */
    CHECK_EQ(kr_le(b + 42, 2), 1); /* faces */
    CHECK_EQ(kr_le(b + 44, 2), 0); /* chunk */
    CHECK_EQ(kr_le(b + 46, 2), 1); /* chunks */
    float origin[4];
    memcpy(origin, b + 48, 16); /* the test machine is little-endian, as the wire */
    CHECK(origin[0] == 0 && origin[1] == 0 && origin[2] == 0);
    CHECK_NEAR(origin[3], 1.0 / 65535, 1e-12); /* 1 m across 65535 quanta */
    /* Vertex 1: x at the last quantum, +z normal as (128, 128), then colour, a = 255. */
    const uint8_t *v1 = b + 64 + 12;
    CHECK_EQ(kr_le(v1, 2), 65535);
    CHECK_EQ(kr_le(v1 + 2, 2), 0);
    CHECK_EQ(kr_le(v1 + 4, 2), 0);
    CHECK_EQ(v1[6], 128);
    CHECK_EQ(v1[7], 128);
    CHECK(v1[8] == 40 && v1[9] == 50 && v1[10] == 60 && v1[11] == 255);
    const uint8_t *f = b + 64 + 36;
    CHECK(kr_le(f, 2) == 0 && kr_le(f + 2, 2) == 1 && kr_le(f + 4, 2) == 2);
    /* Without colours the four bytes are 0: no colour measured. */
    kr_wire_mesh_packed q;
    REQUIRE_OK(kr_wire_pack_mesh(xyz, nrm, NULL, 3, tri, 1, 42, &q));
    CHECK(q.bytes[64 + 8] == 0 && q.bytes[64 + 11] == 0);
    kr_wire_mesh_packed_free(&q);
    kr_wire_mesh_packed_free(&p);
}

/* A height field of (side - 1)² · 2 triangles over 1 m, with normals and
 * colours made from the vertex index. */
typedef struct {
    float *xyz, *nrm;
    uint8_t *rgb;
    uint32_t *tri;
    size_t nv, nf;
} grid_mesh;

static bool make_grid(int side, grid_mesh *g)
{
    g->nv = (size_t)side * side;
    g->nf = 2 * (size_t)(side - 1) * (side - 1);
    g->xyz = malloc(3 * g->nv * sizeof *g->xyz);
    g->nrm = malloc(3 * g->nv * sizeof *g->nrm);
    g->rgb = malloc(3 * g->nv);
    g->tri = malloc(3 * g->nf * sizeof *g->tri);
    if (!g->xyz || !g->nrm || !g->rgb || !g->tri) return false;
    for (int y = 0; y < side; y++)
        for (int x = 0; x < side; x++) {
            size_t i = (size_t)y * side + x;
            float u = (float)x / (side - 1), v = (float)y / (side - 1);
            g->xyz[3 * i] = u;
            g->xyz[3 * i + 1] = v;
            g->xyz[3 * i + 2] = 0.1f * sinf(6 * u) * cosf(5 * v);
            float n[3] = {-0.6f * cosf(6 * u) * cosf(5 * v), 0.5f * sinf(6 * u) * sinf(5 * v), 1};
            float l = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
            for (int k = 0; k < 3; k++) {
                g->nrm[3 * i + k] = n[k] / l;
                g->rgb[3 * i + k] = (uint8_t)(i * (k + 3));
            }
        }
    size_t f = 0;
    for (int y = 0; y + 1 < side; y++)
        for (int x = 0; x + 1 < side; x++) {
            uint32_t a = (uint32_t)(y * side + x), b = a + 1, c = a + (uint32_t)side, d = c + 1;
            uint32_t t[6] = {a, b, d, a, d, c};
            memcpy(g->tri + 3 * f, t, sizeof t);
            f += 2;
        }
    return true;
}

static void free_grid(grid_mesh *g)
{
    free(g->xyz);
    free(g->nrm);
    free(g->rgb);
    free(g->tri);
}

KR_TEST(meshtopic, large_mesh_chunks_stand_alone_and_give_back_every_triangle)
{
    grid_mesh g;
    REQUIRE(make_grid(300, &g)); /* 178 802 triangles: about 17 chunks */
    kr_wire_mesh_packed p;
    REQUIRE_OK(kr_wire_pack_mesh(g.xyz, g.nrm, g.rgb, g.nv, g.tri, g.nf, 7, &p));
    CHECK_GT(p.chunks, 10);
    CHECK_EQ(p.faces, g.nf);
    size_t face = 0, sent = 0;
    double worst_pos = 0, worst_normal = 0;
    bool colours_exact = true;
    for (uint16_t c = 0; c < p.chunks; c++) {
        size_t bytes = p.offsets[c + 1] - p.offsets[c];
        CHECK_LE(bytes, KR_WIRE_MAX_MESSAGE);
        kr_mesh_msg m;
        REQUIRE_OK(kr_wire_decode_mesh(p.bytes + p.offsets[c], bytes, &m));
        CHECK_EQ(m.chunk, c);
        CHECK_EQ(m.chunks, p.chunks);
        CHECK_EQ(m.frame, 7);
        CHECK_EQ(m.total_faces, g.nf);
        CHECK_EQ(m.first_face, face); /* the triangles keep their order */
        /* Each triangle's corners, from this chunk alone, against the mesh's. */
        for (uint32_t i = 0; i < m.faces; i++, face++) {
            uint16_t t[3];
            kr_wire_mesh_face(&m, i, t);
            for (int k = 0; k < 3; k++) {
                float pos[3], n[3];
                uint8_t rgba[4];
                kr_wire_mesh_vertex(&m, t[k], pos, n, rgba);
                uint32_t want = g.tri[3 * face + (size_t)k];
                double dot = 0;
                for (int a = 0; a < 3; a++) {
                    worst_pos = fmax(worst_pos, fabs(pos[a] - g.xyz[3 * want + a]));
                    dot += n[a] * g.nrm[3 * want + a];
                    colours_exact &= rgba[a] == g.rgb[3 * want + a];
                }
                worst_normal = fmax(worst_normal, acos(fmin(dot, 1.0)) * 180 / M_PI);
                colours_exact &= rgba[3] == 255;
            }
        }
        sent += m.vertices;
    }
    CHECK_EQ(face, g.nf);
    CHECK_EQ(sent, p.vertices);
    CHECK_LE(worst_pos, 0.5 / 65535 * 1.0001 + 1e-7); /* half a quantum of the 1 m box */
    CHECK_LT(worst_normal, 1.5);
    CHECK(colours_exact);
    /* Vertices repeated at chunk borders: a few percent, not every triangle's three. */
    CHECK_LT((double)p.vertices, 1.15 * (double)g.nv);
    printf("    %zu triangles in %u chunks, %u vertices sent for %zu (%.1f %% repeated); "
           "position within %.2g m, normal within %.2f deg\n",
           g.nf, p.chunks, p.vertices, g.nv, 100.0 * ((double)p.vertices / (double)g.nv - 1),
           worst_pos, worst_normal);
    kr_wire_mesh_packed_free(&p);
    free_grid(&g);
}

KR_TEST(meshtopic, decoder_and_packer_refuse_what_does_not_fit)
{
    const float xyz[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, nrm[9] = {0};
    uint32_t tri[3] = {0, 1, 2};
    kr_wire_mesh_packed p;
    REQUIRE_OK(kr_wire_pack_mesh(xyz, nrm, NULL, 3, tri, 1, 0, &p));
    uint8_t b[128];
    size_t n = p.offsets[1];
    memcpy(b, p.bytes, n);
    kr_wire_mesh_packed_free(&p);
    kr_mesh_msg m;
    REQUIRE_OK(kr_wire_decode_mesh(b, n, &m));
    CHECK_STATUS(kr_wire_decode_mesh(b, n - 1, &m), KR_ERR_FORMAT); /* truncated */
    CHECK_STATUS(kr_wire_decode_mesh(b, 40, &m), KR_ERR_FORMAT);    /* shorter than a header */
    uint8_t c[128];
#define BROKEN(offset, value)                                                                      \
    do {                                                                                           \
        memcpy(c, b, n);                                                                           \
        c[offset] = (uint8_t)(value);                                                              \
        CHECK_STATUS(kr_wire_decode_mesh(c, n, &m), KR_ERR_FORMAT);                                \
    } while (0)
    BROKEN(3, 'D');         /* magic KRMD: a model record */
    BROKEN(4, 4);           /* version 4: before the topic */
    BROKEN(6, 4);           /* kind 4: model */
    BROKEN(44, 1);          /* chunk 1 of 1 */
    BROKEN(32, 0);          /* 1 face beyond a total of 0 */
    BROKEN(60 + 3, 0xff);   /* scale NaN */
    BROKEN(64 + 36 + 4, 3); /* an index past the chunk's 3 vertices */
#undef BROKEN
    /* The packer refuses an index beyond the mesh. */
    tri[2] = 3;
    CHECK_STATUS(kr_wire_pack_mesh(xyz, nrm, NULL, 3, tri, 1, 0, &p), KR_ERR_INVALID_ARG);
    /* An empty mesh packs into nothing to send. */
    REQUIRE_OK(kr_wire_pack_mesh(NULL, NULL, NULL, 0, NULL, 0, 0, &p));
    CHECK_EQ(p.chunks, 0);
    kr_wire_mesh_packed_free(&p);
    CHECK_STR(kr_topic_name(KR_TOPIC_MESH), "mesh");
    CHECK_EQ(kr_topic_from_name("mesh"), KR_TOPIC_MESH);
}

/* Two meshes over a real socket: the subscriber gets their chunks in order,
 * numbered one after another, each snapshot's chunks under one number. */
KR_TEST(meshtopic, chunks_over_a_socket_numbered_by_the_publisher)
{
    char endpoint[600];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/mesh.ipc", kr_test_tmpdir());
    kr_publisher_config pc;
    kr_publisher_config_default(&pc);
    pc.endpoint = endpoint;
    kr_publisher *pub = NULL;
    REQUIRE_OK(kr_publisher_create(&pub, &pc));
    kr_subscriber *sub = NULL;
    REQUIRE_OK(kr_subscriber_create(&sub, endpoint, 1u << KR_TOPIC_MESH));
    /* The subscription reaches the publisher first (no slow-joiner loss);
     * it travels asynchronously, so poll, with room for a loaded machine. */
    for (double end = kr_now() + 60;
         !kr_publisher_has_subscriber(pub, KR_TOPIC_MESH) && kr_now() < end;)
        usleep(10000);
    REQUIRE(kr_publisher_has_subscriber(pub, KR_TOPIC_MESH));
    grid_mesh g;
    REQUIRE(make_grid(120, &g));
    kr_wire_mesh_packed p;
    REQUIRE_OK(kr_wire_pack_mesh(g.xyz, g.nrm, NULL, g.nv, g.tri, g.nf, 3, &p));
    const unsigned chunks = p.chunks;
    REQUIRE_OK(kr_publisher_send_mesh(pub, &p));
    REQUIRE_OK(kr_publisher_send_mesh(pub, &p)); /* the same bytes, numbered again */
    kr_wire_mesh_packed_free(&p);
    unsigned got = 0;
    size_t faces[2] = {0, 0};
    for (; got < 2 * chunks; got++) {
        kr_message msg;
        if (kr_subscriber_receive(sub, 10000, &msg) != KR_OK) break;
        CHECK_EQ(msg.topic, KR_TOPIC_MESH);
        CHECK_EQ(msg.mesh.seq, got);
        CHECK_EQ(msg.mesh.snapshot, got / chunks);
        CHECK_EQ(msg.mesh.chunk, got % chunks);
        CHECK_EQ(msg.gap, 0);
        faces[got / chunks] += msg.mesh.faces;
    }
    CHECK_EQ(got, 2 * chunks);
    CHECK(faces[0] == g.nf && faces[1] == g.nf);
    free_grid(&g);
    kr_subscriber_destroy(&sub);
    kr_publisher_destroy(&pub);
}
