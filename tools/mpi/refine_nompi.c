/* kinreg refine in a build without MPI (tools/mpi/refine_mpi.h): one process,
 * and a clear answer when a launcher asks for more. */
#include <stdio.h>
#include <stdlib.h>

#include "refine_mpi.h"

bool kr_mpi_built(void)
{
    return false;
}

kr_status kr_mpi_begin(kr_mpi_session *m, int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    *m = (kr_mpi_session){.ranks = 1, .local_ranks = 1};
    return kr_error(KR_ERR_UNSUPPORTED,
                    "this kinreg was built without MPI, so it refines in one process; for "
                    "mpirun -np N kinreg refine install Open MPI (apt-get install "
                    "libopenmpi-dev, or scripts/setup.sh) and rebuild: cmake finds it");
}

kr_status kr_mpi_agree(const kr_mpi_session *m, kr_status local)
{
    (void)m;
    return local;
}

bool kr_mpi_same(const kr_mpi_session *m, double value)
{
    (void)m;
    (void)value;
    return true;
}

kr_status kr_mpi_conclude(kr_mpi_session *m, kr_status local)
{
    (void)m;
    return local;
}

void kr_mpi_end(kr_mpi_session *m)
{
    m->active = false;
}

void kr_mpi_say_binding(const kr_mpi_session *m)
{
    (void)m;
}
