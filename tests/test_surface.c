/* The surface volume and its mesh (kinreg/surface.h), against independent
 * expectations: the marching-cubes cases cut exactly the edges whose
 * corners disagree; an analytic sphere's distance field meshes into a
 * closed, consistently oriented surface of genus 0 on the sphere, with the
 * sphere's volume and outward normals; frames of the synthetic scene fused
 * at their true poses give a mesh on the scene's surfaces (its own distance
 * functions) that covers what the frames saw. */
#include "kr_test.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture/synthetic_scene.h"
#include "core/ply.h"
#include "fusion/surface/mc_cases.h"
#include "fusion/surface/surface_internal.h"
#include "gpu/engine.h"
#include "kinreg/kdtree.h"
#include "kinreg/preprocess.h"
#include "kinreg/surface.h"
#include "kinreg/transport.h"
#include "scene_distance.h"

KR_TEST(surface, cases_cut_the_edges_whose_corners_disagree)
{
    const kr_mc_table *t = kr_mc_table_get();
    for (unsigned c = 0; c < 256; c++) {
        int cut = 0, used[12] = {0};
        for (int e = 0; e < 12; e++)
            cut += (c >> t->edge_corner[e][0] & 1) != (c >> t->edge_corner[e][1] & 1);
        for (int i = 0; i < 3 * t->triangles[c]; i++) {
            int e = t->edges[c][i];
            CHECK_MSG((c >> t->edge_corner[e][0] & 1) != (c >> t->edge_corner[e][1] & 1),
                      "case %u uses edge %d, whose corners agree", c, e);
            used[e] = 1;
        }
        int n_used = 0;
        for (int e = 0; e < 12; e++)
            n_used += used[e];
        CHECK_MSG(n_used == cut, "case %u: %d edges cut, %d used", c, cut, n_used);
        /* A loop of n cut edges makes n - 2 triangles, and loops have 3 or more. */
        CHECK_MSG(t->triangles[c] <= (cut > 0 ? cut - 2 : 0) &&
                      (cut == 0) == (t->triangles[c] == 0),
                  "case %u: %d triangles for %d cut edges", c, t->triangles[c], cut);
    }
}

/* A volume holding the signed distance to a sphere (centre c, radius r),
 * truncated at tau, in every block of the sphere's box. */
static kr_surface *sphere_volume(const double c[3], double r, float voxel, float tau)
{
    kr_surface_config cfg;
    kr_surface_config_default(&cfg);
    cfg.voxel_size = voxel;
    kr_surface *s = NULL;
    if (kr_surface_create(&s, &cfg) != KR_OK) return NULL;
    double block = voxel * KR_SURFACE_BLOCK;
    int32_t lo[3], hi[3];
    for (int k = 0; k < 3; k++) {
        lo[k] = (int32_t)floor((c[k] - r - 2 * tau) / block);
        hi[k] = (int32_t)floor((c[k] + r + 2 * tau) / block);
    }
    for (int32_t bz = lo[2]; bz <= hi[2]; bz++)
        for (int32_t by = lo[1]; by <= hi[1]; by++)
            for (int32_t bx = lo[0]; bx <= hi[0]; bx++) {
                int32_t bc[3] = {bx, by, bz};
                long b = kr_surface_find_or_add(s, bc);
                if (b < 0) {
                    kr_surface_destroy(&s);
                    return NULL;
                }
                kr_surface_voxel *v = kr_surface_block_voxels(s, (size_t)b);
                for (int i = 0; i < KR_SURFACE_BLOCK_VOXELS; i++) {
                    int l[3] = {i % KR_SURFACE_BLOCK, i / KR_SURFACE_BLOCK % KR_SURFACE_BLOCK,
                                i / (KR_SURFACE_BLOCK * KR_SURFACE_BLOCK)};
                    double p[3], d2 = 0;
                    for (int k = 0; k < 3; k++) {
                        p[k] = ((double)bc[k] * KR_SURFACE_BLOCK + l[k] + 0.5) * voxel - c[k];
                        d2 += p[k] * p[k];
                    }
                    v[i].d = (float)fmax(-tau, fmin(tau, sqrt(d2) - r));
                    v[i].w = 1.0f;
                }
            }
    return s;
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Every directed edge once and its reverse present: closed and consistently
 * oriented. Returns the number of undirected edges, or 0 when not. */
static size_t closed_edges(const kr_mesh *m)
{
    size_t n = 3 * m->n_faces;
    uint64_t *e = malloc(n * sizeof *e);
    if (!e) return 0;
    for (size_t f = 0; f < m->n_faces; f++)
        for (int k = 0; k < 3; k++)
            e[3 * f + k] = (uint64_t)m->faces[3 * f + k] << 32 | m->faces[3 * f + (k + 1) % 3];
    qsort(e, n, sizeof *e, by_u64);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && e[i] == e[i - 1]) bad++;
        uint64_t rev = e[i] << 32 | e[i] >> 32;
        if (!bsearch(&rev, e, n, sizeof *e, by_u64)) bad++;
    }
    free(e);
    CHECK_MSG(bad == 0, "%zu directed edges repeated or without their reverse", bad);
    return bad ? 0 : n / 2;
}

