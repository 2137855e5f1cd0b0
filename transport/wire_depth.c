/* The wire payload of `depth` messages (docs/PROTOCOL.md, "Depth record"): a
 * 40-byte header and the samples as little-endian u16 millimetres. A
 * thumbnail for viewers (the live view's depth panel), not a recording: a
 * 640×480 frame subsampled by 4 is 160×120 samples, 38 KB a message. */
#include "kinreg/transport.h"

#include <string.h>

#include "le.h"

enum {
    DEPTH_SEQ = 8,
    DEPTH_FRAME = 16,
    DEPTH_TIMESTAMP = 24,
    DEPTH_WIDTH = 32,
    DEPTH_HEIGHT = 34,
    DEPTH_STEP = 36,
    DEPTH_RESERVED = 38, /* u16, zero */
    DEPTH_SAMPLES = 40
};

_Static_assert(DEPTH_SAMPLES == KR_WIRE_DEPTH_HEADER_SIZE, "depth layout and header disagree");
_Static_assert(KR_WIRE_DEPTH_HEADER_SIZE + 2 * KR_WIRE_DEPTH_MAX_SAMPLES <= KR_WIRE_MAX_MESSAGE,
               "the largest depth record passes the subscribers' size limit");

static const uint8_t depth_magic[4] = {'K', 'R', 'D', 'P'};

size_t kr_wire_depth_size(uint16_t width, uint16_t height)
{
    return DEPTH_SAMPLES + 2 * (size_t)width * height;
}

size_t kr_wire_encode_depth(const kr_depth_msg *m, uint8_t *buf)
{
    size_t n = (size_t)m->width * m->height;
    if (n == 0 || n > KR_WIRE_DEPTH_MAX_SAMPLES || !m->samples) return 0;
    memcpy(buf, depth_magic, 4);
    kr_le_put_u16(buf + 4, KR_WIRE_VERSION);
    kr_le_put_u16(buf + 6, KR_TOPIC_DEPTH);
    kr_le_put_u64(buf + DEPTH_SEQ, m->seq);
    kr_le_put_u64(buf + DEPTH_FRAME, m->frame);
    kr_le_put_f64(buf + DEPTH_TIMESTAMP, m->timestamp);
    kr_le_put_u16(buf + DEPTH_WIDTH, m->width);
    kr_le_put_u16(buf + DEPTH_HEIGHT, m->height);
    kr_le_put_u16(buf + DEPTH_STEP, m->step);
    kr_le_put_u16(buf + DEPTH_RESERVED, 0);
    memcpy(buf + DEPTH_SAMPLES, m->samples, 2 * n);
    return DEPTH_SAMPLES + 2 * n;
}

uint16_t kr_wire_depth_sample(const kr_depth_msg *m, size_t i)
{
    return (uint16_t)kr_le_get_u16(m->samples + 2 * i);
}

kr_status kr_wire_decode_depth(const uint8_t *buf, size_t len, kr_depth_msg *out)
{
    if (!buf || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_wire_decode_depth: NULL argument");
    if (len < DEPTH_SAMPLES)
        return kr_error(KR_ERR_FORMAT, "depth payload has %zu bytes, less than its %d-byte header",
                        len, DEPTH_SAMPLES);
    if (memcmp(buf, depth_magic, 4) != 0)
        return kr_error(KR_ERR_FORMAT, "depth payload has the wrong magic (expected KRDP)");
    unsigned version = kr_le_get_u16(buf + 4), kind = kr_le_get_u16(buf + 6);
    /* The depth topic exists from version 4 on. */
    if (version < 4 || version > KR_WIRE_VERSION)
        return kr_error(KR_ERR_FORMAT,
                        "depth payload has wire version %u, this decoder reads 4 to %u", version,
                        (unsigned)KR_WIRE_VERSION);
    if (kind != KR_TOPIC_DEPTH)
        return kr_error(KR_ERR_FORMAT, "depth payload has kind %u, expected %d (depth)", kind,
                        KR_TOPIC_DEPTH);
    kr_depth_msg m;
    m.seq = kr_le_get_u64(buf + DEPTH_SEQ);
    m.frame = kr_le_get_u64(buf + DEPTH_FRAME);
    m.timestamp = kr_le_get_f64(buf + DEPTH_TIMESTAMP);
    m.width = (uint16_t)kr_le_get_u16(buf + DEPTH_WIDTH);
    m.height = (uint16_t)kr_le_get_u16(buf + DEPTH_HEIGHT);
    m.step = (uint16_t)kr_le_get_u16(buf + DEPTH_STEP);
    size_t n = (size_t)m.width * m.height;
    if (n == 0 || n > KR_WIRE_DEPTH_MAX_SAMPLES || len != kr_wire_depth_size(m.width, m.height))
        return kr_error(
            KR_ERR_FORMAT,
            "depth payload has %zu bytes for %ux%u samples (expected %zu, at most %d samples)", len,
            m.width, m.height, kr_wire_depth_size(m.width, m.height), KR_WIRE_DEPTH_MAX_SAMPLES);
    m.samples = buf + DEPTH_SAMPLES;
    *out = m;
    return KR_OK;
}
