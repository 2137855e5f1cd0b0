/* Explicit little-endian packing for the wire format. Field-by-field byte
 * shuffling (never a struct memcpy) keeps the payload identical on any host,
 * whatever its endianness, padding or alignment rules. Internal header. */
#ifndef KINREG_TRANSPORT_LE_H
#define KINREG_TRANSPORT_LE_H

#include <stdint.h>
#include <string.h>

static inline void kr_le_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void kr_le_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void kr_le_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* IEEE-754 binary32/binary64: the bit pattern travels as an integer, so only
 * the integer byte order matters (memcpy of one scalar is the portable pun). */
static inline void kr_le_put_f32(uint8_t *p, float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    kr_le_put_u32(p, u);
}

static inline void kr_le_put_f64(uint8_t *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    kr_le_put_u64(p, u);
}

static inline uint16_t kr_le_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t kr_le_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline uint64_t kr_le_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline float kr_le_get_f32(const uint8_t *p)
{
    uint32_t u = kr_le_get_u32(p);
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static inline double kr_le_get_f64(const uint8_t *p)
{
    uint64_t u = kr_le_get_u64(p);
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

#endif