/* How a mesh fits the sphere (centre c, radius r): the radial error of its
 * vertices, the worst cosine between a vertex normal and the outward
 * radius, and the volume it encloses (the signed tetrahedra from the
 * origin, by the divergence theorem) over the sphere's; after checking it
 * is closed, consistently oriented and of genus 0. */
typedef struct {
    double worst, mean, worst_normal, volume;
} sphere_fit;

static sphere_fit fit_sphere(const kr_mesh *m, const double c[3], double r)
{
    size_t edges = closed_edges(m);
    CHECK_EQ((long)m->n_vertices - (long)edges + (long)m->n_faces, 2); /* a sphere's Euler number */
    sphere_fit fit = {0, 0, 1, 0};
    for (size_t i = 0; i < m->n_vertices; i++) {
        double p[3], len = 0, dot = 0;
        for (int k = 0; k < 3; k++) {
            p[k] = m->xyz[3 * i + k] - c[k];
            len += p[k] * p[k];
        }
        len = sqrt(len);
        for (int k = 0; k < 3; k++)
            dot += m->normals[3 * i + k] * p[k] / len;
        fit.worst = fmax(fit.worst, fabs(len - r));
        fit.mean += fabs(len - r) / (double)m->n_vertices;
        fit.worst_normal = fmin(fit.worst_normal, dot);
    }
    for (size_t f = 0; f < m->n_faces; f++) {
        const float *a = m->xyz + 3 * m->faces[3 * f], *b = m->xyz + 3 * m->faces[3 * f + 1],
                    *d = m->xyz + 3 * m->faces[3 * f + 2];
        fit.volume += (a[0] * ((double)b[1] * d[2] - (double)b[2] * d[1]) -
                       a[1] * ((double)b[0] * d[2] - (double)b[2] * d[0]) +
                       a[2] * ((double)b[0] * d[1] - (double)b[1] * d[0])) /
                      6.0;
    }
    fit.volume /= 4.0 / 3.0 * M_PI * r * r * r;
    return fit;
}

