/* MPI for kinreg refine (tools/mpi/refine_mpi.h): the sums' all-reduce and the
 * ranks' agreement on inputs and failures. */
#include "refine_mpi.h"

#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

bool kr_mpi_built(void)
{
    return true;
}

/* The header before every reduction of the refinement, and a failed rank's
 * conclusion: {ranks that failed, Σ (rank + 1) of them}. */
static void header_reduce(kr_mpi_session *m, bool failed, double head[2])
{
    head[0] = failed ? 1 : 0;
    head[1] = failed ? m->rank + 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, head, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (!failed && head[0] > 0) {
        m->peer_failed = true;
        m->failed_rank = head[0] == 1 ? (int)head[1] - 1 : -1;
    }
}

static kr_status peer_failure(const kr_mpi_session *m)
{
    if (m->failed_rank >= 0)
        return kr_error(KR_ERR_IO, "rank %d stops: rank %d failed (its message says why)", m->rank,
                        m->failed_rank);
    return kr_error(KR_ERR_IO, "rank %d stops: other ranks failed (their messages say why)",
                    m->rank);
}

static kr_status allreduce_sum(void *user, double *data, size_t n)
{
    kr_mpi_session *m = user;
    double head[2];
    header_reduce(m, false, head);
    if (m->peer_failed) return peer_failure(m);
    /* MPI counts are int: long payloads go in slices. */
    const size_t slice = (size_t)1 << 28;
    for (size_t at = 0; at < n; at += slice) {
        int count = (int)(n - at < slice ? n - at : slice);
        int rc = MPI_Allreduce(MPI_IN_PLACE, data + at, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return kr_error(KR_ERR_IO, "refine: MPI_Allreduce of %d doubles failed (code %d)",
                            count, rc);
    }
    return KR_OK;
}

kr_status kr_mpi_begin(kr_mpi_session *m, int *argc, char ***argv)
{
    *m = (kr_mpi_session){.ranks = 1, .local_ranks = 1};
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS)
        return kr_error(KR_ERR_IO, "MPI_Init failed: start kinreg refine with mpirun");
    m->active = !inited;
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->ranks);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &m->local_rank);
    MPI_Comm_size(local, &m->local_ranks);
    MPI_Comm_free(&local);
    m->failed_rank = -1;
    m->partition = (kr_refine_partition){
        .rank = m->rank, .ranks = m->ranks, .allreduce_sum = allreduce_sum, .user = m};
    return KR_OK;
}

kr_status kr_mpi_agree(const kr_mpi_session *m, kr_status local)
{
    /* The lowest failing rank: each rank offers its number when it failed. */
    int mine = local == KR_OK ? m->ranks : m->rank, first = m->ranks;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (local != KR_OK) return local;
    if (first < m->ranks)
        return kr_error(KR_ERR_IO, "rank %d stops: rank %d failed (its message says why)", m->rank,
                        first);
    return KR_OK;
}

bool kr_mpi_same(const kr_mpi_session *m, double value)
{
    (void)m;
    double lo = value, hi = value;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

kr_status kr_mpi_conclude(kr_mpi_session *m, kr_status local)
{
    /* Learnt inside the refinement: the failed rank has concluded already. */
    if (m->peer_failed) return local != KR_OK ? local : peer_failure(m);
    double head[2];
    header_reduce(m, local != KR_OK, head);
    if (local != KR_OK) return local;
    return m->peer_failed ? peer_failure(m) : KR_OK;
}

void kr_mpi_end(kr_mpi_session *m)
{
    if (m->active) MPI_Finalize();
    m->active = false;
}

void kr_mpi_say_binding(const kr_mpi_session *m)
{
    cpu_set_t set;
    if (m->rank != 0 || m->ranks < 2 || sched_getaffinity(0, sizeof set, &set) != 0) return;
    long online = sysconf(_SC_NPROCESSORS_ONLN), share = online / m->local_ranks;
    if (CPU_COUNT(&set) == 1 && share >= 2)
        fprintf(stderr,
                "kinreg refine: mpirun bound rank 0 to 1 of this host's %ld cores, so its "
                "reading, normals and measure run on one thread; start it with mpirun "
                "--bind-to none (or --map-by slot:PE=%ld)\n",
                online, share);
}
