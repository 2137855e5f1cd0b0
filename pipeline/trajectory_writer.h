/* The trajectory file written while tracking: one TUM line per pose, each
 * written whole with write(2) as it is computed (a killed process still leaves
 * every pose so far), and every write checked. A full disk, a file-size limit
 * or an I/O error stops the writing at the first failure: the file is cut
 * back to its last whole line (so `kinreg eval` still reads it) and the cause
 * is kept for the caller to report; tracking and publishing go on. A named
 * pipe must have a reader when it is opened, and a reader that takes nothing
 * for a second ends the writing the same way (the tracker never waits on
 * it longer); a reader that closes it makes write(2) raise SIGPIPE, which the
 * program must ignore (kinreg run does) to get the error instead. */
#ifndef KINREG_PIPELINE_TRAJECTORY_WRITER_H
#define KINREG_PIPELINE_TRAJECTORY_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "kinreg/pose.h"
#include "kinreg/status.h"

typedef struct {
    int fd; /* -1 when closed */
    const char *path;
    long long good;  /* bytes of whole lines in the file */
    uint64_t poses;  /* poses in the file */
    bool failed;     /* a write failed: nothing more is written */
    char error[600]; /* "cannot write the trajectory to PATH: CAUSE" once failed */
} kr_trajectory_writer;

/* Creates (truncates) `path` and writes the header line. A file that cannot
 * be created is an error (KR_ERR_IO, nothing opened); a header that cannot be
 * written leaves the writer failed, for the run to report. */
kr_status kr_trajectory_writer_open(kr_trajectory_writer *w, const char *path);
/* Appends one pose line; false when the writer has failed (now or before). */
bool kr_trajectory_writer_append(kr_trajectory_writer *w, double stamp, const kr_pose *pose);
/* Closes the file, checking the close too (NFS reports late errors there);
 * false when the writer has failed. Safe on a closed writer. */
bool kr_trajectory_writer_close(kr_trajectory_writer *w);

#endif