KR_TEST(surface, sphere_meshes_closed_round_and_outward)
{
    const double c[3] = {0.013, -0.021, 0.007}, r = 0.1;
    const float voxel = 0.01f;
    kr_surface *s = sphere_volume(c, r, voxel, 4 * voxel);
    REQUIRE(s != NULL);
    kr_mesh m = {0};
    REQUIRE_OK(kr_surface_extract(s, &m));
    sphere_fit fit = fit_sphere(&m, c, r);
    printf("    sphere r %.2f at %.0f mm voxels: %zu vertices, %zu triangles, |r| error mean %.3f "
           "mm, worst %.3f mm, volume %.4f of the sphere's, worst normal cos %.5f\n",
           r, voxel * 1e3, m.n_vertices, m.n_faces, 1e3 * fit.mean, 1e3 * fit.worst, fit.volume,
           fit.worst_normal);
    /* Linear interpolation of a distance with curvature 1/r over a voxel h
     * errs by about h²/(8r) where the edge crosses square on, more where it
     * grazes: a twentieth of a voxel on average, a fifth at worst. */
    CHECK(fit.mean < 0.05 * voxel);
    CHECK(fit.worst < 0.2 * voxel);
    CHECK(fabs(fit.volume - 1) < 0.01);
    CHECK(fit.worst_normal > 0.99);
    kr_mesh_free(&m);

    /* The same mesh, bit for bit, on one thread. */
    kr_mesh one = {0};
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    kr_status st = kr_surface_extract(s, &one);
    omp_set_num_threads(threads);
    REQUIRE_OK(st);
    kr_mesh again = {0};
    REQUIRE_OK(kr_surface_extract(s, &again));
    CHECK(one.n_vertices == again.n_vertices && one.n_faces == again.n_faces);
    if (one.n_faces == again.n_faces && one.n_vertices == again.n_vertices) {
        CHECK(!memcmp(one.faces, again.faces, 3 * one.n_faces * sizeof *one.faces));
        CHECK(!memcmp(one.xyz, again.xyz, 3 * one.n_vertices * sizeof *one.xyz));
    }
    kr_mesh_free(&one);
    kr_mesh_free(&again);
    kr_surface_destroy(&s);
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What the frames of synthetic:1 over `seconds` saw: a sample of their
 * measured points (at the true poses) that lie on the scene within `near`,
 * up to `cap` of them. With a surface, also fuses every frame into it;
 * *fuse_s receives the time kr_surface_integrate took. */
static size_t synthetic_frames(double seconds, float near, kr_surface *s, float *seen, size_t cap,
                               double *fuse_s, kr_synth_scene *scene)
{
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.uri = "synthetic:1";
    sc.duration_s = seconds;
    /* KR_SURFACE_NO_COLOUR: depth alone, as a peer without colour fuses it
     * (bench/surface_compare.sh). */
    sc.colour = !getenv("KR_SURFACE_NO_COLOUR");
    kr_source *src = NULL;
    kr_device *dev = NULL;
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = KR_BACKEND_CPU;
    if (kr_source_create(&src, &sc) != KR_OK || kr_device_create(&dev, &dc) != KR_OK) {
        kr_test_fail(__FILE__, __LINE__, "cannot open the synthetic source: %s", kr_last_error());
        kr_source_destroy(&src);
        return 0;
    }
    kr_synth_scene_build(1, scene);
    const kr_trajectory *gt = kr_source_groundtruth(src);
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    pc.levels = 1;
    kr_intrinsics k = kr_source_intrinsics(src);
    kr_pyramid pyr = {0};
    size_t n_seen = 0;
    kr_frame frame;
    void *pinned = NULL;
    size_t pinned_bytes = 0;
    *fuse_s = 0;
    while (kr_source_read(src, &frame) == KR_OK) {
        const kr_pose *pose = &gt->poses[frame.index];
        kr_status st = kr_preprocess(dev, &pc, &frame, &k, &pyr);
        uint8_t *rgb = frame.rgb;
        frame.rgb = NULL;
        kr_frame_release(&frame);
        /* On a device the cloud and its colour come from page-locked
         * memory, as the surface thread of kinreg run hands them over
         * (pipeline/mesher.c). */
        kr_cloud cloud = pyr.level[0];
        size_t pixels = (size_t)cloud.width * cloud.height, bytes = 15 * pixels;
        if (st == KR_OK && s && s->gpu && bytes > pinned_bytes) {
            kr_gpu_host_free(pinned);
            pinned = NULL;
            pinned_bytes = 0;
            if ((st = kr_gpu_host_alloc(&pinned, bytes)) == KR_OK) pinned_bytes = bytes;
        }
        uint8_t *colour = rgb;
        if (st == KR_OK && s && s->gpu) {
            memcpy(pinned, cloud.points, 12 * pixels);
            cloud.points = pinned;
            if (rgb) colour = memcpy((uint8_t *)pinned + 12 * pixels, rgb, 3 * pixels);
        }
        double t0 = kr_now();
        if (st == KR_OK && s) st = kr_surface_integrate(s, &cloud, colour, pose);
        *fuse_s += kr_now() - t0;
        free(rgb);
        if (st != KR_OK) {
            kr_test_fail(__FILE__, __LINE__, "frame %llu: %s", (unsigned long long)frame.index,
                         kr_last_error());
            break;
        }
        const kr_cloud *c = &pyr.level[0];
        for (int i = 0; i < c->width * c->height && n_seen < cap; i += 211) {
            const float *p = c->points + 3 * i;
            if (p[0] != p[0] || p[2] > 3.0f) continue;
            double pc3[3] = {p[0], p[1], p[2]}, w[3];
            kr_pose_apply(pose, pc3, w);
            if (scene_distance(scene, w, NULL) > near) continue;
            for (int a = 0; a < 3; a++)
                seen[3 * n_seen + a] = (float)w[a];
            n_seen++;
        }
    }
    kr_pyramid_free(&pyr);
    kr_gpu_host_free(pinned);
    kr_device_destroy(&dev);
    kr_source_destroy(&src);
    return n_seen;
}

enum { SEEN_CAP = 1 << 16 };

/* synthetic_frames into a new array of SEEN_CAP points (*n_seen of them
 * filled); NULL, with the case failed, when it cannot be had. */
static float *seen_points(double seconds, float near, kr_surface *s, size_t *n_seen, double *fuse_s,
                          kr_synth_scene *scene)
{
    float *seen = malloc(3 * (size_t)SEEN_CAP * sizeof *seen);
    if (!seen) {
        kr_test_fail(__FILE__, __LINE__, "out of memory");
        return NULL;
    }
    *n_seen = synthetic_frames(seconds, near, s, seen, SEEN_CAP, fuse_s, scene);
    return seen;
}

typedef struct {
    double mean, median, p95; /* vertex to scene, metres */
    double cover;             /* fraction of seen points with a vertex within `within` */
    double back;              /* mean distance from a seen point to its nearest vertex */
} mesh_score;

/* Scores mesh vertices against the scene's own distance functions. */
static mesh_score score_vertices(const kr_synth_scene *scene, const float *xyz, size_t n,
                                 const float *seen, size_t n_seen, float within)
{
    mesh_score r = {NAN, NAN, NAN, 0, NAN};
    double *d = malloc((n ? n : 1) * sizeof *d), sum = 0;
    kr_kdtree *tree = NULL;
    if (!d || n == 0 || kr_kdtree_build(&tree, xyz, NULL, n) != KR_OK) {
        free(d);
        return r;
    }
    for (size_t i = 0; i < n; i++) {
        double p[3] = {xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]};
        d[i] = scene_distance(scene, p, NULL);
        sum += d[i];
    }
    qsort(d, n, sizeof *d, by_double);
    r.mean = sum / (double)n;
    r.median = d[n / 2];
    r.p95 = d[n * 95 / 100];
    size_t covered = 0;
    double back = 0;
    for (size_t i = 0; i < n_seen; i++) {
        float d2;
        kr_kdtree_nearest(tree, seen + 3 * i, &d2);
        covered += d2 <= within * within;
        back += sqrt(d2);
    }
    r.cover = n_seen ? (double)covered / (double)n_seen : 0;
    r.back = n_seen ? back / (double)n_seen : NAN;
    kr_kdtree_destroy(&tree);
    free(d);
    return r;
}

