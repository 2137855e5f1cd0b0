/* The wire payload of `mesh` messages (docs/PROTOCOL.md, "Mesh record"): a
 * 64-byte header, the chunk's vertices (12 bytes: the model point's
 * quantised position and octahedral normal, then r, g, b, a) and its
 * triangles (three u16 indices into those vertices).
 *
 * Chunks stand alone, so a triangle's vertices are in its own chunk: a
 * vertex shared by triangles of two chunks travels twice. The triangles keep
 * the mesh's order, which for the surface is block by block, so a chunk is a
 * patch of the surface and few vertices repeat (about one in eight at 10k
 * triangles a chunk). 12 bytes a vertex and 6 a triangle: a marching-cubes
 * mesh has about two triangles a vertex, so about 12 bytes a triangle. */
#include "kinreg/transport.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "le.h"
#include "wire_internal.h"

enum {
    MESH_SEQ = 8,
    MESH_SNAPSHOT = 16,
    MESH_FRAME = 24,
    MESH_TOTAL = 32,
    MESH_FIRST = 36,
    MESH_VERTICES = 40,
    MESH_FACES = 42,
    MESH_CHUNK = 44,
    MESH_CHUNKS = 46,
    MESH_ORIGIN = 48, /* 3 × f32 */
    MESH_SCALE = 60,
    MESH_PAYLOAD = 64
};

_Static_assert(MESH_PAYLOAD == KR_WIRE_MESH_HEADER_SIZE, "mesh layout and header disagree");

static const uint8_t mesh_magic[4] = {'K', 'R', 'M', 'S'};

size_t kr_wire_mesh_size(uint16_t vertices, uint16_t faces)
{
    return MESH_PAYLOAD + (size_t)vertices * KR_WIRE_MESH_VERTEX_SIZE +
           (size_t)faces * KR_WIRE_MESH_FACE_SIZE;
}

size_t kr_wire_encode_mesh_header(const kr_mesh_msg *m, uint8_t *buf)
{
    memcpy(buf, mesh_magic, 4);
    kr_le_put_u16(buf + 4, KR_WIRE_VERSION);
    kr_le_put_u16(buf + 6, KR_TOPIC_MESH);
    kr_le_put_u64(buf + MESH_SEQ, m->seq);
    kr_le_put_u64(buf + MESH_SNAPSHOT, m->snapshot);
    kr_le_put_u64(buf + MESH_FRAME, m->frame);
    kr_le_put_u32(buf + MESH_TOTAL, m->total_faces);
    kr_le_put_u32(buf + MESH_FIRST, m->first_face);
    kr_le_put_u16(buf + MESH_VERTICES, m->vertices);
    kr_le_put_u16(buf + MESH_FACES, m->faces);
    kr_le_put_u16(buf + MESH_CHUNK, m->chunk);
    kr_le_put_u16(buf + MESH_CHUNKS, m->chunks);
    for (int i = 0; i < 3; i++)
        kr_le_put_f32(buf + MESH_ORIGIN + 4 * i, m->origin[i]);
    kr_le_put_f32(buf + MESH_SCALE, m->scale);
    return MESH_PAYLOAD;
}

/* The chunks being written: a growing buffer and the chunk offsets. */
typedef struct {
    uint8_t *bytes;
    size_t used, cap;
    size_t *offsets;
    size_t n_offsets, offsets_cap;
} chunk_out;

static kr_status grow(chunk_out *o, size_t more)
{
    if (o->used + more > o->cap) {
        size_t cap = o->cap ? o->cap : 1 << 20;
        while (cap < o->used + more)
            cap *= 2;
        uint8_t *b = realloc(o->bytes, cap);
        if (!b) return kr_error(KR_ERR_NOMEM, "mesh message: out of memory for %zu bytes", cap);
        o->bytes = b;
        o->cap = cap;
    }
    if (o->n_offsets + 2 > o->offsets_cap) {
        size_t cap = o->offsets_cap ? 2 * o->offsets_cap : 64;
        size_t *f = realloc(o->offsets, cap * sizeof *f);
        if (!f) return kr_error(KR_ERR_NOMEM, "mesh message: out of memory");
        o->offsets = f;
        o->offsets_cap = cap;
    }
    return KR_OK;
}

/* One chunk being gathered: the mesh's vertices it holds (local index i is
 * mesh vertex members[i]; local_of[v] is v's local index + 1, 0 = absent)
 * and its triangles in local indices. The message's size bounds both below
 * 65536 (10922 vertices, 21845 triangles), so u16 indices always do. */
typedef struct {
    uint32_t *local_of, *members;
    uint16_t *tri;
    size_t n_members, n_tri;
} chunk_in;

static size_t chunk_bytes(size_t vertices, size_t faces)
{
    return MESH_PAYLOAD + vertices * KR_WIRE_MESH_VERTEX_SIZE + faces * KR_WIRE_MESH_FACE_SIZE;
}

