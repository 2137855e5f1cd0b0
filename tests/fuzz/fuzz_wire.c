/* The ZeroMQ wire decoder (transport/wire.c): what `kinreg sub` and the
 * library's subscriber do with every message body a publisher sends. The
 * decoder takes memory, so no file is involved. */
#include <stdlib.h>
#include <string.h>

#include "kinreg/transport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes, so that ASan catches any overread. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    kr_pose_msg pose;
    if (kr_wire_decode_pose(buf, size, &pose) == KR_OK) {
        /* What decodes encodes back and decodes to the same message. */
        uint8_t again[512];
        if (kr_wire_pose_size() > sizeof again) abort();
        kr_pose_msg back;
        size_t n = kr_wire_encode_pose(&pose, again);
        if (kr_wire_decode_pose(again, n, &back) != KR_OK || back.seq != pose.seq ||
            back.frame_index != pose.frame_index)
            abort();
    }
    kr_status_msg status;
    if (kr_wire_decode_status(buf, size, &status) == KR_OK) {
        /* The text is always a C string, whatever the sender put there. */
        if (strnlen(status.text, sizeof status.text) == sizeof status.text) abort();
    }
    free(buf);
    return 0;
}