static void print_score(const char *what, const mesh_score *r, size_t n_seen, float within)
{
    /* The seen points' side measures to the nearest vertex, not the nearest
     * point of a triangle: it counts the vertices' spacing too. */
    printf("    %s: vertex to scene mean %.2f mm, median %.2f, 95th %.2f; %.2f %% of %zu seen "
           "points within %.0f mm of a vertex, %.2f mm to the nearest on average; Chamfer "
           "(the two means' average) %.2f mm\n",
           what, 1e3 * r->mean, 1e3 * r->median, 1e3 * r->p95, 100 * r->cover, n_seen,
           1e3 * within, 1e3 * r->back, 0.5e3 * (r->mean + r->back));
}

/* The share of the mesh's vertices whose colour is their nearest scene
 * element's (kr_synth_colour), every channel within `tolerance`. */
static double colour_agreement(const kr_synth_scene *scene, const kr_mesh *m, int tolerance)
{
    size_t right = 0;
    for (size_t i = 0; i < m->n_vertices; i++) {
        double p[3] = {m->xyz[3 * i], m->xyz[3 * i + 1], m->xyz[3 * i + 2]};
        int face, prim = -1;
        double best = room_distance(scene, p, &face);
        for (int k = 0; k < scene->count; k++) {
            double d = prim_distance(&scene->prims[k], p);
            if (d < best) best = d, prim = k;
        }
        uint8_t want[3];
        kr_synth_colour(prim, face, want);
        bool ok = true;
        for (int k = 0; k < 3; k++)
            ok = ok && abs((int)m->rgb[3 * i + k] - (int)want[k]) <= tolerance;
        right += ok;
    }
    return m->n_vertices ? (double)right / (double)m->n_vertices : 0;
}

/* Frames of the synthetic scene fused at their true poses. The mesh's
 * vertices lie on the scene (its distance functions, not the renderer's),
 * and every surface point a frame measured has the mesh within a voxel:
 * holes only where nothing was seen. KR_SURFACE_VOXEL and KR_SURFACE_SECONDS
 * run it at other sizes, KR_SURFACE_CUDA on the CUDA engine
 * (docs/BENCHMARKS.md's figures). */
