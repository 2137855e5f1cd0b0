/* Sharing the refinement's grid points and sums (pipeline/refine/refine_partition.h). */
#include "pipeline/refine/refine_partition.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(kr_refine_acc) == 30 * sizeof(double), "kr_refine_acc travels as 30 doubles");

void kr_refine_keep_share(kr_dfield *fields, int views, int part, int parts)
{
    for (int k = 0; k < views; k++) {
        kr_dfield *f = &fields[k];
        size_t lo, hi;
        kr_refine_share(f->n_grid, part, parts, &lo, &hi);
        if (lo > 0) {
            memmove(f->grid, f->grid + 3 * lo, sizeof *f->grid * 3 * (hi - lo));
            memmove(f->grid_val, f->grid_val + lo, sizeof *f->grid_val * (hi - lo));
        }
        f->n_grid = hi - lo;
    }
}

/* One all-reduce of `n` doubles plus a flag: this part's status code negated
 * (0 when well). *flags receives the flags' sum over all parts. */
static kr_status reduce_flagged(const kr_refine_partition *p, double *data, size_t n,
                                kr_status local, double *bytes, double *flags)
{
    double *buf = malloc(sizeof *buf * (n + 1));
    if (!buf && local == KR_OK) local = KR_ERR_NOMEM;
    /* Without memory this part still joins the reduction, with its flag set
     * and nothing else, so no part waits for it. */
    double flag_only = -(double)local;
    double *send = buf ? buf : &flag_only;
    size_t count = buf ? n + 1 : 1;
    if (buf) {
        memcpy(buf, data, sizeof *buf * n);
        buf[n] = -(double)local;
    }
    kr_status s = p->allreduce_sum(p->user, send, count);
    *bytes += (double)(sizeof(double) * count);
    if (s == KR_OK && buf) memcpy(data, buf, sizeof *buf * n);
    *flags = send[count - 1];
    free(buf);
    if (s != KR_OK) return s;
    if (!buf) return kr_error(KR_ERR_NOMEM, "refine: no memory to reduce %zu sums", n);
    return KR_OK;
}

kr_status kr_refine_reduce_sums(const kr_refine_partition *p, kr_refine_acc *sums, int n,
                                kr_status local, double *bytes)
{
    double flags = 0;
    kr_status s = reduce_flagged(p, (double *)sums, 30 * (size_t)n, local, bytes, &flags);
    if (local != KR_OK) return local;
    if (s != KR_OK) return s;
    if (flags != 0)
        return kr_error(KR_ERR_IO,
                        "refine: another rank failed while evaluating (see its message); "
                        "rank %d stops too",
                        p->rank);
    return KR_OK;
}

kr_status kr_refine_broadcast_step(const kr_refine_partition *p, double *x, int n, kr_status local,
                                   double *bytes)
{
    if (p->rank != 0) {
        memset(x, 0, sizeof *x * (size_t)n);
        local = KR_OK;
    }
    double flags = 0;
    kr_status s = reduce_flagged(p, x, (size_t)n, local, bytes, &flags);
    if (p->rank == 0) return local != KR_OK ? local : s;
    if (s != KR_OK) return s;
    /* Rank 0's solve status: KR_ERR_NUMERIC (LM damps more) or a failure all share. */
    kr_status root = (kr_status)(-(int)flags);
    if (root != KR_OK && root != KR_ERR_NUMERIC)
        return kr_error(root,
                        "refine: rank 0 failed to solve the normal equations (see its "
                        "message); rank %d stops too",
                        p->rank);
    return root;
}
