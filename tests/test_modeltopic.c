/* The `model` topic (docs/PROTOCOL.md, "Model record"): quantisation and the
 * octahedral normals against the original floats, the header's byte offsets
 * read by hand, chunking, the publisher's subscription check, and a snapshot
 * sent over loopback and reassembled point by point. */
#include "kr_test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kinreg/transport.h"

static void random_unit(unsigned *s, float n[3])
{
    double x, y, z, l;
    do {
        x = 2 * kr_urand(s) - 1;
        y = 2 * kr_urand(s) - 1;
        z = 2 * kr_urand(s) - 1;
        l = sqrt(x * x + y * y + z * z);
    } while (l < 0.1 || l > 1);
    n[0] = (float)(x / l);
    n[1] = (float)(y / l);
    n[2] = (float)(z / l);
}

static double angle_deg(const float a[3], const float b[3])
{
    double d = (double)a[0] * b[0] + (double)a[1] * b[1] + (double)a[2] * b[2];
    return acos(fmin(1, fmax(-1, d))) * 180 / M_PI;
}

KR_TEST(modeltopic, quantisation_bounds)
{
    /* Position error at most half a quantum; normal error about a degree
     * (8 bits per octahedral axis: a step of 2/255 in (u, v) turns the
     * normal by at most ~1.3 degrees near the fold, half of that rounded). */
    unsigned s = 12;
    const float origin[3] = {-1.5f, -0.7f, 0.4f}, scale = 4.0f / 65535.f;
    double worst_p = 0, worst_n = 0;
    for (int i = 0; i < 100000; i++) {
        float p[3], n[3], p2[3], n2[3];
        for (int k = 0; k < 3; k++)
            p[k] = origin[k] + (float)(kr_urand(&s) * 4.0);
        random_unit(&s, n);
        uint8_t b[KR_WIRE_MODEL_POINT_SIZE];
        kr_wire_pack_model_point(p, n, origin, scale, b);
        kr_wire_unpack_model_point(b, origin, scale, p2, n2);
        for (int k = 0; k < 3; k++)
            worst_p = fmax(worst_p, fabs((double)p2[k] - p[k]));
        worst_n = fmax(worst_n, angle_deg(n, n2));
        CHECK_NEAR(sqrt(n2[0] * n2[0] + n2[1] * n2[1] + n2[2] * n2[2]), 1.0, 1e-5);
    }
    CHECK_LE(worst_p, 0.5 * scale * 1.001 + 1e-6);
    CHECK_LE(worst_n, 1.0);
    CHECK_GT(worst_n, 0.05); /* the quantisation is real: a lossless pass would be a wrong test */
    /* A missing normal travels as +z; a point outside the grid is clamped. */
    float p[3] = {-9, 0, 100}, nan3[3] = {NAN, NAN, NAN}, p2[3], n2[3];
    uint8_t b[KR_WIRE_MODEL_POINT_SIZE];
    kr_wire_pack_model_point(p, nan3, origin, scale, b);
    kr_wire_unpack_model_point(b, origin, scale, p2, n2);
    CHECK_NEAR(n2[2], 1.0, 1e-3);
    CHECK_NEAR(p2[0], origin[0], 1e-6);
    CHECK_NEAR(p2[2], origin[2] + 65535 * scale, 1e-4);
}