KR_TEST(surface, synthetic_scene_meshes_on_what_was_seen)
{
    const char *ev = getenv("KR_SURFACE_VOXEL"), *es = getenv("KR_SURFACE_SECONDS");
    const float voxel = ev ? (float)atof(ev) : 0.01f;
    kr_surface_config cfg;
    kr_surface_config_default(&cfg);
    cfg.voxel_size = voxel;
    kr_surface *s = NULL;
    REQUIRE_OK(kr_surface_create(&s, &cfg));
    kr_device *gpu = NULL;
    if (getenv("KR_SURFACE_CUDA")) { /* the benchmark's device figures */
        kr_device_config dc;
        kr_device_config_default(&dc);
        dc.backend = KR_BACKEND_CUDA;
        REQUIRE_OK(kr_device_create(&gpu, &dc));
        REQUIRE_OK(kr_surface_fuse_on(s, gpu));
    }
    kr_synth_scene scene;
    double fuse_s;
    size_t n_seen = 0;
    float *seen = seen_points(es ? atof(es) : 1.0, 0.25f * voxel, s, &n_seen, &fuse_s, &scene);
    REQUIRE(seen != NULL);
    kr_mesh m = {0};
    double t0 = kr_now();
    kr_status st = kr_surface_extract(s, &m);
    double mesh_s = kr_now() - t0;
    kr_surface_stats ss = kr_surface_stats_get(s);
    kr_surface_destroy(&s);
    kr_device_destroy(&gpu);
    if (st != KR_OK) free(seen);
    REQUIRE_OK(st);
    mesh_score r = score_vertices(&scene, m.xyz, m.n_vertices, seen, n_seen, voxel);
    printf("    %llu frames at %.0f mm voxels: %zu blocks, fusing %.2f ms a frame, meshing %.0f "
           "ms; %zu vertices, %zu triangles\n",
           (unsigned long long)ss.frames, voxel * 1e3, ss.blocks, 1e3 * fuse_s / (double)ss.frames,
           1e3 * mesh_s, m.n_vertices, m.n_faces);
    print_score("kinreg", &r, n_seen, voxel);
    /* Colour: the scene's own, except where two differently coloured
     * surfaces meet within the colour band (two voxels) of a vertex. */
    if (!getenv("KR_SURFACE_NO_COLOUR")) {
        REQUIRE(m.rgb != NULL);
        double coloured = colour_agreement(&scene, &m, 24);
        printf("    colour: %.1f %% of the vertices within 24 of their surface's colour\n",
               100 * coloured);
        CHECK(coloured > 0.9);
    }
    /* The sensor's noise at 2-3 m is a centimetre a frame; averaged over the
     * frames the surface is within a fraction of a voxel of the truth, or,
     * at fine voxels, of the floor the depth quantisation leaves (the
     * quantisation error repeats between nearby views, so averaging does not
     * remove it: 2 mm mean, 9 mm at the 95th percentile at 5 mm voxels). */
    CHECK(r.median < fmax(0.2 * voxel, 0.001));
    CHECK(r.mean < fmax(0.3 * voxel, 0.0025));
    CHECK(r.p95 < fmax(voxel, 0.01));
    CHECK(n_seen > 1000);
    CHECK(r.cover > 0.98);
    free(seen);
    kr_mesh_free(&m);
}

/* A mesh in a tracker's world (the first frame's camera) moved into the
 * scene's, by the first frame's true pose. */
static void to_scene(kr_ply_points *ply)
{
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.uri = "synthetic:1";
    kr_source *src = NULL;
    if (kr_source_create(&src, &sc) != KR_OK) {
        kr_test_fail(__FILE__, __LINE__, "synthetic source: %s", kr_last_error());
        return;
    }
    const kr_pose first = kr_source_groundtruth(src)->poses[0];
    kr_source_destroy(&src);
    for (size_t i = 0; i < ply->n; i++) {
        double p[3] = {ply->xyz[3 * i], ply->xyz[3 * i + 1], ply->xyz[3 * i + 2]}, w[3];
        kr_pose_apply(&first, p, w);
        for (int k = 0; k < 3; k++)
            ply->xyz[3 * i + k] = (float)w[k];
    }
}

/* Scores another tool's mesh of the same frames the same way
 * (bench/surface_compare.sh): KR_SURFACE_SCORE names its PLY, and
 * KR_SURFACE_SECONDS and KR_SURFACE_VOXEL say which frames and what voxel
 * it was made from; with KR_SURFACE_TRACKED set the mesh is in a tracker's
 * world (kinreg run --mesh), the first frame's camera. Skipped without it. */