static kr_status emit(chunk_out *o, chunk_in *c, const float *xyz, const float *normals,
                      const uint8_t *rgb, kr_mesh_msg *m)
{
    if (m->chunk == UINT16_MAX)
        return kr_error(KR_ERR_INVALID_ARG,
                        "mesh of %u triangles needs over 65535 messages: send a coarser one",
                        m->total_faces);
    m->vertices = (uint16_t)c->n_members;
    m->faces = (uint16_t)c->n_tri;
    size_t bytes = chunk_bytes(c->n_members, c->n_tri);
    kr_status st = grow(o, bytes);
    if (st != KR_OK) return st;
    uint8_t *buf = o->bytes + o->used;
    kr_wire_encode_mesh_header(m, buf);
    uint8_t *v = buf + MESH_PAYLOAD;
    for (size_t i = 0; i < c->n_members; i++, v += KR_WIRE_MESH_VERTEX_SIZE) {
        uint32_t g = c->members[i];
        kr_wire_pack_model_point(xyz + 3 * (size_t)g, normals + 3 * (size_t)g, m->origin, m->scale,
                                 v);
        if (rgb)
            memcpy(v + 8, rgb + 3 * (size_t)g, 3);
        else
            memset(v + 8, 0, 3);
        v[11] = rgb ? 255 : 0;
        c->local_of[g] = 0;
    }
    for (size_t i = 0; i < 3 * c->n_tri; i++, v += 2)
        kr_le_put_u16(v, c->tri[i]);
    o->offsets[o->n_offsets++] = o->used;
    o->used += bytes;
    m->first_face += m->faces;
    m->chunk++;
    c->n_members = c->n_tri = 0;
    return KR_OK;
}

kr_status kr_wire_pack_mesh(const float *xyz, const float *normals, const uint8_t *rgb,
                            size_t n_vertices, const uint32_t *faces, size_t n_faces,
                            uint64_t frame, kr_wire_mesh_packed *out)
{
    if (!out || (n_vertices && (!xyz || !normals)) || (n_faces && !faces))
        return kr_error(KR_ERR_INVALID_ARG, "kr_wire_pack_mesh: NULL argument");
    memset(out, 0, sizeof *out);
    if (n_faces > UINT32_MAX || n_vertices > UINT32_MAX)
        return kr_error(KR_ERR_INVALID_ARG,
                        "mesh of %zu triangles is too large to send: send a coarser one", n_faces);
    for (size_t i = 0; i < 3 * n_faces; i++)
        if (faces[i] >= n_vertices)
            return kr_error(KR_ERR_INVALID_ARG, "mesh triangle %zu names vertex %u of %zu", i / 3,
                            faces[i], n_vertices);
    /* The largest chunk's vertices and triangles, and the index buffers. */
    const size_t room = KR_WIRE_MAX_MESSAGE - MESH_PAYLOAD;
    const size_t max_tri = room / KR_WIRE_MESH_FACE_SIZE;
    chunk_in c = {calloc(n_vertices ? n_vertices : 1, sizeof(uint32_t)),
                  malloc(3 * max_tri * sizeof(uint32_t)), malloc(3 * max_tri * sizeof(uint16_t)), 0,
                  0};
    chunk_out o = {0};
    kr_status st = c.local_of && c.members && c.tri
                       ? KR_OK
                       : kr_error(KR_ERR_NOMEM, "mesh message: out of memory");
    kr_mesh_msg m;
    memset(&m, 0, sizeof m);
    m.frame = frame;
    m.total_faces = (uint32_t)n_faces;
    kr_wire_grid_of(xyz, n_vertices, m.origin, &m.scale);
    for (size_t f = 0; f < n_faces && st == KR_OK; f++) {
        const uint32_t *t = faces + 3 * f;
        size_t fresh = 0;
        for (int k = 0; k < 3; k++)
            fresh += !c.local_of[t[k]] && (k == 0 || t[k] != t[0]) && (k < 2 || t[2] != t[1]);
        if (chunk_bytes(c.n_members + fresh, c.n_tri + 1) > KR_WIRE_MAX_MESSAGE)
            st = emit(&o, &c, xyz, normals, rgb, &m);
        for (int k = 0; k < 3 && st == KR_OK; k++) {
            if (!c.local_of[t[k]]) {
                c.members[c.n_members++] = t[k];
                c.local_of[t[k]] = (uint32_t)c.n_members;
            }
            c.tri[3 * c.n_tri + (size_t)k] = (uint16_t)(c.local_of[t[k]] - 1);
        }
        c.n_tri++;
    }
    if (st == KR_OK && c.n_tri) st = emit(&o, &c, xyz, normals, rgb, &m);
    free(c.local_of);
    free(c.members);
    free(c.tri);
    if (st != KR_OK) {
        free(o.bytes);
        free(o.offsets);
        return st;
    }
    out->chunks = m.chunk;
    out->faces = (uint32_t)n_faces;
    /* Every chunk says how many there are: known only now. */
    for (size_t i = 0; i < o.n_offsets; i++)
        kr_le_put_u16(o.bytes + o.offsets[i] + MESH_CHUNKS, m.chunk);
    if (o.offsets) o.offsets[o.n_offsets] = o.used;
    for (size_t i = 0; i < o.n_offsets; i++)
        out->vertices += kr_le_get_u16(o.bytes + o.offsets[i] + MESH_VERTICES);
    out->bytes = o.bytes;
    out->offsets = o.offsets;
    return KR_OK;
}

