/* The wire payloads of `pose`/`refine` and `status` messages: fixed size,
 * little-endian, every field at the byte offset docs/PROTOCOL.md gives. The
 * offsets below are the protocol; change one only together with the document,
 * the Python example and KR_WIRE_VERSION. */
#include "kinreg/transport.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "le.h"

/* Common 8-byte header: magic, version, kind (the kr_topic code). */
enum { HDR_MAGIC = 0, HDR_VERSION = 4, HDR_KIND = 6, HDR_SIZE = 8 };

enum {
    POSE_SEQ = 8,
    POSE_FRAME = 16,
    POSE_TIMESTAMP = 24,
    POSE_T = 32, /* 3 × f64 */
    POSE_Q = 56, /* 4 × f64, x y z w */
    POSE_STATE = 88,
    POSE_METHOD = 89,
    POSE_ITERATIONS = 90,
    POSE_INLIER_FRACTION = 92,
    POSE_RMS = 96,
    POSE_CONDITION = 100,
    POSE_LATENCY = 104,
    POSE_RESERVED = 108,   /* u32, zero */
    POSE_COVARIANCE = 112, /* version 5: 21 × f32, the upper triangle row by row */
    POSE_RESERVED2 = 196,  /* u32, zero: pads the payload to a multiple of 8 */
    POSE_SIZE = 200,
    POSE_SIZE_V4 = 112 /* versions 1 to 4: no covariance */
};

enum {
    STATUS_SEQ = 8,
    STATUS_EVENT = 16,
    STATUS_STATE = 17,
    STATUS_RESERVED = 18, /* u16, zero */
    STATUS_FPS = 20,
    STATUS_FRAMES_IN = 24,
    STATUS_FRAMES_OUT = 32,
    STATUS_FRAMES_DROPPED = 40,
    STATUS_FRAMES_LOST = 48,
    STATUS_MODEL_POINTS = 56,
    STATUS_MESSAGES_DROPPED = 64, /* version 3 */
    STATUS_FRAMES_TOTAL = 72,     /* version 4 */
    STATUS_TEXT = 80,             /* NUL-padded UTF-8 to the end of the record */
    STATUS_TEXT_LEN = 320,
    STATUS_SIZE = 400,
    STATUS_TEXT_V3 = 72, /* version 3: no frames_total, the text at 72 */
    STATUS_SIZE_V3 = 392,
    STATUS_TEXT_V12 = 64, /* versions 1 and 2: no messages_dropped, the text at 64 */
    STATUS_SIZE_V2 = 384,
    STATUS_TEXT_LEN_V1 = 64, /* version 1: a 64-byte text */
    STATUS_SIZE_V1 = 128
};

_Static_assert(POSE_SIZE == KR_WIRE_POSE_SIZE, "pose layout and header disagree");
_Static_assert(POSE_SIZE_V4 == KR_WIRE_POSE_SIZE_V4, "pose layout and header disagree");
_Static_assert(POSE_COVARIANCE + 21 * 4 == POSE_RESERVED2, "the covariance fills 84 bytes");
_Static_assert(STATUS_SIZE == KR_WIRE_STATUS_SIZE, "status layout and header disagree");
_Static_assert(STATUS_SIZE_V1 == KR_WIRE_STATUS_SIZE_V1, "status layout and header disagree");
_Static_assert(STATUS_SIZE_V2 == KR_WIRE_STATUS_SIZE_V2, "status layout and header disagree");
_Static_assert(STATUS_SIZE_V3 == KR_WIRE_STATUS_SIZE_V3, "status layout and header disagree");
_Static_assert(STATUS_TEXT_V3 + STATUS_TEXT_LEN == STATUS_SIZE_V3,
               "version 3 text ends the record");
_Static_assert(STATUS_TEXT_V12 + STATUS_TEXT_LEN == STATUS_SIZE_V2, "version 2 text ends the record");
_Static_assert(STATUS_TEXT + STATUS_TEXT_LEN == STATUS_SIZE, "status text ends the record");
_Static_assert(STATUS_TEXT_LEN == sizeof(((kr_status_msg *)0)->text), "status text and header disagree");

static const uint8_t pose_magic[4] = {'K', 'R', 'P', 'S'};
static const uint8_t status_magic[4] = {'K', 'R', 'S', 'T'};

size_t kr_wire_pose_size(void)
{
    return POSE_SIZE;
}

size_t kr_wire_status_size(void)
{
    return STATUS_SIZE;
}

static void put_header(uint8_t *buf, const uint8_t magic[4], uint16_t kind)
{
    memcpy(buf + HDR_MAGIC, magic, 4);
    kr_le_put_u16(buf + HDR_VERSION, KR_WIRE_VERSION);
    kr_le_put_u16(buf + HDR_KIND, kind);
}

