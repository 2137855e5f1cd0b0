/* kr_mpi_launched (tools/mpi/refine_mpi.h), for builds with and without MPI: a
 * launcher announces the job's size in the environment before MPI starts. */
#include <stdlib.h>

#include "refine_mpi.h"

bool kr_mpi_launched(void)
{
    /* Open MPI, MPICH/Hydra and Slurm's PMI, PMIx. */
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v && atoi(v) > 1) return true;
    }
    return false;
}