void kr_wire_mesh_stamp(uint8_t *chunk, uint64_t seq, uint64_t snapshot)
{
    kr_le_put_u64(chunk + MESH_SEQ, seq);
    kr_le_put_u64(chunk + MESH_SNAPSHOT, snapshot);
}

void kr_wire_mesh_packed_free(kr_wire_mesh_packed *p)
{
    if (!p) return;
    free(p->bytes);
    free(p->offsets);
    memset(p, 0, sizeof *p);
}

void kr_wire_mesh_vertex(const kr_mesh_msg *m, uint32_t i, float p[3], float n[3], uint8_t rgba[4])
{
    const uint8_t *v = m->vertex_bytes + (size_t)i * KR_WIRE_MESH_VERTEX_SIZE;
    kr_wire_unpack_model_point(v, m->origin, m->scale, p, n);
    memcpy(rgba, v + 8, 4);
}

void kr_wire_mesh_face(const kr_mesh_msg *m, uint32_t i, uint16_t v[3])
{
    for (int k = 0; k < 3; k++)
        v[k] = kr_le_get_u16(m->face_bytes + (size_t)i * KR_WIRE_MESH_FACE_SIZE + 2 * (size_t)k);
}

kr_status kr_wire_decode_mesh(const uint8_t *buf, size_t len, kr_mesh_msg *out)
{
    if (!buf || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_wire_decode_mesh: NULL argument");
    if (len < MESH_PAYLOAD)
        return kr_error(KR_ERR_FORMAT, "mesh payload has %zu bytes, expected at least %d", len,
                        MESH_PAYLOAD);
    if (memcmp(buf, mesh_magic, 4) != 0)
        return kr_error(KR_ERR_FORMAT,
                        "mesh payload has magic %02x %02x %02x %02x, expected \"KRMS\"", buf[0],
                        buf[1], buf[2], buf[3]);
    unsigned version = kr_le_get_u16(buf + 4), kind = kr_le_get_u16(buf + 6);
    /* The mesh topic exists from version 5 on. */
    if (version < 5 || version > KR_WIRE_VERSION)
        return kr_error(KR_ERR_FORMAT,
                        "mesh payload has wire version %u, this decoder reads 5 to %u", version,
                        (unsigned)KR_WIRE_VERSION);
    if (kind != KR_TOPIC_MESH)
        return kr_error(KR_ERR_FORMAT, "mesh payload has kind %u, expected %d (mesh)", kind,
                        KR_TOPIC_MESH);
    kr_mesh_msg m;
    memset(&m, 0, sizeof m);
    m.seq = kr_le_get_u64(buf + MESH_SEQ);
    m.snapshot = kr_le_get_u64(buf + MESH_SNAPSHOT);
    m.frame = kr_le_get_u64(buf + MESH_FRAME);
    m.total_faces = kr_le_get_u32(buf + MESH_TOTAL);
    m.first_face = kr_le_get_u32(buf + MESH_FIRST);
    m.vertices = kr_le_get_u16(buf + MESH_VERTICES);
    m.faces = kr_le_get_u16(buf + MESH_FACES);
    m.chunk = kr_le_get_u16(buf + MESH_CHUNK);
    m.chunks = kr_le_get_u16(buf + MESH_CHUNKS);
    for (int i = 0; i < 3; i++)
        m.origin[i] = kr_le_get_f32(buf + MESH_ORIGIN + 4 * i);
    m.scale = kr_le_get_f32(buf + MESH_SCALE);
    if (len != kr_wire_mesh_size(m.vertices, m.faces))
        return kr_error(KR_ERR_FORMAT,
                        "mesh payload has %zu bytes, expected %zu for %u vertices and %u triangles",
                        len, kr_wire_mesh_size(m.vertices, m.faces), m.vertices, m.faces);
    if (m.chunk >= m.chunks || (uint64_t)m.first_face + m.faces > m.total_faces || !(m.scale > 0) ||
        !isfinite(m.scale))
        return kr_error(
            KR_ERR_FORMAT,
            "mesh chunk %u of %u (triangles %u..+%u of %u, scale %g) does not fit its snapshot",
            m.chunk, m.chunks, m.first_face, m.faces, m.total_faces, (double)m.scale);
    m.vertex_bytes = buf + MESH_PAYLOAD;
    m.face_bytes = m.vertex_bytes + (size_t)m.vertices * KR_WIRE_MESH_VERTEX_SIZE;
    for (uint32_t i = 0; i < 3u * m.faces; i++)
        if (kr_le_get_u16(m.face_bytes + 2 * (size_t)i) >= m.vertices)
            return kr_error(KR_ERR_FORMAT, "mesh chunk %u: triangle %u names vertex %u of %u",
                            m.chunk, i / 3, kr_le_get_u16(m.face_bytes + 2 * (size_t)i),
                            m.vertices);
    *out = m;
    return KR_OK;
}
