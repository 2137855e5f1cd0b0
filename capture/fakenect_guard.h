/* libfreenect's fakenect reads one INDEX.txt line per
 * freenect_process_events() call and opens the file it names; when that file
 * has gone (deleted or moved mid-replay) it calls exit(1), ending the program
 * with no summary, no final status and no model. kinreg checks the replay
 * once at start (kr_freenect_check_replay); this guard checks, before every
 * call, the one file that call will open, so a vanished file becomes an error
 * that the run reports and survives (flush, final status, model).
 *
 * What fakenect does per call (libfreenect 0.5): line k of N opens file k
 * (and INDEX.txt itself on the first call); the call after line N opens
 * nothing and ends the replay (returns < 0), or with FAKENECT_LOOP (the
 * default) rewinds, so the next call reopens INDEX.txt and line 1. The check
 * and fakenect's own open are microseconds apart; a file removed in between
 * can still end the program, which no check outside fakenect can close. */
#ifndef KINREG_CAPTURE_FAKENECT_GUARD_H
#define KINREG_CAPTURE_FAKENECT_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include "kinreg/status.h"

typedef struct {
    char dir[4096];
    char **names; /* INDEX.txt lines, in order */
    size_t count, next;
    bool loop; /* FAKENECT_LOOP as fakenect reads it */
} kr_fakenect_guard;

/* Reads DIR/INDEX.txt as fakenect will; `loop_env` is FAKENECT_LOOP (or NULL). */
kr_status kr_fakenect_guard_open(kr_fakenect_guard *g, const char *dir, const char *loop_env);
/* Before a freenect_process_events() call: KR_OK when what it will open is
 * a readable regular file, else KR_ERR_IO naming the file and its line. */
kr_status kr_fakenect_guard_check(const kr_fakenect_guard *g);
/* After a call that returned >= 0: fakenect has moved to the next line. */
void kr_fakenect_guard_advance(kr_fakenect_guard *g);
void kr_fakenect_guard_free(kr_fakenect_guard *g);

#endif
