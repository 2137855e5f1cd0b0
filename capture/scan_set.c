/* Stanford-style .conf scan sets (capture/scan_conf.h). */
#include "kinreg/scan.h"

#include <stdbool.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/files.h"

kr_pose kr_scan_set_pose(const double t[3], kr_quat q)
{
    kr_pose r = kr_pose_from_quat(kr_quat_normalize(q), t);
    kr_pose p = r;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            p.R[3 * i + j] = r.R[3 * j + i];
    return p;
}

void kr_scan_set_to_tq(const kr_pose *pose, double t[3], kr_quat *q)
{
    kr_pose r = *pose;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            r.R[3 * i + j] = pose->R[3 * j + i];
    *q = kr_pose_to_quat(&r);
    memcpy(t, pose->t, sizeof pose->t);
}

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static char *resolve(const char *conf_path, const char *file)
{
    const char *slash = strrchr(conf_path, '/');
    if (file[0] == '/' || !slash) return dup_string(file);
    size_t dir = (size_t)(slash - conf_path) + 1, n = dir + strlen(file) + 1;
    char *p = malloc(n);
    if (p) {
        memcpy(p, conf_path, dir);
        strcpy(p + dir, file);
    }
    return p;
}

kr_status kr_scan_set_read(const char *path, kr_scan_set *out)
{
    if (!path || !out) return kr_error(KR_ERR_INVALID_ARG, "scan conf: needs a path and an output");
    FILE *f = NULL;
    kr_status os = kr_open_input(path, "the scan set", &f);
    if (os != KR_OK) return os;
    kr_scan_set c = {0};
    kr_status s = KR_OK;
    char line[4096];
    int lineno = 0, cap = 0;
    while (s == KR_OK && fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p) continue;
        if (strlen(line) == sizeof line - 1 && line[sizeof line - 2] != '\n') {
            s = kr_error(KR_ERR_FORMAT, "%s:%d: line longer than %zu characters", path, lineno,
                         sizeof line - 2);
            break;
        }
        p[strcspn(p, "\r\n")] = 0;
        bool camera = !strncmp(p, "camera", 6) && isspace((unsigned char)p[6]);
        if (*p == '#' || camera || (!strncmp(p, "mesh", 4) && isspace((unsigned char)p[4]))) {
            /* Kept as they are, for rewriting; a mesh line names a
             * reconstruction's pose, not a scan. */
            if (camera) {
                free(c.camera);
                if (!(c.camera = dup_string(p + 7)))
                    s = kr_error(KR_ERR_NOMEM, "scan conf: no memory");
            }
            char **grown = realloc(c.lines, sizeof *grown * (size_t)(c.n_lines + 1));
            if (grown) c.lines = grown;
            if (!grown || !(c.lines[c.n_lines] = dup_string(p)))
                s = kr_error(KR_ERR_NOMEM, "scan conf: no memory");
            else
                c.n_lines++;
            continue;
        }
        char file[2048];
        double t[3];
        kr_quat q;
        if (strncmp(p, "bmesh", 5) || !isspace((unsigned char)p[5])) {
            char kw[32];
            sscanf(p, "%31s", kw);
            s = kr_error(KR_ERR_FORMAT,
                         "%s:%d: unknown line '%s' (a .conf holds bmesh, mesh and camera lines and "
                         "# comments)",
                         path, lineno, kw);
            break;
        }
        char extra[2];
        if (sscanf(p + 5, "%2047s %lf %lf %lf %lf %lf %lf %lf %1s", file, &t[0], &t[1], &t[2], &q.x,
                   &q.y, &q.z, &q.w, extra) != 8) {
            s = kr_error(KR_ERR_FORMAT, "%s:%d: expected `bmesh FILE tx ty tz qx qy qz qw`", path,
                         lineno);
            break;
        }
        double qn = q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w;
        if (!(qn > 1e-12) || !isfinite(qn) || !isfinite(t[0] + t[1] + t[2])) {
            s = kr_error(KR_ERR_FORMAT, "%s:%d: the pose is not finite or its quaternion is zero",
                         path, lineno);
            break;
        }
        /* Positions in metres, as a trajectory's: a scan 1e8 m away is no
         * scan of this set, and its squares would swamp the solver. */
        if (fabs(t[0]) > 1e8 || fabs(t[1]) > 1e8 || fabs(t[2]) > 1e8) {
            s = kr_error(KR_ERR_FORMAT,
                         "%s:%d: the position (%g %g %g) is out of range (within 1e8 m)", path,
                         lineno, t[0], t[1], t[2]);
            break;
        }
        if (c.n == cap) {
            cap = cap ? 2 * cap : 8;
            kr_scan_set_entry *grown = realloc(c.scans, sizeof *grown * (size_t)cap);
            if (!grown) {
                s = kr_error(KR_ERR_NOMEM, "scan conf: no memory");
                break;
            }
            c.scans = grown;
        }
        kr_scan_set_entry *e = &c.scans[c.n];
        e->file = dup_string(file);
        e->path = resolve(path, file);
        e->pose = kr_scan_set_pose(t, q);
        c.n++;
        if (!e->file || !e->path) s = kr_error(KR_ERR_NOMEM, "scan conf: no memory");
    }
    if (s == KR_OK && ferror(f)) s = kr_error(KR_ERR_IO, "cannot read scan set %s", path);
    fclose(f);
    if (s == KR_OK && c.n == 0)
        s = kr_error(KR_ERR_EMPTY, "%s lists no scan (no `bmesh` line)", path);
    if (s != KR_OK) {
        kr_scan_set_free(&c);
        return s;
    }
    *out = c;
    return KR_OK;
}

kr_status kr_scan_set_write(const char *path, const kr_scan_set *conf, const kr_pose *poses)
{
    kr_output o;
    kr_status s = kr_output_open(&o, path, "the scan set", false);
    if (s != KR_OK) return s;
    FILE *f = o.f;
    if (conf->n_lines)
        for (int k = 0; k < conf->n_lines; k++)
            fprintf(f, "%s\n", conf->lines[k]);
    else if (conf->camera)
        fprintf(f, "camera %s\n", conf->camera);
    for (int k = 0; k < conf->n; k++) {
        double t[3];
        kr_quat q;
        kr_scan_set_to_tq(&poses[k], t, &q);
        fprintf(f, "bmesh %s %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", conf->scans[k].file, t[0], t[1],
                t[2], q.x, q.y, q.z, q.w);
    }
    return kr_output_commit(&o);
}

void kr_scan_set_free(kr_scan_set *conf)
{
    if (!conf) return;
    for (int k = 0; k < conf->n; k++) {
        free(conf->scans[k].file);
        free(conf->scans[k].path);
    }
    free(conf->scans);
    free(conf->camera);
    for (int k = 0; k < conf->n_lines; k++)
        free(conf->lines[k]);
    free(conf->lines);
    memset(conf, 0, sizeof *conf);
}
