/* TUM-format trajectories: `timestamp tx ty tz qx qy qz qw` per line,
 * camera-to-world, '#' comments. Reading builds into a private trajectory and
 * swaps it in only on success, so a failed read leaves the caller's untouched. */
#include "kinreg/trajectory.h"
#include "core/files.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kr_status kr_trajectory_push(kr_trajectory *traj, double stamp, const kr_pose *pose)
{
    if (!traj || !pose)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_trajectory_push: trajectory and pose must not be NULL");
    if (traj->count == traj->capacity) {
        size_t cap = traj->capacity ? 2 * traj->capacity : 64;
        /* Grow both arrays before publishing either, so a failure leaves the
         * trajectory exactly as it was. */
        double *stamps = malloc(cap * sizeof *stamps);
        kr_pose *poses = malloc(cap * sizeof *poses);
        if (!stamps || !poses) {
            free(stamps);
            free(poses);
            return kr_error(KR_ERR_NOMEM,
                            "kr_trajectory_push: cannot grow a trajectory to %zu poses", cap);
        }
        if (traj->count) {
            memcpy(stamps, traj->stamps, traj->count * sizeof *stamps);
            memcpy(poses, traj->poses, traj->count * sizeof *poses);
        }
        free(traj->stamps);
        free(traj->poses);
        traj->stamps = stamps;
        traj->poses = poses;
        traj->capacity = cap;
    }
    traj->stamps[traj->count] = stamp;
    traj->poses[traj->count] = *pose;
    traj->count++;
    return KR_OK;
}

void kr_trajectory_free(kr_trajectory *traj)
{
    if (!traj) return;
    free(traj->stamps);
    free(traj->poses);
    memset(traj, 0, sizeof *traj);
}

/* What a trajectory line may hold, like an option's range (issue 30): stamps
 * are seconds on some clock (Unix time is 1.7e9; 1e10 is the year 2286),
 * positions metres up to 1e8 (UTM coordinates are below 1e7). A value past
 * these is no pose, and squared in the alignment it would overflow. */
#define STAMP_MAX 1e10
#define POSITION_MAX 1e8

/* Parses one non-comment line into 8 numbers; false when it is not exactly
 * 8 finite numbers separated by whitespace. */
static bool parse_values(const char *line, double v[8])
{
    const char *p = line;
    for (int i = 0; i < 8; i++) {
        char *end;
        errno = 0;
        v[i] = strtod(p, &end);
        if (end == p || errno == ERANGE || !isfinite(v[i])) return false;
        p = end;
    }
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return *p == '\0';
}

static bool blank_or_comment(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return *line == '#' || *line == '\0' || *line == '\n' || *line == '\r';
}

kr_status kr_trajectory_read_tum(const char *path, kr_trajectory *traj)
{
    if (!path || !traj)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_trajectory_read_tum: path and trajectory must not be NULL");
    char why[256];
    /* A named pipe or device would hang or never end: regular files only. */
    FILE *f = kr_fopen_regular(path, why, sizeof why);
    if (!f)
        return kr_error(KR_ERR_IO, "cannot open trajectory %s: %s (give a TUM trajectory file)",
                        path, why);
    kr_trajectory tmp = {0};
    kr_status st = KR_OK;
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        if (blank_or_comment(line)) continue;
        double v[8];
        if (!parse_values(line, v)) {
            st = kr_error(KR_ERR_FORMAT,
                          "%s:%u: malformed trajectory line (expected 'timestamp tx ty tz qx qy "
                          "qz qw', 8 numbers): fix or remove the line",
                          path, lineno);
            break;
        }
        if (fabs(v[0]) > STAMP_MAX || fabs(v[1]) > POSITION_MAX || fabs(v[2]) > POSITION_MAX ||
            fabs(v[3]) > POSITION_MAX) {
            st = kr_error(KR_ERR_FORMAT,
                          "%s:%u: %s %g is out of range (timestamps within %g s, positions "
                          "within %g m): the line is not a 'timestamp tx ty tz qx qy qz qw' pose",
                          path, lineno, fabs(v[0]) > STAMP_MAX ? "timestamp" : "position",
                          fabs(v[0]) > STAMP_MAX      ? v[0]
                          : fabs(v[1]) > POSITION_MAX ? v[1]
                          : fabs(v[2]) > POSITION_MAX ? v[2]
                                                      : v[3],
                          STAMP_MAX, POSITION_MAX);
            break;
        }
        kr_quat q = {v[4], v[5], v[6], v[7]};
        double qn = sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w);
        /* Files carry rounded quaternions (norm slightly off 1); only a
         * quaternion far from unit length means a broken line. */
        if (fabs(qn - 1.0) > 1e-2) {
            st =
                kr_error(KR_ERR_FORMAT,
                         "%s:%u: quaternion (%g %g %g %g) has norm %g, expected 1: the line is not "
                         "a 'timestamp tx ty tz qx qy qz qw' pose",
                         path, lineno, q.x, q.y, q.z, q.w, qn);
            break;
        }
        kr_pose pose = kr_pose_from_quat(q, v + 1);
        st = kr_trajectory_push(&tmp, v[0], &pose);
        if (st != KR_OK) break;
    }
    if (st == KR_OK && ferror(f))
        st = kr_error(KR_ERR_IO, "%s:%u: read error: %s", path, lineno, strerror(errno));
    free(line);
    fclose(f);
    if (st != KR_OK) {
        kr_trajectory_free(&tmp);
        return st;
    }
    kr_trajectory_free(traj);
    *traj = tmp;
    return KR_OK;
}

void kr_trajectory_format_line(double stamp, const kr_pose *pose, char *buf, size_t size)
{
    if (!buf || size == 0) return;
    kr_quat q = kr_pose_to_quat(pose);
    /* Nine decimals keep nanometres and ~1e-9 rad: far below any sensor's
     * precision, so a write/read round trip loses nothing that matters. */
    snprintf(buf, size, "%.6f %.9f %.9f %.9f %.9f %.9f %.9f %.9f", stamp, pose->t[0], pose->t[1],
             pose->t[2], q.x, q.y, q.z, q.w);
}

kr_status kr_trajectory_write_tum(const char *path, const kr_trajectory *traj)
{
    if (!path || !traj)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_trajectory_write_tum: path and trajectory must not be NULL");
    /* Whole or not at all: a failure leaves the file that was there. */
    kr_output o;
    kr_status st = kr_output_open(&o, path, "the trajectory", false);
    if (st != KR_OK) return st;
    fputs("# timestamp tx ty tz qx qy qz qw (camera-to-world, metres)\n", o.f);
    char buf[256];
    for (size_t i = 0; i < traj->count && !ferror(o.f); i++) {
        kr_trajectory_format_line(traj->stamps[i], &traj->poses[i], buf, sizeof buf);
        fputs(buf, o.f);
        fputc('\n', o.f);
    }
    return kr_output_commit(&o);
}