KR_TEST(surface, score_mesh_file)
{
    const char *path = getenv("KR_SURFACE_SCORE"), *es = getenv("KR_SURFACE_SECONDS"),
               *ev = getenv("KR_SURFACE_VOXEL");
    if (!path) {
        kr_test_skip("KR_SURFACE_SCORE names no mesh to score (bench/surface_compare.sh)");
        return;
    }
    const float voxel = ev ? (float)atof(ev) : 0.005f;
    kr_ply_points ply;
    REQUIRE_OK(kr_ply_read(path, &ply));
    if (getenv("KR_SURFACE_TRACKED")) to_scene(&ply);
    kr_synth_scene scene;
    double fuse_s;
    size_t n_seen = 0;
    float *seen = seen_points(es ? atof(es) : 5.0, 0.25f * voxel, NULL, &n_seen, &fuse_s, &scene);
    REQUIRE(seen != NULL);
    mesh_score r = score_vertices(&scene, ply.xyz, ply.n, seen, n_seen, voxel);
    char what[512];
    snprintf(what, sizeof what, "%s (%zu vertices)", path, ply.n);
    print_score(what, &r, n_seen, voxel);
    CHECK(n_seen > 1000);
    free(seen);
    kr_ply_points_free(&ply);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* kinreg mesh end to end: a replay at its ground truth becomes a PLY mesh;
 * bad requests get one line and the usage status; poses that fit no frame
 * fail with a message and write nothing. */
KR_TEST(surface, mesh_command)
{
    char out[8192], args[2048], path[512], traj[512];
    snprintf(path, sizeof path, "%s/mesh.ply", kr_test_tmpdir());
    snprintf(args, sizeof args, "mesh synthetic --duration 0.5 --groundtruth --voxel 0.02 -q -o %s",
             path);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 0);
    kr_ply_points ply;
    if (kr_ply_read(path, &ply) == KR_OK) {
        CHECK(ply.n > 1000 && ply.normals != NULL);
        kr_ply_points_free(&ply);
    } else {
        kr_test_fail(__FILE__, __LINE__, "no mesh: %s; output: %s", kr_last_error(), out);
    }

    snprintf(args, sizeof args, "mesh synthetic --duration 0.5 -o %s", path);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 2);
    CHECK_MSG(lines(out) == 1 && strstr(out, "--groundtruth"), "%s", out);
    CHECK_EQ(kr_test_run_tool(NULL, "mesh synthetic --groundtruth -o /nonexistent/m.ply", out,
                              sizeof out),
             2);
    CHECK_MSG(lines(out) == 1 && strstr(out, "/nonexistent"), "%s", out);

    snprintf(traj, sizeof traj, "%s/far.txt", kr_test_tmpdir());
    FILE *f = fopen(traj, "w");
    REQUIRE(f != NULL);
    fprintf(f, "1000.0 0 0 0 0 0 0 1\n1000.1 0 0 0 0 0 0 1\n");
    fclose(f);
    snprintf(path, sizeof path, "%s/none.ply", kr_test_tmpdir());
    snprintf(args, sizeof args, "mesh synthetic --duration 0.5 -t %s -q -o %s", traj, path);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 1);
    CHECK_MSG(strstr(out, "no frame of the source has a pose"), "%s", out);
    CHECK(access(path, F_OK) != 0);
}

/* The mesh topic's refreshes as a subscriber puts them together: the
 * vertices of the newest whole snapshot, its frame and its triangles. */
typedef struct {
    float *xyz;
    size_t n, cap;
    uint64_t snapshot, frame;
    uint32_t faces, chunks_got;
    bool started;
} mesh_refresh;

static bool refresh_add(mesh_refresh *r, const kr_mesh_msg *m)
{
    if (!r->started || m->snapshot != r->snapshot) {
        *r = (mesh_refresh){r->xyz, 0, r->cap, m->snapshot, m->frame, 0, 0, true};
    }
    if (r->n + m->vertices > r->cap) {
        size_t cap = 2 * (r->n + m->vertices);
        float *x = realloc(r->xyz, 3 * cap * sizeof *x);
        if (!x) return false;
        r->xyz = x;
        r->cap = cap;
    }
    for (uint32_t i = 0; i < m->vertices; i++, r->n++) {
        float n[3];
        uint8_t rgba[4];
        kr_wire_mesh_vertex(m, i, r->xyz + 3 * r->n, n, rgba);
    }
    r->faces += m->faces;
    return ++r->chunks_got == m->chunks;
}

/* kinreg run --mesh: the tracked frames' surface, in the tracker's world
 * (the first frame's camera), lies on the scene once moved by the first
 * true pose — within the tracking error, a few millimetres here — in the
 * file and in the `mesh` topic's refreshes, whose last (a second of the
 * scan is a few thousand blocks: under the refreshes' budget at the
 * surface's own voxel) is the file's mesh, the same frames and triangles,
 * and arrives before the run's last status. */
