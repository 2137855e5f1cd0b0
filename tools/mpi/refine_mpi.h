/* kinreg refine across processes: MPI in tools/mpi/refine_mpi.c (builds with
 * MPI) and its stand-in tools/mpi/refine_nompi.c (builds without), the only files
 * that know MPI. Every rank reads the inputs itself (each needs every view's
 * field; a shared file system serves them faster than rank 0 could send the
 * points), takes its share of the grid points, and the sums are added with
 * MPI_Allreduce; rank 0 alone prints and writes the outputs. */
#ifndef KINREG_TOOLS_MPI_REFINE_MPI_H
#define KINREG_TOOLS_MPI_REFINE_MPI_H

#include <stdbool.h>

#include "kinreg/refine.h"

typedef struct {
    int rank, ranks;
    int local_rank, local_ranks; /* among the ranks of this host (rank → GPU) */
    bool active;                 /* MPI was started and must be finalised */
    kr_refine_partition partition;
    /* A reduction inside the refinement learnt that a rank gave up
     * (kr_mpi_conclude): which one (its rank, or −1 for several). */
    bool peer_failed;
    int failed_rank;
} kr_mpi_session;

/* True when an MPI launcher (mpirun, srun) started this process with more
 * than one rank. */
bool kr_mpi_launched(void);
/* True when this build has MPI. */
bool kr_mpi_built(void);
/* Starts MPI (one rank alone when not launched by mpirun). Builds without
 * MPI answer KR_ERR_UNSUPPORTED saying how to get the distributed build. */
kr_status kr_mpi_begin(kr_mpi_session *m, int *argc, char ***argv);
/* Every rank's status: KR_OK when all are; otherwise this rank's own error,
 * or when it is well, an error naming the first rank that failed. */
kr_status kr_mpi_agree(const kr_mpi_session *m, kr_status local);
/* True when `value` is the same on every rank. */
bool kr_mpi_same(const kr_mpi_session *m, double value);
/* After kr_refine: every rank's outcome, as kr_mpi_agree, also when a rank
 * failed inside the refinement while the others waited in a reduction. Each
 * of the refinement's reductions starts with a two-number header that a
 * failed rank's conclusion matches: the ranks still in the refinement learn
 * of the failure there, return, and do not conclude again; the ranks that
 * finished learn of it here. No rank is left waiting, and none is killed. */
kr_status kr_mpi_conclude(kr_mpi_session *m, kr_status local);
void kr_mpi_end(kr_mpi_session *m);
/* Says so when mpirun bound rank 0 to one core of a host with cores to
 * spare: Open MPI binds each of two ranks to a core by default, and then
 * the OpenMP parts (reading, normals, the fit) run on one thread each. On
 * two H200s that made room:200 take 34 s instead of 4. */
void kr_mpi_say_binding(const kr_mpi_session *m);

#endif
