/* The wire payload of `model` messages (docs/PROTOCOL.md, "Model record"): a
 * 64-byte header and packed points of 8 bytes. Positions are quantised to
 * u16 on a per-snapshot grid (origin, scale), so a 10 m scene keeps 0.15 mm
 * steps, far below the 15 mm voxels; normals use the octahedral map (Meyer
 * et al. 2010) at 8 bits per axis, about a degree of error, which is all
 * shading needs. 8 bytes a point instead of 24 as floats: a 100k-point
 * snapshot is 800 KB a period. */
#include "kinreg/transport.h"

#include <math.h>
#include <string.h>

#include "le.h"
#include "wire_internal.h"

enum {
    MODEL_SEQ = 8,
    MODEL_SNAPSHOT = 16,
    MODEL_FRAME = 24,
    MODEL_TOTAL = 32,
    MODEL_FIRST = 36,
    MODEL_COUNT = 40,
    MODEL_CHUNK = 44,
    MODEL_CHUNKS = 46,
    MODEL_ORIGIN = 48, /* 3 × f32 */
    MODEL_SCALE = 60,
    MODEL_POINTS = 64
};

_Static_assert(MODEL_POINTS == KR_WIRE_MODEL_HEADER_SIZE, "model layout and header disagree");

static const uint8_t model_magic[4] = {'K', 'R', 'M', 'D'};

size_t kr_wire_model_size(uint32_t count)
{
    return MODEL_POINTS + (size_t)count * KR_WIRE_MODEL_POINT_SIZE;
}

size_t kr_wire_encode_model_header(const kr_model_msg *m, uint8_t *buf)
{
    memcpy(buf, model_magic, 4);
    kr_le_put_u16(buf + 4, KR_WIRE_VERSION);
    kr_le_put_u16(buf + 6, KR_TOPIC_MODEL);
    kr_le_put_u64(buf + MODEL_SEQ, m->seq);
    kr_le_put_u64(buf + MODEL_SNAPSHOT, m->snapshot);
    kr_le_put_u64(buf + MODEL_FRAME, m->frame);
    kr_le_put_u32(buf + MODEL_TOTAL, m->total_points);
    kr_le_put_u32(buf + MODEL_FIRST, m->first_point);
    kr_le_put_u32(buf + MODEL_COUNT, m->count);
    kr_le_put_u16(buf + MODEL_CHUNK, m->chunk);
    kr_le_put_u16(buf + MODEL_CHUNKS, m->chunks);
    for (int i = 0; i < 3; i++)
        kr_le_put_f32(buf + MODEL_ORIGIN + 4 * i, m->origin[i]);
    kr_le_put_f32(buf + MODEL_SCALE, m->scale);
    return MODEL_POINTS;
}

void kr_wire_grid_of(const float *xyz, size_t n, float origin[3], float *scale)
{
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            float v = xyz[3 * i + k];
            if (!isfinite(v)) continue;
            if (v < lo[k]) lo[k] = v;
            if (v > hi[k]) hi[k] = v;
        }
    float extent = 0;
    for (int k = 0; k < 3; k++) {
        if (lo[k] > hi[k]) lo[k] = hi[k] = 0; /* no finite coordinate */
        if (hi[k] - lo[k] > extent) extent = hi[k] - lo[k];
    }
    memcpy(origin, lo, sizeof lo);
    *scale = extent > 0 ? extent / 65535.f : 1e-6f;
}

static uint16_t quantise(float v, float origin, float scale)
{
    float q = roundf((v - origin) / scale);
    if (!(q >= 0)) return 0; /* also NaN */
    return q > 65535.f ? 65535 : (uint16_t)q;
}

static uint8_t to_byte(float u) /* [-1, 1] -> 0..255 */
{
    float b = roundf((u + 1.f) * 127.5f);
    return b < 0 ? 0 : b > 255 ? 255 : (uint8_t)b;
}

static float sign_of(float v)
{
    return v < 0 ? -1.f : 1.f;
}

