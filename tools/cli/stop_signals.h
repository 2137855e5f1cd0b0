/* Ctrl-C and SIGTERM for the commands that run a pipeline (run, demo).
 *
 * SIGINT and SIGTERM are blocked before anything else starts, so every thread
 * created later (the pipeline's, ZeroMQ's, OpenMP's, libfreenect's) inherits
 * the block and one thread takes them with sigwait(). A signal is then never
 * lost or fatal, whenever it comes: during start-up it is remembered and the
 * pipeline stops as soon as it exists (after a start-up that cannot be cut
 * short, such as opening a sensor); while running it stops the pipeline like
 * a clean end, so every pose computed is written and published. SIGXFSZ is
 * ignored so that a file-size limit (ulimit -f) is a write error that kinreg
 * reports, not a silent kill. */
#ifndef KINREG_TOOLS_CLI_STOP_SIGNALS_H
#define KINREG_TOOLS_CLI_STOP_SIGNALS_H

#include <stdbool.h>

#include "kinreg/pipeline.h"

/* Blocks SIGINT and SIGTERM in the calling thread only, the first thing main
 * does for run and demo: the block survives the program's re-execution
 * (kr_openmp_prefer_passive), and a signal that arrives before the waiting
 * thread exists stays pending until it takes it. */
void kr_stop_signals_block(void);
/* Blocks the signals and starts the waiting thread; idempotent. False (with a
 * message printed) when the thread cannot start: signals then keep their
 * default action. */
bool kr_stop_signals_start(void);
/* The pipeline a signal stops from now on (NULL: none). Attaching stops it at
 * once when a signal has already arrived. Detach before destroying it. */
void kr_stop_signals_attach(kr_pipeline *p);
/* Whether SIGINT or SIGTERM has arrived. */
bool kr_stop_signals_caught(void);

#endif