size_t kr_wire_encode_pose(const kr_pose_msg *m, uint8_t *buf)
{
    /* A refine (final) message is a pose message with kind 3 (5); anything
     * else is a pose. */
    uint16_t kind = m->topic == KR_TOPIC_REFINE || m->topic == KR_TOPIC_FINAL
                        ? (uint16_t)m->topic
                        : (uint16_t)KR_TOPIC_POSE;
    put_header(buf, pose_magic, kind);
    kr_le_put_u64(buf + POSE_SEQ, m->seq);
    kr_le_put_u64(buf + POSE_FRAME, m->frame_index);
    kr_le_put_f64(buf + POSE_TIMESTAMP, m->timestamp);
    for (int i = 0; i < 3; i++) kr_le_put_f64(buf + POSE_T + 8 * i, m->t[i]);
    for (int i = 0; i < 4; i++) kr_le_put_f64(buf + POSE_Q + 8 * i, m->q[i]);
    buf[POSE_STATE] = m->state;
    buf[POSE_METHOD] = m->method;
    kr_le_put_u16(buf + POSE_ITERATIONS, m->iterations);
    kr_le_put_f32(buf + POSE_INLIER_FRACTION, m->inlier_fraction);
    kr_le_put_f32(buf + POSE_RMS, m->rms);
    kr_le_put_f32(buf + POSE_CONDITION, m->condition);
    kr_le_put_f32(buf + POSE_LATENCY, m->latency_ms);
    kr_le_put_u32(buf + POSE_RESERVED, 0);
    for (int i = 0; i < 21; i++)
        kr_le_put_f32(buf + POSE_COVARIANCE + 4 * i, m->covariance[i]);
    kr_le_put_u32(buf + POSE_RESERVED2, 0);
    return POSE_SIZE;
}

size_t kr_wire_encode_status(const kr_status_msg *m, uint8_t *buf)
{
    put_header(buf, status_magic, KR_TOPIC_STATUS);
    kr_le_put_u64(buf + STATUS_SEQ, m->seq);
    buf[STATUS_EVENT] = m->event;
    buf[STATUS_STATE] = m->state;
    kr_le_put_u16(buf + STATUS_RESERVED, 0);
    kr_le_put_f32(buf + STATUS_FPS, m->fps);
    kr_le_put_u64(buf + STATUS_FRAMES_IN, m->frames_in);
    kr_le_put_u64(buf + STATUS_FRAMES_OUT, m->frames_out);
    kr_le_put_u64(buf + STATUS_FRAMES_DROPPED, m->frames_dropped);
    kr_le_put_u64(buf + STATUS_FRAMES_LOST, m->frames_lost);
    kr_le_put_u64(buf + STATUS_MODEL_POINTS, m->model_points);
    kr_le_put_u64(buf + STATUS_MESSAGES_DROPPED, m->messages_dropped);
    kr_le_put_u64(buf + STATUS_FRAMES_TOTAL, m->frames_total);
    /* Zero padding after the text, and the last byte always NUL, so a reader
     * can use the field as a C string without trusting the sender. */
    size_t n = strnlen(m->text, sizeof m->text);
    if (n > STATUS_TEXT_LEN - 1) n = STATUS_TEXT_LEN - 1;
    memset(buf + STATUS_TEXT, 0, STATUS_TEXT_LEN);
    memcpy(buf + STATUS_TEXT, m->text, n);
    return STATUS_SIZE;
}

/* Size, magic and version checks shared by both decoders. sizes[v] is the
 * record's size in version v (KR_WIRE_VERSION_MIN..KR_WIRE_VERSION);
 * *version receives the version read. */
static kr_status check_header(const char *what, const uint8_t *buf, size_t len, const size_t *sizes,
                              const uint8_t magic[4], unsigned *version_out)
{
    if (!buf) return kr_error(KR_ERR_INVALID_ARG, "%s payload is NULL", what);
    size_t size = sizes[KR_WIRE_VERSION];
    int known = 0;
    for (int v = KR_WIRE_VERSION_MIN; v <= KR_WIRE_VERSION; v++) known |= len == sizes[v];
    if (!known) return kr_error(KR_ERR_FORMAT, "%s payload has %zu bytes, expected %zu", what, len, size);
    if (memcmp(buf + HDR_MAGIC, magic, 4) != 0)
        return kr_error(KR_ERR_FORMAT,
                        "%s payload has magic %02x %02x %02x %02x, expected \"%.4s\" "
                        "(%02x %02x %02x %02x)",
                        what, buf[0], buf[1], buf[2], buf[3], (const char *)magic, magic[0],
                        magic[1], magic[2], magic[3]);
    unsigned version = kr_le_get_u16(buf + HDR_VERSION);
    if (version < KR_WIRE_VERSION_MIN || version > KR_WIRE_VERSION)
        return kr_error(KR_ERR_FORMAT, "%s payload has wire version %u, this decoder reads %u to %u", what,
                        version, (unsigned)KR_WIRE_VERSION_MIN, (unsigned)KR_WIRE_VERSION);
    size_t expect = sizes[version];
    if (len != expect)
        return kr_error(KR_ERR_FORMAT, "%s payload has %zu bytes, expected %zu (wire version %u)", what, len,
                        expect, version);
    *version_out = version;
    return KR_OK;
}

