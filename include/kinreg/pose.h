/* kinreg — rigid poses and the small linear algebra every module shares.
 *
 * A pose is T_world_camera (camera-to-world) as in TUM files: a world point is
 * p_w = R p_c + t. Rotation matrices are row-major. Twists are x = (θ, t):
 * rotation vector first, translation second, matching Q(q) = [−[q]× | I]. */
#ifndef KINREG_POSE_H
#define KINREG_POSE_H

#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double R[9]; /* row-major rotation */
    double t[3]; /* translation, metres */
} kr_pose;

/* Unit quaternion in TUM order (x, y, z, w). */
typedef struct {
    double x, y, z, w;
} kr_quat;

KR_API kr_pose kr_pose_identity(void);
/* a·b: apply b first, then a. */
KR_API kr_pose kr_pose_mul(const kr_pose *a, const kr_pose *b);
KR_API kr_pose kr_pose_inv(const kr_pose *a);
KR_API void kr_pose_apply(const kr_pose *a, const double p[3], double out[3]);
KR_API void kr_pose_rotate(const kr_pose *a, const double v[3], double out[3]);

KR_API kr_pose kr_pose_from_quat(kr_quat q, const double t[3]);
/* Returns the quaternion with w >= 0. */
KR_API kr_quat kr_pose_to_quat(const kr_pose *a);
KR_API kr_quat kr_quat_normalize(kr_quat q);

/* SE(3) exponential and logarithm of twist x = (θ, t) (6 values). */
KR_API kr_pose kr_pose_exp(const double x[6]);
KR_API void kr_pose_log(const kr_pose *a, double x[6]);
/* The pose a fraction u of the way from a to b along the screw motion
 * between them: a · exp(u · log(a⁻¹ b)) (u = 0: a, u = 1: b). */
KR_API kr_pose kr_pose_interpolate(const kr_pose *a, const kr_pose *b, double u);

/* Rotation angle of a (radians) and translation norm (metres). */
KR_API double kr_pose_angle(const kr_pose *a);
KR_API double kr_pose_translation_norm(const kr_pose *a);

/* Re-orthonormalises R (accumulated products drift). */
KR_API void kr_pose_orthonormalize(kr_pose *a);

/* Solves the symmetric positive definite n×n system A x = b (n <= 8) by
 * Cholesky. Returns KR_ERR_NUMERIC when A is not positive definite. */
KR_API kr_status kr_solve_spd(int n, const double *A, const double *b, double *x);

/* Eigenvalues (ascending) and, if V is not NULL, eigenvectors as columns of V
 * (row-major n×n) of the symmetric n×n matrix A (n <= 8), by Jacobi sweeps. */
KR_API void kr_eigen_sym(int n, const double *A, double *eigenvalues, double *V);

#ifdef __cplusplus
}
#endif
#endif