KR_TEST(surface, run_publishes_and_writes_the_tracked_surface)
{
    const char *tmp = kr_test_tmpdir();
    char out[8192], cmd[4096], path[512], endpoint[600];
    snprintf(path, sizeof path, "%s/run.ply", tmp);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/surface.ipc", tmp);
    kr_subscriber *sub = NULL;
    REQUIRE_OK(
        kr_subscriber_create(&sub, endpoint, (1u << KR_TOPIC_MESH) | (1u << KR_TOPIC_STATUS)));
    snprintf(cmd, sizeof cmd,
             "'%s' run synthetic --duration 1 -b cpu --mesh '%s' --mesh-voxel 0.01 "
             "--mesh-period 0.3 -q -p '%s' --wait-subscriber 60 > '%s/run.out' 2>&1; "
             "echo $? > '%s/run.rc' &",
             kr_test_tool(), path, endpoint, tmp, tmp);
    REQUIRE(kr_test_shell(cmd, out, sizeof out) == 0);
    mesh_refresh building = {0}, last = {0};
    int refreshes = 0;
    bool stopped = false;
    for (;;) {
        kr_message m;
        if (kr_subscriber_receive(sub, 120000, &m) != KR_OK) break;
        if (m.topic == KR_TOPIC_STATUS &&
            (m.status.event == KR_EVENT_STOPPED || m.status.event == KR_EVENT_ERROR)) {
            stopped = m.status.event == KR_EVENT_STOPPED;
            break;
        }
        if (m.topic != KR_TOPIC_MESH) continue;
        if (refresh_add(&building, &m.mesh)) {
            mesh_refresh t = last;
            last = building;
            building = t;
            building.started = false;
            refreshes++;
        }
    }
    kr_subscriber_destroy(&sub);
    snprintf(cmd, sizeof cmd,
             "for i in $(seq 600); do [ -s '%s/run.rc' ] && exit $(cat '%s/run.rc'); sleep 0.1; "
             "done; exit 99",
             tmp, tmp);
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "cat '%s/run.out'", tmp);
    kr_test_shell(cmd, out, sizeof out);
    CHECK(stopped);
    unsigned long vertices = 0, triangles = 0, frames = 0;
    const char *written = strstr(out, "mesh written to");
    CHECK_MSG(written && sscanf(strchr(written, '(') ? strchr(written, '(') : "",
                                "(%lu vertices, %lu triangles from %lu frames", &vertices,
                                &triangles, &frames) == 3,
              "%s", out);
    CHECK_MSG(refreshes >= 1, "no whole mesh arrived; output: %s", out);
    CHECK_EQ(last.frame, frames);
    CHECK_EQ(last.faces, triangles);

    kr_ply_points ply;
    if (kr_ply_read(path, &ply) != KR_OK) {
        kr_test_fail(__FILE__, __LINE__, "no mesh: %s; output: %s", kr_last_error(), out);
        free(building.xyz);
        free(last.xyz);
        return;
    }
    kr_ply_points sent = {.n = last.n, .xyz = last.xyz};
    to_scene(&ply);
    to_scene(&sent);
    kr_synth_scene scene;
    double fuse_s;
    size_t n_seen = 0;
    float *seen = seen_points(1.0, 0.0025f, NULL, &n_seen, &fuse_s, &scene);
    REQUIRE(seen != NULL);
    mesh_score r = score_vertices(&scene, ply.xyz, ply.n, seen, n_seen, 0.01f);
    print_score("kinreg run --mesh", &r, n_seen, 0.01f);
    CHECK(r.median < 0.004);
    CHECK(r.cover > 0.9); /* frames the surface thread skipped may leave a little unseen */
    mesh_score t = score_vertices(&scene, sent.xyz, sent.n, seen, n_seen, 0.01f);
    print_score("its last mesh refresh", &t, n_seen, 0.01f);
    CHECK(t.median < 0.004);
    CHECK(t.cover > 0.9);
    printf("    %d whole refreshes; the last after %lu frames, %u triangles\n", refreshes,
           (unsigned long)last.frame, last.faces);
    free(seen);
    free(building.xyz);
    free(last.xyz);
    kr_ply_points_free(&ply);
}

/* A coarser mesh of the same volume: a 5 mm sphere's voxels averaged 4³
 * mesh into a closed sphere again (every edge in two triangles, Euler
 * number 2, outward), with about a sixteenth of the triangles, its
 * vertices within a coarse voxel's linear-interpolation error of the
 * sphere, its volume short by no more than its flat facets explain. */