void kr_wire_pack_model_point(const float p[3], const float n[3], const float origin[3],
                              float scale, uint8_t out[KR_WIRE_MODEL_POINT_SIZE])
{
    for (int i = 0; i < 3; i++)
        kr_le_put_u16(out + 2 * i, quantise(p[i], origin[i], scale));
    /* Octahedral map: project onto |x|+|y|+|z| = 1, fold the lower half
     * (z < 0) over the diagonals so (u, v) fills the square [-1, 1]². */
    float l1 = fabsf(n[0]) + fabsf(n[1]) + fabsf(n[2]);
    float u = 0, v = 0;
    if (l1 > 0 && isfinite(l1)) {
        u = n[0] / l1;
        v = n[1] / l1;
        if (n[2] < 0) {
            float fu = (1.f - fabsf(v)) * sign_of(u), fv = (1.f - fabsf(u)) * sign_of(v);
            u = fu;
            v = fv;
        }
    }
    out[6] = to_byte(u);
    out[7] = to_byte(v);
}

void kr_wire_unpack_model_point(const uint8_t in[KR_WIRE_MODEL_POINT_SIZE], const float origin[3],
                                float scale, float p[3], float n[3])
{
    for (int i = 0; i < 3; i++)
        p[i] = origin[i] + scale * (float)kr_le_get_u16(in + 2 * i);
    float u = in[6] / 127.5f - 1.f, v = in[7] / 127.5f - 1.f;
    float z = 1.f - fabsf(u) - fabsf(v);
    if (z < 0) {
        float fu = (1.f - fabsf(v)) * sign_of(u), fv = (1.f - fabsf(u)) * sign_of(v);
        u = fu;
        v = fv;
    }
    float len = sqrtf(u * u + v * v + z * z);
    n[0] = u / len;
    n[1] = v / len;
    n[2] = z / len;
}

kr_status kr_wire_decode_model(const uint8_t *buf, size_t len, kr_model_msg *out)
{
    if (!buf || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_wire_decode_model: NULL argument");
    if (len < MODEL_POINTS)
        return kr_error(KR_ERR_FORMAT, "model payload has %zu bytes, expected at least %d", len,
                        MODEL_POINTS);
    if (memcmp(buf, model_magic, 4) != 0)
        return kr_error(KR_ERR_FORMAT,
                        "model payload has magic %02x %02x %02x %02x, expected \"KRMD\"", buf[0],
                        buf[1], buf[2], buf[3]);
    unsigned version = kr_le_get_u16(buf + 4), kind = kr_le_get_u16(buf + 6);
    /* The model topic exists from version 2 on. */
    if (version < 2 || version > KR_WIRE_VERSION)
        return kr_error(KR_ERR_FORMAT,
                        "model payload has wire version %u, this decoder reads 2 to %u", version,
                        (unsigned)KR_WIRE_VERSION);
    if (kind != KR_TOPIC_MODEL)
        return kr_error(KR_ERR_FORMAT, "model payload has kind %u, expected %d (model)", kind,
                        KR_TOPIC_MODEL);
    kr_model_msg m;
    memset(&m, 0, sizeof m);
    m.seq = kr_le_get_u64(buf + MODEL_SEQ);
    m.snapshot = kr_le_get_u64(buf + MODEL_SNAPSHOT);
    m.frame = kr_le_get_u64(buf + MODEL_FRAME);
    m.total_points = kr_le_get_u32(buf + MODEL_TOTAL);
    m.first_point = kr_le_get_u32(buf + MODEL_FIRST);
    m.count = kr_le_get_u32(buf + MODEL_COUNT);
    m.chunk = kr_le_get_u16(buf + MODEL_CHUNK);
    m.chunks = kr_le_get_u16(buf + MODEL_CHUNKS);
    for (int i = 0; i < 3; i++)
        m.origin[i] = kr_le_get_f32(buf + MODEL_ORIGIN + 4 * i);
    m.scale = kr_le_get_f32(buf + MODEL_SCALE);
    if (len != kr_wire_model_size(m.count))
        return kr_error(KR_ERR_FORMAT, "model payload has %zu bytes, expected %zu for %u points",
                        len, kr_wire_model_size(m.count), m.count);
    if (m.chunk >= m.chunks || (uint64_t)m.first_point + m.count > m.total_points ||
        m.count > KR_WIRE_MODEL_CHUNK_POINTS || !(m.scale > 0) || !isfinite(m.scale))
        return kr_error(
            KR_ERR_FORMAT,
            "model chunk %u of %u (points %u..+%u of %u, scale %g) does not fit its snapshot",
            m.chunk, m.chunks, m.first_point, m.count, m.total_points, (double)m.scale);
    m.points = buf + MODEL_POINTS;
    *out = m;
    return KR_OK;
}
