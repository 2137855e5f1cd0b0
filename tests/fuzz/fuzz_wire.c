/* The ZeroMQ wire decoders (transport/wire*.c): what `kinreg sub`, the live
 * view and the library's subscriber do with every message body a publisher
 * sends. The decoders take memory, so no file is involved. */
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
    kr_model_msg model;
    (void)kr_wire_decode_model(buf, size, &model);
    kr_depth_msg depth;
    if (kr_wire_decode_depth(buf, size, &depth) == KR_OK)
        for (size_t i = 0; i < (size_t)depth.width * depth.height; i++)
            (void)kr_wire_depth_sample(&depth, i);
    kr_mesh_msg mesh;
    if (kr_wire_decode_mesh(buf, size, &mesh) == KR_OK) {
        /* Every triangle a decoded chunk has names one of its vertices, so
         * a viewer can index with them as they come. */
        for (uint32_t i = 0; i < mesh.faces; i++) {
            uint16_t t[3];
            kr_wire_mesh_face(&mesh, i, t);
            for (int k = 0; k < 3; k++) {
                if (t[k] >= mesh.vertices) abort();
                float p[3], n[3];
                uint8_t rgba[4];
                kr_wire_mesh_vertex(&mesh, t[k], p, n, rgba);
            }
        }
    }
    free(buf);
    return 0;
}