kr_status kr_wire_decode_pose(const uint8_t *buf, size_t len, kr_pose_msg *out)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_wire_decode_pose: out is NULL");
    unsigned version;
    static const size_t sizes[KR_WIRE_VERSION + 1] = {
        0, POSE_SIZE_V4, POSE_SIZE_V4, POSE_SIZE_V4, POSE_SIZE_V4, POSE_SIZE};
    kr_status s = check_header("pose", buf, len, sizes, pose_magic, &version);
    if (s != KR_OK) return s;
    unsigned kind = kr_le_get_u16(buf + HDR_KIND);
    if (kind != KR_TOPIC_POSE && kind != KR_TOPIC_REFINE && kind != KR_TOPIC_FINAL)
        return kr_error(KR_ERR_FORMAT,
                        "pose payload has kind %u, expected %d (pose), %d (refine) or %d (final)",
                        kind, KR_TOPIC_POSE, KR_TOPIC_REFINE, KR_TOPIC_FINAL);
    kr_pose_msg m;
    memset(&m, 0, sizeof m);
    m.topic = (kr_topic)kind;
    m.seq = kr_le_get_u64(buf + POSE_SEQ);
    m.frame_index = kr_le_get_u64(buf + POSE_FRAME);
    m.timestamp = kr_le_get_f64(buf + POSE_TIMESTAMP);
    for (int i = 0; i < 3; i++) m.t[i] = kr_le_get_f64(buf + POSE_T + 8 * i);
    for (int i = 0; i < 4; i++) m.q[i] = kr_le_get_f64(buf + POSE_Q + 8 * i);
    m.state = buf[POSE_STATE];
    m.method = buf[POSE_METHOD];
    m.iterations = kr_le_get_u16(buf + POSE_ITERATIONS);
    m.inlier_fraction = kr_le_get_f32(buf + POSE_INLIER_FRACTION);
    m.rms = kr_le_get_f32(buf + POSE_RMS);
    m.condition = kr_le_get_f32(buf + POSE_CONDITION);
    m.latency_ms = kr_le_get_f32(buf + POSE_LATENCY);
    for (int i = 0; i < 21; i++)
        m.covariance[i] = version >= 5 ? kr_le_get_f32(buf + POSE_COVARIANCE + 4 * i) : NAN;
    *out = m;
    return KR_OK;
}

kr_status kr_wire_decode_status(const uint8_t *buf, size_t len, kr_status_msg *out)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_wire_decode_status: out is NULL");
    unsigned version;
    static const size_t sizes[KR_WIRE_VERSION + 1] = {
        0, STATUS_SIZE_V1, STATUS_SIZE_V2, STATUS_SIZE_V3, STATUS_SIZE, STATUS_SIZE};
    kr_status s = check_header("status", buf, len, sizes, status_magic, &version);
    if (s != KR_OK) return s;
    unsigned kind = kr_le_get_u16(buf + HDR_KIND);
    if (kind != KR_TOPIC_STATUS)
        return kr_error(KR_ERR_FORMAT, "status payload has kind %u, expected %d (status)", kind,
                        KR_TOPIC_STATUS);
    kr_status_msg m;
    memset(&m, 0, sizeof m);
    m.seq = kr_le_get_u64(buf + STATUS_SEQ);
    m.event = buf[STATUS_EVENT];
    m.state = buf[STATUS_STATE];
    m.fps = kr_le_get_f32(buf + STATUS_FPS);
    m.frames_in = kr_le_get_u64(buf + STATUS_FRAMES_IN);
    m.frames_out = kr_le_get_u64(buf + STATUS_FRAMES_OUT);
    m.frames_dropped = kr_le_get_u64(buf + STATUS_FRAMES_DROPPED);
    m.frames_lost = kr_le_get_u64(buf + STATUS_FRAMES_LOST);
    m.model_points = kr_le_get_u64(buf + STATUS_MODEL_POINTS);
    if (version >= 3) m.messages_dropped = kr_le_get_u64(buf + STATUS_MESSAGES_DROPPED);
    if (version >= 4) m.frames_total = kr_le_get_u64(buf + STATUS_FRAMES_TOTAL);
    /* Copy the field less its last byte and terminate: a sender that filled
     * it all (not ours) still yields a valid C string. */
    size_t text_len = version == 1 ? STATUS_TEXT_LEN_V1 : STATUS_TEXT_LEN;
    size_t text_at = version >= 4 ? STATUS_TEXT : version == 3 ? STATUS_TEXT_V3 : STATUS_TEXT_V12;
    memcpy(m.text, buf + text_at, text_len - 1);
    m.text[text_len - 1] = '\0';
    *out = m;
    return KR_OK;
}
