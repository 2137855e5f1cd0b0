/* The `depth` topic (issue 33; docs/PROTOCOL.md, "Depth record"): the
 * record's bytes at the documented offsets, what decoders refuse, and a
 * replay's thumbnails against the frames themselves, read again through the
 * library's source: each sample is the sensor pixel at the step's corner,
 * in millimetres. */
#include "kr_test.h"

#include <math.h>
#include <stdlib.h>

#include "kinreg/source.h"
#include "kinreg/transport.h"

KR_TEST(depthtopic, record_bytes_at_documented_offsets_and_back)
{
    uint16_t mm[6] = {0, 1000, 65535, 4321, 7, 300};
    uint8_t samples[12];
    for (int i = 0; i < 6; i++) {
        samples[2 * i] = (uint8_t)(mm[i] & 0xff);
        samples[2 * i + 1] = (uint8_t)(mm[i] >> 8);
    }
    kr_depth_msg m = {.seq = 0x0102030405060708ull,
                      .frame = 77,
                      .timestamp = 1.5,
                      .width = 3,
                      .height = 2,
                      .step = 4,
                      .samples = samples};
    uint8_t b[64];
    memset(b, 0xEE, sizeof b);
    REQUIRE(kr_wire_encode_depth(&m, b) == 40 + 12);
    CHECK_EQ(kr_wire_depth_size(3, 2), 52);
    CHECK(memcmp(b, "KRDP", 4) == 0);
    CHECK_EQ(kr_le(b + 4, 2), KR_WIRE_VERSION);
    CHECK_EQ(kr_le(b + 6, 2), 6); /* kind: depth */
    CHECK(kr_le(b + 8, 8) == 0x0102030405060708ull);
    CHECK_EQ(kr_le(b + 16, 8), 77);
    CHECK(kr_le(b + 24, 8) == 0x3FF8000000000000ull); /* 1.5 */
    CHECK_EQ(kr_le(b + 32, 2), 3);
    CHECK_EQ(kr_le(b + 34, 2), 2);
    CHECK_EQ(kr_le(b + 36, 2), 4);
    CHECK_EQ(kr_le(b + 38, 2), 0);
    for (int i = 0; i < 6; i++)
        CHECK_EQ(kr_le(b + 40 + 2 * i, 2), mm[i]);

    kr_depth_msg out;
    REQUIRE_OK(kr_wire_decode_depth(b, 52, &out));
    CHECK_EQ(out.frame, 77);
    CHECK_EQ(out.timestamp, 1.5);
    CHECK_EQ(out.width, 3);
    CHECK_EQ(out.height, 2);
    CHECK_EQ(out.step, 4);
    for (int i = 0; i < 6; i++)
        CHECK_EQ(kr_wire_depth_sample(&out, (size_t)i), mm[i]);
    CHECK_STR(kr_topic_name(KR_TOPIC_DEPTH), "depth");
    CHECK_EQ(kr_topic_from_name("depth"), KR_TOPIC_DEPTH);

    /* Refused: a size that does not match the samples, a version before the
     * topic existed, another kind, too many samples to encode. */
    CHECK_STATUS(kr_wire_decode_depth(b, 51, &out), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "51 bytes for 3x2 samples");
    b[4] = 3;
    CHECK_STATUS(kr_wire_decode_depth(b, 52, &out), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "wire version 3");
    b[4] = KR_WIRE_VERSION;
    b[6] = 4;
    CHECK_STATUS(kr_wire_decode_depth(b, 52, &out), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "kind 4");
    m.width = 300, m.height = 300;
    CHECK_EQ(kr_wire_encode_depth(&m, b), 0);
}

/* The pipeline's thumbnails of a TUM replay, compared with the frames read
 * again through a second source on the same directory. */
KR_TEST(depthtopic, replay_thumbnails_are_the_frames_pixels_in_millimetres)
{
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("../shared/data/tum/fr1_xyz_head not present");
    char endpoint[600], cmd[2048], out[4096];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/depth.ipc", kr_test_tmpdir());
    kr_subscriber *sub = NULL;
    REQUIRE_OK(
        kr_subscriber_create(&sub, endpoint, (1u << KR_TOPIC_DEPTH) | (1u << KR_TOPIC_STATUS)));
    /* The run waits for this subscriber; at full speed a thumbnail goes out
     * every 0.5 s, so a loaded machine gives fewer: at least one is asked. */
    snprintf(cmd, sizeof cmd,
             "'%s' run 'tum:%s' --intrinsics fr1 -b cpu -q -n 120 --rate 1 --wait-subscriber 30 "
             "-p '%s' > /dev/null 2>&1 &",
             kr_test_tool(), dir, endpoint);
    REQUIRE(kr_test_shell(cmd, out, sizeof out) == 0);

    enum { MAX_THUMBS = 64 };
    kr_depth_msg got[MAX_THUMBS];
    uint16_t *mm[MAX_THUMBS];
    int n = 0;
    for (;;) {
        kr_message m;
        kr_status s = kr_subscriber_receive(sub, 60000, &m);
        if (s != KR_OK) break;
        if (m.topic == KR_TOPIC_STATUS &&
            (m.status.event == KR_EVENT_STOPPED || m.status.event == KR_EVENT_ERROR))
            break;
        if (m.topic != KR_TOPIC_DEPTH || n == MAX_THUMBS) continue;
        size_t count = (size_t)m.depth.width * m.depth.height;
        mm[n] = malloc(count * sizeof *mm[n]);
        REQUIRE(mm[n] != NULL);
        for (size_t i = 0; i < count; i++)
            mm[n][i] = kr_wire_depth_sample(&m.depth, i);
        got[n++] = m.depth;
    }
    kr_subscriber_destroy(&sub);
    CHECK_MSG(n >= 1, "no depth thumbnail arrived");

    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[700];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    cfg.uri = uri;
    cfg.intrinsics = "fr1";
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    int checked = 0;
    size_t compared = 0, equal = 0;
    uint64_t last_frame = 0;
    for (int k = 0; k < n; k++) {
        CHECK_EQ(got[k].width, 160);
        CHECK_EQ(got[k].height, 120);
        CHECK_EQ(got[k].step, 4);
        CHECK(k == 0 || got[k].frame > last_frame);
        last_frame = got[k].frame;
    }
    while (checked < n) {
        kr_frame f;
        if (kr_source_read(src, &f) != KR_OK) break;
        for (int k = 0; k < n; k++) {
            if (got[k].frame != f.index) continue;
            CHECK_NEAR(got[k].timestamp, f.timestamp, 1e-9);
            for (int y = 0; y < 120; y++)
                for (int x = 0; x < 160; x++) {
                    float z = kr_depth_to_metres(f.raw[(size_t)(4 * y) * f.width + 4 * x],
                                                 f.encoding, f.depth_scale);
                    long want = z > 0 ? lroundf(1000 * z) : 0;
                    compared++;
                    equal += mm[k][y * 160 + x] == want;
                }
            checked++;
        }
        kr_frame_release(&f);
    }
    kr_source_destroy(&src);
    CHECK_EQ(checked, n);
    CHECK_EQ(equal, compared);
    printf("    %d thumbnails, %zu samples, all equal to their frames' pixels\n", n, compared);
    for (int k = 0; k < n; k++)
        free(mm[k]);
}