KR_TEST(surface, coarse_mesh_is_a_closed_sphere_still)
{
    const double c[3] = {0.013, -0.021, 0.007}, r = 0.1;
    kr_surface *s = sphere_volume(c, r, 0.005f, 0.04f);
    REQUIRE(s != NULL);
    kr_mesh fine = {0}, m = {0};
    REQUIRE_OK(kr_surface_extract(s, &fine));
    REQUIRE_OK(kr_surface_extract_coarse(s, 4, &m));
    CHECK_EQ(kr_surface_extract_coarse(s, 0, &m), KR_ERR_INVALID_ARG);
    kr_surface_destroy(&s);
    sphere_fit fit = fit_sphere(&m, c, r);
    printf("    %zu -> %zu triangles at 4x the voxel; worst radial error %.2f mm, worst normal "
           "cos %.4f, volume %.4f of the sphere's\n",
           fine.n_faces, m.n_faces, 1e3 * fit.worst, fit.worst_normal, fit.volume);
    CHECK(m.n_faces * 10 <= fine.n_faces);
    CHECK(fit.worst < 0.2 * 0.02); /* a fifth of the coarse voxel, as the fine mesh's bound */
    CHECK(fit.worst_normal > 0.98);
    /* Flat triangles whose corners are up to a face diagonal √2 h apart sag
     * up to h²/(4r) inside the sphere, and the corners themselves err by
     * fit.worst: the volume falls short by at most 3 (h²/(4r) + worst)/r. */
    const double h = 0.02;
    CHECK(fit.volume < 1 && 1 - fit.volume < 3 * (h * h / (4 * r) + fit.worst) / r);
    kr_mesh_free(&fine);
    kr_mesh_free(&m);
}

/* The memory cap: a volume capped at 1 MiB holds no more blocks than that
 * allows, counts the requests it turned away, and still meshes what it
 * holds. */
KR_TEST(surface, memory_cap_holds)
{
    kr_surface_config cfg;
    kr_surface_config_default(&cfg);
    cfg.voxel_size = 0.01f;
    cfg.memory_mib = 1.0;
    kr_surface *s = NULL;
    REQUIRE_OK(kr_surface_create(&s, &cfg));
    kr_synth_scene scene;
    double fuse_s;
    size_t n_seen = 0;
    float *seen = seen_points(0.2, 0.0025f, s, &n_seen, &fuse_s, &scene);
    kr_surface_stats st = kr_surface_stats_get(s);
    printf("    cap %zu blocks: %zu held, %llu requests turned away\n", st.max_blocks, st.blocks,
           (unsigned long long)st.refused);
    CHECK_EQ(st.max_blocks, (size_t)(1048576 / KR_SURFACE_BYTES_PER_BLOCK));
    CHECK(st.blocks <= st.max_blocks && st.blocks > 0);
    CHECK(st.refused > 0);
    kr_mesh m = {0};
    CHECK_OK(kr_surface_extract(s, &m));
    CHECK(m.n_faces > 0);
    kr_mesh_free(&m);
    kr_surface_destroy(&s);
    free(seen);
}

/* Ctrl-C stops kinreg mesh reading and still writes the mesh of the frames
 * fused so far (exit 0). The signal goes once a frame has been fused (the
 * progress line says so), however slow the machine. */
KR_TEST(surface, mesh_command_keeps_what_was_fused_on_ctrl_c)
{
    char cmd[4096], path[512], log[512], out[8192];
    snprintf(path, sizeof path, "%s/sigint.ply", kr_test_tmpdir());
    snprintf(log, sizeof log, "%s/sigint.log", kr_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "'%s' mesh synthetic --groundtruth --voxel 0.02 -o '%s' > '%s' 2>&1 & pid=$!; "
             "while ! grep -q 'fusing frame' '%s'; do kill -0 $pid 2>/dev/null || break; "
             "sleep 0.1; done; kill -INT $pid; wait $pid",
             kr_test_tool(), path, log, log);
    int rc = system(cmd);
    REQUIRE(WIFEXITED(rc));
    FILE *f = fopen(log, "r");
    REQUIRE(f != NULL);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    CHECK_MSG(WEXITSTATUS(rc) == 0, "exit %d: %s", WEXITSTATUS(rc), out);
    CHECK_MSG(strstr(out, "stopped by a signal"), "%s", out);
    kr_ply_points ply;
    if (kr_ply_read(path, &ply) == KR_OK) {
        CHECK(ply.n > 0);
        kr_ply_points_free(&ply);
    } else {
        kr_test_fail(__FILE__, __LINE__, "no mesh after Ctrl-C: %s; output: %s", kr_last_error(),
                     out);
    }
}
