/* The one rule for a corrupt frame of a file source (TUM, fakenect dump):
 * kept apart from source.c, which dispatches to those sources, so that they
 * do not call back into their dispatcher. */
#include "capture/source_impl.h"

bool kr_source_skip_corrupt(kr_source *src, kr_status st)
{
    bool corrupt = st == KR_ERR_IO || st == KR_ERR_FORMAT || st == KR_ERR_SIZE;
    if (!src->skip_bad || !corrupt) return false;
    src->skipped++;
    kr_log(KR_LOG_WARN, "skipping frame (%u skipped so far): %s", src->skipped, kr_last_error());
    return true;
}
