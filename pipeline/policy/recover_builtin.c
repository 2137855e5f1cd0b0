/* The built-in answer to a recovery request (kinreg/pipeline.h,
 * kr_recover_fn): the recovery search of pipeline/recover.h, with the
 * pipeline's cache of the model's points and of a near miss to wait on
 * across the attempts of one loss. */
#include <string.h>

#include "kinreg/pipeline.h"
#include "pipeline/recover/recover.h"

kr_status kr_pipeline_recover_builtin(const kr_recover_request *req, kr_recover_answer *out)
{
    if (!req || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_pipeline_recover_builtin: NULL argument");
    kr_recovery rec;
    kr_status s = kr_recover_frame(req->device, req->model, req->pyramid, &req->predicted,
                                   &req->last_good, req->recover, req->track, &req->recent,
                                   (kr_recover_cache *)req->builtin, &rec);
    if (s != KR_OK) return s;
    memset(out, 0, sizeof *out);
    out->success = rec.success;
    out->track = rec.track;
    out->method = rec.method;
    return KR_OK;
}
