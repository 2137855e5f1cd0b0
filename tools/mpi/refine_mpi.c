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

static kr_status allreduce_sum(void *user, double *data, size_t n)
{
    (void)user;
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
    m->partition = (kr_refine_partition){
        .rank = m->rank, .ranks = m->ranks, .allreduce_sum = allreduce_sum, .user = NULL};
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

void kr_mpi_abort(const kr_mpi_session *m, int code)
{
    (void)m;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
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
