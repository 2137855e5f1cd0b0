/* kinreg — Kinect v1 sensors through libfreenect: depth modes and the list of
 * attached devices. Frames come through the source interface (source.h,
 * URI "kinect[:N | :SERIAL]"). Under libfreenect's fakenect library
 * (LD_LIBRARY_PATH=/usr/lib/<arch>/fakenect FAKENECT_PATH=DIR) the same
 * calls replay a recorded dump as if it were a sensor. */
#ifndef KINREG_KINECT_H
#define KINREG_KINECT_H

#include <stdbool.h>

#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a live Kinect delivers (libfreenect's depth formats). */
typedef enum {
    KR_KINECT_DEPTH_11BIT = 0,     /* raw disparity, IR camera; kinreg converts it (frame.h) */
    KR_KINECT_DEPTH_MM = 1,        /* millimetres, IR camera, converted by libfreenect */
    KR_KINECT_DEPTH_REGISTERED = 2 /* millimetres, registered to the colour camera */
} kr_kinect_depth_mode;

#define KR_KINECT_MAX_LISTED 16

typedef struct {
    int count;                          /* devices attached (may exceed the entries listed) */
    char serial[KR_KINECT_MAX_LISTED][64]; /* camera serials by index, "" when unknown */
    bool replay;                        /* libfreenect is fakenect, replaying replay_path */
    char replay_path[512];
} kr_kinect_list;

/* Lists attached Kinects. KR_OK with count 0 when none is attached;
 * KR_ERR_NO_SENSOR when USB cannot be accessed at all; KR_ERR_UNSUPPORTED in
 * a build without libfreenect. */
KR_API kr_status kr_kinect_enumerate(kr_kinect_list *out);

/* Parses "11bit", "mm", "registered". */
KR_API kr_status kr_kinect_depth_mode_parse(const char *text, kr_kinect_depth_mode *out);
KR_API const char *kr_kinect_depth_mode_name(kr_kinect_depth_mode mode);

/* What to check when no Kinect answers: USB, power, the udev rule, groups. */
#define KR_KINECT_HINT                                                                             \
    "check that the Kinect is plugged into USB and into its own power adapter (lsusb lists "        \
    "045e:02ae 'Xbox NUI Camera'), that libfreenect's udev rule is installed "                     \
    "(/lib/udev/rules.d/60-libfreenect0.5.rules, Debian package libfreenect0.5) and that your "    \
    "user may use it (member of the plugdev group; replug the sensor after installing the rule)"

#ifdef __cplusplus
}
#endif
#endif
