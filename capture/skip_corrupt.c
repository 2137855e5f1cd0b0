/* The one rule for a corrupt frame of a file source (TUM, fakenect dump):
 * kept apart from source.c, which dispatches to those sources, so that they
 * do not call back into their dispatcher. */
#include "capture/source_impl.h"

bool kr_source_skip_corrupt(kr_source *src, kr_status st)
{
    bool corrupt = st == KR_ERR_IO || st == KR_ERR_FORMAT || st == KR_ERR_SIZE;
    if (!src->skip_bad || !corrupt) return false;
    src->skipped++;
    /* The first few are shown in full, so the reason is seen; after that
     * one line per frame would bury the output of a damaged sequence: they
     * go to the debug log, and programs print the count at the end. */
    enum { SHOWN = 3 };
    if (src->skipped < SHOWN)
        kr_log(KR_LOG_WARN, "skipping frame (%u skipped so far): %s", src->skipped,
               kr_last_error());
    else if (src->skipped == SHOWN)
        kr_log(KR_LOG_WARN,
               "skipping frame (%u skipped so far): %s; further skipped frames are only counted "
               "(the total is in the summary)",
               src->skipped, kr_last_error());
    else
        kr_log(KR_LOG_DEBUG, "skipping frame (%u skipped so far): %s", src->skipped,
               kr_last_error());
    return true;
}
