/* Stanford-style scan sets (`.conf`): lines `bmesh FILE tx ty tz qx qy qz qw`
 * (a `camera` line and blank lines are kept for rewriting). A scan point p
 * maps into the common frame as R(q)ᵀ·p + t (DESIGN.md §9), so the scan's
 * pose T_world_scan is (R(q)ᵀ, t). */
#ifndef KINREG_CAPTURE_SCAN_CONF_H
#define KINREG_CAPTURE_SCAN_CONF_H

#include <stddef.h>

#include "kinreg/pose.h"
#include "kinreg/status.h"

typedef struct {
    char *file;   /* as written in the .conf */
    char *path;   /* resolved against the .conf's folder */
    kr_pose pose; /* T_world_scan */
} kr_scan_conf_entry;

typedef struct {
    kr_scan_conf_entry *scans;
    int n;
    char *camera; /* the `camera` line without its keyword, or NULL */
} kr_scan_conf;

/* Reads a .conf. KR_ERR_IO when it cannot be opened, KR_ERR_FORMAT (naming
 * the line) for a malformed bmesh line, KR_ERR_EMPTY when it lists no scan. */
kr_status kr_scan_conf_read(const char *path, kr_scan_conf *out);
/* Writes the set with the given poses (one per scan) in the same format. */
kr_status kr_scan_conf_write(const char *path, const kr_scan_conf *conf, const kr_pose *poses);
void kr_scan_conf_free(kr_scan_conf *conf);

/* A scan's pose as the .conf writes it: t and q with p ↦ R(q)ᵀ p + t. */
kr_pose kr_scan_conf_pose(const double t[3], kr_quat q);
void kr_scan_conf_to_tq(const kr_pose *pose, double t[3], kr_quat *q);

#endif
