/* The read-write loop shared by `kinreg record` (a live sensor to disk) and
 * `kinreg convert` (one recording format to the other). */
#ifndef KINREG_TOOLS_RECORD_LOOP_H
#define KINREG_TOOLS_RECORD_LOOP_H

#include <stdbool.h>

#include "kinreg/recorder.h"
#include "kinreg/source.h"

typedef struct {
    const char *who; /* message prefix, e.g. "kinreg record" */
    const char *dir; /* output directory */
    kr_recorder_config recorder;
    bool quiet; /* no status line */
} kr_record_job;

/* Creates the recording, writes the source's intrinsics and ground truth
 * (when it has any) and then every frame of `src` until its end, an error, or
 * SIGINT/SIGTERM, which stop cleanly with every frame read so far written.
 * Shows a status line on a terminal, prints errors and the summary line
 * "WHO: N frames written to DIR (FORMAT)", and returns the exit code
 * (kr_exit_code: 0 also after a signal, 3 when a sensor stalled). */
int kr_record_source(kr_source *src, const kr_record_job *job);

#endif