KR_TEST(modeltopic, header_offsets)
{
    kr_model_msg m;
    memset(&m, 0, sizeof m);
    m.seq = 0x0102030405060708ull;
    m.snapshot = 7;
    m.frame = 300;
    m.total_points = 40000;
    m.first_point = 32768;
    m.count = 3;
    m.chunk = 2;
    m.chunks = 3;
    m.origin[0] = 1.5f;
    m.scale = 0.25f;
    uint8_t buf[KR_WIRE_MODEL_HEADER_SIZE + 3 * KR_WIRE_MODEL_POINT_SIZE];
    memset(buf, 0xAB, sizeof buf);
    CHECK_EQ(kr_wire_encode_model_header(&m, buf), 64);
    /* Offsets as docs/PROTOCOL.md gives them, read by hand. */
    CHECK(!memcmp(buf, "KRMD", 4));
    CHECK_EQ(buf[4] | buf[5] << 8, KR_WIRE_VERSION);
    CHECK_EQ(buf[6] | buf[7] << 8, 4);
    CHECK_EQ(buf[8], 0x08);
    CHECK_EQ(buf[15], 0x01);
    CHECK_EQ(buf[16], 7);
    CHECK_EQ(buf[24] | buf[25] << 8, 300);
    CHECK_EQ(buf[32] | buf[33] << 8 | buf[34] << 16, 40000);
    CHECK_EQ(buf[36] | buf[37] << 8 | buf[38] << 16, 32768);
    CHECK_EQ(buf[40], 3);
    CHECK_EQ(buf[44], 2);
    CHECK_EQ(buf[46], 3);
    float f;
    memcpy(&f, buf + 48, 4); /* little-endian host assumed by this check only */
    CHECK_NEAR(f, 1.5, 0);
    memcpy(&f, buf + 60, 4);
    CHECK_NEAR(f, 0.25, 0);
    kr_model_msg d;
    CHECK_OK(kr_wire_decode_model(buf, sizeof buf, &d));
    CHECK_EQ(d.seq, m.seq);
    CHECK_EQ(d.first_point, 32768);
    CHECK(d.points == buf + 64);
    /* Wrong sizes and a chunk outside its snapshot are refused. */
    CHECK_STATUS(kr_wire_decode_model(buf, sizeof buf - 1, &d), KR_ERR_FORMAT);
    m.first_point = 39999;
    kr_wire_encode_model_header(&m, buf);
    CHECK_STATUS(kr_wire_decode_model(buf, sizeof buf, &d), KR_ERR_FORMAT);
    buf[0] = 'X';
    CHECK_STATUS(kr_wire_decode_model(buf, sizeof buf, &d), KR_ERR_FORMAT);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polls until has_subscriber says `want` (subscriptions travel asynchronously). */
static bool wait_for(kr_publisher *pub, kr_topic topic, bool want)
{
    double end = now_s() + 5;
    while (now_s() < end) {
        if (kr_publisher_has_subscriber(pub, topic) == want) return true;
        usleep(10000);
    }
    return false;
}

KR_TEST(modeltopic, subscription_check)
{
    char ep[512];
    snprintf(ep, sizeof ep, "ipc://%s/model_subs.sock", kr_test_tmpdir());
    kr_publisher_config cfg;
    kr_publisher_config_default(&cfg);
    cfg.endpoint = ep;
    kr_publisher *pub = NULL;
    REQUIRE_OK(kr_publisher_create(&pub, &cfg));
    CHECK(!kr_publisher_has_subscriber(pub, KR_TOPIC_MODEL));
    /* The default topics leave `model` out. */
    kr_subscriber *poses = NULL, *models = NULL;
    REQUIRE_OK(kr_subscriber_create(&poses, ep, 0));
    CHECK(wait_for(pub, KR_TOPIC_POSE, true));
    usleep(100000);
    CHECK(!kr_publisher_has_subscriber(pub, KR_TOPIC_MODEL));
    REQUIRE_OK(kr_subscriber_create(&models, ep, 1u << KR_TOPIC_MODEL));
    CHECK(wait_for(pub, KR_TOPIC_MODEL, true));
    /* Gone again when that subscriber leaves; the pose subscriber stays. */
    kr_subscriber_destroy(&models);
    CHECK(wait_for(pub, KR_TOPIC_MODEL, false));
    CHECK(kr_publisher_has_subscriber(pub, KR_TOPIC_POSE));
    kr_subscriber_destroy(&poses);
    CHECK(wait_for(pub, KR_TOPIC_POSE, false));
    kr_publisher_destroy(&pub);
}

KR_TEST(modeltopic, snapshot_over_loopback)
{
    char ep[512];
    snprintf(ep, sizeof ep, "ipc://%s/model_send.sock", kr_test_tmpdir());
    kr_publisher_config cfg;
    kr_publisher_config_default(&cfg);
    cfg.endpoint = ep;
    kr_publisher *pub = NULL;
    kr_subscriber *sub = NULL;
    REQUIRE_OK(kr_publisher_create(&pub, &cfg));
    REQUIRE_OK(kr_subscriber_create(&sub, ep, 1u << KR_TOPIC_MODEL));
    REQUIRE(wait_for(pub, KR_TOPIC_MODEL, true));

    /* 40000 points: three chunks of at most 16384. */
    enum { N = 40000 };
    float *pts = malloc(3 * N * sizeof *pts), *nrm = malloc(3 * N * sizeof *nrm);
    bool *seen = calloc(N, sizeof *seen);
    REQUIRE(pts && nrm && seen);
    unsigned s = 5;
    for (int i = 0; i < N; i++) {
        pts[3 * i] = (float)(kr_urand(&s) * 3 - 1);
        pts[3 * i + 1] = (float)(kr_urand(&s) * 2 - 1);
        pts[3 * i + 2] = (float)(kr_urand(&s) * 5 + 0.5);
        random_unit(&s, nrm + 3 * i);
    }
    for (int round = 0; round < 2; round++)
        REQUIRE_OK(kr_publisher_send_model(pub, pts, nrm, N, 77 + round));

    /* The grid's step: the longest side (z, 5 m) in 65535 steps. */
    double step = 5.0 / 65535, worst_p = 0, worst_n = 0;
    int chunks = 0, points = 0;
    uint64_t last_seq = 0;
    for (int got = 0; got < 6;) {
        kr_message m;
        kr_status st = kr_subscriber_receive(sub, 3000, &m);
        REQUIRE(st == KR_OK);
        REQUIRE(m.topic == KR_TOPIC_MODEL);
        got++;
        if (got > 1) CHECK_EQ(m.model.seq, last_seq + 1); /* one sequence number per chunk */
        last_seq = m.model.seq;
        CHECK_EQ(m.gap, 0);
        CHECK_EQ(m.model.chunks, 3);
        CHECK_EQ(m.model.total_points, N);
        CHECK_EQ(m.model.snapshot, (uint64_t)(got - 1) / 3);
        CHECK_EQ(m.model.frame, 77 + (uint64_t)(got - 1) / 3);
        CHECK_EQ(m.model.first_point, 16384u * m.model.chunk);
        CHECK_NEAR(m.model.scale, step, step * 1e-3); /* the samples span nearly all 5 m */
        if (got > 3) continue;
        chunks++;
        for (uint32_t i = 0; i < m.model.count; i++) {
            uint32_t k = m.model.first_point + i;
            float p[3], n[3];
            kr_wire_unpack_model_point(m.model.points + 8 * (size_t)i, m.model.origin,
                                       m.model.scale, p, n);
            for (int a = 0; a < 3; a++)
                worst_p = fmax(worst_p, fabs((double)p[a] - pts[3 * k + a]));
            worst_n = fmax(worst_n, angle_deg(n, nrm + 3 * k));
            CHECK(!seen[k]);
            seen[k] = true;
            points++;
        }
    }
    CHECK_EQ(chunks, 3);
    CHECK_EQ(points, N);
    CHECK_LE(worst_p, 0.5 * step + 1e-6);
    CHECK_LE(worst_n, 1.0);
    free(pts);
    free(nrm);
    free(seen);
    kr_subscriber_destroy(&sub);
    kr_publisher_destroy(&pub);
}
